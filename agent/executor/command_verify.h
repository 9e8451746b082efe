#pragma once

// The farm's check of a command's decisions (docs/farm.md, "Executors", the `command` bullet):
// after the command and the lift, each entry is verified on the shard's arch by the same pytest
// session path the native playbooks verify with (ShardRun::Verify through NativeTools), in the
// workspace as the command left it; the decision the native playbooks would make from that run
// (DecideFromVerification) is compared with the command's lifted YAML edit, and the farm's wins
// where they differ.

#include <filesystem>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "agent/executor/executor.h"
#include "common/lift/lift.h"
#include "triage/v1/types.pb.h"

namespace triage::agent {

// An entry's fields as the shard's arch sees them (name -> value).
using EntryFields = std::map<std::string, v1::YamlValue>;

// What the comparison of one entry found.
struct DecisionCheck {
  bool agree = false;
  std::string command_wrote;  // "status EXPECTED_PASSING, no reason", "no YAML change (...)"
  std::string farm_writes;    // the same for the farm's decision
};

// The comparison rule (docs/farm.md, "Executors"): the entry after the command's edit and after
// the farm's decision (both applied to base, the entry at the pinned commit as the arch sees it;
// an outcome that is not changed leaves base as it is) agree when
//  - status is the same,
//  - reason is the same: both absent (an empty reason counts as absent), or both present and
//    equal in their junit::NormalizeReason form (whitespace, paths, addresses), and
//  - assert_pcc is the same, where the farm's decision sets it (incorrect_result).
// Nothing else is compared (bringup_status, markers, other fields): where the decisions agree,
// the command's edit stands as it is.
DecisionCheck CheckCommandDecision(const EntryFields& base, const v1::EntryOutcome& command,
                                   const v1::EntryOutcome& farm);

// The farm's verification of every entry of ctx.spec in the workspace as it is now: a result
// with an outcome per entry as the native playbooks decide it (verdict, stage, reason, review,
// edit), and the run's JUnit files and logs recorded below ctx.shard_dir (junit/NN-verify.xml,
// logs/NN-verify.log: docs/evidence.md) and carried as evidence. scripts_dir holds the agent's
// pytest plugin. An error is an infrastructure failure (pytest could not run), or a cancellation.
absl::StatusOr<v1::ShardResult> RunFarmVerification(ExecContext& ctx,
                                                    const std::filesystem::path& scripts_dir);

// Applies the farm's verification to the command's result: per entry, the check above decides
// whether the command's edit stands ("verified by the farm") or the farm's decision replaces it
// ("replaced by the farm's decision", flagged for review with both decisions); an entry the run
// left no testcase for keeps the command's edit, flagged ("not verified"). The farm's verdict,
// stage, reason, review flags, duration and evidence go on each outcome; the run's evidence on
// the result. base files: the shard's YAML files at the pinned commits.
void ApplyFarmVerification(const v1::ShardSpec& spec, lift::PinnedFiles& base_files,
                           const v1::ShardResult& farm, v1::ShardResult& result);

}  // namespace triage::agent
