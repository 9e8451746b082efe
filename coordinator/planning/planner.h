#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/classify/classify.h"
#include "common/inventory/inventory.h"
#include "coordinator/model/model.h"
#include "coordinator/planning/input_hash.h"
#include "coordinator/planning/selection.h"

namespace triage::coord {

struct PlanOptions {
  std::vector<std::string> playbooks;       // empty: every playbook of the rules
  std::vector<std::string> archs;           // single-device target archs (first = where FULL runs)
  std::map<std::string, double> durations;  // pytest node id -> seconds (.test_durations)
  std::string executor = "native";
  std::map<std::string, std::string> params;
  int priority = 0;
  // Probe phases go to cpu_only agents (then every arch gets a VERIFY shard); otherwise the
  // first arch's shard runs the whole playbook and the other archs verify its edits.
  bool split_probe = false;
  // Durations under this many seconds were recorded while the test was skipped: not trusted.
  double min_trusted_seconds = 5;
  std::map<std::string, double> playbook_estimates;  // per entry, when no trusted duration
  double default_estimate = 600;
  std::string repo_url;  // for agents
  // The pinned commits' trees: every selected entry gets its input hash (ShardEntry.input_hash).
  // nullptr: the inputs could not be read, and no entry has a hash.
  const InputTrees* inputs = nullptr;
  // A recheck sweep (docs/nightly.md, "Rechecking skipped entries"): when each skipped
  // entry-arch was last rechecked (RecheckKey -> unix ms), from the earlier recheck sweeps.
  const std::map<std::string, std::int64_t>* rechecked = nullptr;
  // A nightly or recheck sweep's options with its policy resolved (nightly::ResolvePolicy);
  // nullptr: the request's own.
  const v1::NightlyOptions* nightly_options = nullptr;
  // Which entries the sweep takes (the request's selection, compiled); nullptr: every entry
  // the rules classify for a selected playbook.
  const Selector* selector = nullptr;
};

// The key of an entry on an arch in PlanOptions::rechecked.
std::string RecheckKey(std::string_view file, std::string_view key, std::string_view arch);

struct Plan {
  std::vector<ShardRecord> shards;           // ids assigned, states waiting/queued
  std::vector<v1::ShardEntry> entries;       // every selected entry (with its file)
  std::vector<std::string> entry_playbooks;  // parallel to entries
  std::vector<std::string> problems;         // files skipped for validation errors, ...
  // Results decided when the sweep was planned (a nightly sweep's --no-confirm, budget and
  // report-only outcomes), for shards of shards that succeeded without a lease.
  std::vector<ResultRecord> decided;
  std::optional<v1::NightlyIntake> nightly;    // a nightly sweep's intake and the rules' counts
  std::optional<v1::RecheckCoverage> recheck;  // a recheck sweep's coverage of the skipped set
};

// The pytest node id of an entry, as .test_durations keys it.
std::string NodeId(const inventory::Document& doc, const inventory::Entry& entry);
// The same from the entry's test-config file (relative to the tt-xla root) and key, for those
// who hold no parsed document (the report, `triagectl sweep durations`).
std::string NodeId(std::string_view file, std::string_view key);

// Selects the entries a playbook handles and groups them into shards: one per (playbook,
// loader) for single-device entries (loader-wide scope), a separate one for tensor_parallel
// entries (n300-llmbox only). Files with validation errors are never edited: their entries are
// left out and named in problems.
Plan PlanSweep(const inventory::Inventory& inventory, const classify::Classifier& rules,
               const PlanOptions& options, const std::string& sweep_id,
               const std::string& ttxla_commit, const std::string& forge_commit);

// The planning step: which entries a sweep runs and its first shards. Three kinds: a nightly
// sweep's candidates from its runs (PlanNightly, coordinator/planning/nightly_plan.h;
// docs/nightly.md), a recheck of the skipped entries (PlanRecheck, the same file), else the
// entries the selected playbooks' classification rules take (PlanSweep).
Plan PlanEntries(const inventory::Inventory& inventory, const classify::Classifier& rules,
                 const v1::StartSweepRequest& request, const PlanOptions& options,
                 const std::string& sweep_id, const std::string& ttxla_commit,
                 const std::string& forge_commit, TimePoint now);

}  // namespace triage::coord
