#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
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

// Per entry of verify phase `spec` (docs/farm.md, "Registry waves start early"): its output
// class got a registry line elsewhere in its wave, one the phase does not pre-apply, so the next
// wave will most likely verify it again. proposed: (wave, class) of every line the sweep's
// results proposed so far; fresh: classes a result not yet applied proposes. All false when
// early waves are off (`enabled`: the option, and no verify phase of the sweep can change a
// file), for a probe or full phase, a carried shard, and a shard at max_wave.
std::vector<bool> AtRisk(const v1::ShardSpec& spec, bool enabled, int max_wave,
                         const std::set<std::pair<int, std::string>>& proposed,
                         const std::set<std::string>& fresh);

// The entries of a queued verify phase that leave it to run in shards of their own (docs/farm.md,
// "Long entries run apart"), as indices from the last to the first: each with a recorded
// duration (not an estimate) over `limit` seconds, the first long one staying when every entry is
// long. None when limit <= 0, the phase has fewer than two entries, or it is within `fair_share`
// (each agent's share of its arch's queued work, itself included) as it is: splitting it would
// only add sessions.
std::vector<int> LongEntriesToSplit(const v1::ShardSpec& spec, double expected_seconds,
                                    double fair_share, double limit);

// Takes the entries in `again` (file + '\n' + key) out of verify phase u, which the next wave
// verifies again; true if it had any. One left with none is succeeded (superseded, last_error
// says by which wave); otherwise its expected seconds follow the entries left.
bool DropEntriesVerifiedAgain(ShardRecord& u, const std::set<std::string>& again);

// Gating ahead (docs/farm.md, "Registry waves start early"): per loader, the longest expected
// seconds of sweep_id's queued verify phases among `shards` that are likely superseded. The next
// wave verifies that loader again once its first phases have ended, so those first phases are
// queued as if they took that long.
std::map<std::string, double> VerificationsAgainByLoader(const std::vector<ShardRecord>& shards,
                                                         const std::string& sweep_id);
// Whether shard q takes `seconds` as the verification it gates: a queued first phase (not a
// verify phase, not planned ahead) of the sweep's current `wave` that gates less so far.
bool TakesGate(const ShardRecord& q, int wave, double seconds);

// Planning ahead (docs/farm.md, "Registry waves start early") reads every result, so it runs only
// for the loaders among `loaders` with an entry of a class that a result proposed a registry
// line for (proposed: (wave, class)); classes_by_loader: the output classes of each loader's
// entries.
std::set<std::string> LoadersWithLines(
    const std::set<std::string>& loaders,
    const std::map<std::string, std::set<std::string>>& classes_by_loader,
    const std::set<std::pair<int, std::string>>& proposed);

struct WavePlan {
  std::vector<ShardRecord> shards;     // the next wave (states waiting/queued, ids assigned)
  std::vector<v1::RegistryOp> merged;  // the registry lines every next-wave shard pre-applies
  std::vector<std::string> conflicts;  // "registry: class X: attributes a, b" (no line written)
  // At the wave (no ahead_scope): the shards planned ahead that join it, and those whose
  // inputs changed (docs/farm.md, "Registry waves start early").
  std::vector<std::string> adopted;
  std::vector<std::string> discarded;
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
//
// Shards flagged `ahead` count neither their results nor their wave. With ahead_scope, the
// next wave's shards of its loaders are planned ahead (flagged; entries a shard planned ahead
// already holds are left out) from the lines merged so far. Without, the wave is planned: a
// shard planned ahead whose entries, own classes' lines and loader edits are what the wave
// would give them is adopted (its entries are not planned again), the others are discarded.
struct AheadScope {
  std::set<std::string> loaders;  // `shards` holds every shard of these loaders, and only those
  int latest_wave = 1;            // the sweep's latest wave (its shards planned ahead aside)
  const std::set<std::string>& planned_ahead;  // every shard of the sweep still flagged `ahead`
};
WavePlan PlanNextWave(const std::string& sweep_id, const std::vector<const ShardRecord*>& shards,
                      const std::vector<ResultRecord>& results,
                      const std::vector<std::string>& archs, bool split_probe,
                      int first_shard_number, const AheadScope* ahead_scope = nullptr);

// Merges the registry proposals of results (identical proposals collapse), leaving out the
// results of skip_shards.
WavePlan MergeRegistry(const std::vector<ResultRecord>& results);
WavePlan MergeRegistry(const std::vector<ResultRecord>& results,
                       const std::set<std::string>& skip_shards);

}  // namespace triage::coord
