#include "agent/metrics/prometheus_agent_metrics.h"

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace triage::agent {
namespace {

prometheus::Histogram::BucketBoundaries Buckets() {
  return {0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400};
}

}  // namespace

struct PrometheusAgentMetrics::Families {
  explicit Families(prometheus::Registry& r)
      : steps(prometheus::BuildHistogram()
                  .Name("triage_agent_step_seconds")
                  .Help("Duration of playbook steps (probe, fix, verify, ...)")
                  .Register(r)),
        timeouts(prometheus::BuildCounter()
                     .Name("triage_agent_subprocess_timeouts_total")
                     .Help("Subprocesses killed for running too long")
                     .Register(r)),
        reset(prometheus::BuildHistogram()
                  .Name("triage_agent_workspace_reset_seconds")
                  .Help("Time to reset the workspace to a sweep's commits")
                  .Register(r)),
        info(prometheus::BuildGauge()
                 .Name("triage_agent_build_info")
                 .Help("Always 1; labels carry the version and arch")
                 .Register(r)) {}
  prometheus::Family<prometheus::Histogram>& steps;
  prometheus::Family<prometheus::Counter>& timeouts;
  prometheus::Family<prometheus::Histogram>& reset;
  prometheus::Family<prometheus::Gauge>& info;
};

PrometheusAgentMetrics::PrometheusAgentMetrics(std::shared_ptr<prometheus::Registry> registry,
                                               const std::string& version, const std::string& arch)
    : f_(std::make_unique<Families>(*registry)) {
  f_->info.Add({{"version", version}, {"arch", arch}}).Set(1);
  f_->reset.Add({}, Buckets());
  for (const char* step : {"probe", "verify", "command"}) f_->timeouts.Add({{"step", step}});
}

PrometheusAgentMetrics::~PrometheusAgentMetrics() = default;

void PrometheusAgentMetrics::Step(std::string_view playbook, std::string_view step,
                                  std::string_view outcome, double seconds) {
  f_->steps
      .Add({{"playbook", std::string(playbook)},
            {"step", std::string(step)},
            {"outcome", std::string(outcome)}},
           Buckets())
      .Observe(seconds);
}

void PrometheusAgentMetrics::SubprocessTimeout(std::string_view step) {
  f_->timeouts.Add({{"step", std::string(step)}}).Increment();
}

void PrometheusAgentMetrics::WorkspaceReset(double seconds) {
  f_->reset.Add({}, Buckets()).Observe(seconds);
}

}  // namespace triage::agent
