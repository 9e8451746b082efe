#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock/clock.h"
#include "coordinator/metrics/metrics.h"
#include "coordinator/model/model.h"
#include "coordinator/persistence/store.h"
#include "coordinator/scheduling/backups.h"
#include "coordinator/scheduling/demand.h"
#include "triage/v1/agent.pb.h"

namespace triage::coord {

// The order queued shards are offered in, within a priority. kLongestFirst is the farm's
// policy (docs/farm.md, "Leases, fencing and retries"); kFifo (creation order) is a yardstick for
// bench/fleet_sim.
enum class QueueOrder { kLongestFirst, kFifo };

struct SchedulingOptions {
  Duration lease_ttl = std::chrono::seconds(60);         // lease life without heartbeats
  Duration agent_dead_after = std::chrono::seconds(30);  // silence before an agent is offline
  Duration offline_retention = std::chrono::hours(24);   // offline agents are then forgotten
  Duration lease_wait_limit = std::chrono::seconds(20);  // server cap on a Lease long-poll
  Duration backoff_base = std::chrono::seconds(10);      // requeue delay after attempt 1
  Duration backoff_max = std::chrono::minutes(10);
  int max_infra_losses = 10;
  QueueOrder queue_order = QueueOrder::kLongestFirst;
  // Device agents take probe-phase work when nothing of their arch is queued (AgentOffers).
  bool device_probes = true;
  // The longest a batch of verify phases is expected to run (BatchFor): what an agent's death
  // or a revocation can lose at once. A head longer than this runs alone.
  Duration verify_batch_max = std::chrono::hours(2);
  // A verify phase known to run longer than this (recorded durations, or the sweep's learned
  // seconds for estimated entries) runs alone, in a session of its own (BatchFor): a session's
  // start is a small share of it, so a batch saves little on it, while a crash in it costs its
  // re-run alone and its length is committed to one agent. 0: any shard may join a batch.
  Duration verify_batch_shard_max = std::chrono::minutes(10);
  // How long a device agent may pass over a verify phase that would run alone, probing its
  // wave instead so that the verifications gather into a batch (FindMatch). 0: never.
  Duration verify_gather = std::chrono::minutes(5);
  // When an idle agent with nothing queued for it runs a second attempt of a straggler
  // (FindStraggler; docs/farm.md, "Backup leases").
  BackupPolicy backups;
};

// Who is to blame for an attempt that ended without a result.
enum class Fault {
  kWork,            // the agent reported a failure, or a result broke the shard's rules
  kInfrastructure,  // the lease was lost: agent died, stopped, restarted; coordinator restart
};

// The scheduler's state (docs/farm.md, "Leases, fencing and retries"): the fleet of agents, every
// shard's record, the queue and the matching rule, Lease long-polls waiting for work, leases with
// their fencing tokens and deadlines, heartbeats, expiry, backoff and quarantine, and the checks a
// result passes at intake.
//
// It decides; it does not write. Methods that change a shard fill an updated copy and the
// attempt rows of a Mutation; the owner stages the mutation (Journal) and then puts the copies
// back with Put, the one apply path that live traffic and recovery share. In-memory-only
// changes (heartbeat times, lease deadlines, progress) are made in place.
//
// Not thread-safe: the owner (the coordinator's front door) calls it under its state lock.
class LeaseTable {
 public:
  // Called by Put before a shard's record is replaced (old is null for a new shard): the owner
  // keeps its per-sweep accounting in step.
  using ShardListener = std::function<void(const ShardRecord* old, const ShardRecord& updated)>;
  using LeaseCallback = std::function<void(absl::StatusOr<v1::LeaseResponse>)>;
  struct Waiter {
    std::int64_t id;
    std::string agent_id;
    std::string session_id;
    std::string request_id;
    int max_batch = 0;  // LeaseRequest.max_batch
    TimePoint deadline;
    LeaseCallback done;
  };

  LeaseTable(SchedulingOptions options, CoordinatorMetrics* metrics, ShardListener listener);

  // --- records ---------------------------------------------------------------------------
  const std::map<std::string, ShardRecord>& shards() const { return shards_; }
  const std::map<std::string, AgentRecord>& agents() const { return agents_; }
  const ShardRecord* FindShard(const std::string& id) const;
  const ShardRecord& shard(const std::string& id) const { return shards_.at(id); }
  AgentRecord* FindAgent(const std::string& id);
  // The shard holding a current lease, or null.
  const ShardRecord* ShardOfLease(const std::string& lease_id) const;
  // The shards waiting for this one to end.
  std::vector<std::string> Dependents(const std::string& shard_id) const;
  bool Accepted(const std::string& lease_id) const { return accepted_leases_.count(lease_id); }
  bool AnyCpuAgentServing() const;
  // The agent's fair share of the queued work of lane's arch and executor, plus extra seconds:
  // that work over every agent known to serve it (a batch's limit; whether a long entry is
  // verified apart, Coordinator::SplitLongLocked).
  double FairShare(const Requirement& lane, double extra) const;

  // The one apply path: records staged by the owner (or read back from the store) replace the
  // table's; Put keeps the queue, the demand, the lease index and the agents' lease sets in
  // step, and tells the listener.
  void Put(ShardRecord updated);
  void Put(AgentRecord updated);
  void PutResult(const ResultRecord& r) { accepted_leases_.insert(r.lease_id); }
  void Remove(const std::string& agent_id);
  void Clear();  // everything, after a failed commit (the store's state is rebuilt)
  // An agent read back after a restart: a grace period to re-attach, leases re-linked by Put.
  void Recovered(AgentRecord a, TimePoint now);
  // A shard read back after a restart: its lease (if any) gets a fresh deadline.
  void Recovered(ShardRecord s, TimePoint now);

  // --- agents ----------------------------------------------------------------------------
  std::string NewSessionId();
  // A restarted agent (a new session): its leases are fenced and their shards go back to the
  // queue, but for those whose finished results it holds (held) and is about to re-send:
  // their life starts again. Fills m's attempts; returns the updated shards.
  std::vector<ShardRecord> FenceRestartedAgent(const AgentRecord& previous,
                                               const std::set<std::string>& held, TimePoint now,
                                               Mutation& m);
  // In memory only: renews the leases the agent names, tells it which to stop.
  v1::HeartbeatResponse Heartbeat(const v1::HeartbeatRequest& req, TimePoint now);
  // An agent seen (heartbeat, lease call): online again.
  void Seen(AgentRecord& agent, TimePoint now);
  void MarkSilentAgentsOffline(TimePoint now);
  // Offline agents without leases, silent for longer than offline_retention.
  std::vector<std::string> ForgettableAgents(TimePoint now) const;
  // Every agent's silence and every lease's life count from now (a restart's grace).
  void StartGrace(TimePoint now);

  // What the sweep's verifications of entries without a trusted duration took, on average
  // (docs/farm.md, "Batched verification"): it stands in for such entries' estimates when a
  // batch is held to verify_batch_max. Not stored: the owner derives it from the results.
  void SetLearnedSeconds(const std::string& sweep_id, double seconds);

  // --- leases ----------------------------------------------------------------------------
  // The leases an agent already holds for this Lease request id (a retried call), the head
  // first; empty if none.
  std::vector<const ShardRecord*> SameRequest(const AgentRecord& agent,
                                              const std::string& request_id) const;
  // A held sweep's shards are not leased (a sweep past its failure budget); leases it already
  // granted run on. Not stored: the owner derives it from the records (Clear forgets it).
  void Hold(const std::string& sweep_id, bool held);
  bool Held(const std::string& sweep_id) const { return held_sweeps_.count(sweep_id) > 0; }
  // A sweep whose shards get no backup leases: one with a device-time budget, which backups
  // would overspend (docs/farm.md, "Backup leases"). Not stored: the owner derives it from the
  // sweep's request (Clear forgets it).
  void NoBackups(const std::string& sweep_id) { no_backup_sweeps_.insert(sweep_id); }
  // The first queued shard (priority, longest first, oldest) this agent may take now; for a
  // device agent, the first of its arch, else the first probe-phase shard (device_probes). A
  // device agent that asks for batches of max_batch passes over a verify phase that would run
  // alone for a probe of its wave that releases company for it (Gathers), or waits for a running
  // one (Holds: then the first probe-phase shard, or nullptr).
  const ShardRecord* FindMatch(const AgentRecord& agent, TimePoint now, int max_batch = 1) const;
  // The granted copy of shard for agent; fills m's attempt row.
  ShardRecord Grant(const AgentRecord& agent, const ShardRecord& shard, TimePoint now,
                    Mutation& m) const;
  // Further verify-phase shards the agent may run in the same workspace and pytest session as
  // head, which FindMatch chose (docs/farm.md, "Batched verification"): at most max_batch - 1.
  std::vector<const ShardRecord*> BatchFor(const AgentRecord& agent, const ShardRecord& head,
                                           int max_batch, TimePoint now) const;
  // position: the lease's place in its grant (0 for the head, then the batch's).
  void RememberRequest(const std::string& lease_id, const std::string& request_id,
                       int position = 0);
  // In memory only: what the lease was expected to take from its grant to its shard's end (a
  // batch's shard waits for those before it). FindStraggler measures a lease against it; a lease
  // without one (read back after a restart) against its shard's expected seconds.
  void RememberPlan(const std::string& lease_id, double seconds);
  // The response for granted leases: the head, then its batch.
  static v1::LeaseResponse Granted(const std::vector<const ShardRecord*>& leases);
  // --- backup leases (docs/farm.md, "Backup leases") -------------------------------------
  // The straggler an idle agent with nothing queued for it should run a second attempt of: a
  // leased shard of another agent that the agent could run, past the backup policy's due time
  // (PickStraggler). Null when there is none, or backups are off.
  const ShardRecord* FindStraggler(const AgentRecord& agent, TimePoint now) const;
  // The copy of shard with a backup lease for agent (a new fencing token; it does not count as
  // an attempt); fills m's attempt row.
  ShardRecord GrantBackup(const AgentRecord& agent, const ShardRecord& shard, TimePoint now,
                          Mutation& m) const;
  // The response for a backup grant: its lease and shard, no batch.
  static v1::LeaseResponse GrantedBackup(const ShardRecord& s);
  // The shard's result was accepted on its lease: its other attempt (backup) ends as
  // "superseded", recorded in m. Its agent is told to stop it, but for a shard of a batch: the
  // batch runs on (its shards share one session) and its late result is refused as stale.
  void EndOtherAttempt(ShardRecord& s, TimePoint now, Mutation& m);
  // Backups that yield to queued work (docs/farm.md, "Backup leases"): a backup lease whose
  // agent runs nothing else ends as "yielded" when work of its agent's own lane is queued that
  // no idle agent can take; its agent is told to stop it and asks for that work, and the first
  // attempt carries the shard on. At most one backup yields per queued shard a tick. Fills m's
  // attempts; returns the updated shards.
  std::vector<ShardRecord> YieldBackups(TimePoint now, Mutation& m);

  // In memory only: progress renews the lease; a leased shard turns running. Revoked when the
  // lease is not current.
  v1::ProgressResponse Progress(const v1::ProgressRequest& req, TimePoint now);

  // A failed attempt: requeue (work faults with backoff) or quarantine after max_attempts work
  // faults or max_infra_losses infrastructure faults. Fills the copy of the shard. A shard with
  // a backup lease is not requeued: its backup carries it on as its lease.
  void FailAttempt(ShardRecord& s, const std::string& outcome, const std::string& reason,
                   TimePoint now, Mutation& m, Fault fault, int max_attempts) const;
  // Ends the shard's lease and backup (if any) as "revoked": the attempts are recorded in m and
  // their agents are told to stop at their next heartbeat.
  void Revoke(ShardRecord& s, TimePoint now, const std::string& why, Mutation& m);
  // The attempt row of the shard's current lease, ended now.
  static AttemptRecord EndedAttempt(const ShardRecord& s, TimePoint now, std::string outcome,
                                    std::string reason);
  // The same for one of the shard's leases (its lease or its backup).
  static AttemptRecord EndedAttempt(const ShardRecord& s, const LeaseInfo& lease, TimePoint now,
                                    std::string outcome, std::string reason);
  // Leases past their deadline or on offline agents: the updated shards (m has the attempts). A
  // lost backup is dropped; a lost lease with a live backup hands the shard to it.
  std::vector<ShardRecord> ExpireLeases(TimePoint now, Mutation& m,
                                        const std::function<int(const ShardRecord&)>& max_attempts);

  // What a Complete may do with its lease. kAccept: the shard's copy is in shard, with the
  // lease the result came on as its lease and the other attempt, if any, as its backup.
  struct Intake {
    enum class Kind { kDuplicate, kStale, kAccept } kind = Kind::kStale;
    std::string metric_reason;  // kStale: unknown_lease, fencing
    std::string why;
    ShardRecord shard;
  };
  absl::StatusOr<Intake> Admit(const v1::CompleteRequest& req) const;

  // --- waiters ---------------------------------------------------------------------------
  std::int64_t AddWaiter(const v1::LeaseRequest& req, TimePoint now, LeaseCallback done);
  LeaseCallback CancelWaiter(std::int64_t id);
  // Long-polls past their deadline, and those of an agent (drained), removed.
  std::vector<Waiter> TakeExpiredWaiters(TimePoint now);
  std::vector<Waiter> TakeWaitersOf(const std::string& agent_id);
  std::vector<Waiter> TakeAllWaiters();
  // Serves waiting long-polls while shards match: grant(waiter, agent, shard) commits the grant
  // and answers; a waiter whose session is gone is answered reregister through reregister.
  // Re-entrant calls (a grant's commit serves waiters) return at once: the outer loop serves.
  void ServeWaiters(
      TimePoint now,
      const std::function<void(Waiter&, const AgentRecord&, const ShardRecord&)>& grant,
      const std::function<void(Waiter&)>& reregister);

  // --- the on-call view -------------------------------------------------------------------
  // Queued work no live, undrained agent can take; the gauges per (arch, reason) are reported.
  std::vector<Unservable> FindUnservable();
  // Per arch: the longest time a leased/running shard went without progress and the age of the
  // oldest queued shard.
  void ReportOnCallAges(TimePoint now);
  // Per arch: the live agents whose self-check found they cannot run tt-xla's runner.
  void ReportRunnerProblems();

  static std::string AgentStateName(const AgentRecord& a);
  // The lane a shard runs in: its arch, or "cpu" for a probe phase.
  static std::string ShardArch(const ShardRecord& s);

 private:
  // What a verify phase is expected to run, for verify_batch_max: its planned seconds, with the
  // sweep's learned seconds (SetLearnedSeconds) standing in for each entry planned at an
  // estimate.
  double CappedSeconds(const ShardRecord& s) const;
  // Whether a verify phase runs alone for its length (verify_batch_shard_max): only when its
  // seconds are known, a recorded duration for every entry or the sweep's learned seconds for
  // the estimated ones; an estimate alone says too little to keep a shard out of a batch.
  bool RunsAlone(const ShardRecord& s) const;
  // Whether a device agent should probe instead of running verify alone (docs/farm.md,
  // "Batched verification").
  bool Gathers(const AgentRecord& agent, const ShardRecord& verify, const ShardRecord& probe,
               int max_batch, TimePoint now) const;
  // Whether a device agent should wait rather than run verify alone: a running probe of its
  // wave, expected to end within verify's gather window, releases company for it.
  bool Holds(const AgentRecord& agent, const ShardRecord& verify, int max_batch,
             TimePoint now) const;
  // What Gathers and Holds share: a device agent asking for batches, verify a verify phase
  // queued less than verify_gather ago.
  bool MayGather(const AgentRecord& agent, const ShardRecord& verify, int max_batch,
                 TimePoint now) const;
  // The verify phase of verify's arch and executor that probe's result releases, if any.
  const ShardRecord* CompanyFrom(const ShardRecord& probe, const ShardRecord& verify) const;
  // Whether verify's batch is short of max_batch and, with company added, fits the fair share.
  bool RoomFor(const AgentRecord& agent, const ShardRecord& verify, const ShardRecord& company,
               int max_batch, TimePoint now) const;
  // A new lease of s for agent (s's token advanced), its open attempt row added to m.
  LeaseInfo NewLease(const AgentRecord& agent, ShardRecord& s, TimePoint now, bool backup,
                     Mutation& m) const;
  using QueueKey = std::tuple<int, bool, double, std::int64_t, std::string>;
  QueueKey KeyOf(const ShardRecord& s) const;
  void Enqueue(const ShardRecord& s);
  void Dequeue(const ShardRecord& s);
  bool Matches(const AgentRecord& agent, const ShardRecord& shard, TimePoint now) const;
  void AgentLeases(const std::string& agent_id, const std::string& lease_id, bool add);

  const SchedulingOptions options_;
  CoordinatorMetrics* const metrics_;
  const ShardListener listener_;

  std::map<std::string, ShardRecord> shards_;
  std::map<std::string, AgentRecord> agents_;
  std::map<std::string, std::string> lease_to_shard_;           // active leases
  std::map<std::string, std::vector<std::string>> dependents_;  // shard -> shards waiting on it
  // lease id -> the Lease request id and the lease's place in its grant
  std::map<std::string, std::pair<std::string, int>> lease_request_;
  std::set<std::string> accepted_leases_;
  std::set<std::string> held_sweeps_;
  std::set<std::string> no_backup_sweeps_;
  std::map<std::string, double> learned_;  // sweep -> SetLearnedSeconds
  std::map<std::string, double> planned_;  // lease id -> RememberPlan
  // Queued shards per requirement, each group in queue order (FindMatch looks at the heads).
  std::map<Requirement, std::set<QueueKey>> queue_;
  std::map<Requirement, double> queued_seconds_;  // per group, the expected seconds queued
  std::size_t queued_ = 0;
  Demand demand_;  // queued and waiting shards per sweep and requirement
  std::list<Waiter> waiters_;
  std::int64_t next_wait_id_ = 1;
  std::int64_t next_session_ = 1;
  bool serving_waiters_ = false;
  std::set<std::string> on_call_archs_;  // archs whose on-call ages were reported once
  std::set<std::string> runner_archs_;   // archs whose runner problems were reported once
  std::set<std::pair<std::string, std::string>> unservable_reported_;  // (arch, reason) gauges
};

}  // namespace triage::coord
