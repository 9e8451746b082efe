#pragma once

// Read-mostly access to git repositories through the git command line (argv, never a shell).
// Every call runs `git -C <repo>` with GIT_TERMINAL_PROMPT=0 and LC_ALL=C (so a missing
// credential fails instead of waiting for a password, and messages are stable), no pager and
// no hooks.

#include <chrono>
#include <cstddef>
#include <filesystem>
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
  absl::StatusOr<std::vector<std::string>> ListFiles(std::string_view commit,
                                                     std::string_view dir) const;
  // Whether sha names a commit present in the object store (no fetch).
  absl::StatusOr<bool> HasCommit(std::string_view sha) const;
  // The URL of a remote; "" when the remote (or its URL) is not configured.
  absl::StatusOr<std::string> RemoteUrl(std::string_view remote = "origin") const;

 private:
  std::filesystem::path repo_;
};

// A FileSource over the files of one commit, so later edits to the working tree (or checking
// out another commit) do not change what is read.
class GitSource : public inventory::FileSource {
 public:
  // commit: a full sha (resolve branches and tags with Git::RevParse first).
  GitSource(std::filesystem::path repo, std::string commit);

  absl::StatusOr<std::vector<std::string>> List(std::string_view dir,
                                                std::string_view suffix) const override;
  absl::StatusOr<std::string> Read(std::string_view path, std::size_t max_bytes) const override;
  // "<repo>@<first 12 hex digits of the commit>".
  std::string Describe() const override;

  const std::string& commit() const { return commit_; }

 private:
  Git git_;
  std::string commit_;
};

// A tt-xla commit and the tt-forge-models commit recorded for its submodule.
struct Pinned {
  std::filesystem::path repo;  // the repository the commits were read from
  std::string ttxla_commit;
  std::string forge_commit;
  std::string origin_url;  // "" when the repository has no origin
};

// Pins a tt-xla checkout at its HEAD: the HEAD commit and the third_party/tt_forge_models
// gitlink recorded in that commit (not whatever the submodule has checked out).
absl::StatusOr<Pinned> PinCheckout(const std::filesystem::path& checkout);

// Clones url into cache_dir/<name derived from the url> as a bare repository the first time and
// fetches all branches and tags on later calls, then resolves ref (branch, tag or sha; "" =
// HEAD, the remote's default branch) and pins it like PinCheckout. Pinned::repo is the bare
// cache repository (read it with GitSource). URLs starting with '-' and the ext::/fd::
// transports are refused.
absl::StatusOr<Pinned> FetchAndPin(std::string_view url, std::string_view ref,
                                   const std::filesystem::path& cache_dir);

// The cache directory name FetchAndPin uses for url: readable, filesystem-safe and unique per
// URL ("github.com_tenstorrent_tt-xla-<hash>.git").
std::string CacheNameForUrl(std::string_view url);

}  // namespace triage::git
