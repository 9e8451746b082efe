#pragma once

// missing_inputs (docs/playbooks.md, "missing_inputs"): training failures where the model's
// forward needs inputs that the loader's load_inputs does not build, a BatchNorm that rejects a
// batch of one, and reasons that no longer hold. The YAML reason only gates; the CPU probe's
// train and eval phases decide the sub-pattern.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/playbooks/catalog.h"
#include "agent/playbooks/playbook.h"
#include "agent/playbooks/probe.h"

namespace triage::playbooks::missing_inputs {

// What the probe's two phases show (docs/playbooks.md, "missing_inputs", the table of rows).
enum class SubPattern {
  kMissingPackage,    // the loader (or the model) imports a package the machine lacks
  kNotReproduced,     // the training forward and unpack ran: the reason is stale
  kNeedsUnpack,       // forward ran, unpack_forward_output has no handler: that playbook is next
  kNeedsDtype,        // a bfloat16 dtype error: dtype_bfloat16 is next
  kSeq2Seq,           // decoder inputs missing
  kBatchNorm,         // a BatchNorm got one value per channel in training
  kDetectionTargets,  // a torchvision-style detection forward asserts on targets in training
  kYoloTargets,       // a YOLO-family head asserts on targets in training
  kTargetsNoRule,     // an assert in a forward with targets, of no known family
  kMismatched,        // any other error: not this playbook's
};
std::string_view SubPatternName(SubPattern p);
bool Fixable(SubPattern p);

SubPattern ClassifyInputs(const ProbeDoc& train, const ProbeDoc& eval);

// Whether an error message is one of the training-input failures this playbook fixes (decoder
// inputs, a BatchNorm batch of one, detection targets): another playbook whose re-probe shows it
// stops the entry for missing_inputs (docs/playbooks.md, "Chaining").
bool HasMissingInputsSignature(std::string_view message);

// pip's flags for a requirements file next to a loader, by its name ("-r", "--no-deps -r", ...).
std::string PipFlagsFor(std::string_view requirements_file);

// The load_inputs edit for a fixable sub-pattern.
struct EditRequest {
  SubPattern pattern = SubPattern::kMismatched;
  const ProbeDoc* train = nullptr;  // the train phase before the edit (inputs, forward, config)
  // kBatchNorm: the ModelVariant members of the gated variants, and whether the default changes
  // (every gated variant's inference entry already fails) instead of a variant condition.
  std::vector<std::string> variant_members;
  bool change_default = false;
};
struct InputsEdit {
  std::string text;                 // the new loader
  std::string description;          // one line: what changed
  std::vector<std::string> review;  // judgment calls the edit made (docs/playbooks.md)
};
// A FailedPrecondition status says why no rule applies (the entry is flagged, nothing edited).
absl::StatusOr<InputsEdit> MakeInputsEdit(const std::string& loader_text, const EditRequest& req);

// The catalog entry (catalog.cc) and the playbook (agent/playbooks/registrations.inc).
extern const CatalogEntry kCatalog;
std::unique_ptr<Playbook> Make();

}  // namespace triage::playbooks::missing_inputs
