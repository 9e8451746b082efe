#include "common/git/git.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "common/git/internal.h"
#include "common/process/process.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::git {

namespace internal {

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

// "a/b/" and "./a/b" -> "a/b"; "." and "" -> "".
std::string NormalizeDir(std::string_view dir) {
  while (dir.starts_with("./")) dir.remove_prefix(2);
  while (dir.ends_with('/')) dir.remove_suffix(1);
  if (dir == ".") return "";
  return std::string(dir);
}

std::uint64_t Fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace internal

using internal::CheckRev;
using internal::Fnv1a;
using internal::IsHexSha;
using internal::NormalizeDir;

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

absl::Status CheckPath(std::string_view path) {
  if (path.find('\0') != std::string_view::npos || path.find('\n') != std::string_view::npos ||
      path.starts_with('/')) {
    return absl::InvalidArgumentError(util::StrCat("invalid repository path '", path, "'"));
  }
  return absl::OkStatus();
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

// The payload of a failure's status: GitSaid's text (internal::GitSaid).
constexpr char kGitSaidPayload[] = "triage.git/said";
constexpr std::size_t kGitSaidBytes = 300;

std::string Said(const process::RunResult& r) {
  std::vector<std::string> lines;
  for (std::string_view line : util::SplitLines(r.err)) {
    line = util::TrimWhitespace(line);
    if (line.empty()) continue;
    lines.emplace_back(line);
    if (line.starts_with("fatal:")) break;
  }
  std::string said = util::StrJoin(lines, "; ");
  said.resize(util::TruncateUtf8(said, kGitSaidBytes).size());
  return util::StrCat(said, said.empty() ? "" : " ", "(git ", r.Describe(), ")");
}

absl::Status Failure(const Exec& exec) {
  const process::RunResult& r = exec.result;
  std::string message = util::StrCat(exec.command, ": ", r.Describe());
  const std::string err = ShortStderr(r.err);
  if (!err.empty()) util::StrAppend(&message, ": ", err);
  absl::Status st;
  if (r.timed_out) {
    st = absl::DeadlineExceededError(message);
  } else if (r.cancelled) {
    st = absl::CancelledError(message);
  } else if (err.find("not a git repository") != std::string::npos ||
             err.find("cannot change to") != std::string::npos) {
    st = absl::FailedPreconditionError(message);
  } else {
    st = absl::UnknownError(message);
  }
  if (!r.timed_out && !r.cancelled) st.SetPayload(kGitSaidPayload, absl::Cord(Said(r)));
  return st;
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

}  // namespace

namespace internal {

std::string GitSaid(const absl::Status& failure) {
  if (auto said = failure.GetPayload(kGitSaidPayload)) return std::string(*said);
  return util::MessageOf(failure);
}

}  // namespace internal

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

}  // namespace triage::git
