#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace triage::inventory {

// The parts of a test-config key (docs/inventory.md, "Key grammar"):
//   <model_path>/<framework>[-<variant>][-<llm params>]-<parallelism>[-<mesh>]-<run_mode>
// model_path may be nested (bert/question_answering); the variant may contain '/', '.', '+',
// '_' and '-'; torch_llm keys carry llm_decode|llm_prefill-seq_N-batch_N and mesh_* segments.
struct KeyParts {
  std::string model_path;   // "bert/question_answering"
  std::string framework;    // "pytorch" or "jax"
  std::string variant;      // "" when the loader has no variant
  std::string llm_params;   // "llm_decode-seq_1-batch_1" (torch_llm only)
  std::string parallelism;  // single_device | data_parallel | tensor_parallel
  std::string mesh;         // "mesh_default" (torch_llm only)
  std::string run_mode;     // inference | training

  // third_party/tt_forge_models/<model_path>/<framework>/loader.py
  std::string LoaderPath() const;
  // <model_path>/<framework>[-<variant>]: the pytest test-entry id of the loader variant.
  std::string EntryId() const;
};

inline constexpr std::string_view kForgeModelsDir = "third_party/tt_forge_models";
// kForgeModelsDir with its slash: what a tt-xla path starts with when it is in the submodule.
inline constexpr std::string_view kForgeModelsPrefix = "third_party/tt_forge_models/";

// The machine that runs tensor-parallel entries, whatever the sweep's target archs.
inline constexpr std::string_view kTensorParallelArch = "n300-llmbox";
// Whether a test-entry key runs tensor-parallel ("...-tensor_parallel-...").
inline bool IsTensorParallelKey(std::string_view key) {
  return key.find("-tensor_parallel-") != std::string_view::npos;
}

absl::StatusOr<KeyParts> ParseKey(std::string_view key);

// The test function of tt-xla's runner (tests/runner/test_models.py) whose pytest id a key is:
// test_llms_torch for torch_llm keys (llm params), test_all_models_jax for jax keys,
// test_all_models_torch for the others and for a key that does not parse.
std::string_view TestFunctionOfKey(std::string_view key);

// Builds the key of a loader variant for a parallelism and run mode (no llm params/mesh).
std::string MakeKey(std::string_view model_path, std::string_view framework,
                    std::string_view variant, std::string_view parallelism,
                    std::string_view run_mode);

}  // namespace triage::inventory
