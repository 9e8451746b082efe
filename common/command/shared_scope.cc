#include "common/command/shared_scope.h"

#include "common/util/strings.h"

namespace triage::command {
namespace {

bool SafeRelative(std::string_view p) {
  if (p.empty() || p.front() == '/' || p.find('\0') != std::string_view::npos) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = p.find('/', start);
    const std::string_view part =
        p.substr(start, slash == std::string_view::npos ? p.npos : slash - start);
    if (part.empty() || part == ".." || part == ".") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

// Prefixes of each repository a shared fix never takes.
struct Forbidden {
  std::string_view repo;
  std::string_view prefix;
  std::string_view why;
};
constexpr Forbidden kForbidden[] = {
    {"tt-xla", "tests/",
     "the runner and the test-config files change only through the YAML decision"},
    {"tt-xla", "third_party/", "the submodules change only at their own repositories"},
    {"tt-xla", ".github/", "CI is not a shared fix"},
    {"tt_forge_models", ".github/", "CI is not a shared fix"},
    {"tt_forge_models", "training_utils.py", "its registry lines travel as registry operations"},
};

// Whether a path under prefix a and one under prefix b can be the same file.
bool Overlap(std::string_view a, std::string_view b) {
  return a.starts_with(b) || b.starts_with(a);
}

}  // namespace

absl::StatusOr<std::string> CheckSharedPath(std::string_view path) {
  const std::size_t colon = path.find(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(util::StrCat(
        "shared path '", path, "': write it as tt-xla:<path> or tt_forge_models:<path>"));
  }
  const std::string_view repo = path.substr(0, colon);
  const std::string_view prefix = path.substr(colon + 1);
  if (repo != "tt-xla" && repo != "tt_forge_models") {
    return absl::InvalidArgumentError(util::StrCat("shared path '", path, "': repository '", repo,
                                                   "' is neither tt-xla nor tt_forge_models"));
  }
  if (!SafeRelative(prefix.ends_with('/') ? prefix.substr(0, prefix.size() - 1) : prefix)) {
    return absl::InvalidArgumentError(util::StrCat(
        "shared path '", path, "': the path must be relative, without '..' or '.' parts"));
  }
  for (const auto& f : kForbidden) {
    if (f.repo == repo && Overlap(prefix, f.prefix)) {
      return absl::InvalidArgumentError(util::StrCat("shared path '", path, "': ", repo, "/",
                                                     f.prefix, " is never shared scope: ", f.why));
    }
  }
  return std::string(path);
}

bool InSharedScope(const std::vector<std::string>& shared, std::string_view repo,
                   std::string_view path) {
  for (const auto& s : shared) {
    const std::size_t colon = s.find(':');
    if (colon == std::string::npos || std::string_view(s).substr(0, colon) != repo) continue;
    const std::string_view prefix = std::string_view(s).substr(colon + 1);
    if (prefix.ends_with('/') ? path.starts_with(prefix) : path == prefix) return true;
  }
  return false;
}

bool OutsideLoader(std::string_view loader, std::string_view repo, std::string_view path) {
  if (repo != "tt_forge_models") return true;
  std::string_view dir = loader.substr(0, loader.rfind('/') + 1);
  constexpr std::string_view kForgePrefix = "third_party/tt_forge_models/";
  if (dir.starts_with(kForgePrefix)) dir.remove_prefix(kForgePrefix.size());
  return !path.starts_with(dir);
}

}  // namespace triage::command
