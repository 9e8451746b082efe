#pragma once

#include <string>
#include <vector>

#include "coordinator/model/model.h"

namespace triage::coord {

// Outcomes that end an entry's shard work before verification (the playbook stopped: not
// reproduced, escalated, needs another playbook first, no fix, ...). Other outcomes (verified,
// or "ready" after a probe phase) are verified again by a later phase on another arch.
// Read from the outcome's disposition (docs/playbooks.md, "Dispositions"): NEEDS_REVIEW and
// NEEDS_PLAYBOOK stop; without one, from its verdict name.
bool NeedsVerification(const v1::EntryOutcome& outcome);
// A probe phase's outcome: ready, verified by a later phase (disposition VERIFY; without one,
// verdict "ready").
bool AwaitsVerification(const v1::EntryOutcome& outcome);

struct WavePlan {
  std::vector<ShardRecord> shards;     // the next wave (states waiting/queued, ids assigned)
  std::vector<v1::RegistryOp> merged;  // the registry lines every next-wave shard pre-applies
  std::vector<std::string> conflicts;  // "registry: class X: attributes a, b" (no line written)
};

// Registry-global scope (docs/farm.md, "A sweep", step 4). A registry line changes every model
// returning its class, so when a wave ends, every probed entry of the sweep whose output class got
// a merged registry line it was not verified with is verified again in the next wave, grouped per
// (playbook, loader), with all merged registry lines and the loader's earlier edits
// pre-applied. Two different attributes proposed for one class are a conflict: no line for that
// class, and its entries are not re-verified.
//
// shards: every shard of the sweep; results: accepted results in acceptance order.
// first_shard_number: the next free number for shard ids (<sweep>-sNNN).
WavePlan PlanNextWave(const std::string& sweep_id, const std::vector<const ShardRecord*>& shards,
                      const std::vector<ResultRecord>& results,
                      const std::vector<std::string>& archs, bool split_probe,
                      int first_shard_number);

// Merges the registry proposals of results (identical proposals collapse).
WavePlan MergeRegistry(const std::vector<ResultRecord>& results);

}  // namespace triage::coord
