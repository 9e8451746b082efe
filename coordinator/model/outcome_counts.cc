#include "coordinator/model/outcome_counts.h"

namespace triage::coord {

std::string NightlyKind(const v1::EntryOutcome& o) {
  const std::string& v = o.verdict();
  if (v == "flaky") return "flaky";
  if (v == "unconfirmed") return "unconfirmed";
  if (v == "already") return "already";
  if (v == "capacity") return "flagged";
  if (!o.changed()) return "";
  if (v == "promote") return "promoted";
  if (v == "demote_xfail") return "demoted";
  if (v == "demote_skip") return "skipped";
  if (v == "unskip_xfail") return "unskipped";
  if (v == "refresh_skip") return "skips_refreshed";
  if (v == "refresh_reason") return "reasons";
  if (v == "add_config") return "new_entries";
  if (v == "enable_pcc" || v == "raise_pcc" || v == "lower_pcc" || v == "disable_pcc") {
    return "thresholds";
  }
  return "";
}

int NightlyKindRank(std::string_view kind) {
  for (std::size_t i = 0; i < std::size(kNightlyKinds); ++i) {
    if (kNightlyKinds[i] == kind) return static_cast<int>(i);
  }
  return -1;
}

bool IsChangeKind(std::string_view kind) {
  const int rank = NightlyKindRank(kind);
  return rank >= 0 && rank < NightlyKindRank("flaky");
}

const std::string* DecidingLabel(const std::map<std::string, std::string>& by_arch,
                                 const std::vector<std::string>& archs) {
  const std::string* best = nullptr;
  for (const auto& [arch, label] : by_arch) {
    const int rank = NightlyKindRank(label);
    if (rank >= 0 && (best == nullptr || rank < NightlyKindRank(*best))) best = &label;
  }
  return best != nullptr ? best : ForFirstArch(by_arch, archs);
}

std::string OutcomeLabel(const v1::EntryOutcome& o) {
  if (o.has_nightly()) {
    std::string kind = NightlyKind(o);
    return kind.empty() ? "unchanged" : kind;
  }
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

bool CountsAsDecided(const EntryTally& e) {
  return e.phase == EntryTally::Phase::kDone && !e.label.empty() && e.label != "unconfirmed";
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
        if (CountsAsDecided(e)) c.set_decided(c.decided() + 1);
        if (e.label == "conflict") c.set_conflicts(c.conflicts() + 1);
        if (e.rechecking) c.set_rechecking(c.rechecking() + 1);
        break;
    }
    if (e.review) c.set_review(c.review() + 1);
  }
  return c;
}

}  // namespace triage::coord
