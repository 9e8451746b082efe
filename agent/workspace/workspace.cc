#include "agent/workspace/workspace.h"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <system_error>

#include "absl/status/status.h"
#include "common/registry/registry.h"
#include "common/registry/registry_union.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::workspace {
namespace {

namespace fs = std::filesystem;

constexpr auto kFetchTimeout = std::chrono::minutes(30);
// A checkout or clean of a large tree on a slow disk.
constexpr auto kTreeTimeout = std::chrono::minutes(10);
constexpr int kMaxSymlinkHops = 40;
constexpr int kMaxAttempts = 10000;
// A file read at a pinned commit (the YAML files and training_utils.py are far smaller).
constexpr std::size_t kMaxPinnedFileBytes = 64 << 20;

absl::Status WithContext(const absl::Status& status, std::string_view context) {
  return absl::Status(status.code(), util::StrCat(context, ": ", util::MessageOf(status)));
}

bool IsFullSha(std::string_view s) {
  if (s.size() != 40 && s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

absl::Status CheckSha(std::string_view what, std::string_view sha) {
  if (!IsFullSha(sha)) {
    return absl::InvalidArgumentError(
        util::StrCat(what, " '", sha, "' is not a full lower-case commit sha"));
  }
  return absl::OkStatus();
}

// A relative path from a spec or a result: no absolute paths, no "..", no NUL.
absl::Status CheckRelative(std::string_view path) {
  if (path.empty()) return absl::InvalidArgumentError("empty path");
  if (path.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("path contains a NUL byte");
  }
  if (path.starts_with('/')) {
    return absl::InvalidArgumentError(util::StrCat("absolute path '", path, "' is not allowed"));
  }
  std::string_view rest = path;
  while (true) {
    const std::size_t slash = rest.find('/');
    if (rest.substr(0, slash) == "..") {
      return absl::InvalidArgumentError(util::StrCat("path '", path, "' contains '..'"));
    }
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  return absl::OkStatus();
}

// A shard id becomes one directory name.
absl::Status CheckShardId(std::string_view id) {
  if (id.empty() || id == "." || id == ".." || id.find('/') != std::string_view::npos ||
      id.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(util::StrCat("invalid shard id '", id, "'"));
  }
  return absl::OkStatus();
}

// Where a commit is fetched from is passed to git as an argument; refuse anything git would
// read as an option or as a command-running transport.
absl::Status CheckFetchSource(std::string_view source) {
  std::string lower;
  for (char c : source)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (source.empty() || source.starts_with('-') || lower.starts_with("ext::") ||
      lower.starts_with("fd::") || std::any_of(source.begin(), source.end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x20;
      })) {
    return absl::InvalidArgumentError(util::StrCat("refusing to fetch from '", source, "'"));
  }
  return absl::OkStatus();
}

bool IsInside(const fs::path& root, const fs::path& path) {
  auto [root_end, path_it] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  (void)path_it;
  return root_end == root.end();
}

// Path components, without empty ones and ".".
std::vector<std::string> Components(const fs::path& path) {
  std::vector<std::string> out;
  for (const fs::path& part : path.relative_path()) {
    std::string s = part.string();
    if (s.empty() || s == ".") continue;
    out.push_back(std::move(s));
  }
  return out;
}

// A temporary index file removed (with its lock) when done.
class TempIndex {
 public:
  explicit TempIndex(fs::path path) : path_(std::move(path)) {}
  ~TempIndex() {
    std::error_code ec;
    fs::remove(path_, ec);
    fs::remove(fs::path(path_.string() + ".lock"), ec);
  }
  TempIndex(const TempIndex&) = delete;
  TempIndex& operator=(const TempIndex&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

Workspace::Workspace(fs::path root, fs::path shards_dir)
    : root_(std::move(root)), shards_dir_(std::move(shards_dir)) {}

absl::StatusOr<git::Git> Workspace::RepoGit(std::string_view repo) const {
  if (repo == kTtXlaRepo) return git::Git(root_);
  if (repo == kForgeRepo) return git::Git(forge_root());
  return absl::InvalidArgumentError(
      util::StrCat("unknown repository '", repo, "' (expected tt-xla or tt_forge_models)"));
}

absl::Status Workspace::ResetRepo(const git::Git& git, std::string_view name, std::string_view sha,
                                  const std::string& fetch_from) const {
  const std::string context = util::StrCat("cannot reset ", name, " at ", git.repo().string());
  auto gitdir = git.Run({"rev-parse", "--absolute-git-dir"});
  if (!gitdir.ok()) return WithContext(gitdir.status(), context);
  // A git command killed by a shard timeout can leave its lock behind, and every later
  // checkout would fail on it. The workspace belongs to this agent, so a lock here is stale.
  std::error_code ec;
  fs::remove(fs::path(std::string(util::TrimWhitespace(*gitdir))) / "index.lock", ec);

  auto has = git.HasCommit(sha);
  if (!has.ok()) return WithContext(has.status(), context);
  if (!*has) {
    if (auto s = CheckFetchSource(fetch_from); !s.ok()) return WithContext(s, context);
    absl::Status fetched =
        git.Run({"fetch", "--quiet", "--no-tags", fetch_from, std::string(sha)}, kFetchTimeout)
            .status();
    has = git.HasCommit(sha);
    if (has.ok() && !*has) {
      // Servers that refuse a bare sha (protocol v0 without allowReachableSHA1InWant) still
      // serve their branches; the commit may be on one of them.
      std::vector<std::string> args = {"fetch", "--quiet", "--no-tags", fetch_from};
      if (fetch_from != "origin") args.push_back("+refs/heads/*:refs/triage/fetched/*");
      auto all = git.Run(args, kFetchTimeout);
      has = git.HasCommit(sha);
      if (fetched.ok()) fetched = all.status();  // the first failure explains best
    }
    if (!has.ok()) return WithContext(has.status(), context);
    if (!*has) {
      return absl::NotFoundError(
          util::StrCat(context, ": commit ", sha,
                       " is not in the repository and could not be fetched from ", fetch_from,
                       fetched.ok() ? " (not on any branch there)"
                                    : util::StrCat(": ", util::MessageOf(fetched))));
    }
  }
  const std::vector<std::vector<std::string>> steps = {
      {"checkout", "--force", "--detach", "--quiet", std::string(sha)},
      {"reset", "--hard", "--quiet", std::string(sha)},
      // -fd, not -x: ignored files (the venv, build outputs, caches) stay.
      {"clean", "-f", "-d", "--quiet"},
  };
  for (const auto& step : steps) {
    auto done = git.Run(step, kTreeTimeout);
    if (!done.ok()) return WithContext(done.status(), context);
  }
  return absl::OkStatus();
}

absl::Status Workspace::ApplyEdit(const triage::v1::FileEdit& edit) const {
  const std::string what = util::StrCat("pre_apply edit of ", edit.repo(), ":", edit.path());
  if (auto s = CheckRelative(edit.path()); !s.ok()) return WithContext(s, what);
  auto git = RepoGit(edit.repo());
  if (!git.ok()) return WithContext(git.status(), what);
  if (edit.diff().empty()) return absl::InvalidArgumentError(util::StrCat(what, ": empty diff"));
  git::Git::CallOptions options;
  options.stdin_data = edit.diff();
  // --whitespace=nowarn: a user's apply.whitespace=error must not reject the coordinator's edit.
  auto applied = git->RunWith({"apply", "--whitespace=nowarn", "-"}, options);
  if (!applied.ok()) {
    return absl::FailedPreconditionError(
        util::StrCat(what, " does not apply: ", util::MessageOf(applied.status())));
  }
  return absl::OkStatus();
}

absl::StatusOr<triage::v1::ShardSpec> BatchSpec(
    const std::vector<const triage::v1::ShardSpec*>& specs) {
  if (specs.empty()) return absl::InvalidArgumentError("an empty batch");
  triage::v1::ShardSpec merged = *specs.front();
  registry::RegistryUnion lines;
  for (const triage::v1::ShardSpec* spec : specs) {
    if (!lines.Add(*spec)) {
      return absl::FailedPreconditionError(
          util::StrCat("shard ", spec->shard_id(), ": its registry lines and those of shard ",
                       specs.front()->shard_id(), "'s batch reach each other's models"));
    }
    if (spec != specs.front()) {
      for (const auto& e : spec->pre_apply()) *merged.add_pre_apply() = e;
    }
  }
  merged.clear_pre_registry();
  for (auto& op : lines.Ops()) *merged.add_pre_registry() = std::move(op);
  return merged;
}

absl::Status Workspace::ApplyRegistryOps(const triage::v1::ShardSpec& spec) const {
  if (spec.pre_registry().empty()) return absl::OkStatus();
  const fs::path path = root_ / registry::kTrainingUtilsPath;
  auto text = util::ReadFile(path);
  if (!text.ok()) return WithContext(text.status(), "pre_registry");
  auto file =
      registry::RegistryFile::Parse(std::string(registry::kTrainingUtilsPath), std::move(*text));
  if (!file.ok()) return WithContext(file.status(), "pre_registry");
  for (const triage::v1::RegistryOp& op : spec.pre_registry()) {
    absl::Status s;
    switch (op.kind()) {
      case triage::v1::RegistryOp::ADD:
        s = file->Add(op.cls(), op.attr());
        break;
      case triage::v1::RegistryOp::REMOVE:
        s = file->Remove(op.cls());
        break;
      default:
        s = absl::InvalidArgumentError("unknown operation kind");
        break;
    }
    if (!s.ok()) {
      return WithContext(
          s, util::StrCat("pre_registry ", triage::v1::RegistryOp::Kind_Name(op.kind()), " ",
                          op.cls(), op.attr().empty() ? "" : " ", op.attr()));
    }
  }
  if (auto s = util::WriteFileAtomic(path, file->Text()); !s.ok()) {
    return WithContext(s, "pre_registry");
  }
  return absl::OkStatus();
}

absl::StatusOr<fs::path> Workspace::MakeShardDir(std::string_view shard_id) const {
  const fs::path base = shards_dir_ / std::string(shard_id);
  std::error_code ec;
  fs::create_directories(base, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        util::StrCat("cannot create ", base.string(), ": ", ec.message()));
  }
  for (int n = 1; n <= kMaxAttempts; ++n) {
    const fs::path dir = base / util::StrCat("attempt-", n);
    // create_directory is false when it exists: that attempt number is taken.
    if (!fs::create_directory(dir, ec)) {
      if (ec) {
        return absl::FailedPreconditionError(
            util::StrCat("cannot create ", dir.string(), ": ", ec.message()));
      }
      continue;
    }
    for (const char* sub : {"logs", "junit", "probes"}) {
      fs::create_directory(dir / sub, ec);
      if (ec) {
        return absl::FailedPreconditionError(
            util::StrCat("cannot create ", (dir / sub).string(), ": ", ec.message()));
      }
    }
    return dir;
  }
  return absl::ResourceExhaustedError(util::StrCat("too many attempts under ", base.string()));
}

absl::StatusOr<fs::path> Workspace::Prepare(const triage::v1::ShardSpec& spec) {
  if (auto s = CheckShardId(spec.shard_id()); !s.ok()) return s;
  if (auto s = CheckSha("ttxla_commit", spec.ttxla_commit()); !s.ok()) return s;
  if (auto s = CheckSha("forge_commit", spec.forge_commit()); !s.ok()) return s;
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) {
    return absl::FailedPreconditionError(
        util::StrCat("workspace ", root_.string(), " does not exist"));
  }

  const git::Git ttxla(root_);
  const std::string source = spec.repo_url().empty() ? std::string("origin") : spec.repo_url();
  if (auto s = ResetRepo(ttxla, kTtXlaRepo, spec.ttxla_commit(), source); !s.ok()) return s;

  // The submodule must be initialized: a checkout of its own (.git is a file pointing into
  // the superproject's modules/ directory, or a directory).
  if (!fs::exists(forge_root() / ".git", ec)) {
    return absl::FailedPreconditionError(
        util::StrCat(forge_root().string(),
                     " is not an initialized git checkout (run `git submodule update --init` in ",
                     root_.string(), ")"));
  }
  const git::Git forge(forge_root());
  if (auto s = ResetRepo(forge, kForgeRepo, spec.forge_commit(), "origin"); !s.ok()) return s;

  for (const triage::v1::FileEdit& edit : spec.pre_apply()) {
    if (auto s = ApplyEdit(edit); !s.ok()) return s;
  }
  if (auto s = ApplyRegistryOps(spec); !s.ok()) return s;
  return MakeShardDir(spec.shard_id());
}

absl::StatusOr<std::string> Workspace::DiffWorkingTree(
    std::string_view repo, std::string_view commit,
    const std::vector<std::string>& diff_args) const {
  auto git = RepoGit(repo);
  if (!git.ok()) return git.status();
  if (commit.empty() || commit.starts_with('-')) {
    return absl::InvalidArgumentError(util::StrCat("invalid commit '", commit, "' for ", repo));
  }
  const std::string context = util::StrCat("cannot diff ", repo, " against ", commit);
  auto gitdir_out = git->Run({"rev-parse", "--absolute-git-dir"});
  if (!gitdir_out.ok()) return WithContext(gitdir_out.status(), context);
  const fs::path gitdir(std::string(util::TrimWhitespace(*gitdir_out)));

  // A copy of the real index keeps its stat cache, so `add -A` only hashes changed files; the
  // real index is never written.
  std::random_device rd;
  TempIndex index(gitdir / util::StrCat("triage-index-", getpid(), "-", rd()));
  std::error_code ec;
  if (fs::exists(gitdir / "index", ec)) {
    fs::copy_file(gitdir / "index", index.path(), fs::copy_options::overwrite_existing, ec);
    if (ec) {
      return absl::InternalError(util::StrCat(context, ": cannot copy the index: ", ec.message()));
    }
  }
  git::Git::CallOptions options;
  options.timeout = kTreeTimeout;
  options.env = {{"GIT_INDEX_FILE", index.path().string()}};
  // The submodule is its own repository with its own diff: no gitlink noise in tt-xla's.
  std::vector<std::string> pathspec = {"--", "."};
  if (repo == kTtXlaRepo) pathspec.push_back(util::StrCat(":(exclude)", kForgeDir));

  std::vector<std::string> add = {"add", "--all"};
  add.insert(add.end(), pathspec.begin(), pathspec.end());
  auto added = git->RunWith(add, options);
  if (!added.ok()) return WithContext(added.status(), context);

  std::vector<std::string> diff = {
      "diff",          "--cached",     "--no-color",      "--no-ext-diff",
      "--no-textconv", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/"};
  diff.insert(diff.end(), diff_args.begin(), diff_args.end());
  diff.push_back(std::string(commit));
  diff.insert(diff.end(), pathspec.begin(), pathspec.end());
  auto out = git->RunWith(diff, options);
  if (!out.ok()) return WithContext(out.status(), context);
  return out;
}

absl::StatusOr<Workspace::Diffs> Workspace::CollectDiffs(std::string_view ttxla_commit,
                                                         std::string_view forge_commit) const {
  Diffs diffs;
  auto ttxla = DiffWorkingTree(kTtXlaRepo, ttxla_commit, {"--binary"});
  if (!ttxla.ok()) return ttxla.status();
  diffs.ttxla = std::move(*ttxla);
  auto forge = DiffWorkingTree(kForgeRepo, forge_commit, {"--binary"});
  if (!forge.ok()) return forge.status();
  diffs.forge = std::move(*forge);
  return diffs;
}

absl::StatusOr<std::string> Workspace::ReadAtCommit(std::string_view repo, std::string_view commit,
                                                    std::string_view path) const {
  if (auto s = CheckRelative(path); !s.ok()) return s;
  auto git = RepoGit(repo);  // Git::Show checks the commit and runs git with argv only
  if (!git.ok()) return git.status();
  return git->Show(commit, path, kMaxPinnedFileBytes);
}

absl::StatusOr<std::vector<std::string>> Workspace::ChangedFiles(std::string_view repo,
                                                                 std::string_view commit) const {
  auto names = DiffWorkingTree(repo, commit, {"--name-only", "-z"});
  if (!names.ok()) return names.status();
  std::vector<std::string> files;
  std::string_view rest = *names;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\0');
    if (end != 0) files.emplace_back(rest.substr(0, end));
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  std::sort(files.begin(), files.end());
  return files;
}

absl::StatusOr<fs::path> Workspace::Resolve(std::string_view relative) const {
  if (auto s = CheckRelative(relative); !s.ok()) return s;
  std::error_code ec;
  const fs::path root = fs::canonical(root_, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        util::StrCat("workspace ", root_.string(), ": ", ec.message()));
  }
  // Walk the path one component at a time, following symlinks by hand: weakly_canonical would
  // treat a dangling symlink as a plain missing name, yet writing through it creates its
  // target, wherever that is.
  std::vector<std::string> pending = Components(fs::path(std::string(relative)));
  std::reverse(pending.begin(), pending.end());
  fs::path current = root;
  int hops = 0;
  while (!pending.empty()) {
    const std::string part = std::move(pending.back());
    pending.pop_back();
    if (part == "..") {
      current = current.parent_path();
      continue;
    }
    const fs::path next = current / part;
    const fs::file_status status = fs::symlink_status(next, ec);
    if (ec || !fs::is_symlink(status)) {
      current = next;
      continue;
    }
    if (++hops > kMaxSymlinkHops) {
      return absl::InvalidArgumentError(
          util::StrCat("path '", relative, "' has too many levels of symbolic links"));
    }
    const fs::path target = fs::read_symlink(next, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          util::StrCat("cannot read symbolic link ", next.string(), ": ", ec.message()));
    }
    if (target.is_absolute()) current = "/";
    std::vector<std::string> parts = Components(target);
    pending.insert(pending.end(), parts.rbegin(), parts.rend());
  }
  if (!IsInside(root, current)) {
    return absl::InvalidArgumentError(util::StrCat("path '", relative, "' resolves to ",
                                                   current.string(), ", outside the workspace ",
                                                   root.string()));
  }
  return (root_ / fs::path(std::string(relative))).lexically_normal();
}

fs::path Workspace::LockFile(const fs::path& root) {
  // git answers for worktrees (.git/worktrees/<name>) and gitfiles (submodules,
  // --separate-git-dir).
  auto out = git::Git(root).Run({"rev-parse", "--show-toplevel", "--absolute-git-dir"},
                                std::chrono::seconds(30));
  if (out.ok()) {
    const auto lines = util::SplitLines(*out);
    std::error_code ec;
    if (lines.size() == 2 && fs::equivalent(fs::path(std::string(lines[0])), root, ec)) {
      return fs::path(std::string(lines[1])) / "triage-agent.lock";
    }
  }
  return root / ".triage-agent.lock";
}

}  // namespace triage::workspace
