#pragma once

// Runs a command as a child process without a shell: argv is passed to exec as is. The child
// gets its own process group so a timeout or a cancellation kills everything it started
// (pytest workers, compilers, background helpers), not just the direct child.

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace triage::process {

struct RunOptions {
  // argv[0] is looked up on PATH (the PATH of the child's environment) unless it contains '/'.
  std::vector<std::string> argv;
  // Working directory of the child; empty = inherit.
  std::filesystem::path cwd;
  // Set or override on top of the inherited environment.
  std::vector<std::pair<std::string, std::string>> env;
  // false: the child inherits nothing of this process's environment, only `env` (the command
  // executor's scrubbed environment, docs/farm.md "Executors").
  bool inherit_env = true;
  std::vector<std::string> unset_env;
  // 0 = none. On expiry the whole process group is killed (SIGTERM, then SIGKILL).
  std::chrono::milliseconds timeout{0};
  // Time between SIGTERM and SIGKILL to the group on timeout or cancellation.
  std::chrono::milliseconds kill_grace{2000};
  // When set, stdout and stderr are appended to this file (created with its parent
  // directories) and nothing is captured in memory.
  std::filesystem::path log_path;
  // When log_path is empty: stdout+stderr are captured up to this many bytes; the rest is
  // read and dropped (so the child never blocks) and RunResult::output_truncated is set. With
  // separate_stderr the limit applies to each stream.
  std::size_t max_capture_bytes = 16 << 20;
  // Capture stderr separately into RunResult::err (git: stdout is data, stderr the message).
  bool separate_stderr = false;
  // Written to the child's stdin, which is then closed; "" = stdin is /dev/null.
  std::string stdin_data;
  // Polled about every 50 ms while the child runs; true = kill the group.
  std::function<bool()> cancelled;
  // Called about every 50 ms while the child runs (before `cancelled`): to watch what it writes.
  std::function<void()> on_poll;
  // Added to the child's niceness before exec (0 = inherit; capped at the lowest priority).
  // Work that holds no device yields the CPU to the sessions that do (docs/farm.md, "Probe
  // niceness").
  int nice = 0;
};

struct RunResult {
  int exit_code = -1;  // when the process exited
  int signal = 0;      // when it was killed by a signal
  bool timed_out = false;
  bool cancelled = false;
  bool output_truncated = false;
  std::string output;  // stdout (+ stderr unless separate_stderr)
  std::string err;     // stderr when separate_stderr
  std::chrono::milliseconds duration{0};
  std::chrono::milliseconds timeout{0};  // the limit that expired, when timed_out

  // Exited with 0, and was neither timed out, cancelled nor signalled.
  bool ok() const;
  // "exit 0", "exit 3", "killed by signal 11 (SIGSEGV)", "timed out after 5s", "cancelled".
  std::string Describe() const;
};

// Runs options.argv to completion. Returns an error only when the process could not be started:
// an empty argv, fork failure, an unusable log_path, a cwd that cannot be entered (the message
// names the cwd) or an exec failure (NotFound naming argv[0] when the command does not exist).
// Everything that happens after a successful exec is reported in the RunResult.
//
// After the direct child exits, any process still in its group is killed, and output is read
// for at most a short drain period, so a stray background process holding the output pipe
// cannot hang the caller. Safe to call from several threads at once.
absl::StatusOr<RunResult> Run(const RunOptions& options);

// The last n lines of a file (log tails streamed to the coordinator). Reads at most the last
// 64 KiB; a partial first line of that window is dropped. Missing file: empty.
std::vector<std::string> TailLines(const std::filesystem::path& path, std::size_t n);
// The last n lines of text (a final line without '\n' counts as a line; a trailing '\r' is
// dropped from each line).
std::vector<std::string> TailLines(std::string_view text, std::size_t n);
// Strings are text, not paths (RunResult::output): without these a std::string or a literal
// would convert to both std::string_view and std::filesystem::path and be ambiguous.
inline std::vector<std::string> TailLines(const std::string& text, std::size_t n) {
  return TailLines(std::string_view(text), n);
}
inline std::vector<std::string> TailLines(const char* text, std::size_t n) {
  return TailLines(std::string_view(text), n);
}

}  // namespace triage::process
