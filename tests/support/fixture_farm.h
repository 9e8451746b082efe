#pragma once

// A farm on loopback over the ttxla-mini fixture (docs/fixture.md), for suites that run the real
// programs: SetUp makes the fixture into a tt-xla repository (repo_) and starts a coordinator;
// the test starts its agents into agents_; TearDown stops them all. Needs TRIAGE_BINARY_DIR.

#include <signal.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_support.h"

namespace triage::testing {

#ifdef TRIAGE_BINARY_DIR
class FixtureFarmTest : public ::testing::Test {
 protected:
  // coordinator_args: the coordinator's further arguments (tick, heartbeat interval, ...).
  // overlay: laid over the fixture (make-workspace.sh --overlay; empty: the fixture as it is).
  explicit FixtureFarmTest(std::vector<std::string> coordinator_args,
                           std::filesystem::path overlay = {})
      : coordinator_args_(std::move(coordinator_args)), overlay_(std::move(overlay)) {}

  void SetUp() override {
    SetGitTestEnv();
    dir_ = tmp_.path();
    repo_ = MakeFixtureRepo(dir_ / "src", overlay_);
    ASSERT_FALSE(HasFailure());
    agent_port_ = FreePort();
    // Two calls may hand out the same just-freed port: the listeners need two.
    do {
      control_port_ = FreePort();
    } while (control_port_ == agent_port_);
    coordinator_ = std::make_unique<ChildProcess>();
    ASSERT_TRUE(StartLoopbackCoordinator(*coordinator_, dir_, agent_port_, control_port_,
                                         coordinator_args_))
        << ReadFileOrDie(dir_ / "coordinator.log");
  }

  void TearDown() override {
    StopAgents();
    if (coordinator_) {
      coordinator_->Signal(SIGTERM);
      coordinator_->Wait(std::chrono::seconds(10));
    }
  }

  void StopAgents() {
    for (auto& a : agents_) a->Signal(SIGTERM);
    for (auto& a : agents_) a->Wait(std::chrono::seconds(20));
    agents_.clear();
  }

  static std::string Addr(int port) { return "127.0.0.1:" + std::to_string(port); }

  // Starts an agent `id` in its own clone of the fixture (ws-<id>, data-<id>), into agents_:
  // arch "cpu" runs --cpu_only, any other arch has an emulated device (a stand-in for
  // /dev/tenstorrent with one device); `more` is appended to its arguments.
  void StartFixtureAgent(const std::string& id, const std::string& arch,
                         const std::string& executor, std::vector<std::string> more = {}) {
    const auto ws = CloneFixtureWorkspace(repo_, dir_ / ("ws-" + id));
    // This clone's own failure, not an earlier expectation's: an agent must start either way, or
    // the sweep it serves would wait for it until the test times out.
    ASSERT_TRUE(std::filesystem::is_directory(ws / "third_party/tt_forge_models/.git") ||
                std::filesystem::is_regular_file(ws / "third_party/tt_forge_models/.git"))
        << "no workspace at " << ws;
    std::vector<std::string> argv = {kAgentBinary,
                                     "--insecure",
                                     "--coordinator",
                                     Addr(agent_port_),
                                     "--agent_id",
                                     id,
                                     "--workspace",
                                     ws.string(),
                                     "--data_dir",
                                     (dir_ / ("data-" + id)).string(),
                                     "--executors",
                                     executor,
                                     "--lease_wait_seconds",
                                     "2",
                                     "--pytest_timeout_seconds",
                                     "240"};
    if (arch == "cpu") {
      argv.push_back("--cpu_only");
    } else {
      argv.insert(argv.end(),
                  {"--arch", arch, "--device_path", FakeDevices(dir_ / ("dev-" + id)).string()});
    }
    argv.insert(argv.end(), more.begin(), more.end());
    auto a = std::make_unique<ChildProcess>();
    ASSERT_TRUE(a->Start(argv, dir_, dir_ / (id + ".log"), GitTestEnv()));
    agents_.push_back(std::move(a));
  }

  int Ctl(std::vector<std::string> args, std::string* out) {
    return RunCtl(control_port_, std::move(args), dir_, out);
  }

  // The JSON object in a command's output, whatever the command said on stderr around it.
  static nlohmann::json JsonIn(const std::string& out) {
    const std::size_t first = out.find('{'), last = out.rfind('}');
    if (first == std::string::npos || last == std::string::npos || last < first) return {};
    return nlohmann::json::parse(out.substr(first, last - first + 1), nullptr, false);
  }

  // A command sweep on n150 through the stand-in coding agent (tests/fixtures/
  // coding_agent_standin.py, once per entry), with `args` (selection and other flags) after its
  // own; waits for it, writes its report and patches to out/ and returns report.json (null on a
  // failure, which the test has). *id: the sweep's id; *watched: what `sweep watch` printed;
  // standin_args: the stand-in's own options after its WORKSPACE and KEY.
  nlohmann::json StandinSweep(const std::vector<std::string>& args, const std::string& reason,
                              std::string* id = nullptr, std::string* watched = nullptr,
                              const std::vector<std::string>& standin_args = {}) {
    const std::string standin =
        std::string(TRIAGE_SOURCE_DIR) + "/tests/fixtures/coding_agent_standin.py";
    std::vector<std::string> start = {"sweep",
                                      "start",
                                      "--repo",
                                      repo_.string(),
                                      "--arch",
                                      "n150",
                                      "--executor",
                                      "command",
                                      "--command",
                                      [&] {
                                        auto command = nlohmann::json::array(
                                            {"/usr/bin/python3", standin, "{workspace}", "{key}"});
                                        for (const auto& a : standin_args) command.push_back(a);
                                        return command.dump();
                                      }(),
                                      "--per",
                                      "entry",
                                      "--reason",
                                      reason,
                                      "-o",
                                      "json"};
    start.insert(start.end(), args.begin(), args.end());
    std::string out;
    EXPECT_EQ(Ctl(start, &out), 0) << out;
    const nlohmann::json started = JsonIn(out);
    const std::string sweep = started.is_object() ? started.value("id", "") : "";
    EXPECT_FALSE(sweep.empty()) << out;
    if (id != nullptr) *id = sweep;
    if (sweep.empty()) return {};
    EXPECT_EQ(Ctl({"sweep", "watch", sweep}, &out), 0)
        << out << ReadFileOrDie(dir_ / "coordinator.log");
    if (watched != nullptr) *watched = out;
    EXPECT_EQ(Ctl({"sweep", "report", sweep, "--out", (dir_ / "out").string()}, &out), 0) << out;
    EXPECT_EQ(Ctl({"sweep", "patch", sweep, "--out", (dir_ / "out").string()}, &out), 0) << out;
    return nlohmann::json::parse(ReadFileOrDie(dir_ / "out/report.json"), nullptr, false);
  }

  // Starts one agent per arch of archs ("cpu" included), named <prefix>-<arch>, and waits until
  // they are registered (the coordinator plans probe phases for a cpu agent it knows).
  void StartFixtureAgents(const std::string& prefix, const std::string& executor,
                          const std::vector<std::string>& archs,
                          const std::vector<std::string>& more = {}) {
    for (const std::string& arch : archs) {
      ASSERT_NO_FATAL_FAILURE(StartFixtureAgent(prefix + "-" + arch, arch, executor, more));
    }
    ASSERT_TRUE(WaitFor(
        [&] {
          std::string out;
          if (Ctl({"agents", "list", "-o", "json"}, &out) != 0) return false;
          auto j = nlohmann::json::parse(out, nullptr, false);
          std::size_t live = 0;
          for (const auto& a : j.value("agents", nlohmann::json::array())) {
            live += a.value("state", "") != "offline" &&
                    a["dimensions"].value("agent_id", "").starts_with(prefix + "-");
          }
          return live == archs.size();
        },
        std::chrono::seconds(30)));
  }

  TempDir tmp_;
  std::filesystem::path dir_;   // everything of the test: logs, workspaces, data
  std::filesystem::path repo_;  // the fixture's tt-xla repository
  int agent_port_ = 0;
  int control_port_ = 0;
  std::unique_ptr<ChildProcess> coordinator_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;

 private:
  std::vector<std::string> coordinator_args_;
  std::filesystem::path overlay_;
};
#endif

}  // namespace triage::testing
