#include "coordinator/core/sweep_outputs.h"

#include <chrono>

#include "common/diff/apply_diff.h"
#include "common/evidence/evidence_layout.h"
#include "common/git/git.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "coordinator/merge/report.h"

namespace triage::merge {
namespace {

class GitPinnedFiles : public PinnedFiles {
 public:
  GitPinnedFiles(std::filesystem::path ttxla, std::string ttxla_commit, std::filesystem::path forge,
                 std::string forge_commit, absl::Status forge_error)
      : ttxla_(std::move(ttxla)),
        ttxla_commit_(std::move(ttxla_commit)),
        forge_(std::move(forge)),
        forge_commit_(std::move(forge_commit)),
        forge_error_(std::move(forge_error)) {}
  absl::StatusOr<std::string> ReadTtXla(const std::string& path) override {
    return ttxla_.Show(ttxla_commit_, path, 64 << 20);
  }
  absl::StatusOr<std::string> ReadForge(const std::string& path) override {
    if (!forge_error_.ok()) return forge_error_;
    return forge_.Show(forge_commit_, path, 64 << 20);
  }

 private:
  git::Git ttxla_;
  std::string ttxla_commit_;
  git::Git forge_;
  std::string forge_commit_;
  absl::Status forge_error_;
};

bool SafeName(std::string_view name) {
  if (name.empty() || name.starts_with("/") || name.find('\0') != std::string_view::npos) {
    return false;
  }
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t slash = name.find('/', start);
    std::string_view part =
        name.substr(start, slash == std::string_view::npos ? name.npos : slash - start);
    if (part == ".." || part == "." || part.empty()) return false;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return true;
}

// Writes the evidence of each shard's latest result under dir/evidence/<shard dir>/ and returns
// each entry's links to it, by file + '\n' + key.
absl::StatusOr<std::map<std::string, std::vector<EvidenceLink>>> WriteEvidence(
    const std::filesystem::path& dir, const std::vector<coord::ShardRecord>& shards,
    const std::vector<coord::ResultRecord>& results) {
  std::map<std::string, const coord::ShardRecord*> by_id;
  for (const auto& s : shards) by_id[s.id] = &s;
  std::map<std::string, const coord::ResultRecord*> latest;
  for (const auto& r : results) {
    auto& cur = latest[r.shard_id];
    if (cur == nullptr || r.token > cur->token) cur = &r;
  }
  std::map<std::string, std::vector<EvidenceLink>> links;
  std::error_code ec;
  for (const auto& [id, r] : latest) {
    auto s = by_id.find(id);
    if (s == by_id.end() || s->second->spec.ahead()) continue;  // discarded: never counts
    const std::string shard_dir = evidence::ShardDirName(s->second->spec);
    for (const auto& ev : r->result.evidence()) {
      if (!SafeName(ev.name())) continue;
      const auto path = dir / "evidence" / shard_dir / ev.name();
      std::filesystem::create_directories(path.parent_path(), ec);
      if (auto st = util::WriteFileAtomic(path, ev.content()); !st.ok()) return st;
    }
    for (const auto& o : r->result.entries()) {
      auto& list = links[o.file() + "\n" + o.key()];
      for (const auto& name : o.evidence()) {
        if (!SafeName(name)) continue;
        list.push_back({util::StrCat("evidence/", shard_dir, "/", name), s->second->spec.arch(),
                        s->second->spec.wave()});
      }
    }
  }
  return links;
}

// The YAML files the merge changed, as they read after tt-xla.patch (for the report's resolved
// outcomes).
std::map<std::string, std::string> YamlAfterMerge(const std::string& ttxla_patch,
                                                  PinnedFiles& files) {
  std::map<std::string, std::string> after;
  if (ttxla_patch.empty()) return after;
  auto split = diff::SplitDiff(ttxla_patch);
  if (!split.ok()) return after;
  for (const auto& fd : *split) {
    auto base = files.ReadTtXla(fd.path());
    if (!base.ok()) continue;
    auto applied = diff::ApplyFileDiff(*base, fd);
    if (applied.ok()) after[fd.path()] = *applied;
  }
  return after;
}

}  // namespace

std::unique_ptr<PinnedFiles> MakeGitPinnedFiles(const coord::SweepRecord& sweep,
                                                const std::filesystem::path& cache_dir) {
  std::filesystem::path ttxla;
  std::filesystem::path forge;
  absl::Status forge_error = absl::OkStatus();
  if (!sweep.request.repo_path().empty()) {
    ttxla = sweep.request.repo_path();
    forge = ttxla / git::kForgeSubmodulePath;
  } else {
    auto pinned = git::FetchAndPin(sweep.request.git_url(), sweep.ttxla_commit, cache_dir);
    if (pinned.ok()) ttxla = pinned->repo;
    auto cached = git::ForgeRepo(ttxla, sweep.ttxla_commit, sweep.forge_commit,
                                 sweep.request.git_url(), cache_dir);
    if (cached.ok()) {
      forge = *cached;
    } else {
      forge_error = absl::FailedPreconditionError(
          util::StrCat("cannot read tt_forge_models: ", util::MessageOf(cached.status())));
    }
  }
  return std::make_unique<GitPinnedFiles>(ttxla, sweep.ttxla_commit, forge, sweep.forge_commit,
                                          forge_error);
}

SweepOutputs::SweepOutputs(coord::Coordinator* coordinator, coord::CoordinatorMetrics* metrics,
                           std::filesystem::path data_dir, FilesFactory files)
    : coordinator_(coordinator),
      metrics_(metrics),
      data_dir_(std::move(data_dir)),
      files_(std::move(files)) {
  if (!files_) {
    files_ = [cache = data_dir_ / "cache"](const coord::SweepRecord& s) {
      return MakeGitPinnedFiles(s, cache);
    };
  }
}

std::filesystem::path SweepOutputs::Dir(const std::string& sweep_id) const {
  return data_dir_ / "sweeps" / sweep_id;
}

absl::StatusOr<SweepOutputs::Outputs> SweepOutputs::Compute(const std::string& sweep_id,
                                                            const IssueLinks& links) {
  const auto start = std::chrono::steady_clock::now();
  auto sweep = coordinator_->SweepInfo(sweep_id);
  if (!sweep.ok()) return sweep.status();
  auto shards = coordinator_->Shards(sweep_id);
  if (!shards.ok()) return shards.status();
  auto results = coordinator_->Results(sweep_id);
  if (!results.ok()) return results.status();
  auto attempts = coordinator_->Attempts(sweep_id);
  if (!attempts.ok()) return attempts.status();
  auto files = files_(*sweep);
  MergeInput in;
  in.sweep_id = sweep_id;
  in.archs = sweep->archs;
  in.shards = *shards;
  in.results = *results;
  in.files = files.get();
  in.issue_links = links;
  auto merged = Merge(in);
  if (!merged.ok()) return merged.status();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (metrics_ != nullptr && links.empty()) {
    metrics_->MergeDone(seconds);
    for (const auto& [kind, n] : merged->conflict_counts) {
      for (int i = 0; i < n; ++i) metrics_->MergeConflict(kind);
    }
  }

  const auto dir = Dir(sweep_id);
  std::error_code ec;
  std::filesystem::remove_all(dir / "evidence", ec);
  std::filesystem::create_directories(dir, ec);
  // Evidence: the latest result of each shard, under evidence/<shard>/.
  auto evidence = WriteEvidence(dir, *shards, *results);
  if (!evidence.ok()) return evidence.status();
  ReportInput report;
  report.sweep = &*sweep;
  report.merge = &*merged;
  report.evidence = std::move(*evidence);
  report.yaml_after = YamlAfterMerge(merged->ttxla_patch, *files);
  report.makespan = ComputeMakespan(*sweep, *shards, *results, *attempts);
  absl::Status settled = absl::OkStatus();
  report.settle_counts = [&](const std::map<std::string, coord::EntryTally>& tallies) {
    auto counts = coordinator_->SettleCounts(sweep_id, tallies);
    if (counts.ok()) return *counts;
    settled = counts.status();
    return v1::EntryCounts();
  };
  report.previous = PreviousOf(*sweep);
  BuiltReport built = BuildReport(report);
  if (!settled.ok()) return settled;
  // Only a sweep that just ran to its end speaks for the farm's clusters now; outputs built
  // later for an older or a cancelled sweep (on request) do not.
  if (sweep->state == coord::SweepState::kMerging && links.empty()) {
    ExportClusters(built.clusters);
    if (metrics_ != nullptr && sweep->request.executor() == "command") {
      std::vector<coord::RemediationClusterSize> remediation;
      for (const auto& c : built.remediation) remediation.push_back({c.id, c.fixed, c.failing});
      metrics_->RemediationClusters(remediation);
    }
  }
  return Outputs{std::move(*merged), std::move(built)};
}

absl::Status SweepOutputs::Build(const std::string& sweep_id) {
  std::lock_guard lock(mu_);
  auto outputs = Compute(sweep_id, {});
  if (!outputs.ok()) return outputs.status();
  const MergeOutput& merged = outputs->merged;
  for (const auto& [name, text] :
       {std::pair{"tt-xla.patch", merged.ttxla_patch},
        std::pair{"tt-forge-models.patch", merged.forge_patch},
        std::pair{"report.md", outputs->report.markdown},
        std::pair{"report.json", outputs->report.json},
        std::pair{"conflicts.txt", util::StrJoin(merged.conflicts, "\n")}}) {
    if (auto st = util::WriteFileAtomic(Dir(sweep_id) / name, text); !st.ok()) return st;
  }
  return absl::OkStatus();
}

std::optional<PreviousReport> SweepOutputs::PreviousOf(const coord::SweepRecord& sweep) {
  std::optional<coord::SweepRecord> latest;
  for (auto& other : coordinator_->EarlierSucceeded(sweep)) {
    if (!std::filesystem::exists(Dir(other.id) / "report.json")) continue;
    latest = std::move(other);
    break;
  }
  if (!latest) return std::nullopt;
  auto text = util::ReadFile(Dir(latest->id) / "report.json", 256 << 20);
  // Unreadable: compared with nothing rather than failing this sweep's outputs; the section
  // says why.
  return PreviousReport{latest->id, text.ok() ? *text : ""};
}

void SweepOutputs::ExportClusters(const std::vector<FailureCluster>& built) {
  if (metrics_ == nullptr) return;
  std::vector<coord::ClusterSize> clusters;
  for (const auto& c : built) {
    clusters.push_back({c.id, c.signature, static_cast<int>(c.entries.size())});
  }
  metrics_->FailureClusters(clusters);
}

absl::StatusOr<v1::Patch> SweepOutputs::Patch(const std::string& sweep_id,
                                              const IssueLinks& links) {
  auto sweep = coordinator_->SweepInfo(sweep_id);
  if (!sweep.ok()) return sweep.status();
  const auto dir = Dir(sweep_id);
  if (!std::filesystem::exists(dir / "tt-xla.patch")) {
    if (sweep->state == coord::SweepState::kRunning) {
      return absl::FailedPreconditionError(
          util::StrCat("sweep ", sweep_id, " is still running: the patch is built when it ends"));
    }
    if (auto st = Build(sweep_id); !st.ok()) return st;
  }
  v1::Patch p;
  p.set_sweep_id(sweep_id);
  p.set_ttxla_commit(sweep->ttxla_commit);
  p.set_forge_commit(sweep->forge_commit);
  p.set_sweep_state(std::string(coord::SweepStateName(sweep->state)));
  p.set_partial(PartialReason(sweep_id));
  if (!links.empty()) {
    std::lock_guard lock(mu_);
    auto outputs = Compute(sweep_id, links);
    if (!outputs.ok()) return outputs.status();
    p.set_ttxla_patch(outputs->merged.ttxla_patch);
    p.set_forge_patch(outputs->merged.forge_patch);
    for (const auto& c : outputs->merged.conflicts) p.add_conflicts(c);
    return p;
  }
  auto a = util::ReadFile(dir / "tt-xla.patch", 256 << 20);
  auto b = util::ReadFile(dir / "tt-forge-models.patch", 256 << 20);
  if (!a.ok()) return a.status();
  if (!b.ok()) return b.status();
  p.set_ttxla_patch(*a);
  p.set_forge_patch(*b);
  if (auto c = util::ReadFile(dir / "conflicts.txt", 16 << 20); c.ok()) {
    for (auto line : util::SplitLines(*c)) {
      if (!line.empty()) p.add_conflicts(std::string(line));
    }
  }
  return p;
}

std::string SweepOutputs::PartialReason(const std::string& sweep_id) {
  auto view = coordinator_->GetSweep(sweep_id);
  if (!view.ok() || (view->state() != "cancelled" && view->state() != "failed")) return "";
  return util::StrCat("sweep ", sweep_id, " ", view->state(),
                      view->error().empty() ? "" : util::StrCat(" (", view->error(), ")"),
                      ": the patches hold only the results accepted before it ended (",
                      view->entries().decided(), " of ", view->entries().total(),
                      " entries decided)");
}

absl::StatusOr<v1::Report> SweepOutputs::Report(const std::string& sweep_id,
                                                const IssueLinks& links) {
  auto patch = Patch(sweep_id);  // builds the outputs when needed
  if (!patch.ok()) return patch.status();
  const auto dir = Dir(sweep_id);
  v1::Report r;
  r.set_sweep_id(sweep_id);
  BuiltReport built;
  {
    std::lock_guard lock(mu_);
    auto md = util::ReadFile(dir / "report.md", 256 << 20);
    auto js = util::ReadFile(dir / "report.json", 256 << 20);
    if (!md.ok()) return md.status();
    if (!js.ok()) return js.status();
    built.markdown = std::move(*md);
    built.json = std::move(*js);
    auto sweep = coordinator_->SweepInfo(sweep_id);
    if (!sweep.ok()) return sweep.status();
    if (!links.empty()) {
      // Merged again with the links: returned as it is, the files stay as built.
      auto outputs = Compute(sweep_id, links);
      if (!outputs.ok()) return outputs.status();
      built = std::move(outputs->report);
      SetReportState(built, *sweep);
    } else if (SetReportState(built, *sweep)) {
      // Built while the sweep was merging: the report carries the sweep's state as it is now,
      // and the files are brought up to date once it changed.
      for (const auto& [name, text] :
           {std::pair{"report.md", &built.markdown}, std::pair{"report.json", &built.json}}) {
        if (auto st = util::WriteFileAtomic(dir / name, *text); !st.ok()) return st;
      }
    }
  }
  r.set_markdown(built.markdown);
  r.set_json(built.json);
  std::error_code ec;
  if (std::filesystem::is_directory(dir / "evidence", ec)) {
    for (auto it = std::filesystem::recursive_directory_iterator(dir / "evidence", ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file()) continue;
      auto content = util::ReadFile(it->path(), 64 << 20);
      if (!content.ok()) continue;
      v1::Evidence* ev = r.add_files();
      ev->set_name(std::filesystem::relative(it->path(), dir).generic_string());
      ev->set_content(*content);
    }
  }
  return r;
}

coord::OutputProviders SweepOutputs::Providers() {
  coord::OutputProviders p;
  p.patch = [this](const std::string& id, const IssueLinks& links) { return Patch(id, links); };
  p.report = [this](const std::string& id, const IssueLinks& links) { return Report(id, links); };
  return p;
}

}  // namespace triage::merge
