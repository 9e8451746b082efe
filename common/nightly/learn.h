#pragma once

// The nightly policy learned from a checkout's own maintenance history (docs/nightly.md,
// "Learned from the checkout"): each knob from the most recent changes engineers landed that
// speak to it, each with the changes it came from. Pure: the caller reads the history (git, or
// a file of rounds) and parses the entries.

#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/inventory/document.h"
#include "common/nightly/policy.h"

namespace triage::nightly {

// One entry a round changed.
struct EntryChange {
  std::string key;
  const inventory::Entry* before = nullptr;  // nullptr: the round added it
  const inventory::Entry* after = nullptr;   // nullptr: the round removed it
  // The entry's lines after the round as written, comments included ("" when removed).
  std::string after_text;
};

// One round: a commit that changed test-config entries.
struct Round {
  std::string commit;  // a short sha
  std::string date;    // YYYY-MM-DD
  std::vector<EntryChange> changes;
};

// A change that spoke to a knob: the value it shows, and where it is.
struct Evidence {
  std::string value;
  std::string commit;
  std::string date;
  std::string key;
};

struct Learned {
  Policy policy;
  // By knob: the evidence that decided it, newest first (knobs the history is silent on: none).
  std::map<std::string, std::vector<Evidence>> evidence;
};

// What took the job down, by what a skip's reason (as a person wrote it) says: "hang", "oom_kill"
// (host memory; the device allocator's "Not enough space to allocate" is not one) or "crash"
// (anything else).
std::string_view SkipCause(std::string_view reason);

// How many of the newest rounds that speak to a knob decide it: each round votes once (the value
// most of its changes show), the majority of the rounds wins, a tie goes to the newest.
inline constexpr std::size_t kLearnWindow = 5;

// rounds: oldest first. Knobs no round speaks to keep base's value and source.
Learned LearnPolicy(std::span<const Round> rounds, const Policy& base = {});

// A learned knob's source line: "learned from 5 changes, newest 3f2a1b0 2026-03-04 <key>".
std::string LearnedSource(const std::vector<Evidence>& evidence);
// Whether a knob's source is one LearnedSource wrote.
bool IsLearnedSource(std::string_view source);

}  // namespace triage::nightly
