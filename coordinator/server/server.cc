#include "coordinator/server/server.h"

#include <deque>
#include <mutex>

#include "common/util/log.h"
#include "common/util/net.h"
#include "common/util/strings.h"
#include "coordinator/server/guard.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "triage/v1/agent.grpc.pb.h"
#include "triage/v1/control.grpc.pb.h"

namespace triage::coord {
namespace {

using Clock = std::chrono::steady_clock;

// Sweeps started or checked and reports or patches built at once; more wait their turn.
constexpr std::size_t kBlockingHandlerThreads = 4;

// Lease is a long-poll: the reactor finishes when the coordinator calls back. The callback may
// run before Lease() returns or on another thread, so everything it touches lives in a shared
// Call, and the reactor is not used after Finish.
class LeaseReactor : public grpc::ServerUnaryReactor {
 public:
  struct Call {
    std::mutex mu;
    LeaseReactor* reactor = nullptr;
    Coordinator* coordinator = nullptr;
    const Guard* guard = nullptr;
    v1::LeaseResponse* response = nullptr;
    Clock::time_point start;
    std::int64_t wait_id = 0;
    bool finished = false;
    bool cancel_pending = false;
  };

  LeaseReactor(Coordinator* coordinator, const Guard* guard, v1::LeaseResponse* response)
      : call_(std::make_shared<Call>()) {
    call_->reactor = this;
    call_->coordinator = coordinator;
    call_->guard = guard;
    call_->response = response;
    call_->start = Clock::now();
  }

  // Static: once Lease() has called back, this reactor may already be gone.
  static void Begin(std::shared_ptr<Call> call, const v1::LeaseRequest& request) {
    std::int64_t id = call->coordinator->Lease(
        request, [call](absl::StatusOr<v1::LeaseResponse> r) { Done(call, std::move(r)); });
    bool cancel;
    {
      std::lock_guard lock(call->mu);
      call->wait_id = id;
      cancel = call->cancel_pending && !call->finished;
    }
    if (cancel && id != 0) call->coordinator->CancelLease(id);
  }

  std::shared_ptr<Call> call() const { return call_; }

  void OnCancel() override {
    std::int64_t id;
    {
      std::lock_guard lock(call_->mu);
      call_->cancel_pending = true;
      id = call_->wait_id;
    }
    if (id != 0) call_->coordinator->CancelLease(id);
  }

  void OnDone() override { delete this; }

  static void Done(const std::shared_ptr<Call>& call, absl::StatusOr<v1::LeaseResponse> r) {
    LeaseReactor* reactor;
    {
      std::lock_guard lock(call->mu);
      if (call->finished) return;
      call->finished = true;
      reactor = call->reactor;
    }
    absl::Status st = r.status();
    if (r.ok()) *call->response = std::move(*r);
    call->guard->Observe("Lease", st, call->start);
    reactor->Finish(rpc::ToGrpc(st));
  }

 private:
  std::shared_ptr<Call> call_;
};

class AgentServiceImpl final : public v1::AgentService::CallbackService {
 public:
  AgentServiceImpl(Coordinator* c, const Guard* g) : c_(c), g_(g) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterRequest* req,
                                     v1::RegisterResponse* resp) override {
    return g_->Unary(ctx, "Register", Permission::kAgent, [&](const Caller&) {
      auto r = c_->Register(*req);
      if (r.ok()) *resp = std::move(*r);
      return r.status();
    });
  }

  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const v1::HeartbeatRequest* req,
                                      v1::HeartbeatResponse* resp) override {
    return g_->Unary(ctx, "Heartbeat", Permission::kAgent, [&](const Caller&) {
      auto r = c_->Heartbeat(*req);
      if (r.ok()) *resp = std::move(*r);
      return r.status();
    });
  }

  grpc::ServerUnaryReactor* Lease(grpc::CallbackServerContext* ctx, const v1::LeaseRequest* req,
                                  v1::LeaseResponse* resp) override {
    auto* reactor = new LeaseReactor(c_, g_, resp);
    auto call = reactor->call();
    auto caller = g_->Check(ctx, Permission::kAgent, "Lease");
    if (!caller.ok()) {
      LeaseReactor::Done(call, caller.status());
    } else {
      LeaseReactor::Begin(call, *req);
    }
    return reactor;
  }

  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext* ctx,
                                           const v1::ProgressRequest* req,
                                           v1::ProgressResponse* resp) override {
    return g_->Unary(ctx, "ReportProgress", Permission::kAgent, [&](const Caller&) {
      auto r = c_->ReportProgress(*req);
      if (r.ok()) *resp = std::move(*r);
      return r.status();
    });
  }

  grpc::ServerUnaryReactor* Complete(grpc::CallbackServerContext* ctx,
                                     const v1::CompleteRequest* req,
                                     v1::CompleteResponse* resp) override {
    // Answered when the result is durable, from whichever thread committed it: the handler
    // thread does not wait for the commit.
    auto* reactor = ctx->DefaultReactor();
    const auto start = Clock::now();
    auto caller = g_->Check(ctx, Permission::kAgent, "Complete");
    if (!caller.ok()) {
      g_->Observe("Complete", caller.status(), start);
      reactor->Finish(rpc::ToGrpc(caller.status()));
      return reactor;
    }
    c_->Complete(*req, [reactor, resp, g = g_, start](absl::StatusOr<v1::CompleteResponse> r) {
      if (r.ok()) *resp = std::move(*r);
      g->Observe("Complete", r.status(), start);
      reactor->Finish(rpc::ToGrpc(r.status()));
    });
    return reactor;
  }

 private:
  Coordinator* c_;
  const Guard* g_;
};

// WatchSweep: events are queued and written one at a time; the stream ends with the sweep.
class WatchReactor : public grpc::ServerWriteReactor<v1::SweepEvent> {
 public:
  struct Shared {
    std::mutex mu;
    WatchReactor* reactor = nullptr;  // null once the RPC is done
  };

  explicit WatchReactor(Coordinator* c) : c_(c), shared_(std::make_shared<Shared>()) {
    shared_->reactor = this;
  }

  void Begin(const std::string& sweep_id) {
    std::shared_ptr<Shared> shared = shared_;
    auto id = c_->Watch(sweep_id, [shared](const v1::SweepEvent& ev) {
      std::lock_guard lock(shared->mu);
      if (shared->reactor != nullptr) shared->reactor->Push(ev);
    });
    if (!id.ok()) {
      Finish(rpc::ToGrpc(id.status()));
      return;
    }
    std::lock_guard lock(mu_);
    watch_id_ = *id;
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    WriteNextLocked();
  }

  void OnCancel() override {
    std::lock_guard lock(mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override {
    int id;
    {
      std::lock_guard lock(mu_);
      id = watch_id_;
    }
    if (id != 0) c_->Unwatch(id);
    {
      std::lock_guard lock(shared_->mu);
      shared_->reactor = nullptr;
    }
    delete this;
  }

 private:
  static bool Final(const v1::SweepEvent& ev) {
    const auto& s = ev.sweep().state();
    return s == "succeeded" || s == "failed" || s == "cancelled";
  }

  void Push(const v1::SweepEvent& ev) {
    std::lock_guard lock(mu_);
    if (finished_) return;
    queue_.push_back(ev);
    WriteNextLocked();
  }

  void WriteNextLocked() {
    if (writing_ || finished_) return;
    if (queue_.empty()) {
      if (end_after_write_) FinishLocked(grpc::Status::OK);
      return;
    }
    current_ = std::move(queue_.front());
    queue_.pop_front();
    end_after_write_ = Final(current_);
    writing_ = true;
    StartWrite(&current_);
  }

  void FinishLocked(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  Coordinator* c_;
  std::shared_ptr<Shared> shared_;
  std::mutex mu_;
  std::deque<v1::SweepEvent> queue_;
  v1::SweepEvent current_;
  bool writing_ = false;
  bool finished_ = false;
  bool end_after_write_ = false;
  int watch_id_ = 0;
};

// UploadNightly: one chunk read at a time and appended (the stream's flow control keeps what
// is in flight to a chunk); answered once the client has sent everything. A refusal ends the
// stream at once (the client's next write fails and its Finish reads why) and drops the upload,
// as does a client that goes away.
class UploadReactor : public grpc::ServerReadReactor<v1::NightlyChunk> {
 public:
  UploadReactor(NightlyUploads* uploads, const Guard* guard, v1::NightlyUpload* response)
      : uploads_(uploads), guard_(guard), response_(response), start_(Clock::now()) {}

  void Begin(grpc::CallbackServerContext* ctx) {
    auto caller = guard_->Check(ctx, Permission::kOperate, "UploadNightly");
    if (!caller.ok()) {
      End(caller.status());
      return;
    }
    auto id = uploads_->Begin(caller->name);
    if (!id.ok()) {
      End(id.status());
      return;
    }
    id_ = *id;
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client half-closed (or went away: OnCancel drops what was kept).
      auto r = uploads_->Finish(id_);
      if (r.ok()) *response_ = std::move(*r);
      End(r.status());
      return;
    }
    if (auto st = uploads_->Add(id_, chunk_); !st.ok()) {
      End(st);
      return;
    }
    chunk_.Clear();
    StartRead(&chunk_);
  }

  void OnCancel() override { cancelled_.store(true); }

  void OnDone() override {
    if (cancelled_.load() && !id_.empty()) uploads_->Drop(id_);
    delete this;
  }

 private:
  void End(const absl::Status& st) {
    guard_->Observe("UploadNightly", st, start_);
    Finish(rpc::ToGrpc(st));
  }

  NightlyUploads* uploads_;
  const Guard* guard_;
  v1::NightlyUpload* response_;
  const Clock::time_point start_;
  std::string id_;
  v1::NightlyChunk chunk_;
  std::atomic<bool> cancelled_{false};
};

class ControlServiceImpl final : public v1::ControlService::CallbackService {
 public:
  ControlServiceImpl(Coordinator* c, const Guard* g, WorkerPool* pool, OutputProviders outputs)
      : c_(c), g_(g), pool_(pool), outputs_(std::move(outputs)) {}

  grpc::ServerUnaryReactor* StartSweep(grpc::CallbackServerContext* ctx,
                                       const v1::StartSweepRequest* req, v1::Sweep* resp) override {
    return g_->Offloaded(*pool_, ctx, "StartSweep", Permission::kOperate,
                         [this, req, resp](const Caller& caller) {
                           auto r = c_->StartSweep(*req, caller);
                           if (r.ok()) *resp = std::move(*r);
                           return r.status();
                         });
  }

  grpc::ServerUnaryReactor* CheckSweep(grpc::CallbackServerContext* ctx,
                                       const v1::CheckSweepRequest* req, v1::Sweep* resp) override {
    return g_->Offloaded(*pool_, ctx, "CheckSweep", Permission::kOperate,
                         [this, req, resp](const Caller& caller) {
                           auto r = c_->CheckSweep(*req, caller);
                           if (r.ok()) *resp = std::move(*r);
                           return r.status();
                         });
  }

  grpc::ServerReadReactor<v1::NightlyChunk>* UploadNightly(grpc::CallbackServerContext* ctx,
                                                           v1::NightlyUpload* resp) override {
    auto* reactor = new UploadReactor(&c_->uploads(), g_, resp);
    reactor->Begin(ctx);
    return reactor;
  }

  grpc::ServerUnaryReactor* GetSweep(grpc::CallbackServerContext* ctx,
                                     const v1::GetSweepRequest* req, v1::Sweep* resp) override {
    return g_->Unary(ctx, "GetSweep", Permission::kRead, [&](const Caller&) {
      auto r = c_->GetSweep(req->sweep_id());
      if (r.ok()) *resp = std::move(*r);
      return r.status();
    });
  }

  grpc::ServerUnaryReactor* ListSweeps(grpc::CallbackServerContext* ctx,
                                       const v1::ListSweepsRequest*,
                                       v1::ListSweepsResponse* resp) override {
    return g_->Unary(ctx, "ListSweeps", Permission::kRead, [&](const Caller&) {
      for (auto& s : c_->ListSweeps()) *resp->add_sweeps() = std::move(s);
      return absl::OkStatus();
    });
  }

  grpc::ServerWriteReactor<v1::SweepEvent>* WatchSweep(grpc::CallbackServerContext* ctx,
                                                       const v1::WatchSweepRequest* req) override {
    auto* reactor = new WatchReactor(c_);
    auto caller = g_->Check(ctx, Permission::kRead, "WatchSweep");
    if (!caller.ok()) {
      reactor->Finish(rpc::ToGrpc(caller.status()));
    } else {
      reactor->Begin(req->sweep_id());
    }
    return reactor;
  }

  grpc::ServerUnaryReactor* ListShards(grpc::CallbackServerContext* ctx,
                                       const v1::ListShardsRequest* req,
                                       v1::ListShardsResponse* resp) override {
    return g_->Unary(ctx, "ListShards", Permission::kRead, [&](const Caller&) {
      auto r = c_->ListShards(*req);
      if (!r.ok()) return r.status();
      for (auto& s : *r) *resp->add_shards() = std::move(s);
      return absl::OkStatus();
    });
  }

  grpc::ServerUnaryReactor* RequeueShard(grpc::CallbackServerContext* ctx,
                                         const v1::ShardActionRequest* req,
                                         v1::Shard* resp) override {
    return g_->Unary(ctx, "RequeueShard", Permission::kOperate, [&](const Caller& caller) {
      auto r = c_->RequeueShard(req->shard_id(), req->reason(), caller);
      if (r.ok()) *resp = std::move(*r);
      return r.status();
    });
  }

  grpc::ServerUnaryReactor* CancelShard(grpc::CallbackServerContext* ctx,
                                        const v1::ShardActionRequest* req,
                                        v1::Shard* resp) override {
    return g_->Unary(ctx, "CancelShard", Permission::kOperate, [&](const Caller& caller) {
      auto r = c_->CancelShard(req->shard_id(), req->reason(), caller);
      if (r.ok()) *resp = std::move(*r);
      return r.status();
    });
  }

  grpc::ServerUnaryReactor* CancelSweep(grpc::CallbackServerContext* ctx,
                                        const v1::CancelSweepRequest* req,
                                        v1::Sweep* resp) override {
    return g_->Unary(ctx, "CancelSweep", Permission::kOperate, [&](const Caller& caller) {
      auto r = c_->CancelSweep(req->sweep_id(), req->reason(), caller);
      if (r.ok()) *resp = std::move(*r);
      return r.status();
    });
  }

  grpc::ServerUnaryReactor* ResumeSweep(grpc::CallbackServerContext* ctx,
                                        const v1::ResumeSweepRequest* req,
                                        v1::Sweep* resp) override {
    return g_->Unary(ctx, "ResumeSweep", Permission::kOperate, [&](const Caller& caller) {
      auto r = c_->ResumeSweep(req->sweep_id(), req->max_failed_shards(), req->reason(), caller);
      if (r.ok()) *resp = std::move(*r);
      return r.status();
    });
  }

  grpc::ServerUnaryReactor* ListAgents(grpc::CallbackServerContext* ctx,
                                       const v1::ListAgentsRequest*,
                                       v1::ListAgentsResponse* resp) override {
    return g_->Unary(ctx, "ListAgents", Permission::kRead, [&](const Caller&) {
      for (auto& a : c_->ListAgents()) *resp->add_agents() = std::move(a);
      return absl::OkStatus();
    });
  }

  grpc::ServerUnaryReactor* DrainAgent(grpc::CallbackServerContext* ctx,
                                       const v1::AgentActionRequest* req,
                                       v1::Agent* resp) override {
    return g_->Unary(ctx, "DrainAgent", Permission::kOperate, [&](const Caller& caller) {
      auto r = c_->SetDraining(req->agent_id(), true, req->reason(), caller);
      if (r.ok()) *resp = std::move(*r);
      return r.status();
    });
  }

  grpc::ServerUnaryReactor* UndrainAgent(grpc::CallbackServerContext* ctx,
                                         const v1::AgentActionRequest* req,
                                         v1::Agent* resp) override {
    return g_->Unary(ctx, "UndrainAgent", Permission::kOperate, [&](const Caller& caller) {
      auto r = c_->SetDraining(req->agent_id(), false, req->reason(), caller);
      if (r.ok()) *resp = std::move(*r);
      return r.status();
    });
  }

  grpc::ServerUnaryReactor* GetPatch(grpc::CallbackServerContext* ctx,
                                     const v1::GetPatchRequest* req, v1::Patch* resp) override {
    return Output(ctx, "GetPatch", outputs_.patch, "this coordinator builds no patches", req, resp);
  }

  grpc::ServerUnaryReactor* GetReport(grpc::CallbackServerContext* ctx,
                                      const v1::GetReportRequest* req, v1::Report* resp) override {
    return Output(ctx, "GetReport", outputs_.report, "this coordinator builds no reports", req,
                  resp);
  }

  grpc::ServerUnaryReactor* ListAudit(grpc::CallbackServerContext* ctx,
                                      const v1::ListAuditRequest* req,
                                      v1::ListAuditResponse* resp) override {
    return g_->Unary(ctx, "ListAudit", Permission::kRead, [&](const Caller&) {
      auto r = c_->ListAudit(*req);
      if (!r.ok()) return r.status();
      for (auto& e : *r) *resp->add_entries() = std::move(e);
      return absl::OkStatus();
    });
  }

 private:
  // A sweep's patch or report, built by provider (one of outputs_) on the pool: it merges.
  template <typename Req, typename Resp, typename Provider>
  grpc::ServerUnaryReactor* Output(grpc::CallbackServerContext* ctx, const char* method,
                                   const Provider& provider, const char* none, const Req* req,
                                   Resp* resp) {
    return g_->Offloaded(*pool_, ctx, method, Permission::kRead,
                         [&provider, none, req, resp](const Caller&) -> absl::Status {
                           if (!provider) return absl::UnimplementedError(none);
                           auto r = provider(req->sweep_id(), {req->issue_links().begin(),
                                                               req->issue_links().end()});
                           if (r.ok()) *resp = std::move(*r);
                           return r.status();
                         });
  }

  Coordinator* c_;
  const Guard* g_;
  WorkerPool* pool_;
  OutputProviders outputs_;
};

}  // namespace

struct CoordinatorServer::Services {
  Authenticator auth;
  Guard guard;
  // Declared before the services and destroyed after them; the servers, which wait for every
  // call to finish when they shut down, are gone before any of it.
  WorkerPool pool{kBlockingHandlerThreads};
  AgentServiceImpl agent;
  ControlServiceImpl control;
  Services(Coordinator* c, Authenticator a, PrometheusMetrics* m, OutputProviders outputs)
      : auth(std::move(a)),
        guard(&auth, m),
        agent(c, &guard),
        control(c, &guard, &pool, std::move(outputs)) {}
};

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const ServerConfig& config, Coordinator* coordinator, Authenticator auth,
    PrometheusMetrics* metrics, OutputProviders outputs) {
  auto creds = rpc::ServerCredentials(config.tls, config.insecure);
  if (!creds.ok()) return creds.status();
  if (config.insecure && config.tls.cert_file.empty()) {
    spdlog::warn("insecure mode: serving plaintext gRPC on {} and {}", config.agent_address,
                 config.control_address);
  }
  if (!auth.enabled()) spdlog::warn("insecure mode: no bearer tokens, every caller is trusted");

  // Concurrent RPCs from here on: commits go to the committer thread (group commit).
  coordinator->StartCommitter();
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  server->coordinator_ = coordinator;
  server->services_ =
      std::make_unique<Services>(coordinator, std::move(auth), metrics, std::move(outputs));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  // A listener with the default health service (EnableDefaultHealthCheckService adds it to every
  // server) and, unless null, one of ours. One owner per port: gRPC would otherwise set
  // SO_REUSEPORT, and a second coordinator started on a taken port would share it silently. On an
  // error return the server's destructor shuts down the listeners already started.
  auto build =
      [&](const std::string& address, const std::shared_ptr<grpc::ServerCredentials>& credentials,
          grpc::Service* service, int* port) -> absl::StatusOr<std::unique_ptr<grpc::Server>> {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, credentials, port);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    if (service != nullptr) builder.RegisterService(service);
    builder.SetMaxReceiveMessageSize(64 << 20);
    builder.SetMaxSendMessageSize(64 << 20);
    std::unique_ptr<grpc::Server> s;
    {
      // A failed bind is said in one line below, not also as gRPC's error dump.
      rpc::QuietGrpcLogs quiet;
      s = builder.BuildAndStart();
    }
    if (s == nullptr || *port == 0) {
      const std::string problem = util::BindProblem(address);
      return absl::UnavailableError(util::StrCat("cannot listen on ", address, ": ",
                                                 problem.empty() ? "see the log above" : problem));
    }
    return s;
  };
  auto agent = build(config.agent_address, *creds, &server->services_->agent, &server->agent_port_);
  if (!agent.ok()) return agent.status();
  server->agent_server_ = std::move(*agent);
  auto control =
      build(config.control_address, *creds, &server->services_->control, &server->control_port_);
  if (!control.ok()) return control.status();
  server->control_server_ = std::move(*control);
  if (!config.health_address.empty()) {
    // Plaintext, and only the health service: it reveals nothing but SERVING / NOT_SERVING.
    auto health = build(config.health_address, grpc::InsecureServerCredentials(), nullptr,
                        &server->health_port_);
    if (!health.ok()) return health.status();
    server->health_server_ = std::move(*health);
  }
  server->SetServing(coordinator->healthy());
  coordinator->StartGrace();
  server->ticker_ = std::thread([s = server.get(), period = config.tick] { s->TickLoop(period); });
  return server;
}

void CoordinatorServer::SetServing(bool serving) {
  for (auto* s : {agent_server_.get(), control_server_.get(), health_server_.get()}) {
    if (s == nullptr || s->GetHealthCheckService() == nullptr) continue;
    s->GetHealthCheckService()->SetServingStatus(serving);
  }
  if (agent_server_ && agent_server_->GetHealthCheckService() != nullptr) {
    agent_server_->GetHealthCheckService()->SetServingStatus("triage.v1.AgentService", serving);
  }
  if (control_server_ && control_server_->GetHealthCheckService() != nullptr) {
    control_server_->GetHealthCheckService()->SetServingStatus("triage.v1.ControlService", serving);
  }
}

void CoordinatorServer::TickLoop(std::chrono::milliseconds period) {
  bool serving = true;
  while (!stopping_.load()) {
    coordinator_->Tick();
    bool healthy = coordinator_->healthy();
    if (healthy != serving) {
      serving = healthy;
      if (!serving) spdlog::error("store unhealthy: reporting NOT_SERVING");
      SetServing(serving);
    }
    auto until = std::chrono::steady_clock::now() + period;
    while (!stopping_.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(
          std::min<std::chrono::milliseconds>(period, std::chrono::milliseconds(50)));
    }
  }
}

void CoordinatorServer::Shutdown() {
  std::lock_guard lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  stopping_.store(true);
  if (ticker_.joinable()) ticker_.join();
  SetServing(false);
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(2);
  if (agent_server_) agent_server_->Shutdown(deadline);
  if (control_server_) control_server_->Shutdown(deadline);
  if (health_server_) health_server_->Shutdown(deadline);
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

}  // namespace triage::coord
