// The agent's behaviour against an in-memory coordinator and executors, without gRPC: what it
// registers, leases and completes, its spool across an outage and a restart, revocations,
// and its time decisions (progress throttling, heartbeat period, retry backoff) on a FakeClock.
// tests/integration/farm_test.cc runs the same agent against a real coordinator over gRPC.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "agent/core/agent.h"
#include "agent/workspace/workspace.h"
#include "common/clock/clock.h"
#include "common/util/file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/fake_coordinator_client.h"
#include "tests/support/test_support.h"

namespace triage {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using testing::FakeCoordinatorClient;
using testing::FakeExecutor;
using ::testing::HasSubstr;
using Client = FakeCoordinatorClient;

v1::ShardSpec Spec(const std::string& shard, const std::string& executor = "native",
                   int entries = 2) {
  v1::ShardSpec spec;
  spec.set_sweep_id("w1");
  spec.set_shard_id(shard);
  spec.set_playbook("unpack_forward_output");
  spec.set_loader("third_party/tt_forge_models/m0/pytorch/loader.py");
  spec.set_executor(executor);
  for (int i = 0; i < entries; ++i) {
    auto* e = spec.add_entries();
    e->set_key("m0/pytorch-v" + std::to_string(i) + "-single_device-training");
    e->set_file("tests/runner/test_config/torch/test_config_training_single_device.yaml");
  }
  return spec;
}

// The .pb files of a spool directory.
std::vector<std::string> Spooled(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return names;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    if (f.path().extension() == ".pb") names.push_back(f.path().filename().string());
  }
  return names;
}

class AgentTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (auto& r : running_) {
      r->agent->Stop();
      if (r->thread.joinable()) r->thread.join();
    }
  }

  agent::AgentOptions Options(const std::string& id = "a1") {
    agent::AgentOptions options;
    options.dimensions.set_agent_id(id);
    options.dimensions.set_arch("n150");
    options.data_dir = tmp_.path() / id;
    options.lease_wait = 20ms;  // the fake's long-poll, in real time
    options.progress_interval = 5s;
    options.retry = {0, 1s, 4s};  // until stopped, as agents run
    options.clock = &clock_;
    return options;
  }

  std::unique_ptr<agent::Agent> Make(agent::AgentOptions options, Client* client) {
    return std::make_unique<agent::Agent>(
        std::move(options), client, nullptr,
        std::map<std::string, agent::Executor*>{{"native", &native_}, {"command", &command_}});
  }

  struct Running {
    std::unique_ptr<agent::Agent> agent;
    std::thread thread;
    absl::Status exit = absl::UnknownError("still running");
    std::atomic<bool> done{false};
  };

  // Runs an agent on its own thread; the fixture stops it at the end.
  Running* Start(agent::AgentOptions options, Client* client) {
    return Launch(Make(std::move(options), client));
  }

  // Runs an agent built elsewhere (its own workspace or executors), the same way.
  Running* Launch(std::unique_ptr<agent::Agent> agent) {
    auto r = std::make_unique<Running>();
    r->agent = std::move(agent);
    Running* raw = r.get();
    r->thread = std::thread([raw] {
      raw->exit = raw->agent->Run();
      raw->done.store(true);
    });
    running_.push_back(std::move(r));
    return raw;
  }

  void StopAndJoin(Running* r) {
    r->agent->Stop();
    r->thread.join();
  }

  // Advances the fake clock by step every millisecond of real time until cond holds (backoffs
  // and heartbeat periods pass on the fake clock only).
  bool AdvanceUntil(const std::function<bool()>& cond, Duration step = 100ms) {
    return Client::WaitUntil([&] {
      if (cond()) return true;
      clock_.Advance(step);
      return false;
    });
  }

  testing::TempDir tmp_;
  FakeClock clock_;
  Client client_;
  Client restarted_{"r"};  // the coordinator as an agent's next process sees it
  FakeExecutor native_{"native"};
  FakeExecutor command_{"command"};
  // Last: the agents stop (in TearDown) and go before the clients they call.
  std::vector<std::unique_ptr<Running>> running_;
};

TEST_F(AgentTest, RegistersThenLeasesAndCompletesThroughTheExecutorTheSpecNames) {
  const auto lease = client_.GrantShard(Spec("w1-s001", "command"), 7);
  auto options = Options();
  options.max_shards = 1;
  auto agent = Make(options, &client_);
  ASSERT_TRUE(agent->Run().ok());

  const auto calls = client_.calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls[0], Client::kRegister);
  const auto reg = client_.registers().at(0);
  EXPECT_EQ(reg.dimensions().agent_id(), "a1");
  EXPECT_THAT(reg.dimensions().executors(), ::testing::UnorderedElementsAre("native", "command"))
      << "the executors the agent was given are offered";
  EXPECT_TRUE(reg.resume_session_id().empty());
  EXPECT_TRUE(reg.held_lease_ids().empty());
  const auto leases = client_.leases();
  ASSERT_FALSE(leases.empty());
  EXPECT_EQ(leases[0].session_id(), "s1");
  EXPECT_EQ(leases[0].wait_ms(), 20);
  EXPECT_FALSE(leases[0].request_id().empty());

  EXPECT_THAT(command_.runs(), ElementsAre("w1-s001"));
  EXPECT_TRUE(native_.runs().empty());
  const auto completes = client_.completes();
  ASSERT_EQ(completes.size(), 1u);
  const auto& c = completes[0];
  EXPECT_EQ(c.agent_id(), "a1");
  EXPECT_EQ(c.session_id(), "s1");
  EXPECT_EQ(c.lease_id(), lease.lease_id());
  EXPECT_EQ(c.fencing_token(), 7);
  EXPECT_EQ(c.result().status(), v1::ShardResult::SUCCEEDED);
  ASSERT_EQ(c.result().entries_size(), 2);
  EXPECT_EQ(c.result().entries(0).verdict(), "pass");
  EXPECT_GE(c.result().duration_seconds(), 0.0);
  EXPECT_EQ(agent->shards_done(), 1);
}

TEST_F(AgentTest, AShardForAnExecutorTheAgentLacksFailsWithoutRunning) {
  client_.GrantShard(Spec("w1-s001", "replay"));
  auto options = Options();
  options.max_shards = 1;
  ASSERT_TRUE(Make(options, &client_)->Run().ok());
  EXPECT_TRUE(native_.runs().empty());
  EXPECT_TRUE(command_.runs().empty());
  const auto completes = client_.completes();
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_EQ(completes[0].result().status(), v1::ShardResult::FAILED);
  EXPECT_THAT(completes[0].result().error(), HasSubstr("no 'replay' executor"));
}

TEST_F(AgentTest, AnExecutorErrorIsCompletedAsAFailedAttempt) {
  native_.SetBehaviour([](agent::ExecContext&) -> absl::StatusOr<v1::ShardResult> {
    return absl::InternalError("workspace broke");
  });
  client_.GrantShard(Spec("w1-s001"));
  auto options = Options();
  options.max_shards = 1;
  ASSERT_TRUE(Make(options, &client_)->Run().ok());
  const auto completes = client_.completes();
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_EQ(completes[0].result().status(), v1::ShardResult::FAILED);
  EXPECT_THAT(completes[0].result().error(), HasSubstr("workspace broke"));
}

TEST_F(AgentTest, TheResultIsSpooledBeforeCompleteAndRemovedOnceAnswered) {
  const auto lease = client_.GrantShard(Spec("w1-s001"));
  auto options = Options();
  options.max_shards = 1;
  const auto spool = options.data_dir / "spool";
  bool spooled = false;
  client_.OnComplete([&](const v1::CompleteRequest& req) {
    auto bytes = util::ReadFile(spool / (lease.lease_id() + ".pb"), 1 << 20);
    v1::CompleteRequest kept;
    spooled = bytes.ok() && kept.ParseFromString(*bytes) &&
              kept.SerializeAsString() == req.SerializeAsString();
  });
  ASSERT_TRUE(Make(options, &client_)->Run().ok());
  EXPECT_TRUE(spooled) << "Complete was sent before its request was on disk";
  EXPECT_TRUE(Spooled(spool).empty());
}

TEST_F(AgentTest, ARejectedResultIsAnAnswerToo) {
  client_.GrantShard(Spec("w1-s001"));
  v1::CompleteResponse rejected;
  rejected.set_accepted(false);
  rejected.set_rejected_reason("stale fencing token");
  client_.PushComplete(rejected);
  auto options = Options();
  options.max_shards = 1;
  ASSERT_TRUE(Make(options, &client_)->Run().ok());
  EXPECT_EQ(client_.Count(Client::kComplete), 1) << "a definitive answer is not retried";
  EXPECT_TRUE(Spooled(options.data_dir / "spool").empty());
}

// The coordinator cannot take the result for a while: the result stays spooled, its lease is
// named in every heartbeat meanwhile (so it does not expire), and the delivery backs off on the
// agent's clock until it is accepted.
TEST_F(AgentTest, AResultFinishedDuringAnOutageIsKeptAliveAndDeliveredAfterIt) {
  client_.Fail(Client::kComplete, absl::UnavailableError("store down"));
  const auto lease = client_.GrantShard(Spec("w1-s001"));
  auto options = Options();
  options.max_shards = 1;
  const auto spool = options.data_dir / "spool";
  Running* r = Start(options, &client_);
  ASSERT_TRUE(client_.WaitForCount(Client::kComplete, 1));
  EXPECT_THAT(Spooled(spool), ElementsAre(lease.lease_id() + ".pb"));
  // Backoffs pass on the fake clock only: no second attempt in real time.
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(client_.Count(Client::kComplete), 1);
  const int heartbeats = client_.Count(Client::kHeartbeat);
  ASSERT_TRUE(AdvanceUntil([&] {
    return client_.Count(Client::kHeartbeat) > heartbeats && client_.Count(Client::kComplete) > 2;
  }));
  EXPECT_THAT(client_.heartbeats().back().lease_ids(), ElementsAre(lease.lease_id()))
      << "the undelivered result's lease is kept alive";
  EXPECT_THAT(Spooled(spool), ElementsAre(lease.lease_id() + ".pb"));
  client_.Fail(Client::kComplete, absl::OkStatus());
  ASSERT_TRUE(AdvanceUntil([&] { return r->done.load(); }));
  EXPECT_TRUE(r->exit.ok()) << r->exit;
  EXPECT_TRUE(Spooled(spool).empty());
  EXPECT_EQ(native_.runs().size(), 1u) << "the finished result was thrown away";
  for (const auto& c : client_.completes()) EXPECT_EQ(c.lease_id(), lease.lease_id());
}

// An agent restarted with a result it could not deliver names the lease when it registers
// (so the coordinator does not fence it), then re-sends the result under its new session.
TEST_F(AgentTest, ASpooledResultIsResentAfterARestart) {
  client_.Fail(Client::kComplete, absl::UnavailableError("store down"));
  const auto lease = client_.GrantShard(Spec("w1-s001"), 3);
  const auto spool = Options().data_dir / "spool";
  Running* first = Start(Options(), &client_);
  ASSERT_TRUE(client_.WaitForCount(Client::kComplete, 1));
  StopAndJoin(first);  // the process goes away with the result on disk
  EXPECT_TRUE(first->exit.ok()) << first->exit;
  ASSERT_THAT(Spooled(spool), ElementsAre(lease.lease_id() + ".pb"));

  Client& restarted = restarted_;
  Running* second = Start(Options(), &restarted);
  ASSERT_TRUE(Client::WaitUntil([&] { return Spooled(spool).empty(); }));
  const auto reg = restarted.registers().at(0);
  EXPECT_THAT(reg.held_lease_ids(), ElementsAre(lease.lease_id()));
  const auto completes = restarted.completes();
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_EQ(completes[0].lease_id(), lease.lease_id());
  EXPECT_EQ(completes[0].fencing_token(), 3);
  EXPECT_EQ(completes[0].session_id(), "r1") << "sent under the new session";
  EXPECT_EQ(completes[0].result().status(), v1::ShardResult::SUCCEEDED);
  const auto calls = restarted.calls();
  EXPECT_EQ(calls.at(0), Client::kRegister);
  EXPECT_EQ(native_.runs().size(), 1u) << "the shard was redone";
  StopAndJoin(second);
  EXPECT_EQ(second->agent->shards_done(), 0);
}

TEST_F(AgentTest, AHeartbeatRevocationStopsTheRunningShard) {
  native_.Hold(true);
  const auto lease = client_.GrantShard(Spec("w1-s001"));
  Running* r = Start(Options(), &client_);
  ASSERT_TRUE(native_.WaitRunning(1));
  client_.RevokeOnNextHeartbeat(lease.lease_id());
  ASSERT_TRUE(AdvanceUntil([&] { return native_.cancelled_runs() == 1; }));
  bool named = false;
  for (const auto& hb : client_.heartbeats()) {
    for (const auto& id : hb.lease_ids()) named |= id == lease.lease_id();
  }
  EXPECT_TRUE(named) << "heartbeats name the running lease";
  // The agent goes back to leasing, without a result for the revoked lease.
  const int leases = client_.Count(Client::kLease);
  ASSERT_TRUE(client_.WaitForCount(Client::kLease, leases + 1));
  EXPECT_EQ(client_.Count(Client::kComplete), 0);
  EXPECT_TRUE(Spooled(Options().data_dir / "spool").empty());
  StopAndJoin(r);
  EXPECT_EQ(r->agent->shards_done(), 0);
}

TEST_F(AgentTest, ABatchTheExecutorCannotRunTogetherRunsShardByShardEachCompletedOnItsLease) {
  v1::LeaseResponse lease;
  lease.set_granted(true);
  lease.set_lease_id("w1-s001-l1");
  lease.set_fencing_token(1);
  *lease.mutable_shard() = Spec("w1-s001");
  for (int i : {2, 3}) {
    v1::BatchGrant* g = lease.add_batch();
    const std::string id = "w1-s00" + std::to_string(i);
    g->set_lease_id(id + "-l" + std::to_string(i));
    g->set_fencing_token(i);
    *g->mutable_shard() = Spec(id);
  }
  client_.PushLease(lease);
  native_.Hold(true);
  auto options = Options();
  options.max_shards = 3;
  Running* r = Start(options, &client_);
  ASSERT_TRUE(native_.WaitRunning(1));
  // While the first runs, heartbeats keep the waiting leases of the batch alive too.
  ASSERT_TRUE(AdvanceUntil([&] {
    for (const auto& hb : client_.heartbeats()) {
      if (hb.lease_ids_size() == 3) return true;
    }
    return false;
  }));
  native_.Hold(false);
  ASSERT_TRUE(Client::WaitUntil([&] { return r->done.load(); }));
  EXPECT_THAT(native_.runs(), ElementsAre("w1-s001", "w1-s002", "w1-s003"));
  const auto completes = client_.completes();
  ASSERT_EQ(completes.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(completes[i].lease_id(),
              "w1-s00" + std::to_string(i + 1) + "-l" + std::to_string(i + 1));
    EXPECT_EQ(completes[i].fencing_token(), i + 1);
    EXPECT_EQ(completes[i].result().status(), v1::ShardResult::SUCCEEDED);
  }
  // The agent asked for a batch no larger than the shards it has left to run.
  ASSERT_FALSE(client_.leases().empty());
  EXPECT_EQ(client_.leases()[0].max_batch(), 3);
  EXPECT_EQ(r->agent->shards_done(), 3);
}

// An executor that runs batches: it decides the batch's first shard at once (early_result),
// then holds the session until released, and returns every shard's result.
class EarlyBatchExecutor : public agent::Executor {
 public:
  std::string name() const override { return "native"; }
  bool CanBatch() const override { return true; }
  absl::StatusOr<v1::ShardResult> Run(agent::ExecContext& ctx) override {
    return FakeExecutor::Passing(*ctx.spec);
  }
  std::vector<absl::StatusOr<v1::ShardResult>> RunBatch(
      agent::ExecContext& ctx, const std::vector<const v1::ShardSpec*>& specs) override {
    ctx.early_result(0, FakeExecutor::Passing(*specs[0]));
    {
      std::unique_lock lock(mu_);
      held_ = true;
      cv_.wait(lock, [&] { return released_; });
    }
    std::vector<absl::StatusOr<v1::ShardResult>> out;
    for (const auto* spec : specs) {
      v1::ShardResult r = FakeExecutor::Passing(*spec);
      // What the session says of the first shard once it ends; it was already delivered.
      if (spec == specs[0]) r.set_error("a second result of the first shard");
      out.push_back(std::move(r));
    }
    return out;
  }
  bool held() {
    std::lock_guard lock(mu_);
    return held_;
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool released_ = false;
};

TEST_F(AgentTest, ABatchsShardDecidedEarlyIsCompletedWhileTheBatchRunsOnAndOnlyOnce) {
  v1::LeaseResponse lease;
  lease.set_granted(true);
  lease.set_lease_id("w1-s001-l1");
  lease.set_fencing_token(1);
  *lease.mutable_shard() = Spec("w1-s001");
  lease.mutable_shard()->set_phase(v1::PHASE_VERIFY);
  for (int i : {2, 3}) {
    v1::BatchGrant* g = lease.add_batch();
    const std::string id = "w1-s00" + std::to_string(i);
    g->set_lease_id(id + "-l" + std::to_string(i));
    g->set_fencing_token(i);
    *g->mutable_shard() = Spec(id);
    g->mutable_shard()->set_phase(v1::PHASE_VERIFY);
  }
  // A batch shares one prepared workspace: a real clone of a tt-xla-shaped repository.
  testing::SetGitTestEnv();
  const auto repo = testing::MakeUnpackRepo(tmp_.path() / "src", 1);
  const auto ws = testing::CloneWorkspace(repo, tmp_.path() / "ws");
  std::string ttxla, forge;
  ASSERT_EQ(testing::RunCommand({"git", "-C", ws.string(), "rev-parse", "HEAD"}, ws, &ttxla), 0);
  const auto forge_dir = ws / "third_party/tt_forge_models";
  ASSERT_EQ(testing::RunCommand({"git", "-C", forge_dir.string(), "rev-parse", "HEAD"}, ws, &forge),
            0);
  auto pin = [&](v1::ShardSpec* spec) {
    spec->set_ttxla_commit(std::string(absl::StripAsciiWhitespace(ttxla)));
    spec->set_forge_commit(std::string(absl::StripAsciiWhitespace(forge)));
  };
  pin(lease.mutable_shard());
  for (auto& g : *lease.mutable_batch()) pin(g.mutable_shard());
  workspace::Workspace workspace(ws, tmp_.path() / "shards");
  client_.PushLease(lease);
  EarlyBatchExecutor batching;
  auto options = Options();
  options.max_shards = 3;
  Running* raw = Launch(std::make_unique<agent::Agent>(
      std::move(options), &client_, &workspace,
      std::map<std::string, agent::Executor*>{{"native", &batching}}));
  // The first shard is completed on its own lease while the session still holds the others.
  ASSERT_TRUE(Client::WaitUntil([&] { return batching.held() && !client_.completes().empty(); }));
  {
    const auto completes = client_.completes();
    ASSERT_EQ(completes.size(), 1u);
    EXPECT_EQ(completes[0].lease_id(), "w1-s001-l1");
    EXPECT_EQ(completes[0].fencing_token(), 1);
    EXPECT_EQ(completes[0].result().error(), "");
    EXPECT_FALSE(raw->done.load());
  }
  batching.Release();
  ASSERT_TRUE(Client::WaitUntil([&] { return raw->done.load(); }));
  const auto completes = client_.completes();
  ASSERT_EQ(completes.size(), 3u) << "the first shard is not completed a second time";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(completes[i].lease_id(),
              "w1-s00" + std::to_string(i + 1) + "-l" + std::to_string(i + 1));
    EXPECT_EQ(completes[i].result().status(), v1::ShardResult::SUCCEEDED);
    EXPECT_EQ(completes[i].result().error(), "");
  }
  EXPECT_EQ(raw->agent->shards_done(), 3);
}

TEST_F(AgentTest, ARevokedProgressReportStopsTheShard) {
  v1::ProgressResponse revoked;
  revoked.set_revoked(true);
  client_.PushProgress(revoked);  // the first report, "prepare"
  bool cancelled_seen = false;
  native_.SetBehaviour([&](agent::ExecContext& ctx) -> absl::StatusOr<v1::ShardResult> {
    cancelled_seen = ctx.cancelled();
    return FakeExecutor::Passing(*ctx.spec);
  });
  client_.GrantShard(Spec("w1-s001"));
  Running* r = Start(Options(), &client_);
  ASSERT_TRUE(native_.WaitRunning(1));
  const int leases = client_.Count(Client::kLease);
  ASSERT_TRUE(client_.WaitForCount(Client::kLease, leases + 1));
  StopAndJoin(r);
  EXPECT_TRUE(cancelled_seen);
  EXPECT_EQ(client_.Count(Client::kComplete), 0);
  EXPECT_TRUE(Spooled(Options().data_dir / "spool").empty());
}

TEST_F(AgentTest, ProgressOfTheSameStepAndEntryIsThrottledOnTheAgentsClock) {
  native_.SetBehaviour([&](agent::ExecContext& ctx) -> absl::StatusOr<v1::ShardResult> {
    ctx.progress("verify", "e1", {"one"});
    ctx.progress("verify", "e1", {"two"});  // too soon
    clock_.Advance(4s);
    ctx.progress("verify", "e1", {"three"});  // still too soon
    clock_.Advance(1s);
    ctx.progress("verify", "e1", {"four"});  // the interval has passed
    ctx.progress("verify", "e2", {"five"});  // another entry: at once
    ctx.progress("pytest", "e2", {"six"});   // another step: at once
    return FakeExecutor::Passing(*ctx.spec);
  });
  const auto lease = client_.GrantShard(Spec("w1-s001"), 4);
  auto options = Options();
  options.max_shards = 1;
  ASSERT_TRUE(Make(options, &client_)->Run().ok());
  std::vector<std::string> sent;
  for (const auto& p : client_.progress()) {
    EXPECT_EQ(p.lease_id(), lease.lease_id());
    EXPECT_EQ(p.fencing_token(), 4);
    EXPECT_EQ(p.session_id(), "s1");
    sent.push_back(p.step() + "/" + p.entry() + (p.log_tail().empty() ? "" : ":" + p.log_tail(0)));
  }
  EXPECT_THAT(sent, ElementsAre("prepare/", "verify/e1:one", "verify/e1:four", "verify/e2:five",
                                "pytest/e2:six"));
}

TEST_F(AgentTest, HeartbeatsFollowTheIntervalTheCoordinatorGives) {
  client_.set_heartbeat_interval_ms(30'000);
  Running* r = Start(Options(), &client_);
  ASSERT_TRUE(client_.WaitForCount(Client::kHeartbeat, 1));
  std::this_thread::sleep_for(100ms);  // real time does not count
  EXPECT_EQ(client_.Count(Client::kHeartbeat), 1);
  clock_.Advance(29s);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(client_.Count(Client::kHeartbeat), 1);
  clock_.Advance(1s);
  ASSERT_TRUE(client_.WaitForCount(Client::kHeartbeat, 2));
  const auto hb = client_.heartbeats().back();
  EXPECT_EQ(hb.agent_id(), "a1");
  EXPECT_EQ(hb.session_id(), "s1");
  EXPECT_TRUE(hb.lease_ids().empty());
  StopAndJoin(r);
}

TEST_F(AgentTest, ARegistrationTheCoordinatorCannotAnswerIsRetriedWithBackoff) {
  client_.PushRegister(absl::UnavailableError("starting"));
  client_.PushRegister(absl::UnavailableError("starting"));
  Running* r = Start(Options(), &client_);  // backoff 1 s, then 2 s (with jitter, at most)
  ASSERT_TRUE(client_.WaitForCount(Client::kRegister, 1));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(client_.Count(Client::kRegister), 1) << "the backoff runs on the agent's clock";
  clock_.Advance(1s);
  ASSERT_TRUE(client_.WaitForCount(Client::kRegister, 2));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(client_.Count(Client::kRegister), 2) << "the second backoff is longer";
  clock_.Advance(2s);
  ASSERT_TRUE(client_.WaitForCount(Client::kRegister, 3));
  ASSERT_TRUE(client_.WaitForCount(Client::kLease, 1));
  EXPECT_EQ(r->agent->session(), "s1");
  StopAndJoin(r);
  EXPECT_TRUE(r->exit.ok()) << r->exit;
}

TEST_F(AgentTest, ARefusedRegistrationEndsRunWithTheError) {
  client_.PushRegister(absl::UnauthenticatedError("bad token"));
  absl::Status st = Make(Options(), &client_)->Run();
  EXPECT_TRUE(absl::IsUnauthenticated(st)) << st;
  EXPECT_EQ(client_.Count(Client::kLease), 0);
}

TEST_F(AgentTest, ARefusedLeaseEndsRunWithTheError) {
  client_.PushLease(absl::PermissionDeniedError("role viewer may not lease"));
  absl::Status st = Make(Options(), &client_)->Run();
  EXPECT_TRUE(absl::IsPermissionDenied(st)) << st;
}

TEST_F(AgentTest, AReregisterRequestResumesTheSession) {
  v1::HeartbeatResponse again;
  again.set_reregister(true);
  client_.PushHeartbeat(again);  // the first heartbeat
  Running* r = Start(Options(), &client_);
  ASSERT_TRUE(client_.WaitForCount(Client::kRegister, 2));
  const auto regs = client_.registers();
  EXPECT_EQ(regs[1].resume_session_id(), "s1");
  // The first lease may not have been asked for yet: never back() of an empty list.
  ASSERT_TRUE(Client::WaitUntil([&] {
    const auto leases = client_.leases();
    return !leases.empty() && leases.back().session_id() == "s1";
  }));
  StopAndJoin(r);
}

// A re-registration the coordinator answers with a new session (it lost the old one): the
// agent goes on under the new one.
TEST_F(AgentTest, AReregisterAnsweredWithANewSessionGoesOnUnderIt) {
  v1::HeartbeatResponse again;
  again.set_reregister(true);
  client_.PushHeartbeat(again);
  v1::RegisterResponse first;
  first.set_session_id("s1");
  v1::RegisterResponse fresh;
  fresh.set_session_id("s9");
  client_.PushRegister(first);
  client_.PushRegister(fresh);
  Running* r = Start(Options(), &client_);
  ASSERT_TRUE(client_.WaitForCount(Client::kRegister, 2));
  // The first lease may not have been asked for yet: never back() of an empty list.
  ASSERT_TRUE(Client::WaitUntil([&] {
    const auto leases = client_.leases();
    return !leases.empty() && leases.back().session_id() == "s9";
  }));
  EXPECT_EQ(r->agent->session(), "s9");
  StopAndJoin(r);
}

TEST_F(AgentTest, ADrainedAgentExitsWhenToldTo) {
  v1::LeaseResponse drained;
  drained.set_draining(true);
  client_.PushLease(drained);
  auto options = Options();
  options.exit_when_drained = true;
  EXPECT_TRUE(Make(options, &client_)->Run().ok());
  EXPECT_EQ(client_.Count(Client::kLease), 1);
}

TEST_F(AgentTest, StoppingEndsTheLeaseLongPollAtOnce) {
  auto options = Options();
  options.lease_wait = 60s;
  Running* r = Start(options, &client_);
  ASSERT_TRUE(client_.WaitForCount(Client::kLease, 1));
  const auto stop = std::chrono::steady_clock::now();
  StopAndJoin(r);
  EXPECT_LT(std::chrono::steady_clock::now() - stop, 5s) << "the agent waited out its long-poll";
  EXPECT_GE(client_.cancel_waits(), 1);
  EXPECT_TRUE(r->exit.ok()) << r->exit;
}

// docs/farm.md, "Only a working agent is a witness": the self-check's answer is the
// registration's runner_problem, checked before the first registration.
TEST_F(AgentTest, TheSelfChecksAnswerIsRegistered) {
  auto options = Options();
  options.runner_check = [](const std::function<bool()>&) {
    return std::string("--python /nope does not run");
  };
  Running* r = Start(options, &client_);
  ASSERT_TRUE(client_.WaitForCount(Client::kLease, 1));
  EXPECT_EQ(client_.calls().at(0), Client::kRegister);
  EXPECT_EQ(client_.registers().at(0).dimensions().runner_problem(), "--python /nope does not run");
  StopAndJoin(r);
}

// A native shard's attempt that fails for a reason the agent cannot attribute (here the
// playbook's "the runner could not run the tests") checks the runner again; a changed answer is
// registered in the same session (its leases are kept).
TEST_F(AgentTest, AFailedNativeAttemptChecksTheRunnerAgainAndRegistersAChangedAnswer) {
  std::atomic<int> checks{0};
  auto options = Options();
  options.runner_check = [&checks](const std::function<bool()>&) {
    return checks.fetch_add(1) == 0 ? std::string() : std::string("the device path is gone");
  };
  native_.SetBehaviour([](agent::ExecContext&) -> absl::StatusOr<v1::ShardResult> {
    return absl::UnavailableError("the runner could not run the tests: ERROR collecting");
  });
  client_.GrantShard(Spec("w1-s001"));
  Running* r = Start(options, &client_);
  ASSERT_TRUE(client_.WaitForCount(Client::kRegister, 2));
  const auto regs = client_.registers();
  EXPECT_EQ(regs[0].dimensions().runner_problem(), "");
  EXPECT_EQ(regs[1].dimensions().runner_problem(), "the device path is gone");
  EXPECT_EQ(regs[1].resume_session_id(), "s1");
  const auto calls = client_.calls();
  const auto complete = std::find(calls.begin(), calls.end(), Client::kComplete);
  const auto again = std::find(calls.begin() + 1, calls.end(), Client::kRegister);
  EXPECT_LT(complete, again) << "the failed attempt is reported first";
  StopAndJoin(r);
  EXPECT_EQ(checks.load(), 2);
  EXPECT_EQ(r->agent->session(), "s1");
}

// The same answer is not registered again; a failed attempt of another executor, or a native
// attempt that succeeded, does not check again.
TEST_F(AgentTest, OnlyAFailedNativeAttemptChecksAgainAndOnlyAChangeIsRegistered) {
  std::atomic<int> checks{0};
  auto options = Options();
  options.runner_check = [&checks](const std::function<bool()>&) {
    checks.fetch_add(1);
    return std::string();
  };
  command_.SetBehaviour([](agent::ExecContext&) -> absl::StatusOr<v1::ShardResult> {
    return absl::InternalError("the command failed");
  });
  client_.GrantShard(Spec("w1-s001", "command"));
  client_.GrantShard(Spec("w1-s002", "native"));
  Running* r = Start(options, &client_);
  ASSERT_TRUE(client_.WaitForCount(Client::kComplete, 2));
  ASSERT_TRUE(client_.WaitForCount(Client::kLease, client_.Count(Client::kLease) + 2));
  EXPECT_EQ(checks.load(), 1) << "only the check at start";
  native_.SetBehaviour([](agent::ExecContext&) -> absl::StatusOr<v1::ShardResult> {
    return absl::UnavailableError("pytest exited with code 4 before running any test");
  });
  client_.GrantShard(Spec("w1-s003", "native"));
  ASSERT_TRUE(Client::WaitUntil([&] { return checks.load() == 2; }));
  ASSERT_TRUE(client_.WaitForCount(Client::kLease, client_.Count(Client::kLease) + 2));
  EXPECT_EQ(client_.Count(Client::kRegister), 1) << "the answer did not change";
  StopAndJoin(r);
}

// While a problem stands the runner is checked again every runner_recheck (on the agent's
// clock): a repaired machine comes back without a restart.
TEST_F(AgentTest, AProblemIsCheckedAgainPeriodicallyAndTheRepairIsRegistered) {
  std::atomic<bool> repaired{false};
  auto options = Options();
  options.runner_recheck = 300s;
  options.runner_check = [&repaired](const std::function<bool()>&) {
    return repaired.load() ? std::string() : std::string("--python /nope does not run");
  };
  Running* r = Start(options, &client_);
  ASSERT_TRUE(client_.WaitForCount(Client::kLease, 1));
  repaired.store(true);
  clock_.Advance(299s);
  ASSERT_TRUE(client_.WaitForCount(Client::kLease, client_.Count(Client::kLease) + 2));
  EXPECT_EQ(client_.Count(Client::kRegister), 1) << "not due yet";
  clock_.Advance(1s);
  ASSERT_TRUE(client_.WaitForCount(Client::kRegister, 2));
  const auto regs = client_.registers();
  EXPECT_EQ(regs[1].dimensions().runner_problem(), "");
  EXPECT_EQ(regs[1].resume_session_id(), "s1");
  StopAndJoin(r);
}

}  // namespace
}  // namespace triage
