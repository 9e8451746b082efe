#pragma once

#include <filesystem>
#include <string>

#include "agent/executor/executor.h"
#include "agent/executor/native_tools.h"
#include "agent/playbooks/playbook.h"

namespace triage::agent {

// The C++ playbooks (agent/playbooks) with the CPU probe and pytest run for real ("native"),
// or answered from recorded evidence ("replay": replay_dir/<shard evidence dir>/ when present,
// else replay_dir itself, in the layout of docs/evidence.md). Fix edits are applied to the
// workspace either way, and either way the result carries the evidence in that layout: what ran, or
// what answered.
class NativeExecutor : public Executor {
 public:
  // scripts_dir: agent/scripts (triage_probe.py, triage_pytest_plugin.py).
  NativeExecutor(std::filesystem::path scripts_dir, std::filesystem::path replay_dir = {});
  std::string name() const override { return replay_dir_.empty() ? "native" : "replay"; }
  absl::StatusOr<v1::ShardResult> Run(ExecContext& ctx) override;
  // Native only: a replay answers from each shard's own recorded evidence.
  bool CanBatch() const override { return replay_dir_.empty(); }
  // One pytest session over every entry of the batch; each shard then runs its playbook as
  // Run does, its "verify" answered from that session when it holds a testcase for every one
  // of the shard's entries, and from a session of its own otherwise (a crash in the batch).
  std::vector<absl::StatusOr<v1::ShardResult>> RunBatch(
      ExecContext& ctx, const std::vector<const v1::ShardSpec*>& specs) override;

  // The tools' options for a shard: the agent's settings (python, timeouts, niceness), the
  // shard's arch, workspace and evidence directory, and the agent's scripts.
  static NativeToolsOptions ToolsOptionsFor(const ExecContext& ctx,
                                            const std::filesystem::path& scripts_dir);
  // A playbook's context for spec in ctx's workspace with tools: progress and cancellation
  // are ctx's; the chain is left for the caller (no chain).
  static playbooks::PlaybookContext ContextFor(ExecContext& ctx, const v1::ShardSpec& spec,
                                               playbooks::PlaybookTools& tools);

 private:
  NativeToolsOptions ToolsOptions(const ExecContext& ctx) const {
    return ToolsOptionsFor(ctx, scripts_dir_);
  }
  absl::StatusOr<v1::ShardResult> RunWith(ExecContext& ctx, playbooks::PlaybookTools& tools);

  std::filesystem::path scripts_dir_;
  std::filesystem::path replay_dir_;
};

}  // namespace triage::agent
