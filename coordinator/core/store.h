#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/core/model.h"

namespace triage::coord {

// A named state change applied atomically: all of its parts are written in one transaction or
// none is. The coordinator builds one per operation (GrantLease, ExpireLease, RecordResult, ...)
// and acknowledges the caller only after Apply returned OK.
struct Mutation {
  std::string name;
  std::vector<const SweepRecord*> sweeps;       // upserted (with their static data)
  std::vector<const ShardRecord*> shards;       // upserted (state, lease, counters)
  std::vector<const ShardRecord*> shard_specs;  // shards whose spec changed (also upserted)
  std::vector<const AgentRecord*> agents;       // upserted
  std::vector<AttemptRecord> attempts;          // upserted by (shard, attempt)
  std::optional<ResultRecord> result;           // inserted; one per lease id
  std::vector<AuditRecord> audit;               // appended
  std::vector<std::pair<std::string, v1::ShardEntry>> entries;  // (sweep id, entry) inserted
};

// Everything needed to rebuild the coordinator after a restart.
struct Snapshot {
  std::vector<SweepRecord> sweeps;
  std::vector<ShardRecord> shards;
  std::vector<AgentRecord> agents;
  std::vector<ResultRecord> results;  // accepted results, in acceptance order
};

class Store {
 public:
  virtual ~Store() = default;
  virtual absl::Status Apply(const Mutation& m) = 0;
  virtual absl::StatusOr<Snapshot> Load() = 0;
  virtual absl::StatusOr<std::vector<AttemptRecord>> Attempts(const std::string& shard_id) = 0;
  virtual absl::StatusOr<std::vector<AuditRecord>> AuditLog(int limit) = 0;
  // A cheap read and write round trip, for the health service.
  virtual absl::Status Check() = 0;
};

}  // namespace triage::coord
