#include "coordinator/metrics/prometheus_metrics.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/metrics/catalog_family.h"
#include "common/metrics/metric_catalog.h"
#include "common/util/text.h"

namespace triage::coord {
namespace {

namespace catalog = metrics::catalog;
using metrics::CatalogFamily;
using prometheus::Histogram;

Histogram::BucketBoundaries SecondsBuckets() {
  return {0.001, 0.005, 0.01, 0.05, 0.1, 0.5,  1,    5,    15,
          30,    60,    120,  300,  600, 1800, 3600, 7200, 14400};
}

// Commits take about a millisecond; an fsync (synchronous=FULL, checkpoints) up to tens.
Histogram::BucketBoundaries CommitBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
}

// Failure clusters exported (the largest first), each named by its id: a label set that stays
// small whatever the sweep leaves failing.
constexpr std::size_t kExportedClusters = 10;
// Running sweeps exported per sweep (the oldest first): a farm runs a few at once, and the label
// set stays bounded even if a script starts many.
constexpr std::size_t kExportedSweeps = 20;

}  // namespace

struct PrometheusMetrics::Families {
  explicit Families(prometheus::Registry& r)
      : sweeps(r),
        entries(r),
        outcomes(r),
        entries_done(r),
        shards(r),
        completed(r),
        queue_seconds(r, SecondsBuckets()),
        run_seconds(r, SecondsBuckets()),
        attempts(r, {1, 2, 3, 4, 5, 8}),
        verify_batch(r, {1, 2, 4, 8, 16, 32, 64}),
        expirations(r),
        backups(r),
        backup_seconds(r),
        requeues(r),
        stale(r),
        agents(r),
        heartbeat_age(r, SecondsBuckets()),
        merge_seconds(r, SecondsBuckets()),
        conflicts(r),
        last_success(r),
        rpc(r, SecondsBuckets()),
        progress_age(r),
        queued_age(r),
        unservable(r),
        runner_problems(r),
        blocked(r),
        commit_seconds(r, CommitBuckets()),
        commit_mutations(r, {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}),
        commit_failures(r),
        clusters(r),
        cluster_info(r),
        remediation(r),
        running_sweeps(r),
        build_info(r) {
    last_success_gauge = &last_success.Add();
    blocked_gauge = &blocked.Add();
    commit_seconds_hist = &commit_seconds.Add();
    commit_mutations_hist = &commit_mutations.Add();
    commit_failures_counter = &commit_failures.Add();
  }
  CatalogFamily<catalog::kSweeps> sweeps;
  CatalogFamily<catalog::kEntries> entries;
  CatalogFamily<catalog::kEntryOutcomesTotal> outcomes;
  CatalogFamily<catalog::kEntriesDoneTotal> entries_done;
  CatalogFamily<catalog::kShards> shards;
  CatalogFamily<catalog::kShardsCompletedTotal> completed;
  CatalogFamily<catalog::kShardQueueSeconds> queue_seconds;
  CatalogFamily<catalog::kShardRunSeconds> run_seconds;
  CatalogFamily<catalog::kShardAttempts> attempts;
  CatalogFamily<catalog::kVerifyBatchShards> verify_batch;
  CatalogFamily<catalog::kLeaseExpirationsTotal> expirations;
  CatalogFamily<catalog::kBackupLeasesTotal> backups;
  CatalogFamily<catalog::kBackupDeviceSecondsTotal> backup_seconds;
  CatalogFamily<catalog::kRequeuesTotal> requeues;
  CatalogFamily<catalog::kStaleResultsRejectedTotal> stale;
  CatalogFamily<catalog::kAgents> agents;
  CatalogFamily<catalog::kAgentHeartbeatAgeSeconds> heartbeat_age;
  CatalogFamily<catalog::kMergeSeconds> merge_seconds;
  CatalogFamily<catalog::kMergeConflictsTotal> conflicts;
  CatalogFamily<catalog::kSweepLastSuccessTimestampSeconds> last_success;
  CatalogFamily<catalog::kRpcSeconds> rpc;
  CatalogFamily<catalog::kShardProgressAgeMaxSeconds> progress_age;
  CatalogFamily<catalog::kShardQueuedOldestSeconds> queued_age;
  CatalogFamily<catalog::kShardsUnservable> unservable;
  CatalogFamily<catalog::kAgentsRunnerProblem> runner_problems;
  CatalogFamily<catalog::kSweepsBlocked> blocked;
  CatalogFamily<catalog::kStoreCommitSeconds> commit_seconds;
  CatalogFamily<catalog::kStoreCommitMutations> commit_mutations;
  CatalogFamily<catalog::kStoreCommitFailuresTotal> commit_failures;
  CatalogFamily<catalog::kFailureClusterEntries> clusters;
  CatalogFamily<catalog::kFailureClusterInfo> cluster_info;
  CatalogFamily<catalog::kRemediationClusterEntries> remediation;
  CatalogFamily<catalog::kRunningSweepEntries> running_sweeps;
  CatalogFamily<catalog::kCoordinatorBuildInfo> build_info;
  prometheus::Gauge* last_success_gauge;
  prometheus::Gauge* blocked_gauge;
  Histogram* commit_seconds_hist;
  Histogram* commit_mutations_hist;
  prometheus::Counter* commit_failures_counter;
  std::mutex clusters_mu;
  std::vector<prometheus::Gauge*> cluster_series;  // the latest sweep's, rank order
  std::vector<prometheus::Gauge*> cluster_info_series;
  std::vector<prometheus::Gauge*> remediation_series;  // the latest command sweep's
  std::mutex running_mu;
  std::vector<prometheus::Gauge*> running_series;  // the latest tick's

  // The first time an arch shows up, every series of its label sets is created at 0, so that
  // dashboards and alerts see "0 quarantined" rather than nothing.
  void EnsureArch(std::string_view arch_view) {
    std::string arch(arch_view);
    {
      std::lock_guard lock(mu);
      if (!archs.insert(arch).second) return;
    }
    for (const char* st : {"waiting", "queued", "leased", "running", "succeeded", "failed",
                           "quarantined", "cancelled"}) {
      shards.Add(arch, st);
    }
    for (const char* st : {"idle", "busy", "draining", "offline"}) {
      agents.Add(arch, st);
    }
    for (const char* src : {"manual", "auto", "infra"}) requeues.Add(arch, src);
    for (const char* why : {"deadline", "heartbeat_timeout", "agent_restart"}) {
      expirations.Add(arch, why);
    }
    for (const char* outcome : {"granted", "won", "lost"}) backups.Add(arch, outcome);
    backup_seconds.Add(arch);
    progress_age.Add(arch);
    queued_age.Add(arch);
    for (const char* why :
         {"arch", "executor", "playbook", "devices", "runner", "drained", "offline"}) {
      unservable.Add(arch, why);
    }
    runner_problems.Add(arch);
  }
  std::mutex mu;
  std::set<std::string> archs;
};

PrometheusMetrics::PrometheusMetrics(std::shared_ptr<prometheus::Registry> registry,
                                     std::string_view version)
    : f_(std::make_unique<Families>(*registry)) {
  f_->build_info.Add(version).Set(1);
  // Series that dashboards and alerts expect to exist from the start.
  f_->merge_seconds.Add();
  for (const char* reason : {"fencing", "unknown_lease", "disallowed_file"}) {
    f_->stale.Add(reason);
  }
  for (const char* kind : {"yaml", "registry", "loader"}) f_->conflicts.Add(kind);
}

PrometheusMetrics::~PrometheusMetrics() = default;

void PrometheusMetrics::SweepStateChanged(std::string_view from, std::string_view to) {
  if (!from.empty()) f_->sweeps.Add(from).Decrement();
  if (!to.empty()) f_->sweeps.Add(to).Increment();
}

void PrometheusMetrics::SweepSucceeded(double unix_seconds) {
  f_->last_success_gauge->Set(unix_seconds);
}

void PrometheusMetrics::EntryStateChanged(std::string_view playbook, std::string_view from,
                                          std::string_view to) {
  if (!from.empty()) f_->entries.Add(playbook, from).Decrement();
  if (!to.empty()) f_->entries.Add(playbook, to).Increment();
}

void PrometheusMetrics::EntryDecided(std::string_view playbook, std::string_view outcome,
                                     std::string_view stage) {
  f_->outcomes.Add(playbook, outcome, stage.empty() ? std::string_view("none") : stage).Increment();
}

void PrometheusMetrics::EntryDone(std::string_view playbook) {
  f_->entries_done.Add(playbook).Increment();
}

void PrometheusMetrics::ShardStateChanged(std::string_view arch, std::string_view from,
                                          std::string_view to) {
  f_->EnsureArch(arch);
  if (!from.empty()) f_->shards.Add(arch, from).Decrement();
  if (!to.empty()) f_->shards.Add(arch, to).Increment();
}

void PrometheusMetrics::ShardCompleted(std::string_view arch, std::string_view playbook,
                                       std::string_view outcome) {
  f_->completed.Add(arch, playbook, outcome).Increment();
}

void PrometheusMetrics::ShardQueueWait(std::string_view arch, std::string_view playbook,
                                       double seconds) {
  f_->queue_seconds.Add(arch, playbook).Observe(seconds);
}

void PrometheusMetrics::ShardRunTime(std::string_view arch, std::string_view playbook,
                                     double seconds) {
  f_->run_seconds.Add(arch, playbook).Observe(seconds);
}

void PrometheusMetrics::ShardAttempts(std::string_view playbook, int attempts) {
  f_->attempts.Add(playbook).Observe(attempts);
}

void PrometheusMetrics::VerifyBatch(std::string_view arch, int shards) {
  f_->verify_batch.Add(arch).Observe(shards);
}

void PrometheusMetrics::LeaseExpired(std::string_view arch, std::string_view reason) {
  f_->expirations.Add(arch, reason).Increment();
}

void PrometheusMetrics::BackupLease(std::string_view arch, std::string_view outcome) {
  f_->backups.Add(arch, outcome).Increment();
}

void PrometheusMetrics::BackupSeconds(std::string_view arch, double seconds) {
  f_->backup_seconds.Add(arch).Increment(std::max(0.0, seconds));
}

void PrometheusMetrics::Requeued(std::string_view arch, std::string_view source) {
  f_->requeues.Add(arch, source).Increment();
}

void PrometheusMetrics::StaleResultRejected(std::string_view reason) {
  f_->stale.Add(reason).Increment();
}

void PrometheusMetrics::AgentStateChanged(std::string_view arch, std::string_view from,
                                          std::string_view to) {
  f_->EnsureArch(arch);
  if (!from.empty()) f_->agents.Add(arch, from).Decrement();
  if (!to.empty()) f_->agents.Add(arch, to).Increment();
}

void PrometheusMetrics::HeartbeatAge(std::string_view arch, double seconds) {
  f_->heartbeat_age.Add(arch).Observe(seconds);
}

void PrometheusMetrics::MergeDone(double seconds) { f_->merge_seconds.Add().Observe(seconds); }

void PrometheusMetrics::MergeConflict(std::string_view kind) {
  f_->conflicts.Add(kind).Increment();
}

void PrometheusMetrics::OnCallAges(std::string_view arch, double max_progress_age_seconds,
                                   double oldest_queued_seconds) {
  f_->EnsureArch(arch);
  f_->progress_age.Add(arch).Set(max_progress_age_seconds);
  f_->queued_age.Add(arch).Set(oldest_queued_seconds);
}

void PrometheusMetrics::UnservableShards(std::string_view arch, std::string_view reason,
                                         int shards) {
  f_->EnsureArch(arch);
  f_->unservable.Add(arch, reason).Set(shards);
}

void PrometheusMetrics::BlockedSweeps(int sweeps) { f_->blocked_gauge->Set(sweeps); }

void PrometheusMetrics::RunnerProblems(std::string_view arch, int agents) {
  f_->EnsureArch(arch);
  f_->runner_problems.Add(arch).Set(agents);
}

void PrometheusMetrics::StoreCommit(double seconds, int mutations, bool ok) {
  if (!ok) {
    f_->commit_failures_counter->Increment();
    return;
  }
  f_->commit_seconds_hist->Observe(seconds);
  f_->commit_mutations_hist->Observe(mutations);
}

void PrometheusMetrics::FailureClusters(const std::vector<ClusterSize>& clusters) {
  std::lock_guard lock(f_->clusters_mu);
  // The previous sweep's clusters go: a cluster that vanished must not stay on the dashboard.
  for (prometheus::Gauge* g : f_->cluster_series) f_->clusters.Remove(g);
  for (prometheus::Gauge* g : f_->cluster_info_series) f_->cluster_info.Remove(g);
  f_->cluster_series.clear();
  f_->cluster_info_series.clear();
  for (std::size_t i = 0; i < clusters.size() && i < kExportedClusters; ++i) {
    prometheus::Gauge& g = f_->clusters.Add(std::to_string(i + 1), clusters[i].id);
    g.Set(clusters[i].entries);
    f_->cluster_series.push_back(&g);
    prometheus::Gauge& info = f_->cluster_info.Add(clusters[i].id, clusters[i].signature);
    info.Set(1);
    f_->cluster_info_series.push_back(&info);
  }
}

void PrometheusMetrics::RemediationClusters(const std::vector<RemediationClusterSize>& clusters) {
  std::lock_guard lock(f_->clusters_mu);
  for (prometheus::Gauge* g : f_->remediation_series) f_->remediation.Remove(g);
  f_->remediation_series.clear();
  for (std::size_t i = 0; i < clusters.size() && i < kExportedClusters; ++i) {
    for (const auto& [state, n] : {std::pair<const char*, int>{"fixed", clusters[i].fixed},
                                   {"failing", clusters[i].failing}}) {
      prometheus::Gauge& g = f_->remediation.Add(std::to_string(i + 1), clusters[i].id, state);
      g.Set(n);
      f_->remediation_series.push_back(&g);
    }
  }
}

void PrometheusMetrics::RunningSweeps(const std::vector<SweepProgress>& sweeps) {
  std::lock_guard lock(f_->running_mu);
  for (prometheus::Gauge* g : f_->running_series) f_->running_sweeps.Remove(g);
  f_->running_series.clear();
  for (std::size_t i = 0; i < sweeps.size() && i < kExportedSweeps; ++i) {
    const SweepProgress& s = sweeps[i];
    for (const auto& [state, n] : {std::pair<const char*, int>{"queued", s.queued},
                                   {"running", s.running},
                                   {"done", s.done}}) {
      prometheus::Gauge& g = f_->running_sweeps.Add(s.sweep_id, state);
      g.Set(n);
      f_->running_series.push_back(&g);
    }
  }
}

void PrometheusMetrics::Rpc(std::string_view method, std::string_view code, double seconds) {
  f_->rpc.Add(method, code).Observe(seconds);
}

}  // namespace triage::coord
