#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/playbooks/catalog.h"
#include "common/clock/clock.h"
#include "common/inventory/inventory.h"
#include "coordinator/metrics/metrics.h"
#include "coordinator/model/model.h"
#include "coordinator/model/outcome_counts.h"
#include "coordinator/persistence/journal.h"
#include "coordinator/persistence/store.h"
#include "coordinator/planning/nightly_upload.h"
#include "coordinator/planning/sweep_reader.h"
#include "coordinator/scheduling/lease_table.h"
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
  QueueOrder queue_order = QueueOrder::kLongestFirst;
  bool device_probes = true;                          // SchedulingOptions::device_probes
  Duration verify_batch_max = std::chrono::hours(2);  // SchedulingOptions::verify_batch_max
  // SchedulingOptions::verify_batch_shard_max
  Duration verify_batch_shard_max = std::chrono::minutes(10);
  Duration verify_gather = std::chrono::minutes(5);  // SchedulingOptions::verify_gather
  BackupPolicy backups;                              // SchedulingOptions::backups
  // Once a sweep has measured this many verifications of entries planned at an estimate, their
  // mean stands in for such estimates in verify_batch_max (0: never).
  int learn_estimates_after = 5;
  // A registry wave is planned once the previous wave's first phases have ended, not all of its
  // shards (docs/farm.md, "Registry waves start early"). Off only to measure the barrier
  // (bench/fleet_sim --wave-barrier).
  bool early_waves = true;
  std::vector<std::string> default_archs = {"n150"};
  std::string default_executor = "native";
  double min_trusted_seconds = 5;
  SchedulingOptions scheduling() const {
    return {.lease_ttl = lease_ttl,
            .agent_dead_after = agent_dead_after,
            .offline_retention = offline_retention,
            .lease_wait_limit = lease_wait_limit,
            .backoff_base = backoff_base,
            .backoff_max = backoff_max,
            .max_infra_losses = max_infra_losses,
            .queue_order = queue_order,
            .device_probes = device_probes,
            .verify_batch_max = verify_batch_max,
            .verify_batch_shard_max = verify_batch_shard_max,
            .verify_gather = verify_gather,
            .backups = backups};
  }
  // Per entry, by playbook: the catalog's estimates (agent/playbooks/catalog.h).
  std::map<std::string, double> playbook_estimates = playbooks::CatalogEstimates();
};

// The sweep outputs, built from the accepted results on request (coordinator/core/sweep_outputs.h
// provides them; the server only serves them).
struct OutputProviders {
  // Tracking issues for the reasons a sweep writes (GetPatchRequest.issue_links): a failure
  // cluster's id or an entry's key -> URL. Empty: the outputs as built.
  using IssueLinks = std::map<std::string, std::string>;
  std::function<absl::StatusOr<v1::Patch>(const std::string& sweep_id, const IssueLinks& links)>
      patch;
  std::function<absl::StatusOr<v1::Report>(const std::string& sweep_id, const IssueLinks& links)>
      report;
};

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
  // A request naming an upload (nightly_upload) takes caller's upload's runs: the upload is
  // forgotten whether the sweep starts or not.
  absl::StatusOr<v1::Sweep> StartSweep(const v1::StartSweepRequest& req, const Caller& caller);
  // StartSweep's checks without starting anything: the request's fields, its request id (a
  // repeated one must ask for the same sweep, its nightly runs aside) and the repository, read
  // and pinned as the sweep would read it. The answer shows the repository and its commits (and
  // existing, for a request id that started a sweep already).
  absl::StatusOr<v1::Sweep> CheckSweep(const v1::CheckSweepRequest& req, const Caller& caller);
  // The nightly runs uploaded for StartSweep (UploadNightly); Tick drops the expired ones.
  NightlyUploads& uploads() { return uploads_; }
  absl::StatusOr<v1::Sweep> GetSweep(const std::string& id);
  std::vector<v1::Sweep> ListSweeps();
  absl::StatusOr<std::vector<v1::Shard>> ListShards(const v1::ListShardsRequest& req);
  // The audit log (docs/farm.md, "Audit"): the latest req.limit actions, of one sweep (its own
  // and its shards') when req.sweep_id is set; oldest first.
  absl::StatusOr<std::vector<v1::AuditEntry>> ListAudit(const v1::ListAuditRequest& req);
  absl::StatusOr<v1::Shard> RequeueShard(const std::string& id, const std::string& reason,
                                         const Caller& caller);
  absl::StatusOr<v1::Shard> CancelShard(const std::string& id, const std::string& reason,
                                        const Caller& caller);
  absl::StatusOr<v1::Sweep> CancelSweep(const std::string& id, const std::string& reason,
                                        const Caller& caller);
  // Sets a running sweep's failure budget: 0 (none) or above its failed shards, so a sweep
  // stopped at its budget leases again.
  absl::StatusOr<v1::Sweep> ResumeSweep(const std::string& id, int max_failed_shards,
                                        const std::string& reason, const Caller& caller);
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
  // When each entry-arch of like's repository was last rechecked (RecheckKey -> unix ms): the
  // accepted runs of every recheck sweep (docs/nightly.md, "Rechecking skipped entries").
  std::map<std::string, std::int64_t> RecheckedLocked(const SweepRecord& like) const;
  // The succeeded sweeps of like's repository (SameRepository) created before it, newest first
  // (by creation time, then sequence): the week-over-week comparison and the incremental base.
  std::vector<SweepRecord> EarlierSucceeded(const SweepRecord& like);
  absl::StatusOr<std::vector<ShardRecord>> Shards(const std::string& sweep_id);
  // Every durable attempt of a sweep's shards (which agent held which lease, for the report's
  // makespan), read from the store.
  absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string& sweep_id);

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
  GroupCommit::Stats commit_stats() const { return journal_.stats(); }

 private:
  // Per sweep, what its views and events show, kept in step with its shards (OnShardChanged)
  // and results (ApplyResultLocked) in sweep_accounting.cc.
  struct EntryRt {
    std::string playbook;
    int shards = 0;
    int terminal = 0;
    int active = 0;
    std::map<std::string, std::string> decided;  // arch -> OutcomeLabel of its latest result
    std::map<std::string, int> decided_wave;     // arch -> the wave of that result
    std::map<std::string, std::string> stage;    // arch -> the stage of that result
    bool review = false;                         // a result flagged it for human review
    // It was done with a decision once (CountDecidedLocked): triage_entry_outcomes_total counted
    // it, and CountLocked counts it decided from then on, "rechecking" while a later wave
    // reopens it.
    bool counted = false;
  };
  struct SweepRt {
    SweepRecord rec;
    std::vector<std::string> shard_ids;
    int unfinished = 0;  // shards not yet terminal (the sweep ends at 0)
    // Registry waves (docs/farm.md, "Registry waves start early"): first phases (probe, full)
    // not yet terminal, the sweep's latest own wave, the latest wave whose next wave is planned
    // (or found empty), and whether its executor's verify phases may propose registry lines.
    int open_first = 0;
    std::map<std::string, int> open_first_by_loader;  // the same, per loader
    // From first phases (not carried, not planned ahead): the output classes each loader's
    // entries returned. A loader none of whose classes was proposed a line (`proposed`) has
    // nothing to plan ahead (PlanAheadLocked).
    std::map<std::string, std::set<std::string>> classes_by_loader;
    std::map<std::string, std::vector<std::string>> shards_by_loader;  // ids, in creation order
    std::set<std::string> planned_ahead;  // shards still flagged `ahead`
    int wave = 0;
    std::set<std::pair<int, std::string>> proposed;  // (wave, class): a registry line proposed
    int next_wave_planned_after = 0;
    bool verify_may_change = false;
    std::map<std::string, EntryRt> entries;  // file + '\n' + key
    std::vector<ResultRecord> results;
    std::array<int, 8> by_state{};              // shards per ShardState
    std::map<std::string, LaneProgress> lanes;  // per ShardArch: open shards, results (ETA)
    std::vector<std::string> live_problems;     // work nobody can take, quarantined shards
    bool blocked = false;                       // nothing left can progress without a person
    // The failure budget (docs/farm.md, "The failure budget"): shards that failed on the farm
    // (an attempt that ended without a usable result: the agent reported a failure, or its
    // result was rejected; or quarantined), in the order they first failed, and whether the
    // sweep is past its budget (its shards are then held). A model's crash or timeout is its
    // entry's outcome and never counts.
    std::vector<std::string> farm_failed;
    bool over_budget = false;
    // Verifications measured of entries planned at an estimate, and their seconds
    // (LeaseTable::SetLearnedSeconds).
    int measured_estimated = 0;
    double seconds_estimated = 0;
  };

  // The skeleton every operation shares: under the state lock, op decides and stages its
  // changes (CommitLocked) and queues its replies and announcements in an Effects; then the
  // effects are handed to the group commit. kDurable waits until they ran (the writes are
  // durable, or lost: then that error is the answer); kAtOnce answers without waiting (for
  // answers that change nothing durable: heartbeats, progress). An error from op is returned
  // as it is: op staged nothing.
  enum class Ack { kDurable, kAtOnce };
  template <typename Op>
  auto Operate(Ack ack, Op&& op) -> decltype(op(std::declval<Effects&>())) {
    Effects after;
    auto answer = [&] {
      std::lock_guard lock(mu_);
      return op(after);
    }();
    if (!answer.ok()) return answer;
    if (ack == Ack::kAtOnce) {
      journal_.Settle(after);
    } else if (absl::Status st = journal_.SettleAndWait(after); !st.ok()) {
      return st;
    }
    return answer;
  }

  // The apply path: stages m with these records (Journal), then puts them into memory: the
  // lease table, the sweeps' accounting (through OnShardChanged), finished sweeps, waiting
  // long-polls. Recovery puts records read from the store through the same Put calls.
  absl::Status CommitLocked(Mutation& m, std::vector<ShardRecord>& shards,
                            std::vector<AgentRecord>& agents, Effects& after);
  void OnShardChanged(const ShardRecord* old, const ShardRecord& updated);
  void ApplyResultLocked(const ResultRecord& r);
  void LearnFromLocked(SweepRt& sw, const ShardRecord& shard, const ResultRecord& r);
  // After a failed commit: the store's state is the truth; rebuild memory from it.
  void Rebuild(const absl::Status& why);
  void ResetLocked();
  void RecoverLocked(Snapshot snap, Effects& after);

  // Agent service (coordinator.cc).
  // Grants shard and, for a verify phase, the batch the agent can run with it (max_batch).
  absl::StatusOr<v1::LeaseResponse> GrantLocked(const AgentRecord& agent, const ShardRecord& shard,
                                                const std::string& request_id, int max_batch,
                                                Effects& after);
  // Grants a second attempt of straggler to an idle agent (docs/farm.md, "Backup leases").
  absl::StatusOr<v1::LeaseResponse> GrantBackupLocked(const AgentRecord& agent,
                                                      const ShardRecord& straggler, Effects& after);
  void ServeWaitersLocked(Effects& after);
  absl::StatusOr<v1::CompleteResponse> CompleteLocked(const v1::CompleteRequest& req,
                                                      Effects& after);
  // A Complete that ends the attempt without a result: operation RejectResult or FailAttempt.
  // The shared scope's conflict rule (shared_scope.cc, docs/remediation.md): a result that edits
  // a shared file an earlier accepted result of its sweep edited differently is not recorded;
  // the shard runs again with that edit pre-applied. nullopt: no such conflict.
  std::optional<absl::StatusOr<v1::CompleteResponse>> RunAgainOnTopLocked(
      ShardRecord& s, const v1::ShardResult& result, Effects& after);
  absl::StatusOr<v1::CompleteResponse> EndAttemptLocked(ShardRecord s, const std::string& operation,
                                                        const std::string& why, Effects& after);
  absl::StatusOr<v1::CompleteResponse> RecordResultLocked(ShardRecord s,
                                                          const v1::ShardResult& result,
                                                          Effects& after);
  // Dependents of a shard that ended: released (succeeded) or failed/cancelled; a failure
  // cluster's followers are released whatever their lead's end (events: one line each).
  void CascadeLocked(const ShardRecord& ended, const v1::ShardResult* result,
                     std::vector<ShardRecord>& out, std::vector<std::string>* events = nullptr);
  int MaxAttempts(const ShardRecord& s) const;

  // Sweeps (sweeps.cc; their accounting in sweep_accounting.cc, registry waves in sweep_waves.cc).
  void MaybeFinishSweepLocked(const std::string& sweep_id, Effects& after);
  // The sweep a request id started, or null.
  const SweepRt* FindRequestLocked(const std::string& request_id) const;
  // StartSweep with the runs in the request (nightly), if any.
  absl::StatusOr<v1::Sweep> StartSweepWithRuns(const v1::StartSweepRequest& req,
                                               const Caller& caller);
  // The sweep an incremental start carries from: `since`, or the latest succeeded sweep of the
  // same repository whose work it can carry (CarryMismatch: the same archs, executor and
  // parameters, a playbook in common); nullptr: none. *why says which was picked and which
  // later ones were passed over, and why. Errors name a `since` that cannot be used. like: the
  // new sweep as planned (repo, request with its executor, archs, playbooks).
  absl::StatusOr<const SweepRt*> CarryBaseLocked(const SweepRecord& like, std::string* why) const;
  std::vector<const SweepRt*> EarlierSucceededLocked(const SweepRecord& like) const;
  // Shards counted against the sweep's failure budget; whether it is past it. CheckBudgetLocked
  // holds or releases its shards in the lease table when that changed.
  static int FailedShards(const SweepRt& s);
  // Counts shard_id as failed on the farm (once) and checks the budget.
  void NoteFarmFailureLocked(SweepRt& s, const std::string& shard_id);
  void CheckBudgetLocked(SweepRt& s);
  // A sweep started or read back: kept, and what the lease table derives from its request
  // (no backup leases under a device-time budget) told.
  void AddSweepLocked(SweepRt rt);
  // Plans the next registry wave of a sweep whose latest wave's first phases all ended (and, for
  // a command executor, its verify phases too); true when it made shards.
  bool PlanWaveLocked(const std::string& sweep_id, Effects& after);
  // The next wave as soon as it can be known: the latest wave's first phases all ended, while
  // its verify phases may still run (docs/farm.md, "Registry waves start early").
  void MaybePlanWaveEarlyLocked(SweepRt& sweep, Effects& after);
  // Before that: the next wave's shards of `loaders`, whose first phases of the latest wave have
  // all ended, from the registry lines merged so far (docs/farm.md, "Registry waves start
  // early"). PlanWaveLocked adopts or discards them.
  void PlanAheadLocked(SweepRt& sweep, const std::set<std::string>& loaders, Effects& after);
  // Verifications in `shards` likely superseded (the next wave verifies their entries again):
  // the queued first phases of their loader in the latest wave gate that next-wave shard, and
  // are ranked by it (ShardRecord::gates_seconds); those re-ranked are added to `shards`.
  void GateAheadLocked(const SweepRt& sweep, std::vector<ShardRecord>& shards) const;
  // A result's outcomes into its sweep's per-entry status (the latest wave's stands).
  void NoteDecidedLocked(SweepRt& sweep, const ResultRecord& r, int wave);
  // An entry that is done and has a decision is counted in triage_entry_outcomes_total under
  // the label reports count it under, once (docs/farm.md, "Metrics").
  void CountDecidedLocked(const SweepRt& sweep, EntryRt& e);
  // The queued verify phases of `wave` with the entries in `again` (those the wave after it
  // verifies) taken out, as updated copies: those left with none are succeeded (superseded).
  std::vector<ShardRecord> SupersededLocked(const SweepRt& sweep, int wave,
                                            const std::set<std::string>& again);
  // Among shards about to be committed: a verify phase queued again (from leased, running or
  // waiting) after its wave's next wave was planned drops the entries that wave verifies again.
  void SupersedeRequeuedLocked(std::vector<ShardRecord>& shards);
  // planning::AtRisk of verify phase s, with the sweep's proposed lines and its options.
  std::vector<bool> AtRiskLocked(const SweepRt& sweep, const ShardRecord& s,
                                 const std::set<std::string>& fresh) const;
  // A verify phase the next wave will most likely verify again: every entry is at risk.
  bool LikelySupersededLocked(const SweepRt& sweep, const ShardRecord& s) const;
  // Among shards about to be committed, queued verify phases of sweep: one whose every entry is
  // at risk is flagged likely_superseded; one with only some moves those to a new shard (added
  // to shards), flagged so. Returns a line per split for the sweep's events.
  std::vector<std::string> SplitAtRiskLocked(const SweepRt& sweep,
                                             const std::set<std::string>& fresh,
                                             std::vector<ShardRecord>& shards);
  // Verify phases just released (shards[from, to)): each entry known to run over
  // verify_batch_shard_max (a recorded duration, not an estimate) moves to a shard of its own, so
  // that a loader's long variants run on several agents at once instead of one after another
  // (docs/farm.md, "Long entries run apart"). New shards are added to shards; returns a line
  // per split for the sweep's events.
  std::vector<std::string> SplitLongLocked(const SweepRt& sweep, std::size_t from, std::size_t to,
                                           std::vector<ShardRecord>& shards);
  // A new shard of u's record (numbered `number` in its sweep, with no attempts) holding u's
  // entries flagged in `move`, which u gives up, with `share` of u's expected seconds.
  ShardRecord SplitOffLocked(ShardRecord& u, const std::vector<bool>& move, double share,
                             int number);
  // The number of the next shard made in sweep, counting the new ones among shards.
  int NextShardNumberLocked(const SweepRt& sweep, const std::vector<ShardRecord>& shards) const;
  static constexpr int kMaxWaves = 3;
  void FinishSweep(const std::string& sweep_id);
  // A scheduled FinishSweep that will not run (its trigger was lost): Tick schedules it again.
  void Unfinish(const std::string& sweep_id);
  void ScheduleFinishLocked(const std::string& sweep_id, Effects& after);
  void EmitLocked(const std::string& sweep_id, const std::string& message, Effects& after);
  v1::Sweep ViewLocked(const SweepRt& s) const;
  // The live counts of a sweep's entries; merged (see SettleCounts) replaces entries it names.
  // The entries of a sweep as CountEntries counts them (labels from `merged` where it has them).
  std::vector<EntryTally> TalliesLocked(const SweepRt& s,
                                        const std::map<std::string, EntryTally>* merged) const;
  // triage_entry_outcomes_total: each decided entry under its label, once per sweep (the caller
  // checks SweepDetails.outcomes_counted).
  void CountOutcomes(const std::vector<EntryTally>& tallies);
  v1::EntryCounts CountLocked(const SweepRt& s,
                              const std::map<std::string, EntryTally>* merged) const;
  static std::string EntryKey(const v1::ShardEntry& e) { return e.file() + "\n" + e.key(); }
  static std::string EntryStateName(const EntryRt& e);

  // On-call operations and time (on_call.cc).
  v1::Shard ShardViewLocked(const ShardRecord& s) const;
  v1::Agent AgentViewLocked(const AgentRecord& a) const;
  void AuditLocked(Mutation& m, const Caller& caller, std::string action, std::string target,
                   std::string reason);
  // Offline agents without leases whose last heartbeat is older than offline_retention leave
  // the fleet (memory and store).
  void ForgetOfflineAgentsLocked(TimePoint now, Effects& after);
  void ExpireLeasesLocked(TimePoint now, Effects& after);
  // Backups whose agents queued work needs end (LeaseTable::YieldBackups).
  void YieldBackupsLocked(TimePoint now, Effects& after);
  // Recomputes each running sweep's live problems (work no live agent can take, quarantined
  // shards) and whether it is blocked; tells watchers when that changed.
  void RefreshProblemsLocked(Effects& after);

  const CoordinatorOptions options_;
  Clock* const clock_;
  SweepReader reader_;
  CoordinatorMetrics default_metrics_;
  CoordinatorMetrics* metrics_;
  FinishHook finish_hook_;
  Journal journal_;

  mutable std::mutex mu_;
  std::mutex start_mu_;  // one StartSweep reading its input at a time (outside mu_)
  NightlyUploads uploads_;
  LeaseTable table_;
  std::int64_t next_seq_ = 1;
  std::int64_t next_sweep_ = 1;
  std::map<std::string, SweepRt> sweeps_;
  // Set while RecoverLocked replays the store: counters count what happens from now on, so
  // entries decided before the restart are marked counted without counting them again.
  bool recovering_ = false;
  std::set<std::string> finishing_;  // sweeps whose FinishSweep is scheduled or running
  std::map<int, std::pair<std::string, WatchCallback>> watchers_;
  int next_watch_ = 1;
};

}  // namespace triage::coord
