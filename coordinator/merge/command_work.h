#pragma once

// A command sweep's agent runs against its entries and its shared fixes (MergeOutput's
// command_runs and shared_fixes), from the results the merge took.

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/merge/merge.h"

namespace triage::merge {

struct CommandWork {
  const coord::ShardRecord* shard = nullptr;
  const coord::ResultRecord* record = nullptr;
  bool lands = true;  // its file edits land (rejected means rejected)
};

// Keeps an entry's YAML as the pinned file has it (none of its outcomes' changes is applied),
// with `why` as a review line: what the shared fix's wave and the guards hold back.
void KeepAsItWas(EntryMerge& entry, std::string why);

// The shared fix's wave (docs/remediation.md, "The shared fix's wave"): for each lead whose wave
// found a passing entry failing with its change, or whose wave (among `shards`) has no result
// while the lead made a shared fix that lands, the lead's result stops landing (added to
// `held_back`), a `shared` conflict names the entries, and every entry the change fixed (the
// lead's passing ones, those fixed_by it) keeps its YAML as it was, with a review line saying
// why. entries: the merge's (file, key) -> the outcomes per arch and review lines.
void HoldBackBrokenSharedFixes(const std::vector<coord::ShardRecord>& shards,
                               const std::vector<CommandWork>& results,
                               std::map<std::pair<std::string, std::string>, EntryMerge*>& entries,
                               std::set<const coord::ResultRecord*>& held_back, MergeOutput& out);

// Fills out.command_runs and out.shared_fixes from the command results among `results`; called
// once the files are merged (out.changed_files says which shared files landed).
void SummariseCommandWork(const std::vector<CommandWork>& results, MergeOutput& out);

}  // namespace triage::merge
