#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/rpc/rpc.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/server/auth.h"
#include "coordinator/server/prometheus_metrics.h"

namespace grpc {
class Server;
}

namespace triage::coord {

// The sweep outputs (docs/report.md): built from the accepted results on request.
struct OutputProviders {
  std::function<absl::StatusOr<v1::Patch>(const std::string& sweep_id)> patch;
  std::function<absl::StatusOr<v1::Report>(const std::string& sweep_id)> report;
};

struct ServerConfig {
  std::string agent_address = "127.0.0.1:7601";    // AgentService (agents)
  std::string control_address = "127.0.0.1:7602";  // ControlService (triagectl, operators)
  rpc::TlsServerConfig tls;                        // for both ports
  bool insecure = false;                           // allow plaintext without TLS
  // Optional plaintext listener with only grpc.health.v1 (no data, no auth), for probes that
  // cannot speak TLS (the kubelet's gRPC probe). "" = off.
  std::string health_address;
  std::chrono::milliseconds tick{500};  // how often leases/agents are checked
};

// The coordinator on the network: two gRPC servers (agent port, control port), each with the
// standard health service and server reflection, and a ticker thread driving Coordinator::Tick.
class CoordinatorServer {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(const ServerConfig& config,
                                                                  Coordinator* coordinator,
                                                                  Authenticator auth,
                                                                  PrometheusMetrics* metrics,
                                                                  OutputProviders outputs = {});
  ~CoordinatorServer();

  int agent_port() const { return agent_port_; }
  int control_port() const { return control_port_; }
  int health_port() const { return health_port_; }  // 0 when there is no health listener
  // Stops accepting calls, ends long-polls and watches, stops the ticker. Idempotent.
  void Shutdown();

 private:
  CoordinatorServer() = default;
  void TickLoop(std::chrono::milliseconds period);
  void SetServing(bool serving);

  Coordinator* coordinator_ = nullptr;
  struct Services;
  std::unique_ptr<Services> services_;
  std::unique_ptr<grpc::Server> agent_server_;
  std::unique_ptr<grpc::Server> control_server_;
  std::unique_ptr<grpc::Server> health_server_;
  int agent_port_ = 0;
  int control_port_ = 0;
  int health_port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread ticker_;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
};

}  // namespace triage::coord
