#pragma once

#include <span>
#include <string_view>

#include "agent/playbooks/playbook.h"

namespace triage::playbooks {

// The playbooks an agent runs: those of agent/playbooks/registrations.inc registered with a
// runner, in registration order. A catalog-only entry (CatalogItem::has_runner false) has none.
std::span<const Playbook* const> RegisteredPlaybooks();
const Playbook* FindPlaybook(std::string_view name);

}  // namespace triage::playbooks
