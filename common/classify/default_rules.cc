#include <string>
#include <string_view>

#include "agent/playbooks/catalog.h"
#include "common/classify/classify.h"

namespace triage::classify {

// The built-in rules are the registered playbooks' rule fragments, in registration order
// (agent/playbooks/registrations.inc; docs/playbooks.md, "Adding a playbook").
std::string_view DefaultRulesYaml() {
  static const std::string* const yaml = new std::string(playbooks::CatalogRulesYaml());
  return *yaml;
}

}  // namespace triage::classify
