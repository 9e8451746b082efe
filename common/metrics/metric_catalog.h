#pragma once

// The metric catalogue: every series the coordinator and the agent export, with its type, help
// text and label names. The exporters (coordinator/metrics/prometheus_metrics.cc,
// agent/metrics/prometheus_agent_metrics.cc) build their families from these entries and name
// no metric themselves; docs/farm.md#metrics documents each entry, and the dashboards and alert
// rules use only these names (tests/unit/common/metrics/metric_catalog_test.cc checks all of
// it). Plain data: no prometheus-cpp here, so any target may include it.

#include <array>
#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string_view>

namespace triage::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

constexpr std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "";
}

// A metric's label names, in the order the exporter passes their values
// (CatalogFamily::Add in common/metrics/catalog_family.h).
class LabelNames {
 public:
  static constexpr std::size_t kMax = 4;

  constexpr LabelNames() = default;
  constexpr LabelNames(std::initializer_list<std::string_view> names) : size_(names.size()) {
    // More labels than kMax fails to compile (a throw is not a constant expression).
    if (names.size() > kMax)
      throw std::length_error("a metric has at most LabelNames::kMax labels");
    std::size_t i = 0;
    for (std::string_view name : names) names_[i++] = name;
  }

  constexpr std::size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const std::string_view* begin() const { return names_.data(); }
  constexpr const std::string_view* end() const { return names_.data() + size_; }
  constexpr std::string_view operator[](std::size_t i) const { return names_[i]; }

 private:
  std::array<std::string_view, kMax> names_{};
  std::size_t size_ = 0;
};

struct MetricDef {
  std::string_view name;  // the family name; a histogram's series add _bucket, _sum, _count
  MetricType type;
  std::string_view help;
  LabelNames labels;
};

namespace catalog {

// ---- coordinator -----------------------------------------------------------------------------

inline constexpr MetricDef kSweeps{
    .name = "triage_sweeps",
    .type = MetricType::kGauge,
    .help = "Sweeps by state",
    .labels = {"state"},
};

inline constexpr MetricDef kEntries{
    .name = "triage_entries",
    .type = MetricType::kGauge,
    .help = "Entries of sweeps by state (queued, running, done)",
    .labels = {"playbook", "state"},
};

inline constexpr MetricDef kEntryOutcomesTotal{
    .name = "triage_entry_outcomes_total",
    .type = MetricType::kCounter,
    .help =
        "Decided entries by outcome and stage, each counted once when its sweep's counts are "
        "settled (the merge, or a cancel), under the label status and the report count it under",
    .labels = {"playbook", "outcome", "stage"},
};

inline constexpr MetricDef kEntriesDoneTotal{
    .name = "triage_entries_done_total",
    .type = MetricType::kCounter,
    .help =
        "Entries done with a result (every shard that carries one ended), each counted once: the "
        "farm's progress while sweeps run",
    .labels = {"playbook"},
};

inline constexpr MetricDef kShards{
    .name = "triage_shards",
    .type = MetricType::kGauge,
    .help = "Shards by state",
    .labels = {"arch", "state"},
};

inline constexpr MetricDef kShardsCompletedTotal{
    .name = "triage_shards_completed_total",
    .type = MetricType::kCounter,
    .help = "Finished shard attempts",
    .labels = {"arch", "playbook", "outcome"},
};

inline constexpr MetricDef kShardQueueSeconds{
    .name = "triage_shard_queue_seconds",
    .type = MetricType::kHistogram,
    .help = "Time from enqueue (or end of backoff) to lease",
    .labels = {"arch", "playbook"},
};

inline constexpr MetricDef kShardRunSeconds{
    .name = "triage_shard_run_seconds",
    .type = MetricType::kHistogram,
    .help = "Time from lease to completion",
    .labels = {"arch", "playbook"},
};

inline constexpr MetricDef kShardAttempts{
    .name = "triage_shard_attempts",
    .type = MetricType::kHistogram,
    .help = "Attempts a shard needed",
    .labels = {"playbook"},
};

inline constexpr MetricDef kVerifyBatchShards{
    .name = "triage_verify_batch_shards",
    .type = MetricType::kHistogram,
    .help = "Verify shards granted in one lease (1: alone)",
    .labels = {"arch"},
};

inline constexpr MetricDef kLeaseExpirationsTotal{
    .name = "triage_lease_expirations_total",
    .type = MetricType::kCounter,
    .help = "Leases that expired",
    .labels = {"arch", "reason"},
};

inline constexpr MetricDef kBackupLeasesTotal{
    .name = "triage_backup_leases_total",
    .type = MetricType::kCounter,
    .help =
        "Backup leases of stragglers (granted; then won: its result was accepted first, lost: "
        "the first lease's was, or yielded: it gave its agent to queued work)",
    .labels = {"arch", "outcome"},
};

inline constexpr MetricDef kBackupDeviceSecondsTotal{
    .name = "triage_backup_device_seconds_total",
    .type = MetricType::kCounter,
    .help = "Seconds backup attempts ran, whatever their outcome",
    .labels = {"arch"},
};

inline constexpr MetricDef kRequeuesTotal{
    .name = "triage_requeues_total",
    .type = MetricType::kCounter,
    .help =
        "Shards put back in the queue (manual: operator; auto: a failed attempt; infra: a lease "
        "lost to an agent or coordinator going away)",
    .labels = {"arch", "source"},
};

inline constexpr MetricDef kStaleResultsRejectedTotal{
    .name = "triage_stale_results_rejected_total",
    .type = MetricType::kCounter,
    .help = "Results rejected (fencing, unknown lease, disallowed file)",
    .labels = {"reason"},
};

inline constexpr MetricDef kAgents{
    .name = "triage_agents",
    .type = MetricType::kGauge,
    .help = "Agents by state",
    .labels = {"arch", "state"},
};

// Observed by the coordinator when a heartbeat arrives.
inline constexpr MetricDef kAgentHeartbeatAgeSeconds{
    .name = "triage_agent_heartbeat_age_seconds",
    .type = MetricType::kHistogram,
    .help = "Age of the previous heartbeat when one arrives",
    .labels = {"arch"},
};

inline constexpr MetricDef kMergeSeconds{
    .name = "triage_merge_seconds",
    .type = MetricType::kHistogram,
    .help = "Merge duration",
    .labels = {},
};

inline constexpr MetricDef kMergeConflictsTotal{
    .name = "triage_merge_conflicts_total",
    .type = MetricType::kCounter,
    .help = "Merge conflicts by kind",
    .labels = {"kind"},
};

inline constexpr MetricDef kSweepLastSuccessTimestampSeconds{
    .name = "triage_sweep_last_success_timestamp_seconds",
    .type = MetricType::kGauge,
    .help = "End of the last sweep that succeeded",
    .labels = {},
};

inline constexpr MetricDef kRpcSeconds{
    .name = "triage_rpc_seconds",
    .type = MetricType::kHistogram,
    .help = "Server-side RPC latency",
    .labels = {"method", "code"},
};

inline constexpr MetricDef kShardProgressAgeMaxSeconds{
    .name = "triage_shard_progress_age_max_seconds",
    .type = MetricType::kGauge,
    .help = "Longest time a leased or running shard went without progress",
    .labels = {"arch"},
};

inline constexpr MetricDef kShardQueuedOldestSeconds{
    .name = "triage_shard_queued_oldest_seconds",
    .type = MetricType::kGauge,
    .help = "Age of the oldest shard waiting in the queue (past its backoff)",
    .labels = {"arch"},
};

inline constexpr MetricDef kShardsUnservable{
    .name = "triage_shards_unservable",
    .type = MetricType::kGauge,
    .help =
        "Queued shards no live, undrained agent can take, by the first arch they need and why "
        "(arch, executor, playbook, devices, runner, drained, offline)",
    .labels = {"arch", "reason"},
};

// Set every tick from the agents' registrations (AgentDimensions.runner_problem; docs/farm.md,
// "Only a working agent is a witness").
inline constexpr MetricDef kAgentsRunnerProblem{
    .name = "triage_agents_runner_problem",
    .type = MetricType::kGauge,
    .help =
        "Live agents whose self-check found they cannot run tt-xla's runner (they are leased no "
        "native work)",
    .labels = {"arch"},
};

inline constexpr MetricDef kSweepsBlocked{
    .name = "triage_sweeps_blocked",
    .type = MetricType::kGauge,
    .help =
        "Running sweeps that cannot progress without a person (every remaining shard "
        "quarantined or unservable)",
    .labels = {},
};

inline constexpr MetricDef kStoreCommitSeconds{
    .name = "triage_store_commit_seconds",
    .type = MetricType::kHistogram,
    .help = "Duration of a database commit (one per group of mutations)",
    .labels = {},
};

inline constexpr MetricDef kStoreCommitMutations{
    .name = "triage_store_commit_mutations",
    .type = MetricType::kHistogram,
    .help = "State changes made durable by one database commit",
    .labels = {},
};

inline constexpr MetricDef kStoreCommitFailuresTotal{
    .name = "triage_store_commit_failures_total",
    .type = MetricType::kCounter,
    .help =
        "Database commits that failed (their changes were answered UNAVAILABLE and the state was "
        "reloaded)",
    .labels = {},
};

// Set when a finished sweep's outputs are built (docs/report.md, "Failure clusters"); the
// previous sweep's series are removed, so only the latest sweep's clusters are exported. Ten
// ranks at most, each named by its stable cluster id (c- and 8 hex digits of its signature's
// hash): a bounded label set in which two clusters never share a label. The signature itself is
// the label of triage_failure_cluster_info, whole.
inline constexpr MetricDef kFailureClusterEntries{
    .name = "triage_failure_cluster_entries",
    .type = MetricType::kGauge,
    .help =
        "Entries in each of the ten largest failure clusters of the latest finished sweep, by "
        "rank (1 = largest) and cluster id (triage_failure_cluster_info has its signature)",
    .labels = {"rank", "cluster"},
};

inline constexpr MetricDef kFailureClusterInfo{
    .name = "triage_failure_cluster_info",
    .type = MetricType::kGauge,
    .help =
        "Always 1 for each cluster triage_failure_cluster_entries exports; the labels carry its "
        "id and its whole reason signature",
    .labels = {"cluster", "signature"},
};

// Set when a command sweep's outputs are built (docs/remediation.md, "What the report says"): its
// ten largest remediation clusters, each by rank and by its id (the fingerprint a command reported,
// checked to a-z, 0-9, '.', '_', '-' and 100 characters, or a cluster id), with the entries the
// patch fixed and those still failing. The previous command sweep's series are removed.
inline constexpr MetricDef kRemediationClusterEntries{
    .name = "triage_remediation_cluster_entries",
    .type = MetricType::kGauge,
    .help =
        "Entries in each of the ten largest remediation clusters of the latest finished command "
        "sweep, by rank (1 = largest), cluster (fingerprint or cluster id) and state (fixed, "
        "failing)",
    .labels = {"rank", "cluster", "state"},
};

inline constexpr MetricDef kRunningSweepEntries{
    .name = "triage_running_sweep_entries",
    .type = MetricType::kGauge,
    .help =
        "Entries of each running sweep by state (queued, running, done); ended sweeps have none",
    .labels = {"sweep", "state"},
};

inline constexpr MetricDef kCoordinatorBuildInfo{
    .name = "triage_coordinator_build_info",
    .type = MetricType::kGauge,
    .help = "Always 1; the label carries the version",
    .labels = {"version"},
};

// Every family the coordinator registers.
inline constexpr auto kCoordinatorMetrics = std::to_array<const MetricDef*>({
    &kSweeps,
    &kEntries,
    &kEntryOutcomesTotal,
    &kEntriesDoneTotal,
    &kShards,
    &kShardsCompletedTotal,
    &kShardQueueSeconds,
    &kShardRunSeconds,
    &kShardAttempts,
    &kVerifyBatchShards,
    &kLeaseExpirationsTotal,
    &kBackupLeasesTotal,
    &kBackupDeviceSecondsTotal,
    &kRequeuesTotal,
    &kStaleResultsRejectedTotal,
    &kAgents,
    &kAgentHeartbeatAgeSeconds,
    &kMergeSeconds,
    &kMergeConflictsTotal,
    &kSweepLastSuccessTimestampSeconds,
    &kRpcSeconds,
    &kShardProgressAgeMaxSeconds,
    &kShardQueuedOldestSeconds,
    &kShardsUnservable,
    &kAgentsRunnerProblem,
    &kSweepsBlocked,
    &kStoreCommitSeconds,
    &kStoreCommitMutations,
    &kStoreCommitFailuresTotal,
    &kFailureClusterEntries,
    &kFailureClusterInfo,
    &kRemediationClusterEntries,
    &kRunningSweepEntries,
    &kCoordinatorBuildInfo,
});

// ---- agent -----------------------------------------------------------------------------------

inline constexpr MetricDef kAgentStepSeconds{
    .name = "triage_agent_step_seconds",
    .type = MetricType::kHistogram,
    .help = "Duration of playbook steps (probe, fix, verify, ...)",
    .labels = {"playbook", "step", "outcome"},
};

inline constexpr MetricDef kAgentSubprocessTimeoutsTotal{
    .name = "triage_agent_subprocess_timeouts_total",
    .type = MetricType::kCounter,
    .help = "Subprocesses killed for running too long",
    .labels = {"step"},
};

inline constexpr MetricDef kAgentWorkspaceResetSeconds{
    .name = "triage_agent_workspace_reset_seconds",
    .type = MetricType::kHistogram,
    .help = "Time to reset the workspace to a sweep's commits",
    .labels = {},
};

inline constexpr MetricDef kAgentBuildInfo{
    .name = "triage_agent_build_info",
    .type = MetricType::kGauge,
    .help = "Always 1; labels carry the version and arch",
    .labels = {"version", "arch"},
};

// Every family the agent registers.
inline constexpr auto kAgentMetrics = std::to_array<const MetricDef*>({
    &kAgentStepSeconds,
    &kAgentSubprocessTimeoutsTotal,
    &kAgentWorkspaceResetSeconds,
    &kAgentBuildInfo,
});

}  // namespace catalog
}  // namespace triage::metrics
