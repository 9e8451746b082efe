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
#include "tests/support/test_support.h"

namespace triage::testing {

#ifdef TRIAGE_BINARY_DIR
class FixtureFarmTest : public ::testing::Test {
 protected:
  // coordinator_args: the coordinator's further arguments (tick, heartbeat interval, ...).
  explicit FixtureFarmTest(std::vector<std::string> coordinator_args)
      : coordinator_args_(std::move(coordinator_args)) {}

  void SetUp() override {
    SetGitTestEnv();
    dir_ = tmp_.path();
    repo_ = MakeFixtureRepo(dir_ / "src");
    ASSERT_FALSE(HasFailure());
    agent_port_ = FreePort();
    control_port_ = FreePort();
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

  int Ctl(std::vector<std::string> args, std::string* out) {
    return RunCtl(control_port_, std::move(args), dir_, out);
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
};
#endif

}  // namespace triage::testing
