// The catalog entry of nightly, the confirmation runner of nightly sweeps (docs/nightly.md,
// section 3). Its entries are the rules' candidates, not a reason's: it has no rule.

#include "agent/playbooks/catalog.h"

namespace triage::playbooks::nightly {

extern const CatalogEntry kCatalog;
const CatalogEntry kCatalog = {
    .name = "nightly",
    .version = "1",
    // One confirmation run of a test, until the runs' own durations say otherwise.
    .estimate_seconds = 300,
    .rules = "",
    .probe_modes = {},
    .selection = CatalogEntry::Selection::kNightly,
};

}  // namespace triage::playbooks::nightly
