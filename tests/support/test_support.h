#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace triage::testing {

#ifdef TRIAGE_BINARY_DIR
// The project's programs in this build tree, for tests that run them as real processes.
inline const std::string kCoordinatorBinary = TRIAGE_BINARY_DIR "/coordinator/triage-coordinator";
inline const std::string kAgentBinary = TRIAGE_BINARY_DIR "/agent/triage-agent";
inline const std::string kCtlBinary = TRIAGE_BINARY_DIR "/coordinator/triagectl/triagectl";
#endif

// ../shared/data/tt-xla beside the project (real tt-xla YAML); empty path when absent.
std::filesystem::path SharedTtXlaDir();

// Skips the current test with a message that names the missing folder. Use as
//   TRIAGE_REQUIRE_SHARED_DATA(dir);
#define TRIAGE_REQUIRE_SHARED_DATA(dir)                                  \
  const std::filesystem::path dir = ::triage::testing::SharedTtXlaDir(); \
  if (dir.empty()) {                                                     \
    GTEST_SKIP() << "real tt-xla data not found at " TRIAGE_SHARED_DIR   \
                    "/data/tt-xla "                                      \
                    "(the shared folder must sit beside the project)";   \
  }

// A fresh directory under the test temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string ReadFileOrDie(const std::filesystem::path& path);
void WriteFileOrDie(const std::filesystem::path& path, std::string_view contents);

// Runs argv (no shell) with cwd; returns the exit code and fills output (stdout+stderr). env:
// variables set (value) or removed (nullopt) in the child's environment.
int RunCommand(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
               std::string* output,
               const std::vector<std::pair<std::string, std::optional<std::string>>>& env = {});

// A background process for tests that need real processes (coordinator, agents). Output goes
// to log_path. The destructor kills the whole process group with SIGKILL.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  bool Start(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
             const std::filesystem::path& log_path,
             const std::vector<std::pair<std::string, std::string>>& env = {});
  void Signal(int sig);
  // Waits for exit (up to timeout); returns the exit code, or -1 on timeout.
  int Wait(std::chrono::milliseconds timeout);
  bool running() const { return pid_ > 0; }
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
};

#ifdef TRIAGE_BINARY_DIR
// `triagectl ARGS --insecure --coordinator 127.0.0.1:PORT` in cwd: its exit code, and its
// output (stdout+stderr) in *out.
inline int RunCtl(int control_port, std::vector<std::string> args, const std::filesystem::path& cwd,
                  std::string* out) {
  args.insert(args.begin(), kCtlBinary);
  args.insert(args.end(),
              {"--insecure", "--coordinator", "127.0.0.1:" + std::to_string(control_port)});
  return RunCommand(args, cwd, out);
}
#endif

// The commands a message quotes between backticks, in order ("run `triagectl x` or `y`").
std::vector<std::string> BacktickedCommands(std::string_view text);
// A command line split as a POSIX shell splits words: blanks separate, double and single quotes
// group (no expansion, no escapes but \" inside double quotes).
std::vector<std::string> ShellWords(std::string_view line);

// Polls cond every 20 ms until it holds or timeout passes.
bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout);

#ifdef TRIAGE_BINARY_DIR
// Waits until the coordinator answers `triagectl sweep list` on control_port.
inline bool WaitForCoordinator(int control_port, const std::filesystem::path& cwd,
                               std::chrono::milliseconds timeout) {
  return WaitFor(
      [&] {
        std::string out;
        return RunCtl(control_port, {"sweep", "list"}, cwd, &out) == 0;
      },
      timeout);
}
#endif

// A TCP port that was free a moment ago on 127.0.0.1.
int FreePort();

// A stand-in for a device agent's device directory (its --device_path): dir, created with
// `devices` entries 0, 1, ... (docs/farm.md, "Only a working agent is a witness"). Returns dir.
std::filesystem::path FakeDevices(const std::filesystem::path& dir, int devices = 1);

// A tt-xla-shaped git repository: tests/runner/test_config/... files from `yaml` (path ->
// text), a tt_forge_models submodule at third_party/tt_forge_models with `forge` files
// (path -> text), both committed. Returns the tt-xla repo path (the forge repo sits beside it).
std::filesystem::path MakeTtXlaRepo(const std::filesystem::path& dir,
                                    const std::map<std::string, std::string>& yaml,
                                    const std::map<std::string, std::string>& forge);
// MakeTtXlaRepo with `loaders` loaders m0..m<loaders-1>, each with one training entry that
// NOT_SUPPORTED_SKIPs with the unpack_forward_output reason (the unpack playbook's gate).
std::filesystem::path MakeUnpackRepo(const std::filesystem::path& dir, int loaders);
// A stand-in for a headless triage tool for the command executor, called as
// `tool <loader dir> <key>`: waits `delay` (e.g. "0.5", "" = none), then appends
// "# triaged <key>" to the loader.
void WriteLoaderTool(const std::filesystem::path& path, const std::string& delay = "");
// tests/fixtures/make-workspace.sh (docs/fixture.md): the ttxla-mini fixture as a tt-xla
// repository with its tt_forge_models submodule, under dest (which must not exist or be empty).
// Returns the tt-xla path; a failure is the calling test's. overlay: a directory laid over the
// fixture first (make-workspace.sh --overlay; empty: none).
std::filesystem::path MakeFixtureRepo(const std::filesystem::path& dest,
                                      const std::filesystem::path& overlay = {});
// make-workspace.sh --clone: a workspace of that repository at dest, its submodule checked out.
std::filesystem::path CloneFixtureWorkspace(const std::filesystem::path& repo,
                                            const std::filesystem::path& dest);
// A workspace clone of such a repo (with the submodule checked out).
std::filesystem::path CloneWorkspace(const std::filesystem::path& repo,
                                     const std::filesystem::path& dest);
// Environment that isolates git from the user's config, with an author identity.
std::vector<std::pair<std::string, std::string>> GitTestEnv();
void SetGitTestEnv();  // the same, on this process
// argv for git in dir, with the options tests need (file:// submodules, main branch, no signing,
// no detached-HEAD advice) before args. Run it with GitTestEnv().
std::vector<std::string> GitTestArgv(const std::filesystem::path& dir,
                                     const std::vector<std::string>& args);

#ifdef TRIAGE_BINARY_DIR
// A triage-coordinator in p on 127.0.0.1 (--insecure, no /metrics, git isolated by GitTestEnv),
// its data in dir/cdata and its log in dir/coordinator.log, with further args; true once it
// answers on control_port (within 15 s).
inline bool StartLoopbackCoordinator(ChildProcess& p, const std::filesystem::path& dir,
                                     int agent_port, int control_port,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kCoordinatorBinary,  "--insecure",
                                   "--data_dir",        (dir / "cdata").string(),
                                   "--agent_address",   "127.0.0.1:" + std::to_string(agent_port),
                                   "--control_address", "127.0.0.1:" + std::to_string(control_port),
                                   "--metrics_address", ""};
  argv.insert(argv.end(), args.begin(), args.end());
  return p.Start(argv, dir, dir / "coordinator.log", GitTestEnv()) &&
         WaitForCoordinator(control_port, dir, std::chrono::seconds(15));
}
#endif

}  // namespace triage::testing
