#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/inventory/key_grammar.h"

namespace triage::inventory {

// The parts of a test-config key (docs/inventory.md, "Key grammar"), today:
//   <model_path>/<framework>[-<variant>][-<llm params>]-<parallelism>[-<mesh>]-<run_mode>
// and in general the entry id, llm params, then the segments of the checkout's grammar
// (key_grammar.h), with the mesh right before the run mode. model_path may be nested
// (bert/question_answering); the variant may contain '/', '.', '+', '_' and '-'; torch_llm keys
// carry llm_decode|llm_prefill-seq_N-batch_N and mesh_* segments.
struct KeyParts {
  std::string model_path;  // "bert/question_answering"
  std::string framework;   // "pytorch" or "jax"
  std::string variant;     // "" when the loader has no variant
  std::string llm_params;  // "llm_decode-seq_1-batch_1" (torch_llm only)
  // single_device | data_parallel | tensor_parallel; "" when the grammar has no parallelism
  // segment (such a test runs on one device).
  std::string parallelism;
  std::string mesh;      // "mesh_default" (torch_llm only)
  std::string run_mode;  // inference | training
  // The grammar's other segments in key order, (name, id): {"op_by_op", "full"}.
  std::vector<std::pair<std::string, std::string>> segments;

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

// The key's parts under a grammar, read from the right: the grammar's segments in reverse (the
// optional mesh right before the run mode), llm params, then the entry id. InvalidArgument
// "key '<key>' <why>" (KeyMismatch), a "does not match" followed by " (key grammar of <source>)"
// when the grammar is not the built-in one.
absl::StatusOr<KeyParts> ParseKey(std::string_view key, const KeyGrammar& grammar);
// Under DefaultKeyGrammar().
absl::StatusOr<KeyParts> ParseKey(std::string_view key);
// Why the key is not of the grammar ("does not match <pattern>: no single_device/data_parallel/
// tensor_parallel segment", "names a model path outside the repository (...)"); "" when it is.
std::string KeyMismatch(std::string_view key, const KeyGrammar& grammar);

// The test function of tt-xla's runner (tests/runner/test_models.py) whose pytest id a key is:
// test_llms_torch for torch_llm keys (llm params), test_all_models_jax for jax keys,
// test_all_models_torch for the others and for a key that does not parse (under the grammar;
// DefaultKeyGrammar() when none is given).
std::string_view TestFunctionOfKey(std::string_view key);
std::string_view TestFunctionOfKey(std::string_view key, const KeyGrammar& grammar);

// Builds the key of a loader variant for a parallelism and run mode (no llm params/mesh).
std::string MakeKey(std::string_view model_path, std::string_view framework,
                    std::string_view variant, std::string_view parallelism,
                    std::string_view run_mode);

}  // namespace triage::inventory
