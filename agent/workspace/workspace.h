#pragma once

// The agent's own tt-xla checkout, with the nested tt-forge-models repository at
// third_party/tt_forge_models. Before each shard both repositories are forced to the shard's
// pinned commits and cleaned (ignored files such as the venv and build outputs stay), then the
// shard's pre-applied edits are applied. Afterwards the changes the shard made are collected as
// diffs against the pinned commits. One shard at a time: a Workspace is not safe for concurrent
// use, and nothing else may modify the checkout while a shard runs.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/git/git.h"
#include "triage/v1/types.pb.h"

namespace triage::workspace {

inline constexpr std::string_view kForgeDir =
    git::kForgeSubmodulePath;  // "third_party/tt_forge_models"
// FileEdit::repo values.
inline constexpr std::string_view kTtXlaRepo = "tt-xla";
inline constexpr std::string_view kForgeRepo = "tt_forge_models";

// The spec one workspace is prepared from for a batch of verify phases (docs/farm.md, "Batched
// verification"): the head's, with every shard's pre-applied edits (the coordinator batches
// only shards whose edits touch different files) and the union of their registry lines
// (registry::RegistryUnion). FailedPrecondition, naming the shard, when a shard's registry lines
// would reach another shard of the batch.
absl::StatusOr<triage::v1::ShardSpec> BatchSpec(
    const std::vector<const triage::v1::ShardSpec*>& specs);

class Workspace {
 public:
  // root: the tt-xla checkout; shards_dir: where per-shard directories go (logs, evidence,
  // pytest cwd).
  Workspace(std::filesystem::path root, std::filesystem::path shards_dir);

  // For tt-xla, then the submodule: makes sure the pinned commit is present (fetching it from
  // spec.repo_url, or origin when empty, for tt-xla; from the submodule's own origin for
  // tt_forge_models), checks it out detached with --force, `reset --hard`, `clean -fd` (not -x:
  // ignored files stay). Then applies spec.pre_apply (git apply in the matching repository; a
  // failure names the file) and spec.pre_registry (training_utils.py, written atomically).
  // Returns a fresh shards_dir/<shard_id>/attempt-<n>/ (n = 1, 2, ... the first unused) with
  // logs/, junit/ and probes/ inside.
  absl::StatusOr<std::filesystem::path> Prepare(const triage::v1::ShardSpec& spec);

  // Both repositories' changes against the pinned commits, including new untracked (not
  // ignored) files, as `git apply`-able unified diffs (binary-safe) with a/ b/ paths relative
  // to each repository's root. The tt-xla diff leaves out the submodule. The real index is not
  // touched (a temporary index is used).
  struct Diffs {
    std::string ttxla;
    std::string forge;
  };
  absl::StatusOr<Diffs> CollectDiffs(std::string_view ttxla_commit,
                                     std::string_view forge_commit) const;

  // Paths (relative to that repository's root, sorted) of the files changed against commit in
  // repo ("tt-xla" or "tt_forge_models"), from the same comparison as CollectDiffs.
  absl::StatusOr<std::vector<std::string>> ChangedFiles(std::string_view repo,
                                                        std::string_view commit) const;

  // The bytes of path (relative to that repository's root) at commit in repo ("tt-xla" or
  // "tt_forge_models"), read from git's object store, not the working tree, so what a shard
  // changed does not show. NotFound when the file is not in commit; the path is checked like
  // Resolve's (relative, no "..").
  absl::StatusOr<std::string> ReadAtCommit(std::string_view repo, std::string_view commit,
                                           std::string_view path) const;

  // A path inside the workspace from a relative path that may come from YAML keys or results.
  // Rejects empty and absolute paths, any ".." component, NUL bytes, and paths that resolve
  // (following existing symlinks) outside root. Returns root/relative (not canonicalized).
  absl::StatusOr<std::filesystem::path> Resolve(std::string_view relative) const;

  // The lock file of the agent that owns the checkout at root: inside the checkout's own git
  // directory (.git/, or wherever a gitfile or a worktree points), where `git status` never shows
  // it and `git clean` never removes it. root/.triage-agent.lock when root is not the top of a
  // git checkout.
  static std::filesystem::path LockFile(const std::filesystem::path& root);

  const std::filesystem::path& root() const { return root_; }
  const std::filesystem::path& shards_dir() const { return shards_dir_; }
  std::filesystem::path forge_root() const { return root_ / kForgeDir; }

 private:
  absl::StatusOr<git::Git> RepoGit(std::string_view repo) const;
  absl::Status ResetRepo(const git::Git& git, std::string_view name, std::string_view sha,
                         const std::string& fetch_from) const;
  absl::Status ApplyEdit(const triage::v1::FileEdit& edit) const;
  absl::Status ApplyRegistryOps(const triage::v1::ShardSpec& spec) const;
  absl::StatusOr<std::filesystem::path> MakeShardDir(std::string_view shard_id) const;
  // Runs `git diff --cached <diff_args> <commit>` against a temporary index holding the working
  // tree of the repository.
  absl::StatusOr<std::string> DiffWorkingTree(std::string_view repo, std::string_view commit,
                                              const std::vector<std::string>& diff_args) const;

  std::filesystem::path root_;
  std::filesystem::path shards_dir_;
};

}  // namespace triage::workspace
