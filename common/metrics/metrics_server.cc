#include "common/metrics/metrics_server.h"

#include "common/util/net.h"
#include "common/util/strings.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace triage::metrics {

struct MetricsServer::Impl {
  std::unique_ptr<prometheus::Exposer> exposer;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

MetricsServer::~MetricsServer() = default;

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& address, std::shared_ptr<prometheus::Registry> registry) {
  auto impl = std::make_unique<Impl>();
  try {
    impl->exposer = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    // civetweb's own message only guesses ("possible problem binding to port"): name the cause.
    const std::string problem = util::BindProblem(address);
    return absl::UnavailableError(util::StrCat("cannot serve metrics on ", address, ": ",
                                               problem.empty() ? e.what() : problem));
  }
  impl->exposer->RegisterCollectable(registry);
  auto ports = impl->exposer->GetListeningPorts();
  int port = ports.empty() ? 0 : ports.front();
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl), port));
}

}  // namespace triage::metrics
