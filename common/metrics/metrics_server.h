#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Registry;
}

namespace triage::metrics {

// A /metrics HTTP endpoint (prometheus-cpp's exposer) over one registry. The metric names and
// labels are catalogued in metric_catalog.h (docs/farm.md#metrics); dashboards and alerts use
// only those.
class MetricsServer {
 public:
  // address "127.0.0.1:0" picks a free port; see port().
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsServer();
  int port() const { return port_; }

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_;
};

}  // namespace triage::metrics
