// The daemons' shared start-up: the log line format, and stop signals taken only by the
// watcher, which also ends without one.

#include "common/daemon/daemon.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <regex>
#include <sstream>
#include <thread>

#include "common/util/log.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"

namespace triage::daemon {
namespace {

using namespace std::chrono_literals;

TEST(Daemon, LogLinesHaveTheTimeTheLevelAndTheTag) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  SetUpLogging("warn", "agent a1");
  spdlog::info("not shown");
  spdlog::warn("[sweep w1 shard w1-s001 lease w1-s001-l1] shown");
  spdlog::set_default_logger(previous);
  EXPECT_TRUE(std::regex_match(
      out.str(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} warning \[agent a1\] )"
                            R"(\[sweep w1 shard w1-s001 lease w1-s001-l1\] shown\n)")))
      << out.str();
}

TEST(Daemon, TheWatcherEndsWithoutASignal) {
  const StopSignals signals = Start();
  std::atomic<int> got{0};
  const auto start = std::chrono::steady_clock::now();
  {
    SignalWatcher watcher(signals, [&](int sig) { got = sig; });
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(got.load(), 0);
}

// SIGTERM sent to the process is blocked everywhere (Start ran before any thread) and taken by
// the watcher, which reports it once.
TEST(Daemon, AStopSignalReachesTheWatcher) {
  const StopSignals signals = Start();
  std::atomic<int> got{0};
  std::atomic<int> calls{0};
  SignalWatcher watcher(signals, [&](int sig) {
    got = sig;
    ++calls;
  });
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (got.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(got.load(), SIGTERM);
  EXPECT_EQ(calls.load(), 1);
}

TEST(Daemon, WaitForReturnsZeroWhenNoSignalCame) {
  const StopSignals signals = Start();
  EXPECT_EQ(signals.WaitFor(20ms), 0);
  ASSERT_EQ(kill(getpid(), SIGINT), 0);
  EXPECT_EQ(signals.WaitFor(1s), SIGINT);
}

}  // namespace
}  // namespace triage::daemon
