#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>

namespace triage::classify {
class Classifier;
}  // namespace triage::classify

namespace triage::playbooks {

// What the farm knows of a playbook without running it (docs/playbooks.md, "Adding a
// playbook"). Pure data: the coordinator and triagectl link it (triage_playbook_catalog) without
// any decision or process code.
struct CatalogEntry {
  // How a sweep selects a playbook's entries: by their reason (its classification rule), or as a
  // nightly sweep's candidates (docs/nightly.md; no rule, never classified).
  enum class Selection { kByReason, kNightly };
  std::string_view name;
  std::string_view version;
  // Planning estimate per entry, used until the farm has trusted durations (docs/farm.md).
  double estimate_seconds = 0;
  // The playbook's gate: its classification rule (docs/classify.md) without the name line, i.e.
  // run_modes, statuses, require and flavors, as YAML at indentation 0.
  std::string_view rules;
  // The PlaybookTools::Probe modes it asks for ("structure", "dtype", "inputs").
  std::span<const std::string_view> probe_modes;
  Selection selection = Selection::kByReason;
};

// One registered playbook (agent/playbooks/registrations.inc).
struct CatalogItem {
  const CatalogEntry* entry = nullptr;
  bool has_runner = false;  // false: classified and planned, no agent runs it yet
};

// Every registered playbook, in registration (= classification) order.
std::span<const CatalogItem> Catalog();
const CatalogItem* FindInCatalog(std::string_view name);

// Planning estimates per playbook name (CoordinatorOptions::playbook_estimates).
std::map<std::string, double> CatalogEstimates();

// One playbook's rule as an item of the rules' `playbooks:` list ("  - name: ...").
std::string RuleYaml(const CatalogEntry& entry);
// The rules document of every registered playbook selected by reason (`triagectl inventory
// rules` prints it).
std::string CatalogRulesYaml();
// The built-in classification rules: CatalogRulesYaml() read once.
const classify::Classifier& DefaultClassifier();

}  // namespace triage::playbooks
