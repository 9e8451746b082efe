#pragma once

// Which entries a sweep takes (docs/remediation.md, "Selecting entries"): the classified entries
// of the selected playbooks, or every failing entry for a command executor, narrowed by a
// v1::Selection (keys, statuses, files, a reason pattern, failure clusters, a limit ranked by
// cluster size). Shared by the planner and `triagectl inventory select`, so that what the
// preview prints is what a sweep plans.

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/classify/classify.h"
#include "common/inventory/inventory.h"
#include "triage/v1/control.pb.h"
#include "triage/v1/types.pb.h"

namespace re2 {
class RE2;
}

namespace triage::coord {

// The playbook name of the entries a failing selection takes: no playbook handles them, the
// command executor's command does.
inline constexpr std::string_view kRemediatePlaybook = "remediate";

// The most keys one selection may name.
inline constexpr int kMaxSelectionKeys = 100'000;

// A v1::Selection checked and compiled.
class Selector {
 public:
  ~Selector();
  Selector(Selector&&) noexcept;
  Selector& operator=(Selector&&) noexcept;

  // InvalidArgument naming the field ("selection.reason_regex: ...") when a status is not a
  // failing status, the pattern is not RE2, a cluster is not c- and 8 hex digits, a key is
  // empty, or the limit is negative.
  static absl::StatusOr<Selector> Compile(const v1::Selection& selection);

  bool failing() const { return failing_; }
  int limit() const { return limit_; }
  // A failing selection's shared scope (checked "<repo>:<prefix>" paths) and whether its
  // clusters fan out from a lead (docs/remediation.md).
  const std::vector<std::string>& shared_paths() const { return shared_paths_; }
  bool fan_out() const { return fan_out_; }
  // The filters but the limit: the entry's status and reason on the arch the sweep sees it
  // failing on, and the cluster of that reason.
  bool Matches(std::string_view file, std::string_view key, std::string_view status,
               std::string_view reason, std::string_view cluster) const;

 private:
  Selector() = default;
  bool failing_ = false;
  int limit_ = 0;
  bool fan_out_ = false;
  std::vector<std::string> shared_paths_;
  std::set<std::string, std::less<>> keys_, statuses_, files_, clusters_;
  std::unique_ptr<re2::RE2> reason_;
};

// An entry a sweep takes, as its shards carry it.
struct SelectedEntry {
  const inventory::Document* document = nullptr;
  const inventory::Entry* entry = nullptr;
  std::string playbook;
  v1::ShardEntry shard_entry;  // key, file, flavor, reason, status, bringup_status,
                               // override_arch, captures, cluster
};

// A failure cluster among the entries that matched the filters.
struct SelectedCluster {
  std::string id;         // junit::ClusterIdOfReason
  std::string signature;  // junit::ReasonSignature
  std::string example;    // the first reason, as written
  int matched = 0;        // entries that matched the filters
  int taken = 0;          // of them, within the limit
};

struct Selection {
  std::vector<SelectedEntry> entries;     // inventory order
  std::vector<SelectedCluster> clusters;  // largest first, then by id; entries with a reason
  int matched = 0;                        // entries that matched the filters (before the limit)
  int without_reason = 0;                 // of them, entries with no reason (no cluster)
  // Entries left out, each with why: a file with validation errors, a key an error names.
  std::vector<std::string> problems;
};

struct SelectOptions {
  const classify::Classifier* rules = nullptr;  // the classified entries (not failing)
  std::vector<std::string> playbooks;           // empty: every playbook of the rules
  std::vector<std::string> archs;               // single-device target archs
};

// The entries the selector takes from the inventory. Failing: every test entry whose status is
// KNOWN_FAILURE_XFAIL or NOT_SUPPORTED_SKIP on one of its target archs (the sweep's archs;
// n300-llmbox for tensor-parallel entries), seen on the first such arch. Otherwise the entries
// the rules classify for a selected playbook. A file with an error of its own is left out whole;
// an error confined to one entry (a key defined in two files) leaves out that key only. With a
// limit, the entries of the largest clusters are taken first; entries without a reason come
// last, in inventory order, as do the ties.
Selection SelectEntries(const inventory::Inventory& inventory, const Selector& selector,
                        const SelectOptions& options);

}  // namespace triage::coord
