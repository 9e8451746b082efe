#pragma once

// How long a sweep took against what its planning predicted: report.json's "makespan" and
// report.md's "Makespan: predicted vs actual" (docs/report.md has the definitions).

#include <string>
#include <vector>

#include "coordinator/model/model.h"

namespace triage::merge {

// One lane: a device arch, or "cpu" for the probe phases (coord::ShardLane). Lanes run in
// parallel, each on its own agents.
struct LaneMakespan {
  std::string lane;
  int shards = 0;  // every shard the sweep planned in the lane, every wave
  // Distinct agents whose results were taken in the lane; at least 1, so that a lane nobody
  // worked on still has a prediction.
  int agents = 1;
  double predicted_device_seconds = 0;  // the sum of its shards' expected_seconds
  double actual_device_seconds = 0;     // the sum of its taken results' duration_seconds
  double predicted_seconds = 0;         // predicted_device_seconds / agents
  // From the start of its first result (accepted_at - duration_seconds, never before the
  // sweep's creation) to its last accepted result; 0 without results.
  double actual_seconds = 0;
  // Backup leases of the lane's stragglers (docs/farm.md, "Backup leases"): granted, those whose
  // result decided the shard, and the seconds every ended backup attempt ran.
  int backups = 0;
  int backups_won = 0;
  double backup_device_seconds = 0;
};

struct Makespan {
  double predicted_seconds = 0;     // the slowest lane's predicted_seconds
  double actual_seconds = 0;        // the sweep's creation to its last accepted result; 0 without
  std::vector<LaneMakespan> lanes;  // by lane name
  // What the prediction rests on: the distinct entries (file, key) the shards planned from a
  // trusted recorded duration, and those planned at an estimate (ShardEntry.estimated; an entry
  // estimated in any of its shards counts as estimated).
  int entries_recorded = 0;
  int entries_estimated = 0;
  // "durations" (every entry recorded), "estimates" (none), "mixed"; "" with no entry.
  std::string Basis() const;
};

// The figures of a sweep from its records. results: accepted results in any order; of each shard
// the one the merge takes counts (LatestResults). attempts: the attempts of the sweep's shards,
// any order (they name the agent that held each result's lease; a result whose attempt is
// missing counts no agent).
Makespan ComputeMakespan(const coord::SweepRecord& sweep,
                         const std::vector<coord::ShardRecord>& shards,
                         const std::vector<coord::ResultRecord>& results,
                         const std::vector<coord::AttemptRecord>& attempts);

}  // namespace triage::merge
