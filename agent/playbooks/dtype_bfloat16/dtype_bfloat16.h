#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "agent/playbooks/catalog.h"
#include "agent/playbooks/playbook.h"
#include "agent/playbooks/probe.h"

namespace triage::playbooks {

// docs/playbooks.md, "dtype_bfloat16" (the table of rows): what the bfloat16 and float32 phases
// say.
enum class DtypeRow {
  kProceed,        // bf16 failed with a BFloat16 signature, float32 ok (or failed only to unpack)
  kEscalate,       // both failed (float32 before unpack_forward_output)
  kNotReproduced,  // bf16 ok
  kOtherError,     // bf16 failed without a dtype signature
  kNeedsUnpack,    // bf16 ran forward, unpack_forward_output raised: the unpack playbook is next
};
DtypeRow ClassifyDtype(const ProbeDoc& bf16, const ProbeDoc& f32);
// unpack_forward_output raised in this phase (after the forward pass): the unpack playbook's
// failure, not a dtype one. A proceed row whose float32 phase shows it stops for that playbook
// once the dtype fix is in (docs/playbooks.md, "Chaining").
bool UnpackFailed(const ProbeDoc& phase);
bool HasBf16Signature(const std::string& text);
std::string_view DtypeRowName(DtypeRow row);

namespace dtype_bfloat16 {

// The catalog entry (catalog.cc) and the playbook (agent/playbooks/registrations.inc).
extern const CatalogEntry kCatalog;
std::unique_ptr<Playbook> Make();

}  // namespace dtype_bfloat16
}  // namespace triage::playbooks
