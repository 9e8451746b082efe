#include "agent/playbooks/catalog.h"

namespace triage::playbooks {

// Each registered playbook's folder defines <name>::kCatalog (its catalog.cc).
#define TRIAGE_PLAYBOOK(name)         \
  namespace name {                    \
  extern const CatalogEntry kCatalog; \
  }
#define TRIAGE_PLAYBOOK_CATALOG_ONLY(name) TRIAGE_PLAYBOOK(name)
#include "agent/playbooks/registrations.inc"
#undef TRIAGE_PLAYBOOK
#undef TRIAGE_PLAYBOOK_CATALOG_ONLY

namespace {

const CatalogItem kItems[] = {
#define TRIAGE_PLAYBOOK(name) {&name::kCatalog, true},
#define TRIAGE_PLAYBOOK_CATALOG_ONLY(name) {&name::kCatalog, false},
#include "agent/playbooks/registrations.inc"
#undef TRIAGE_PLAYBOOK
#undef TRIAGE_PLAYBOOK_CATALOG_ONLY
};

constexpr std::string_view kRulesHeader =
    "# triage-farm classification rules: YAML reason -> playbook and flavor.\n"
    "playbooks:\n";

}  // namespace

std::span<const CatalogItem> Catalog() { return kItems; }

const CatalogItem* FindInCatalog(std::string_view name) {
  for (const auto& item : kItems) {
    if (item.entry->name == name) return &item;
  }
  return nullptr;
}

std::map<std::string, double> CatalogEstimates() {
  std::map<std::string, double> out;
  for (const auto& item : kItems) out[std::string(item.entry->name)] = item.entry->estimate_seconds;
  return out;
}

std::string RuleYaml(const CatalogEntry& entry) {
  std::string out = "  - name: ";
  out.append(entry.name).append("\n");
  std::string_view rest = entry.rules;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    if (!line.empty()) out.append("    ").append(line);
    out.append("\n");
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  return out;
}

std::string CatalogRulesYaml() {
  std::string out(kRulesHeader);
  for (const auto& item : kItems) {
    if (item.entry->selection == CatalogEntry::Selection::kByReason) out += RuleYaml(*item.entry);
  }
  return out;
}

}  // namespace triage::playbooks
