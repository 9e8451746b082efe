#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "triage/v1/types.pb.h"

namespace triage::workspace {
class Workspace;
}

namespace triage::agent {

// Step timeouts and tools an executor may use.
struct ExecSettings {
  std::string python = "/usr/bin/python3";  // the workspace's interpreter (probe, pytest)
  std::chrono::seconds probe_timeout{600};
  std::chrono::seconds pytest_timeout{3600};
  // Niceness added to probe processes: they hold no device, so on a host they share with
  // device sessions they yield the CPU to them (docs/farm.md, "Probe niceness").
  int probe_nice = 10;
  std::chrono::seconds command_timeout{0};  // 0: the shard's timeout
  // Environment variables a command run may see besides command::kEnvAllowList (the agent's
  // command_env_allow; docs/farm.md, "Executors").
  std::vector<std::string> command_env_allow;
  std::filesystem::path probe_script;  // agent/scripts/triage_probe.py
  // The playbooks this agent runs (empty: all): a shard's chain (docs/playbooks.md, "Chaining")
  // goes on only with these.
  std::vector<std::string> playbooks;
};

// What an executor gets for one shard attempt.
struct ExecContext {
  const v1::ShardSpec* spec = nullptr;
  workspace::Workspace* workspace = nullptr;  // prepared at the sweep's commits (may be null
                                              // for executors that need no checkout)
  std::filesystem::path shard_dir;            // logs/, junit/, probes/ for this attempt
  ExecSettings settings;
  // The agent running the shard (its id, arch, devices, host, version); null in tests that run
  // an executor alone.
  const v1::AgentDimensions* agent = nullptr;
  // Reports a step (and the entry it concerns, "" = whole shard) with the last log lines.
  std::function<void(const std::string& step, const std::string& entry,
                     const std::vector<std::string>& log_tail)>
      progress;
  // True once the lease was revoked or the agent is stopping: stop as soon as possible.
  std::function<bool()> cancelled;
  // RunBatch only: a shard's result as soon as it is known, while the batch runs on (the
  // index is the shard's in `specs`). Called at most once per shard, on RunBatch's thread;
  // RunBatch still returns every result, these included.
  std::function<void(std::size_t index, const v1::ShardResult& result)> early_result;
};

// Runs a shard. An error status means the attempt could not run (infrastructure): the
// coordinator retries it elsewhere. Playbook outcomes, even failing tests, are a result.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string name() const = 0;
  virtual absl::StatusOr<v1::ShardResult> Run(ExecContext& ctx) = 0;
  // Whether RunBatch runs several verify-phase shards in one pytest session.
  virtual bool CanBatch() const { return false; }
  // A batch of verify-phase shards (docs/farm.md, "Batched verification") in one workspace that
  // holds all their pre-applied edits: ctx.spec is the first, specs all of them; a result per
  // spec, in order. Only called when CanBatch().
  virtual std::vector<absl::StatusOr<v1::ShardResult>> RunBatch(
      ExecContext& /*ctx*/, const std::vector<const v1::ShardSpec*>& specs) {
    return std::vector<absl::StatusOr<v1::ShardResult>>(
        specs.size(), absl::UnimplementedError(name() + " runs no batches"));
  }
};

}  // namespace triage::agent
