#include "agent/metrics/prometheus_agent_metrics.h"

#include "common/metrics/catalog_family.h"
#include "common/metrics/metric_catalog.h"

namespace triage::agent {
namespace {

namespace catalog = metrics::catalog;
using metrics::CatalogFamily;

prometheus::Histogram::BucketBoundaries Buckets() {
  return {0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400};
}

}  // namespace

struct PrometheusAgentMetrics::Families {
  explicit Families(prometheus::Registry& r)
      : steps(r, Buckets()), timeouts(r), reset(r, Buckets()), info(r) {}
  CatalogFamily<catalog::kAgentStepSeconds> steps;
  CatalogFamily<catalog::kAgentSubprocessTimeoutsTotal> timeouts;
  CatalogFamily<catalog::kAgentWorkspaceResetSeconds> reset;
  CatalogFamily<catalog::kAgentBuildInfo> info;
};

PrometheusAgentMetrics::PrometheusAgentMetrics(std::shared_ptr<prometheus::Registry> registry,
                                               const std::string& version, const std::string& arch)
    : f_(std::make_unique<Families>(*registry)) {
  f_->info.Add(version, arch).Set(1);
  f_->reset.Add();
  for (const char* step : {"probe", "verify", "command"}) f_->timeouts.Add(step);
}

PrometheusAgentMetrics::~PrometheusAgentMetrics() = default;

void PrometheusAgentMetrics::Step(std::string_view playbook, std::string_view step,
                                  std::string_view outcome, double seconds) {
  f_->steps.Add(playbook, step, outcome).Observe(seconds);
}

void PrometheusAgentMetrics::SubprocessTimeout(std::string_view step) {
  f_->timeouts.Add(step).Increment();
}

void PrometheusAgentMetrics::WorkspaceReset(double seconds) { f_->reset.Add().Observe(seconds); }

}  // namespace triage::agent
