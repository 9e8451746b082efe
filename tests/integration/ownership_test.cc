// One process per port, with real processes: a second triage-coordinator on a port the first one
// holds exits non-zero with a message that names the address, and the first one keeps serving.

#include <signal.h>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/test_support.h"

namespace triage {
namespace {

using namespace std::chrono_literals;

const std::string kBin = TRIAGE_BINARY_DIR;
const std::string kCoordinator = kBin + "/coordinator/triage-coordinator";
const std::string kAgent = kBin + "/agent/triage-agent";
const std::string kCtl = kBin + "/coordinator/triagectl/triagectl";

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
    EXPECT_TRUE(c->Start(
        {kCoordinator, "--insecure", "--data_dir", data_dir.string(), "--agent_address",
         agent_address, "--control_address", control_address, "--metrics_address", metrics_address},
        tmp_.path(), tmp_.path() / log_name, testing::GitTestEnv()));
    return c;
  }

  nlohmann::json Ports(const std::filesystem::path& data_dir) {
    std::error_code ec;
    if (!std::filesystem::exists(data_dir / "ports.json", ec)) return {};
    try {
      return nlohmann::json::parse(testing::ReadFileOrDie(data_dir / "ports.json"));
    } catch (...) {
      return {};
    }
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
    ASSERT_EQ(Ports(tmp_.path() / "first").value("pid", 0), first_->pid());
  }

  bool ListSweeps() {
    std::string out;
    return testing::RunCommand(
               {kCtl, "sweep", "list", "--insecure", "--coordinator", Addr(control_port_)},
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
  auto second = StartCoordinator(tmp_.path() / "second", "127.0.0.1:0", Addr(control_port_), "",
                                 "second.log");
  const std::string log = ExpectExitsNonZero(*second, "second.log");
  EXPECT_TRUE(Contains(log, "cannot listen on " + Addr(control_port_) +
                                ": address in use (another process holds it)"))
      << log;
  ExpectFirstStillServes();
}

TEST_F(OwnershipTest, SecondCoordinatorOnATakenAgentPortExitsNamingIt) {
  StartFirst();
  auto second =
      StartCoordinator(tmp_.path() / "second", Addr(agent_port_), "127.0.0.1:0", "", "second.log");
  const std::string log = ExpectExitsNonZero(*second, "second.log");
  EXPECT_TRUE(Contains(
      log, "cannot listen on " + Addr(agent_port_) + ": address in use (another process holds it)"))
      << log;
  ExpectFirstStillServes();
}

TEST_F(OwnershipTest, SecondCoordinatorOnATakenMetricsPortExitsNamingIt) {
  StartFirst();
  auto second = StartCoordinator(tmp_.path() / "second", "127.0.0.1:0", "127.0.0.1:0",
                                 Addr(metrics_port_), "second.log");
  const std::string log = ExpectExitsNonZero(*second, "second.log");
  EXPECT_TRUE(Contains(log, "cannot serve metrics on " + Addr(metrics_port_) +
                                ": address in use (another process holds it)"))
      << log;
  ExpectFirstStillServes();
}

}  // namespace
}  // namespace triage
