// Only a working agent is a witness (docs/farm.md), with real processes: triage-coordinator,
// two triage-agents of arch n150 on the ttxla-mini fixture, and triagectl. An agent whose
// --python cannot run the runner (a script that exits 1) registers with the problem its
// self-check found, `agents list` shows it, and a native sweep's shards are not leased to it: the
// sweep is blocked, naming the runner, until an agent that can run the runner takes them.

#include <signal.h>

#include <sys/stat.h>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/fixture_farm.h"
#include "tests/support/test_support.h"

namespace triage {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class WitnessTest : public testing::FixtureFarmTest {
 protected:
  WitnessTest() : FixtureFarmTest({"--tick_ms", "100", "--heartbeat_interval_seconds", "1"}) {}

  // An n150 agent with the native executor in a clone of the fixture, one emulated device.
  void StartAgent(const std::string& id, const std::string& python) {
    ASSERT_NO_FATAL_FAILURE(
        StartFixtureAgent(id, "n150", "native", {"--python", python, "--metrics_address", ""}));
  }

  // The agent's entry of `agents list -o json`, or null.
  json AgentEntry(const std::string& id) {
    std::string out;
    if (Ctl({"agents", "list", "-o", "json"}, &out) != 0) return nullptr;
    for (const auto& a : json::parse(out, nullptr, false).value("agents", json::array())) {
      if (a["dimensions"].value("agent_id", "") == id) return a;
    }
    return nullptr;
  }

  json Shards(const std::string& sweep) {
    std::string out;
    if (Ctl({"shards", "list", "--sweep", sweep, "-o", "json"}, &out) != 0) return json::array();
    return json::parse(out, nullptr, false).value("shards", json::array());
  }

  json Status(const std::string& id) {
    std::string out;
    if (Ctl({"sweep", "status", id, "-o", "json"}, &out) != 0) return {};
    return json::parse(out, nullptr, false);
  }
};

TEST_F(WitnessTest, AnAgentThatCannotRunTheRunnerIsShownAndLeasedNoNativeShard) {
  // An interpreter without the runner's modules, as far as the agent can tell.
  const auto broken_python = dir_ / "python-broken";
  testing::WriteFileOrDie(broken_python, "#!/bin/sh\nexit 1\n");
  ::chmod(broken_python.c_str(), 0755);
  StartAgent("broken", broken_python.string());

  // It registers, with what its self-check found.
  const std::string problem =
      "--python " + broken_python.string() + " cannot import pytest and torch (exit 1)";
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const json a = AgentEntry("broken");
        return !a.is_null() && a["dimensions"].value("runner_problem", "") == problem;
      },
      30s))
      << AgentEntry("broken").dump(2) << testing::ReadFileOrDie(dir_ / "broken.log");
  std::string out;
  ASSERT_EQ(Ctl({"agents", "list"}, &out), 0) << out;
  EXPECT_NE(out.find("RUNNER"), std::string::npos) << out;
  EXPECT_NE(out.find(problem), std::string::npos) << out;
  EXPECT_NE(testing::ReadFileOrDie(dir_ / "broken.log").find("cannot run tt-xla's runner"),
            std::string::npos);

  // A native sweep: nothing is leased to it, and the sweep says why it is blocked.
  ASSERT_EQ(Ctl({"sweep", "start", "--repo", repo_.string(), "--arch", "n150", "--executor",
                 "native", "--reason", "witness test", "-o", "json"},
                &out),
            0)
      << out;
  const std::string id = json::parse(out).value("id", "");
  ASSERT_FALSE(id.empty()) << out;
  ASSERT_TRUE(testing::WaitFor([&] { return Status(id).value("state", "") == "blocked"; }, 15s))
      << Status(id).dump(2);
  const json status = Status(id);
  ASSERT_FALSE(status["problems"].empty()) << status.dump(2);
  EXPECT_NE(status["problems"][0].get<std::string>().find(
                "the agents of that arch cannot run tt-xla's runner: broken (--python"),
            std::string::npos)
      << status.dump(2);
  for (const auto& s : Shards(id)) {
    EXPECT_EQ(s.value("agent_id", ""), "") << s.dump(2);
  }

  // An agent that can run the runner takes the sweep's work.
  StartAgent("healthy", "/usr/bin/python3");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        for (const auto& s : Shards(id)) {
          if (s.value("agent_id", "") == "healthy") return true;
        }
        return false;
      },
      60s))
      << Shards(id).dump(2) << testing::ReadFileOrDie(dir_ / "healthy.log");
  EXPECT_EQ(AgentEntry("healthy")["dimensions"].value("runner_problem", "x"), "");
  ASSERT_EQ(Ctl({"sweep", "cancel", id, "--reason", "witness test done"}, &out), 0) << out;
  EXPECT_EQ(testing::ReadFileOrDie(dir_ / "coordinator.log").find("leased by broken"),
            std::string::npos)
      << "no shard was ever leased to the agent that cannot run the runner";
}

}  // namespace
}  // namespace triage
