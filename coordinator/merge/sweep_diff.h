#pragma once

// Week over week (docs/report.md, "Comparing two sweeps"): what changed between two sweeps of one
// repository, read from their report.json documents alone. A pure function: `triagectl sweep diff`
// and the report's "week_over_week" section both call it.

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace triage::merge {

// What an entry is on one arch in one sweep, as its report.json tells it.
struct ArchState {
  // The status after the patch (EXPECTED_PASSING, KNOWN_FAILURE_XFAIL, NOT_SUPPORTED_SKIP, ...),
  // or "unchanged": the patch left the entry at its failing YAML status.
  std::string status;
  std::string reason;  // "" when none is known
  // The reason's junit::ReasonSignature ("(no reason)" for an outcome without one); nullopt when
  // the reason is not known (an unchanged entry whose arch has no verdict with a reason).
  std::optional<std::string> signature;
  bool passing = false;  // status EXPECTED_PASSING; anything else fails
};

// How to read entry's state on arch (one element of report.json's "entries"); nullopt when the
// entry has no outcome slot for arch (not a target arch of it in that sweep):
//  - arch_outcomes[arch] is an object: its status and reason;
//  - arch_outcomes[arch] is null (the patch leaves the entry as it was): status "unchanged",
//    failing; the reason is what the arch's verdict says (verdicts[arch].reason) when it says
//    something, else unknown.
std::optional<ArchState> ReadArchState(const nlohmann::json& entry, const std::string& arch);

enum class DiffCategory {
  kFixed,                // failing before, passing now
  kRegressed,            // passing before, failing now
  kNewFailure,           // not in the older sweep (for this arch), failing now
  kStillFailingChanged,  // failing in both, the reason's signature differs
  kStillFailing,         // failing in both, same signature (or one of them unknown)
  kStillPassing,         // passing in both
  kNewPassing,           // not in the older sweep (for this arch), passing now
  kCarried,              // the newer sweep carried the entry from an earlier one (carried_from)
  kGone,                 // in the older sweep, not in the newer one (no longer selected)
};

// In the order above: the order of every listing.
inline constexpr std::array<DiffCategory, 9> kDiffCategories = {
    DiffCategory::kFixed,        DiffCategory::kRegressed,
    DiffCategory::kNewFailure,   DiffCategory::kStillFailingChanged,
    DiffCategory::kStillFailing, DiffCategory::kStillPassing,
    DiffCategory::kNewPassing,   DiffCategory::kCarried,
    DiffCategory::kGone};

// "fixed", "regressed", "new_failure", "still_failing_changed", "still_failing", "still_passing",
// "new_passing", "carried", "gone".
std::string_view DiffCategoryName(DiffCategory c);

// still_passing and still_failing: shown as counts only unless asked for.
bool IsTrivial(DiffCategory c);

// One entry on one arch.
struct EntryDiff {
  std::string file;
  std::string key;
  std::string arch;
  DiffCategory category = DiffCategory::kStillFailing;
  std::optional<ArchState> before;  // nullopt: not in the older sweep for this arch
  std::optional<ArchState> after;   // nullopt: not in the newer sweep for this arch (gone)
  std::string carried_from;         // the newer entry's carried_from, "" when not carried
};

// One failure cluster's size (entries) in each sweep; 0 when the sweep has no such cluster.
struct ClusterDelta {
  std::string signature;
  int before = 0;
  int after = 0;
  int delta() const { return after - before; }
};

struct SweepDiff {
  std::string before_sweep;  // the older report's "sweep"
  std::string after_sweep;
  // The newer sweep's entries in its order (archs sorted), then the gone ones in the older's.
  std::vector<EntryDiff> entries;
  // Every signature of either sweep, by |delta|, then the larger size, then signature.
  std::vector<ClusterDelta> clusters;

  std::map<DiffCategory, int> Counts() const;  // every category, 0 included
};

// Compares the older sweep's report.json (before) with the newer one's (after). Each (file, key,
// arch) of either gets exactly one category (docs/report.md has the rules). Fails, naming the
// field, when a document is not shaped like report.json.
absl::StatusOr<SweepDiff> DiffSweeps(const nlohmann::json& before, const nlohmann::json& after);

// The diff as JSON: {"before", "after", "counts": {category: n}, "entries": [{"key", "file",
// "arch", "category", "before": state | null, "after": state | null, "carried_from"?}],
// "clusters": [{"signature", "before", "after", "delta"}]}, a state being {"status", "reason",
// "signature"} (null when unknown). entries leaves out still_passing and still_failing unless
// all.
nlohmann::json DiffJson(const SweepDiff& diff, bool all);

// "KNOWN_FAILURE_XFAIL: <reason>", "EXPECTED_PASSING", "unchanged", "-" for none.
std::string StateText(const std::optional<ArchState>& state);

}  // namespace triage::merge
