#pragma once

// The sweep verbs that take a sweep's results: patch and report write them to a directory,
// diff compares two sweeps' reports (apply and pr-body: farm_land_cmd.h).

#include <filesystem>
#include <ostream>
#include <string>

#include "coordinator/triagectl/farm_common.h"

namespace triage::ctl::farm {

// Why path cannot be (or become) an output directory: it, or a directory above it, exists and
// is not a directory. "" when it can.
std::string OutDirProblem(const std::filesystem::path& path);

// `sweep patch ID --out DIR`: tt-xla.patch and tt-forge-models.patch in DIR.
int RunSweepPatch(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// `sweep report ID [--out DIR]`: report.md, report.json and the evidence files in DIR.
int RunSweepReport(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// sweep issues ID [--out DIR] [--evidence-url URL]: an issue draft per remediation cluster a
// command sweep left failing (merge::BuildIssueDrafts), printed or written one file each.
int RunSweepIssues(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// `sweep diff A B [--all]`: the two reports compared (docs/report.md, "Comparing two sweeps").
int RunSweepDiff(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);

}  // namespace triage::ctl::farm
