#pragma once

#include <string>
#include <vector>

#include "coordinator/model/model.h"
#include "coordinator/planning/planner.h"
#include "triage/v1/control.pb.h"

namespace triage::coord {

// An earlier sweep, as an incremental sweep reads it: every shard, and its accepted results in
// acceptance order.
struct CarryBase {
  std::string sweep_id;
  std::vector<const ShardRecord*> shards;
  const std::vector<ResultRecord>* results = nullptr;
};

// What the carried copies are rewritten to: the new sweep and its pins.
struct CarryTarget {
  std::string sweep_id;
  std::string ttxla_commit;
  std::string forge_commit;
  std::string repo_url;
  TimePoint now;
};

struct CarryPlan {
  std::vector<ShardRecord> shards;    // the copies: base states, ids numbered after the plan's
  std::vector<ResultRecord> results;  // the copies of their results, in the base's order
  v1::Carry summary;
  std::string note;  // one sentence for the sweep's notes: what was carried, why the rest runs
};

// Why nothing of base's results can be carried into like ("" when something can), as in
// "archs p150, not n150": every entry's input hash covers its archs (in order), executor,
// executor parameters and playbook (docs/farm.md, "Incremental sweeps"), so a sweep that differs
// in archs, executor or parameters, or shares no playbook with like, shares no hash with it. The
// base an incremental sweep picks without --since is the latest succeeded one with "" here.
std::string CarryMismatch(const SweepRecord& base, const SweepRecord& like);

// Incremental sweeps (docs/farm.md, "Incremental sweeps"). The unit is the loader, because all
// of a loader's playbooks edit its one directory: a loader is carried when the plan's entries
// of it, as (playbook, file, key, input hash), are exactly the base's first-wave entries of it,
// none without a hash, and every base shard of it (every wave) succeeded with a result (or
// with no entry left to verify). Its
// planned shards are then dropped from plan and replaced by copies of all its base shards and
// results, marked carried (ShardSpec.carried_from, the first sweep that ran them) and with
// their waves renumbered to end at 0, so this sweep's own waves (1, 2, ...) are always newer.
// The plan's remaining shards are renumbered densely (dependencies follow).
CarryPlan CarryForward(Plan& plan, const CarryBase& base, const CarryTarget& target);

}  // namespace triage::coord
