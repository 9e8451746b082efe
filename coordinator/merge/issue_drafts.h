#pragma once

// Issue drafts (docs/remediation.md, "Issue drafts"): what a command sweep could not fix, one
// markdown draft per remediation cluster with tests still failing, ready to file in the tracker
// of the layer the cluster names. Built from the sweep's report.json alone: `triagectl sweep
// issues` writes them.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace triage::merge {

struct IssueDraft {
  std::string id;     // the fingerprint, or the failure cluster of the reason
  std::string by;     // "fingerprint" | "reason" (report.json's remediation[].by)
  std::string file;   // "fingerprint-<id>.md" | "cluster-<id>.md" (id made file-safe)
  std::string title;  // one line
  std::string body;   // markdown, ending in a newline
  int failing = 0;    // the cluster's tests the sweep left failing
};

struct IssueOptions {
  // Prefix of the evidence links ("" = paths as `sweep report --out DIR` writes them).
  std::string evidence_url;
};

// One draft per remediation cluster with tests still failing, the most failing first. Each says
// the fingerprint (or reason cluster) and layer, the sweep and commits it was found at (and the
// compiler pins the command reported), the error and the command's diagnosis, the failing tests
// per arch with their evidence, what the sweep tried (changes held for review, a shared fix held
// back) and how to run one; the list of tests stops at about 50,000 characters (a tracker caps
// an issue's text) and counts the rest. InvalidArgument when the report has no remediation section
// (not a command sweep's) or is not a sweep's report.
absl::StatusOr<std::vector<IssueDraft>> BuildIssueDrafts(const nlohmann::json& report,
                                                         const IssueOptions& options = {});

}  // namespace triage::merge
