#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "agent/client/coordinator_client.h"
#include "common/rpc/rpc.h"

namespace triage::agent {

struct GrpcClientOptions {
  std::string address;  // host:port of the coordinator's agent listener
  rpc::TlsClientConfig tls;
  std::string token;  // bearer token (role agent)
  std::chrono::milliseconds call_timeout{30'000};
};

class GrpcCoordinatorClient : public CoordinatorClient {
 public:
  static absl::StatusOr<std::unique_ptr<GrpcCoordinatorClient>> Create(
      const GrpcClientOptions& options);
  ~GrpcCoordinatorClient() override;

  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& req) override;
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& req) override;
  absl::StatusOr<v1::LeaseResponse> Lease(const v1::LeaseRequest& req) override;
  absl::StatusOr<v1::ProgressResponse> ReportProgress(const v1::ProgressRequest& req) override;
  absl::StatusOr<v1::CompleteResponse> Complete(const v1::CompleteRequest& req) override;
  void CancelWaits() override;

 private:
  struct Impl;
  explicit GrpcCoordinatorClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace triage::agent
