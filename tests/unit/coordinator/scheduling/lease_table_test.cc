// The LeaseTable on its own: no coordinator, no store. Records go in through Put (the one apply
// path); the table's decisions (matches, grants, failed attempts, expiries, fencing, intake)
// come back as updated copies and attempt rows, which the test puts back the way the owner
// does after staging them.

#include "coordinator/scheduling/lease_table.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/registry/registry_union.h"
#include "common/util/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::coord {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// One call of the shard listener.
struct ListenerCall {
  std::optional<ShardRecord> old;
  ShardRecord updated;
};

class LeaseTableTest : public ::testing::Test {
 protected:
  LeaseTableTest() { Reset(DefaultOptions()); }

  static SchedulingOptions DefaultOptions() {
    SchedulingOptions o;
    o.lease_ttl = 60s;
    o.agent_dead_after = 30s;
    o.lease_wait_limit = 20s;
    o.backoff_base = 10s;
    o.backoff_max = 35s;
    o.max_infra_losses = 3;
    return o;
  }

  void Reset(SchedulingOptions options) {
    options_ = options;
    calls_.clear();
    table_ = std::make_unique<LeaseTable>(
        options, &metrics_, [this](const ShardRecord* old, const ShardRecord& updated) {
          calls_.push_back({old ? std::optional<ShardRecord>(*old) : std::nullopt, updated});
        });
  }

  TimePoint Now() const { return clock_.Now(); }

  // A device agent of arch, seen now.
  AgentRecord Agent(const std::string& id, const std::string& arch = "n150") const {
    AgentRecord a;
    a.dims.set_agent_id(id);
    a.dims.set_arch(arch);
    a.session_id = "sess-" + id;
    a.registered_at = Now();
    a.last_heartbeat = Now();
    return a;
  }

  // A queued native shard for arch, eligible now.
  ShardRecord Queued(const std::string& id, std::int64_t seq, const std::string& arch = "n150",
                     int priority = 0, double expected_seconds = 100) const {
    ShardRecord s;
    s.id = id;
    s.sweep_id = "sw-0001";
    s.seq = seq;
    s.spec.set_shard_id(id);
    s.spec.set_sweep_id("sw-0001");
    s.spec.set_playbook("dtype_bfloat16");
    s.spec.set_executor("native");
    s.spec.set_arch(arch);
    s.state = ShardState::kQueued;
    s.priority = priority;
    s.expected_seconds = expected_seconds;
    s.archs = {arch};
    s.enqueued_at = Now();
    s.eligible_at = Now();
    return s;
  }

  // A queued wave-1 verify phase on n150 (what a batch is made of).
  ShardRecord QueuedVerify(const std::string& id, std::int64_t seq, double expected_seconds) const {
    ShardRecord s = Queued(id, seq, "n150", 0, expected_seconds);
    s.spec.set_phase(v1::PHASE_VERIFY);
    s.spec.set_wave(1);
    return s;
  }

  // A queued probe phase of wave (any agent may take it).
  ShardRecord QueuedProbe(const std::string& id, std::int64_t seq, double expected_seconds,
                          int wave = 1) const {
    ShardRecord s = Queued(id, seq, "", 0, expected_seconds);
    s.cpu_ok = true;
    s.archs.clear();
    s.spec.set_phase(v1::PHASE_PROBE);
    s.spec.set_wave(wave);
    return s;
  }

  // A wave-1 verify phase on n150 waiting for probe's result.
  ShardRecord WaitingVerify(const std::string& id, std::int64_t seq,
                            const std::string& probe) const {
    ShardRecord s = QueuedVerify(id, seq, 100);
    s.state = ShardState::kWaiting;
    s.depends_on = probe;
    return s;
  }

  // A shard's id, or "" for none.
  static std::string IdOf(const ShardRecord* s) { return s == nullptr ? "" : s->id; }

  // What FindMatch gives the agent asking for batches of max_batch: the shard id, or "".
  std::string MatchBatch(const std::string& agent_id, int max_batch) {
    return IdOf(table_->FindMatch(agent(agent_id), Now(), max_batch));
  }

  void PutAgent(AgentRecord a) { table_->Put(std::move(a)); }
  AgentRecord& agent(const std::string& id) { return *table_->FindAgent(id); }

  // What FindMatch gives the agent now: the shard id, or "" for nothing.
  std::string MatchFor(const std::string& agent_id) {
    return IdOf(table_->FindMatch(agent(agent_id), Now()));
  }

  // Grants the shard to the agent and puts the granted copy back; the granted copy.
  ShardRecord GrantAndPut(const std::string& agent_id, const std::string& shard_id,
                          Mutation* m = nullptr) {
    Mutation local;
    ShardRecord s = table_->Grant(agent(agent_id), table_->shard(shard_id), Now(), m ? *m : local);
    table_->Put(s);
    return s;
  }

  static v1::CompleteRequest Complete(const ShardRecord& s) { return CompleteOn(*s.lease); }

  // A Complete on one lease (a shard's lease or its backup).
  static v1::CompleteRequest CompleteOn(const LeaseInfo& l) {
    v1::CompleteRequest req;
    req.set_agent_id(l.agent_id);
    req.set_session_id(l.session_id);
    req.set_lease_id(l.lease_id);
    req.set_fencing_token(l.token);
    return req;
  }

  FakeClock clock_;
  CoordinatorMetrics metrics_;  // does nothing
  SchedulingOptions options_;
  std::vector<ListenerCall> calls_;
  std::unique_ptr<LeaseTable> table_;
};

// --- the queue and matching ---------------------------------------------------------------

TEST_F(LeaseTableTest, PutOfAQueuedShardMakesItMatchable) {
  PutAgent(Agent("a1"));
  EXPECT_EQ(MatchFor("a1"), "");
  ShardRecord waiting = Queued("s-wait", 1);
  waiting.state = ShardState::kWaiting;
  waiting.depends_on = "s-1";
  table_->Put(waiting);
  EXPECT_EQ(MatchFor("a1"), "") << "a waiting shard is not in the queue";
  table_->Put(Queued("s-1", 2));
  EXPECT_EQ(MatchFor("a1"), "s-1");
  EXPECT_THAT(table_->Dependents("s-1"), ElementsAre("s-wait"));

  // Queued again after it waited: now it matches too (ordered by seq).
  ShardRecord released = table_->shard("s-wait");
  released.state = ShardState::kQueued;
  table_->Put(released);
  EXPECT_EQ(MatchFor("a1"), "s-wait");
}

TEST_F(LeaseTableTest, FindMatchTakesPriorityThenLongestThenOldest) {
  PutAgent(Agent("a1"));
  table_->Put(Queued("low-long", 1, "n150", /*priority=*/0, /*expected_seconds=*/5000));
  table_->Put(Queued("high-short", 2, "n150", 1, 10));
  table_->Put(Queued("high-long-newer", 4, "n150", 1, 50));
  table_->Put(Queued("high-long-older", 3, "n150", 1, 50));
  std::vector<std::string> order;
  for (std::string id = MatchFor("a1"); !id.empty(); id = MatchFor("a1")) {
    order.push_back(id);
    GrantAndPut("a1", id);
  }
  EXPECT_THAT(order, ElementsAre("high-long-older", "high-long-newer", "high-short", "low-long"));
}

TEST_F(LeaseTableTest, AgentsGetOnlyWhatTheyOffer) {
  struct Case {
    std::string name;
    std::function<void(AgentRecord&)> agent;
    std::function<void(ShardRecord&)> shard;
    bool matches;
  };
  auto nothing = [](auto&) {};
  const std::vector<Case> cases = {
      {"same arch", nothing, nothing, true},
      {"other arch", [](AgentRecord& a) { a.dims.set_arch("p150"); }, nothing, false},
      {"one of the shard's archs", [](AgentRecord& a) { a.dims.set_arch("p150"); },
       [](ShardRecord& s) {
         s.archs = {"n150", "p150"};
       },
       true},
      {"cpu agent, cpu_ok shard",
       [](AgentRecord& a) {
         a.dims.set_arch("cpu");
         a.dims.set_cpu_only(true);
       },
       [](ShardRecord& s) {
         s.cpu_ok = true;
         s.archs.clear();
         s.spec.set_arch("");
       },
       true},
      {"cpu agent, device shard",
       [](AgentRecord& a) {
         a.dims.set_arch("n150");
         a.dims.set_cpu_only(true);
       },
       nothing, false},
      {"device agent, probe work (device_probes)", nothing,
       [](ShardRecord& s) {
         s.cpu_ok = true;
         s.archs.clear();
       },
       true},
      {"no executors listed: native only", nothing,
       [](ShardRecord& s) { s.spec.set_executor("command"); }, false},
      {"listed executor", [](AgentRecord& a) { a.dims.add_executors("command"); },
       [](ShardRecord& s) { s.spec.set_executor("command"); }, true},
      {"native not listed", [](AgentRecord& a) { a.dims.add_executors("replay"); }, nothing, false},
      {"listed playbook", [](AgentRecord& a) { a.dims.add_playbooks("dtype_bfloat16"); }, nothing,
       true},
      {"other playbooks only",
       [](AgentRecord& a) { a.dims.add_playbooks("unpack_forward_output"); }, nothing, false},
      {"drained", [](AgentRecord& a) { a.draining = true; }, nothing, false},
      {"offline", [](AgentRecord& a) { a.offline = true; }, nothing, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Reset(DefaultOptions());
    AgentRecord a = Agent("a1");
    c.agent(a);
    PutAgent(a);
    ShardRecord s = Queued("s-1", 1);
    c.shard(s);
    table_->Put(s);
    EXPECT_EQ(MatchFor("a1"), c.matches ? "s-1" : "");
  }
}

// docs/farm.md, "Only a working agent is a witness": an agent whose self-check found a problem
// takes no native work; replay and command work still go to it, and a registration that clears
// the problem (the same agent, new dimensions) takes the native shard again.
TEST_F(LeaseTableTest, AnAgentThatCannotRunTheRunnerGetsNoNativeShardButAReplayOne) {
  AgentRecord broken = Agent("a1");
  for (const char* e : {"native", "replay", "command"}) broken.dims.add_executors(e);
  broken.dims.set_runner_problem("--python /nope does not run");
  PutAgent(broken);
  table_->Put(Queued("s-native", 1, "n150", /*priority=*/5));
  ShardRecord replay = Queued("s-replay", 2);
  replay.spec.set_executor("replay");
  table_->Put(replay);
  EXPECT_EQ(MatchFor("a1"), "s-replay") << "the native shard ranks first, but not for this agent";
  GrantAndPut("a1", "s-replay");
  EXPECT_EQ(MatchFor("a1"), "");
  const auto unservable = table_->FindUnservable();
  ASSERT_EQ(unservable.size(), 1u);
  EXPECT_EQ(unservable[0].reason, "runner");
  EXPECT_EQ(unservable[0].message,
            "1 shard needs arch n150 with executor native (playbook dtype_bfloat16): no live agent "
            "offers it (the agents of that arch cannot run tt-xla's runner: a1 (--python /nope "
            "does not run))");

  broken.dims.clear_runner_problem();
  PutAgent(broken);  // registered again
  EXPECT_EQ(MatchFor("a1"), "s-native");
  EXPECT_TRUE(table_->FindUnservable().empty());
}

// ShardSpec.min_devices (data- and tensor-parallel nightly confirmations): such a shard goes
// only to an agent of its arch with at least that many devices, and the work it stands for is a
// requirement group of its own, named with its devices when nobody can take it.
TEST_F(LeaseTableTest, AShardThatNeedsDevicesGoesOnlyToAnAgentWithThatMany) {
  AgentRecord small = Agent("small", "n300-llmbox");
  small.dims.set_device_count(4);
  PutAgent(small);
  ShardRecord eight = Queued("s-8", 1, "n300-llmbox", /*priority=*/5);
  eight.spec.set_min_devices(8);
  table_->Put(eight);
  table_->Put(Queued("s-1", 2, "n300-llmbox"));
  EXPECT_EQ(MatchFor("small"), "s-1") << "4 devices: not the shard that needs 8";
  GrantAndPut("small", "s-1");
  EXPECT_EQ(MatchFor("small"), "");
  auto unservable = table_->FindUnservable();
  ASSERT_EQ(unservable.size(), 1u);
  EXPECT_EQ(unservable[0].reason, "devices");
  EXPECT_EQ(unservable[0].requirement.min_devices, 8);
  EXPECT_EQ(unservable[0].message,
            "1 shard needs arch n300-llmbox with 8 devices and executor native (playbook "
            "dtype_bfloat16): no live agent offers it (the agents of that arch have fewer than 8 "
            "devices: small has 4)");

  AgentRecord big = Agent("big", "n300-llmbox");
  big.dims.set_device_count(8);
  PutAgent(big);
  EXPECT_EQ(MatchFor("big"), "s-8");
  EXPECT_TRUE(table_->FindUnservable().empty());
}

// The gauge of agents that cannot run the runner: live ones per arch, 0 for archs seen before.
TEST_F(LeaseTableTest, RunnerProblemsAreReportedPerArchForLiveAgents) {
  struct Recording : CoordinatorMetrics {
    void RunnerProblems(std::string_view arch, int agents) override {
      seen[std::string(arch)] = agents;
    }
    std::map<std::string, int> seen;
  } recording;
  LeaseTable table(DefaultOptions(), &recording, nullptr);
  AgentRecord a = Agent("a1");
  a.dims.set_runner_problem("no torch");
  AgentRecord b = Agent("a2");
  b.dims.set_runner_problem("no torch");
  b.offline = true;
  AgentRecord c = Agent("p1", "p150");
  table.Put(a);
  table.Put(b);
  table.Put(c);
  table.ReportRunnerProblems();
  EXPECT_THAT(recording.seen,
              UnorderedElementsAre(::testing::Pair("n150", 1), ::testing::Pair("p150", 0)));
  table.Remove("a1");
  table.Remove("a2");
  table.ReportRunnerProblems();
  EXPECT_EQ(recording.seen["n150"], 0) << "an arch seen once keeps reporting";
}

// Idle device agents shorten the probe lane (bench/fleet_sim measured it): a device agent takes
// probe-phase work only when no shard of its arch is queued, whatever the probe's place in the
// queue; with device_probes off, probes wait for cpu_only agents.
TEST_F(LeaseTableTest, DeviceAgentsTakeProbesOnlyWhenNothingOfTheirArchIsQueued) {
  PutAgent(Agent("a1"));
  ShardRecord probe = Queued("s-probe", 1, "n150", /*priority=*/5);
  probe.cpu_ok = true;
  probe.archs.clear();
  probe.spec.set_arch("");
  probe.expected_seconds = 1000;
  table_->Put(probe);
  ShardRecord other_arch = Queued("s-p150", 2, "p150");
  table_->Put(other_arch);
  ShardRecord own = Queued("s-n150", 3, "n150");
  own.expected_seconds = 1;
  table_->Put(own);
  EXPECT_EQ(MatchFor("a1"), "s-n150") << "its own arch first, though the probe ranks higher";
  table_->Put([&] {
    ShardRecord s = table_->shard("s-n150");
    s.state = ShardState::kCancelled;
    return s;
  }());
  EXPECT_EQ(MatchFor("a1"), "s-probe") << "nothing of its arch left: the probe";

  SchedulingOptions off = DefaultOptions();
  off.device_probes = false;
  Reset(off);
  PutAgent(Agent("a1"));
  table_->Put(probe);
  EXPECT_EQ(MatchFor("a1"), "") << "probes wait for cpu_only agents";
  EXPECT_EQ(table_->FindUnservable().size(), 1u);
}

// FIFO (the fleet simulator's yardstick) offers shards in creation order within a priority.
TEST_F(LeaseTableTest, FifoOrderIgnoresTheEstimates) {
  SchedulingOptions fifo = DefaultOptions();
  fifo.queue_order = QueueOrder::kFifo;
  for (bool longest_first : {true, false}) {
    SCOPED_TRACE(longest_first);
    Reset(longest_first ? DefaultOptions() : fifo);
    PutAgent(Agent("a1"));
    ShardRecord first = Queued("s-first", 1);
    first.expected_seconds = 10;
    table_->Put(first);
    ShardRecord longer = Queued("s-longer", 2);
    longer.expected_seconds = 100;
    table_->Put(longer);
    EXPECT_EQ(MatchFor("a1"), longest_first ? "s-longer" : "s-first");
  }
}

// The ids BatchFor adds to the head FindMatch gives the agent.
std::vector<std::string> BatchIds(const std::vector<const ShardRecord*>& batch) {
  std::vector<std::string> ids;
  for (const ShardRecord* s : batch) ids.push_back(s->id);
  return ids;
}

TEST_F(LeaseTableTest, ABatchTakesTheShortestVerifyShardsWithinTheAgentsFairShare) {
  PutAgent(Agent("a1"));
  // Verify phases of one sweep and wave: 400 s of work queued behind a 100 s head.
  for (auto [id, seq, seconds] : {std::tuple{"s-head", 1, 100.0},
                                  {"s-90", 2, 90.0},
                                  {"s-80", 3, 80.0},
                                  {"s-10", 4, 10.0},
                                  {"s-20", 5, 20.0},
                                  {"s-100", 6, 100.0}}) {
    table_->Put(QueuedVerify(id, seq, seconds));
  }
  // Other shards of the lane that cannot share its workspace: another sweep, another wave,
  // other registry lines, a probe phase, another arch.
  ShardRecord other_sweep = Queued("x-sweep", 7, "n150", 0, 1);
  other_sweep.sweep_id = "sw-0002";
  ShardRecord other_wave = Queued("x-wave", 8, "n150", 0, 1);
  other_wave.spec.set_wave(2);
  ShardRecord other_registry = Queued("x-registry", 9, "n150", 0, 1);
  other_registry.spec.add_pre_registry()->set_cls("SomeOutput");
  other_registry.spec.add_entries()->set_key("m");  // its output class unknown: any line counts
  ShardRecord p150 = Queued("x-p150", 10, "p150", 0, 1);
  for (ShardRecord* s : {&other_sweep, &other_wave, &other_registry, &p150}) {
    s->spec.set_phase(v1::PHASE_VERIFY);
    if (s->spec.wave() == 0) s->spec.set_wave(1);
    table_->Put(*s);
  }
  ShardRecord probe = Queued("x-probe", 11, "n150", 0, 1);
  probe.spec.set_phase(v1::PHASE_PROBE);
  probe.spec.set_wave(1);
  table_->Put(probe);

  const ShardRecord* head = table_->FindMatch(agent("a1"), Now());
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->id, "s-head");
  // One agent serves the lane: its share is everything, so the cap is the agent's max_batch,
  // filled shortest first.
  EXPECT_THAT(BatchIds(table_->BatchFor(agent("a1"), *head, 4, Now())),
              ElementsAre("s-10", "s-20", "s-80"));
  EXPECT_TRUE(table_->BatchFor(agent("a1"), *head, 1, Now()).empty()) << "max_batch 1: no batch";

  // Three agents: a share of the 404 s queued in the lane, 135 s, holds the head and 30 s more.
  PutAgent(Agent("a2"));
  PutAgent(Agent("a3"));
  EXPECT_THAT(BatchIds(table_->BatchFor(agent("a1"), *head, 8, Now())),
              ElementsAre("s-10", "s-20"));
  // An agent for every shard: no batch, the others start in parallel.
  for (int i = 4; i <= 8; ++i) PutAgent(Agent(util::StrCat("a", i)));
  EXPECT_TRUE(table_->BatchFor(agent("a1"), *head, 8, Now()).empty());

  // A probe phase is never batched.
  Reset(DefaultOptions());
  PutAgent(Agent("a1"));
  table_->Put(probe);
  table_->Put(QueuedVerify("s-verify", 12, 1));
  EXPECT_TRUE(table_->BatchFor(agent("a1"), table_->shard("x-probe"), 8, Now()).empty());
}

TEST_F(LeaseTableTest, ABatchStaysWithinTheLongestABatchMayRun) {
  for (auto [cap, want] :
       {std::pair{150s, std::vector<std::string>{"s-10", "s-20"}},
        std::pair{100s, std::vector<std::string>{}}, std::pair{0s, std::vector<std::string>{}}}) {
    SCOPED_TRACE(cap.count());
    SchedulingOptions o = DefaultOptions();
    o.verify_batch_max = cap;
    Reset(o);
    PutAgent(Agent("a1"));
    for (auto [id, seq, seconds] : {std::tuple{"s-head", 1, 100.0},
                                    {"s-10", 2, 10.0},
                                    {"s-20", 3, 20.0},
                                    {"s-30", 4, 30.0}}) {
      table_->Put(QueuedVerify(id, seq, seconds));
    }
    const ShardRecord* head = table_->FindMatch(agent("a1"), Now());
    ASSERT_NE(head, nullptr);
    // 150 s: the head and 30 s more (what a death could lose is bounded); 100 s: the head
    // alone; 0: batches off.
    EXPECT_EQ(BatchIds(table_->BatchFor(agent("a1"), *head, 8, Now())), want);
  }
}

TEST_F(LeaseTableTest, ABatchIsHeldToItsCapInWhatTheSweepMeasuredForEstimatedEntries) {
  for (auto [cap, want] : {std::pair{150s, std::vector<std::string>{"s-a", "s-b", "s-trusted"}},
                           std::pair{120s, std::vector<std::string>{"s-a", "s-b"}}}) {
    SCOPED_TRACE(cap.count());
    SchedulingOptions o = DefaultOptions();
    o.verify_batch_max = cap;
    Reset(o);
    PutAgent(Agent("a1"));
    // Each planned at 100 s: an estimate, a trusted duration, or (s-old) before entries said.
    for (auto [id, seq, estimated] : {std::tuple{"s-head", 1, true},
                                      {"s-a", 2, true},
                                      {"s-b", 3, true},
                                      {"s-trusted", 4, false},
                                      {"s-old", 5, false}}) {
      ShardRecord s = QueuedVerify(id, seq, 100);
      auto* e = s.spec.add_entries();
      e->set_key(id);
      if (std::string(id) != "s-old") e->set_expected_seconds(100);
      e->set_estimated(estimated);
      table_->Put(s);
    }
    const ShardRecord* head = table_->FindMatch(agent("a1"), Now());
    ASSERT_NE(head, nullptr);
    EXPECT_EQ(head->id, "s-head");
    EXPECT_TRUE(table_->BatchFor(agent("a1"), *head, 8, Now()).empty())
        << "planned at 100 s each, two are over the cap";
    // The sweep measured its estimated entries at 10 s at most: they count 10 s each, the
    // others what was planned for them (100 s: at 150 s one of them fits, at 120 s none).
    table_->SetLearnedSeconds("sw-0001", 10);
    EXPECT_EQ(BatchIds(table_->BatchFor(agent("a1"), *head, 8, Now())), want);
    table_->SetLearnedSeconds("sw-0002", 1);  // another sweep's measurements change nothing
    EXPECT_EQ(BatchIds(table_->BatchFor(agent("a1"), *head, 8, Now())), want);
  }
}

// A verify phase known to run longer than verify_batch_shard_max runs alone: as a batch's head
// and as company. An estimate alone does not keep a shard out; once the sweep has learned what
// its estimated entries take, that counts.
// A verification the next registry wave will most likely repeat is queued after the others,
// whatever its length: still queued when that wave is planned, it is not run at all
// (docs/farm.md, "Registry waves start early").
TEST_F(LeaseTableTest, AVerificationLikelySupersededWaitsBehindTheOthers) {
  PutAgent(Agent("a1"));
  ShardRecord deferred = QueuedVerify("s-deferred", 1, 5000);
  deferred.likely_superseded = true;
  table_->Put(deferred);
  table_->Put(QueuedVerify("s-long", 2, 500));
  table_->Put(QueuedVerify("s-short", 3, 50));
  EXPECT_EQ(MatchBatch("a1", 1), "s-long") << "the longest of the others first";
  ShardRecord done = table_->shard("s-long");
  done.state = ShardState::kSucceeded;
  table_->Put(done);
  EXPECT_EQ(MatchBatch("a1", 1), "s-short");
  done = table_->shard("s-short");
  done.state = ShardState::kSucceeded;
  table_->Put(done);
  EXPECT_EQ(MatchBatch("a1", 1), "s-deferred") << "once it is the only one left, it runs";
}

TEST_F(LeaseTableTest, AVerifyShardKnownToRunLongRunsAloneAndAnEstimatedOneOnceMeasuredSo) {
  auto setup = [&](Duration shard_max) {
    SchedulingOptions o = DefaultOptions();
    o.verify_batch_max = 10h;
    o.verify_batch_shard_max = shard_max;
    Reset(o);
    PutAgent(Agent("a1"));
    // One entry each: a recorded duration, or (s-est) an estimate.
    for (auto [id, seq, seconds, estimated] : {std::tuple{"s-long-head", 1, 1000.0, false},
                                               {"s-est", 2, 900.0, true},
                                               {"s-long", 3, 700.0, false},
                                               {"s-short", 4, 50.0, false},
                                               {"s-short2", 5, 60.0, false}}) {
      ShardRecord s = QueuedVerify(id, seq, seconds);
      auto* e = s.spec.add_entries();
      e->set_key(id);
      e->set_expected_seconds(seconds);
      e->set_estimated(estimated);
      table_->Put(s);
    }
  };
  auto batch = [&](const std::string& head) {
    return BatchIds(table_->BatchFor(agent("a1"), table_->shard(head), 8, Now()));
  };
  setup(600s);
  EXPECT_EQ(MatchBatch("a1", 8), "s-long-head") << "the longest first, as ever";
  EXPECT_TRUE(batch("s-long-head").empty()) << "recorded at 1000 s: it runs alone";
  EXPECT_THAT(batch("s-est"), ElementsAre("s-short", "s-short2"))
      << "planned at an estimate it may batch, with the short ones (s-long is known long)";
  table_->SetLearnedSeconds("sw-0001", 800);
  EXPECT_TRUE(batch("s-est").empty()) << "the sweep measured such entries at 800 s";
  EXPECT_THAT(batch("s-short"), ElementsAre("s-short2"));
  table_->SetLearnedSeconds("sw-0001", 100);
  EXPECT_THAT(batch("s-short"), ElementsAre("s-short2", "s-est"));

  setup(0s);
  EXPECT_THAT(batch("s-short"), ::testing::Contains("s-long")) << "0: no limit";

  // A plan that did not say per entry (planned at 1000 s): its length is not known, learned
  // seconds or not.
  setup(600s);
  ShardRecord old = QueuedVerify("s-old", 6, 1000);
  old.spec.add_entries()->set_key("s-old");
  table_->Put(old);
  table_->SetLearnedSeconds("sw-0001", 100);
  EXPECT_THAT(batch("s-short"), ::testing::Contains("s-old"));
}

// Nor does a device agent gather company for a verify phase that will run alone.
TEST_F(LeaseTableTest, ADeviceAgentDoesNotProbeForCompanyOfAVerifyShardThatRunsAlone) {
  for (auto [seconds, want] : {std::pair{100.0, "s-probe"}, std::pair{1000.0, "s-verify"}}) {
    SCOPED_TRACE(seconds);
    Reset(DefaultOptions());
    PutAgent(Agent("a1"));
    ShardRecord verify = QueuedVerify("s-verify", 1, seconds);
    auto* e = verify.spec.add_entries();
    e->set_key("s-verify");
    e->set_expected_seconds(seconds);
    table_->Put(verify);
    table_->Put(QueuedProbe("s-probe", 2, 20));
    table_->Put(WaitingVerify("s-next", 3, "s-probe"));
    EXPECT_EQ(MatchBatch("a1", 8), want);
  }
}

TEST_F(LeaseTableTest, ABatchNeverHoldsTwoShardsThatPreApplyTheSameFile) {
  PutAgent(Agent("a1"));
  auto verify = [&](const std::string& id, int seq, const std::string& file) {
    ShardRecord s = QueuedVerify(id, seq, 10);
    auto* e = s.spec.add_pre_apply();
    e->set_repo("tt_forge_models");
    e->set_path(file);
    table_->Put(s);
  };
  verify("s-a", 1, "a/loader.py");
  verify("s-b", 2, "b/loader.py");
  verify("s-a2", 3, "a/loader.py");
  verify("s-c", 4, "c/loader.py");
  const ShardRecord* head = table_->FindMatch(agent("a1"), Now());
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->id, "s-a");
  EXPECT_THAT(BatchIds(table_->BatchFor(agent("a1"), *head, 8, Now())), ElementsAre("s-b", "s-c"));
}

TEST_F(LeaseTableTest, VerifyShardsWhoseRegistryLinesNameOnlyTheirOwnClassesShareABatch) {
  PutAgent(Agent("a1"));
  // What each verification's probe saw its entry return, and the line it proposed for it.
  auto verify = [&](const std::string& id, int seq, const std::string& cls, bool line) {
    ShardRecord s = QueuedVerify(id, seq, 100);
    auto* e = s.spec.add_entries();
    e->set_key(id);
    e->set_output_class(cls);
    if (line) *s.spec.add_pre_registry() = registry::AddOp(cls, "logits");
    return s;
  };
  table_->Put(verify("s-gpt", 1, "GptOutput", true));
  table_->Put(verify("s-bert", 2, "BertOutput", true));
  table_->Put(verify("s-tensor", 3, "Tensor", false));
  table_->Put(verify("s-gpt-too", 4, "GptOutput", false));  // would see s-gpt's line
  table_->Put(verify("s-unknown", 5, "", false));           // might return either class
  const ShardRecord* head = table_->FindMatch(agent("a1"), Now());
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->id, "s-gpt");
  EXPECT_THAT(BatchIds(table_->BatchFor(agent("a1"), *head, 8, Now())),
              ElementsAre("s-bert", "s-tensor"));
}

TEST_F(LeaseTableTest, ADeviceAgentProbesItsWaveWhileItsVerifyBatchIsShortOfCompany) {
  auto setup = [&](SchedulingOptions o) {
    Reset(o);
    PutAgent(Agent("a1"));
    table_->Put(QueuedVerify("s-verify", 1, 100));
    // A probe phase of the same wave, and the verification of n150 that waits for it.
    table_->Put(QueuedProbe("s-probe", 2, 20));
    ShardRecord next = WaitingVerify("s-next", 3, "s-probe");
    next.spec.set_playbook("unpack_forward_output");  // a batch may mix playbooks
    table_->Put(next);
  };
  auto match = [&](int max_batch) { return MatchBatch("a1", max_batch); };
  setup(DefaultOptions());
  EXPECT_EQ(match(8), "s-probe") << "the verify would run alone: the probe releases company";
  EXPECT_EQ(match(1), "s-verify") << "an agent that does not batch verifies";
  clock_.Advance(DefaultOptions().verify_gather - 1s);
  EXPECT_EQ(match(8), "s-probe");
  clock_.Advance(1s);
  EXPECT_EQ(match(8), "s-verify") << "no longer than verify_gather after it was queued";

  // Company already queued: the batch grows while it is short of max_batch, then forms.
  setup(DefaultOptions());
  table_->Put(QueuedVerify("s-other", 4, 50));
  EXPECT_EQ(match(8), "s-probe") << "a batch of 2 of 8, and more to come";
  EXPECT_EQ(match(2), "s-verify") << "a full batch";
  EXPECT_THAT(BatchIds(table_->BatchFor(agent("a1"), table_->shard("s-verify"), 2, Now())),
              ElementsAre("s-other"));

  // Another agent of the arch: the pair (200 s) is over a share of the work to come (100 s
  // queued and 100 s released), so the verification starts now.
  setup(DefaultOptions());
  PutAgent(Agent("a2"));
  EXPECT_EQ(match(8), "s-verify");

  // A probe of another wave releases nothing for this verification's batch.
  setup(DefaultOptions());
  ShardRecord later = table_->shard("s-probe");
  later.spec.set_wave(2);
  table_->Put(later);
  EXPECT_EQ(match(8), "s-verify");

  // Turned off.
  SchedulingOptions off = DefaultOptions();
  off.verify_gather = 0s;
  setup(off);
  EXPECT_EQ(match(8), "s-verify");
}

TEST_F(LeaseTableTest, ADeviceAgentWaitsForCompanyThatARunningProbeOfItsWaveReleases) {
  auto setup = [&](SchedulingOptions o, double probe_seconds = 20) {
    Reset(o);
    PutAgent(Agent("a1"));
    AgentRecord cpu = Agent("c1", "");
    cpu.dims.set_cpu_only(true);
    PutAgent(cpu);
    table_->Put(QueuedVerify("s-verify", 1, 100));
    // A probe of the same wave already running on the cpu agent, and the verification of n150
    // that waits for it: no queued probe to gather with.
    table_->Put(QueuedProbe("s-probe", 2, probe_seconds));
    GrantAndPut("c1", "s-probe");
    table_->Put(WaitingVerify("s-next", 3, "s-probe"));
  };
  auto match = [&](int max_batch) { return MatchBatch("a1", max_batch); };
  setup(DefaultOptions());
  EXPECT_EQ(match(8), "") << "the verify would run alone: it waits for the running probe";
  EXPECT_EQ(match(1), "s-verify") << "an agent that does not batch verifies";
  // The probe's result releases the company: the next lease is the pair.
  ShardRecord released = table_->shard("s-next");
  released.state = ShardState::kQueued;
  released.enqueued_at = Now();
  table_->Put(released);
  EXPECT_EQ(match(8), "s-verify");
  EXPECT_THAT(BatchIds(table_->BatchFor(agent("a1"), table_->shard("s-verify"), 8, Now())),
              ElementsAre("s-next"));

  // The wait ends with the verification's gather window.
  setup(DefaultOptions());
  clock_.Advance(DefaultOptions().verify_gather - 1s);
  EXPECT_EQ(match(8), "");
  clock_.Advance(1s);
  EXPECT_EQ(match(8), "s-verify") << "no longer than verify_gather after it was queued";

  // A probe expected to end after the window is not waited for.
  setup(DefaultOptions(), ToSeconds(DefaultOptions().verify_gather) + 1);
  EXPECT_EQ(match(8), "s-verify");

  // While it waits, the agent probes if a probe is queued, of any wave.
  setup(DefaultOptions());
  table_->Put(QueuedProbe("s-other-probe", 4, 20, /*wave=*/2));
  EXPECT_EQ(match(8), "s-other-probe");

  // Another agent of the arch: the pair is over a share, so the verification starts now.
  setup(DefaultOptions());
  PutAgent(Agent("a2"));
  EXPECT_EQ(match(8), "s-verify");

  // Company of another arch is none.
  setup(DefaultOptions());
  ShardRecord p150 = table_->shard("s-next");
  p150.spec.set_arch("p150");
  p150.archs = {"p150"};
  table_->Put(p150);
  EXPECT_EQ(match(8), "s-verify");

  // Turned off.
  SchedulingOptions off = DefaultOptions();
  off.verify_gather = 0s;
  setup(off);
  EXPECT_EQ(match(8), "s-verify");
}

TEST_F(LeaseTableTest, AShardInBackoffIsSkippedUntilItIsEligible) {
  PutAgent(Agent("a1"));
  ShardRecord later = Queued("s-backoff", 1, "n150", /*priority=*/5);
  later.eligible_at = Now() + 10s;
  table_->Put(later);
  table_->Put(Queued("s-now", 2));
  EXPECT_EQ(MatchFor("a1"), "s-now") << "the higher priority shard waits for its backoff";
  table_->Put([&] {
    ShardRecord s = table_->shard("s-now");
    s.state = ShardState::kCancelled;
    return s;
  }());
  EXPECT_EQ(MatchFor("a1"), "");
  clock_.Advance(9s);
  EXPECT_EQ(MatchFor("a1"), "");
  clock_.Advance(1s);
  EXPECT_EQ(MatchFor("a1"), "s-backoff") << "eligible at eligible_at";
}

// --- grants and leases ----------------------------------------------------------------------

TEST_F(LeaseTableTest, GrantFillsTheLeaseAndTheAttemptRow) {
  PutAgent(Agent("a1"));
  ShardRecord queued = Queued("s-1", 1);
  queued.token = 4;  // three earlier grants and an operator requeue
  queued.attempts = 1;
  table_->Put(queued);
  clock_.Advance(7s);
  Mutation m;
  const ShardRecord granted = table_->Grant(agent("a1"), table_->shard("s-1"), Now(), m);
  EXPECT_EQ(granted.state, ShardState::kLeased);
  EXPECT_EQ(granted.token, 5);
  EXPECT_EQ(granted.attempts, 2);
  ASSERT_TRUE(granted.lease.has_value());
  EXPECT_EQ(granted.lease->lease_id, "s-1-l5");
  EXPECT_EQ(granted.lease->agent_id, "a1");
  EXPECT_EQ(granted.lease->session_id, "sess-a1");
  EXPECT_EQ(granted.lease->token, 5);
  EXPECT_EQ(granted.lease->granted_at, Now());
  EXPECT_EQ(granted.lease->deadline, Now() + 60s);
  ASSERT_EQ(m.attempts.size(), 1u);
  const AttemptRecord& a = m.attempts[0];
  EXPECT_EQ(a.shard_id, "s-1");
  EXPECT_EQ(a.attempt, 5) << "attempt rows are numbered by token";
  EXPECT_EQ(a.lease_id, "s-1-l5");
  EXPECT_EQ(a.agent_id, "a1");
  EXPECT_EQ(a.token, 5);
  EXPECT_EQ(a.granted_at, Now());
  EXPECT_EQ(a.outcome, "") << "open";

  // Grant decides; nothing changes until the copy is put back.
  EXPECT_EQ(table_->shard("s-1").state, ShardState::kQueued);
  EXPECT_EQ(table_->ShardOfLease("s-1-l5"), nullptr);
  EXPECT_TRUE(agent("a1").leases.empty());
  EXPECT_EQ(MatchFor("a1"), "s-1");

  table_->Put(granted);
  const ShardRecord* held = table_->ShardOfLease("s-1-l5");
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->id, "s-1");
  EXPECT_THAT(agent("a1").leases, ElementsAre("s-1-l5"));
  EXPECT_EQ(MatchFor("a1"), "") << "a leased shard is out of the queue";

  const v1::LeaseResponse resp = LeaseTable::Granted({held});
  EXPECT_TRUE(resp.granted());
  EXPECT_EQ(resp.lease_id(), "s-1-l5");
  EXPECT_EQ(resp.fencing_token(), 5);
  EXPECT_EQ(resp.deadline_unix_ms(), ToUnixMillis(Now() + 60s));
  EXPECT_EQ(resp.shard().shard_id(), "s-1");
}

TEST_F(LeaseTableTest, HeartbeatRenewsNamedLeasesAndRevokesOthers) {
  PutAgent(Agent("a1"));
  PutAgent(Agent("a2"));
  table_->Put(Queued("s-1", 1));
  table_->Put(Queued("s-2", 2));
  table_->Put(Queued("s-3", 3));
  const ShardRecord s1 = GrantAndPut("a1", "s-1");
  const ShardRecord s2 = GrantAndPut("a1", "s-2");
  const ShardRecord s3 = GrantAndPut("a2", "s-3");
  clock_.Advance(50s);

  v1::HeartbeatRequest hb;
  hb.set_agent_id("a1");
  hb.set_session_id("sess-a1");
  hb.add_lease_ids(s1.lease->lease_id);  // its own: renewed
  hb.add_lease_ids(s3.lease->lease_id);  // another agent's
  hb.add_lease_ids("s-9-l1");            // unknown
  v1::HeartbeatResponse resp = table_->Heartbeat(hb, Now());
  EXPECT_FALSE(resp.reregister());
  EXPECT_FALSE(resp.draining());
  EXPECT_THAT(resp.revoked_lease_ids(), UnorderedElementsAre("s-3-l1", "s-9-l1"));
  EXPECT_EQ(table_->shard("s-1").lease->deadline, Now() + 60s);
  EXPECT_EQ(table_->shard("s-2").lease->deadline, s2.lease->deadline) << "not named: not renewed";
  EXPECT_EQ(table_->shard("s-3").lease->deadline, s3.lease->deadline) << "not a1's to renew";
  EXPECT_EQ(agent("a1").last_heartbeat, Now());

  // A lease the table revoked is named in the answer while the agent still mentions it.
  ShardRecord cancelled = table_->shard("s-1");
  Mutation m;
  table_->Revoke(cancelled, Now(), "sweep cancelled", m);
  cancelled.state = ShardState::kCancelled;
  table_->Put(cancelled);
  ASSERT_EQ(m.attempts.size(), 1u);
  EXPECT_EQ(m.attempts[0].outcome, "revoked");
  hb.clear_lease_ids();
  hb.add_lease_ids("s-1-l1");
  EXPECT_THAT(table_->Heartbeat(hb, Now()).revoked_lease_ids(), ElementsAre("s-1-l1"));
  EXPECT_THAT(agent("a1").revoked, ElementsAre("s-1-l1"));
  hb.clear_lease_ids();
  EXPECT_TRUE(table_->Heartbeat(hb, Now()).revoked_lease_ids().empty());
  EXPECT_TRUE(agent("a1").revoked.empty()) << "no longer mentioned: acted on";

  // Draining is told.
  agent("a1").draining = true;
  EXPECT_TRUE(table_->Heartbeat(hb, Now()).draining());
}

TEST_F(LeaseTableTest, HeartbeatOfAWrongSessionOrUnknownAgentAsksToReregister) {
  PutAgent(Agent("a1"));
  v1::HeartbeatRequest hb;
  hb.set_agent_id("a1");
  hb.set_session_id("sess-old");
  const TimePoint seen = agent("a1").last_heartbeat;
  clock_.Advance(5s);
  EXPECT_TRUE(table_->Heartbeat(hb, Now()).reregister());
  EXPECT_EQ(agent("a1").last_heartbeat, seen) << "a stale session does not count as seen";
  hb.set_agent_id("nobody");
  EXPECT_TRUE(table_->Heartbeat(hb, Now()).reregister());
}

// --- intake -------------------------------------------------------------------------------

TEST_F(LeaseTableTest, AdmitSortsCompletions) {
  PutAgent(Agent("a1"));
  PutAgent(Agent("a2"));
  table_->Put(Queued("s-1", 1));
  const ShardRecord granted = GrantAndPut("a1", "s-1");

  auto accept = table_->Admit(Complete(granted));
  ASSERT_TRUE(accept.ok()) << accept.status();
  EXPECT_EQ(accept->kind, LeaseTable::Intake::Kind::kAccept);
  EXPECT_EQ(accept->shard.id, "s-1");
  ASSERT_TRUE(accept->shard.lease.has_value());
  EXPECT_EQ(accept->shard.lease->lease_id, "s-1-l1");

  v1::CompleteRequest wrong_token = Complete(granted);
  wrong_token.set_fencing_token(7);
  auto fenced = table_->Admit(wrong_token);
  ASSERT_TRUE(fenced.ok()) << fenced.status();
  EXPECT_EQ(fenced->kind, LeaseTable::Intake::Kind::kStale);
  EXPECT_EQ(fenced->metric_reason, "fencing");
  EXPECT_THAT(fenced->why, HasSubstr("stale fencing token 7 for shard s-1 (current 1)"));

  v1::CompleteRequest unknown = Complete(granted);
  unknown.set_lease_id("s-1-l0");
  auto stale = table_->Admit(unknown);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->kind, LeaseTable::Intake::Kind::kStale);
  EXPECT_EQ(stale->metric_reason, "unknown_lease");
  EXPECT_THAT(stale->why, HasSubstr("lease s-1-l0 is not current"));

  v1::CompleteRequest other_agent = Complete(granted);
  other_agent.set_agent_id("a2");
  auto denied = table_->Admit(other_agent);
  EXPECT_TRUE(absl::IsPermissionDenied(denied.status())) << denied.status();

  // Accepted: the shard ends and the result is remembered; the same completion again is a
  // duplicate, even though the lease is no longer current.
  ResultRecord r;
  r.lease_id = "s-1-l1";
  r.shard_id = "s-1";
  table_->PutResult(r);
  ShardRecord done = accept->shard;
  done.lease.reset();
  done.state = ShardState::kSucceeded;
  table_->Put(done);
  EXPECT_TRUE(table_->Accepted("s-1-l1"));
  auto dup = table_->Admit(Complete(granted));
  ASSERT_TRUE(dup.ok()) << dup.status();
  EXPECT_EQ(dup->kind, LeaseTable::Intake::Kind::kDuplicate);
}

// A lease ended by a failed attempt: the token of a completion for it is checked against the
// shard's latest grant.
TEST_F(LeaseTableTest, AdmitOfAnEndedLeaseIsStale) {
  PutAgent(Agent("a1"));
  table_->Put(Queued("s-1", 1));
  const ShardRecord first = GrantAndPut("a1", "s-1");
  ShardRecord failed = table_->shard("s-1");
  Mutation m;
  table_->FailAttempt(failed, "failed", "exit 1", Now(), m, Fault::kInfrastructure, 3);
  table_->Put(failed);
  auto in = table_->Admit(Complete(first));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->kind, LeaseTable::Intake::Kind::kStale);
  EXPECT_EQ(in->metric_reason, "unknown_lease");
}

// --- backup leases (docs/farm.md, "Backup leases") -------------------------------------------

class BackupLeaseTest : public LeaseTableTest {
 protected:
  BackupLeaseTest() {
    SchedulingOptions o = DefaultOptions();
    o.backups = BackupPolicy{.after = 1.5, .slack = 60s};
    Reset(o);
  }

  std::string StragglerFor(const std::string& agent_id) {
    return IdOf(table_->FindStraggler(agent(agent_id), Now()));
  }

  // Agents a1 and a2 (n150); s-1, expected 10 s, leased by a1.
  void LeasedByA1() {
    PutAgent(Agent("a1"));
    PutAgent(Agent("a2"));
    table_->Put(Queued("s-1", 1, "n150", 0, 10));
    GrantAndPut("a1", "s-1");
  }

  // LeasedByA1, then two minutes later (past its due time) a backup on a2.
  void BackedUpOnA2() {
    LeasedByA1();
    clock_.Advance(2min);
    BackupAndPut("a2", "s-1");
  }

  ShardRecord BackupAndPut(const std::string& agent_id, const std::string& shard_id,
                           Mutation* m = nullptr) {
    Mutation local;
    ShardRecord s =
        table_->GrantBackup(agent(agent_id), table_->shard(shard_id), Now(), m ? *m : local);
    table_->Put(s);
    return s;
  }
};

TEST_F(BackupLeaseTest, AnIdleAgentBacksUpAStragglerAndTheFirstAcceptedResultWins) {
  PutAgent(Agent("a1"));
  PutAgent(Agent("a2"));
  PutAgent(Agent("p1", "p150"));
  table_->Put(Queued("s-1", 1, "n150", 0, 100));
  const ShardRecord first = GrantAndPut("a1", "s-1");
  table_->RememberPlan(first.lease->lease_id, 100);
  // Due 210 s after the grant: 1.5 x 100 s + 60 s.
  clock_.Advance(209s);
  EXPECT_EQ(StragglerFor("a2"), "") << "not yet past its estimate by enough";
  clock_.Advance(2s);
  EXPECT_EQ(StragglerFor("a2"), "s-1");
  EXPECT_EQ(StragglerFor("a1"), "") << "its own lease";
  EXPECT_EQ(StragglerFor("p1"), "") << "another arch";
  agent("a2").draining = true;
  EXPECT_EQ(StragglerFor("a2"), "") << "a draining agent takes nothing";
  agent("a2").draining = false;
  table_->Hold("sw-0001", true);
  EXPECT_EQ(StragglerFor("a2"), "") << "a held sweep gets no new lease of any kind";
  table_->Hold("sw-0001", false);

  Mutation m;
  const ShardRecord backed = BackupAndPut("a2", "s-1", &m);
  ASSERT_TRUE(backed.backup.has_value());
  EXPECT_EQ(backed.backup->lease_id, "s-1-l2");
  EXPECT_EQ(backed.backup->agent_id, "a2");
  EXPECT_EQ(backed.backup->token, 2);
  EXPECT_TRUE(backed.backup->backup);
  EXPECT_EQ(backed.token, 2);
  EXPECT_EQ(backed.attempts, 1) << "a backup is the farm's choice, not an attempt of the work";
  EXPECT_EQ(backed.lease->lease_id, "s-1-l1") << "the first lease runs on";
  ASSERT_EQ(m.attempts.size(), 1u);
  EXPECT_TRUE(m.attempts[0].backup);
  EXPECT_EQ(m.attempts[0].lease_id, "s-1-l2");
  EXPECT_EQ(table_->ShardOfLease("s-1-l2")->id, "s-1");
  EXPECT_THAT(agent("a2").leases, ElementsAre("s-1-l2"));
  PutAgent(Agent("a3"));
  EXPECT_EQ(StragglerFor("a3"), "") << "one backup per shard";
  const v1::LeaseResponse resp = LeaseTable::GrantedBackup(table_->shard("s-1"));
  EXPECT_TRUE(resp.granted());
  EXPECT_EQ(resp.lease_id(), "s-1-l2");
  EXPECT_EQ(resp.fencing_token(), 2);
  EXPECT_EQ(resp.shard().shard_id(), "s-1");
  EXPECT_EQ(resp.batch_size(), 0);

  // Both leases are renewed by their own agents' heartbeats.
  clock_.Advance(30s);
  v1::HeartbeatRequest hb;
  hb.set_agent_id("a2");
  hb.set_session_id("sess-a2");
  hb.add_lease_ids("s-1-l2");
  EXPECT_TRUE(table_->Heartbeat(hb, Now()).revoked_lease_ids().empty());
  EXPECT_EQ(table_->shard("s-1").backup->deadline, Now() + 60s);

  // The backup's result comes first: it becomes the shard's lease, the first one its other
  // attempt, which ends as superseded; its agent (running it alone) is told to stop.
  auto in = table_->Admit(CompleteOn(*backed.backup));
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_EQ(in->kind, LeaseTable::Intake::Kind::kAccept);
  EXPECT_EQ(in->shard.lease->lease_id, "s-1-l2");
  EXPECT_EQ(in->shard.backup->lease_id, "s-1-l1");
  ShardRecord done = in->shard;
  Mutation record;
  table_->EndOtherAttempt(done, Now(), record);
  ASSERT_EQ(record.attempts.size(), 1u);
  EXPECT_EQ(record.attempts[0].lease_id, "s-1-l1");
  EXPECT_EQ(record.attempts[0].outcome, "superseded");
  EXPECT_FALSE(record.attempts[0].backup);
  EXPECT_THAT(record.attempts[0].reason, HasSubstr("s-1-l2 was accepted first"));
  EXPECT_FALSE(done.backup.has_value());
  EXPECT_THAT(agent("a1").revoked, ElementsAre("s-1-l1"));
  done.lease.reset();
  done.state = ShardState::kSucceeded;
  ResultRecord r;
  r.lease_id = "s-1-l2";
  r.shard_id = "s-1";
  table_->PutResult(r);
  table_->Put(done);
  EXPECT_TRUE(agent("a1").leases.empty());
  EXPECT_TRUE(agent("a2").leases.empty());

  // The first lease's result, when it comes, is stale: nothing is decided twice.
  auto late = table_->Admit(Complete(first));
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->kind, LeaseTable::Intake::Kind::kStale);
  EXPECT_EQ(late->metric_reason, "unknown_lease");
  EXPECT_THAT(late->why, HasSubstr("decided by another attempt"));
}

TEST_F(BackupLeaseTest, ALostAttemptHandsTheShardToTheOtherWithoutARequeue) {
  PutAgent(Agent("a3"));
  BackedUpOnA2();

  // The backup's agent goes silent: its lease expires, the first runs on.
  clock_.Advance(45s);
  v1::HeartbeatRequest hb;
  hb.set_agent_id("a1");
  hb.set_session_id("sess-a1");
  hb.add_lease_ids("s-1-l1");
  table_->Heartbeat(hb, Now());
  table_->MarkSilentAgentsOffline(Now());
  ASSERT_TRUE(agent("a2").offline);
  Mutation m;
  auto expired = table_->ExpireLeases(Now(), m, [](const ShardRecord&) { return 3; });
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].state, ShardState::kLeased);
  EXPECT_EQ(expired[0].lease->lease_id, "s-1-l1");
  EXPECT_FALSE(expired[0].backup.has_value());
  EXPECT_EQ(expired[0].infra_losses, 0) << "the shard lost nothing";
  ASSERT_EQ(m.attempts.size(), 1u);
  EXPECT_EQ(m.attempts[0].lease_id, "s-1-l2");
  EXPECT_EQ(m.attempts[0].outcome, "expired");
  EXPECT_TRUE(m.attempts[0].backup);
  table_->Put(expired[0]);
  EXPECT_THAT(agent("a2").revoked, ElementsAre("s-1-l2"));

  // Another backup; then the first attempt fails: the backup carries the shard on.
  BackupAndPut("a3", "s-1");
  ShardRecord failed = table_->shard("s-1");
  Mutation fail;
  table_->FailAttempt(failed, "failed", "exit 1", Now(), fail, Fault::kWork, 3);
  EXPECT_EQ(failed.state, ShardState::kLeased) << "not requeued";
  ASSERT_TRUE(failed.lease.has_value());
  EXPECT_EQ(failed.lease->lease_id, "s-1-l3");
  EXPECT_TRUE(failed.lease->backup);
  EXPECT_FALSE(failed.backup.has_value());
  EXPECT_EQ(failed.attempts, 1);
  ASSERT_EQ(fail.attempts.size(), 1u);
  EXPECT_EQ(fail.attempts[0].outcome, "failed");
  table_->Put(failed);
  EXPECT_EQ(table_->ShardOfLease("s-1-l1"), nullptr);
  EXPECT_EQ(table_->ShardOfLease("s-1-l3")->id, "s-1");
  EXPECT_TRUE(agent("a1").leases.empty());
  EXPECT_THAT(agent("a3").leases, ElementsAre("s-1-l3"));
  EXPECT_EQ(MatchFor("a1"), "") << "nothing was queued";
}

TEST_F(BackupLeaseTest, AnOperatorRevocationEndsBothAttempts) {
  BackedUpOnA2();
  ShardRecord s = table_->shard("s-1");
  Mutation m;
  table_->Revoke(s, Now(), "requeued by alice", m);
  ASSERT_EQ(m.attempts.size(), 2u);
  EXPECT_EQ(m.attempts[0].outcome, "revoked");
  EXPECT_EQ(m.attempts[1].outcome, "revoked");
  EXPECT_TRUE(m.attempts[1].backup);
  EXPECT_FALSE(s.lease.has_value());
  EXPECT_FALSE(s.backup.has_value());
  EXPECT_THAT(agent("a1").revoked, ElementsAre("s-1-l1"));
  EXPECT_THAT(agent("a2").revoked, ElementsAre("s-1-l2"));
}

TEST_F(BackupLeaseTest, ABackupYieldsToQueuedWorkThatNoIdleAgentTakes) {
  BackedUpOnA2();
  const LeaseInfo backup = *table_->shard("s-1").backup;
  Mutation none;
  EXPECT_TRUE(table_->YieldBackups(Now(), none).empty()) << "nothing queued";

  // Probe work is no reason: CPU agents serve it, a device agent only when it has nothing.
  table_->Put(QueuedProbe("p-1", 2, 50));
  EXPECT_TRUE(table_->YieldBackups(Now(), none).empty()) << "not its lane's work";
  // Work of another arch is no reason either.
  table_->Put(Queued("q-p150", 3, "p150"));
  EXPECT_TRUE(table_->YieldBackups(Now(), none).empty()) << "another arch";
  // Its own arch's work, with an idle n150 agent to take it: the backup runs on.
  table_->Put(Queued("q-1", 4, "n150"));
  PutAgent(Agent("a3"));
  EXPECT_TRUE(table_->YieldBackups(Now(), none).empty()) << "a3 takes it";
  agent("a3").draining = true;

  // No one else can take q-1: the backup ends as yielded and its agent is told to stop it; the
  // first attempt runs on, and nothing counts against the shard.
  Mutation m;
  auto yielded = table_->YieldBackups(Now(), m);
  ASSERT_EQ(yielded.size(), 1u);
  EXPECT_EQ(yielded[0].id, "s-1");
  EXPECT_FALSE(yielded[0].backup.has_value());
  ASSERT_TRUE(yielded[0].lease.has_value());
  EXPECT_EQ(yielded[0].lease->lease_id, "s-1-l1");
  EXPECT_EQ(yielded[0].attempts, 1);
  ASSERT_EQ(m.attempts.size(), 1u);
  EXPECT_EQ(m.attempts[0].lease_id, "s-1-l2");
  EXPECT_EQ(m.attempts[0].outcome, "yielded");
  EXPECT_TRUE(m.attempts[0].backup);
  EXPECT_THAT(m.attempts[0].reason, HasSubstr("queued shard q-1"));
  EXPECT_THAT(agent("a2").revoked, ElementsAre("s-1-l2"));
  table_->Put(yielded[0]);
  EXPECT_TRUE(agent("a2").leases.empty());
  EXPECT_EQ(table_->ShardOfLease("s-1-l2"), nullptr);
  EXPECT_EQ(MatchFor("a2"), "q-1");

  // Its late result is stale: the shard is the first attempt's.
  auto in = table_->Admit(CompleteOn(backup));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->kind, LeaseTable::Intake::Kind::kStale);
}

TEST_F(BackupLeaseTest, ABatchRunsOnWhenABackupDecidesOneOfItsShards) {
  PutAgent(Agent("a1"));
  PutAgent(Agent("a2"));
  table_->Put(QueuedVerify("v-1", 1, 100));
  table_->Put(QueuedVerify("v-2", 2, 100));
  // One batch on a1: v-2 is planned to end after v-1, 200 s after the grant.
  const ShardRecord v1 = GrantAndPut("a1", "v-1");
  const ShardRecord v2 = GrantAndPut("a1", "v-2");
  table_->RememberPlan(v1.lease->lease_id, 100);
  table_->RememberPlan(v2.lease->lease_id, 200);
  clock_.Advance(220s);
  EXPECT_EQ(StragglerFor("a2"), "v-1") << "the head is due at 210 s, the second at 360 s";
  clock_.Advance(200s);
  EXPECT_EQ(StragglerFor("a2"), "v-1") << "further past its due time";
  BackupAndPut("a2", "v-2");  // the operator's view aside, any straggler may be backed up

  auto in = table_->Admit(CompleteOn(*table_->shard("v-2").backup));
  ASSERT_TRUE(in.ok()) << in.status();
  ShardRecord done = in->shard;
  Mutation m;
  table_->EndOtherAttempt(done, Now(), m);
  EXPECT_TRUE(agent("a1").revoked.empty()) << "revoking one lease would stop the whole batch";
  EXPECT_THAT(agent("a1").superseded, ElementsAre("v-2-l1"));
  done.lease.reset();
  done.state = ShardState::kSucceeded;
  table_->Put(done);

  // a1's heartbeats and progress for the decided shard are neither renewed nor revoked.
  v1::HeartbeatRequest hb;
  hb.set_agent_id("a1");
  hb.set_session_id("sess-a1");
  hb.add_lease_ids("v-1-l1");
  hb.add_lease_ids("v-2-l1");
  EXPECT_TRUE(table_->Heartbeat(hb, Now()).revoked_lease_ids().empty());
  v1::ProgressRequest p;
  p.set_agent_id("a1");
  p.set_session_id("sess-a1");
  p.set_lease_id("v-2-l1");
  p.set_fencing_token(1);
  EXPECT_FALSE(table_->Progress(p, Now()).revoked());
  // Its result is refused as stale; once the agent no longer names it, it is forgotten.
  auto late = table_->Admit(Complete(v2));
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->kind, LeaseTable::Intake::Kind::kStale);
  hb.clear_lease_ids();
  hb.add_lease_ids("v-1-l1");
  table_->Heartbeat(hb, Now());
  EXPECT_TRUE(agent("a1").superseded.empty());
}

TEST_F(BackupLeaseTest, ARestartedAgentLosesItsBackupAndTheShardKeepsItsLease) {
  BackedUpOnA2();
  const AgentRecord before = agent("a2");
  Mutation m;
  auto fenced = table_->FenceRestartedAgent(before, {}, Now(), m);
  ASSERT_EQ(fenced.size(), 1u);
  EXPECT_EQ(fenced[0].state, ShardState::kLeased);
  EXPECT_EQ(fenced[0].lease->lease_id, "s-1-l1");
  EXPECT_FALSE(fenced[0].backup.has_value());
  ASSERT_EQ(m.attempts.size(), 1u);
  EXPECT_EQ(m.attempts[0].lease_id, "s-1-l2");
  EXPECT_EQ(m.attempts[0].outcome, "expired");
}

TEST_F(BackupLeaseTest, NoBackupsForASweepWithADeviceTimeBudget) {
  LeasedByA1();
  clock_.Advance(10h);
  ASSERT_EQ(StragglerFor("a2"), "s-1");
  table_->NoBackups("sw-0001");
  EXPECT_EQ(StragglerFor("a2"), "");
}

TEST_F(BackupLeaseTest, NoBackupsWhenTheyAreOff) {
  SchedulingOptions o = DefaultOptions();
  o.backups.after = 0;
  Reset(o);
  LeasedByA1();
  clock_.Advance(10h);
  EXPECT_EQ(StragglerFor("a2"), "");
}

// --- failed attempts ------------------------------------------------------------------------

TEST_F(LeaseTableTest, WorkFaultsBackOffDoublingUpToTheMaximumThenQuarantine) {
  PutAgent(Agent("a1"));
  table_->Put(Queued("s-1", 1));
  constexpr int kMaxAttempts = 5;
  // backoff_base 10s, backoff_max 35s: 10, 20, 35 (capped), 35; the fifth fault quarantines.
  const std::vector<Duration> backoffs = {10s, 20s, 35s, 35s};
  for (std::size_t i = 0; i < backoffs.size(); ++i) {
    SCOPED_TRACE(i + 1);
    const ShardRecord granted = GrantAndPut("a1", "s-1");
    clock_.Advance(3s);
    ShardRecord s = table_->shard("s-1");
    Mutation m;
    table_->FailAttempt(s, "failed", "exit 1", Now(), m, Fault::kWork, kMaxAttempts);
    EXPECT_EQ(s.state, ShardState::kQueued);
    EXPECT_EQ(s.attempts, static_cast<int>(i) + 1) << "a work fault counts";
    EXPECT_EQ(s.infra_losses, 0);
    EXPECT_FALSE(s.lease.has_value());
    EXPECT_EQ(s.last_error, "exit 1");
    EXPECT_EQ(s.enqueued_at, Now());
    EXPECT_EQ(s.eligible_at, Now() + backoffs[i]);
    ASSERT_EQ(m.attempts.size(), 1u);
    EXPECT_EQ(m.attempts[0].lease_id, granted.lease->lease_id);
    EXPECT_EQ(m.attempts[0].granted_at, granted.lease->granted_at);
    EXPECT_EQ(m.attempts[0].ended_at, Now());
    EXPECT_EQ(m.attempts[0].outcome, "failed");
    EXPECT_EQ(m.attempts[0].reason, "exit 1");
    table_->Put(s);
    EXPECT_EQ(table_->ShardOfLease(granted.lease->lease_id), nullptr);
    EXPECT_TRUE(agent("a1").leases.empty());
    EXPECT_EQ(MatchFor("a1"), "") << "backing off";
    clock_.Set(s.eligible_at);
    EXPECT_EQ(MatchFor("a1"), "s-1");
  }
  GrantAndPut("a1", "s-1");
  ShardRecord s = table_->shard("s-1");
  EXPECT_EQ(s.attempts, kMaxAttempts);
  Mutation m;
  table_->FailAttempt(s, "failed", "exit 1", Now(), m, Fault::kWork, kMaxAttempts);
  EXPECT_EQ(s.state, ShardState::kQuarantined);
  EXPECT_FALSE(s.lease.has_value());
  EXPECT_EQ(m.attempts.size(), 1u);
  table_->Put(s);
  EXPECT_EQ(MatchFor("a1"), "");
}

TEST_F(LeaseTableTest, InfrastructureFaultsRequeueAtOnceAndHaveTheirOwnBound) {
  PutAgent(Agent("a1"));
  table_->Put(Queued("s-1", 1));
  // max_attempts 1: a work fault would quarantine at once; infrastructure faults do not count.
  for (int loss = 1; loss < options_.max_infra_losses; ++loss) {
    SCOPED_TRACE(loss);
    GrantAndPut("a1", "s-1");
    ShardRecord s = table_->shard("s-1");
    ASSERT_EQ(s.attempts, 1);
    Mutation m;
    table_->FailAttempt(s, "expired", "agent went away", Now(), m, Fault::kInfrastructure, 1);
    EXPECT_EQ(s.state, ShardState::kQueued);
    EXPECT_EQ(s.attempts, 0) << "the grant is given back";
    EXPECT_EQ(s.infra_losses, loss);
    EXPECT_EQ(s.eligible_at, Now()) << "no backoff";
    EXPECT_EQ(s.last_error, "agent went away");
    ASSERT_EQ(m.attempts.size(), 1u);
    EXPECT_EQ(m.attempts[0].outcome, "expired");
    table_->Put(s);
    EXPECT_EQ(MatchFor("a1"), "s-1") << "another agent may take it at once";
  }
  GrantAndPut("a1", "s-1");
  ShardRecord s = table_->shard("s-1");
  Mutation m;
  table_->FailAttempt(s, "expired", "agent went away", Now(), m, Fault::kInfrastructure, 1);
  EXPECT_EQ(s.state, ShardState::kQuarantined);
  EXPECT_EQ(s.infra_losses, options_.max_infra_losses);
  EXPECT_THAT(s.last_error,
              HasSubstr("agent went away (3 leases lost to agents or the coordinator going away)"));
}

// --- expiry ----------------------------------------------------------------------------------

TEST_F(LeaseTableTest, ExpireLeasesPastTheirDeadlineOrOnOfflineAgents) {
  PutAgent(Agent("alive"));
  PutAgent(Agent("silent"));
  table_->Put(Queued("s-late", 1));
  table_->Put(Queued("s-fresh", 2));
  table_->Put(Queued("s-orphan", 3));
  const ShardRecord late = GrantAndPut("alive", "s-late");
  clock_.Advance(25s);
  const ShardRecord fresh = GrantAndPut("alive", "s-fresh");
  const ShardRecord orphan = GrantAndPut("silent", "s-orphan");

  // alive keeps heartbeating but never names s-late's lease; silent says nothing.
  clock_.Advance(20s);
  v1::HeartbeatRequest hb;
  hb.set_agent_id("alive");
  hb.set_session_id("sess-alive");
  hb.add_lease_ids(fresh.lease->lease_id);
  table_->Heartbeat(hb, Now());
  auto no_limit = [](const ShardRecord&) { return 100; };
  Mutation none;
  EXPECT_TRUE(table_->ExpireLeases(Now(), none, no_limit).empty()) << "45s: nothing is due";
  EXPECT_TRUE(none.attempts.empty());

  clock_.Advance(16s);  // 61s after s-late's grant; silent quiet for 61s, alive for 16s
  table_->MarkSilentAgentsOffline(Now());
  EXPECT_TRUE(agent("silent").offline);
  EXPECT_FALSE(agent("alive").offline);
  Mutation m;
  std::vector<ShardRecord> expired = table_->ExpireLeases(Now(), m, no_limit);
  ASSERT_EQ(expired.size(), 2u);
  std::map<std::string, ShardRecord> by_id;
  for (auto& s : expired) by_id.emplace(s.id, s);
  ASSERT_EQ(by_id.count("s-late"), 1u);
  ASSERT_EQ(by_id.count("s-orphan"), 1u);
  for (const auto& [id, s] : by_id) {
    SCOPED_TRACE(id);
    EXPECT_EQ(s.state, ShardState::kQueued);
    EXPECT_FALSE(s.lease.has_value());
    EXPECT_EQ(s.attempts, 0) << "an expiry is the farm's fault";
    EXPECT_EQ(s.infra_losses, 1);
    EXPECT_EQ(s.eligible_at, Now());
  }
  EXPECT_THAT(by_id.at("s-late").last_error,
              HasSubstr("lease s-late-l1 expired (deadline) on agent alive"));
  EXPECT_THAT(by_id.at("s-orphan").last_error,
              HasSubstr("lease s-orphan-l1 expired (heartbeat_timeout) on agent silent"));
  ASSERT_EQ(m.attempts.size(), 2u);
  for (const auto& a : m.attempts) EXPECT_EQ(a.outcome, "expired");
  EXPECT_THAT(agent("alive").revoked, ElementsAre("s-late-l1"));
  EXPECT_THAT(agent("silent").revoked, ElementsAre("s-orphan-l1"));

  for (auto& s : expired) table_->Put(s);
  EXPECT_EQ(table_->ShardOfLease(late.lease->lease_id), nullptr);
  EXPECT_EQ(table_->ShardOfLease(orphan.lease->lease_id), nullptr);
  EXPECT_NE(table_->ShardOfLease(fresh.lease->lease_id), nullptr) << "renewed: kept";
  EXPECT_THAT(agent("alive").leases, ElementsAre(fresh.lease->lease_id));
  EXPECT_TRUE(agent("silent").leases.empty());
}

// --- a restarted agent ------------------------------------------------------------------------

TEST_F(LeaseTableTest, FenceRestartedAgentFencesLeasesItDoesNotHold) {
  PutAgent(Agent("a1"));
  table_->Put(Queued("s-lost", 1));
  table_->Put(Queued("s-held", 2));
  const ShardRecord lost = GrantAndPut("a1", "s-lost");
  const ShardRecord held = GrantAndPut("a1", "s-held");
  const AgentRecord previous = agent("a1");
  clock_.Advance(50s);

  Mutation m;
  std::vector<ShardRecord> fenced =
      table_->FenceRestartedAgent(previous, {held.lease->lease_id}, Now(), m);
  ASSERT_EQ(fenced.size(), 1u);
  const ShardRecord& s = fenced[0];
  EXPECT_EQ(s.id, "s-lost");
  EXPECT_EQ(s.state, ShardState::kQueued);
  EXPECT_FALSE(s.lease.has_value());
  EXPECT_EQ(s.attempts, 0);
  EXPECT_EQ(s.infra_losses, 1);
  EXPECT_THAT(s.last_error, HasSubstr("agent re-registered (restart)"));
  ASSERT_EQ(m.attempts.size(), 1u);
  EXPECT_EQ(m.attempts[0].lease_id, lost.lease->lease_id);
  EXPECT_EQ(m.attempts[0].outcome, "expired");

  // The held lease lives on, with a new deadline; the fenced one is still the table's until put.
  EXPECT_EQ(table_->shard("s-held").lease->deadline, Now() + 60s);
  EXPECT_EQ(table_->shard("s-held").state, ShardState::kLeased);
  table_->Put(s);
  EXPECT_EQ(table_->ShardOfLease(lost.lease->lease_id), nullptr);
  EXPECT_THAT(agent("a1").leases, ElementsAre(held.lease->lease_id));
}

// --- waiters ------------------------------------------------------------------------------------

TEST_F(LeaseTableTest, WaitersAreCappedExpireAndCanBeCancelled) {
  v1::LeaseRequest req;
  req.set_agent_id("a1");
  req.set_session_id("sess-a1");
  req.set_request_id("r-1");
  req.set_wait_ms(60'000);
  int answered = 0;
  auto done = [&answered](absl::StatusOr<v1::LeaseResponse>) { ++answered; };
  const std::int64_t capped = table_->AddWaiter(req, Now(), done);
  req.set_wait_ms(5'000);
  req.set_request_id("r-2");
  const std::int64_t short_wait = table_->AddWaiter(req, Now(), done);
  req.set_request_id("r-3");
  const std::int64_t cancelled = table_->AddWaiter(req, Now(), done);
  EXPECT_NE(capped, short_wait);

  LeaseTable::LeaseCallback cb = table_->CancelWaiter(cancelled);
  ASSERT_TRUE(cb != nullptr);
  EXPECT_TRUE(table_->CancelWaiter(cancelled) == nullptr) << "already gone";
  EXPECT_TRUE(table_->CancelWaiter(12345) == nullptr);

  EXPECT_TRUE(table_->TakeExpiredWaiters(Now() + 4999ms).empty());
  std::vector<LeaseTable::Waiter> expired = table_->TakeExpiredWaiters(Now() + 5s);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].id, short_wait);
  EXPECT_EQ(expired[0].request_id, "r-2");
  EXPECT_EQ(expired[0].deadline, Now() + 5s);
  EXPECT_TRUE(table_->TakeExpiredWaiters(Now() + 19s).empty()) << "60s asked, 20s allowed";
  expired = table_->TakeExpiredWaiters(Now() + 20s);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].id, capped);
  EXPECT_EQ(expired[0].deadline, Now() + 20s);
  EXPECT_EQ(answered, 0) << "the table hands waiters back; it does not answer them";
}

TEST_F(LeaseTableTest, ServeWaitersGrantsInOrderAndSendsStaleSessionsToReregister) {
  PutAgent(Agent("a1"));
  PutAgent(Agent("a2"));
  PutAgent(Agent("a3"));
  auto request = [](const std::string& agent_id, const std::string& session) {
    v1::LeaseRequest req;
    req.set_agent_id(agent_id);
    req.set_session_id(session);
    req.set_wait_ms(10'000);
    return req;
  };
  auto nop = [](absl::StatusOr<v1::LeaseResponse>) {};
  table_->AddWaiter(request("a2", "sess-a2"), Now(), nop);
  table_->AddWaiter(request("a3", "sess-before-restart"), Now(), nop);
  table_->AddWaiter(request("a1", "sess-a1"), Now(), nop);

  std::vector<std::pair<std::string, std::string>> grants;  // (agent, shard)
  std::vector<std::string> reregistered;
  auto grant = [&](LeaseTable::Waiter& w, const AgentRecord& a, const ShardRecord& s) {
    grants.emplace_back(w.agent_id, s.id);
    GrantAndPut(a.dims.agent_id(), s.id);  // the owner commits the grant
  };
  auto reregister = [&](LeaseTable::Waiter& w) { reregistered.push_back(w.agent_id); };

  table_->ServeWaiters(Now(), grant, reregister);
  EXPECT_TRUE(grants.empty()) << "no queued work: nobody is served";
  EXPECT_TRUE(reregistered.empty());

  table_->Put(Queued("s-1", 1));
  table_->ServeWaiters(Now(), grant, reregister);
  EXPECT_THAT(grants, ElementsAre(std::make_pair(std::string("a2"), std::string("s-1"))));
  EXPECT_TRUE(reregistered.empty()) << "the queue ran dry before the stale waiter's turn";

  table_->Put(Queued("s-2", 2));
  table_->Put(Queued("s-3", 3));
  table_->ServeWaiters(Now(), grant, reregister);
  EXPECT_THAT(grants, ElementsAre(std::make_pair(std::string("a2"), std::string("s-1")),
                                  std::make_pair(std::string("a1"), std::string("s-2"))));
  EXPECT_THAT(reregistered, ElementsAre("a3"));
  EXPECT_TRUE(table_->TakeAllWaiters().empty()) << "every waiter was answered";
  EXPECT_EQ(MatchFor("a3"), "s-3");
}

// --- the listener -------------------------------------------------------------------------------

TEST_F(LeaseTableTest, TheListenerSeesEveryPutWithTheOldRecord) {
  PutAgent(Agent("a1"));
  table_->Put(Queued("s-1", 1));
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_FALSE(calls_[0].old.has_value()) << "a new shard";
  EXPECT_EQ(calls_[0].updated.id, "s-1");
  EXPECT_EQ(calls_[0].updated.state, ShardState::kQueued);

  GrantAndPut("a1", "s-1");
  ASSERT_EQ(calls_.size(), 2u);
  ASSERT_TRUE(calls_[1].old.has_value());
  EXPECT_EQ(calls_[1].old->state, ShardState::kQueued);
  EXPECT_FALSE(calls_[1].old->lease.has_value());
  EXPECT_EQ(calls_[1].updated.state, ShardState::kLeased);

  ShardRecord same = table_->shard("s-1");
  table_->Put(same);  // no change is still a Put
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[2].old->state, ShardState::kLeased);
  EXPECT_EQ(calls_[2].updated.state, ShardState::kLeased);

  table_->Put(Queued("s-2", 2));
  ASSERT_EQ(calls_.size(), 4u);
  EXPECT_FALSE(calls_[3].old.has_value());
  EXPECT_EQ(calls_[3].updated.id, "s-2");

  PutAgent(Agent("a2"));
  EXPECT_EQ(calls_.size(), 4u) << "agents are not shards";
}

}  // namespace
}  // namespace triage::coord
