#pragma once

// How the entries of a sweep are counted, in one place: `sweep get`, every `sweep watch` line,
// report.md / report.json totals and the demo summary all come from CountEntries, so they agree
// on every number and "review" means one thing (docs/report.md, "Counting").

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "triage/v1/control.pb.h"
#include "triage/v1/types.pb.h"

namespace triage::coord {

// The label an entry's decision is counted under: the status its YAML edit sets
// ("EXPECTED_PASSING", "EXPECTED_PASSING (assert_pcc false)", "KNOWN_FAILURE_XFAIL", ...),
// "reason updated" (an edit that keeps the status), or "unchanged". A nightly or recheck
// outcome is counted under its kind (NightlyKind), "unchanged" when it has none.
std::string OutcomeLabel(const v1::EntryOutcome& o);

// The kinds of a nightly (or recheck) sweep's outcomes, in the order the report, the pull
// request and every count list them: the changes first, then what is only reported.
inline constexpr std::string_view kNightlyKinds[] = {
    "promoted", "demoted",     "skipped", "unskipped",   "skips_refreshed", "thresholds",
    "reasons",  "new_entries", "flaky",   "unconfirmed", "already",         "flagged"};
// The kind of one arch's nightly outcome (docs/report.md, "Counting"): the section it is listed
// in; "" when it says nothing (a change the fleet did not support, say).
std::string NightlyKind(const v1::EntryOutcome& o);
// The rank of a kind in kNightlyKinds; -1 when it is not one.
int NightlyKindRank(std::string_view kind);
// A kind whose entries have a change in the patch.
bool IsChangeKind(std::string_view kind);

// The label of an entry decided on several archs, given each arch's OutcomeLabel: a nightly
// entry takes the first kind, in kNightlyKinds' order, that one of its archs has (an entry
// promoted on n150 and already at target on p150 is promoted; one promoted on n150 and skipped
// on p150 is promoted, its line saying both); any other entry ForFirstArch's label. nullptr when
// it has none.
const std::string* DecidingLabel(const std::map<std::string, std::string>& by_arch,
                                 const std::vector<std::string>& archs);

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
  // For the metric (triage_entry_outcomes_total): the entry's playbook and failure stage.
  std::string playbook;
  std::string stage;
};

// Whether CountEntries counts the entry as decided (done, with a label other than
// "unconfirmed"): the entries triage_entry_outcomes_total counts.
bool CountsAsDecided(const EntryTally& e);

// total, queued, running, done, decided (done with a decision: every label but no_result and
// unconfirmed, a candidate the device-time budget left),
// by_outcome (done entries by label), review (entries with a review flag, whatever their label)
// and conflicts.
v1::EntryCounts CountEntries(const std::vector<EntryTally>& entries);

}  // namespace triage::coord
