#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/playbooks/probe.h"
#include "agent/playbooks/tools.h"
#include "common/junit/verdict.h"
#include "common/registry/registry.h"
#include "triage/v1/types.pb.h"

namespace triage::playbooks {

// Where a playbook runs: the shard, the prepared workspace (sweep commits + pre-applied edits)
// and the tools that answer device-side questions.
struct PlaybookContext {
  const v1::ShardSpec* spec = nullptr;
  std::filesystem::path workspace;
  PlaybookTools* tools = nullptr;
  std::function<void(const std::string& step, const std::string& entry)> progress;
  std::function<bool()> cancelled;
};

// Runs the shard's playbook (unpack_forward_output or dtype_bfloat16) in its phase:
//   FULL   probe, fix, re-probe, verify with pytest, decide every entry
//   PROBE  probe and fix only (no device): outcomes say "ready" for entries to verify
//   VERIFY verify and decide with the earlier phase's edits already applied
// The result carries per-entry outcomes (with the YAML edit when the entry changes), registry
// operations, loader edits as diffs, and the evidence. An error status is an infrastructure
// failure (the workspace is broken): the coordinator retries elsewhere.
absl::StatusOr<v1::ShardResult> RunPlaybook(PlaybookContext& ctx);

// --- the decision tables, exposed for unit tests -------------------------------------------

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
};
UnpackPlan PlanUnpack(const ProbeDoc& structure, const registry::RegistryFile* registry);

// The override method (with the two-section docstring) for a plan of kind override.
std::string RenderOverride(const UnpackPlan& plan);

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

// The YAML edit for a decision (markers merged with the entry's current ones).
v1::EntryEdit EditFor(const junit::Decision& d, const v1::ShardEntry& entry,
                      const std::vector<std::string>& current_markers);

}  // namespace triage::playbooks
