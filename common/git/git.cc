#include "common/git/git.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <system_error>

#include "absl/status/status.h"
#include "common/process/process.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::git {
namespace {

// Most of git's stderr that goes into an error message.
constexpr std::size_t kMaxErrorBytes = 4096;

// Options that keep a call self-contained whatever the user's configuration says: no hooks
// (a post-checkout hook must not run on the agent), no submodule recursion, no ext:: transport.
const std::vector<std::string>& CommonArgs() {
  static const std::vector<std::string> args = {
      "--no-pager",
      "-c",
      "core.hooksPath=/dev/null",
      "-c",
      "submodule.recurse=false",
      "-c",
      "protocol.ext.allow=never",
      "-c",
      "advice.detachedHead=false",
      "-c",
      "color.ui=false",
  };
  return args;
}

// Variables that would point git at another repository or index than the one named by -C
// (set when the agent itself runs inside a git hook, for example).
const std::vector<std::string>& RepoOverrideVars() {
  static const std::vector<std::string> vars = {
      "GIT_DIR",
      "GIT_WORK_TREE",
      "GIT_INDEX_FILE",
      "GIT_OBJECT_DIRECTORY",
      "GIT_ALTERNATE_OBJECT_DIRECTORIES",
      "GIT_COMMON_DIR",
      "GIT_NAMESPACE",
      "GIT_PREFIX",
      "GIT_QUARANTINE_PATH",
  };
  return vars;
}

std::string Trimmed(std::string_view s) { return std::string(util::TrimWhitespace(s)); }

bool IsHexSha(std::string_view s) {
  if (s.size() != 40 && s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Revisions and paths are passed as arguments; one starting with '-' would be read as an
// option, and a NUL or newline cannot be a sensible revision.
absl::Status CheckRev(std::string_view what, std::string_view rev) {
  if (rev.empty()) return absl::InvalidArgumentError(util::StrCat("empty ", what));
  if (rev.starts_with('-') || rev.find('\0') != std::string_view::npos ||
      rev.find('\n') != std::string_view::npos) {
    return absl::InvalidArgumentError(util::StrCat("invalid ", what, " '", rev, "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckPath(std::string_view path) {
  if (path.find('\0') != std::string_view::npos || path.find('\n') != std::string_view::npos ||
      path.starts_with('/')) {
    return absl::InvalidArgumentError(util::StrCat("invalid repository path '", path, "'"));
  }
  return absl::OkStatus();
}

// "a/b/" and "./a/b" -> "a/b"; "." and "" -> "".
std::string NormalizeDir(std::string_view dir) {
  while (dir.starts_with("./")) dir.remove_prefix(2);
  while (dir.ends_with('/')) dir.remove_suffix(1);
  if (dir == ".") return "";
  return std::string(dir);
}

std::string ShortStderr(std::string_view err) {
  std::string_view trimmed = util::TrimWhitespace(err);
  if (trimmed.size() > kMaxErrorBytes) trimmed = trimmed.substr(trimmed.size() - kMaxErrorBytes);
  return std::string(trimmed);
}

struct TreeEntry {
  std::string_view mode;
  std::string_view type;
  std::string_view object;
  std::string_view path;
};

// `git ls-tree -z` output: "<mode> SP <type> SP <object> TAB <path>" entries, NUL-terminated.
std::vector<TreeEntry> ParseLsTree(std::string_view listing) {
  std::vector<TreeEntry> entries;
  while (!listing.empty()) {
    const std::size_t end = listing.find('\0');
    std::string_view entry = listing.substr(0, end);
    listing = end == std::string_view::npos ? std::string_view() : listing.substr(end + 1);
    const std::size_t tab = entry.find('\t');
    if (tab == std::string_view::npos) continue;
    std::string_view meta = entry.substr(0, tab);
    const std::size_t sp1 = meta.find(' ');
    const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : meta.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos) continue;
    entries.push_back({meta.substr(0, sp1), meta.substr(sp1 + 1, sp2 - sp1 - 1),
                       meta.substr(sp2 + 1), entry.substr(tab + 1)});
  }
  return entries;
}

struct Exec {
  std::string command;  // for messages: "git -C <repo> <args>"
  process::RunResult result;
};

absl::StatusOr<Exec> Execute(const std::filesystem::path& repo,
                             const std::vector<std::string>& args,
                             const Git::CallOptions& options) {
  process::RunOptions run;
  run.argv = {"git"};
  if (!repo.empty()) {
    run.argv.push_back("-C");
    run.argv.push_back(repo.string());
  }
  run.argv.insert(run.argv.end(), CommonArgs().begin(), CommonArgs().end());
  run.argv.insert(run.argv.end(), args.begin(), args.end());
  run.env = {{"GIT_TERMINAL_PROMPT", "0"}, {"LC_ALL", "C"}, {"GIT_PAGER", "cat"}, {"PAGER", "cat"}};
  // ssh must not ask for a passphrase or host confirmation either; keep the user's own
  // command when there is one.
  if (std::getenv("GIT_SSH_COMMAND") == nullptr && std::getenv("GIT_SSH") == nullptr) {
    run.env.emplace_back("GIT_SSH_COMMAND", "ssh -o BatchMode=yes");
  }
  run.env.insert(run.env.end(), options.env.begin(), options.env.end());
  run.unset_env = RepoOverrideVars();
  run.timeout = options.timeout;
  run.kill_grace = std::chrono::seconds(5);
  run.separate_stderr = true;
  run.max_capture_bytes = options.max_output_bytes + 1;
  run.stdin_data = options.stdin_data;

  Exec exec;
  exec.command = util::StrCat("git", repo.empty() ? "" : " -C ", repo.string());
  for (const std::string& arg : args) util::StrAppend(&exec.command, " ", arg);
  auto result = process::Run(run);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        util::StrCat(exec.command, ": ", util::MessageOf(result.status())));
  }
  exec.result = std::move(*result);
  return exec;
}

absl::Status Failure(const Exec& exec) {
  const process::RunResult& r = exec.result;
  std::string message = util::StrCat(exec.command, ": ", r.Describe());
  const std::string err = ShortStderr(r.err);
  if (!err.empty()) util::StrAppend(&message, ": ", err);
  if (r.timed_out) return absl::DeadlineExceededError(message);
  if (r.cancelled) return absl::CancelledError(message);
  if (err.find("not a git repository") != std::string::npos ||
      err.find("cannot change to") != std::string::npos) {
    return absl::FailedPreconditionError(message);
  }
  return absl::UnknownError(message);
}

absl::StatusOr<std::string> Output(absl::StatusOr<Exec> exec, const Git::CallOptions& options) {
  if (!exec.ok()) return exec.status();
  if (!exec->result.ok()) return Failure(*exec);
  // The capture limit is one byte above the allowed size, so more output shows as a larger size.
  if (exec->result.output.size() > options.max_output_bytes) {
    return absl::ResourceExhaustedError(
        util::StrCat(exec->command, ": output over ", options.max_output_bytes, " bytes"));
  }
  return std::move(exec->result.output);
}

// A failure that is only "the repository is unusable" (as opposed to "no such object").
bool IsRepoFailure(const Exec& exec) {
  return exec.result.timed_out || exec.result.cancelled || exec.result.signal != 0 ||
         absl::IsFailedPrecondition(Failure(exec));
}

// `git ls-tree <flags> -z --full-tree <commit> [paths]`'s output (literal pathspecs); NotFound
// for an unknown commit.
absl::StatusOr<std::string> LsTree(const std::filesystem::path& repo, std::string_view commit,
                                   const std::vector<std::string>& flags,
                                   const std::vector<std::string>& paths) {
  std::vector<std::string> args = {"ls-tree"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"-z", "--full-tree", std::string(commit)});
  args.insert(args.end(), paths.begin(), paths.end());
  Git::CallOptions options;
  options.env = {{"GIT_LITERAL_PATHSPECS", "1"}};
  auto exec = Execute(repo, args, options);
  if (!exec.ok()) return exec.status();
  if (!exec->result.ok()) {
    if (IsRepoFailure(*exec)) return Failure(*exec);
    return absl::NotFoundError(util::StrCat("unknown revision '", commit, "' in ", repo.string()));
  }
  return Output(std::move(exec), options);
}

std::uint64_t Fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

Git::Git(std::filesystem::path repo) : repo_(std::move(repo)) {}

absl::StatusOr<std::string> Git::Run(const std::vector<std::string>& args,
                                     std::chrono::milliseconds timeout) const {
  CallOptions options;
  options.timeout = timeout;
  return RunWith(args, options);
}

absl::StatusOr<std::string> Git::RunWith(const std::vector<std::string>& args,
                                         const CallOptions& options) const {
  return Output(Execute(repo_, args, options), options);
}

absl::StatusOr<std::string> Git::RevParse(std::string_view rev) const {
  if (auto s = CheckRev("revision", rev); !s.ok()) return s;
  auto exec =
      Execute(repo_, {"rev-parse", "--verify", "--quiet", util::StrCat(rev, "^{commit}")}, {});
  if (!exec.ok()) return exec.status();
  if (!exec->result.ok()) {
    if (IsRepoFailure(*exec)) return Failure(*exec);
    return absl::NotFoundError(
        util::StrCat("unknown revision '", rev, "' in ", repo_.string(), " (no such commit)"));
  }
  std::string sha = Trimmed(exec->result.output);
  if (!IsHexSha(sha)) {
    return absl::InternalError(
        util::StrCat(exec->command, ": unexpected output '", sha, "' for '", rev, "'"));
  }
  return sha;
}

absl::StatusOr<std::string> Git::SubmoduleCommit(std::string_view commit,
                                                 std::string_view path) const {
  if (auto s = CheckPath(path); !s.ok()) return s;
  const std::string dir = NormalizeDir(path);
  if (dir.empty()) return absl::InvalidArgumentError("empty submodule path");
  auto sha = RevParse(commit);
  if (!sha.ok()) return sha.status();
  CallOptions options;
  options.env = {{"GIT_LITERAL_PATHSPECS", "1"}};
  auto listing = RunWith({"ls-tree", "-z", "--full-tree", *sha, "--", dir}, options);
  if (!listing.ok()) return listing.status();
  for (const TreeEntry& entry : ParseLsTree(*listing)) {
    if (entry.path != dir) continue;
    if (entry.mode != "160000" || entry.type != "commit") {
      return absl::FailedPreconditionError(
          util::StrCat(dir, " is not a submodule at ", sha->substr(0, 12), " in ", repo_.string(),
                       " (it is a ", entry.type == "tree" ? "directory" : "file", ")"));
    }
    return std::string(entry.object);
  }
  return absl::NotFoundError(util::StrCat(dir, " does not exist at ", sha->substr(0, 12), " in ",
                                          repo_.string(), " (no submodule there)"));
}

absl::StatusOr<std::string> Git::Show(std::string_view commit, std::string_view path,
                                      std::size_t max_bytes) const {
  if (auto s = CheckRev("revision", commit); !s.ok()) return s;
  if (auto s = CheckPath(path); !s.ok()) return s;
  const std::string spec = util::StrCat(commit, ":", path);
  auto size_exec = Execute(repo_, {"cat-file", "-s", spec}, {});
  if (!size_exec.ok()) return size_exec.status();
  if (!size_exec->result.ok()) {
    if (IsRepoFailure(*size_exec)) return Failure(*size_exec);
    auto has = HasCommit(commit);
    if (has.ok() && !*has) {
      return absl::NotFoundError(
          util::StrCat("unknown revision '", commit, "' in ", repo_.string()));
    }
    return absl::NotFoundError(
        util::StrCat(path, " does not exist at ", commit, " in ", repo_.string()));
  }
  const std::string size_text = Trimmed(size_exec->result.output);
  char* end = nullptr;
  const unsigned long long size = std::strtoull(size_text.c_str(), &end, 10);
  if (size_text.empty() || end == nullptr || *end != '\0') {
    return absl::InternalError(
        util::StrCat(size_exec->command, ": unexpected size '", size_text, "'"));
  }
  if (size > max_bytes) {
    return absl::ResourceExhaustedError(
        util::StrCat(repo_.string(), "@", commit, ":", path, ": file is ", size,
                     " bytes, over the limit of ", max_bytes, " bytes"));
  }
  CallOptions options;
  options.max_output_bytes = std::max<std::size_t>(max_bytes, 1);
  auto exec = Execute(repo_, {"cat-file", "blob", spec}, options);
  if (!exec.ok()) return exec.status();
  if (!exec->result.ok()) {
    if (IsRepoFailure(*exec)) return Failure(*exec);
    return absl::FailedPreconditionError(
        util::StrCat(path, " at ", commit, " in ", repo_.string(), " is not a file"));
  }
  return Output(std::move(exec), options);
}

absl::StatusOr<std::map<std::string, Git::TreeObject>> Git::ObjectIds(
    std::string_view commit) const {
  if (auto s = CheckRev("revision", commit); !s.ok()) return s;
  auto listing = LsTree(repo_, commit, {"-r", "-t"}, {});
  if (!listing.ok()) return listing.status();
  std::map<std::string, TreeObject> ids;
  for (const TreeEntry& entry : ParseLsTree(*listing)) {
    ids.emplace(std::string(entry.path),
                TreeObject{std::string(entry.type), std::string(entry.object)});
  }
  auto tree = Run({"rev-parse", "--verify", util::StrCat(commit, "^{tree}")});
  if (!tree.ok()) return tree.status();
  ids[""] = TreeObject{"tree", Trimmed(*tree)};
  return ids;
}

absl::StatusOr<std::vector<std::string>> Git::ListFiles(std::string_view commit,
                                                        std::string_view dir,
                                                        std::vector<std::string>* symlinks) const {
  if (auto s = CheckRev("revision", commit); !s.ok()) return s;
  if (auto s = CheckPath(dir); !s.ok()) return s;
  const std::string prefix = NormalizeDir(dir);
  std::vector<std::string> paths;
  if (!prefix.empty()) paths = {"--", prefix};
  auto listing = LsTree(repo_, commit, {"-r"}, paths);
  if (!listing.ok()) return listing.status();

  std::vector<std::string> files;
  for (const TreeEntry& entry : ParseLsTree(*listing)) {
    if (entry.type != "blob") continue;
    const std::string_view path = entry.path;
    if (!prefix.empty() &&
        !(path.size() > prefix.size() && path.starts_with(prefix) && path[prefix.size()] == '/')) {
      continue;
    }
    files.emplace_back(path);
    if (symlinks != nullptr && entry.mode == "120000") symlinks->emplace_back(path);
  }
  if (symlinks != nullptr) std::sort(symlinks->begin(), symlinks->end());
  if (files.empty() && !prefix.empty()) {
    return absl::NotFoundError(
        util::StrCat("no files under ", prefix, "/ at ", commit, " in ", repo_.string()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

absl::StatusOr<bool> Git::HasCommit(std::string_view sha) const {
  if (auto s = CheckRev("commit", sha); !s.ok()) return s;
  auto exec = Execute(repo_, {"cat-file", "-e", util::StrCat(sha, "^{commit}")}, {});
  if (!exec.ok()) return exec.status();
  if (exec->result.ok()) return true;
  if (IsRepoFailure(*exec)) return Failure(*exec);
  return false;
}

absl::StatusOr<std::string> Git::RemoteUrl(std::string_view remote) const {
  if (auto s = CheckRev("remote name", remote); !s.ok()) return s;
  if (remote.find_first_of(" \t") != std::string_view::npos) {
    return absl::InvalidArgumentError(util::StrCat("invalid remote name '", remote, "'"));
  }
  auto exec = Execute(repo_, {"config", "--get", util::StrCat("remote.", remote, ".url")}, {});
  if (!exec.ok()) return exec.status();
  // `git config --get` exits 1 when the key is not set.
  if (exec->result.exit_code == 1 && !exec->result.timed_out && !exec->result.cancelled) {
    return std::string();
  }
  if (!exec->result.ok()) return Failure(*exec);
  return Trimmed(exec->result.output);
}

absl::StatusOr<std::vector<std::string>> Git::WorkTreeChanges() const {
  auto out = Run({"status", "--porcelain=v1", "-z", "--ignore-submodules=all",
                  "--untracked-files=normal", "--no-renames"});
  if (!out.ok()) return out.status();
  // "XY <path>" records, NUL-terminated.
  std::vector<std::string> paths;
  std::string_view rest = *out;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\0');
    std::string_view record = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (record.size() > 3) paths.emplace_back(record.substr(3));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

GitSource::GitSource(std::filesystem::path repo, std::string commit)
    : git_(std::move(repo)), commit_(std::move(commit)) {}

absl::StatusOr<inventory::Listing> GitSource::List(std::string_view dir,
                                                   std::string_view suffix) const {
  std::vector<std::string> symlinks;
  auto files = git_.ListFiles(commit_, dir, &symlinks);
  if (!files.ok()) {
    if (absl::IsNotFound(files.status())) {
      return absl::NotFoundError(
          util::StrCat("no ", dir, "/ in ", Describe(), " (is this a tt-xla commit?)"));
    }
    return files.status();
  }
  inventory::Listing out;
  std::set<std::string, std::less<>> regular;
  for (std::string& f : *files) {
    if (std::binary_search(symlinks.begin(), symlinks.end(), f)) continue;
    if (f.ends_with(suffix)) out.files.push_back(f);
    regular.insert(std::move(f));
  }
  for (const std::string& link : symlinks) {
    // A link's blob holds its target; resolved by name, as the checkout would resolve it.
    auto to = git_.Show(commit_, link, 4096);
    if (!to.ok()) return to.status();
    const std::filesystem::path named =
        (std::filesystem::path(link).parent_path() / *to).lexically_normal();
    const std::string target = named.generic_string();
    const bool outside =
        std::filesystem::path(*to).is_absolute() || target == ".." || target.starts_with("../");
    if (outside) {
      out.refused.emplace_back(
          link, util::StrCat("symbolic link to '", *to, "', outside the repository; not read"));
    } else if (!link.ends_with(suffix)) {
      continue;  // a link to a folder: not followed
    } else if (!regular.count(target)) {
      out.refused.emplace_back(
          link, util::StrCat("symbolic link to '", *to,
                             "', which is not a regular file listed under ", dir, "/; not read"));
    } else {
      links_[link] = target;
      out.files.push_back(link);
    }
  }
  std::sort(out.files.begin(), out.files.end());
  return out;
}

absl::StatusOr<std::string> GitSource::Read(std::string_view path, std::size_t max_bytes) const {
  if (auto it = links_.find(path); it != links_.end())
    return git_.Show(commit_, it->second, max_bytes);
  return git_.Show(commit_, path, max_bytes);
}

std::string GitSource::Describe() const {
  return util::StrCat(git_.repo().string(), "@", std::string_view(commit_).substr(0, 12));
}

std::string_view ForgeSourceName(ForgeSource source) {
  switch (source) {
    case ForgeSource::kGitlink:
      return "gitlink";
    case ForgeSource::kCheckout:
      return "checkout";
    case ForgeSource::kRef:
      return "ref";
  }
  return "gitlink";
}

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
      return absl::Status(cloned.status().code(), util::StrCat("cannot clone ", url, ": ",
                                                               util::MessageOf(cloned.status())));
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
      return absl::Status(fetched.status().code(), util::StrCat("cannot fetch ", url, ": ",
                                                                util::MessageOf(fetched.status())));
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
                       fetched.ok() ? "" : util::StrCat(": ", util::MessageOf(fetched.status()))));
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
