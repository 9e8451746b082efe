#pragma once

// `sweep durations`: a finished sweep's measured pytest times as a pytest-split
// .test_durations file, for the next sweep's `sweep start --durations` (docs/farm.md,
// "Planning with measured durations"). Built from the sweep's report.json: no RPC of its own.

#include <map>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "coordinator/triagectl/farm_common.h"

namespace triage::ctl::farm {

// Per arch, node id -> seconds: what report.json's entries measured ("durations" by arch, keyed
// by their "node_id"). InvalidArgument when the text is not a report.
using DurationsByArch = std::map<std::string, std::map<std::string, double>>;
absl::StatusOr<DurationsByArch> MeasuredDurations(std::string_view report_json);

// The .test_durations text as pytest-split writes it (json.dump(..., sort_keys=True, indent=4):
// keys sorted, four spaces, no newline at the end) of measured, each rounded to the millisecond.
// base: an existing durations file's text, whose keys are kept (as `pytest --store-durations`
// keeps the tests it did not run) and overwritten where measured; "" for none. InvalidArgument
// (naming base_name) when base is not a JSON object.
absl::StatusOr<std::string> DurationsFileText(const std::map<std::string, double>& measured,
                                              std::string_view base = "",
                                              std::string_view base_name = "--merge");

// `sweep durations ID [--arch A] [--out FILE] [--merge FILE]`.
int RunSweepDurations(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);

}  // namespace triage::ctl::farm
