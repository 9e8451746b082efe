#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/merge/clusters.h"
#include "coordinator/merge/merge.h"
#include "coordinator/merge/report.h"
#include "coordinator/merge/week_over_week.h"

namespace triage::merge {

// Reads a sweep's pinned files through git: tt-xla from the sweep's repository at its commit,
// tt_forge_models from the checkout's submodule (or, for URL sweeps, from the submodule URL
// recorded in .gitmodules, fetched into cache_dir).
std::unique_ptr<PinnedFiles> MakeGitPinnedFiles(const coord::SweepRecord& sweep,
                                                const std::filesystem::path& cache_dir);

// The outputs of finished sweeps, built once when the last shard ends (the coordinator's
// finish hook) and kept under data_dir/sweeps/<id>/: tt-xla.patch, tt-forge-models.patch,
// report.md, report.json and evidence/<shard>/... (docs/evidence.md).
class SweepOutputs {
 public:
  using FilesFactory = std::function<std::unique_ptr<PinnedFiles>(const coord::SweepRecord&)>;
  SweepOutputs(coord::Coordinator* coordinator, coord::CoordinatorMetrics* metrics,
               std::filesystem::path data_dir, FilesFactory files = {});

  using IssueLinks = coord::OutputProviders::IssueLinks;
  absl::Status Build(const std::string& sweep_id);
  // With issue links, the patches and report are merged again with them (docs/nightly.md,
  // section 4) and returned without replacing the files built at the sweep's end.
  absl::StatusOr<v1::Patch> Patch(const std::string& sweep_id, const IssueLinks& links = {});
  absl::StatusOr<v1::Report> Report(const std::string& sweep_id, const IssueLinks& links = {});
  coord::OutputProviders Providers();

 private:
  // The outputs of a sweep: merged (with links), the report, and the evidence written.
  struct Outputs {
    MergeOutput merged;
    BuiltReport report;
  };
  absl::StatusOr<Outputs> Compute(const std::string& sweep_id, const IssueLinks& links);
  std::filesystem::path Dir(const std::string& sweep_id) const;
  // Why the sweep's patches are partial (cancelled, failed); "" when it ran to its end.
  std::string PartialReason(const std::string& sweep_id);
  // The report sweep is compared with (docs/report.md, "The report's week_over_week"): the latest
  // sweep created before it, of the same repository, that succeeded and has a report.json here.
  std::optional<PreviousReport> PreviousOf(const coord::SweepRecord& sweep);
  // Exports the failure clusters of a report.json just built (triage_failure_cluster_entries).
  void ExportClusters(const std::vector<FailureCluster>& clusters);

  coord::Coordinator* coordinator_;
  coord::CoordinatorMetrics* metrics_;
  std::filesystem::path data_dir_;
  FilesFactory files_;
  std::mutex mu_;  // one build at a time
};

}  // namespace triage::merge
