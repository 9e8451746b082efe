#include "common/inventory/key.h"

#include "common/util/strings.h"

namespace triage::inventory {
namespace {

constexpr std::string_view kFrameworks[] = {"pytorch", "jax"};
constexpr std::string_view kParallelisms[] = {"single_device", "data_parallel", "tensor_parallel"};
constexpr std::string_view kRunModes[] = {"inference", "training"};

// Why a model path cannot name a folder of tt_forge_models, or "" when it can: the loader
// path is built from it, so it must stay a plain relative path inside the repository.
std::string ModelPathProblem(std::string_view path) {
  if (path.starts_with('/')) return "names a model path outside the repository (an absolute path)";
  std::string problem;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = path.find('/', start);
    const std::string_view part =
        path.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (part == "..") return "names a model path outside the repository (a '..' component)";
    if (part.empty() || part == ".") problem = "has a model path with an empty or '.' component";
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return problem;
}

bool IsLlmParams(std::string_view s) {
  // llm_decode-seq_1-batch_1
  return s.starts_with("llm_decode-") || s.starts_with("llm_prefill-");
}

}  // namespace

std::string KeyParts::LoaderPath() const {
  return util::StrCat(kForgeModelsDir, "/", model_path, "/", framework, "/loader.py");
}

std::string KeyParts::EntryId() const {
  return variant.empty() ? util::StrCat(model_path, "/", framework)
                         : util::StrCat(model_path, "/", framework, "-", variant);
}

absl::StatusOr<KeyParts> ParseKey(std::string_view key) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(util::StrCat(
        "key '", key, "' does not match <model_path>/<framework>[-<variant>]-<parallelism>-",
        "<run_mode>: ", why));
  };
  KeyParts parts;
  // The framework segment: the first "/pytorch-" or "/jax-".
  std::size_t split = std::string_view::npos;
  for (auto fw : kFrameworks) {
    std::size_t at = key.find(util::StrCat("/", fw, "-"));
    if (at != std::string_view::npos && at < split) {
      split = at;
      parts.framework = std::string(fw);
    }
  }
  if (split == std::string_view::npos || split == 0) return bad("no '/pytorch-' or '/jax-'");
  parts.model_path = std::string(key.substr(0, split));
  if (std::string why = ModelPathProblem(parts.model_path); !why.empty()) {
    return absl::InvalidArgumentError(util::StrCat("key '", key, "' ", why));
  }
  std::string_view rest = key.substr(split + 1 + parts.framework.size() + 1);

  // Run mode: the last segment.
  std::size_t last_dash = rest.rfind('-');
  if (last_dash == std::string_view::npos) return bad("no run mode");
  std::string_view run_mode = rest.substr(last_dash + 1);
  bool known_mode = false;
  for (auto m : kRunModes) known_mode |= run_mode == m;
  if (!known_mode) return bad(util::StrCat("run mode '", run_mode, "' is not inference/training"));
  parts.run_mode = std::string(run_mode);
  rest = rest.substr(0, last_dash);

  // Optional mesh segment (torch_llm).
  std::size_t mesh_at = rest.rfind("-mesh_");
  if (mesh_at != std::string_view::npos && rest.find('-', mesh_at + 1) == std::string_view::npos) {
    parts.mesh = std::string(rest.substr(mesh_at + 1));
    rest = rest.substr(0, mesh_at);
  }

  // Parallelism: the last segment now. rest is "[<variant>-][<llm>-]<parallelism>".
  bool found = false;
  for (auto p : kParallelisms) {
    if (rest == p) {
      parts.parallelism = std::string(p);
      rest = {};
      found = true;
      break;
    }
    std::string suffix = util::StrCat("-", p);
    if (rest.ends_with(suffix)) {
      parts.parallelism = std::string(p);
      rest.remove_suffix(suffix.size());
      found = true;
      break;
    }
  }
  if (!found) return bad("no single_device/data_parallel/tensor_parallel segment");

  // llm params: "<variant>-llm_decode-seq_N-batch_N" or just "llm_decode-...".
  std::size_t llm_at = rest.find("-llm_");
  if (llm_at != std::string_view::npos && IsLlmParams(rest.substr(llm_at + 1))) {
    parts.llm_params = std::string(rest.substr(llm_at + 1));
    rest = rest.substr(0, llm_at);
  } else if (IsLlmParams(rest)) {
    parts.llm_params = std::string(rest);
    rest = {};
  }
  parts.variant = std::string(rest);
  return parts;
}

std::string MakeKey(std::string_view model_path, std::string_view framework,
                    std::string_view variant, std::string_view parallelism,
                    std::string_view run_mode) {
  std::string key = util::StrCat(model_path, "/", framework);
  if (!variant.empty()) util::StrAppend(&key, "-", variant);
  util::StrAppend(&key, "-", parallelism, "-", run_mode);
  return key;
}

std::string_view TestFunctionOfKey(std::string_view key) {
  auto parts = ParseKey(key);
  if (!parts.ok()) return "test_all_models_torch";
  if (!parts->llm_params.empty()) return "test_llms_torch";
  if (parts->framework == "jax") return "test_all_models_jax";
  return "test_all_models_torch";
}

}  // namespace triage::inventory
