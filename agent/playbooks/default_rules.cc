#include <string>

#include "agent/playbooks/catalog.h"
#include "common/classify/classify.h"

namespace triage::playbooks {

// The built-in rules are the registered playbooks' rule fragments, in registration order
// (agent/playbooks/registrations.inc; docs/playbooks.md, "Adding a playbook").
const classify::Classifier& DefaultClassifier() {
  static const classify::Classifier* const rules = [] {
    auto c = classify::Classifier::FromYaml(CatalogRulesYaml(), "<built-in rules>");
    if (!c.ok()) std::abort();  // tests/unit/agent/playbooks/playbook_catalog_test.cc reads them
    return new classify::Classifier(std::move(*c));
  }();
  return *rules;
}

}  // namespace triage::playbooks
