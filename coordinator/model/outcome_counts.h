#pragma once

// How the entries of a sweep are counted, in one place: `sweep get`, every `sweep watch` line,
// report.md / report.json totals and the demo summary all come from CountEntries, so they agree
// on every number and "review" means one thing (docs/report.md, "Counting").

#include <map>
#include <string>
#include <vector>

#include "triage/v1/control.pb.h"
#include "triage/v1/types.pb.h"

namespace triage::coord {

// The label an entry's decision is counted under: the status its YAML edit sets
// ("EXPECTED_PASSING", "EXPECTED_PASSING (assert_pcc false)", "KNOWN_FAILURE_XFAIL", ...),
// "reason updated" (an edit that keeps the status), or "unchanged".
std::string OutcomeLabel(const v1::EntryOutcome& o);

// The decision that labels an entry decided on several archs: the first of `archs` (the
// sweep's target archs, in order) that has one, else the first by arch name. nullptr when none.
template <typename V>
const V* ForFirstArch(const std::map<std::string, V>& by_arch,
                      const std::vector<std::string>& archs) {
  for (const auto& a : archs) {
    auto it = by_arch.find(a);
    if (it != by_arch.end()) return &it->second;
  }
  return by_arch.empty() ? nullptr : &by_arch.begin()->second;
}

struct EntryTally {
  enum class Phase { kQueued, kRunning, kDone };
  Phase phase = Phase::kQueued;
  // For done entries: the OutcomeLabel, "conflict" (the merge could not place it), or "" when
  // it ended without a result (cancelled, failed), counted as "no_result".
  std::string label;
  bool review = false;  // at least one human-review flag
  // Done once and reopened by a later registry wave: counted done under its latest decision.
  bool rechecking = false;
};

// total, queued, running, done, decided (done with a decision: every label but no_result),
// by_outcome (done entries by label), review (entries with a review flag, whatever their label)
// and conflicts.
v1::EntryCounts CountEntries(const std::vector<EntryTally>& entries);

}  // namespace triage::coord
