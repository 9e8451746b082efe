// The catalog entry of missing_inputs: classified and planned (docs/classify.md), registered
// without a runner (agent/playbooks/registrations.inc), so an agent refuses its shards.

#include "agent/playbooks/catalog.h"

namespace triage::playbooks::missing_inputs {
namespace {

// RE2 syntax, matched anywhere in the reason (docs/classify.md).
constexpr std::string_view kRules = R"yaml(run_modes: [training]
flavors:
  - name: decoder_input_ids
    any:
      - 'You have to specify either decoder_input_ids or decoder_inputs_embeds'
  - name: detection_targets
    any:
      - 'targets should not be none when in training mode'
      - 'Model expects targets to be passed while in training mode'
      - "'NoneType' object has no attribute 'max'"
  - name: batchnorm_single_value
    any:
      - 'Expected more than 1 value per channel when training'
)yaml";

}  // namespace

extern const CatalogEntry kCatalog;
const CatalogEntry kCatalog = {
    .name = "missing_inputs",
    .version = "0",
    .estimate_seconds = 900,
    .rules = kRules,
    .probe_modes = {},
};

}  // namespace triage::playbooks::missing_inputs
