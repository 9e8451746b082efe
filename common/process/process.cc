#include "common/process/process.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "absl/status/status.h"
#include "common/util/strings.h"
#include "common/util/text.h"

extern char** environ;

namespace triage::process {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often a running child is checked for cancellation (and, without a pidfd, for exit).
constexpr milliseconds kPollInterval{50};
// How long output is still read after the child was reaped and its group killed. Only a
// process that left the group (setsid) can keep the pipe open longer; we stop waiting for it.
constexpr milliseconds kDrainAfterExit{250};
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::size_t kTailWindow = 64 * 1024;

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string ErrnoText(int err) { return std::system_category().message(err); }

// Moves a new descriptor above stdin/stdout/stderr. When the caller runs with 0-2 closed, a
// pipe could land there and the child's dup2 onto 0-2 would clobber one source with another.
absl::StatusOr<Fd> AboveStdio(int fd) {
  if (fd > 2) return Fd(fd);
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int err = errno;
  ::close(fd);
  if (moved < 0) return absl::InternalError(util::StrCat("fcntl: ", ErrnoText(err)));
  return Fd(moved);
}

struct Pipe {
  Fd read;
  Fd write;
};

// Close-on-exec on both ends: a child started by another thread at the same time must not
// inherit our pipe, or our reader would wait for that unrelated child to exit.
absl::StatusOr<Pipe> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(util::StrCat("pipe: ", ErrnoText(errno)));
  }
  auto r = AboveStdio(fds[0]);
  auto w = AboveStdio(fds[1]);
  if (!r.ok()) return r.status();
  if (!w.ok()) return w.status();
  return Pipe{std::move(*r), std::move(*w)};
}

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// What the child reports through the exec-status pipe when it cannot start the command.
enum Stage : int { kStageStdio = 1, kStageChdir = 2, kStageExec = 3 };
struct ChildError {
  int stage;
  int err;
};

// Everything the child needs, prepared before fork: between fork and exec the child may only
// call async-signal-safe functions (no allocation), because another thread may hold the
// allocator's lock at the moment of the fork.
struct ChildSetup {
  int stdin_fd;
  int stdout_fd;
  int stderr_fd;
  int status_fd;
  const char* cwd;  // nullptr = inherit
  char* const* argv;
  char* const* envp;
  const std::vector<std::string>* candidates;
  int nice;
};

[[noreturn]] void ChildFail(int status_fd, Stage stage) {
  ChildError e{stage, errno};
  ssize_t ignored = ::write(status_fd, &e, sizeof(e));
  (void)ignored;
  ::_exit(127);
}

[[noreturn]] void ChildMain(const ChildSetup& s) {
  // Own process group: a timeout kills the command and everything it started with one kill().
  ::setpgid(0, 0);
  // The caller may ignore SIGPIPE (gRPC does) or block signals in this thread; ignored
  // dispositions and the mask survive exec, so reset both.
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &sa, nullptr);
  }
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);

  if (::dup2(s.stdin_fd, 0) < 0 || ::dup2(s.stdout_fd, 1) < 0 || ::dup2(s.stderr_fd, 2) < 0) {
    ChildFail(s.status_fd, kStageStdio);
  }
  if (s.cwd != nullptr && ::chdir(s.cwd) != 0) ChildFail(s.status_fd, kStageChdir);
  if (s.nice > 0) {
    // A lower priority only: failing to lower it (never expected) leaves it as inherited.
    errno = 0;
    const int now = ::getpriority(PRIO_PROCESS, 0);
    if (errno == 0) (void)::setpriority(PRIO_PROCESS, 0, std::min(19, now + s.nice));
  }
#ifdef SYS_close_range
  // Descriptors the caller opened without O_CLOEXEC (sockets, files) stay out of the command.
  ::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
#endif

  // The PATH search of execvp, over candidates computed in the parent from the child's PATH.
  int err = ENOENT;
  bool saw_eacces = false;
  for (const std::string& candidate : *s.candidates) {
    ::execve(candidate.c_str(), s.argv, s.envp);
    switch (errno) {
      case EACCES:
        saw_eacces = true;
        [[fallthrough]];
      case ENOENT:
      case ENOTDIR:
      case ENODEV:
      case ESTALE:
      case ETIMEDOUT:
        continue;
      default:
        err = errno;
        break;
    }
    break;
  }
  errno = (err == ENOENT && saw_eacces) ? EACCES : err;
  ChildFail(s.status_fd, kStageExec);
}

std::string_view KeyOf(std::string_view entry) { return entry.substr(0, entry.find('=')); }

absl::StatusOr<std::vector<std::string>> BuildEnv(const RunOptions& options) {
  std::vector<std::string> env;
  if (options.inherit_env) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  }
  auto remove_key = [&env](std::string_view key) {
    std::erase_if(env, [key](const std::string& entry) { return KeyOf(entry) == key; });
  };
  for (const std::string& key : options.unset_env) remove_key(key);
  for (const auto& [key, value] : options.env) {
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos ||
        value.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(util::StrCat("invalid environment variable '", key, "'"));
    }
    remove_key(key);
    env.push_back(util::StrCat(key, "=", value));
  }
  return env;
}

std::vector<std::string> ExecCandidates(const std::string& file,
                                        const std::vector<std::string>& env) {
  if (file.find('/') != std::string::npos) return {file};
  std::string_view path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& entry : env) {
    if (entry.starts_with("PATH=")) path = std::string_view(entry).substr(5);
  }
  std::vector<std::string> out;
  while (true) {
    const std::size_t colon = path.find(':');
    std::string_view dir = path.substr(0, colon);
    // An empty PATH element means the current directory, as for execvp.
    out.push_back(dir.empty() ? file : util::StrCat(dir, "/", file));
    if (colon == std::string_view::npos) break;
    path.remove_prefix(colon + 1);
  }
  return out;
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

absl::Status StartError(const RunOptions& options, const ChildError& e) {
  const std::string& cmd = options.argv[0];
  switch (e.stage) {
    case kStageChdir:
      if (e.err == ENOENT || e.err == ENOTDIR) {
        return absl::NotFoundError(util::StrCat("cannot run ", cmd, ": working directory ",
                                                options.cwd.string(), " does not exist"));
      }
      return absl::FailedPreconditionError(
          util::StrCat("cannot run ", cmd, ": cannot enter working directory ",
                       options.cwd.string(), ": ", ErrnoText(e.err)));
    case kStageExec:
      if (e.err == ENOENT) {
        return absl::NotFoundError(util::StrCat("command not found: ", cmd));
      }
      if (e.err == EACCES) {
        return absl::PermissionDeniedError(
            util::StrCat("cannot execute ", cmd, ": ", ErrnoText(e.err)));
      }
      return absl::FailedPreconditionError(
          util::StrCat("cannot execute ", cmd, ": ", ErrnoText(e.err)));
    default:
      return absl::InternalError(
          util::StrCat("cannot run ", cmd, ": setting up stdio failed: ", ErrnoText(e.err)));
  }
}

// Reads what is available from fd into out (up to limit bytes in total; the rest is dropped
// and flagged). Returns false at end of file or on a read error.
bool ReadAvailable(int fd, std::vector<char>& buf, std::string& out, std::size_t limit,
                   bool& truncated) {
  while (true) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    if (n == 0) return false;
    const std::size_t room = limit > out.size() ? limit - out.size() : 0;
    const std::size_t take = std::min(room, static_cast<std::size_t>(n));
    out.append(buf.data(), take);
    if (take < static_cast<std::size_t>(n)) truncated = true;
    return true;
  }
}

milliseconds Remaining(Clock::time_point deadline, Clock::time_point now) {
  if (now >= deadline) return milliseconds(0);
  return std::chrono::ceil<milliseconds>(deadline - now);
}

std::string FormatDuration(milliseconds d) {
  if (d.count() % 1000 == 0) return util::StrCat(d.count() / 1000, "s");
  return util::StrCat(d.count(), "ms");
}

}  // namespace

bool RunResult::ok() const { return exit_code == 0 && signal == 0 && !timed_out && !cancelled; }

std::string RunResult::Describe() const {
  if (cancelled) return "cancelled";
  if (timed_out) return util::StrCat("timed out after ", FormatDuration(timeout));
  if (signal != 0) {
    const char* abbrev = ::sigabbrev_np(signal);
    return abbrev != nullptr ? util::StrCat("killed by signal ", signal, " (SIG", abbrev, ")")
                             : util::StrCat("killed by signal ", signal);
  }
  return util::StrCat("exit ", exit_code);
}

absl::StatusOr<RunResult> Run(const RunOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return absl::InvalidArgumentError("cannot run an empty command");
  }
  for (const std::string& arg : options.argv) {
    if (arg.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          util::StrCat("argument of ", options.argv[0], " contains a NUL byte"));
    }
  }
  auto env = BuildEnv(options);
  if (!env.ok()) return env.status();
  const std::vector<std::string> candidates = ExecCandidates(options.argv[0], *env);
  std::vector<char*> argv = CStrings(options.argv);
  std::vector<char*> envp = CStrings(*env);

  // The child's ends (closed in the parent after fork) and the parent's ends.
  Fd child_in, child_out, child_err, parent_in, parent_out, parent_err;
  if (options.stdin_data.empty()) {
    auto devnull = AboveStdio(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devnull.ok() || !devnull->valid()) {
      return absl::InternalError(util::StrCat("cannot open /dev/null: ", ErrnoText(errno)));
    }
    child_in = std::move(*devnull);
  } else {
    auto p = MakePipe();
    if (!p.ok()) return p.status();
    child_in = std::move(p->read);
    parent_in = std::move(p->write);
    SetNonBlocking(parent_in.get());
  }
  if (!options.log_path.empty()) {
    std::error_code ec;
    if (options.log_path.has_parent_path()) {
      std::filesystem::create_directories(options.log_path.parent_path(), ec);
    }
    int fd = ::open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::FailedPreconditionError(
          util::StrCat("cannot open log file ", options.log_path.string(), ": ", ErrnoText(errno)));
    }
    auto log = AboveStdio(fd);
    if (!log.ok()) return log.status();
    child_out = std::move(*log);
  } else {
    auto p = MakePipe();
    if (!p.ok()) return p.status();
    child_out = std::move(p->write);
    parent_out = std::move(p->read);
    SetNonBlocking(parent_out.get());
    if (options.separate_stderr) {
      auto e = MakePipe();
      if (!e.ok()) return e.status();
      child_err = std::move(e->write);
      parent_err = std::move(e->read);
      SetNonBlocking(parent_err.get());
    }
  }
  // Closed by a successful exec (O_CLOEXEC); carries a ChildError otherwise.
  auto status_pipe = MakePipe();
  if (!status_pipe.ok()) return status_pipe.status();

  const ChildSetup setup{
      .stdin_fd = child_in.get(),
      .stdout_fd = child_out.get(),
      .stderr_fd = child_err.valid() ? child_err.get() : child_out.get(),
      .status_fd = status_pipe->write.get(),
      .cwd = options.cwd.empty() ? nullptr : options.cwd.c_str(),
      .argv = argv.data(),
      .envp = envp.data(),
      .candidates = &candidates,
      .nice = options.nice,
  };

  const Clock::time_point start = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(util::StrCat("fork: ", ErrnoText(errno)));
  if (pid == 0) ChildMain(setup);

  // Also set in the parent, so a kill(-pid) right after fork cannot miss the group.
  ::setpgid(pid, pid);
  child_in.Reset();
  child_out.Reset();
  child_err.Reset();
  status_pipe->write.Reset();

  {
    ChildError e{};
    ssize_t n;
    do {
      n = ::read(status_pipe->read.get(), &e, sizeof(e));
    } while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof(e))) {
      int ignored;
      while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
      }
      return StartError(options, e);
    }
  }

  // Writing to a pipe whose reader has gone raises SIGPIPE in the writing thread; block it here
  // (EPIPE is handled) and consume a pending one afterwards.
  sigset_t sigpipe_set, old_mask;
  sigemptyset(&sigpipe_set);
  sigaddset(&sigpipe_set, SIGPIPE);
  bool saw_epipe = false;
  const bool sigpipe_blocked = parent_in.valid();
  if (sigpipe_blocked) ::pthread_sigmask(SIG_BLOCK, &sigpipe_set, &old_mask);

  // Exit notification without polling where the kernel offers it.
  Fd pidfd;
#ifdef SYS_pidfd_open
  pidfd = Fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#endif

  RunResult result;
  std::vector<char> buf(kReadChunk);
  std::size_t stdin_offset = 0;
  enum class KillState { kNone, kTerm, kKill } kill_state = KillState::kNone;
  Clock::time_point term_at;
  Clock::time_point next_cancel_check = start;
  milliseconds backoff{1};

  auto signal_group = [pid](int sig) { ::kill(-pid, sig); };
  auto read_outputs = [&](const pollfd* fds, int out_index, int err_index) {
    if (out_index >= 0 && (fds[out_index].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      if (!ReadAvailable(parent_out.get(), buf, result.output, options.max_capture_bytes,
                         result.output_truncated)) {
        parent_out.Reset();
      }
    }
    if (err_index >= 0 && (fds[err_index].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      if (!ReadAvailable(parent_err.get(), buf, result.err, options.max_capture_bytes,
                         result.output_truncated)) {
        parent_err.Reset();
      }
    }
  };

  while (true) {
    siginfo_t info;
    std::memset(&info, 0, sizeof(info));
    // WNOWAIT: the child stays a zombie, so its pid (= the group id) cannot be reused before
    // the stray members of the group are killed below.
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid) {
      break;
    }
    const Clock::time_point now = Clock::now();
    if (kill_state == KillState::kNone) {
      bool stop = false;
      if (options.timeout.count() > 0 && now - start >= options.timeout) {
        result.timed_out = true;
        result.timeout = options.timeout;
        stop = true;
      } else if ((options.cancelled || options.on_poll) && now >= next_cancel_check) {
        next_cancel_check = now + kPollInterval;
        if (options.on_poll) options.on_poll();
        if (options.cancelled && options.cancelled()) {
          result.cancelled = true;
          stop = true;
        }
      }
      if (stop) {
        signal_group(SIGTERM);
        kill_state = KillState::kTerm;
        term_at = now;
        if (options.kill_grace.count() <= 0) {
          signal_group(SIGKILL);
          kill_state = KillState::kKill;
        }
      }
    } else if (kill_state == KillState::kTerm && now - term_at >= options.kill_grace) {
      signal_group(SIGKILL);
      kill_state = KillState::kKill;
    }

    pollfd fds[4];
    int nfds = 0, out_index = -1, err_index = -1, in_index = -1;
    if (parent_out.valid()) {
      out_index = nfds;
      fds[nfds++] = {parent_out.get(), POLLIN, 0};
    }
    if (parent_err.valid()) {
      err_index = nfds;
      fds[nfds++] = {parent_err.get(), POLLIN, 0};
    }
    if (parent_in.valid()) {
      in_index = nfds;
      fds[nfds++] = {parent_in.get(), POLLOUT, 0};
    }
    if (pidfd.valid()) {
      // Only wakes the loop; the waitid above sees the exit.
      fds[nfds++] = {pidfd.get(), POLLIN, 0};
    }
    milliseconds wait = kPollInterval;
    if (!pidfd.valid()) {
      wait = std::min(wait, backoff);
      backoff = std::min(backoff * 2, kPollInterval);
    }
    if (kill_state == KillState::kNone && options.timeout.count() > 0) {
      wait = std::min(wait, Remaining(start + options.timeout, now));
    } else if (kill_state == KillState::kTerm) {
      wait = std::min(wait, Remaining(term_at + options.kill_grace, now));
    }
    const int rc = ::poll(fds, static_cast<nfds_t>(nfds), static_cast<int>(wait.count()));
    if (rc <= 0) continue;
    backoff = milliseconds(1);
    read_outputs(fds, out_index, err_index);
    if (in_index >= 0 && (fds[in_index].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      const std::string& data = options.stdin_data;
      const ssize_t n =
          ::write(parent_in.get(), data.data() + stdin_offset, data.size() - stdin_offset);
      if (n > 0) stdin_offset += static_cast<std::size_t>(n);
      if (n < 0 && errno == EPIPE) saw_epipe = true;
      // The child closed its stdin (or everything was written): close our end.
      if (stdin_offset == data.size() || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        parent_in.Reset();
      }
    }
  }

  // The child has exited; anything left in its group is a stray (a background job, a daemon
  // that did not detach) that would otherwise outlive the run and could hold the output pipe.
  signal_group(SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.duration = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  parent_in.Reset();
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }

  const Clock::time_point drain_until = Clock::now() + kDrainAfterExit;
  while (parent_out.valid() || parent_err.valid()) {
    const milliseconds wait = Remaining(drain_until, Clock::now());
    if (wait.count() == 0) break;
    pollfd fds[2];
    int nfds = 0, out_index = -1, err_index = -1;
    if (parent_out.valid()) {
      out_index = nfds;
      fds[nfds++] = {parent_out.get(), POLLIN, 0};
    }
    if (parent_err.valid()) {
      err_index = nfds;
      fds[nfds++] = {parent_err.get(), POLLIN, 0};
    }
    if (::poll(fds, static_cast<nfds_t>(nfds), static_cast<int>(wait.count())) > 0) {
      read_outputs(fds, out_index, err_index);
    }
  }

  if (saw_epipe) {
    const timespec zero{0, 0};
    while (::sigtimedwait(&sigpipe_set, nullptr, &zero) > 0) {
    }
  }
  if (sigpipe_blocked) ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  return result;
}

std::vector<std::string> TailLines(std::string_view text, std::size_t n) {
  std::vector<std::string_view> lines = util::SplitLines(text);
  const std::size_t first = lines.size() > n ? lines.size() - n : 0;
  std::vector<std::string> out;
  out.reserve(lines.size() - first);
  for (std::size_t i = first; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.ends_with('\r')) line.remove_suffix(1);
    out.emplace_back(line);
  }
  return out;
}

std::vector<std::string> TailLines(const std::filesystem::path& path, std::size_t n) {
  if (n == 0) return {};
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const std::streamoff size = in.tellg();
  if (size <= 0) return {};
  const std::streamoff start =
      size > static_cast<std::streamoff>(kTailWindow) ? size - kTailWindow : 0;
  in.seekg(start);
  std::string data(static_cast<std::size_t>(size - start), '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<std::size_t>(in.gcount()));
  std::string_view view = data;
  if (start > 0) {
    // The window starts inside a line; drop that partial line unless it is all there is.
    const std::size_t newline = view.find('\n');
    if (newline != std::string_view::npos && newline + 1 < view.size()) {
      view.remove_prefix(newline + 1);
    }
  }
  return TailLines(view, n);
}

}  // namespace triage::process
