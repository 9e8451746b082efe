#pragma once

#include <chrono>

#include "absl/status/statusor.h"
#include "triage/v1/agent.pb.h"

namespace triage::agent {

// The agent's view of the coordinator. GrpcCoordinatorClient is the real one; tests inject
// fakes. Each call is one attempt: retrying is the caller's decision (rpc::Retry).
class CoordinatorClient {
 public:
  virtual ~CoordinatorClient() = default;
  virtual absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& req) = 0;
  virtual absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& req) = 0;
  // Blocks up to about req.wait_ms() (the long-poll).
  virtual absl::StatusOr<v1::LeaseResponse> Lease(const v1::LeaseRequest& req) = 0;
  virtual absl::StatusOr<v1::ProgressResponse> ReportProgress(const v1::ProgressRequest& req) = 0;
  virtual absl::StatusOr<v1::CompleteResponse> Complete(const v1::CompleteRequest& req) = 0;
  // Ends the Lease long-polls in progress (they return CANCELLED) and makes later ones return
  // CANCELLED at once: the agent is stopping and should not wait out the server's wait limit.
  virtual void CancelWaits() {}
};

}  // namespace triage::agent
