#pragma once

// A command sweep's agent runs against its entries and its shared fixes (MergeOutput's
// command_runs and shared_fixes), from the results the merge took.

#include <vector>

#include "coordinator/merge/merge.h"

namespace triage::merge {

struct CommandWork {
  const coord::ShardRecord* shard = nullptr;
  const coord::ResultRecord* record = nullptr;
  bool lands = true;  // its file edits land (rejected means rejected)
};

// Fills out.command_runs and out.shared_fixes from the command results among `results`; called
// once the files are merged (out.changed_files says which shared files landed).
void SummariseCommandWork(const std::vector<CommandWork>& results, MergeOutput& out);

}  // namespace triage::merge
