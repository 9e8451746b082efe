#pragma once

#include <memory>
#include <string>

#include "agent/core/agent.h"

namespace prometheus {
class Registry;
}

namespace triage::agent {

// The agent's metrics (common/metrics/metric_catalog.h, kAgentMetrics) on a prometheus-cpp
// registry.
class PrometheusAgentMetrics : public AgentMetrics {
 public:
  PrometheusAgentMetrics(std::shared_ptr<prometheus::Registry> registry, const std::string& version,
                         const std::string& arch);
  ~PrometheusAgentMetrics() override;
  void Step(std::string_view playbook, std::string_view step, std::string_view outcome,
            double seconds) override;
  void SubprocessTimeout(std::string_view step) override;
  void WorkspaceReset(double seconds) override;

 private:
  struct Families;
  std::unique_ptr<Families> f_;
};

}  // namespace triage::agent
