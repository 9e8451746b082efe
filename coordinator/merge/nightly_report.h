#pragma once

// A nightly sweep's part of report.md and report.json (docs/nightly.md, section 4): what the
// runs held and the rules made of them, then the changes grouped like the maintenance pull
// requests, each line with its evidence (the nightly records and the confirmation runs).

#include <string>
#include <vector>

#include "coordinator/merge/merge.h"
#include "nlohmann/json.hpp"
#include "triage/v1/control.pb.h"

namespace triage::merge {

// The sections, in their order in report.md (a section without entries is left out):
// promoted, demoted, skipped, thresholds changed, reasons refreshed, new entries, flaky,
// unconfirmed, already at target state, flagged for a person.
struct NightlySections {
  std::string markdown;
  nlohmann::json json;  // {"intake": {...}, "options": {...}, "sections": {"promoted": [...], ...}}
};

// Each entry is listed once, in the section of its label (EntryLabel: the first kind in
// coord::kNightlyKinds' order that one of its archs has), with every arch's finding on its line:
// a section's count is the count of its label in `sweep status` and report.json's totals.
// archs: the sweep's target archs.
NightlySections BuildNightlySections(const MergeOutput& merge, const v1::NightlyIntake& intake,
                                     const v1::NightlyOptions& options,
                                     const std::vector<std::string>& archs);

}  // namespace triage::merge
