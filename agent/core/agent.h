#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "agent/client/coordinator_client.h"
#include "agent/executor/executor.h"
#include "common/clock/clock.h"
#include "common/rpc/rpc.h"

namespace triage::workspace {
class Workspace;
}

namespace triage::agent {

// The agent's metric hooks (common/metrics/metric_catalog.h); the defaults do nothing.
class AgentMetrics {
 public:
  virtual ~AgentMetrics() = default;
  virtual void Step(std::string_view /*playbook*/, std::string_view /*step*/,
                    std::string_view /*outcome*/, double /*seconds*/) {}
  virtual void SubprocessTimeout(std::string_view /*step*/) {}
  virtual void WorkspaceReset(double /*seconds*/) {}
};

struct AgentOptions {
  v1::AgentDimensions dimensions;
  std::filesystem::path data_dir;  // spool/ (results until acknowledged), shards/ (no workspace)
  std::chrono::milliseconds lease_wait{20'000};
  std::chrono::milliseconds progress_interval{5'000};  // same step/entry: at most this often
  rpc::RetryPolicy retry{0, std::chrono::milliseconds(200), std::chrono::milliseconds(10'000)};
  ExecSettings exec;
  bool exit_when_drained = false;  // stop once the coordinator drains this agent
  int max_shards = 0;              // stop after this many shards (0 = no limit)
  // Verify-phase shards the agent asks to run in one pytest session (LeaseRequest.max_batch;
  // docs/farm.md, "Batched verification"); 1 asks for one shard per lease.
  int max_batch = 8;
  // The self-check (docs/farm.md, "Only a working agent is a witness"; CheckRunner in
  // agent/core/runner_check.h): "" when the agent can run tt-xla's runner, else why not. It
  // runs before the first registration, again after a native shard's attempt failed for a
  // reason the agent cannot attribute (an infrastructure failure), and, while it finds a
  // problem, every runner_recheck. Its answer is dimensions.runner_problem; a changed answer is
  // registered again (the session and its leases are kept). Empty: no check (an agent without
  // the native executor).
  // The check is handed a function that says whether the agent is stopping (it may then end
  // early; its answer is not used).
  std::function<std::string(const std::function<bool()>& stopping)> runner_check;
  std::chrono::milliseconds runner_recheck{300'000};
  // What the agent decides on time reads this clock: progress throttling, the heartbeat period,
  // retry backoffs and the pauses between Lease calls (tests pass a FakeClock). Durations that
  // are only measured and reported (a shard's run time, workspace resets) use steady_clock: a
  // measurement must not jump with the wall clock, and a fake one would report nothing.
  Clock* clock = SystemClock::Get();
};

// One agent process: registers, heartbeats on its own thread, leases shards (long-poll), runs
// each through the Executor its spec names in a freshly prepared workspace, streams progress
// and completes. A finished result is written to data_dir/spool before Complete and removed
// only once the coordinator has answered, so a crash or an outage never loses it.
class Agent {
 public:
  Agent(AgentOptions options, CoordinatorClient* client, workspace::Workspace* workspace,
        std::map<std::string, Executor*> executors, AgentMetrics* metrics = nullptr);
  ~Agent();

  // Runs until Stop() (or drained / max_shards). Returns an error only when the coordinator
  // refuses this agent for good (bad credentials, invalid dimensions).
  absl::Status Run();
  void Stop();

  int shards_done() const { return shards_done_.load(); }
  std::string session() const;

 private:
  absl::Status RegisterWithRetry();
  // Runs options_.runner_check and puts its answer in the dimensions; true when it changed.
  // why: what prompted it, for the log.
  bool CheckRunner(std::string_view why);
  // The re-checks Run makes between leases: after an attempt that failed for a reason the
  // agent cannot attribute, and periodically while a problem stands. True when the answer
  // changed (the agent then registers again).
  bool RecheckRunner();
  void HeartbeatLoop();
  void ResendSpooled();
  // The spooled results, oldest first (also fills undelivered_).
  std::vector<std::filesystem::path> SpooledFiles();
  void RunShard(const v1::LeaseResponse& lease);
  // A lease with a batch: one workspace and one pytest session when the executor can batch,
  // else the shards one after another (the waiting ones kept alive by heartbeats).
  void RunBatch(const v1::LeaseResponse& lease);
  // What an executor gets to run spec in dir; progress goes to each of leases.
  ExecContext Context(const v1::ShardSpec& spec, const std::filesystem::path& dir,
                      const std::vector<const v1::LeaseResponse*>& leases);
  // A finished attempt's Complete, written to data_dir/spool, to be sent.
  struct Outgoing {
    std::filesystem::path file;
    v1::CompleteRequest req;
    std::string context;  // util::ShardLogContext of the attempt
  };
  // Ends the attempt as current and spools its result (nothing when cancelled: the coordinator
  // no longer wants it).
  std::optional<Outgoing> Spool(const v1::LeaseResponse& lease, v1::ShardResult result,
                                double seconds, bool cancelled, const std::string& context);
  // Delivers a spooled result (Deliver) and counts the shard done.
  void Send(const Outgoing& out);
  // Sends a spooled Complete until the coordinator answers (or stop); removes the file then.
  // context: util::ShardLogContext of the attempt, for its log lines.
  void Deliver(const std::filesystem::path& spool_file, const v1::CompleteRequest& req,
               const std::string& context);
  // Reports a step to each lease (throttled once for all: a batch's leases move together).
  void Progress(const std::vector<const v1::LeaseResponse*>& leases, const std::string& step,
                const std::string& entry, const std::vector<std::string>& tail);
  bool Stopping() const { return stop_.load(); }
  // Waits d on the injected clock, or until Stop().
  void SleepFor(std::chrono::milliseconds d);
  // rpc::Retry with this agent's policy, its backoffs slept with SleepFor, ending on Stop().
  absl::Status RetryCall(const std::function<absl::Status()>& call);

  AgentOptions options_;
  CoordinatorClient* client_;
  workspace::Workspace* workspace_;
  std::map<std::string, Executor*> executors_;
  AgentMetrics default_metrics_;
  AgentMetrics* metrics_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string session_;
  std::chrono::milliseconds heartbeat_interval_{5'000};
  // The leases being worked on: one, or a batch (its waiting shards included).
  std::set<std::string> current_leases_;
  std::string current_context_;  // util::ShardLogContext of the first of them
  // Leases whose results are spooled and not yet acknowledged: heartbeats keep them alive (a
  // result finished during an outage must not expire while its delivery backs off), and a
  // registration names them so that a restart does not fence them.
  std::set<std::string> undelivered_;
  bool reregister_ = false;
  // A native shard's attempt failed (an infrastructure failure): the runner is checked again.
  std::atomic<bool> unattributed_failure_{false};
  TimePoint next_runner_check_{};  // while a problem stands (options_.clock)
  bool draining_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<bool> cancel_current_{false};
  std::atomic<int> shards_done_{0};
  std::thread heartbeat_;
  // Progress throttling.
  std::string last_step_;
  std::string last_entry_;
  TimePoint last_progress_{};
};

}  // namespace triage::agent
