// Demand (which work no live agent can take, and why) and EstimateEta, as pure functions.

#include "coordinator/scheduling/demand.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::coord {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

AgentRecord Agent(const std::string& id, const std::string& arch, bool cpu_only = false,
                  std::vector<std::string> executors = {}) {
  AgentRecord a;
  a.dims.set_agent_id(id);
  a.dims.set_arch(arch);
  a.dims.set_cpu_only(cpu_only);
  for (auto& e : executors) a.dims.add_executors(e);
  return a;
}

Requirement Native(std::string playbook, std::vector<std::string> archs, bool cpu_ok = false) {
  return {"native", std::move(playbook), std::move(archs), cpu_ok};
}

TEST(DemandTest, ServedWorkIsNoProblem) {
  Demand d;
  d.Add("sw-1", Native("dtype_bfloat16", {"n150"}), false, +1);
  AgentRecord a = Agent("a", "n150");
  EXPECT_TRUE(d.Evaluate({&a}).empty());
}

TEST(DemandTest, EachReasonIsNamed) {
  struct Case {
    std::string name;
    std::vector<AgentRecord> agents;
    std::string reason;
    std::string says;
  };
  AgentRecord drained = Agent("p1", "p150");
  drained.draining = true;
  AgentRecord offline = Agent("p2", "p150");
  offline.offline = true;
  AgentRecord other_playbooks = Agent("p3", "p150");
  other_playbooks.dims.add_playbooks("unpack_forward_output");
  AgentRecord broken = Agent("p5", "p150");
  broken.dims.set_runner_problem("--python /nope does not run");
  const std::vector<Case> cases = {
      {"no agent", {}, "arch", "no agent of arch p150 is registered"},
      {"other arch", {Agent("n1", "n150")}, "arch", "no agent of arch p150 is registered"},
      {"drained", {drained}, "drained", "p1 is drained"},
      {"offline", {offline}, "offline", "p2 is offline"},
      {"drained before offline", {offline, drained}, "drained", "p1 is drained"},
      {"executor",
       {Agent("p4", "p150", false, {"replay"})},
       "executor",
       "do not offer executor native"},
      {"playbook", {other_playbooks}, "playbook", "do not take playbook dtype_bfloat16"},
      {"runner",
       {broken},
       "runner",
       "the agents of that arch cannot run tt-xla's runner: p5 (--python /nope does not run)"},
      {"runner, another drained", {broken, drained}, "drained", "p1 is drained"},
      {"executor before runner",
       {broken, Agent("p4", "p150", false, {"replay"})},
       "runner",
       "cannot run tt-xla's runner: p5"},
  };
  for (const auto& c : cases) {
    Demand d;
    d.Add("sw-1", Native("dtype_bfloat16", {"p150"}), false, +1);
    d.Add("sw-1", Native("dtype_bfloat16", {"p150"}), true, +3);
    std::vector<const AgentRecord*> agents;
    for (const auto& a : c.agents) agents.push_back(&a);
    auto u = d.Evaluate(agents);
    ASSERT_EQ(u.size(), 1u) << c.name;
    EXPECT_EQ(u[0].reason, c.reason) << c.name;
    EXPECT_EQ(u[0].arch, "p150") << c.name;
    EXPECT_EQ(u[0].shards, 4) << c.name;
    EXPECT_EQ(u[0].queued, 1) << c.name;
    EXPECT_THAT(u[0].message, HasSubstr("4 shards need arch p150 with executor native")) << c.name;
    EXPECT_THAT(u[0].message, HasSubstr(c.says)) << c.name;
  }
}

// A shard that needs several devices (ShardSpec.min_devices) is a requirement group of its own.
TEST(DemandTest, WorkThatNeedsDevicesNamesThem) {
  Requirement eight = Native("nightly", {"n300-llmbox"});
  eight.min_devices = 8;
  Demand d;
  d.Add("sw-1", eight, false, +1);
  d.Add("sw-1", Native("nightly", {"n300-llmbox"}), false, +2);
  AgentRecord small = Agent("l1", "n300-llmbox");
  small.dims.set_device_count(4);
  AgentRecord smaller = Agent("l2", "n300-llmbox");
  smaller.dims.set_device_count(1);
  auto u = d.Evaluate({&small, &smaller});
  ASSERT_EQ(u.size(), 1u) << "the single-device shards are served";
  EXPECT_EQ(u[0].reason, "devices");
  EXPECT_EQ(u[0].arch, "n300-llmbox");
  EXPECT_EQ(u[0].message,
            "1 shard needs arch n300-llmbox with 8 devices and executor native (playbook nightly): "
            "no live agent offers it (the agents of that arch have fewer than 8 devices: l1 has "
            "4, l2 has 1)");
  u = d.Evaluate({});
  ASSERT_EQ(u.size(), 2u);
  for (const auto& one : u) EXPECT_EQ(one.reason, "arch");
  AgentRecord big = Agent("l3", "n300-llmbox");
  big.dims.set_device_count(8);
  EXPECT_TRUE(d.Evaluate({&small, &big}).empty());
}

// Only native work runs the runner: command and replay work still goes to such an agent.
TEST(DemandTest, AnAgentThatCannotRunTheRunnerServesOtherExecutors) {
  AgentRecord broken = Agent("n1", "n150", false, {"native", "command"});
  broken.dims.set_runner_problem("no torch");
  Requirement command = Native("dtype_bfloat16", {"n150"});
  command.executor = "command";
  EXPECT_TRUE(AgentOffers(broken.dims, command, true));
  EXPECT_FALSE(AgentOffers(broken.dims, Native("dtype_bfloat16", {"n150"}), true));
  EXPECT_FALSE(AgentOffers(broken.dims, Native("dtype_bfloat16", {}, true), true))
      << "native probe work runs the runner too";
}

TEST(DemandTest, ProbeWorkIsServedByACpuAgentOrADeviceAgent) {
  for (bool device_probes : {false, true}) {
    SCOPED_TRACE(device_probes);
    Demand d(device_probes);
    d.Add("sw-1", Native("unpack_forward_output", {"n150"}, true), false, +2);
    AgentRecord cpu = Agent("c", "cpu", true);
    EXPECT_TRUE(d.Evaluate({&cpu}).empty());
    AgentRecord p = Agent("p", "p150");
    auto u = d.Evaluate({&p});
    if (device_probes) {
      EXPECT_TRUE(u.empty()) << "a device agent of any arch takes probe work";
      continue;
    }
    ASSERT_EQ(u.size(), 1u);
    EXPECT_THAT(u[0].message, HasSubstr("arch n150 or a cpu_only agent"));
  }
}

TEST(DemandTest, CountsGoBackToNothing) {
  Demand d;
  const auto r = Native("dtype_bfloat16", {"p150"});
  d.Add("sw-1", r, false, +1);
  d.Add("sw-1", r, false, -1);
  d.Add("sw-2", r, true, -1);  // never added: ignored
  EXPECT_TRUE(d.Evaluate({}).empty());
}

TEST(EstimateEtaTest, TableOfLanes) {
  const TimePoint t0{};
  const TimePoint now = t0 + 1000s;
  auto lane = [&](int open, int results, int started_ago, bool unservable = false) {
    LaneProgress p;
    p.open = open;
    p.results = results;
    p.first_start = now - std::chrono::seconds(started_ago);
    p.unservable = unservable;
    return p;
  };
  EXPECT_EQ(EstimateEta({}, now), 0);
  EXPECT_EQ(EstimateEta({{"n150", lane(0, 5, 100)}}, now), 0) << "nothing left";
  EXPECT_EQ(EstimateEta({{"n150", lane(4, 2, 100)}}, now), -1) << "too few results";
  EXPECT_EQ(EstimateEta({{"n150", lane(4, 4, 100)}}, now), 100);
  // Lanes run in parallel: the slowest decides.
  EXPECT_EQ(EstimateEta({{"n150", lane(4, 4, 100)}, {"p150", lane(2, 4, 400)}}, now), 200);
  EXPECT_EQ(EstimateEta({{"n150", lane(4, 4, 100)}, {"p150", lane(2, 4, 400, true)}}, now), -1)
      << "a lane nobody can serve has no ETA";
  EXPECT_EQ(EstimateEta({{"n150", lane(4, 4, 100)}, {"cpu", lane(1, 0, 0)}}, now), -1)
      << "an unmeasured lane with work left";
}

}  // namespace
}  // namespace triage::coord
