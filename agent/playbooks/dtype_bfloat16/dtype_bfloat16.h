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
  kProceed,        // bf16 failed with a BFloat16 signature, float32 ok
  kEscalate,       // both failed
  kNotReproduced,  // bf16 ok
  kOtherError,     // bf16 failed without a dtype signature
  kNeedsUnpack,    // unpack_forward_output raised in a phase: run the unpack playbook first
};
DtypeRow ClassifyDtype(const ProbeDoc& bf16, const ProbeDoc& f32);
bool HasBf16Signature(const std::string& text);
std::string_view DtypeRowName(DtypeRow row);

namespace dtype_bfloat16 {

// The catalog entry (catalog.cc) and the playbook (agent/playbooks/registrations.inc).
extern const CatalogEntry kCatalog;
std::unique_ptr<Playbook> Make();

}  // namespace dtype_bfloat16
}  // namespace triage::playbooks
