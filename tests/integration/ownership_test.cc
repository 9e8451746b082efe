// One process per port and per directory, with real processes: a second triage-coordinator on a
// port or a data directory the first one holds, a second triage-agent on a data directory or a
// workspace another agent holds, each exits non-zero with a message that names what is taken,
// and the first one keeps going.

#include <signal.h>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_support.h"

namespace triage {
namespace {

using namespace std::chrono_literals;

std::string Addr(int port) { return "127.0.0.1:" + std::to_string(port); }

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

class OwnershipTest : public ::testing::Test {
 protected:
  // A coordinator on data_dir with the given listener addresses; waits for its ports.json.
  std::unique_ptr<testing::ChildProcess> StartCoordinator(const std::filesystem::path& data_dir,
                                                          const std::string& agent_address,
                                                          const std::string& control_address,
                                                          const std::string& metrics_address,
                                                          const std::string& log_name) {
    auto c = std::make_unique<testing::ChildProcess>();
    EXPECT_TRUE(c->Start({testing::kCoordinatorBinary, "--insecure", "--data_dir",
                          data_dir.string(), "--agent_address", agent_address, "--control_address",
                          control_address, "--metrics_address", metrics_address},
                         tmp_.path(), tmp_.path() / log_name, testing::GitTestEnv()));
    return c;
  }

  // ports.json as an object; an empty one while it is not there yet (the coordinator writes it
  // just after its listeners are up, so a client may reach it a moment before).
  nlohmann::json Ports(const std::filesystem::path& data_dir) {
    std::error_code ec;
    if (!std::filesystem::exists(data_dir / "ports.json", ec)) return nlohmann::json::object();
    auto j = nlohmann::json::parse(testing::ReadFileOrDie(data_dir / "ports.json"), nullptr,
                                   /*allow_exceptions=*/false);
    return j.is_object() ? j : nlohmann::json::object();
  }

  // Starts the first coordinator and waits until triagectl reaches it.
  void StartFirst() {
    agent_port_ = testing::FreePort();
    control_port_ = testing::FreePort();
    metrics_port_ = testing::FreePort();
    first_ = StartCoordinator(tmp_.path() / "first", Addr(agent_port_), Addr(control_port_),
                              Addr(metrics_port_), "first.log");
    ASSERT_TRUE(testing::WaitFor([&] { return ListSweeps(); }, 15s))
        << testing::ReadFileOrDie(tmp_.path() / "first.log");
    ASSERT_TRUE(testing::WaitFor(
        [&] { return Ports(tmp_.path() / "first").value("pid", 0) == first_->pid(); }, 5s))
        << Ports(tmp_.path() / "first").dump();
  }

  bool ListSweeps() {
    std::string out;
    return testing::RunCommand({testing::kCtlBinary, "sweep", "list", "--insecure", "--coordinator",
                                Addr(control_port_)},
                               tmp_.path(), &out) == 0;
  }

  // A second process must exit by itself, non-zero; returns its log.
  std::string ExpectExitsNonZero(testing::ChildProcess& p, const std::string& log_name) {
    const int rc = p.Wait(20s);
    const std::string log = testing::ReadFileOrDie(tmp_.path() / log_name);
    EXPECT_NE(rc, -1) << "still running:\n" << log;
    EXPECT_NE(rc, 0) << log;
    return log;
  }

  // A second coordinator (own data dir) on the given addresses, one of them the first's: it
  // exits non-zero with "<what>: address in use (another process holds it)", and the first
  // keeps serving.
  void ExpectSecondExitsNaming(const std::string& agent, const std::string& control,
                               const std::string& metrics, const std::string& what) {
    auto second = StartCoordinator(tmp_.path() / "second", agent, control, metrics, "second.log");
    const std::string log = ExpectExitsNonZero(*second, "second.log");
    EXPECT_TRUE(Contains(log, what + ": address in use (another process holds it)")) << log;
    // One clear line, no gRPC dump before it, and nothing left behind.
    EXPECT_FALSE(Contains(log, "No address added")) << log;
    EXPECT_FALSE(std::filesystem::exists(tmp_.path() / "second" / "coordinator.db")) << log;
    ExpectFirstStillServes();
  }

  void ExpectFirstStillServes() {
    EXPECT_TRUE(ListSweeps());
    EXPECT_EQ(first_->Wait(100ms), -1) << "the first coordinator must keep running";
    auto ports = Ports(tmp_.path() / "first");
    EXPECT_EQ(ports.value("pid", 0), first_->pid()) << ports.dump();
    EXPECT_EQ(ports.value("control_port", 0), control_port_) << ports.dump();
  }

  testing::TempDir tmp_;
  int agent_port_ = 0;
  int control_port_ = 0;
  int metrics_port_ = 0;
  std::unique_ptr<testing::ChildProcess> first_;
};

TEST_F(OwnershipTest, SecondCoordinatorOnATakenControlPortExitsNamingIt) {
  StartFirst();
  ExpectSecondExitsNaming("127.0.0.1:0", Addr(control_port_), "",
                          "--control_address " + Addr(control_port_));
}

TEST_F(OwnershipTest, SecondCoordinatorOnATakenAgentPortExitsNamingIt) {
  StartFirst();
  ExpectSecondExitsNaming(Addr(agent_port_), "127.0.0.1:0", "",
                          "--agent_address " + Addr(agent_port_));
}

TEST_F(OwnershipTest, SecondCoordinatorOnATakenMetricsPortExitsNamingIt) {
  StartFirst();
  ExpectSecondExitsNaming("127.0.0.1:0", "127.0.0.1:0", Addr(metrics_port_),
                          "--metrics_address " + Addr(metrics_port_));
}

TEST_F(OwnershipTest, SecondCoordinatorOnTheSameDataDirExitsNamingTheOwner) {
  StartFirst();
  const auto before = testing::ReadFileOrDie(tmp_.path() / "first" / "ports.json");
  auto second =
      StartCoordinator(tmp_.path() / "first", "127.0.0.1:0", "127.0.0.1:0", "", "second.log");
  const std::string log = ExpectExitsNonZero(*second, "second.log");
  EXPECT_TRUE(Contains(log, "data_dir " + (tmp_.path() / "first").string() + " is in use by pid " +
                                std::to_string(first_->pid())))
      << log;
  EXPECT_EQ(testing::ReadFileOrDie(tmp_.path() / "first" / "ports.json"), before)
      << "ports.json must stay the first coordinator's";
  ExpectFirstStillServes();
}

// Agents: no coordinator is needed, an agent that cannot reach one keeps retrying (and holding
// its directories).
class AgentOwnershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = testing::MakeTtXlaRepo(tmp_.path() / "src", {}, {});
    ws_ = testing::CloneWorkspace(repo_, tmp_.path() / "ws");
    nowhere_ = Addr(testing::FreePort());
  }

  std::unique_ptr<testing::ChildProcess> StartAgent(const std::string& id,
                                                    const std::filesystem::path& workspace,
                                                    const std::filesystem::path& data_dir) {
    auto a = std::make_unique<testing::ChildProcess>();
    EXPECT_TRUE(a->Start({testing::kAgentBinary, "--insecure", "--coordinator", nowhere_,
                          "--agent_id", id, "--workspace", workspace.string(), "--data_dir",
                          data_dir.string(), "--executors", "command"},
                         tmp_.path(), tmp_.path() / (id + ".log"), testing::GitTestEnv()));
    return a;
  }

  // Waits until lock_file names the process.
  void WaitForLock(const std::filesystem::path& lock_file, const testing::ChildProcess& p,
                   const std::string& log_name) {
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          std::error_code ec;
          return std::filesystem::exists(lock_file, ec) &&
                 testing::ReadFileOrDie(lock_file) == std::to_string(p.pid()) + "\n";
        },
        15s))
        << lock_file << "\n"
        << testing::ReadFileOrDie(tmp_.path() / log_name);
  }

  std::string ExpectExitsNonZero(testing::ChildProcess& p, const std::string& log_name) {
    const int rc = p.Wait(20s);
    const std::string log = testing::ReadFileOrDie(tmp_.path() / log_name);
    EXPECT_NE(rc, -1) << "still running:\n" << log;
    EXPECT_NE(rc, 0) << log;
    return log;
  }

  std::string GitStatus(const std::filesystem::path& dir) {
    std::string out;
    EXPECT_EQ(testing::RunCommand({"git", "-C", dir.string(), "status", "--porcelain", "--ignored",
                                   "--untracked-files=all"},
                                  dir, &out),
              0)
        << out;
    return out;
  }

  testing::TempDir tmp_;
  std::filesystem::path repo_;
  std::filesystem::path ws_;
  std::string nowhere_;
};

TEST_F(AgentOwnershipTest, SecondAgentOnTheSameDataDirExitsNamingTheOwner) {
  auto first = StartAgent("first", ws_, tmp_.path() / "data");
  WaitForLock(tmp_.path() / "data" / "agent.lock", *first, "first.log");
  auto other_ws = testing::CloneWorkspace(repo_, tmp_.path() / "ws2");
  auto second = StartAgent("second", other_ws, tmp_.path() / "data");
  const std::string log = ExpectExitsNonZero(*second, "second.log");
  EXPECT_TRUE(Contains(log, "data_dir " + (tmp_.path() / "data").string() + " is in use by pid " +
                                std::to_string(first->pid())))
      << log;
  EXPECT_EQ(first->Wait(100ms), -1) << "the first agent keeps running";
}

TEST_F(AgentOwnershipTest, SecondAgentOnTheSameWorkspaceExitsAndTheLockIsNotInGitStatus) {
  auto first = StartAgent("first", ws_, tmp_.path() / "data1");
  WaitForLock(ws_ / ".git" / "triage-agent.lock", *first, "first.log");
  EXPECT_EQ(GitStatus(ws_), "") << "the lock must not show in the checkout";
  auto second = StartAgent("second", ws_, tmp_.path() / "data2");
  const std::string log = ExpectExitsNonZero(*second, "second.log");
  EXPECT_TRUE(Contains(
      log, "workspace " + ws_.string() + " is in use by pid " + std::to_string(first->pid())))
      << log;
  EXPECT_EQ(first->Wait(100ms), -1) << "the first agent keeps running";
}

// A workspace that is a git worktree (its .git is a file): the lock goes in the worktree's own
// git directory, so the main checkout and its worktree can each have an agent.
TEST_F(AgentOwnershipTest, WorktreeWorkspaceHasItsOwnLock) {
  const auto wt = tmp_.path() / "wt";
  std::string out;
  ASSERT_EQ(testing::RunCommand(
                testing::GitTestArgv(ws_, {"worktree", "add", "--detach", wt.string(), "HEAD"}),
                ws_, &out),
            0)
      << out;
  ASSERT_TRUE(std::filesystem::is_regular_file(wt / ".git"));
  auto on_main = StartAgent("main", ws_, tmp_.path() / "data-main");
  WaitForLock(ws_ / ".git" / "triage-agent.lock", *on_main, "main.log");
  auto on_wt = StartAgent("wt", wt, tmp_.path() / "data-wt");
  WaitForLock(ws_ / ".git" / "worktrees" / "wt" / "triage-agent.lock", *on_wt, "wt.log");
  EXPECT_EQ(GitStatus(wt), "");
  EXPECT_EQ(GitStatus(ws_), "");
  auto second = StartAgent("second", wt, tmp_.path() / "data-second");
  const std::string log = ExpectExitsNonZero(*second, "second.log");
  EXPECT_TRUE(Contains(
      log, "workspace " + wt.string() + " is in use by pid " + std::to_string(on_wt->pid())))
      << log;
  EXPECT_EQ(on_main->Wait(100ms), -1);
  EXPECT_EQ(on_wt->Wait(100ms), -1);
}

// The lock goes with the process: once the first agent is gone, the next one starts.
TEST_F(AgentOwnershipTest, TheLockEndsWithItsOwner) {
  auto first = StartAgent("first", ws_, tmp_.path() / "data");
  WaitForLock(tmp_.path() / "data" / "agent.lock", *first, "first.log");
  first->Signal(SIGKILL);
  first->Wait(5s);
  auto next = StartAgent("next", ws_, tmp_.path() / "data");
  WaitForLock(tmp_.path() / "data" / "agent.lock", *next, "next.log");
  WaitForLock(ws_ / ".git" / "triage-agent.lock", *next, "next.log");
}

}  // namespace
}  // namespace triage
