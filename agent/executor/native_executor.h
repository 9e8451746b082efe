#pragma once

#include <filesystem>
#include <string>

#include "agent/executor/executor.h"

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

 private:
  std::filesystem::path scripts_dir_;
  std::filesystem::path replay_dir_;
};

}  // namespace triage::agent
