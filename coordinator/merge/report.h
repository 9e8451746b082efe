#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "coordinator/core/model.h"
#include "coordinator/core/outcome_counts.h"
#include "coordinator/merge/merge.h"

namespace triage::merge {

struct ReportInput {
  const coord::SweepRecord* sweep = nullptr;
  const MergeOutput* merge = nullptr;
  // Evidence files of each entry (relative paths under the report's directory), by file + key.
  std::map<std::string, std::vector<std::string>> evidence;
  // The YAML after the merge, per file (to resolve each entry's fields per arch).
  std::map<std::string, std::string> yaml_after;
  // A registry line covering at least this many entries is flagged for review.
  int many_entries = 3;
  // Settles the sweep's counts from the report's view of its entries (label and review, by
  // file + '\n' + key): the coordinator merges them with the entries that have no result, so
  // the report's totals and `sweep get` are one count (coordinator/core/outcome_counts.h).
  // Unset: the report's entries alone are counted.
  std::function<v1::EntryCounts(const std::map<std::string, coord::EntryTally>&)> settle_counts;
};

struct BuiltReport {
  std::string markdown;
  std::string json;
};

// report.md for people and report.json for scripts (docs/report.md has the JSON contract):
// totals by playbook, outcome and stage; per entry the loader, flavor, probe finding, fix path
// and why the other path was not taken, the pytest outcome with the real error per arch, the
// YAML lines that changed, review flags, conflicts, and links to the evidence.
BuiltReport BuildReport(const ReportInput& input);

}  // namespace triage::merge
