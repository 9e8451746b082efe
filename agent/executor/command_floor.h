#pragma once

// The farm's measured PCC floor (docs/remediation.md, "Guards"): a command's YAML edit that sets
// required_pcc is justified only by what bfloat16 alone costs the test on CPU, measured by the
// farm's own probe, never by the command's word.

#include <filesystem>

#include "absl/status/status.h"
#include "agent/executor/executor.h"
#include "triage/v1/types.pb.h"

namespace triage::agent {

// For each entry outcome of result whose edit sets required_pcc: runs the probe's floor mode
// (agent/scripts/triage_probe.py --mode floor) on the workspace as the command left it and
// records probes/<key>.floor.<n>.json, its log, and floors.json (kind "pcc_floor": {"floors":
// [{"file", "key", "pcc" (null when not measured), "error"}]}) on the result, which the merge
// reads (command::PccFloors). A floor that cannot be measured is recorded with its error and
// leaves the threshold unjustified. An error is a cancellation.
absl::Status MeasurePccFloors(ExecContext& ctx, const std::filesystem::path& scripts_dir,
                              v1::ShardResult& result);

}  // namespace triage::agent
