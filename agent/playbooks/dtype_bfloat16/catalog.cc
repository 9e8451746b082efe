// The catalog entry of dtype_bfloat16 (docs/playbooks.md, "dtype_bfloat16").

#include "agent/playbooks/catalog.h"

namespace triage::playbooks::dtype_bfloat16 {
namespace {

// bfloat16 then float32, one document each.
constexpr std::string_view kProbeModes[] = {"dtype"};

// RE2 syntax, matched anywhere in the reason (docs/classify.md).
constexpr std::string_view kRules = R"yaml(run_modes: [training]
# The dtype_bfloat16 gate: BFloat16 plus one of the dtype signatures.
require: ['BFloat16']
flavors:
  - name: op_not_implemented
    any:
      - "not implemented for 'BFloat16'"
  - name: cross_dtype
    any:
      - 'must have the same dtype'
      - 'dtypes match'
      - 'expected scalar type'
)yaml";

}  // namespace

extern const CatalogEntry kCatalog;
const CatalogEntry kCatalog = {
    .name = "dtype_bfloat16",
    .version = "1",
    .estimate_seconds = 900,
    .rules = kRules,
    .probe_modes = kProbeModes,
};

}  // namespace triage::playbooks::dtype_bfloat16
