// The catalog entry of unpack_forward_output (docs/playbooks.md, "unpack_forward_output").

#include "agent/playbooks/catalog.h"

namespace triage::playbooks::unpack_forward_output {
namespace {

constexpr std::string_view kProbeModes[] = {"structure"};

// RE2 syntax, matched anywhere in the reason (docs/classify.md).
constexpr std::string_view kRules = R"yaml(run_modes: [training]
flavors:
  # The runner's canonical reason for a model whose output class has no handler.
  - name: not_implemented
    any:
      - "tt-forge-models doesn't implement unpack_forward_output for this model"
  # The ValueError text itself, naming the class.
  - name: no_handler
    any:
      - 'No handler for class (\w+) exists in `unpack_forward_output`'
)yaml";

}  // namespace

extern const CatalogEntry kCatalog;
const CatalogEntry kCatalog = {
    .name = "unpack_forward_output",
    .version = "2",
    .estimate_seconds = 900,
    .rules = kRules,
    .probe_modes = kProbeModes,
};

}  // namespace triage::playbooks::unpack_forward_output
