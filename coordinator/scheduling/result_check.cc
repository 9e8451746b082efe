#include "coordinator/scheduling/result_check.h"

#include <set>

#include "common/command/shared_scope.h"
#include "common/registry/registry.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::coord {
namespace {

constexpr std::string_view kForgePrefix = "third_party/tt_forge_models/";

bool SafeRelative(std::string_view p) {
  if (p.empty() || p[0] == '/' || p.find('\0') != std::string_view::npos) return false;
  std::size_t start = 0;
  while (start <= p.size()) {
    std::size_t slash = p.find('/', start);
    std::string_view part =
        p.substr(start, slash == std::string_view::npos ? p.npos : slash - start);
    if (part == "..") return false;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return true;
}

std::string StripPrefix(std::string_view p) {
  if (p.starts_with("a/") || p.starts_with("b/")) p.remove_prefix(2);
  return std::string(p);
}

}  // namespace

std::vector<std::string> DiffPaths(const std::string& diff) {
  std::set<std::string> out;
  for (auto line : util::SplitLines(diff)) {
    std::string_view l = line;
    if (l.starts_with("--- ") || l.starts_with("+++ ")) {
      std::string_view p = l.substr(4);
      if (auto tab = p.find('\t'); tab != std::string_view::npos) p = p.substr(0, tab);
      if (p == "/dev/null") continue;
      out.insert(StripPrefix(p));
    } else if (l.starts_with("diff --git ")) {
      std::string_view rest = l.substr(11);
      auto sp = rest.find(" b/");
      if (sp != std::string_view::npos) {
        out.insert(StripPrefix(rest.substr(0, sp)));
        out.insert(StripPrefix(rest.substr(sp + 1)));
      }
    } else if (l.starts_with("rename from ") || l.starts_with("rename to ") ||
               l.starts_with("copy from ") || l.starts_with("copy to ")) {
      out.insert(std::string(l.substr(l.find(' ', 5) + 1)));
    }
  }
  return {out.begin(), out.end()};
}

bool VerifyChangesOnlyYaml(std::string_view executor) { return executor != "command"; }

absl::Status CheckResultOwnership(const v1::ShardSpec& spec, const v1::ShardResult& result) {
  // One result format: the command executor's agent lifts its diffs into the structured edits
  // below before sending (common/lift/lift.h, docs/farm.md "Executors").
  if (!result.ttxla_diff().empty() || !result.forge_diff().empty()) {
    return absl::InvalidArgumentError(
        "result carries unlifted raw diffs: the agent lifts them into edits");
  }
  if (spec.phase() == v1::PHASE_VERIFY && VerifyChangesOnlyYaml(spec.executor()) &&
      (result.file_edits_size() > 0 || result.registry_ops_size() > 0)) {
    return absl::PermissionDeniedError(
        util::StrCat("a ", spec.executor().empty() ? "native" : spec.executor(),
                     " verify phase changes only YAML entries, but this result carries ",
                     result.file_edits_size(), " file edit(s) and ", result.registry_ops_size(),
                     " registry line(s): the probe's edits reach it pre-applied"));
  }
  std::set<std::pair<std::string, std::string>> entries;
  for (const auto& e : spec.entries()) entries.insert({e.file(), e.key()});
  // The loader's directory, relative to the tt_forge_models root.
  std::string loader_dir = spec.loader().substr(0, spec.loader().rfind('/') + 1);
  if (std::string_view(loader_dir).starts_with(kForgePrefix))
    loader_dir.erase(0, kForgePrefix.size());
  const std::string registry_file(registry::kTrainingUtilsPath.substr(kForgePrefix.size()));
  const std::vector<std::string> shared(spec.shared_paths().begin(), spec.shared_paths().end());

  for (const auto& o : result.entries()) {
    if (!entries.count({o.file(), o.key()})) {
      return absl::PermissionDeniedError(util::StrCat("outcome for entry '", o.key(), "' in ",
                                                      o.file(), ", which is not in shard ",
                                                      spec.shard_id()));
    }
    if (o.changed() && (o.edit().key() != o.key() || o.edit().file() != o.file())) {
      return absl::PermissionDeniedError(util::StrCat(
          "the edit of entry '", o.key(), "' names another entry ('", o.edit().key(), "')"));
    }
  }
  auto check_forge_path = [&](const std::string& p) -> absl::Status {
    if (!SafeRelative(p)) {
      return absl::PermissionDeniedError(util::StrCat("unsafe path '", p, "'"));
    }
    if (std::string_view(p).starts_with(loader_dir)) return absl::OkStatus();
    if (p != registry_file && command::InSharedScope(shared, "tt_forge_models", p)) {
      return absl::OkStatus();
    }
    return absl::PermissionDeniedError(
        util::StrCat("edit of tt_forge_models/", p, " outside the shard's loader directory ",
                     loader_dir, shared.empty() ? "" : " and its shared scope"));
  };
  // The shared scope (docs/remediation.md, "Shared fixes beyond the loader"): tt-xla files a
  // remediation sweep's commands may change besides the YAML decisions.
  auto shared_ttxla = [&](const v1::FileEdit& fe) {
    std::vector<std::string> paths = DiffPaths(fe.diff());
    if (!fe.path().empty()) paths.push_back(fe.path());
    for (const auto& p : paths) {
      if (!SafeRelative(p) || !command::InSharedScope(shared, "tt-xla", p)) return false;
    }
    return !paths.empty();
  };
  for (const auto& fe : result.file_edits()) {
    if (fe.repo() == "tt_forge_models") {
      std::vector<std::string> paths =
          fe.path().empty() ? DiffPaths(fe.diff()) : std::vector<std::string>{fe.path()};
      if (!fe.path().empty()) {
        for (const auto& p : DiffPaths(fe.diff())) paths.push_back(p);
      }
      for (const auto& p : paths) {
        if (auto st = check_forge_path(p); !st.ok()) {
          return absl::PermissionDeniedError(
              util::StrCat(util::MessageOf(st),
                           p == registry_file ? " (registry changes travel as registry ops)" : ""));
        }
      }
    } else if (fe.repo() != "tt-xla" || !shared_ttxla(fe)) {
      return absl::PermissionDeniedError(util::StrCat(
          "file edit in repo '", fe.repo(), "' (", fe.path(),
          "): YAML changes travel as entry edits, loader changes as tt_forge_models edits"));
    }
  }
  for (const auto& op : result.registry_ops()) {
    if (!registry::IsIdentifier(op.cls()) ||
        (op.kind() == v1::RegistryOp::ADD && !registry::IsIdentifier(op.attr()))) {
      return absl::PermissionDeniedError(
          util::StrCat("registry op with invalid names '", op.cls(), "', '", op.attr(), "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace triage::coord
