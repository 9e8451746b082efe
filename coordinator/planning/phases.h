#pragma once

// What the planner and the waves share: how shards are named and how a group of entries is laid
// out in phases (docs/farm.md, "A sweep"). Internal to coordinator/planning.

#include <cstdio>
#include <string>
#include <vector>

#include "coordinator/model/model.h"
#include "triage/v1/types.pb.h"

namespace triage::coord::planning {

// A probe phase's share of its group's expected seconds (the group's device time is the
// whole).
inline constexpr double kProbeShare = 0.2;

// "<sweep>-s007": shard numbers are per sweep and keep counting across waves.
inline std::string ShardId(const std::string& sweep_id, int n) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%03d", n);
  return sweep_id + "-s" + buf;
}

// A group's phases: a PROBE on cpu (split_probe) or the whole playbook on the first target,
// then a VERIFY per remaining target, each waiting for that first shard. `make(phase, arch)`
// builds one shard of the group.
template <typename MakeShard>
void AddPhases(const std::vector<std::string>& targets, bool split_probe, MakeShard&& make,
               std::vector<ShardRecord>& shards) {
  std::size_t verify_from = 0;
  if (split_probe) {
    shards.push_back(make(v1::PHASE_PROBE, std::string()));
  } else {
    shards.push_back(make(v1::PHASE_FULL, targets[0]));
    verify_from = 1;
  }
  const std::string first = shards.back().id;
  for (std::size_t i = verify_from; i < targets.size(); ++i) {
    ShardRecord v = make(v1::PHASE_VERIFY, targets[i]);
    v.depends_on = first;
    v.state = ShardState::kWaiting;
    shards.push_back(std::move(v));
  }
}

}  // namespace triage::coord::planning
