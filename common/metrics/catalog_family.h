#pragma once

// A prometheus-cpp family registered from a metric catalogue entry (metric_catalog.h): its name,
// help text and type come from the entry, and a series is added with one value per label of the
// entry. For the exporters' .cc files only: this header pulls in prometheus-cpp.

#include <string>
#include <string_view>
#include <utility>

#include "common/metrics/metric_catalog.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/labels.h"
#include "prometheus/registry.h"

namespace triage::metrics {

template <MetricType T>
struct PrometheusMetricOf;
template <>
struct PrometheusMetricOf<MetricType::kCounter> {
  using type = prometheus::Counter;
};
template <>
struct PrometheusMetricOf<MetricType::kGauge> {
  using type = prometheus::Gauge;
};
template <>
struct PrometheusMetricOf<MetricType::kHistogram> {
  using type = prometheus::Histogram;
};

// The family of catalogue entry M, e.g.
//   CatalogFamily<catalog::kShards> shards(registry);
//   shards.Add(arch, state).Increment();  // the entry's labels are {arch, state}
// A histogram family is given its buckets once, when it is registered.
template <const MetricDef& M>
class CatalogFamily {
 public:
  using Metric = typename PrometheusMetricOf<M.type>::type;

  explicit CatalogFamily(prometheus::Registry& registry) requires(M.type != MetricType::kHistogram)
      : family_(Register(registry)) {}
  CatalogFamily(prometheus::Registry& registry,
                prometheus::Histogram::BucketBoundaries buckets) requires(M.type ==
                                                                          MetricType::kHistogram)
      : family_(Register(registry)), buckets_(std::move(buckets)) {}

  // The series with these label values (in the order of M.labels), created at 0 the first time.
  template <typename... Values>
  Metric& Add(const Values&... values) {
    static_assert(sizeof...(Values) == M.labels.size(),
                  "CatalogFamily::Add takes one value per label of the catalogue entry");
    prometheus::Labels labels;
    std::size_t i = 0;
    (labels.emplace(std::string(M.labels[i++]), std::string(std::string_view(values))), ...);
    if constexpr (M.type == MetricType::kHistogram) {
      return family_.Add(labels, buckets_);
    } else {
      return family_.Add(labels);
    }
  }

  // Drops a series Add returned (a gauge whose label values stopped meaning anything).
  void Remove(Metric* series) { family_.Remove(series); }

 private:
  static prometheus::Family<Metric>& Register(prometheus::Registry& registry) {
    const std::string name(M.name);
    const std::string help(M.help);
    if constexpr (M.type == MetricType::kCounter) {
      return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
    } else if constexpr (M.type == MetricType::kGauge) {
      return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
    } else {
      return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
    }
  }

  prometheus::Family<Metric>& family_;
  prometheus::Histogram::BucketBoundaries buckets_;
};

}  // namespace triage::metrics
