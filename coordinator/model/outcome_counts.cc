#include "coordinator/model/outcome_counts.h"

namespace triage::coord {

std::string OutcomeLabel(const v1::EntryOutcome& o) {
  if (!o.changed()) return "unchanged";
  std::string status;
  bool pcc_off = false;
  bool reason = false;
  for (const auto& f : o.edit().set()) {
    if (f.name() == "status" && f.value().has_string_value()) status = f.value().string_value();
    if (f.name() == "assert_pcc" && f.value().has_bool_value()) pcc_off = !f.value().bool_value();
    if (f.name() == "reason") reason = true;
  }
  if (status.empty()) return reason ? "reason updated" : "changed";
  if (status == "EXPECTED_PASSING" && pcc_off) return "EXPECTED_PASSING (assert_pcc false)";
  return status;
}

v1::EntryCounts CountEntries(const std::vector<EntryTally>& entries) {
  v1::EntryCounts c;
  c.set_total(static_cast<int>(entries.size()));
  for (const auto& e : entries) {
    switch (e.phase) {
      case EntryTally::Phase::kQueued:
        c.set_queued(c.queued() + 1);
        break;
      case EntryTally::Phase::kRunning:
        c.set_running(c.running() + 1);
        break;
      case EntryTally::Phase::kDone:
        c.set_done(c.done() + 1);
        (*c.mutable_by_outcome())[e.label.empty() ? "no_result" : e.label] += 1;
        if (!e.label.empty()) c.set_decided(c.decided() + 1);
        if (e.label == "conflict") c.set_conflicts(c.conflicts() + 1);
        if (e.rechecking) c.set_rechecking(c.rechecking() + 1);
        break;
    }
    if (e.review) c.set_review(c.review() + 1);
  }
  return c;
}

}  // namespace triage::coord
