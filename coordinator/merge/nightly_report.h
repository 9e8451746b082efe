#pragma once

// A nightly sweep's part of report.md and report.json (docs/nightly.md, section 4): what the
// runs held and the rules made of them, then the changes grouped like the maintenance pull
// requests, each line with its evidence (the nightly records and the confirmation runs).

#include <string>

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

// The section a nightly outcome belongs to ("" for none): by its verdict and whether its change
// stood.
std::string NightlySection(const v1::EntryOutcome& outcome);

NightlySections BuildNightlySections(const MergeOutput& merge, const v1::NightlyIntake& intake,
                                     const v1::NightlyOptions& options);

}  // namespace triage::merge
