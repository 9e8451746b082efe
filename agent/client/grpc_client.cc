#include "agent/client/grpc_client.h"

#include <mutex>
#include <set>

#include "grpcpp/grpcpp.h"
#include "triage/v1/agent.grpc.pb.h"

namespace triage::agent {

struct GrpcCoordinatorClient::Impl {
  GrpcClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::AgentService::Stub> stub;
  std::mutex mu;
  std::set<grpc::ClientContext*> waits;  // Lease long-polls in progress
  bool waits_cancelled = false;

  // cancellable: a long-poll that CancelWaits ends.
  template <typename Req, typename Resp, typename Method>
  absl::StatusOr<Resp> Call(Method method, const Req& req, std::chrono::milliseconds timeout,
                            bool cancellable = false) {
    grpc::ClientContext ctx;
    rpc::AddBearer(ctx, options.token);
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    if (cancellable) {
      std::lock_guard lock(mu);
      if (waits_cancelled) return absl::CancelledError("the agent is stopping");
      waits.insert(&ctx);
    }
    Resp resp;
    grpc::Status st = (stub.get()->*method)(&ctx, req, &resp);
    if (cancellable) {
      std::lock_guard lock(mu);
      waits.erase(&ctx);
    }
    if (!st.ok()) {
      return rpc::DescribeCallError(rpc::FromGrpc(st), options.address, rpc::Service::kAgent,
                                    options.tls.insecure);
    }
    return resp;
  }
};

void GrpcCoordinatorClient::CancelWaits() {
  std::lock_guard lock(impl_->mu);
  impl_->waits_cancelled = true;
  for (auto* ctx : impl_->waits) ctx->TryCancel();
}

GrpcCoordinatorClient::GrpcCoordinatorClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcCoordinatorClient::~GrpcCoordinatorClient() = default;

absl::StatusOr<std::unique_ptr<GrpcCoordinatorClient>> GrpcCoordinatorClient::Create(
    const GrpcClientOptions& options) {
  auto channel = rpc::Connect(options.address, options.tls);
  if (!channel.ok()) return channel.status();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->channel = *channel;
  impl->stub = v1::AgentService::NewStub(impl->channel);
  return std::unique_ptr<GrpcCoordinatorClient>(new GrpcCoordinatorClient(std::move(impl)));
}

absl::StatusOr<v1::RegisterResponse> GrpcCoordinatorClient::Register(
    const v1::RegisterRequest& req) {
  return impl_->Call<v1::RegisterRequest, v1::RegisterResponse>(&v1::AgentService::Stub::Register,
                                                                req, impl_->options.call_timeout);
}

absl::StatusOr<v1::HeartbeatResponse> GrpcCoordinatorClient::Heartbeat(
    const v1::HeartbeatRequest& req) {
  return impl_->Call<v1::HeartbeatRequest, v1::HeartbeatResponse>(
      &v1::AgentService::Stub::Heartbeat, req, impl_->options.call_timeout);
}

absl::StatusOr<v1::LeaseResponse> GrpcCoordinatorClient::Lease(const v1::LeaseRequest& req) {
  // The server holds the call up to its wait limit; allow that plus the usual call time.
  return impl_->Call<v1::LeaseRequest, v1::LeaseResponse>(
      &v1::AgentService::Stub::Lease, req,
      std::chrono::milliseconds(req.wait_ms()) + impl_->options.call_timeout,
      /*cancellable=*/true);
}

absl::StatusOr<v1::ProgressResponse> GrpcCoordinatorClient::ReportProgress(
    const v1::ProgressRequest& req) {
  return impl_->Call<v1::ProgressRequest, v1::ProgressResponse>(
      &v1::AgentService::Stub::ReportProgress, req, impl_->options.call_timeout);
}

absl::StatusOr<v1::CompleteResponse> GrpcCoordinatorClient::Complete(
    const v1::CompleteRequest& req) {
  return impl_->Call<v1::CompleteRequest, v1::CompleteResponse>(&v1::AgentService::Stub::Complete,
                                                                req, impl_->options.call_timeout);
}

}  // namespace triage::agent
