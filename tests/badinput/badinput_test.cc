// The bad-input corpus: every case in tests/badinput/*.yaml runs one of the project's programs
// on hostile input in a fresh directory and checks that it fails the way an operator can act on:
// the expected exit code, an error naming the file or field, nothing it read changed, nothing
// left behind that the case does not allow, and no signal or hang. The format is described in
// tests/badinput/README.md.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_support.h"
#include "yaml-cpp/yaml.h"

extern char** environ;

namespace triage::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path kCaseDir = fs::path(TRIAGE_SOURCE_DIR) / "tests/badinput";

// Output no program may ever print: a crash, an uncaught exception, a library's raw message.
const std::regex kCrashText(
    "terminate called|what\\(\\):|Segmentation fault|core dumped|Aborted|"
    "operator\\[\\] call on a scalar|bad_alloc|basic_string|bad_variant_access|"
    "bad_optional_access|\\bstoi\\b|\\bstol\\b|std::");

// One file to create before the run.
struct FileSpec {
  enum Kind { kFile, kSymlink, kFifo, kDir } kind = kFile;
  std::string content;  // kFile: bytes; kSymlink: the link's target
};

struct Case {
  std::string file;  // the case file it came from
  std::string name;
  std::string load_error;  // set: the case itself is malformed, and fails
  std::vector<std::pair<std::string, FileSpec>> files;
  std::string fixture;  // "ttxla-mini"
  std::vector<std::vector<std::string>> setup;
  std::vector<std::string> run;
  std::vector<std::pair<std::string, std::string>> env;
  std::string stdin_bytes;  // the program's standard input (default: empty)
  bool coordinator = false;
  int exit_code = -1;
  std::string stderr_re;
  std::string stdout_re;
  std::vector<std::string> outputs;
  std::vector<std::string> creates;
  int timeout_seconds = 20;
};

std::string FromHex(const std::string& hex, std::string* error) {
  std::string digits;
  for (char c : hex) {
    if (std::isxdigit(static_cast<unsigned char>(c))) {
      digits.push_back(c);
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      *error = "hex: not a hex digit: '" + std::string(1, c) + "'";
      return "";
    }
  }
  if (digits.size() % 2 != 0) {
    *error = "hex: odd number of digits";
    return "";
  }
  std::string out;
  for (std::size_t i = 0; i < digits.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  }
  return out;
}

FileSpec ParseFileSpec(const YAML::Node& n, std::string* error) {
  FileSpec f;
  if (n.IsScalar()) {
    f.content = n.as<std::string>();
    return f;
  }
  if (n.IsNull()) return f;  // an empty file
  if (!n.IsMap()) {
    *error = "file content: a string or a mapping (text, hex, repeat, symlink, fifo, dir)";
    return f;
  }
  if (n["parts"]) {
    for (const auto& part : n["parts"]) {
      FileSpec piece = ParseFileSpec(part, error);
      if (piece.kind != FileSpec::kFile) *error = "parts: file contents only";
      f.content += piece.content;
    }
  } else if (n["symlink"]) {
    f.kind = FileSpec::kSymlink;
    f.content = n["symlink"].as<std::string>();
  } else if (n["fifo"]) {
    f.kind = FileSpec::kFifo;
  } else if (n["dir"]) {
    f.kind = FileSpec::kDir;
  } else if (n["hex"]) {
    f.content = FromHex(n["hex"].as<std::string>(), error);
  } else if (n["repeat"]) {
    const long times = n["times"] ? n["times"].as<long>() : 1;
    if (times < 0 || times > 100'000'000) *error = "repeat: times out of range";
    const std::string unit = n["repeat"].as<std::string>();
    for (long i = 0; i < times && error->empty(); ++i) f.content += unit;
  } else if (n["text"]) {
    f.content = n["text"].as<std::string>();
  } else {
    *error = "file content mapping needs text, hex, repeat, parts, symlink, fifo or dir";
  }
  if (n["prefix"]) f.content = n["prefix"].as<std::string>() + f.content;
  if (n["suffix"]) f.content += n["suffix"].as<std::string>();
  return f;
}

std::vector<std::string> Strings(const YAML::Node& n) {
  std::vector<std::string> out;
  if (!n) return out;
  if (n.IsScalar()) return {n.as<std::string>()};
  for (const auto& item : n) out.push_back(item.as<std::string>());
  return out;
}

Case ParseCase(const YAML::Node& n, const std::string& file, std::size_t index) {
  Case c;
  c.file = file;
  c.name = "case" + std::to_string(index);
  static const std::set<std::string> kKeys = {
      "name",  "files", "fixture", "setup",  "run",     "env",     "coordinator",
      "stdin", "exit",  "stderr",  "stdout", "outputs", "creates", "timeout"};
  try {
    if (!n.IsMap()) {
      c.load_error = "a case is a mapping";
      return c;
    }
    for (const auto& kv : n) {
      if (kKeys.count(kv.first.as<std::string>()) == 0) {
        c.load_error = "unknown key '" + kv.first.as<std::string>() + "'";
        return c;
      }
    }
    if (n["name"]) c.name = n["name"].as<std::string>();
    if (!std::regex_match(c.name, std::regex("[a-z0-9_]+"))) {
      c.load_error = "name must be [a-z0-9_]+";
      c.name = "case" + std::to_string(index);
      return c;
    }
    if (n["files"]) {
      for (const auto& kv : n["files"]) {
        std::string error;
        c.files.emplace_back(kv.first.as<std::string>(), ParseFileSpec(kv.second, &error));
        if (!error.empty()) c.load_error = kv.first.as<std::string>() + ": " + error;
      }
    }
    if (n["fixture"]) {
      c.fixture = n["fixture"].as<std::string>();
      if (c.fixture != "ttxla-mini") c.load_error = "fixture: only ttxla-mini";
    }
    if (n["setup"]) {
      for (const auto& step : n["setup"]) c.setup.push_back(Strings(step));
    }
    c.run = Strings(n["run"]);
    static const std::set<std::string> kPrograms = {"triagectl", "triage-coordinator",
                                                    "triage-agent"};
    if (c.run.empty() || kPrograms.count(c.run[0]) == 0) {
      c.load_error =
          "run: an argv whose first element is triagectl, triage-coordinator or "
          "triage-agent";
    }
    if (n["env"]) {
      for (const auto& kv : n["env"]) {
        c.env.emplace_back(kv.first.as<std::string>(), kv.second.as<std::string>());
      }
    }
    if (n["stdin"]) {
      std::string error;
      c.stdin_bytes = ParseFileSpec(n["stdin"], &error).content;
      if (!error.empty()) c.load_error = "stdin: " + error;
    }
    if (n["coordinator"]) c.coordinator = n["coordinator"].as<bool>();
    if (!n["exit"]) c.load_error = "exit: the expected exit code is required";
    if (n["exit"]) c.exit_code = n["exit"].as<int>();
    if (!n["stderr"]) c.load_error = "stderr: a pattern the error must match is required";
    if (n["stderr"]) c.stderr_re = n["stderr"].as<std::string>();
    if (n["stdout"]) c.stdout_re = n["stdout"].as<std::string>();
    c.outputs = Strings(n["outputs"]);
    c.creates = Strings(n["creates"]);
    if (n["timeout"]) c.timeout_seconds = n["timeout"].as<int>();
    // Patterns compile now, so a bad one is reported as the case's mistake.
    for (const auto& re : {c.stderr_re, c.stdout_re}) std::regex(re, std::regex::ECMAScript);
    for (const auto& re : c.creates) std::regex(re, std::regex::ECMAScript);
  } catch (const std::exception& e) {
    c.load_error = std::string("malformed case: ") + e.what();
  }
  return c;
}

std::vector<Case> LoadCases() {
  std::vector<Case> cases;
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kCaseDir, ec)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::set<std::string> names;
  for (const auto& path : files) {
    const std::string stem = path.stem().string();
    YAML::Node root;
    try {
      root = YAML::LoadFile(path.string());
    } catch (const std::exception& e) {
      Case c;
      c.file = path.filename().string();
      c.name = "load";
      c.load_error = e.what();
      cases.push_back(c);
      continue;
    }
    if (!root.IsSequence()) {
      Case c;
      c.file = path.filename().string();
      c.name = "load";
      c.load_error = "a case file is a list of cases";
      cases.push_back(c);
      continue;
    }
    std::size_t i = 0;
    for (const auto& n : root) {
      Case c = ParseCase(n, path.filename().string(), i++);
      const std::string full = stem + "_" + c.name;
      if (!names.insert(full).second) {
        c.load_error = "duplicate name";
        c.name += "_dup" + std::to_string(i);
      }
      c.name = stem + "_" + c.name;
      std::replace(c.name.begin(), c.name.end(), '-', '_');
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// Every entry under root (not following links), except git's own bookkeeping under .git/:
// relative path -> a description that changes whenever its type, bytes or link target do.
std::map<std::string, std::string> Snapshot(const fs::path& root) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::none, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path rel = it->path().lexically_relative(root);
    if (rel.filename() == ".git") {
      out[rel.string()] = "git";
      it.disable_recursion_pending();
      continue;
    }
    const auto st = it->symlink_status(ec);
    if (fs::is_symlink(st)) {
      out[rel.string()] = "link:" + fs::read_symlink(it->path(), ec).string();
    } else if (fs::is_directory(st)) {
      out[rel.string()] = "dir";
    } else if (fs::is_regular_file(st)) {
      std::ifstream in(it->path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      out[rel.string()] = "file:" + ss.str();
    } else if (fs::is_fifo(st)) {
      out[rel.string()] = "fifo";
    } else {
      out[rel.string()] = "other";
    }
  }
  return out;
}

std::string Expand(std::string s, const std::map<std::string, std::string>& vars) {
  for (const auto& [k, v] : vars) {
    for (std::size_t at; (at = s.find(k)) != std::string::npos;) s.replace(at, k.size(), v);
  }
  return s;
}

struct Outcome {
  bool timed_out = false;
  bool signaled = false;
  int code = -1;  // exit code, or the signal
  std::string out, err;
};

// Runs argv (no shell) in cwd with exactly env; stdout/stderr go to files under io.
Outcome RunProgram(const std::vector<std::string>& argv, const fs::path& cwd,
                   const std::vector<std::string>& env, const fs::path& io, int timeout_seconds) {
  const fs::path out_path = io / "stdout", err_path = io / "stderr", in_path = io / "stdin";
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  Outcome o;
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int in = open(in_path.c_str(), O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  int status = 0;
  while (true) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      o.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  // Whatever the program left running in its process group goes too.
  kill(-pid, SIGKILL);
  if (!o.timed_out) {
    if (WIFSIGNALED(status)) {
      o.signaled = true;
      o.code = WTERMSIG(status);
    } else {
      o.code = WEXITSTATUS(status);
    }
  }
  o.out = ReadFileOrDie(out_path);
  o.err = ReadFileOrDie(err_path);
  return o;
}

// The environment of every run: the test's own, without any of the programs' variables, with
// git isolated from the user's config and the daemons on loopback port 0 with no metrics
// listener (a daemon that wrongly starts serving takes no fixed port, and is killed at the
// timeout), then the case's variables.
std::vector<std::string> Environment(const Case& c) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = kv.substr(0, eq);
    if (k.starts_with("TRIAGE") || k.starts_with("GIT_")) continue;
    env[k] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : GitTestEnv()) env[k] = v;
  env["TRIAGE_COORDINATOR_AGENT_ADDRESS"] = "127.0.0.1:0";
  env["TRIAGE_COORDINATOR_CONTROL_ADDRESS"] = "127.0.0.1:0";
  env["TRIAGE_COORDINATOR_METRICS_ADDRESS"] = "";
  env["TRIAGE_AGENT_METRICS_ADDRESS"] = "";
  for (const auto& [k, v] : c.env) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::string Program(const std::string& name) {
  if (name == "triagectl") return kCtlBinary;
  if (name == "triage-coordinator") return kCoordinatorBinary;
  return kAgentBinary;
}

// gtest prints a failing test's parameter: the case's file and name.
void PrintTo(const Case& c, std::ostream* os) { *os << c.file << ": " << c.name; }

class BadInput : public ::testing::TestWithParam<Case> {};

TEST_P(BadInput, FailsNamingItsCause) {
  const Case& c = GetParam();
  ASSERT_TRUE(c.load_error.empty()) << c.file << ": case " << c.name << ": " << c.load_error;
  TempDir tmp;
  const fs::path dir = tmp.path() / "d";
  const fs::path io = tmp.path() / "io";
  fs::create_directories(dir);
  fs::create_directories(io);
  std::map<std::string, std::string> vars = {{"{dir}", dir.string()}, {"{src}", TRIAGE_SOURCE_DIR}};
  const std::vector<std::string> env = Environment(c);

  if (!c.fixture.empty()) {
    std::string out;
    ASSERT_EQ(
        RunCommand({(fs::path(TRIAGE_SOURCE_DIR) / "tests/fixtures/make-workspace.sh").string(),
                    (dir / "ws").string()},
                   dir, &out),
        0)
        << out;
    vars["{repo}"] = (dir / "ws/tt-xla").string();
  }
  for (const auto& [rel, spec] : c.files) {
    const fs::path p = dir / Expand(rel, vars);
    fs::create_directories(p.parent_path());
    switch (spec.kind) {
      case FileSpec::kFile:
        WriteFileOrDie(p, Expand(spec.content, vars));
        break;
      case FileSpec::kSymlink:
        fs::create_symlink(Expand(spec.content, vars), p);
        break;
      case FileSpec::kFifo:
        ASSERT_EQ(mkfifo(p.c_str(), 0644), 0) << p;
        break;
      case FileSpec::kDir:
        fs::create_directories(p);
        break;
    }
  }
  ChildProcess coordinator;
  if (c.coordinator) {
    const fs::path data = tmp.path() / "coordinator";
    ASSERT_TRUE(coordinator.Start({kCoordinatorBinary, "--insecure", "--data_dir", data.string(),
                                   "--agent_address", "127.0.0.1:0", "--control_address",
                                   "127.0.0.1:0", "--metrics_address", "", "--tick_ms", "100"},
                                  tmp.path(), tmp.path() / "coordinator.log", GitTestEnv()));
    std::smatch m;
    std::string ports;
    ASSERT_TRUE(WaitFor(
        [&] {
          std::error_code ec;
          if (!fs::exists(data / "ports.json", ec)) return false;
          ports = ReadFileOrDie(data / "ports.json");
          return std::regex_search(ports, m, std::regex("\"control_port\": (\\d+)"));
        },
        15s))
        << ReadFileOrDie(tmp.path() / "coordinator.log");
    const int port = std::stoi(m[1].str());
    ASSERT_TRUE(WaitForCoordinator(port, tmp.path(), 15s));
    vars["{control}"] = "127.0.0.1:" + std::to_string(port);
  }

  for (const auto& step : c.setup) {
    std::vector<std::string> argv;
    for (const auto& a : step) argv.push_back(Expand(a, vars));
    if (argv[0] == "triagectl" || argv[0] == "triage-coordinator" || argv[0] == "triage-agent") {
      argv[0] = Program(argv[0]);
    }
    std::string out;
    ASSERT_EQ(RunCommand(argv, dir, &out), 0) << "setup " << argv[0] << ": " << out;
  }

  std::vector<std::string> argv = {Program(c.run[0])};
  for (std::size_t i = 1; i < c.run.size(); ++i) argv.push_back(Expand(c.run[i], vars));
  WriteFileOrDie(io / "stdin", c.stdin_bytes);
  const auto before = Snapshot(dir);
  const Outcome o = RunProgram(argv, dir, env, io, c.timeout_seconds);
  const auto after = Snapshot(dir);

  std::string shown = "\n  argv:";
  for (const auto& a : argv) shown += " '" + a + "'";
  shown += "\n  stdout: " + o.out + "\n  stderr: " + o.err;
  ASSERT_FALSE(o.timed_out) << "did not exit within " << c.timeout_seconds
                            << " s (a daemon given bad input must refuse to start)" << shown;
  ASSERT_FALSE(o.signaled) << "killed by signal " << o.code << shown;
  EXPECT_EQ(o.code, c.exit_code) << shown;
  EXPECT_TRUE(std::regex_search(o.err, std::regex(c.stderr_re)))
      << "stderr does not match /" << c.stderr_re << "/" << shown;
  if (!c.stdout_re.empty()) {
    EXPECT_TRUE(std::regex_search(o.out, std::regex(c.stdout_re)))
        << "stdout does not match /" << c.stdout_re << "/" << shown;
  }
  EXPECT_FALSE(std::regex_search(o.err, kCrashText)) << "a crash or a raw library error" << shown;
  for (const auto& rel : c.outputs) {
    std::error_code ec;
    EXPECT_FALSE(fs::exists(fs::symlink_status(dir / Expand(rel, vars), ec)))
        << rel << " exists afterwards" << shown;
  }
  for (const auto& [rel, what] : before) {
    auto it = after.find(rel);
    if (it == after.end()) {
      ADD_FAILURE() << rel << " was removed" << shown;
    } else if (it->second != what) {
      ADD_FAILURE() << rel << " was changed" << shown;
    }
  }
  for (const auto& [rel, what] : after) {
    if (before.count(rel) != 0) continue;
    bool allowed = false;
    for (const auto& re : c.creates) allowed = allowed || std::regex_match(rel, std::regex(re));
    EXPECT_TRUE(allowed) << rel << " appeared (not in the case's creates)" << shown;
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadInput, ::testing::ValuesIn(LoadCases()),
                         [](const ::testing::TestParamInfo<Case>& p) { return p.param.name; });

}  // namespace
}  // namespace triage::testing
