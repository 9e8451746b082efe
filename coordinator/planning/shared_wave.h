#pragma once

// The wave over what a shared fix can affect (docs/remediation.md, "The shared fix's wave"): a
// failure cluster's lead shard may fix a file outside its loader that other loaders import. Its
// wave shard, planned with the lead and waiting for it, checks that fix on the lead's arch with
// no command run: every selected entry outside the cluster and a sample of the currently passing
// entries, of the loaders that import a file the lead changed. A passing entry the fix breaks
// holds the fix back in the merge.

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/command/shared_scope.h"
#include "common/inventory/inventory.h"
#include "coordinator/model/model.h"
#include "coordinator/planning/selection.h"
#include "triage/v1/types.pb.h"

namespace triage::coord {

// The executor parameter that makes a command shard a wave shard: JSON
//   {"lead": "<shard id>", "clusters": ["<id>"], "sample": N,
//    "candidates": [{"file", "key", "status", "loader", "selected", "reason", "cluster"}]}
// (selected true: an entry of the sweep, with its reason and cluster when it has them; absent: a
// currently passing entry, of which the agent checks at most `sample`). Set by the coordinator
// only; a sweep's own params may not name it.
inline constexpr std::string_view kWaveParam = command::kWaveParam;
// Passing entries a wave checks at most, one per loader first.
inline constexpr int kWaveSample = 8;

bool IsWaveShard(const v1::ShardSpec& spec);

// The wave shard of the lead `lead` (a cluster's first shard, on its arch), numbered `id`:
// candidates are the selected single-device entries outside the lead's loader and the clusters
// it leads (`clusters`: their followers verify those), and
// every entry of `inventory` EXPECTED_PASSING on the arch (tensor-parallel ones aside). It waits
// for the lead (depends_on) and holds no entries of its own: the sweep's entries keep their own
// shards, and the wave's findings travel as its result's evidence (wave.json).
ShardRecord MakeWaveShard(const ShardRecord& lead, const std::string& id,
                          const std::vector<SelectedEntry>& selected,
                          const inventory::Inventory& inventory,
                          const std::set<std::string>& clusters);

// Releases `wave` when its lead ended. With the lead succeeded, its edits landing
// (CommandEditsLand) and a shared edit among them, the lead's file edits and registry lines are
// pre-applied and the wave is queued; otherwise it succeeds with nothing to check. Returns one
// line for the sweep's events.
std::string ReleaseWave(const ShardRecord& lead, const v1::ShardResult* result, ShardRecord& wave,
                        TimePoint now);

// What a wave shard found (its result's evidence "wave.json"), as the merge reads it.
struct WaveFindings {
  std::string lead;
  std::vector<std::string> shared_files;  // repo:path, pre-applied
  int candidates = 0;
  int not_affected = 0;  // candidates whose loader imports none of the files
  struct Check {
    std::string file, key, status, verdict, reason;
    bool selected = false;
  };
  std::vector<Check> checked;
  // Checked passing entries that did not pass with the fix: "key (verdict: reason)".
  std::vector<std::string> broke;
};
// Reads the findings from a wave result; false when it carries none (or they do not parse).
bool ReadWaveFindings(const v1::ShardResult& result, WaveFindings& out);

}  // namespace triage::coord
