// The catalog entry of missing_inputs (docs/playbooks.md, "missing_inputs").

#include "agent/playbooks/catalog.h"

namespace triage::playbooks::missing_inputs {
namespace {

// train (train(), forward, unpack) then eval (eval(), no_grad, forward), one document each.
constexpr std::string_view kProbeModes[] = {"inputs"};

// RE2 syntax, matched anywhere in the reason (docs/classify.md). The flavor only gates: the
// probe decides the sub-pattern (docs/playbooks.md, "missing_inputs"). stale_suspect reasons
// were recorded against older environments or forwards; missing_package may also be an
// unrelated import failure, which the probe tells apart.
constexpr std::string_view kRules = R"yaml(run_modes: [training]
flavors:
  - name: decoder_input_ids
    any:
      - 'You have to specify either decoder_input_ids or decoder_inputs_embeds'
  - name: detection_targets
    any:
      - 'targets should not be none when in training mode'
  - name: batchnorm_single_value
    any:
      - 'Expected more than 1 value per channel when training'
  - name: stale_suspect
    any:
      - 'Model expects targets to be passed while in training mode'
      - "'NoneType' object has no attribute 'max'"
      - 'EOFError: Ran out of input'
  - name: missing_package
    any:
      - 'No module named'
)yaml";

}  // namespace

extern const CatalogEntry kCatalog;
const CatalogEntry kCatalog = {
    .name = "missing_inputs",
    .version = "1",
    .estimate_seconds = 900,
    .rules = kRules,
    .probe_modes = kProbeModes,
};

}  // namespace triage::playbooks::missing_inputs
