#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock/clock.h"
#include "common/inventory/inventory.h"
#include "coordinator/core/demand.h"
#include "coordinator/core/group_commit.h"
#include "coordinator/core/metrics.h"
#include "coordinator/core/model.h"
#include "coordinator/core/outcome_counts.h"
#include "coordinator/core/store.h"
#include "triage/v1/agent.pb.h"
#include "triage/v1/control.pb.h"

namespace triage::coord {

struct CoordinatorOptions {
  Duration lease_ttl = std::chrono::seconds(60);          // lease life without heartbeats
  Duration heartbeat_interval = std::chrono::seconds(5);  // told to agents
  Duration agent_dead_after = std::chrono::seconds(30);   // silence before an agent is offline
  Duration offline_retention = std::chrono::hours(24);    // offline agents are then forgotten
  Duration lease_wait_limit = std::chrono::seconds(20);   // server cap on a Lease long-poll
  Duration backoff_base = std::chrono::seconds(10);       // requeue delay after attempt 1
  Duration backoff_max = std::chrono::minutes(10);
  Duration stuck_after = std::chrono::minutes(15);  // default for ListShards(stuck)
  int default_max_attempts = 3;
  // Leases a shard may lose to the farm itself (agents dying or restarting, the coordinator
  // restarting) before it is quarantined: such losses say nothing about the work, so they do
  // not count toward max_attempts, but a shard that keeps taking agents down stops somewhere.
  int max_infra_losses = 10;
  std::vector<std::string> default_archs = {"n150"};
  std::string default_executor = "native";
  double min_trusted_seconds = 5;
  std::map<std::string, double> playbook_estimates = {
      {"unpack_forward_output", 900}, {"dtype_bfloat16", 900}, {"missing_inputs", 900}};
};

// What a sweep reads: the checkout pinned at its commits, and its inventory read through git.
struct SweepInput {
  std::string repo;  // for display
  std::string ttxla_commit;
  std::string forge_commit;
  std::string forge_gitlink;  // the commit ttxla_commit records for the submodule
  std::string forge_source;   // gitlink, checkout, ref (git::ForgeSourceName)
  std::vector<std::string> notes;
  std::string agent_repo_url;
  inventory::Inventory inventory;
};
using SweepReader = std::function<absl::StatusOr<SweepInput>(const v1::StartSweepRequest&)>;

// The coordinator's brain: sweeps, shards, leases and agents, with every state change stored
// (Store) before it is acknowledged. Plain C++: the gRPC services in coordinator/server are thin
// adapters over these methods. Thread-safe; callbacks (Lease long-polls, watchers) are invoked
// without the lock held.
class Coordinator {
 public:
  Coordinator(CoordinatorOptions options, Store* store, Clock* clock, SweepReader reader,
              CoordinatorMetrics* metrics = nullptr);
  ~Coordinator();

  // Commits and acknowledgements move to a committer thread (see GroupCommit); call it once the
  // coordinator serves concurrent callers. Without it, each call commits before it returns.
  void StartCommitter();

  // Rebuilds the state from the store (after a restart). Leases found are re-armed with a fresh
  // deadline so their agents can re-attach.
  absl::Status Recover();

  // AgentService.
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& req);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& req);
  using LeaseCallback = std::function<void(absl::StatusOr<v1::LeaseResponse>)>;
  // Calls done exactly once: at once, or when a shard arrives or the wait ends. Returns a wait
  // id for CancelLease (0 when done was already called).
  std::int64_t Lease(const v1::LeaseRequest& req, LeaseCallback done);
  void CancelLease(std::int64_t wait_id);  // the RPC went away: done is called with CANCELLED
  absl::StatusOr<v1::ProgressResponse> ReportProgress(const v1::ProgressRequest& req);
  using CompleteCallback = std::function<void(absl::StatusOr<v1::CompleteResponse>)>;
  // Calls done exactly once, when the result is durable (or was refused); possibly before
  // Complete returns, possibly on another thread.
  void Complete(const v1::CompleteRequest& req, CompleteCallback done);
  // The same, waiting for the answer.
  absl::StatusOr<v1::CompleteResponse> Complete(const v1::CompleteRequest& req);

  // ControlService.
  absl::StatusOr<v1::Sweep> StartSweep(const v1::StartSweepRequest& req, const Caller& caller);
  absl::StatusOr<v1::Sweep> GetSweep(const std::string& id);
  std::vector<v1::Sweep> ListSweeps();
  absl::StatusOr<std::vector<v1::Shard>> ListShards(const v1::ListShardsRequest& req);
  absl::StatusOr<v1::Shard> RequeueShard(const std::string& id, const std::string& reason,
                                         const Caller& caller);
  absl::StatusOr<v1::Shard> CancelShard(const std::string& id, const std::string& reason,
                                        const Caller& caller);
  absl::StatusOr<v1::Sweep> CancelSweep(const std::string& id, const std::string& reason,
                                        const Caller& caller);
  std::vector<v1::Agent> ListAgents();
  absl::StatusOr<v1::Agent> SetDraining(const std::string& agent_id, bool draining,
                                        const std::string& reason, const Caller& caller);

  using WatchCallback = std::function<void(const v1::SweepEvent&)>;
  // Sends the current state at once, then an event per change until Unwatch.
  absl::StatusOr<int> Watch(const std::string& sweep_id, WatchCallback cb);
  void Unwatch(int id);

  // Accepted results of a sweep, in acceptance order (for the patch and the report).
  absl::StatusOr<std::vector<ResultRecord>> Results(const std::string& sweep_id);
  absl::StatusOr<SweepRecord> SweepInfo(const std::string& sweep_id);
  absl::StatusOr<std::vector<ShardRecord>> Shards(const std::string& sweep_id);

  // Settles a finished (or cancelled, failed) sweep's entry counts: the merge's view of the
  // entries it saw (label, review; by file + '\n' + key) over the coordinator's own for the
  // rest. Stored with the sweep, and from then on what every view of it shows.
  absl::StatusOr<v1::EntryCounts> SettleCounts(const std::string& sweep_id,
                                               const std::map<std::string, EntryTally>& merged);

  // Expires leases, marks silent agents offline, ends long-polls, releases backoffs.
  void Tick();
  // The agents' grace period after a restart starts when the coordinator is reachable, not
  // when it read its state: every agent's silence and every lease's life count from now.
  // Called once the listeners are up, before the first Tick.
  void StartGrace();
  // False after the store failed a write or a check (the health service reports it).
  bool healthy() const;

  // Called (without the lock) when a sweep's last shard ends, before it is marked finished;
  // the merge (docs/report.md) hooks in here. It may return an error that marks the sweep failed.
  using FinishHook = std::function<absl::Status(const std::string& sweep_id)>;
  void SetFinishHook(FinishHook hook);

  const CoordinatorOptions& options() const { return options_; }
  // Commits so far and the mutations they made durable (their ratio is the mean group size).
  GroupCommit::Stats commit_stats() const { return commits_.stats(); }

 private:
  struct EntryRt {
    std::string playbook;
    int shards = 0;
    int terminal = 0;
    int active = 0;
    std::map<std::string, std::string> decided;  // arch -> OutcomeLabel of its latest result
    bool review = false;                         // a result flagged it for human review
  };
  struct SweepRt {
    SweepRecord rec;
    std::vector<std::string> shard_ids;
    int unfinished = 0;                      // shards not yet terminal (the sweep ends at 0)
    std::map<std::string, EntryRt> entries;  // file + '\n' + key
    std::vector<ResultRecord> results;
    std::array<int, 8> by_state{};              // shards per ShardState
    std::map<std::string, LaneProgress> lanes;  // per ShardArch: open shards, results (ETA)
    std::vector<std::string> live_problems;     // work nobody can take, quarantined shards
    bool blocked = false;                       // nothing left can progress without a person
  };
  struct Waiter {
    std::int64_t id;
    std::string agent_id;
    std::string session_id;
    std::string request_id;
    TimePoint deadline;
    LeaseCallback done;
  };
  using QueueKey = std::tuple<int, double, std::int64_t, std::string>;
  // Work to do once the lock is released and the operation's writes are durable (ticket):
  // callbacks in order, then sweep finishing (so a watcher sees "completed" before
  // "succeeded"). If the writes were lost, replies get the error and the rest is dropped.
  struct Deferred {
    std::vector<GroupCommit::Item> now;
    std::vector<GroupCommit::Item> last;
    std::uint64_t ticket = 0;
    void push_back(std::function<void()> f) { now.push_back({std::move(f), nullptr}); }
    void Reply(std::function<void()> ok, std::function<void(const absl::Status&)> failed) {
      now.push_back({std::move(ok), std::move(failed)});
    }
    // done(answer) once durable, done(error) if lost: every Lease/Complete callback's reply.
    template <typename Callback, typename Value>
    void Answer(Callback done, Value answer) {
      Reply([done, answer = std::move(answer)]() mutable { done(std::move(answer)); },
            [done](const absl::Status& st) { done(st); });
    }
  };
  // Hands the deferred work to the group commit (see GroupCommit).
  void Settle(Deferred& after);
  // The same, and waits until it ran: OK, or the error that lost the operation's writes.
  absl::Status SettleAndWait(Deferred& after);
  // After a failed commit: the store's state is the truth; reload it.
  void OnFlushFailure(const absl::Status& status);
  void ResetLocked();
  void RecoverLocked(Snapshot snap, Deferred& after);
  absl::StatusOr<v1::CompleteResponse> CompleteLocked(const v1::CompleteRequest& req,
                                                      Deferred& after);

  static QueueKey KeyOf(const ShardRecord& s);
  static std::string EntryKey(const v1::ShardEntry& e) { return e.file() + "\n" + e.key(); }
  static std::string ShardArch(const ShardRecord& s);
  void ReportOnCallAgesLocked(TimePoint now);
  // Offline agents without leases whose last heartbeat is older than offline_retention leave
  // the fleet (memory and store).
  void ForgetOfflineAgentsLocked(TimePoint now, Deferred& after);
  // Recomputes each running sweep's live problems (work no live agent can take, quarantined
  // shards) and whether it is blocked; tells watchers when that changed.
  void RefreshProblemsLocked(Deferred& after);
  // Ends the shard's lease (if any) as "revoked": the attempt is recorded in m and the agent is
  // told to stop at its next heartbeat.
  void RevokeLeaseLocked(ShardRecord& s, TimePoint now, const std::string& why, Mutation& m);
  std::string AgentStateName(const AgentRecord& a) const;
  std::string EntryStateName(const EntryRt& e) const;

  bool Matches(const AgentRecord& agent, const ShardRecord& shard, TimePoint now) const;
  ShardRecord* FindMatch(const AgentRecord& agent, TimePoint now);
  absl::StatusOr<v1::LeaseResponse> GrantLocked(AgentRecord& agent, ShardRecord& shard,
                                                const std::string& request_id, Deferred& after);
  void ServeWaitersLocked(Deferred& after);
  // Applies the mutation, then commits the updated records into memory.
  absl::Status ApplyAndCommit(Mutation& m, std::vector<ShardRecord>& shards,
                              std::vector<AgentRecord>& agents, Deferred& after);
  void CommitShard(ShardRecord updated);
  void CommitAgent(AgentRecord updated);
  void CommitResultLocked(const ResultRecord& r);
  // Who is to blame for an attempt that ended without a result.
  enum class Fault {
    kWork,            // the agent reported a failure, or a result broke the shard's rules
    kInfrastructure,  // the lease was lost: agent died, stopped, restarted; coordinator restart
  };
  // A failed attempt: requeue (work faults with backoff) or quarantine after max_attempts work
  // faults or max_infra_losses infrastructure faults. Fills the copy of the shard.
  void FailAttempt(ShardRecord& s, const std::string& outcome, const std::string& reason,
                   TimePoint now, Mutation& m, Fault fault);
  int MaxAttempts(const ShardRecord& s) const;
  // The attempt row of the shard's current lease, ended now.
  static AttemptRecord EndedAttempt(const ShardRecord& s, TimePoint now, std::string outcome,
                                    std::string reason);
  // Dependents of a shard that ended: released (succeeded) or failed/cancelled.
  void CascadeLocked(const ShardRecord& ended, const v1::ShardResult* result,
                     std::vector<ShardRecord>& out);
  void MaybeFinishSweepLocked(const std::string& sweep_id, Deferred& after);
  // Plans the next registry wave of a sweep whose shards all ended; true when it made shards.
  bool PlanWaveLocked(const std::string& sweep_id, Deferred& after);
  void FinishSweep(const std::string& sweep_id);
  // A scheduled FinishSweep that will not run (its trigger was lost): Tick schedules it again.
  void Unfinish(const std::string& sweep_id);
  void EmitLocked(const std::string& sweep_id, const std::string& message, Deferred& after);
  v1::Sweep ViewLocked(const SweepRt& s) const;
  // The live counts of a sweep's entries; merged (see SettleCounts) replaces entries it names.
  v1::EntryCounts CountLocked(const SweepRt& s,
                              const std::map<std::string, EntryTally>* merged) const;
  v1::Shard ShardViewLocked(const ShardRecord& s) const;
  v1::Agent AgentViewLocked(const AgentRecord& a) const;
  absl::Status CheckResultLocked(const ShardRecord& shard, const v1::ShardResult& result) const;
  std::string NewSessionId();
  void AuditLocked(Mutation& m, const Caller& caller, std::string action, std::string target,
                   std::string reason);
  void RecordFailure(const absl::Status& status);

  const CoordinatorOptions options_;
  Store* const store_;
  Clock* const clock_;
  SweepReader reader_;
  CoordinatorMetrics default_metrics_;
  CoordinatorMetrics* metrics_;
  FinishHook finish_hook_;
  GroupCommit commits_;

  mutable std::mutex mu_;
  std::mutex start_mu_;  // one StartSweep planning at a time (outside mu_)
  // The outcome of the latest commit (a group commit or the store's probe): false from a failed
  // commit (or a database file found deleted or replaced) until a commit succeeds. Staging
  // succeeds even when the disk is full, so it says nothing about health.
  std::atomic<bool> healthy_{true};
  std::uint64_t last_staged_ = 0;  // the store ticket of the latest staged mutation
  bool serving_waiters_ = false;
  std::set<std::string> on_call_archs_;
  std::set<std::pair<std::string, std::string>>
      unservable_reported_;  // (arch, reason) gauges  // archs whose on-call ages were reported
                             // once
  std::int64_t next_seq_ = 1;
  std::int64_t next_sweep_ = 1;
  std::int64_t next_wait_id_ = 1;
  std::int64_t next_session_ = 1;
  std::map<std::string, SweepRt> sweeps_;
  std::map<std::string, ShardRecord> shards_;
  std::map<std::string, AgentRecord> agents_;
  std::map<std::string, std::string> lease_to_shard_;           // active leases
  std::map<std::string, std::vector<std::string>> dependents_;  // shard -> shards waiting on it
  std::map<std::string, std::string> lease_request_;            // lease id -> the Lease request id
  std::set<std::string> accepted_leases_;
  std::set<std::string> finishing_;  // sweeps whose FinishSweep is scheduled or running
  std::set<QueueKey> queue_;
  Demand demand_;  // queued shards per sweep and requirement
  std::list<Waiter> waiters_;
  std::map<int, std::pair<std::string, WatchCallback>> watchers_;
  int next_watch_ = 1;
};

}  // namespace triage::coord
