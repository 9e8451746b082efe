#pragma once

#include <chrono>
#include <vector>

#include "common/clock/clock.h"
#include "coordinator/model/model.h"

namespace triage::coord {

// When an idle agent runs a second attempt of a shard that holds up its sweep (docs/farm.md,
// "Backup leases"). A shard is a straggler once its lease has run `after` times what it was
// expected to take from its grant (a batch's later shards wait for the ones before them), plus
// `slack`.
struct BackupPolicy {
  double after = 1.5;  // 0: no backup leases
  Duration slack = std::chrono::minutes(10);
  // A backup gives its agent to queued work that no idle agent takes (LeaseTable::YieldBackups);
  // off only to measure what that changes (bench/fleet_sim --no-backup-yield).
  bool yield = true;
};

// A leased shard an idle agent could run a backup of: its lease is another agent's, it has no
// backup yet, and the agent offers what it needs.
struct RunningShard {
  const ShardRecord* shard = nullptr;
  double expected_seconds = 0;  // from its lease's grant to its end, as planned
};

// When a lease granted at `granted_at`, expected to take `expected_seconds`, makes its shard a
// straggler.
TimePoint StragglerAt(TimePoint granted_at, double expected_seconds, const BackupPolicy& policy);

// The straggler to back up now: of the candidates past StragglerAt, the one furthest past it (the
// longer a run has overrun its estimate, the longer it is likely to go on), the oldest shard on a
// tie. Null when none is, or backups are off.
const ShardRecord* PickStraggler(const std::vector<RunningShard>& running,
                                 const BackupPolicy& policy, TimePoint now);

}  // namespace triage::coord
