// The farm in one process over real gRPC: a coordinator server on port 0 and several agents
// (with a fake executor) on loopback: a whole sweep, an agent that dies mid-shard, two agents
// racing for one shard, an operator requeue, authentication and roles, TLS and mutual TLS, and
// the health service.

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "agent/client/grpc_client.h"
#include "agent/core/agent.h"
#include "common/rpc/rpc.h"
#include "common/util/strings.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/persistence/sqlite_store.h"
#include "coordinator/server/server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"
#include "triage/v1/agent.grpc.pb.h"
#include "triage/v1/control.grpc.pb.h"

namespace triage {
namespace {

using namespace std::chrono_literals;

constexpr char kUnpack[] =
    "tt-forge-models doesn't implement unpack_forward_output for this model.";
const std::string kAgentToken = "agent-token-0123456789";
const std::string kOperatorToken = "operator-token-0123456789";
const std::string kViewerToken = "viewer-token-0123456789";

std::string Yaml(int loaders) {
  std::string y = "test_config:\n";
  for (int i = 0; i < loaders; ++i) {
    y += "  m" + std::to_string(i) +
         "/pytorch-V-single_device-training:\n    status: NOT_SUPPORTED_SKIP\n    reason: \"" +
         kUnpack + "\"\n";
  }
  return y;
}

// Completes shards with a passing outcome per entry. Shards can be held until released, and
// every run is counted per shard.
class FakeExecutor : public agent::Executor {
 public:
  std::string name() const override { return "native"; }
  absl::StatusOr<v1::ShardResult> Run(agent::ExecContext& ctx) override {
    {
      std::unique_lock lock(mu_);
      ++runs_[ctx.spec->shard_id()];
      ++running_;
      cv_.notify_all();
      while (hold_ && !(ctx.cancelled && ctx.cancelled())) cv_.wait_for(lock, 20ms);
      --running_;
    }
    if (ctx.progress) ctx.progress("verify", ctx.spec->entries(0).key(), {"working"});
    v1::ShardResult r;
    r.set_status(v1::ShardResult::SUCCEEDED);
    for (const auto& e : ctx.spec->entries()) {
      auto* o = r.add_entries();
      o->set_key(e.key());
      o->set_file(e.file());
      o->set_verdict("pass");
    }
    return r;
  }
  void Hold(bool hold) {
    std::lock_guard lock(mu_);
    hold_ = hold;
    cv_.notify_all();
  }
  bool WaitRunning(int n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return running_ >= n; });
  }
  int Runs(const std::string& shard) {
    std::lock_guard lock(mu_);
    return runs_[shard];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  int running_ = 0;
  std::map<std::string, int> runs_;
};

class FarmTest : public ::testing::Test {
 protected:
  void SetUp() override { StartCoordinator({}); }

  void TearDown() override {
    for (auto& a : agents_) a->agent->Stop();
    for (auto& a : agents_) {
      if (a->thread.joinable()) a->thread.join();
    }
    agents_.clear();
    if (server_) server_->Shutdown();
    server_.reset();
    coord_.reset();
  }

  void StartCoordinator(coord::ServerConfig config, bool auth = true) {
    auto store = coord::SqliteStore::Open(tmp_.path() / "coordinator.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    coord::CoordinatorOptions options;
    options.lease_ttl = 3s;
    options.heartbeat_interval = 100ms;
    options.agent_dead_after = 1s;
    options.lease_wait_limit = lease_wait_limit_;
    options.backoff_base = 100ms;
    options.backoff_max = 200ms;
    coord_ = std::make_unique<coord::Coordinator>(
        options, store_.get(), SystemClock::Get(),
        [this](const v1::StartSweepRequest&) -> absl::StatusOr<coord::SweepInput> {
          {
            // A checkout that is slow to read: held while input_held_ is set.
            std::unique_lock lock(input_mu_);
            ++inputs_reading_;
            input_cv_.notify_all();
            input_cv_.wait(lock, [&] { return !input_held_; });
          }
          coord::SweepInput in;
          in.repo = "fake";
          in.ttxla_commit = std::string(40, 'a');
          in.forge_commit = std::string(40, 'b');
          in.inventory.documents.push_back(inventory::Document::Parse(
              "tests/runner/test_config/torch/test_config_training_single_device.yaml", yaml_));
          return in;
        });
    config.agent_address = "127.0.0.1:0";
    config.control_address = "127.0.0.1:0";
    config.tick = 50ms;
    if (config.tls.cert_file.empty()) config.insecure = true;
    auto authenticator =
        auth ? coord::Authenticator::FromTokens({{"agent-1", "agent", kAgentToken},
                                                 {"alice", "operator", kOperatorToken},
                                                 {"bob", "viewer", kViewerToken}})
             : coord::Authenticator::Disabled();
    ASSERT_TRUE(authenticator.ok());
    auto server =
        coord::CoordinatorServer::Start(config, coord_.get(), std::move(*authenticator), nullptr);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  struct RunningAgent {
    std::unique_ptr<agent::GrpcCoordinatorClient> client;
    std::unique_ptr<agent::Agent> agent;
    std::thread thread;
    absl::Status exit = absl::OkStatus();
  };

  RunningAgent* StartAgent(const std::string& id, FakeExecutor* executor,
                           const std::string& token = kAgentToken) {
    auto r = std::make_unique<RunningAgent>();
    agent::GrpcClientOptions co;
    co.address = "127.0.0.1:" + std::to_string(server_->agent_port());
    co.tls.insecure = true;
    co.token = token;
    auto client = agent::GrpcCoordinatorClient::Create(co);
    EXPECT_TRUE(client.ok());
    r->client = std::move(*client);
    agent::AgentOptions options;
    options.dimensions.set_agent_id(id);
    options.dimensions.set_arch("n150");
    options.data_dir = tmp_.path() / id;
    options.lease_wait = agent_lease_wait_;
    options.progress_interval = 0ms;
    options.retry = agent_retry_;
    r->agent = std::make_unique<agent::Agent>(
        options, r->client.get(), nullptr,
        std::map<std::string, agent::Executor*>{{"native", executor}});
    RunningAgent* raw = r.get();
    r->thread = std::thread([raw] { raw->exit = raw->agent->Run(); });
    agents_.push_back(std::move(r));
    return raw;
  }

  std::unique_ptr<v1::ControlService::Stub> Control(const std::string& token) {
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->control_port()),
                                       grpc::InsecureChannelCredentials());
    token_ = token;
    return v1::ControlService::NewStub(channel);
  }

  grpc::Status Call(v1::ControlService::Stub* /*stub*/, const std::string& token,
                    std::function<grpc::Status(grpc::ClientContext*)> fn) {
    grpc::ClientContext ctx;
    rpc::AddBearer(ctx, token);
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    // The server is up before any call: a first connection attempt that fails on a loaded host
    // (seen once under a parallel ctest) is retried within the deadline instead of failing it.
    ctx.set_wait_for_ready(true);
    return fn(&ctx);
  }

  v1::Sweep StartSweep(int loaders) {
    yaml_ = Yaml(loaders);
    auto stub = Control(kOperatorToken);
    v1::StartSweepRequest req;
    req.set_repo_path("/fake");
    req.set_reason("test");
    v1::Sweep sweep;
    auto st = Call(stub.get(), kOperatorToken,
                   [&](grpc::ClientContext* c) { return stub->StartSweep(c, req, &sweep); });
    EXPECT_TRUE(st.ok()) << st.error_message();
    return sweep;
  }

  // A sweep of `loaders` shards whose first shard runs, held by executor, on a new agent.
  v1::Sweep StartHeld(FakeExecutor& executor, const std::string& agent, int loaders) {
    executor.Hold(true);
    StartAgent(agent, &executor);
    auto sweep = StartSweep(loaders);
    EXPECT_TRUE(executor.WaitRunning(1, 5s));
    return sweep;
  }

  bool WaitSweep(const std::string& id, const std::string& state, std::chrono::milliseconds t) {
    return testing::WaitFor(
        [&] {
          auto sweep = coord_->GetSweep(id);
          return sweep.ok() && sweep->state() == state;
        },
        t);
  }

  // grpc.health.v1 status of a service on 127.0.0.1:port, over plaintext.
  static grpc::health::v1::HealthCheckResponse::ServingStatus Health(
      int port, const std::string& service = "") {
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                       grpc::InsecureChannelCredentials());
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    auto st = health->Check(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.status();
  }

  // The store's writes fail: health on port turns NOT_SERVING; they work again: SERVING.
  void ExpectHealthFollowsTheStore(int port) {
    using grpc::health::v1::HealthCheckResponse;
    EXPECT_EQ(Health(port), HealthCheckResponse::SERVING);
    store_->FailNextAppliesForTest(1'000'000);
    v1::StartSweepRequest req;
    req.set_repo_path("/fake");
    EXPECT_TRUE(absl::IsUnavailable(coord_->StartSweep(req, {}).status())) << "the store is down";
    EXPECT_TRUE(
        testing::WaitFor([&] { return Health(port) == HealthCheckResponse::NOT_SERVING; }, 5s));
    store_->FailNextAppliesForTest(0);
    EXPECT_TRUE(testing::WaitFor([&] { return Health(port) == HealthCheckResponse::SERVING; }, 5s));
  }

  std::mutex input_mu_;
  std::condition_variable input_cv_;
  bool input_held_ = false;
  int inputs_reading_ = 0;
  testing::TempDir tmp_;
  std::string yaml_ = Yaml(1);
  std::unique_ptr<coord::SqliteStore> store_;
  std::unique_ptr<coord::Coordinator> coord_;
  std::unique_ptr<coord::CoordinatorServer> server_;
  std::vector<std::unique_ptr<RunningAgent>> agents_;
  std::string token_;
  std::chrono::milliseconds lease_wait_limit_ = 2s;  // the coordinator's cap on a long-poll
  std::chrono::milliseconds agent_lease_wait_ = 500ms;
  rpc::RetryPolicy agent_retry_{3, 50ms, 10s};
};

TEST_F(FarmTest, AWholeSweepOverRealGrpc) {
  FakeExecutor executor;
  for (int i = 0; i < 3; ++i) StartAgent("a" + std::to_string(i), &executor);
  auto sweep = StartSweep(9);
  ASSERT_TRUE(WaitSweep(sweep.id(), "succeeded", 20s))
      << coord_->GetSweep(sweep.id())->DebugString();
  auto results = coord_->Results(sweep.id());
  EXPECT_EQ(results->size(), 9u);
  for (const auto& r : *results) EXPECT_EQ(executor.Runs(r.shard_id), 1) << r.shard_id;
  auto s = coord_->GetSweep(sweep.id());
  EXPECT_EQ(s->entries().done(), 9);
  // An agent counts a shard once its Complete is answered, which may come a moment after the
  // sweep has ended on the coordinator.
  int done = 0;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        done = 0;
        for (auto& a : agents_) done += a->agent->shards_done();
        return done == 9;
      },
      5s))
      << done;
}

TEST_F(FarmTest, StoppingAnAgentEndsItsLeaseLongPollAtOnce) {
  server_->Shutdown();
  server_.reset();
  coord_.reset();
  lease_wait_limit_ = 60s;
  agent_lease_wait_ = 60s;
  StartCoordinator({});
  FakeExecutor executor;
  RunningAgent* a = StartAgent("idle", &executor);
  // No sweep: once registered, the agent sits in a 60 s Lease long-poll.
  ASSERT_TRUE(testing::WaitFor([&] { return coord_->ListAgents().size() == 1; }, 10s));
  std::this_thread::sleep_for(300ms);
  const auto stop = std::chrono::steady_clock::now();
  a->agent->Stop();
  a->thread.join();
  const auto took = std::chrono::steady_clock::now() - stop;
  EXPECT_LT(took, 10s) << "the agent waited out its long-poll";
  EXPECT_TRUE(a->exit.ok()) << a->exit;
}

TEST_F(FarmTest, AnAgentThatDiesMidShardLosesItToAnother) {
  FakeExecutor stuck;
  stuck.Hold(true);
  RunningAgent* dying = StartAgent("dying", &stuck);
  auto sweep = StartSweep(1);
  ASSERT_TRUE(stuck.WaitRunning(1, 5s));
  // The agent process "dies": no more heartbeats, no result.
  dying->agent->Stop();
  dying->thread.join();
  FakeExecutor healthy;
  StartAgent("healthy", &healthy);
  ASSERT_TRUE(WaitSweep(sweep.id(), "succeeded", 20s));
  auto shards = coord_->ListShards({});
  ASSERT_EQ(shards->size(), 1u);
  EXPECT_EQ((*shards)[0].attempts(), 1) << "the lost lease was the farm's fault, not the work's";
  auto attempts = store_->Attempts((*shards)[0].id());
  ASSERT_EQ(attempts->size(), 2u);
  EXPECT_EQ((*attempts)[0].agent_id, "dying");
  EXPECT_EQ((*attempts)[0].outcome, "expired");
  EXPECT_EQ((*attempts)[1].agent_id, "healthy");
  EXPECT_EQ((*attempts)[1].outcome, "succeeded");
}

// A result finished while the coordinator cannot commit: the agent's delivery backs off past
// the lease's life, but its heartbeats keep the lease alive until the result is acknowledged,
// so the result is accepted once the store works again and nothing is redone.
TEST_F(FarmTest, AResultFinishedDuringAnOutageIsAcceptedAfterIt) {
  agent_retry_ = {0, 200ms, 6s};  // until stopped, as agents run
  FakeExecutor executor;
  auto sweep = StartHeld(executor, "a", 1);
  store_->FailNextAppliesForTest(1'000'000);  // every write fails from now on
  executor.Hold(false);
  std::this_thread::sleep_for(5s);  // past the lease's 3 s life without a delivered result
  store_->FailNextAppliesForTest(0);
  ASSERT_TRUE(WaitSweep(sweep.id(), "succeeded", 20s))
      << coord_->GetSweep(sweep.id())->DebugString();
  EXPECT_EQ(executor.Runs(sweep.id() + "-s001"), 1) << "the finished result was thrown away";
  auto attempts = store_->Attempts(sweep.id() + "-s001");
  ASSERT_TRUE(attempts.ok());
  ASSERT_EQ(attempts->size(), 1u);
  EXPECT_EQ((*attempts)[0].outcome, "succeeded");
}

// An agent restarted with a result it could not deliver: it names the lease when it registers,
// so the lease is not fenced and the re-sent result is accepted.
TEST_F(FarmTest, ASpooledResultIsAcceptedAfterTheAgentRestarts) {
  agent_retry_ = {0, 200ms, 1s};
  FakeExecutor executor;
  executor.Hold(true);
  RunningAgent* first = StartAgent("a", &executor);
  auto sweep = StartSweep(1);
  ASSERT_TRUE(executor.WaitRunning(1, 5s));
  store_->FailNextAppliesForTest(1'000'000);
  executor.Hold(false);
  const auto spool = tmp_.path() / "a" / "spool";
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        std::error_code ec;
        return std::filesystem::is_directory(spool, ec) && !std::filesystem::is_empty(spool, ec);
      },
      5s));
  first->agent->Stop();  // the agent process goes away with the result on disk
  first->thread.join();
  store_->FailNextAppliesForTest(0);
  StartAgent("a", &executor);  // same id and data dir: a restart
  ASSERT_TRUE(WaitSweep(sweep.id(), "succeeded", 20s))
      << coord_->GetSweep(sweep.id())->DebugString();
  EXPECT_EQ(executor.Runs(sweep.id() + "-s001"), 1) << "the shard was redone";
  EXPECT_TRUE(testing::WaitFor([&] { return std::filesystem::is_empty(spool); }, 5s));
}

// The database file deleted under a running coordinator is noticed without any write and put
// back from the open connection; the sweep goes on and ends with every result stored.
TEST_F(FarmTest, ADeletedDatabaseIsNoticedAndWrittenBack) {
  FakeExecutor executor;
  auto sweep = StartHeld(executor, "a", 2);
  const auto db = tmp_.path() / "coordinator.db";
  ASSERT_TRUE(std::filesystem::remove(db));
  // The file is renamed into place a moment before the store counts the restore.
  ASSERT_TRUE(testing::WaitFor(
      [&] { return std::filesystem::exists(db) && store_->file_restores() == 1u; }, 5s))
      << "nothing noticed the deleted database";
  executor.Hold(false);
  ASSERT_TRUE(WaitSweep(sweep.id(), "succeeded", 20s));
  server_->Shutdown();
  server_.reset();
  coord_.reset();
  store_.reset();
  auto reopened = coord::SqliteStore::Open(db);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto snap = (*reopened)->Load();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->results.size(), 2u);
  ASSERT_EQ(snap->sweeps.size(), 1u);
  EXPECT_EQ(snap->sweeps[0].state, coord::SweepState::kSucceeded);
}

TEST_F(FarmTest, TwoAgentsRaceForOneShard) {
  FakeExecutor executor;
  executor.Hold(true);
  StartAgent("x", &executor);
  StartAgent("y", &executor);
  auto sweep = StartSweep(1);
  ASSERT_TRUE(executor.WaitRunning(1, 5s));
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(executor.WaitRunning(2, 10ms)) << "only one agent may hold the shard";
  executor.Hold(false);
  ASSERT_TRUE(WaitSweep(sweep.id(), "succeeded", 10s));
  EXPECT_EQ(coord_->Results(sweep.id())->size(), 1u);
  EXPECT_EQ(executor.Runs(sweep.id() + "-s001"), 1);
}

TEST_F(FarmTest, OperatorRequeueRevokesTheRunningShard) {
  FakeExecutor executor;
  executor.Hold(true);
  StartAgent("a", &executor);
  auto sweep = StartSweep(1);
  ASSERT_TRUE(executor.WaitRunning(1, 5s));
  auto stub = Control(kOperatorToken);
  v1::ShardActionRequest req;
  req.set_shard_id(sweep.id() + "-s001");
  req.set_reason("agent looks wedged");
  v1::Shard shard;
  auto st = Call(stub.get(), kOperatorToken,
                 [&](grpc::ClientContext* c) { return stub->RequeueShard(c, req, &shard); });
  ASSERT_TRUE(st.ok()) << st.error_message();
  // The agent hears about it on its next heartbeat and drops the attempt; the shard runs again.
  ASSERT_TRUE(testing::WaitFor([&] { return executor.Runs(req.shard_id()) >= 2; }, 10s));
  executor.Hold(false);
  ASSERT_TRUE(WaitSweep(sweep.id(), "succeeded", 10s));
  auto audit = store_->AuditLog(10);
  ASSERT_TRUE(audit.ok());
  bool found = false;
  for (const auto& a : *audit) {
    found |= a.action == "requeue_shard" && a.who == "alice" && a.reason == "agent looks wedged";
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(coord_->Results(sweep.id())->size(), 1u);
}

TEST_F(FarmTest, RolesAndTokens) {
  auto sweep = StartSweep(1);
  auto stub = Control(kViewerToken);
  v1::Sweep out;
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(sweep.id());
  cancel.set_reason("x");
  // A viewer may read but not cancel.
  v1::GetSweepRequest get;
  get.set_sweep_id(sweep.id());
  EXPECT_TRUE(
      Call(stub.get(), kViewerToken, [&](auto* c) { return stub->GetSweep(c, get, &out); }).ok());
  EXPECT_EQ(
      Call(stub.get(), kViewerToken, [&](auto* c) { return stub->CancelSweep(c, cancel, &out); })
          .error_code(),
      grpc::StatusCode::PERMISSION_DENIED);
  // An agent may not start sweeps; a bad or missing token is refused.
  v1::StartSweepRequest start;
  start.set_repo_path("/fake");
  EXPECT_EQ(Call(stub.get(), kAgentToken, [&](auto* c) { return stub->StartSweep(c, start, &out); })
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(
      Call(stub.get(), "not-a-token-at-all", [&](auto* c) { return stub->GetSweep(c, get, &out); })
          .error_code(),
      grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(
      Call(stub.get(), "", [&](auto* c) { return stub->GetSweep(c, get, &out); }).error_code(),
      grpc::StatusCode::UNAUTHENTICATED);

  // Operators and viewers may not act as agents; an agent can't complete a shard it doesn't hold.
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->agent_port()),
                                     grpc::InsecureChannelCredentials());
  auto agent_stub = v1::AgentService::NewStub(channel);
  auto agent_call = [&](const std::string& token, auto fn) {
    grpc::ClientContext ctx;
    rpc::AddBearer(ctx, token);
    return fn(&ctx);
  };
  v1::RegisterRequest reg;
  reg.mutable_dimensions()->set_agent_id("holder");
  reg.mutable_dimensions()->set_arch("n150");
  v1::RegisterResponse holder;
  EXPECT_EQ(
      agent_call(kOperatorToken, [&](auto* c) { return agent_stub->Register(c, reg, &holder); })
          .error_code(),
      grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(
      agent_call(kAgentToken, [&](auto* c) { return agent_stub->Register(c, reg, &holder); }).ok());
  reg.mutable_dimensions()->set_agent_id("thief");
  v1::RegisterResponse thief;
  ASSERT_TRUE(
      agent_call(kAgentToken, [&](auto* c) { return agent_stub->Register(c, reg, &thief); }).ok());
  v1::LeaseRequest lreq;
  lreq.set_agent_id("holder");
  lreq.set_session_id(holder.session_id());
  v1::LeaseResponse lease;
  ASSERT_TRUE(
      agent_call(kAgentToken, [&](auto* c) { return agent_stub->Lease(c, lreq, &lease); }).ok());
  ASSERT_TRUE(lease.granted());
  v1::CompleteRequest creq;
  creq.set_agent_id("thief");
  creq.set_session_id(thief.session_id());
  creq.set_lease_id(lease.lease_id());
  creq.set_fencing_token(lease.fencing_token());
  creq.mutable_result()->set_status(v1::ShardResult::SUCCEEDED);
  v1::CompleteResponse cresp;
  EXPECT_EQ(agent_call(kAgentToken, [&](auto* c) { return agent_stub->Complete(c, creq, &cresp); })
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

// Sweeps whose checkouts are slow to read, more of them than gRPC has threads to answer
// connections with: a new client still connects and is answered, and every sweep starts once
// its checkout has been read.
TEST_F(FarmTest, SlowHandlersLeaveTheServerAnsweringNewConnections) {
  yaml_ = Yaml(1);
  {
    std::lock_guard lock(input_mu_);
    input_held_ = true;
  }
  constexpr int kSlow = 6;
  std::vector<std::thread> callers;
  std::atomic<int> started{0};
  for (int i = 0; i < kSlow; ++i) {
    callers.emplace_back([&, i] {
      auto stub = Control(kOperatorToken);
      v1::StartSweepRequest req;
      req.set_repo_path("/fake");
      req.set_reason(util::StrCat("slow ", i));
      v1::Sweep sweep;
      grpc::ClientContext ctx;
      rpc::AddBearer(ctx, kOperatorToken);
      ctx.set_deadline(std::chrono::system_clock::now() + 60s);
      ctx.set_wait_for_ready(true);
      if (stub->StartSweep(&ctx, req, &sweep).ok()) ++started;
    });
  }
  {
    // One reads its checkout; the rest wait for it (one sweep starts at a time).
    std::unique_lock lock(input_mu_);
    ASSERT_TRUE(input_cv_.wait_for(lock, 20s, [&] { return inputs_reading_ >= 1; }));
  }
  std::this_thread::sleep_for(500ms);  // the others reach the coordinator meanwhile
  // A new connection, fail-fast: answered while every slow call is still held.
  auto fresh = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->control_port()),
                                   grpc::InsecureChannelCredentials());
  auto stub = v1::ControlService::NewStub(fresh);
  grpc::ClientContext ctx;
  rpc::AddBearer(ctx, kViewerToken);
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  v1::ListAgentsResponse agents;
  const grpc::Status st = stub->ListAgents(&ctx, v1::ListAgentsRequest(), &agents);
  EXPECT_TRUE(st.ok()) << st.error_code() << " " << st.error_message();
  EXPECT_EQ(started.load(), 0) << "the slow calls were still held";
  {
    std::lock_guard lock(input_mu_);
    input_held_ = false;
  }
  input_cv_.notify_all();
  for (auto& t : callers) t.join();
  EXPECT_EQ(started.load(), kSlow);
  EXPECT_EQ(coord_->ListSweeps().size(), static_cast<std::size_t>(kSlow));
}

TEST_F(FarmTest, HealthReflectsTheStore) {
  const int port = server_->control_port();
  EXPECT_EQ(Health(port, "triage.v1.ControlService"),
            grpc::health::v1::HealthCheckResponse::SERVING);
  ExpectHealthFollowsTheStore(port);
}

// TLS and mutual TLS with certificates made by openssl for this test.
class TlsFarmTest : public FarmTest {
 protected:
  void SetUp() override {
    dir_ = tmp_.path() / "pki";
    std::filesystem::create_directories(dir_);
    auto ssl = [&](std::vector<std::string> args) {
      args.insert(args.begin(), "openssl");
      std::string out;
      ASSERT_EQ(testing::RunCommand(args, dir_, &out), 0) << out;
    };
    ssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
         "-keyout", "ca.key", "-out", "ca.pem"});
    testing::WriteFileOrDie(dir_ / "san.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
    for (const std::string name : {"server", "client"}) {
      ssl({"req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + name, "-keyout", name + ".key",
           "-out", name + ".csr"});
      ssl({"x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
           "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", name + ".pem"});
    }
    coord::ServerConfig config;
    config.tls = {(dir_ / "server.pem").string(), (dir_ / "server.key").string(),
                  (dir_ / "ca.pem").string()};
    config.health_address = "127.0.0.1:0";
    StartCoordinator(config);
  }

  grpc::StatusCode TryList(const rpc::TlsClientConfig& tls) {
    auto channel = rpc::Connect("localhost:" + std::to_string(server_->control_port()), tls);
    EXPECT_TRUE(channel.ok());
    auto stub = v1::ControlService::NewStub(*channel);
    grpc::ClientContext ctx;
    rpc::AddBearer(ctx, kViewerToken);
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::ListSweepsResponse resp;
    return stub->ListSweeps(&ctx, {}, &resp).error_code();
  }

  std::filesystem::path dir_;
};

TEST_F(TlsFarmTest, MutualTlsNeedsAClientCertificate) {
  const std::string ca = (dir_ / "ca.pem").string();
  EXPECT_EQ(TryList({ca, (dir_ / "client.pem").string(), (dir_ / "client.key").string(), false}),
            grpc::StatusCode::OK);
  EXPECT_EQ(TryList({ca, "", "", false}), grpc::StatusCode::UNAVAILABLE) << "no client certificate";
  EXPECT_EQ(TryList({"", "", "", true}), grpc::StatusCode::UNAVAILABLE) << "plaintext";
  EXPECT_FALSE(rpc::ServerCredentials({}, /*insecure=*/false).ok())
      << "no certificate and not insecure: refuse to start";
}

// With TLS (and mutual TLS) on, probes that speak only plaintext use the health listener: it
// has the health service and nothing else, and it follows the store's health.
TEST_F(TlsFarmTest, PlaintextHealthListenerFollowsTheStore) {
  ASSERT_NE(server_->health_port(), 0);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->health_port()),
                                     grpc::InsecureChannelCredentials());
  auto control = v1::ControlService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::ListSweepsResponse resp;
  EXPECT_EQ(control->ListSweeps(&ctx, {}, &resp).error_code(), grpc::StatusCode::UNIMPLEMENTED)
      << "the health listener serves nothing else";
  ExpectHealthFollowsTheStore(server_->health_port());
}

}  // namespace
}  // namespace triage
