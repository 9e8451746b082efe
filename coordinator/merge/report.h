#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/merge/clusters.h"
#include "coordinator/merge/makespan.h"
#include "coordinator/merge/merge.h"
#include "coordinator/merge/week_over_week.h"
#include "coordinator/model/model.h"
#include "coordinator/model/outcome_counts.h"

namespace triage::merge {

// One evidence file of an entry. Every shard of a sweep records files of the same names
// (junit/01-verify.xml on n150 and on p150), so a link names the shard's arch and wave.
struct EvidenceLink {
  std::string path;  // relative to the report's directory: evidence/<shard dir>/<name>
  std::string arch;  // the shard's arch ("" for a CPU probe phase)
  int wave = 1;
};

// report.md's label for a link: "n150: 01-verify.xml", "cpu: <key>.structure.0.json", and from
// the second wave on "p150 wave 2: 01-verify.xml".
std::string EvidenceLabel(const EvidenceLink& link);

struct ReportInput {
  const coord::SweepRecord* sweep = nullptr;
  const MergeOutput* merge = nullptr;
  // Evidence files of each entry, by file + key.
  std::map<std::string, std::vector<EvidenceLink>> evidence;
  // The YAML after the merge, per file (to resolve each entry's fields per arch).
  std::map<std::string, std::string> yaml_after;
  // Predicted vs actual time of the sweep (ComputeMakespan); all zero and no lanes when the
  // caller did not work it out.
  Makespan makespan;
  // A registry line covering at least this many entries is flagged for review.
  int many_entries = 3;
  // Settles the sweep's counts from the report's view of its entries (label and review, by
  // file + '\n' + key): the coordinator merges them with the entries that have no result, so
  // the report's totals and `sweep get` are one count (coordinator/model/outcome_counts.h).
  // Unset: the report's entries alone are counted.
  std::function<v1::EntryCounts(const std::map<std::string, coord::EntryTally>&)> settle_counts;
  // The sweep this one is compared with (report.json "week_over_week", report.md "Since ...");
  // unset: none.
  std::optional<PreviousReport> previous;
};

struct BuiltReport {
  std::string markdown;
  std::string json;
  std::vector<FailureCluster> clusters;  // as report.json lists them, largest first
  // A command sweep's remediation clusters (report.json's `remediation`), largest first.
  struct Remediation {
    std::string id;
    int fixed = 0;
    int failing = 0;
  };
  std::vector<Remediation> remediation;
};

// report.md for people and report.json for scripts (docs/report.md has the JSON contract):
// totals by playbook, outcome and stage; per entry the loader, flavor, probe finding, fix path
// and why the other path was not taken, the pytest outcome with the real error per arch, the
// YAML lines that changed, review flags, conflicts, and links to the evidence.
BuiltReport BuildReport(const ReportInput& input);

// The label an entry of the merge is counted under (coordinator/model/outcome_counts.h): its
// archs' labels (OutcomeLabel; the probe's under "") decided by DecidingLabel, as `sweep status`
// counts them; "conflict" when the merge could not place its change ("flagged" for a nightly
// entry, which the report lists for a person); "" when it has no result. report.json keeps it
// as each entry's `label`, and every count of the report and the pull request is of it.
std::string EntryLabel(const EntryMerge& e, const std::vector<std::string>& archs);

// The report is built when the sweep's last shard ends, while the sweep is still "merging"; its
// final state is recorded after that. This puts the sweep's state as it is now into a built
// report (report.md's title, report.json's "state"); false when the report already had it.
bool SetReportState(BuiltReport& report, const coord::SweepRecord& sweep);

}  // namespace triage::merge
