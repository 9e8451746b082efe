#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/executor/executor.h"

namespace triage::agent {

// Runs an external command in the workspace, per entry (default) or once per shard, e.g. a
// headless coding agent running the tt-xla triage skill. Shard parameters:
//   command  JSON array of argv items (required). Placeholders inside items are replaced
//            textually; each item stays exactly one argv element (no shell ever parses it):
//            {key} {file} {flavor} {reason} {loader} {loader_dir} {playbook} {arch} {workspace}
//            {shard_dir} {junit} {sweep} {shard}; an item that is exactly "{keys}" expands to
//            one argv element per entry key (per-shard mode).
//   per      "entry" (default) or "shard".
//   timeout_seconds  per command run (default: the agent's command_timeout, else the shard's).
//   verify   "true" (default) or "false": the farm's own verification afterwards (below).
// The command runs with a scrubbed environment: the variables of command::kEnvAllowList and of
// the agent's command_env_allow, taken from the agent's environment, plus TRIAGE_SHARD_DIR,
// TRIAGE_JUNIT, TRIAGE_KEY, TRIAGE_SUMMARY and, for a cluster's follower or a later run of the
// same cluster in the shard, TRIAGE_HINT; nothing else of the agent's environment (tokens,
// credentials).
// Fix once, verify many (docs/remediation.md): a follower whose lead's fix was accepted verifies
// its entries first with the lead's shared edits pre-applied, and runs the command only for the
// entries still failing; in per-entry mode, an entry whose cluster an earlier run of the shard
// changed files for is verified before its own run. An entry fixed so carries fixed_by, and
// ShardResult.command_runs counts the runs. Edits the shard pre-applied and the command left
// as they were are not the command's: the result does not carry them again.
// Afterwards both repos' diffs against the pinned commits (new files included) are lifted into
// the structured edits a native result carries (common/lift/lift.h: entry edits, registry
// operations, loader file edits against the pinned commit), reading the base files at the pinned
// commits from the workspace's git; the result carries no raw diff. Every JUnit file under the
// shard's junit/ directory and the exit status travel in the result too. A non-zero exit, a
// timeout (the whole process group is killed) or a change that could not be lifted flags the
// entries for review. With verify on, each entry is then verified by the farm on the shard's arch
// and the command's YAML edit checked against the farm's decision (agent/executor/
// command_verify.h; docs/farm.md, "Executors"): the farm's decision wins where they differ.
class CommandExecutor : public Executor {
 public:
  // scripts_dir: agent/scripts (the pytest plugin the verification runs with); empty: the
  // directory of ExecSettings::probe_script.
  explicit CommandExecutor(std::filesystem::path scripts_dir = {});
  std::string name() const override { return "command"; }
  absl::StatusOr<v1::ShardResult> Run(ExecContext& ctx) override;

  // The argv of one run from the parsed template (command::ParseParams), exposed for tests.
  static std::vector<std::string> BuildArgv(const std::vector<std::string>& command,
                                            const std::map<std::string, std::string>& values,
                                            const std::vector<std::string>& keys);

  // The environment of a run before the executor's TRIAGE_* variables: the allow-listed
  // variables of this process's environment (command::AllowedEnvironment).
  static std::vector<std::pair<std::string, std::string>> Environment(
      const std::vector<std::string>& extra_allow);

 private:
  // The farm's verification of some of the shard's entries, in the workspace as it is now.
  static absl::StatusOr<v1::ShardResult> VerifyEntries(
      ExecContext& ctx, const std::filesystem::path& scripts,
      const std::vector<const v1::ShardEntry*>& entries);

  std::filesystem::path scripts_dir_;
};

}  // namespace triage::agent
