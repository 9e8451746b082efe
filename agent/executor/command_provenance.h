#pragma once

// Provenance of a command's result (docs/remediation.md, "Provenance"): what a reviewer needs to
// reproduce or audit a coding agent's change, recorded by the agent beside the change itself.

#include <string>
#include <vector>

#include "agent/executor/executor.h"
#include "triage/v1/types.pb.h"

namespace triage::agent {

// The evidence kind and name of the record.
inline constexpr char kProvenanceEvidence[] = "provenance";
inline constexpr char kProvenanceName[] = "provenance.json";

// One run of the command.
struct CommandRunRecord {
  int number = 0;       // logs/command-<n>.log
  std::string key;      // the entry it ran for ("" for a run per shard)
  double seconds = 0;   // wall time
  std::string ended;    // "exit 0", "timed out after 3600s", ...
  std::string summary;  // summaries/run-<n>.json when the command wrote a valid one, else ""
};

// Adds provenance.json (kind "provenance") to result:
//   {"schema": 1,
//    "repositories": [{"path": ".", "commit": "<sha>"}, {"path": "third_party/tt_forge_models",
//                      "commit": "<sha>"}, ...]   every git repository of the workspace: its
//                      HEAD and every submodule's, recursively (`git submodule status`);
//    "pinned": {"tt-xla": "<sha>", "tt_forge_models": "<sha>"}   the sweep's commits;
//    "reported": {"pins": {"tt-mlir": "<sha>", ...}, "version": "..."}   what the command's
//                      summaries reported (docs/remediation.md, "The command's summary");
//    "hardware": {"agent": ..., "arch": ..., "device_count": N, "pool": ..., "host": ...,
//                 "agent_version": ...};
//    "command": ["<argv template>", ...],
//    "runs": [{"number", "key", "seconds", "ended", "transcript": "logs/command-<n>.log",
//              "summary"}],
//    "verification_seconds": S}
// A repository that cannot be read is listed with its error. Never fails the shard.
void RecordProvenance(const ExecContext& ctx, const std::vector<std::string>& command,
                      const std::vector<CommandRunRecord>& runs, double verification_seconds,
                      v1::ShardResult& result);

}  // namespace triage::agent
