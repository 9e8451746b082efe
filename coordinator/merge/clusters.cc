#include "coordinator/merge/clusters.h"

#include <algorithm>
#include <map>

#include "common/junit/reason.h"

namespace triage::merge {

std::vector<FailureCluster> ClusterFailures(const std::vector<FailingOutcome>& failing) {
  std::map<std::string, FailureCluster> by_signature;
  for (const auto& f : failing) {
    const std::string signature =
        f.reason.empty() ? "(no reason)" : junit::ReasonSignature(f.reason);
    FailureCluster& c = by_signature[signature];
    if (c.signature.empty()) {
      c.id = ClusterId(signature);
      c.signature = signature;
      c.example = f.reason;
    }
    auto member = std::find_if(c.entries.begin(), c.entries.end(),
                               [&](const FailureCluster::Member& m) { return m.key == f.key; });
    if (member == c.entries.end()) {
      c.entries.push_back({f.key, {}});
      member = c.entries.end() - 1;
    }
    if (std::find(member->archs.begin(), member->archs.end(), f.arch) == member->archs.end()) {
      member->archs.push_back(f.arch);
    }
  }
  std::vector<FailureCluster> out;
  out.reserve(by_signature.size());
  for (auto& [signature, c] : by_signature) out.push_back(std::move(c));
  std::stable_sort(out.begin(), out.end(), [](const FailureCluster& a, const FailureCluster& b) {
    return a.entries.size() > b.entries.size();
  });
  return out;
}

}  // namespace triage::merge
