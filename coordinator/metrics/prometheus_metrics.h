#pragma once

#include <memory>
#include <string_view>

#include "coordinator/metrics/metrics.h"

namespace prometheus {
class Registry;
}

namespace triage::coord {

// The coordinator's metrics (common/metrics/metric_catalog.h, kCoordinatorMetrics) on a
// prometheus-cpp registry.
class PrometheusMetrics : public CoordinatorMetrics {
 public:
  // version: the build-info metric's label (config::ProjectVersion() in the daemon).
  PrometheusMetrics(std::shared_ptr<prometheus::Registry> registry, std::string_view version);
  ~PrometheusMetrics() override;

  void SweepStateChanged(std::string_view from, std::string_view to) override;
  void SweepSucceeded(double unix_seconds) override;
  void EntryStateChanged(std::string_view playbook, std::string_view from,
                         std::string_view to) override;
  void EntryDecided(std::string_view playbook, std::string_view outcome,
                    std::string_view stage) override;
  void EntryDone(std::string_view playbook) override;
  void ShardStateChanged(std::string_view arch, std::string_view from,
                         std::string_view to) override;
  void ShardCompleted(std::string_view arch, std::string_view playbook,
                      std::string_view outcome) override;
  void ShardQueueWait(std::string_view arch, std::string_view playbook, double seconds) override;
  void ShardRunTime(std::string_view arch, std::string_view playbook, double seconds) override;
  void ShardAttempts(std::string_view playbook, int attempts) override;
  void VerifyBatch(std::string_view arch, int shards) override;
  void LeaseExpired(std::string_view arch, std::string_view reason) override;
  void BackupLease(std::string_view arch, std::string_view outcome) override;
  void BackupSeconds(std::string_view arch, double seconds) override;
  void Requeued(std::string_view arch, std::string_view source) override;
  void StaleResultRejected(std::string_view reason) override;
  void AgentStateChanged(std::string_view arch, std::string_view from,
                         std::string_view to) override;
  void HeartbeatAge(std::string_view arch, double seconds) override;
  void MergeDone(double seconds) override;
  void MergeConflict(std::string_view kind) override;
  void UnservableShards(std::string_view arch, std::string_view reason, int shards) override;
  void BlockedSweeps(int sweeps) override;
  void RunningSweeps(const std::vector<SweepProgress>& sweeps) override;
  void RunnerProblems(std::string_view arch, int agents) override;
  void OnCallAges(std::string_view arch, double max_progress_age_seconds,
                  double oldest_queued_seconds) override;
  void StoreCommit(double seconds, int mutations, bool ok) override;
  void FailureClusters(const std::vector<ClusterSize>& clusters) override;
  void RemediationClusters(const std::vector<RemediationClusterSize>& clusters) override;
  // Server-side RPC latency (catalog::kRpcSeconds).
  void Rpc(std::string_view method, std::string_view code, double seconds);

 private:
  struct Families;
  std::unique_ptr<Families> f_;
};

}  // namespace triage::coord
