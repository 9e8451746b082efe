#pragma once

// The coordinator's state, as plain structs: what the scheduler works on and what the store
// persists. Shard specs and results are the wire messages themselves (triage/v1/types.proto).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock/clock.h"
#include "triage/v1/control.pb.h"
#include "triage/v1/types.pb.h"

namespace triage::coord {

enum class ShardState {
  kWaiting,  // depends on another shard that has not succeeded yet
  kQueued,   // eligible (possibly after a backoff) for a lease
  kLeased,   // granted, no progress reported yet
  kRunning,  // progress reported
  kSucceeded,
  kFailed,       // ended without a usable result (e.g. its dependency failed)
  kQuarantined,  // max attempts reached: waits for an operator
  kCancelled,
};
std::string_view ShardStateName(ShardState s);
std::optional<ShardState> ParseShardState(std::string_view name);
bool IsTerminal(ShardState s);  // succeeded, failed, cancelled

enum class SweepState { kRunning, kMerging, kSucceeded, kFailed, kCancelled };
std::string_view SweepStateName(SweepState s);
std::optional<SweepState> ParseSweepState(std::string_view name);

struct LeaseInfo {
  std::string lease_id;
  std::string agent_id;
  std::string session_id;
  std::int64_t token = 0;
  TimePoint granted_at;
  TimePoint deadline;  // not persisted: re-armed on recovery
  // Granted as a backup of a straggler (docs/farm.md, "Backup leases"); it stays one when the
  // shard's first lease ends and it carries the shard alone.
  bool backup = false;
};

struct ShardRecord {
  std::string id;
  std::string sweep_id;
  std::int64_t seq = 0;  // creation order
  v1::ShardSpec spec;
  ShardState state = ShardState::kQueued;
  int priority = 0;
  double expected_seconds = 0;
  int attempts = 0;  // leases granted since the last operator requeue, less infra_losses
  // Leases lost to the farm rather than to the work since the last operator requeue: expired
  // because an agent died or stopped, fenced by an agent's restart. They do not count toward
  // max_attempts; they have their own, higher bound (CoordinatorOptions::max_infra_losses).
  int infra_losses = 0;
  std::int64_t token = 0;  // fencing token of the latest grant (monotonic per shard)
  std::optional<LeaseInfo> lease;
  // A second lease of a leased shard that ran past its estimate, to an idle agent (docs/farm.md,
  // "Backup leases"). The first of the two attempts whose result is accepted decides the shard;
  // the other is fenced. When one of them fails or expires, the other carries the shard on as
  // its lease.
  std::optional<LeaseInfo> backup;
  std::string depends_on;  // shard id whose result this shard waits for
  TimePoint enqueued_at;
  TimePoint eligible_at;  // backoff: not leased before this
  std::string last_error;
  // Progress (in memory only).
  TimePoint last_progress_at;
  std::string last_step;
  std::string last_entry;
  std::vector<std::string> log_tail;
  // A verify phase whose every entry's output class got a registry line elsewhere in its wave:
  // the next wave verifies them again, so it is queued after the others, to be taken out when
  // that wave is planned (in memory only; docs/farm.md, "Registry waves start early").
  bool likely_superseded = false;
  // A first phase whose loader has an entry the next wave will verify again: the longest such
  // verification's estimate. The shard is queued as if its own verification took that long,
  // since the next wave's shard of the loader waits for it (in memory only; docs/farm.md,
  // "Registry waves start early").
  double gates_seconds = 0;

  // Requirements.
  std::vector<std::string> archs;  // device agents must have one of these arches
  bool cpu_ok = false;             // cpu_only agents may take it (probe phase)
};

// The lane a shard runs in: its arch, or "cpu" for a probe phase (cpu_only agents take it).
// Lanes progress in parallel: the sweep's ETA and the report's makespan are per lane.
inline constexpr std::string_view kCpuLane = "cpu";
std::string ShardLane(const ShardRecord& s);

// The shard's lease or backup lease with this id; null if neither has it.
const LeaseInfo* LeaseNamed(const ShardRecord& s, std::string_view lease_id);
LeaseInfo* LeaseNamed(ShardRecord& s, std::string_view lease_id);

struct AgentRecord {
  v1::AgentDimensions dims;
  std::string session_id;
  TimePoint registered_at;
  TimePoint last_heartbeat;
  bool draining = false;
  bool offline = false;
  std::set<std::string> leases;   // active lease ids
  std::set<std::string> revoked;  // leases the agent must stop (told on heartbeat)
  // Leases of a batch the agent runs whose shard another attempt decided
  // (LeaseTable::EndOtherAttempt): neither renewed nor revoked, so that the batch's other shards
  // run on.
  std::set<std::string> superseded;
};

struct SweepRecord {
  std::string id;
  std::int64_t seq = 0;
  SweepState state = SweepState::kRunning;
  v1::StartSweepRequest request;  // options as asked (durations_json dropped)
  std::string repo;
  std::string ttxla_commit;
  std::string forge_commit;
  std::vector<std::string> archs;
  std::vector<std::string> playbooks;
  std::vector<std::string> problems;
  v1::SweepDetails details;  // pin (gitlink, notes) and the final outcome counts
  std::string created_by;
  std::string error;
  TimePoint created_at;
  TimePoint finished_at;
};

// One repository: the same git URL (whatever the ref), or the same checkout path.
bool SameRepository(const SweepRecord& a, const SweepRecord& b);

struct AuditRecord {
  TimePoint at;
  std::string who;
  std::string role;
  std::string action;  // start_sweep, cancel_sweep, resume_sweep, requeue_shard, cancel_shard,
                       // drain, undrain
  std::string target;
  std::string reason;
};

// One attempt of a shard: a lease, and how it ended.
struct AttemptRecord {
  std::string shard_id;
  int attempt = 0;
  std::string lease_id;
  std::string agent_id;
  std::int64_t token = 0;
  TimePoint granted_at;
  TimePoint ended_at;
  std::string outcome;  // "" while open; succeeded, failed, expired, rejected, revoked, superseded,
                        // yielded (a backup that gave its agent to queued work)
  std::string reason;
  bool backup = false;  // the lease was a backup (LeaseInfo::backup)
};

struct ResultRecord {
  std::string lease_id;
  std::string shard_id;
  std::string sweep_id;
  std::int64_t token = 0;
  TimePoint accepted_at;
  v1::ShardResult result;
};

// Who called a control method (from the bearer token), for authorization and the audit log.
struct Caller {
  std::string name = "anonymous";
  std::string role;  // agent, operator, viewer ("" when auth is off)
};

}  // namespace triage::coord
