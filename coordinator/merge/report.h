#pragma once

#include <map>
#include <string>
#include <vector>

#include "coordinator/core/model.h"
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
