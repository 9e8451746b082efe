#include "tests/support/test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

namespace triage::testing {

std::filesystem::path SharedTtXlaDir() {
  std::filesystem::path dir = std::filesystem::path(TRIAGE_SHARED_DIR) / "data" / "tt-xla";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir / "head", ec)) return {};
  return dir;
}

TempDir::TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::filesystem::path root = base != nullptr ? base : std::filesystem::temp_directory_path();
  std::random_device rd;
  path_ = root / ("triage-test-" + std::to_string(getpid()) + "-" + std::to_string(rd()));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ReadFileOrDie(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFileOrDie(const std::filesystem::path& path, std::string_view contents) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (!out) ADD_FAILURE() << "cannot write " << path;
}

int RunCommand(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
               std::string* output,
               const std::vector<std::pair<std::string, std::optional<std::string>>>& env) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
    for (const auto& [k, v] : env) {
      if (v) {
        setenv(k.c_str(), v->c_str(), 1);
      } else {
        unsetenv(k.c_str());
      }
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (output != nullptr) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
}

bool ChildProcess::Start(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                         const std::filesystem::path& log_path,
                         const std::vector<std::pair<std::string, std::string>>& env) {
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    setpgid(0, 0);
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  setpgid(pid, pid);
  pid_ = pid;
  return true;
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

int ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    usleep(20'000);
  }
  return -1;
}

std::filesystem::path FakeDevices(const std::filesystem::path& dir, int devices) {
  std::filesystem::create_directories(dir);
  for (int i = 0; i < devices; ++i) WriteFileOrDie(dir / std::to_string(i), "");
  return dir;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    usleep(20'000);
  }
  return cond();
}

std::vector<std::pair<std::string, std::string>> GitTestEnv() {
  return {{"GIT_CONFIG_GLOBAL", "/dev/null"},    {"GIT_CONFIG_NOSYSTEM", "1"},
          {"GIT_AUTHOR_NAME", "triage-test"},    {"GIT_AUTHOR_EMAIL", "test@triage.invalid"},
          {"GIT_COMMITTER_NAME", "triage-test"}, {"GIT_COMMITTER_EMAIL", "test@triage.invalid"}};
}

void SetGitTestEnv() {
  for (const auto& [k, v] : GitTestEnv()) setenv(k.c_str(), v.c_str(), 1);
}

std::vector<std::string> GitTestArgv(const std::filesystem::path& dir,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"git",
                                   "-C",
                                   dir.string(),
                                   "-c",
                                   "protocol.file.allow=always",
                                   "-c",
                                   "init.defaultBranch=main",
                                   "-c",
                                   "commit.gpgsign=false",
                                   "-c",
                                   "advice.detachedHead=false"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

namespace {

void Git(const std::filesystem::path& dir, std::vector<std::string> args) {
  args.insert(args.begin(), {"git", "-c", "protocol.file.allow=always"});
  std::string out;
  int rc = RunCommand(args, dir, &out);
  if (rc != 0) ADD_FAILURE() << "git failed in " << dir << ": " << out;
}

}  // namespace

std::filesystem::path MakeTtXlaRepo(const std::filesystem::path& dir,
                                    const std::map<std::string, std::string>& yaml,
                                    const std::map<std::string, std::string>& forge) {
  SetGitTestEnv();
  const auto forge_repo = dir / "tt-forge-models";
  const auto repo = dir / "tt-xla";
  std::filesystem::create_directories(forge_repo);
  std::filesystem::create_directories(repo);
  Git(forge_repo, {"init", "-q", "-b", "main"});
  for (const auto& [path, text] : forge) WriteFileOrDie(forge_repo / path, text);
  if (forge.empty()) WriteFileOrDie(forge_repo / "README", "tt-forge-models\n");
  Git(forge_repo, {"add", "-A"});
  Git(forge_repo, {"commit", "-q", "-m", "forge"});
  Git(repo, {"init", "-q", "-b", "main"});
  for (const auto& [path, text] : yaml) WriteFileOrDie(repo / path, text);
  Git(repo, {"submodule", "add", "-q", forge_repo.string(), "third_party/tt_forge_models"});
  Git(repo, {"add", "-A"});
  Git(repo, {"commit", "-q", "-m", "tt-xla"});
  return repo;
}

std::filesystem::path MakeUnpackRepo(const std::filesystem::path& dir, int loaders) {
  std::map<std::string, std::string> yaml, forge;
  std::string y = "test_config:\n";
  for (int i = 0; i < loaders; ++i) {
    const std::string m = "m" + std::to_string(i);
    y += "  " + m + "/pytorch-V-single_device-training:\n    status: NOT_SUPPORTED_SKIP\n" +
         "    reason: \"tt-forge-models doesn't implement unpack_forward_output for this "
         "model.\"\n";
    forge[m + "/pytorch/loader.py"] = "class ModelLoader:\n    pass\n";
  }
  yaml["tests/runner/test_config/torch/test_config_training_single_device.yaml"] = y;
  return MakeTtXlaRepo(dir, yaml, forge);
}

void WriteLoaderTool(const std::filesystem::path& path, const std::string& delay) {
  WriteFileOrDie(path, "#!/bin/sh\n" + (delay.empty() ? "" : "sleep " + delay + "\n") +
                           "echo \"# triaged $2\" >> \"$1/loader.py\"\n");
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

namespace {

// make-workspace.sh with args, run beside dest.
void MakeWorkspace(std::vector<std::string> args, const std::filesystem::path& dest) {
  args.insert(args.begin(), std::string(TRIAGE_SOURCE_DIR) + "/tests/fixtures/make-workspace.sh");
  std::filesystem::create_directories(dest.parent_path());
  std::string out;
  if (RunCommand(args, dest.parent_path(), &out) != 0) {
    ADD_FAILURE() << "make-workspace.sh failed for " << dest << ": " << out;
  }
}

}  // namespace

std::filesystem::path MakeFixtureRepo(const std::filesystem::path& dest,
                                      const std::filesystem::path& overlay) {
  if (overlay.empty()) {
    MakeWorkspace({dest.string()}, dest);
  } else {
    MakeWorkspace({"--overlay", overlay.string(), dest.string()}, dest);
  }
  return dest / "tt-xla";
}

std::filesystem::path CloneFixtureWorkspace(const std::filesystem::path& repo,
                                            const std::filesystem::path& dest) {
  MakeWorkspace({"--clone", repo.string(), dest.string()}, dest);
  return dest;
}

std::filesystem::path CloneWorkspace(const std::filesystem::path& repo,
                                     const std::filesystem::path& dest) {
  SetGitTestEnv();
  Git(dest.parent_path(), {"clone", "-q", repo.string(), dest.string()});
  Git(dest, {"submodule", "update", "-q", "--init"});
  return dest;
}

std::vector<std::string> BacktickedCommands(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t at = text.find('`'); at != std::string_view::npos;) {
    const std::size_t end = text.find('`', at + 1);
    if (end == std::string_view::npos) break;
    out.emplace_back(text.substr(at + 1, end - at - 1));
    at = text.find('`', end + 1);
  }
  return out;
}

std::vector<std::string> ShellWords(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else if (quote == '"' && c == '\\' && i + 1 < line.size() && line[i + 1] == '"') {
        word.push_back('"');
        ++i;
      } else {
        word.push_back(c);
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

}  // namespace triage::testing
