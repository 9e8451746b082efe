#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <random>
#include <system_error>

#include "absl/status/status.h"
#include "common/git/git.h"
#include "common/git/internal.h"
#include "common/process/process.h"
#include "common/util/strings.h"
#include "common/util/text.h"

// Pinning what a sweep reads: a checkout's commits (tt-xla's HEAD, the submodule's), the
// submodule's URL at a commit, and repositories fetched by URL into the coordinator's cache.

namespace triage::git {

using internal::CheckRev;
using internal::Fnv1a;
using internal::GitSaid;
using internal::IsHexSha;
using internal::NormalizeDir;

namespace {

// "a, b, c" with at most `shown` names, then "and N more".
std::string ListPaths(const std::vector<std::string>& paths, std::size_t shown = 20) {
  std::string out;
  for (std::size_t i = 0; i < paths.size() && i < shown; ++i) {
    util::StrAppend(&out, i == 0 ? "" : ", ", paths[i]);
  }
  if (paths.size() > shown) util::StrAppend(&out, " and ", paths.size() - shown, " more");
  return out;
}

// The notes every pin shares: the submodule against the gitlink.
void NoteForgeChoice(Pinned& p) {
  if (p.forge_commit == p.forge_gitlink) return;
  util::StrAppend(
      &p.notes.emplace_back(), "tt_forge_models is pinned at ", p.forge_commit.substr(0, 12),
      p.forge_source == ForgeSource::kRef ? " (--forge-ref)" : " (its checked-out HEAD)",
      ", not at ", p.forge_gitlink.substr(0, 12),
      " that tt-xla's commit records for the submodule");
}

}  // namespace

absl::StatusOr<Pinned> PinCheckout(const std::filesystem::path& checkout,
                                   const PinOptions& options) {
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::absolute(checkout, ec).lexically_normal();
  Git git(ec ? checkout : root);
  auto context = [&](const absl::Status& s) {
    return absl::Status(s.code(), util::StrCat("cannot pin tt-xla checkout ", checkout.string(),
                                               ": ", util::MessageOf(s)));
  };
  auto head = git.RevParse("HEAD");
  if (!head.ok()) return context(head.status());
  auto gitlink = git.SubmoduleCommit(*head, kForgeSubmodulePath);
  if (!gitlink.ok()) return context(gitlink.status());
  auto url = git.RemoteUrl("origin");
  if (!url.ok()) return context(url.status());
  Pinned p{git.repo(), *head, *gitlink, *url, *gitlink, ForgeSource::kGitlink, {}};

  const std::filesystem::path forge_dir = git.repo() / kForgeSubmodulePath;
  const bool forge_checked_out = std::filesystem::exists(forge_dir / ".git", ec);
  const Git forge(forge_dir);
  if (!options.forge_ref.empty()) {
    if (!forge_checked_out) {
      return context(absl::FailedPreconditionError(
          util::StrCat("--forge-ref needs the submodule checked out at ", forge_dir.string(),
                       " (git submodule update --init)")));
    }
    auto sha = forge.RevParse(options.forge_ref);
    if (!sha.ok()) {
      return context(absl::Status(sha.status().code(),
                                  util::StrCat("--forge-ref: ", util::MessageOf(sha.status()))));
    }
    p.forge_commit = *sha;
    p.forge_source = ForgeSource::kRef;
  } else if (forge_checked_out) {
    auto sha = forge.RevParse("HEAD");
    if (!sha.ok()) return context(sha.status());
    p.forge_commit = *sha;
    p.forge_source = ForgeSource::kCheckout;
  } else {
    p.notes.push_back(util::StrCat("the tt_forge_models submodule is not checked out in ",
                                   checkout.string(), ": pinned the gitlink ",
                                   p.forge_gitlink.substr(0, 12)));
  }
  NoteForgeChoice(p);

  // What a sweep reads is the commits; local changes would silently not be part of it.
  std::vector<std::pair<std::string, std::vector<std::string>>> dirty;
  auto changes = git.WorkTreeChanges();
  if (!changes.ok()) return context(changes.status());
  if (!changes->empty()) dirty.emplace_back("tt-xla", std::move(*changes));
  if (forge_checked_out) {
    auto forge_changes = forge.WorkTreeChanges();
    if (!forge_changes.ok()) return context(forge_changes.status());
    if (!forge_changes->empty()) dirty.emplace_back("tt_forge_models", std::move(*forge_changes));
  }
  if (!dirty.empty()) {
    std::string listing;
    for (const auto& [repo, paths] : dirty) {
      util::StrAppend(&listing, listing.empty() ? "" : "; ", repo, ": ", ListPaths(paths));
    }
    if (!options.allow_dirty) {
      return context(absl::FailedPreconditionError(util::StrCat(
          "the work tree has local changes, which a sweep would not see (it reads the "
          "committed files): ",
          listing, ". Commit or stash them, or pass --allow-dirty to sweep HEAD without them")));
    }
    p.notes.push_back(
        util::StrCat("local changes are not part of the sweep (--allow-dirty): ", listing));
  }
  return p;
}

absl::StatusOr<std::string> ForgeUrl(const Git& repo, std::string_view commit,
                                     std::string_view base_url) {
  if (auto s = CheckRev("commit", commit); !s.ok()) return s;
  // The submodule's name need not be its path: find the name whose path is the forge's.
  auto paths = repo.Run({"config", "--blob", util::StrCat(commit, ":.gitmodules"), "--get-regexp",
                         "^submodule\\..*\\.path$"});
  if (!paths.ok()) {
    return absl::FailedPreconditionError(util::StrCat("cannot read .gitmodules at ",
                                                      commit.substr(0, 12), ": ",
                                                      util::MessageOf(paths.status())));
  }
  std::string name;
  for (std::string_view line : util::SplitLines(*paths)) {
    const std::size_t sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    if (NormalizeDir(util::TrimWhitespace(line.substr(sp + 1))) != kForgeSubmodulePath) continue;
    std::string_view key = line.substr(0, sp);  // submodule.<name>.path
    name = std::string(key.substr(10, key.size() - 10 - 5));
  }
  if (name.empty()) {
    return absl::FailedPreconditionError(util::StrCat(
        ".gitmodules at ", commit.substr(0, 12), " has no submodule at ", kForgeSubmodulePath));
  }
  auto url = repo.Run({"config", "--blob", util::StrCat(commit, ":.gitmodules"), "--get",
                       util::StrCat("submodule.", name, ".url")});
  if (!url.ok()) {
    return absl::FailedPreconditionError(
        util::StrCat("no URL for submodule ", name, " in .gitmodules at ", commit.substr(0, 12)));
  }
  std::string u(util::TrimWhitespace(*url));
  if (u.starts_with("../") || u.starts_with("./")) {
    std::string base(base_url);
    while (base.ends_with('/')) base.pop_back();
    u = util::StrCat(base, "/", u);
  }
  return u;
}

std::string CacheNameForUrl(std::string_view url) {
  std::string_view rest = url;
  if (const std::size_t scheme = rest.find("://"); scheme != std::string_view::npos) {
    rest.remove_prefix(scheme + 3);
  }
  // Credentials in the URL (https://token@host/...) stay out of directory names.
  const std::size_t slash = rest.find('/');
  if (const std::size_t at = rest.substr(0, slash).rfind('@'); at != std::string_view::npos) {
    rest.remove_prefix(at + 1);
  }
  while (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.ends_with(".git")) rest.remove_suffix(4);
  std::string name;
  for (char c : rest) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '-' || c == '_';
    const char out = safe ? c : '_';
    if (out == '_' && !name.empty() && name.back() == '_') continue;
    name.push_back(out);
  }
  while (!name.empty() && (name.front() == '_' || name.front() == '.')) name.erase(0, 1);
  if (name.size() > 80) name.resize(80);
  if (name.empty()) name = "repo";
  return util::StrCat(name, "-", util::Hex(Fnv1a(url), 16).substr(0, 12), ".git");
}

namespace {

absl::Status CheckUrl(std::string_view url) {
  if (url.empty()) return absl::InvalidArgumentError("empty repository URL");
  std::string lower;
  for (char c : url)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (url.starts_with('-') || lower.starts_with("ext::") || lower.starts_with("fd::") ||
      std::any_of(url.begin(), url.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return absl::InvalidArgumentError(util::StrCat("refusing repository URL '", url, "'"));
  }
  return absl::OkStatus();
}

constexpr auto kNetworkTimeout = std::chrono::minutes(60);

}  // namespace

absl::StatusOr<std::filesystem::path> FetchIntoCache(std::string_view url,
                                                     const std::filesystem::path& cache_dir) {
  if (auto s = CheckUrl(url); !s.ok()) return s;
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        util::StrCat("cannot create cache directory ", cache_dir.string(), ": ", ec.message()));
  }
  const std::filesystem::path dest =
      std::filesystem::absolute(cache_dir, ec).lexically_normal() / CacheNameForUrl(url);
  const Git git(dest);
  const std::vector<std::string> refspecs = {"+refs/heads/*:refs/heads/*",
                                             "+refs/tags/*:refs/tags/*"};

  if (!std::filesystem::exists(dest / "HEAD", ec)) {
    // Clone next to the final place and rename, so an interrupted clone never looks like a
    // usable cache.
    std::random_device rd;
    const std::filesystem::path tmp =
        dest.parent_path() / util::StrCat(dest.filename().string(), ".tmp-", getpid(), "-", rd());
    auto cloned = Git(dest.parent_path())
                      .Run({"clone", "--bare", "--quiet", "--", std::string(url), tmp.string()},
                           kNetworkTimeout);
    if (!cloned.ok()) {
      std::filesystem::remove_all(tmp, ec);
      return absl::Status(cloned.status().code(),
                          util::StrCat("cannot fetch ", url, ": ", GitSaid(cloned.status())));
    }
    // Later fetches (and a human running `git fetch` in the cache) mirror branches and tags.
    const Git tmp_git(tmp);
    auto configured = tmp_git.Run({"config", "--replace-all", "remote.origin.fetch", refspecs[0]});
    if (configured.ok()) {
      configured = tmp_git.Run({"config", "--add", "remote.origin.fetch", refspecs[1]});
    }
    if (!configured.ok()) {
      std::filesystem::remove_all(tmp, ec);
      return configured.status();
    }
    std::filesystem::rename(tmp, dest, ec);
    if (ec) {
      // Someone else finished the same clone first; theirs is as good as ours.
      std::filesystem::remove_all(tmp, ec);
      if (!std::filesystem::exists(dest / "HEAD", ec)) {
        return absl::InternalError(util::StrCat("cannot move clone into ", dest.string()));
      }
    }
  } else {
    std::vector<std::string> args = {"fetch", "--prune", "--quiet", "origin"};
    args.insert(args.end(), refspecs.begin(), refspecs.end());
    auto fetched = git.Run(args, kNetworkTimeout);
    if (!fetched.ok()) {
      return absl::Status(fetched.status().code(),
                          util::StrCat("cannot fetch ", url, ": ", GitSaid(fetched.status())));
    }
  }

  return dest;
}

absl::StatusOr<std::string> ResolveInCache(const Git& git, std::string_view url,
                                           std::string_view ref) {
  const std::string rev = ref.empty() ? std::string("HEAD") : std::string(ref);
  if (auto s = CheckRev("ref", rev); !s.ok()) return s;
  auto sha = git.RevParse(rev);
  if (absl::IsNotFound(sha.status())) {
    // Not a branch or tag: a commit or ref the server has but does not advertise as a branch
    // (a sha, refs/pull/N/head).
    auto fetched = git.Run({"fetch", "--quiet", "origin", rev}, kNetworkTimeout);
    if (fetched.ok()) sha = git.RevParse(IsHexSha(rev) ? rev : std::string("FETCH_HEAD"));
    if (!sha.ok()) {
      return absl::NotFoundError(
          util::StrCat("ref '", rev, "' not found in ", url,
                       fetched.ok() ? "" : util::StrCat(": ", GitSaid(fetched.status()))));
    }
  }
  return sha;
}

absl::StatusOr<std::filesystem::path> ForgeRepo(const std::filesystem::path& ttxla_repo,
                                                std::string_view ttxla_commit,
                                                std::string_view forge_commit,
                                                std::string_view git_url,
                                                const std::filesystem::path& cache_dir) {
  if (git_url.empty()) {
    std::filesystem::path forge = ttxla_repo / kForgeSubmodulePath;
    auto present = Git(forge).RevParse(forge_commit);
    if (!present.ok()) {
      return absl::FailedPreconditionError(
          util::StrCat(forge.string(), " does not hold ", forge_commit.substr(0, 12),
                       " (is the submodule initialized?): ", util::MessageOf(present.status())));
    }
    return forge;
  }
  auto url = ForgeUrl(Git(ttxla_repo), ttxla_commit, git_url);
  if (!url.ok()) return url.status();
  auto cached = FetchIntoCache(*url, cache_dir);
  if (!cached.ok()) return cached.status();
  auto resolved = ResolveInCache(Git(*cached), *url, forge_commit);
  if (!resolved.ok()) return resolved.status();
  return *cached;
}

absl::StatusOr<Pinned> FetchAndPin(std::string_view url, std::string_view ref,
                                   const std::filesystem::path& cache_dir,
                                   const PinOptions& options) {
  if (auto s = CheckUrl(url); !s.ok()) return s;
  const std::string rev = ref.empty() ? std::string("HEAD") : std::string(ref);
  if (auto s = CheckRev("ref", rev); !s.ok()) return s;
  auto dest = FetchIntoCache(url, cache_dir);
  if (!dest.ok()) return dest.status();
  const Git git(*dest);
  auto sha = ResolveInCache(git, url, rev);
  if (!sha.ok()) return sha.status();
  auto gitlink = git.SubmoduleCommit(*sha, kForgeSubmodulePath);
  if (!gitlink.ok()) {
    return absl::Status(gitlink.status().code(), util::StrCat("cannot pin ", url, "@", rev, ": ",
                                                              util::MessageOf(gitlink.status())));
  }
  Pinned p{*dest, *sha, *gitlink, std::string(url), *gitlink, ForgeSource::kGitlink, {}};
  if (!options.forge_ref.empty()) {
    auto forge_url = ForgeUrl(git, *sha, url);
    if (!forge_url.ok()) return forge_url.status();
    auto forge_cache = FetchIntoCache(*forge_url, cache_dir);
    if (!forge_cache.ok()) return forge_cache.status();
    auto forge = ResolveInCache(Git(*forge_cache), *forge_url, options.forge_ref);
    if (!forge.ok()) {
      return absl::Status(forge.status().code(),
                          util::StrCat("--forge-ref: ", util::MessageOf(forge.status())));
    }
    p.forge_commit = *forge;
    p.forge_source = ForgeSource::kRef;
  }
  NoteForgeChoice(p);
  return p;
}

}  // namespace triage::git
