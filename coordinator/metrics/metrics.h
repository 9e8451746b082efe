#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace triage::coord {

// One failure cluster of a sweep's report (docs/report.md, "Failure clusters").
struct ClusterSize {
  std::string id;  // merge::ClusterId of the signature: stable from one sweep to the next
  std::string signature;
  int entries = 0;
};

// One remediation cluster of a command sweep's report (docs/remediation.md).
struct RemediationClusterSize {
  std::string id;  // the reported fingerprint, else the reason's cluster id
  int fixed = 0;
  int failing = 0;
};

// One running sweep's entries by state, as `sweep status` counts them (CountEntries).
struct SweepProgress {
  std::string sweep_id;
  int queued = 0;
  int running = 0;
  int done = 0;
};

// The coordinator's metric hooks (names and labels: common/metrics/metric_catalog.h, documented in
// docs/farm.md#metrics). The core calls these on every transition; coordinator/metrics implements
// them with prometheus-cpp. The defaults do nothing, for tests that don't look at metrics.
class CoordinatorMetrics {
 public:
  virtual ~CoordinatorMetrics() = default;
  virtual void SweepStateChanged(std::string_view /*from*/, std::string_view /*to*/) {}
  virtual void SweepSucceeded(double /*unix_seconds*/) {}
  virtual void EntryStateChanged(std::string_view /*playbook*/, std::string_view /*from*/,
                                 std::string_view /*to*/) {}
  // An entry's outcome, when its sweep's counts are settled (the label they count it under).
  virtual void EntryDecided(std::string_view /*playbook*/, std::string_view /*outcome*/,
                            std::string_view /*stage*/) {}
  // An entry done with a result (progress while its sweep runs).
  virtual void EntryDone(std::string_view /*playbook*/) {}
  virtual void ShardStateChanged(std::string_view /*arch*/, std::string_view /*from*/,
                                 std::string_view /*to*/) {}
  virtual void ShardCompleted(std::string_view /*arch*/, std::string_view /*playbook*/,
                              std::string_view /*outcome*/) {}
  virtual void ShardQueueWait(std::string_view /*arch*/, std::string_view /*playbook*/,
                              double /*seconds*/) {}
  virtual void ShardRunTime(std::string_view /*arch*/, std::string_view /*playbook*/,
                            double /*seconds*/) {}
  virtual void ShardAttempts(std::string_view /*playbook*/, int /*attempts*/) {}
  // A lease granted verify-phase shards: how many (1: the head alone; docs/farm.md, "Batched
  // verification").
  virtual void VerifyBatch(std::string_view /*arch*/, int /*shards*/) {}
  virtual void LeaseExpired(std::string_view /*arch*/, std::string_view /*reason*/) {}
  // Backup leases (docs/farm.md, "Backup leases"): granted; then won (accepted first) or lost.
  virtual void BackupLease(std::string_view /*arch*/, std::string_view /*outcome*/) {}
  // A backup attempt ended (any outcome) after running this long.
  virtual void BackupSeconds(std::string_view /*arch*/, double /*seconds*/) {}
  virtual void Requeued(std::string_view /*arch*/, std::string_view /*source*/) {}
  virtual void StaleResultRejected(std::string_view /*reason*/) {}
  virtual void AgentStateChanged(std::string_view /*arch*/, std::string_view /*from*/,
                                 std::string_view /*to*/) {}
  virtual void HeartbeatAge(std::string_view /*arch*/, double /*seconds*/) {}
  virtual void MergeDone(double /*seconds*/) {}
  virtual void MergeConflict(std::string_view /*kind*/) {}
  // Every tick, per arch: the longest time a leased/running shard went without progress and the
  // age of the oldest queued shard (0 when none). Archs seen once keep reporting (as 0).
  virtual void OnCallAges(std::string_view /*arch*/, double /*max_progress_age_seconds*/,
                          double /*oldest_queued_seconds*/) {}
  // Every tick: queued shards no live, undrained agent can take, by their first required arch
  // and why (Unservable::reason), and how many running sweeps are blocked (need a person).
  virtual void UnservableShards(std::string_view /*arch*/, std::string_view /*reason*/,
                                int /*shards*/) {}
  virtual void BlockedSweeps(int /*sweeps*/) {}
  // Every tick: the running sweeps' entries by state. They replace the previous tick's, so a
  // sweep that ended leaves the board (the exporter keeps the oldest kExportedSweeps).
  virtual void RunningSweeps(const std::vector<SweepProgress>& /*sweeps*/) {}
  // Every tick, per arch: the live agents whose self-check found they cannot run tt-xla's runner
  // (AgentDimensions.runner_problem). Archs seen once keep reporting (as 0).
  virtual void RunnerProblems(std::string_view /*arch*/, int /*agents*/) {}
  // Each database commit of the group commit: its duration, the mutations it made durable, and
  // whether it failed (then those mutations were lost and the state was reloaded).
  virtual void StoreCommit(double /*seconds*/, int /*mutations*/, bool /*ok*/) {}
  // When a finished sweep's outputs are built: its failure clusters, largest first. They replace
  // the previous sweep's (the exporter keeps the largest ten).
  virtual void FailureClusters(const std::vector<ClusterSize>& /*clusters*/) {}
  // When a finished command sweep's outputs are built: its remediation clusters, largest first.
  // They replace the previous command sweep's.
  virtual void RemediationClusters(const std::vector<RemediationClusterSize>& /*clusters*/) {}
};

}  // namespace triage::coord
