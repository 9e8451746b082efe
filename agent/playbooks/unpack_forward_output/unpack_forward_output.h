#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/playbooks/catalog.h"
#include "agent/playbooks/playbook.h"
#include "agent/playbooks/probe.h"
#include "agent/playbooks/unpack_forward_output/loss_target.h"
#include "common/registry/registry.h"

namespace triage::playbooks {

// docs/playbooks.md, "unpack_forward_output" (the fix table): how to make unpack_forward_output
// handle an output.
struct UnpackPlan {
  enum class Kind {
    kStale,              // the output is already handled (existing registry entry/override)
    kRegistryAdd,        // _register_attr(cls, attr)
    kRemoveAndOverride,  // the registry entry for cls is wrong: delete it, add an override
    kOverride,           // per-loader unpack_forward_output
    kNoFix,              // nothing identifiable: review
  };
  Kind kind = Kind::kNoFix;
  std::string cls;
  std::string attr;
  std::string expr;          // override: the expression returned (forward_output...)
  bool needs_torch = false;  // override uses torch
  std::string structure;     // "Forward output structure" (docstring and report)
  std::string selected;      // "What is selected and why"
  std::string why_not_other;
  std::vector<std::string> review;
  // How the loss target was chosen (loss_target.h); unset for a stale entry or no output.
  std::optional<LossTarget> loss_target;
  // Set when the override is written in the checkout's house form (LossTarget::house_form).
  std::optional<HouseOverride> house;
};
// loader_doc: the loader's docstring and leading comments (LoaderDocOf), a family hint. house:
// the house-form override of the checkout's other loaders (ChooseHouseOverride), if any.
UnpackPlan PlanUnpack(const ProbeDoc& structure, const registry::RegistryFile* registry,
                      std::string_view loader_doc = "",
                      const std::optional<HouseOverride>& house = std::nullopt);

// The override method (with the two-section docstring) for a plan of kind override. loader: the
// loader it goes into, relative to the tt-forge-models root (a house-form override's relative
// imports are anchored there).
std::string RenderOverride(const UnpackPlan& plan, std::string_view loader = "");

// Whether a probe document shows the loader's own unpack_forward_output raising (the error's
// site, or a frame of its traceback, in that function of the loader file).
bool OverrideRaised(const ProbeDoc& doc, std::string_view loader_path);

namespace unpack_forward_output {

// The catalog entry (catalog.cc) and the playbook (agent/playbooks/registrations.inc).
extern const CatalogEntry kCatalog;
std::unique_ptr<Playbook> Make();

}  // namespace unpack_forward_output
}  // namespace triage::playbooks
