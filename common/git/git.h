#pragma once

// Read-mostly access to git repositories through the git command line (argv, never a shell).
// Every call runs `git -C <repo>` with GIT_TERMINAL_PROMPT=0 and LC_ALL=C (so a missing
// credential fails instead of waiting for a password, and messages are stable), no pager and
// no hooks.

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/inventory/inventory.h"

namespace triage::git {

// The tt-forge-models submodule inside a tt-xla checkout.
inline constexpr std::string_view kForgeSubmodulePath = "third_party/tt_forge_models";

class Git {
 public:
  // Options of one call beyond the arguments.
  struct CallOptions {
    std::chrono::milliseconds timeout = std::chrono::minutes(5);
    // Extra environment (e.g. GIT_INDEX_FILE for a temporary index).
    std::vector<std::pair<std::string, std::string>> env;
    // Fed to git's stdin ("" = /dev/null).
    std::string stdin_data;
    // Stdout above this is an error (ResourceExhausted), never silently cut.
    std::size_t max_output_bytes = 64 << 20;
  };

  explicit Git(std::filesystem::path repo);

  const std::filesystem::path& repo() const { return repo_; }

  // Runs `git -C <repo> <args>` and returns its stdout. A failure status names the command and
  // carries git's stderr; a timeout is DeadlineExceeded.
  absl::StatusOr<std::string> Run(
      const std::vector<std::string>& args,
      std::chrono::milliseconds timeout = std::chrono::minutes(5)) const;
  absl::StatusOr<std::string> RunWith(const std::vector<std::string>& args,
                                      const CallOptions& options) const;

  // Full 40-hex sha of rev^{commit}. NotFound for an unknown revision.
  absl::StatusOr<std::string> RevParse(std::string_view rev) const;
  // The gitlink sha recorded at commit:path. NotFound when path does not exist in commit,
  // FailedPrecondition when it exists but is not a submodule.
  absl::StatusOr<std::string> SubmoduleCommit(std::string_view commit, std::string_view path) const;
  // The bytes of the file at commit:path (binary-safe). The size is checked with
  // `git cat-file -s` before reading: ResourceExhausted above max_bytes, NotFound when missing.
  absl::StatusOr<std::string> Show(std::string_view commit, std::string_view path,
                                   std::size_t max_bytes) const;
  // Files (blobs, including symlinks; not submodules) below dir at commit, relative to the repo
  // root, sorted, recursive. dir "" = the whole tree. NotFound when dir holds no file.
  // symlinks: when given, receives the listed paths that are symbolic links.
  absl::StatusOr<std::vector<std::string>> ListFiles(
      std::string_view commit, std::string_view dir,
      std::vector<std::string>* symlinks = nullptr) const;
  // Every entry of commit's tree, directories included, keyed by its path relative to the repo
  // root ("" is the root tree itself): what `git ls-tree -r -t` lists. A submodule's id is the
  // commit it records.
  struct TreeObject {
    std::string type;  // blob, tree, commit
    std::string id;
  };
  absl::StatusOr<std::map<std::string, TreeObject>> ObjectIds(std::string_view commit) const;
  // Whether sha names a commit present in the object store (no fetch).
  absl::StatusOr<bool> HasCommit(std::string_view sha) const;
  // The URL of a remote; "" when the remote (or its URL) is not configured.
  absl::StatusOr<std::string> RemoteUrl(std::string_view remote = "origin") const;
  // Paths of the work tree that differ from HEAD: staged, unstaged and untracked (not ignored)
  // files, sorted; submodules are left out (check each one in its own repository).
  absl::StatusOr<std::vector<std::string>> WorkTreeChanges() const;

 private:
  std::filesystem::path repo_;
};

// A FileSource over the files of one commit, so later edits to the working tree (or checking
// out another commit) do not change what is read.
class GitSource : public inventory::FileSource {
 public:
  // commit: a full sha (resolve branches and tags with Git::RevParse first).
  GitSource(std::filesystem::path repo, std::string commit);

  // A symbolic link is read as the file it names when that is a regular file listed with it; a
  // link that leaves the repository is refused. Links to folders are not followed.
  absl::StatusOr<inventory::Listing> List(std::string_view dir,
                                          std::string_view suffix) const override;
  absl::StatusOr<std::string> Read(std::string_view path, std::size_t max_bytes) const override;
  // "<repo>@<first 12 hex digits of the commit>".
  std::string Describe() const override;

  const std::string& commit() const { return commit_; }

 private:
  Git git_;
  std::string commit_;
  // Listed symbolic links -> the path they name (filled by List, used by Read).
  mutable std::map<std::string, std::string, std::less<>> links_;
};

// How the tt-forge-models commit of a sweep was chosen.
enum class ForgeSource {
  kGitlink,   // the commit tt-xla records for its submodule
  kCheckout,  // the commit checked out in the submodule (it may differ from the gitlink)
  kRef,       // a ref the operator named (--forge-ref)
};
std::string_view ForgeSourceName(ForgeSource source);  // "gitlink", "checkout", "ref"

struct PinOptions {
  // A branch, tag or sha of tt-forge-models to pin instead of the default ("" = none).
  std::string forge_ref;
  // A checkout with local changes is pinned at its HEAD instead of refused; the changes are
  // listed in Pinned::notes as not part of the sweep.
  bool allow_dirty = false;
};

// A tt-xla commit and the tt-forge-models commit a sweep reads.
struct Pinned {
  std::filesystem::path repo;  // the repository the commits were read from
  std::string ttxla_commit;
  std::string forge_commit;
  std::string origin_url;     // "" when the repository has no origin
  std::string forge_gitlink;  // the commit ttxla_commit records for the submodule
  ForgeSource forge_source = ForgeSource::kGitlink;
  // What an operator must know about the pin: the submodule differs from the gitlink, local
  // changes left out. One sentence each.
  std::vector<std::string> notes;
};

// Pins a tt-xla checkout as it is checked out: its HEAD, and the HEAD of the
// third_party/tt_forge_models submodule (the gitlink when the submodule is not initialized),
// or options.forge_ref resolved in the submodule. A work tree with local changes (either
// repository) is refused with the changed paths (FailedPrecondition) unless allow_dirty.
absl::StatusOr<Pinned> PinCheckout(const std::filesystem::path& checkout,
                                   const PinOptions& options = {});

// Clones url into cache_dir/<name derived from the url> as a bare repository the first time and
// fetches all branches and tags on later calls, then resolves ref (branch, tag or sha; "" =
// HEAD, the remote's default branch): tt-forge-models is the gitlink that commit records, or
// options.forge_ref fetched from the submodule's URL (.gitmodules). Pinned::repo is the bare
// cache repository (read it with GitSource). URLs starting with '-' and the ext::/fd::
// transports are refused. allow_dirty has no meaning here.
absl::StatusOr<Pinned> FetchAndPin(std::string_view url, std::string_view ref,
                                   const std::filesystem::path& cache_dir,
                                   const PinOptions& options = {});

// The URL of the tt_forge_models submodule recorded in .gitmodules at commit of repo; a
// relative URL ("../x.git") is resolved against base_url (the tt-xla URL).
absl::StatusOr<std::string> ForgeUrl(const Git& repo, std::string_view commit,
                                     std::string_view base_url);

// Makes cache_dir/CacheNameForUrl(url) a bare mirror of url's branches and tags (clone the
// first time, fetch after) and returns its path.
absl::StatusOr<std::filesystem::path> FetchIntoCache(std::string_view url,
                                                     const std::filesystem::path& cache_dir);

// Resolves rev (branch, tag, sha) in a cache made by FetchIntoCache, fetching it by name from
// origin when it is not a mirrored branch or tag (a sha, refs/pull/N/head).
absl::StatusOr<std::string> ResolveInCache(const Git& cache, std::string_view url,
                                           std::string_view rev);

// Where tt_forge_models' objects for forge_commit are: the submodule of a checkout (git_url
// ""), or the cache mirror of the submodule's URL recorded at ttxla_commit of ttxla_repo (a
// fetch; a sha no branch or tag reaches is fetched by name).
absl::StatusOr<std::filesystem::path> ForgeRepo(const std::filesystem::path& ttxla_repo,
                                                std::string_view ttxla_commit,
                                                std::string_view forge_commit,
                                                std::string_view git_url,
                                                const std::filesystem::path& cache_dir);

// The cache directory name FetchAndPin uses for url: readable, filesystem-safe and unique per
// URL ("github.com_tenstorrent_tt-xla-<hash>.git").
std::string CacheNameForUrl(std::string_view url);

}  // namespace triage::git
