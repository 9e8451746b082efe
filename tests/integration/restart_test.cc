// Real processes: triage-coordinator, two triage-agents with the command executor, and
// triagectl. The coordinator is killed with SIGKILL in the middle of a sweep and started again
// on the same data directory: the sweep finishes and every shard's result is stored exactly once.

#include <signal.h>

#include <set>

#include "coordinator/persistence/sqlite_store.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_support.h"

namespace triage {
namespace {

using namespace std::chrono_literals;

constexpr int kLoaders = 10;

class RestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = testing::MakeUnpackRepo(tmp_.path(), kLoaders);
    script_ = tmp_.path() / "triage-tool.sh";
    testing::WriteLoaderTool(script_, "0.5");
    agent_port_ = testing::FreePort();
    control_port_ = testing::FreePort();
  }

  void StartCoordinator() {
    coordinator_ = std::make_unique<testing::ChildProcess>();
    ASSERT_TRUE(coordinator_->Start({testing::kCoordinatorBinary,
                                     "--insecure",
                                     "--data_dir",
                                     (tmp_.path() / "cdata").string(),
                                     "--agent_address",
                                     "127.0.0.1:" + std::to_string(agent_port_),
                                     "--control_address",
                                     "127.0.0.1:" + std::to_string(control_port_),
                                     "--metrics_address",
                                     "",
                                     "--tick_ms",
                                     "100",
                                     "--lease_ttl_seconds",
                                     "20",
                                     "--agent_dead_after_seconds",
                                     "20",
                                     "--heartbeat_interval_seconds",
                                     "1",
                                     "--lease_wait_seconds",
                                     "1"},
                                    tmp_.path(), tmp_.path() / "coordinator.log",
                                    testing::GitTestEnv()));
    ASSERT_TRUE(testing::WaitForCoordinator(control_port_, tmp_.path(), 10s))
        << testing::ReadFileOrDie(tmp_.path() / "coordinator.log");
  }

  int Ctl(std::vector<std::string> args, std::string* out) {
    return testing::RunCtl(control_port_, std::move(args), tmp_.path(), out);
  }

  nlohmann::json Status(const std::string& id) {
    // An empty object while the coordinator does not answer (it is being restarted).
    std::string out;
    if (Ctl({"sweep", "status", id, "-o", "json"}, &out) != 0) return nlohmann::json::object();
    auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
    return j.is_object() ? j : nlohmann::json::object();
  }

  testing::TempDir tmp_;
  std::filesystem::path repo_;
  std::filesystem::path script_;
  int agent_port_ = 0;
  int control_port_ = 0;
  std::unique_ptr<testing::ChildProcess> coordinator_;
};

TEST_F(RestartTest, CoordinatorKilledMidSweepFinishesWithEveryResultOnce) {
  StartCoordinator();
  std::vector<std::unique_ptr<testing::ChildProcess>> agents;
  for (int i = 0; i < 2; ++i) {
    const std::string id = "agent-" + std::to_string(i);
    auto ws = testing::CloneWorkspace(repo_, tmp_.path() / ("ws-" + id));
    auto a = std::make_unique<testing::ChildProcess>();
    ASSERT_TRUE(
        a->Start({testing::kAgentBinary, "--insecure", "--coordinator",
                  "127.0.0.1:" + std::to_string(agent_port_), "--agent_id", id, "--workspace",
                  ws.string(), "--data_dir", (tmp_.path() / ("data-" + id)).string(),
                  "--lease_wait_seconds", "1", "--device_path", ""},
                 tmp_.path(), tmp_.path() / (id + ".log"), testing::GitTestEnv()));
    agents.push_back(std::move(a));
  }
  std::string out;
  ASSERT_EQ(Ctl({"sweep", "start", "--repo", repo_.string(), "--executor", "command", "--command",
                 "[\"" + script_.string() + "\", \"{workspace}/{loader_dir}\", \"{key}\"]", "--per",
                 "shard", "--param", "verify=false", "--reason", "restart test", "-o", "json"},
                &out),
            0)
      << out;
  const std::string id = nlohmann::json::parse(out)["id"];

  // Kill the coordinator once a few shards are done, but not all.
  ASSERT_TRUE(testing::WaitFor(
      [&] { return Status(id).value("entries", nlohmann::json::object()).value("done", 0) >= 2; },
      30s));
  coordinator_->Signal(SIGKILL);
  coordinator_->Wait(5s);
  std::this_thread::sleep_for(1500ms);  // agents keep working and retrying meanwhile
  StartCoordinator();

  std::string watch;
  EXPECT_EQ(Ctl({"sweep", "watch", id}, &watch), 0) << watch;
  auto status = Status(id);
  EXPECT_EQ(status["state"], "succeeded") << status.dump(2);
  EXPECT_EQ(status["entries"]["done"], kLoaders);

  for (auto& a : agents) a->Signal(SIGTERM);
  for (auto& a : agents) EXPECT_EQ(a->Wait(15s), 0);
  coordinator_->Signal(SIGTERM);
  EXPECT_EQ(coordinator_->Wait(15s), 0);

  // Exactly once: one stored result per shard, every shard succeeded, nothing left spooled.
  auto store = coord::SqliteStore::Open(tmp_.path() / "cdata" / "coordinator.db");
  ASSERT_TRUE(store.ok());
  auto snap = (*store)->Load();
  ASSERT_TRUE(snap.ok());
  std::set<std::string> shards_with_results;
  for (const auto& r : snap->results) {
    EXPECT_TRUE(shards_with_results.insert(r.shard_id).second) << "two results for " << r.shard_id;
  }
  EXPECT_EQ(shards_with_results.size(), static_cast<size_t>(kLoaders));
  for (const auto& s : snap->shards) {
    EXPECT_EQ(s.state, coord::ShardState::kSucceeded) << s.id;
  }
  for (int i = 0; i < 2; ++i) {
    auto spool = tmp_.path() / ("data-agent-" + std::to_string(i)) / "spool";
    if (!std::filesystem::exists(spool)) continue;
    EXPECT_TRUE(std::filesystem::is_empty(spool)) << spool;
  }
  // The restart is visible in the coordinator's log: it came back on the same database.
  EXPECT_NE(testing::ReadFileOrDie(tmp_.path() / "coordinator.log").find("serving agents"),
            std::string::npos);
}

}  // namespace
}  // namespace triage
