#include "coordinator/metrics/prometheus_metrics.h"

#include <mutex>
#include <set>
#include <string>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace triage::coord {
namespace {

using prometheus::Histogram;

Histogram::BucketBoundaries SecondsBuckets() {
  return {0.001, 0.005, 0.01, 0.05, 0.1, 0.5,  1,    5,    15,
          30,    60,    120,  300,  600, 1800, 3600, 7200, 14400};
}

// Commits take about a millisecond; an fsync (synchronous=FULL, checkpoints) up to tens.
Histogram::BucketBoundaries CommitBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
}

std::string S(std::string_view v) { return std::string(v); }

}  // namespace

struct PrometheusMetrics::Families {
  explicit Families(prometheus::Registry& r)
      : sweeps(prometheus::BuildGauge().Name("triage_sweeps").Help("Sweeps by state").Register(r)),
        entries(prometheus::BuildGauge()
                    .Name("triage_entries")
                    .Help("Entries of sweeps by state (queued, running, done)")
                    .Register(r)),
        outcomes(prometheus::BuildCounter()
                     .Name("triage_entry_outcomes_total")
                     .Help("Decided entries by outcome and stage")
                     .Register(r)),
        shards(prometheus::BuildGauge().Name("triage_shards").Help("Shards by state").Register(r)),
        completed(prometheus::BuildCounter()
                      .Name("triage_shards_completed_total")
                      .Help("Finished shard attempts")
                      .Register(r)),
        queue_seconds(prometheus::BuildHistogram()
                          .Name("triage_shard_queue_seconds")
                          .Help("Time from enqueue (or end of backoff) to lease")
                          .Register(r)),
        run_seconds(prometheus::BuildHistogram()
                        .Name("triage_shard_run_seconds")
                        .Help("Time from lease to completion")
                        .Register(r)),
        attempts(prometheus::BuildHistogram()
                     .Name("triage_shard_attempts")
                     .Help("Attempts a shard needed")
                     .Register(r)),
        expirations(prometheus::BuildCounter()
                        .Name("triage_lease_expirations_total")
                        .Help("Leases that expired")
                        .Register(r)),
        requeues(prometheus::BuildCounter()
                     .Name("triage_requeues_total")
                     .Help("Shards put back in the queue (manual: operator; auto: a failed "
                           "attempt; infra: a "
                           "lease lost to an agent or coordinator going away)")
                     .Register(r)),
        stale(prometheus::BuildCounter()
                  .Name("triage_stale_results_rejected_total")
                  .Help("Results rejected (fencing, unknown lease, disallowed file)")
                  .Register(r)),
        agents(prometheus::BuildGauge().Name("triage_agents").Help("Agents by state").Register(r)),
        heartbeat_age(prometheus::BuildHistogram()
                          .Name("triage_agent_heartbeat_age_seconds")
                          .Help("Age of the previous heartbeat when one arrives")
                          .Register(r)),
        merge_seconds(prometheus::BuildHistogram()
                          .Name("triage_merge_seconds")
                          .Help("Merge duration")
                          .Register(r)),
        conflicts(prometheus::BuildCounter()
                      .Name("triage_merge_conflicts_total")
                      .Help("Merge conflicts by kind")
                      .Register(r)),
        last_success(prometheus::BuildGauge()
                         .Name("triage_sweep_last_success_timestamp_seconds")
                         .Help("End of the last sweep that succeeded")
                         .Register(r)),
        rpc(prometheus::BuildHistogram()
                .Name("triage_rpc_seconds")
                .Help("Server-side RPC latency")
                .Register(r)),
        progress_age(prometheus::BuildGauge()
                         .Name("triage_shard_progress_age_max_seconds")
                         .Help("Longest time a leased or running shard went without progress")
                         .Register(r)),
        queued_age(prometheus::BuildGauge()
                       .Name("triage_shard_queued_oldest_seconds")
                       .Help("Age of the oldest shard waiting in the queue (past its backoff)")
                       .Register(r)),
        unservable(prometheus::BuildGauge()
                       .Name("triage_shards_unservable")
                       .Help("Queued shards no live, undrained agent can take, by the first arch "
                             "they need and why (arch, executor, playbook, drained, offline)")
                       .Register(r)),
        blocked(prometheus::BuildGauge()
                    .Name("triage_sweeps_blocked")
                    .Help("Running sweeps that cannot progress without a person (every "
                          "remaining shard quarantined or unservable)")
                    .Register(r)),
        commit_seconds(prometheus::BuildHistogram()
                           .Name("triage_store_commit_seconds")
                           .Help("Duration of a database commit (one per group of mutations)")
                           .Register(r)),
        commit_mutations(prometheus::BuildHistogram()
                             .Name("triage_store_commit_mutations")
                             .Help("State changes made durable by one database commit")
                             .Register(r)),
        commit_failures(prometheus::BuildCounter()
                            .Name("triage_store_commit_failures_total")
                            .Help("Database commits that failed (their changes were answered "
                                  "UNAVAILABLE and the state was reloaded)")
                            .Register(r)) {
    last_success_gauge = &last_success.Add({});
    blocked_gauge = &blocked.Add({});
    commit_seconds_hist = &commit_seconds.Add({}, CommitBuckets());
    commit_mutations_hist = &commit_mutations.Add(
        {}, Histogram::BucketBoundaries{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000});
    commit_failures_counter = &commit_failures.Add({});
  }
  prometheus::Family<prometheus::Gauge>& sweeps;
  prometheus::Family<prometheus::Gauge>& entries;
  prometheus::Family<prometheus::Counter>& outcomes;
  prometheus::Family<prometheus::Gauge>& shards;
  prometheus::Family<prometheus::Counter>& completed;
  prometheus::Family<Histogram>& queue_seconds;
  prometheus::Family<Histogram>& run_seconds;
  prometheus::Family<Histogram>& attempts;
  prometheus::Family<prometheus::Counter>& expirations;
  prometheus::Family<prometheus::Counter>& requeues;
  prometheus::Family<prometheus::Counter>& stale;
  prometheus::Family<prometheus::Gauge>& agents;
  prometheus::Family<Histogram>& heartbeat_age;
  prometheus::Family<Histogram>& merge_seconds;
  prometheus::Family<prometheus::Counter>& conflicts;
  prometheus::Family<prometheus::Gauge>& last_success;
  prometheus::Family<Histogram>& rpc;
  prometheus::Family<prometheus::Gauge>& progress_age;
  prometheus::Family<prometheus::Gauge>& queued_age;
  prometheus::Family<prometheus::Gauge>& unservable;
  prometheus::Family<prometheus::Gauge>& blocked;
  prometheus::Family<Histogram>& commit_seconds;
  prometheus::Family<Histogram>& commit_mutations;
  prometheus::Family<prometheus::Counter>& commit_failures;
  prometheus::Gauge* last_success_gauge;
  prometheus::Gauge* blocked_gauge;
  Histogram* commit_seconds_hist;
  Histogram* commit_mutations_hist;
  prometheus::Counter* commit_failures_counter;

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
      shards.Add({{"arch", arch}, {"state", st}});
    }
    for (const char* st : {"idle", "busy", "draining", "offline"}) {
      agents.Add({{"arch", arch}, {"state", st}});
    }
    for (const char* src : {"manual", "auto", "infra"})
      requeues.Add({{"arch", arch}, {"source", src}});
    for (const char* why : {"deadline", "heartbeat_timeout", "agent_restart"}) {
      expirations.Add({{"arch", arch}, {"reason", why}});
    }
    progress_age.Add({{"arch", arch}});
    queued_age.Add({{"arch", arch}});
    for (const char* why : {"arch", "executor", "playbook", "drained", "offline"}) {
      unservable.Add({{"arch", arch}, {"reason", why}});
    }
  }
  std::mutex mu;
  std::set<std::string> archs;
};

PrometheusMetrics::PrometheusMetrics(std::shared_ptr<prometheus::Registry> registry)
    : f_(std::make_unique<Families>(*registry)) {
  // Series that dashboards and alerts expect to exist from the start.
  f_->merge_seconds.Add({}, SecondsBuckets());
  for (const char* reason : {"fencing", "unknown_lease", "disallowed_file"}) {
    f_->stale.Add({{"reason", reason}});
  }
  for (const char* kind : {"yaml", "registry", "loader"}) f_->conflicts.Add({{"kind", kind}});
}

PrometheusMetrics::~PrometheusMetrics() = default;

void PrometheusMetrics::SweepStateChanged(std::string_view from, std::string_view to) {
  if (!from.empty()) f_->sweeps.Add({{"state", S(from)}}).Decrement();
  if (!to.empty()) f_->sweeps.Add({{"state", S(to)}}).Increment();
}

void PrometheusMetrics::SweepSucceeded(double unix_seconds) {
  f_->last_success_gauge->Set(unix_seconds);
}

void PrometheusMetrics::EntryStateChanged(std::string_view playbook, std::string_view from,
                                          std::string_view to) {
  if (!from.empty()) f_->entries.Add({{"playbook", S(playbook)}, {"state", S(from)}}).Decrement();
  if (!to.empty()) f_->entries.Add({{"playbook", S(playbook)}, {"state", S(to)}}).Increment();
}

void PrometheusMetrics::EntryDecided(std::string_view playbook, std::string_view outcome,
                                     std::string_view stage) {
  f_->outcomes
      .Add({{"playbook", S(playbook)},
            {"outcome", S(outcome)},
            {"stage", stage.empty() ? "none" : S(stage)}})
      .Increment();
}

void PrometheusMetrics::ShardStateChanged(std::string_view arch, std::string_view from,
                                          std::string_view to) {
  f_->EnsureArch(arch);
  if (!from.empty()) f_->shards.Add({{"arch", S(arch)}, {"state", S(from)}}).Decrement();
  if (!to.empty()) f_->shards.Add({{"arch", S(arch)}, {"state", S(to)}}).Increment();
}

void PrometheusMetrics::ShardCompleted(std::string_view arch, std::string_view playbook,
                                       std::string_view outcome) {
  f_->completed.Add({{"arch", S(arch)}, {"playbook", S(playbook)}, {"outcome", S(outcome)}})
      .Increment();
}

void PrometheusMetrics::ShardQueueWait(std::string_view arch, std::string_view playbook,
                                       double seconds) {
  f_->queue_seconds.Add({{"arch", S(arch)}, {"playbook", S(playbook)}}, SecondsBuckets())
      .Observe(seconds);
}

void PrometheusMetrics::ShardRunTime(std::string_view arch, std::string_view playbook,
                                     double seconds) {
  f_->run_seconds.Add({{"arch", S(arch)}, {"playbook", S(playbook)}}, SecondsBuckets())
      .Observe(seconds);
}

void PrometheusMetrics::ShardAttempts(std::string_view playbook, int attempts) {
  f_->attempts.Add({{"playbook", S(playbook)}}, Histogram::BucketBoundaries{1, 2, 3, 4, 5, 8})
      .Observe(attempts);
}

void PrometheusMetrics::LeaseExpired(std::string_view arch, std::string_view reason) {
  f_->expirations.Add({{"arch", S(arch)}, {"reason", S(reason)}}).Increment();
}

void PrometheusMetrics::Requeued(std::string_view arch, std::string_view source) {
  f_->requeues.Add({{"arch", S(arch)}, {"source", S(source)}}).Increment();
}

void PrometheusMetrics::StaleResultRejected(std::string_view reason) {
  f_->stale.Add({{"reason", S(reason)}}).Increment();
}

void PrometheusMetrics::AgentStateChanged(std::string_view arch, std::string_view from,
                                          std::string_view to) {
  f_->EnsureArch(arch);
  if (!from.empty()) f_->agents.Add({{"arch", S(arch)}, {"state", S(from)}}).Decrement();
  if (!to.empty()) f_->agents.Add({{"arch", S(arch)}, {"state", S(to)}}).Increment();
}

void PrometheusMetrics::HeartbeatAge(std::string_view arch, double seconds) {
  f_->heartbeat_age.Add({{"arch", S(arch)}}, SecondsBuckets()).Observe(seconds);
}

void PrometheusMetrics::MergeDone(double seconds) {
  f_->merge_seconds.Add({}, SecondsBuckets()).Observe(seconds);
}

void PrometheusMetrics::MergeConflict(std::string_view kind) {
  f_->conflicts.Add({{"kind", S(kind)}}).Increment();
}

void PrometheusMetrics::OnCallAges(std::string_view arch, double max_progress_age_seconds,
                                   double oldest_queued_seconds) {
  f_->EnsureArch(arch);
  f_->progress_age.Add({{"arch", S(arch)}}).Set(max_progress_age_seconds);
  f_->queued_age.Add({{"arch", S(arch)}}).Set(oldest_queued_seconds);
}

void PrometheusMetrics::UnservableShards(std::string_view arch, std::string_view reason,
                                         int shards) {
  f_->EnsureArch(arch);
  f_->unservable.Add({{"arch", S(arch)}, {"reason", S(reason)}}).Set(shards);
}

void PrometheusMetrics::BlockedSweeps(int sweeps) { f_->blocked_gauge->Set(sweeps); }

void PrometheusMetrics::StoreCommit(double seconds, int mutations, bool ok) {
  if (!ok) {
    f_->commit_failures_counter->Increment();
    return;
  }
  f_->commit_seconds_hist->Observe(seconds);
  f_->commit_mutations_hist->Observe(mutations);
}

void PrometheusMetrics::Rpc(std::string_view method, std::string_view code, double seconds) {
  f_->rpc.Add({{"method", S(method)}, {"code", S(code)}}, SecondsBuckets()).Observe(seconds);
}

}  // namespace triage::coord
