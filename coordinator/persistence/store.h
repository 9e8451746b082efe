#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/model/model.h"

namespace triage::coord {

// A named state change applied atomically: all of its parts are written or none is. The
// coordinator builds one per operation (GrantLease, ExpireLease, RecordResult, ...) and
// acknowledges the caller only after the store made it durable (see Store).
struct Mutation {
  std::string name;
  std::vector<const SweepRecord*> sweeps;  // upserted (with their static data)
  // Shards whose state, lease, counters or last error changed: only those columns are updated,
  // and the shard must already be stored (through shard_specs, in this mutation or an earlier
  // one); a shard that is not makes the commit fail. A shard also in shard_specs is written
  // from there.
  std::vector<const ShardRecord*> shards;
  // New shards, written whole, and shards whose spec changed: their spec and the columns
  // `shards` updates are rewritten; what planning fixed when the shard was created (sweep,
  // seq, priority, expected time, dependency, archs, cpu_ok) keeps its first value.
  std::vector<const ShardRecord*> shard_specs;
  std::vector<const AgentRecord*> agents;     // upserted
  std::vector<std::string> removed_agents;    // deleted (offline past their retention)
  std::vector<AttemptRecord> attempts;        // upserted by (shard, attempt)
  std::optional<ResultRecord> result;         // inserted; one per lease id
  std::vector<ResultRecord> carried_results;  // inserted: an incremental sweep's copies
  std::vector<AuditRecord> audit;             // appended
  std::vector<std::pair<std::string, v1::ShardEntry>> entries;  // (sweep id, entry) inserted
};

// Everything needed to rebuild the coordinator after a restart.
struct Snapshot {
  std::vector<SweepRecord> sweeps;
  std::vector<ShardRecord> shards;
  std::vector<AgentRecord> agents;
  std::vector<ResultRecord> results;  // accepted results, in acceptance order
};

// Writes are group-committed: Stage writes one Mutation into the store's open transaction and
// returns its ticket; Flush commits everything staged so far. A mutation is durable once a
// Flush returned a ticket at least as high as its own, and only then may the coordinator
// acknowledge it. Tickets are increasing and start at 1.
class Store {
 public:
  virtual ~Store() = default;
  // All of m or none of it (a failed Stage leaves the open transaction as it was).
  virtual absl::StatusOr<std::uint64_t> Stage(const Mutation& m) = 0;
  // Commits the open transaction; returns the highest durable ticket (the same as last time
  // when nothing was staged). On error everything staged since the last successful Flush is
  // lost.
  virtual absl::StatusOr<std::uint64_t> Flush() = 0;
  // Drops the open transaction, if any (after a failed Flush, before the state is reloaded);
  // returns the highest ticket handed out so far: every ticket above the last durable one, up
  // to it, is lost.
  virtual std::uint64_t Abort() = 0;
  virtual absl::StatusOr<Snapshot> Load() = 0;
  virtual absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string& shard_id) = 0;
  virtual absl::StatusOr<std::vector<AuditRecord>> AuditLog(int limit) = 0;
  // A cheap write round trip, for the health service. A store kept in a file first makes sure
  // the file is still the one open (see FileIntact).
  virtual absl::Status Check() = 0;
  // False when the store's file is no longer the one it has open (deleted, or replaced by
  // another file); cheap enough to call on every tick. Stores without a file: always true.
  virtual bool FileIntact() { return true; }
};

}  // namespace triage::coord
