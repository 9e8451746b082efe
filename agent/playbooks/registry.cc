#include "agent/playbooks/registry.h"

#include <memory>
#include <vector>

namespace triage::playbooks {

// Each registered playbook's folder defines <name>::Make().
#define TRIAGE_PLAYBOOK(name)       \
  namespace name {                  \
  std::unique_ptr<Playbook> Make(); \
  }
#define TRIAGE_PLAYBOOK_CATALOG_ONLY(name)
#include "agent/playbooks/registrations.inc"
#undef TRIAGE_PLAYBOOK
#undef TRIAGE_PLAYBOOK_CATALOG_ONLY

std::span<const Playbook* const> RegisteredPlaybooks() {
  // Made once and kept for the process: playbooks hold no state of a run.
  static const std::vector<const Playbook*>* const playbooks = [] {
    auto* out = new std::vector<const Playbook*>;
#define TRIAGE_PLAYBOOK(name) out->push_back(name::Make().release());
#define TRIAGE_PLAYBOOK_CATALOG_ONLY(name)
#include "agent/playbooks/registrations.inc"
#undef TRIAGE_PLAYBOOK
#undef TRIAGE_PLAYBOOK_CATALOG_ONLY
    return out;
  }();
  return *playbooks;
}

const Playbook* FindPlaybook(std::string_view name) {
  for (const Playbook* p : RegisteredPlaybooks()) {
    if (p->Name() == name) return p;
  }
  return nullptr;
}

}  // namespace triage::playbooks
