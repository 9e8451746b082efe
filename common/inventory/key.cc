#include "common/inventory/key.h"

#include "common/util/strings.h"

namespace triage::inventory {
namespace {

constexpr std::string_view kFrameworks[] = {"pytorch", "jax"};

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

namespace {

// The id of the segment that ends rest ("<...>-<id>" or rest itself), the longest that does;
// "" when none does.
std::string_view IdAtEnd(std::string_view rest, const KeyGrammar::Segment& segment) {
  std::string_view found;
  for (const std::string& id : segment.ids) {
    if (id.size() <= found.size() || !rest.ends_with(id)) continue;
    if (rest.size() == id.size() || rest[rest.size() - id.size() - 1] == '-') found = id;
  }
  return found;
}

// Parses key into parts; returns why it does not parse ("" when it does).
std::string Parse(std::string_view key, const KeyGrammar& grammar, KeyParts& parts) {
  auto bad = [&](std::string_view why) {
    return util::StrCat("does not match ", grammar.Pattern(), ": ", why);
  };
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
  if (std::string why = ModelPathProblem(parts.model_path); !why.empty()) return why;
  std::string_view rest = key.substr(split + 1 + parts.framework.size() + 1);

  // The grammar's segments from the right: "[<variant>-][<llm>-]<segment>-...-<segment>".
  std::vector<std::pair<std::string, std::string>> extra;  // right to left
  for (auto it = grammar.segments.rbegin(); it != grammar.segments.rend(); ++it) {
    const KeyGrammar::Segment& segment = *it;
    std::string_view id = IdAtEnd(rest, segment);
    if (id.empty()) {
      if (segment.name != "run_mode") {
        return bad(util::StrCat("no ", util::StrJoin(segment.ids, "/"), " segment"));
      }
      const std::size_t last_dash = rest.rfind('-');
      if (last_dash == std::string_view::npos) return bad("no run mode");
      return bad(util::StrCat("run mode '", rest.substr(last_dash + 1), "' is not ",
                              util::StrJoin(segment.ids, "/")));
    }
    rest =
        rest.size() == id.size() ? std::string_view() : rest.substr(0, rest.size() - id.size() - 1);
    if (segment.name == "parallelism") {
      parts.parallelism = std::string(id);
    } else if (segment.name == "run_mode") {
      parts.run_mode = std::string(id);
      // Optional mesh segment (torch_llm), right before the run mode.
      std::size_t mesh_at = rest.rfind("-mesh_");
      if (mesh_at != std::string_view::npos &&
          rest.find('-', mesh_at + 1) == std::string_view::npos) {
        parts.mesh = std::string(rest.substr(mesh_at + 1));
        rest = rest.substr(0, mesh_at);
      }
    } else {
      extra.emplace_back(segment.name, std::string(id));
    }
  }
  parts.segments.assign(extra.rbegin(), extra.rend());

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
  return "";
}

}  // namespace

absl::StatusOr<KeyParts> ParseKey(std::string_view key, const KeyGrammar& grammar) {
  KeyParts parts;
  std::string why = Parse(key, grammar, parts);
  if (why.empty()) return parts;
  std::string message = util::StrCat("key '", key, "' ", why);
  // A model path leaving the repository is refused whatever the grammar.
  if (!grammar.built_in() && why.starts_with("does not match")) {
    util::StrAppend(&message, " (key grammar of ", grammar.source, ")");
  }
  return absl::InvalidArgumentError(std::move(message));
}

absl::StatusOr<KeyParts> ParseKey(std::string_view key) {
  return ParseKey(key, DefaultKeyGrammar());
}

std::string KeyMismatch(std::string_view key, const KeyGrammar& grammar) {
  KeyParts parts;
  return Parse(key, grammar, parts);
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
  return TestFunctionOfKey(key, DefaultKeyGrammar());
}

std::string_view TestFunctionOfKey(std::string_view key, const KeyGrammar& grammar) {
  auto parts = ParseKey(key, grammar);
  if (!parts.ok()) return "test_all_models_torch";
  if (!parts->llm_params.empty()) return "test_llms_torch";
  if (parts->framework == "jax") return "test_all_models_jax";
  return "test_all_models_torch";
}

}  // namespace triage::inventory
