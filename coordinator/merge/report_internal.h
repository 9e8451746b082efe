#pragma once

// What the source files of the report (BuildReport, SetReportState) share, and nothing outside
// them uses:
//   report.cc       the report put together: each entry's facts and counts, the classes'
//                   reach, report.json's state brought up to date;
//   report_json.cc  report.json's parts: the sweep, each entry, the totals, the clusters and
//                   the measured times;
//   report_md.cc    report.md's sections, each entry's among them;
//   report_remediation.cc  a command sweep's clusters (report.json's `remediation`).

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/diff/apply_diff.h"
#include "common/inventory/document.h"
#include "coordinator/merge/report.h"
#include "nlohmann/json.hpp"

namespace triage::merge {
namespace report_internal {

using nlohmann::json;

// How many entries of the sweep return each output class: what a registry line covers.
using ClassCounts = std::map<std::string, int>;

// What the report says of one entry beyond the merge's record, worked out once for its JSON row,
// its count and its markdown.
struct EntryFacts {
  // The archs its outcome is decided on.
  std::vector<std::string> targets;
  // The entry as it reads after the patch; null when the merge left it as it was.
  const inventory::Entry* final_entry = nullptr;
  // The merge's review flags, and the report's own on a registry line's reach.
  std::vector<std::string> review;
  // The inference outcome, "" when no inference run reported one.
  std::string inference;
  // The label it is counted under (outcome_counts.h); "" for no result.
  std::string label;
  // Its evidence links; null when it has none.
  const std::vector<EvidenceLink>* evidence = nullptr;
};

// The report's counts, gathered entry by entry.
struct Tallies {
  std::map<std::string, std::map<std::string, int>> by_playbook;  // playbook -> outcome -> n
  std::map<std::string, int> by_stage;                            // bringup_status -> n
  std::map<std::string, coord::EntryTally> entries;               // file + '\n' + key
};

// report.cc
std::string PartialNote(const coord::SweepRecord& sweep);
bool HasFixStep(const EntryMerge& e, std::string_view prefix, bool exact);
std::vector<std::string> PlaybooksOf(const EntryMerge& e);
int EntriesOfClass(const ClassCounts& per_class, const std::string& cls);

// report_json.cc
json SweepJson(const coord::SweepRecord& sweep, const MergeOutput& merge,
               const ClassCounts& per_class);
json EntryJson(const EntryMerge& e, const EntryFacts& f, const std::vector<std::string>& archs);
json TotalsJson(const v1::EntryCounts& counts, const std::map<std::string, int>& by_outcome,
                const Tallies& t, std::size_t conflicts);
std::vector<FailingOutcome> FailingOutcomes(const json& entries);
json ClustersJson(const std::vector<FailureCluster>& clusters);
void AddMeasuredTimes(const EntryMerge& e, json& entry);
json MakespanJson(const Makespan& m);

// report_remediation.cc
json CommandSummaryJson(const v1::CommandSummary& s);
// A command sweep's clusters, from report.json's entries (their fingerprint, else cluster).
json RemediationJson(const json& entries);
std::string RemediationMd(const json& clusters);
// Agent runs against entries and the shared fixes (report.json's command_runs, shared_fixes).
json CommandRunsJson(const CommandRuns& runs);
json SharedFixesJson(const std::vector<SharedFix>& fixes);
// report.json's "workarounds" and report.md's "Workarounds held for review" (docs/remediation.md,
// "Guards"; "" when none).
json WorkaroundsJson(const std::vector<WorkaroundsFound>& held);
std::string WorkaroundsMd(const std::vector<WorkaroundsFound>& held);
// report.json's "provenance": each command result's provenance.json by shard (docs/remediation.md,
// "Provenance"); one that is not a JSON object reads as {"error": …}.
json ProvenanceJson(const std::map<std::string, std::string>& by_shard);
std::string CommandWorkMd(const CommandRuns& runs, const std::vector<SharedFix>& fixes);

// report_md.cc
std::string Md(std::string_view s);
std::string Code(std::string_view s);
std::string YamlDiffLines(const EntryMerge& e);
std::string Title(const coord::SweepRecord& sweep);
std::map<std::string, std::vector<diff::Hunk>> ForgeHunksByFile(const std::string& forge_patch);
std::string HeaderMd(const coord::SweepRecord& sweep);
std::string TotalsMd(const v1::EntryCounts& counts, const std::map<std::string, int>& by_outcome,
                     const Tallies& t);
std::string RegistryMd(const std::vector<v1::RegistryOp>& registry, const ClassCounts& per_class);
std::string ConflictsMd(const std::vector<std::string>& conflicts);
std::string EntryMd(const EntryMerge& e, const EntryFacts& f,
                    const std::map<std::string, std::vector<diff::Hunk>>& forge_hunks);
std::string ClustersMd(const std::vector<FailureCluster>& clusters,
                       const std::vector<std::string>& archs);
std::string MakespanMd(const Makespan& m);

}  // namespace report_internal
}  // namespace triage::merge
