#pragma once

// Failure clusters (docs/report.md, "Failure clusters"): the outcomes a sweep leaves failing,
// grouped by the signature of their reason (junit::ReasonSignature), so that one bug can be filed
// per cluster.

#include <string>
#include <string_view>
#include <vector>

#include "common/junit/reason.h"

namespace triage::merge {

// One decided outcome that still fails: an entry on one arch and its reason.
struct FailingOutcome {
  std::string key;
  std::string arch;
  std::string reason;
};

struct FailureCluster {
  std::string id;         // ClusterId(signature)
  std::string signature;  // ReasonSignature of the reasons; "(no reason)" for empty ones
  std::string example;    // the first reason seen, as written
  struct Member {
    std::string key;
    std::vector<std::string> archs;  // in the order seen
  };
  std::vector<Member> entries;  // in the order first seen
};

// A cluster's stable id and the id of a reason's cluster (common/junit/reason.h).
using junit::ClusterId;
using junit::ClusterIdOfReason;

// Largest first (by entries), then by signature.
std::vector<FailureCluster> ClusterFailures(const std::vector<FailingOutcome>& failing);

}  // namespace triage::merge
