#pragma once

// Guards in the merge (docs/remediation.md, "Guards"): every command result's change is scanned
// for workarounds (common/command/guards.h) by the farm itself. A result with one lands nothing
// on its own: its entries keep their YAML, its edits and registry lines stay out, and each entry
// and the pull request name what was found, for a reviewer to decide.

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/merge/command_work.h"
#include "coordinator/merge/merge.h"

namespace triage::merge {

// The entry's required_pcc on arch ("" = top level) as the pinned test-config file has it;
// none when it sets none.
using PccBefore = std::function<std::optional<double>(
    const std::string& file, const std::string& key, const std::string& arch)>;

// Scans the command results among `results` (a shared fix's wave aside), fills
// out.workarounds, and holds each result with a finding back (added to `held`), its entries'
// changes kept out with a review line naming each finding.
void HoldWorkaroundsForReview(const std::vector<CommandWork>& results, const PccBefore& before,
                              std::map<std::pair<std::string, std::string>, EntryMerge*>& entries,
                              std::set<const coord::ResultRecord*>& held, MergeOutput& out);

}  // namespace triage::merge
