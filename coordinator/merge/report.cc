// The report put together (BuildReport) from report.json's parts (report_json.cc) and report.md's
// sections (report_md.cc), with what both say of each entry worked out once here.

#include "coordinator/merge/report.h"

#include <algorithm>

#include "common/inventory/document.h"
#include "common/inventory/key.h"
#include "common/util/strings.h"
#include "coordinator/merge/clusters.h"
#include "coordinator/merge/nightly_report.h"
#include "coordinator/merge/report_internal.h"
#include "nlohmann/json.hpp"

namespace triage::merge {
namespace report_internal {
namespace {

// The steps of a fix path: "loader_dtype+registry" (a chain, docs/playbooks.md "Chaining") is
// "loader_dtype" then "registry"; "registry_remove+override" is two steps of one playbook.
std::vector<std::string_view> FixSteps(std::string_view fix_path) {
  std::vector<std::string_view> steps;
  while (!fix_path.empty()) {
    const std::size_t plus = fix_path.find('+');
    steps.push_back(fix_path.substr(0, plus));
    if (plus == std::string_view::npos) break;
    fix_path.remove_prefix(plus + 1);
  }
  return steps;
}

}  // namespace

// Why this report (and the patches) cover only part of the sweep; "" when it ran to its end.
std::string PartialNote(const coord::SweepRecord& sweep) {
  if (sweep.state != coord::SweepState::kCancelled && sweep.state != coord::SweepState::kFailed) {
    return "";
  }
  return util::StrCat("the sweep was ", coord::SweepStateName(sweep.state),
                      sweep.error.empty() ? "" : util::StrCat(" (", sweep.error, ")"),
                      ": only the results accepted before it ended are included");
}

bool HasFixStep(const EntryMerge& e, std::string_view prefix, bool exact) {
  if (!e.probe) return false;
  for (std::string_view step : FixSteps(e.probe->fix_path())) {
    if (exact ? step == prefix : step.starts_with(prefix)) return true;
  }
  return false;
}

// Every playbook that ran on the entry, in order: the chain of its probing phase's outcome, else
// the shard's playbook.
std::vector<std::string> PlaybooksOf(const EntryMerge& e) {
  if (e.probe && e.probe->playbooks_size() > 0) {
    return {e.probe->playbooks().begin(), e.probe->playbooks().end()};
  }
  for (const auto& [arch, o] : e.outcomes) {
    if (o.playbooks_size() > 0) return {o.playbooks().begin(), o.playbooks().end()};
  }
  return {e.playbook};
}

int EntriesOfClass(const ClassCounts& per_class, const std::string& cls) {
  auto it = per_class.find(cls);
  return it == per_class.end() ? 0 : it->second;
}

}  // namespace report_internal

namespace {

using nlohmann::json;
using report_internal::AddMeasuredTimes;
using report_internal::ClassCounts;
using report_internal::ClustersJson;
using report_internal::ClustersMd;
using report_internal::ConflictsMd;
using report_internal::EntriesOfClass;
using report_internal::EntryFacts;
using report_internal::EntryJson;
using report_internal::EntryMd;
using report_internal::FailingOutcomes;
using report_internal::ForgeHunksByFile;
using report_internal::HasFixStep;
using report_internal::HeaderMd;
using report_internal::MakespanJson;
using report_internal::MakespanMd;
using report_internal::Md;
using report_internal::PartialNote;
using report_internal::RegistryMd;
using report_internal::RemediationJson;
using report_internal::RemediationMd;
using report_internal::SweepJson;
using report_internal::Tallies;
using report_internal::Title;
using report_internal::TotalsJson;
using report_internal::TotalsMd;

std::string DumpJson(const json& j) {
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

ClassCounts EntriesPerClass(const std::vector<EntryMerge>& entries) {
  ClassCounts per_class;
  for (const auto& e : entries) {
    if (e.probe && !e.probe->output_class().empty()) per_class[e.probe->output_class()]++;
  }
  return per_class;
}

EntryFacts FactsOf(const EntryMerge& e, const ReportInput& in,
                   const std::map<std::string, inventory::Document>& after,
                   const ClassCounts& per_class) {
  const coord::SweepRecord& sweep = *in.sweep;
  EntryFacts f;
  if (!e.edits.empty() && e.placement != EntryMerge::Placement::kConflict) {
    auto doc = after.find(e.file);
    if (doc != after.end()) f.final_entry = doc->second.Find(e.key);
  }
  const bool tp = inventory::IsTensorParallelKey(e.key);
  f.targets =
      tp ? std::vector<std::string>{std::string(inventory::kTensorParallelArch)} : sweep.archs;
  f.review = e.review;
  if (HasFixStep(e, "registry", /*exact=*/true)) {
    const int n = EntriesOfClass(per_class, e.probe->output_class());
    if (n >= in.many_entries) {
      f.review.push_back(util::StrCat("the registry line for ", e.probe->output_class(),
                                      " touched ", n, " entries of this sweep"));
    }
  }
  for (const auto& [arch, o] : e.outcomes) {
    if (!o.inference_outcome().empty()) f.inference = o.inference_outcome();
  }
  f.label = EntryLabel(e, sweep.archs);
  auto ev = in.evidence.find(e.file + "\n" + e.key);
  f.evidence = ev != in.evidence.end() ? &ev->second : nullptr;
  return f;
}

void CountEntry(const EntryMerge& e, const EntryFacts& f, const json& outcome, Tallies& t) {
  t.entries[e.file + "\n" + e.key] = {coord::EntryTally::Phase::kDone, f.label, !f.review.empty()};
  t.by_playbook[e.playbook][f.label.empty() ? "no_result" : f.label]++;
  if (!outcome.is_null() && outcome.at("bringup_status").is_string()) {
    t.by_stage[outcome.at("bringup_status").get<std::string>()]++;
  }
}

// The sweep's counts: settled by the coordinator with the entries that have no result, or, unset,
// the report's entries alone.
v1::EntryCounts SettledCounts(const ReportInput& in,
                              const std::map<std::string, coord::EntryTally>& tallies) {
  if (in.settle_counts) return in.settle_counts(tallies);
  std::vector<coord::EntryTally> all;
  for (const auto& [k, t] : tallies) all.push_back(t);
  return coord::CountEntries(all);
}

}  // namespace

std::string EntryLabel(const EntryMerge& e, const std::vector<std::string>& archs) {
  bool nightly = false;
  std::map<std::string, std::string> labels;
  for (const auto& [arch, o] : e.outcomes) {
    labels[arch] = coord::OutcomeLabel(o);
    nightly |= o.has_nightly();
  }
  if (e.probe) labels.emplace("", coord::OutcomeLabel(*e.probe));
  if (e.placement == EntryMerge::Placement::kConflict) return nightly ? "flagged" : "conflict";
  const std::string* label = coord::DecidingLabel(labels, archs);
  if (label == nullptr) return "";
  // A change the patch does not make is not counted as one: the merge flagged it for a person
  // (a new entry confirmed on some of its archs only), or the YAML already says it.
  if (nightly && coord::IsChangeKind(*label) && e.yaml_before == e.yaml_after) {
    return e.review.empty() ? "already" : "flagged";
  }
  return *label;
}

BuiltReport BuildReport(const ReportInput& in) {
  const coord::SweepRecord& sweep = *in.sweep;
  const MergeOutput& merge = *in.merge;
  std::map<std::string, inventory::Document> after;
  for (const auto& [file, text] : in.yaml_after) {
    after.emplace(file, inventory::Document::Parse(file, text));
  }
  const auto forge_hunks = ForgeHunksByFile(merge.forge_patch);
  const ClassCounts per_class = EntriesPerClass(merge.entries);

  json j = SweepJson(sweep, merge, per_class);
  Tallies tallies;
  json entries = json::array();
  std::string md_entries;
  for (const auto& e : merge.entries) {
    const EntryFacts facts = FactsOf(e, in, after, per_class);
    json entry = EntryJson(e, facts, sweep.archs);
    AddMeasuredTimes(e, entry);
    CountEntry(e, facts, entry.at("outcome"), tallies);
    entries.push_back(std::move(entry));
    md_entries += EntryMd(e, facts, forge_hunks);
  }
  j["entries"] = entries;
  const v1::EntryCounts counts = SettledCounts(in, tallies.entries);
  const std::map<std::string, int> by_outcome(counts.by_outcome().begin(),
                                              counts.by_outcome().end());
  j["totals"] = TotalsJson(counts, by_outcome, tallies, merge.conflicts.size());
  const std::vector<FailureCluster> clusters = ClusterFailures(FailingOutcomes(j["entries"]));
  j["clusters"] = ClustersJson(clusters);
  // A command sweep: its entries by fingerprint, else by the cluster of their reason.
  std::string remediation_md;
  if (sweep.request.executor() == "command") {
    j["remediation"] = RemediationJson(j["entries"]);
    j["command_runs"] = report_internal::CommandRunsJson(merge.command_runs);
    j["shared_fixes"] = report_internal::SharedFixesJson(merge.shared_fixes);
    j["workarounds"] = report_internal::WorkaroundsJson(merge.workarounds);
    j["provenance"] = report_internal::ProvenanceJson(merge.provenance);
    remediation_md = report_internal::CommandWorkMd(merge.command_runs, merge.shared_fixes) +
                     report_internal::WorkaroundsMd(merge.workarounds) +
                     RemediationMd(j["remediation"]);
  }
  const std::string since_md = AddWeekOverWeek(in.previous, j);
  j["makespan"] = MakespanJson(in.makespan);
  // A nightly sweep: its intake and its changes grouped like the maintenance pull requests.
  std::string nightly_md;
  if (sweep.details.has_nightly()) {
    NightlySections n = BuildNightlySections(merge, sweep.details.nightly(),
                                             sweep.request.nightly_options(), sweep.archs);
    j["nightly"] = std::move(n.json);
    nightly_md = std::move(n.markdown);
  }
  // A recheck sweep: how much of the skipped set it and the earlier ones covered.
  if (sweep.details.has_recheck()) {
    const v1::RecheckCoverage& r = sweep.details.recheck();
    j["recheck"] = {
        {"skipped", r.skipped()},
        {"selected", r.selected()},
        {"left", r.left()},
        {"checked_before", r.checked_before()},
        {"never_checked", r.never_checked()},
        {"oldest_check_unix_ms",
         r.oldest_check_unix_ms() > 0 ? json(r.oldest_check_unix_ms()) : json(nullptr)}};
    nightly_md = util::StrCat(
        "\n## Skipped entries rechecked\n\n", r.selected(), " of ", r.skipped(),
        " NOT_SUPPORTED_SKIP entry-archs rechecked by this sweep (", r.checked_before(),
        " were checked by earlier recheck sweeps, ", r.never_checked(), " never); ", r.left(),
        " left for a later sweep by the device-time budget",
        r.oldest_check_unix_ms() > 0 ? util::StrCat(", the oldest of them last checked at unix ms ",
                                                    r.oldest_check_unix_ms())
                                     : "",
        ".\n", nightly_md);
  }

  BuiltReport out;
  out.json = DumpJson(j);
  out.clusters = clusters;
  for (const auto& c : j.value("remediation", json::array())) {
    out.remediation.push_back({c["id"], c["fixed"], c["failing"]});
  }
  out.markdown =
      util::StrCat(HeaderMd(sweep), TotalsMd(counts, by_outcome, tallies), nightly_md, since_md,
                   MakespanMd(in.makespan), RegistryMd(merge.registry, per_class), remediation_md,
                   ClustersMd(clusters, sweep.archs), ConflictsMd(merge.conflicts),
                   "\n## Entries\n\n", md_entries);
  return out;
}

bool SetReportState(BuiltReport& report, const coord::SweepRecord& sweep) {
  const std::string state(coord::SweepStateName(sweep.state));
  bool changed = false;
  const std::string partial = PartialNote(sweep);
  json j = json::parse(report.json, nullptr, false);
  if (j.is_object() &&
      (j.value("state", "") != state ||
       j.value("partial", json(nullptr)) != (partial.empty() ? json(nullptr) : json(partial)))) {
    j["state"] = state;
    j["partial"] = partial.empty() ? json(nullptr) : json(partial);
    report.json = DumpJson(j);
    changed = true;
  }
  // A sweep that failed after its outputs were built: say it is partial below the title.
  const std::string partial_line = util::StrCat("- **partial**: ", Md(partial), "\n");
  if (!partial.empty() && report.markdown.find("- **partial**: ") == std::string::npos) {
    const std::size_t repo_line = report.markdown.find("\n- repo: ");
    if (repo_line != std::string::npos) report.markdown.insert(repo_line + 1, partial_line);
    changed = true;
  }
  const std::string title = Title(sweep);
  const std::string prefix = util::StrCat("# Sweep ", sweep.id, " — ");
  const std::size_t eol = std::min(report.markdown.find('\n'), report.markdown.size());
  if (report.markdown.starts_with(prefix) && report.markdown.compare(0, eol, title) != 0) {
    report.markdown.replace(0, eol, title);
    changed = true;
  }
  return changed;
}

}  // namespace triage::merge
