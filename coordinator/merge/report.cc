#include "coordinator/merge/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "common/diff/apply_diff.h"
#include "common/diff/unified_diff.h"
#include "common/inventory/document.h"
#include "common/inventory/key.h"
#include "common/registry/registry.h"
#include "common/util/strings.h"
#include "coordinator/merge/clusters.h"
#include "coordinator/planning/planner.h"
#include "nlohmann/json.hpp"

namespace triage::merge {
namespace {

using nlohmann::json;

// The resolved fields a script cares about, or null when the entry did not change.
json Resolved(const inventory::Entry* e, const std::string& arch) {
  if (e == nullptr) return nullptr;
  json o;
  auto str = [&](const char* name) -> json {
    const inventory::Value* v = e->FieldForArch(name, arch);
    return v != nullptr && v->is_string() ? json(v->string) : json(nullptr);
  };
  o["status"] = std::string(e->StatusForArch(arch));
  o["bringup_status"] = str("bringup_status");
  o["reason"] = str("reason");
  const inventory::Value* pcc = e->FieldForArch("assert_pcc", arch);
  o["assert_pcc"] = pcc != nullptr && pcc->kind == inventory::Value::Kind::kBool
                        ? json(pcc->boolean)
                        : json(nullptr);
  const inventory::Value* markers = e->FieldForArch("markers", arch);
  if (markers != nullptr && markers->is_list()) {
    json m = json::array();
    for (const auto& i : markers->list) m.push_back(i.string);
    o["markers"] = m;
  } else {
    o["markers"] = nullptr;
  }
  return o;
}

std::string Md(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|' || c == '`' || c == '*' || c == '_' || c == '<') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// Why this report (and the patches) cover only part of the sweep; "" when it ran to its end.
std::string PartialNote(const coord::SweepRecord& sweep) {
  if (sweep.state != coord::SweepState::kCancelled && sweep.state != coord::SweepState::kFailed) {
    return "";
  }
  return util::StrCat("the sweep was ", coord::SweepStateName(sweep.state),
                      sweep.error.empty() ? "" : util::StrCat(" (", sweep.error, ")"),
                      ": only the results accepted before it ended are included");
}

// A fenced block longer than any backtick run in the text, so the text cannot close it.
std::string Fenced(std::string_view info, std::string_view text) {
  std::size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<std::size_t>(3, longest + 1), '`');
  return util::StrCat(fence, info, "\n", text, fence, "\n");
}

// The hunks of a file's diff, header and lines.
std::string HunksText(const std::vector<diff::Hunk>& hunks) {
  std::string out;
  for (const auto& h : hunks) out += h.Text();
  return out;
}

// The hunks of training_utils.py's diff whose added or removed lines register cls.
std::vector<diff::Hunk> RegistryHunks(const std::vector<diff::Hunk>& hunks,
                                      const std::string& cls) {
  std::vector<diff::Hunk> out;
  for (const auto& h : hunks) {
    bool names = false;
    for (const auto& line : h.lines) {
      if (!line.starts_with("+") && !line.starts_with("-")) continue;
      auto parsed = registry::RegistryFile::Parse("training_utils.py", line.substr(1));
      names |= parsed.ok() && parsed->Find(cls) != nullptr;
    }
    if (names) out.push_back(h);
  }
  return out;
}

// report.md's first line.
std::string Title(const coord::SweepRecord& sweep) {
  return util::StrCat("# Sweep ", sweep.id, " — ", coord::SweepStateName(sweep.state));
}

std::string DumpJson(const json& j) {
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

using inventory::kForgeModelsPrefix;

// training_utils.py's path in tt-forge-models.patch (relative to tt_forge_models).
std::string RegistryPath() {
  return std::string(registry::kTrainingUtilsPath.substr(kForgeModelsPrefix.size()));
}

// The forge patch per file: each entry shows the hunks of its loader (and registry lines).
std::map<std::string, std::vector<diff::Hunk>> ForgeHunksByFile(const std::string& forge_patch) {
  std::map<std::string, std::vector<diff::Hunk>> out;
  if (auto split = diff::SplitDiff(forge_patch); split.ok()) {
    for (const auto& fd : *split) {
      auto hunks = diff::ParseHunks(fd);
      if (hunks.ok()) out[fd.path()] = std::move(*hunks);
    }
  }
  return out;
}

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

// How many entries of the sweep return each output class: what a registry line covers.
using ClassCounts = std::map<std::string, int>;

ClassCounts EntriesPerClass(const std::vector<EntryMerge>& entries) {
  ClassCounts per_class;
  for (const auto& e : entries) {
    if (e.probe && !e.probe->output_class().empty()) per_class[e.probe->output_class()]++;
  }
  return per_class;
}

int EntriesOfClass(const ClassCounts& per_class, const std::string& cls) {
  auto it = per_class.find(cls);
  return it == per_class.end() ? 0 : it->second;
}

// report.json's fields about the sweep as a whole: what ran, on what, and the merge's registry
// lines and conflicts (the entries and totals are added after).
json SweepJson(const coord::SweepRecord& sweep, const MergeOutput& merge,
               const ClassCounts& per_class) {
  json j;
  j["sweep"] = sweep.id;
  j["state"] = std::string(coord::SweepStateName(sweep.state));
  j["repo"] = sweep.repo;
  j["commits"] = {{"tt-xla", sweep.ttxla_commit},
                  {"tt_forge_models", sweep.forge_commit},
                  {"tt_forge_models_gitlink", sweep.details.forge_gitlink_commit()},
                  {"tt_forge_models_source", sweep.details.forge_source()}};
  j["notes"] = std::vector<std::string>(sweep.details.notes().begin(), sweep.details.notes().end());
  const std::string partial = PartialNote(sweep);
  j["partial"] = partial.empty() ? json(nullptr) : json(partial);
  if (sweep.details.has_carry()) {
    const v1::Carry& c = sweep.details.carry();
    j["carry"] = {{"base", c.base().empty() ? json(nullptr) : json(c.base())},
                  {"loaders", c.loaders()},
                  {"shards", c.shards()},
                  {"entries", c.entries()},
                  {"rerun_loaders", c.rerun_loaders()}};
  } else {
    j["carry"] = nullptr;
  }
  j["archs"] = sweep.archs;
  j["playbooks"] = sweep.playbooks;
  j["executor"] = sweep.request.executor();
  j["conflicts"] = merge.conflicts;
  json registry = json::array();
  for (const auto& op : merge.registry) {
    json r = {{"op", op.kind() == v1::RegistryOp::ADD ? "add" : "remove"}, {"class", op.cls()}};
    if (op.kind() == v1::RegistryOp::ADD) r["attr"] = op.attr();
    r["entries"] = EntriesOfClass(per_class, op.cls());
    registry.push_back(r);
  }
  j["registry"] = registry;
  return j;
}

// What the report says of one entry beyond the merge's record, worked out once for its JSON row,
// its count and its markdown.
struct EntryFacts {
  // The archs its outcome is decided on.
  std::vector<std::string> targets;
  // The entry as it reads after the patch; null when the merge left it as it was.
  const inventory::Entry* final_entry = nullptr;
  // The merge's review flags, and the report's own on a registry line's reach.
  std::vector<std::string> review;
  // The inference outcome, "" when no inference run reported one.
  std::string inference;
  // The label it is counted under (outcome_counts.h); "" for no result.
  std::string label;
  // Its evidence links; null when it has none.
  const std::vector<EvidenceLink>* evidence = nullptr;
};

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
  // Counted like everywhere else (outcome_counts.h): the first target arch's decision.
  std::map<std::string, v1::EntryOutcome> decisions = e.outcomes;
  if (e.probe) decisions.emplace("", *e.probe);
  const v1::EntryOutcome* deciding = coord::ForFirstArch(decisions, sweep.archs);
  f.label = e.placement == EntryMerge::Placement::kConflict ? "conflict"
            : deciding != nullptr                           ? coord::OutcomeLabel(*deciding)
                                                            : "";
  auto ev = in.evidence.find(e.file + "\n" + e.key);
  f.evidence = ev != in.evidence.end() ? &ev->second : nullptr;
  return f;
}

const char* PlacementName(EntryMerge::Placement p) {
  switch (p) {
    case EntryMerge::Placement::kTopLevel:
      return "top_level";
    case EntryMerge::Placement::kPerArch:
      return "arch_overrides";
    case EntryMerge::Placement::kConflict:
      return "conflict";
    case EntryMerge::Placement::kUnchanged:
      break;
  }
  return "unchanged";
}

// One entry of report.json (docs/report.md has the contract).
json EntryJson(const EntryMerge& e, const EntryFacts& f, const std::vector<std::string>& archs) {
  const std::string first_arch = archs.empty() ? "n150" : archs.front();
  json entry;
  entry["key"] = e.key;
  entry["file"] = e.file;
  entry["playbook"] = e.playbook;
  entry["playbooks"] = PlaybooksOf(e);
  entry["flavor"] = e.flavor;
  entry["loader"] = e.loader;
  entry["wave"] = e.wave;
  entry["carried_from"] = e.carried_from.empty() ? json(nullptr) : json(e.carried_from);
  entry["outcome"] = Resolved(f.final_entry, f.targets.empty() ? first_arch : f.targets.front());
  json arch_outcomes = json::object();
  json verdicts = json::object();
  for (const auto& t : f.targets) {
    arch_outcomes[t] = Resolved(f.final_entry, t);
    auto o = e.outcomes.find(t);
    if (o != e.outcomes.end()) {
      verdicts[t] = {{"verdict", o->second.verdict()},
                     {"stage", o->second.stage()},
                     {"reason", o->second.reason()}};
    }
  }
  entry["arch_outcomes"] = arch_outcomes;
  entry["verdicts"] = verdicts;
  entry["placement"] = PlacementName(e.placement);
  if (e.probe) {
    entry["probe_finding"] = e.probe->probe_finding();
    entry["fix_path"] = e.probe->fix_path();
    entry["why_not_other"] = e.probe->why_not_other();
    entry["output_class"] = e.probe->output_class();
    if (e.probe->has_loss_target()) {
      const v1::LossTarget& t = e.probe->loss_target();
      json not_chosen = json::array();
      for (const auto& c : t.not_chosen()) {
        not_chosen.push_back({{"name", c.name()}, {"shape", c.shape()}});
      }
      entry["loss_target"] = {{"family", t.family()},
                              {"chosen", t.chosen()},
                              {"reason", t.reason()},
                              {"by_rule", t.by_rule()},
                              {"not_chosen", not_chosen}};
    }
  }
  entry["inference"] = f.inference.empty() ? json(nullptr) : json(f.inference);
  entry["review"] = f.review;
  entry["conflict"] = e.placement == EntryMerge::Placement::kConflict;
  if (!e.conflict.empty()) entry["conflict_reason"] = e.conflict;
  json evidence = json::array();
  if (f.evidence != nullptr) {
    for (const auto& link : *f.evidence) evidence.push_back(link.path);
  }
  entry["evidence"] = evidence;
  return entry;
}

// The report's counts, gathered entry by entry.
struct Tallies {
  std::map<std::string, std::map<std::string, int>> by_playbook;  // playbook -> outcome -> n
  std::map<std::string, int> by_stage;                            // bringup_status -> n
  std::map<std::string, coord::EntryTally> entries;               // file + '\n' + key
};

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

json TotalsJson(const v1::EntryCounts& counts, const std::map<std::string, int>& by_outcome,
                const Tallies& t, std::size_t conflicts) {
  json totals;
  totals["entries"] = counts.total();
  totals["decided"] = counts.decided();
  totals["by_playbook"] = t.by_playbook;
  totals["by_outcome"] = by_outcome;
  totals["review"] = counts.review();
  totals["conflicted_entries"] = counts.conflicts();
  totals["conflicts"] = conflicts;
  totals["by_stage"] = t.by_stage;
  return totals;
}

// report.md's title and the sweep's facts below it: repo, commits, archs, notes, partial.
std::string HeaderMd(const coord::SweepRecord& sweep) {
  std::string md;
  util::StrAppend(&md, Title(sweep), "\n\n");
  util::StrAppend(
      &md, "- repo: `", sweep.repo, "`\n- commits: tt-xla `", sweep.ttxla_commit,
      "`, tt_forge_models `", sweep.forge_commit, "`",
      sweep.details.forge_gitlink_commit().empty() ||
              sweep.details.forge_gitlink_commit() == sweep.forge_commit
          ? ""
          : util::StrCat(" (",
                         sweep.details.forge_source() == "ref" ? "--forge-ref" : "checked out",
                         "; tt-xla records `", sweep.details.forge_gitlink_commit(), "`)"),
      "\n- archs: ", util::StrJoin(sweep.archs, ", "),
      " · playbooks: ", util::StrJoin(sweep.playbooks, ", "),
      " · executor: ", sweep.request.executor(), "\n- started by ", sweep.created_by, "\n");
  for (const auto& n : sweep.details.notes()) util::StrAppend(&md, "- note: ", Md(n), "\n");
  const std::string partial = PartialNote(sweep);
  if (!partial.empty()) util::StrAppend(&md, "- **partial**: ", Md(partial), "\n");
  md += "\n";
  return md;
}

// report.md's "Totals": the counts in words, the table by playbook and the stages of the new
// failures.
std::string TotalsMd(const v1::EntryCounts& counts, const std::map<std::string, int>& by_outcome,
                     const Tallies& t) {
  std::string md;
  util::StrAppend(&md, "## Totals\n\n", counts.decided(), " of ", counts.total(),
                  " entries decided: ");
  std::string outcomes;
  for (const auto& [o, c] : by_outcome) {
    util::StrAppend(&outcomes, outcomes.empty() ? "" : ", ", o, " ", c);
  }
  util::StrAppend(&md, outcomes.empty() ? "none" : outcomes,
                  ". Flagged for review: ", counts.review(),
                  ". Entries in conflict: ", counts.conflicts(), ".\n\n");
  util::StrAppend(&md, "| playbook | entries | outcomes |\n|---|---|---|\n");
  for (const auto& [pb, pb_outcomes] : t.by_playbook) {
    int n = 0;
    std::string parts;
    for (const auto& [o, c] : pb_outcomes) {
      n += c;
      util::StrAppend(&parts, parts.empty() ? "" : ", ", o, ": ", c);
    }
    util::StrAppend(&md, "| ", pb, " | ", n, " | ", parts, " |\n");
  }
  if (!t.by_stage.empty()) {
    util::StrAppend(&md, "\nStages of the new failures: ");
    std::string parts;
    for (const auto& [s, c] : t.by_stage) {
      util::StrAppend(&parts, parts.empty() ? "" : ", ", s, " ", c);
    }
    util::StrAppend(&md, parts, "\n");
  }
  return md;
}

// report.md's "Registry" section: each merged line and how many entries return its class; ""
// when the merge wrote none.
std::string RegistryMd(const std::vector<v1::RegistryOp>& registry, const ClassCounts& per_class) {
  if (registry.empty()) return "";
  std::string md = "\n## Registry (training_utils.py)\n\n";
  for (const auto& op : registry) {
    const int n = EntriesOfClass(per_class, op.cls());
    util::StrAppend(
        &md, "- ",
        op.kind() == v1::RegistryOp::ADD
            ? util::StrCat("add `_register_attr(\"", op.cls(), "\", \"", op.attr(), "\")`")
            : util::StrCat("remove the line for `", op.cls(), "`"),
        " — ", n, " entr", n == 1 ? "y" : "ies", " of this sweep return", n == 1 ? "s" : "",
        " this class\n");
  }
  return md;
}

std::string ConflictsMd(const std::vector<std::string>& conflicts) {
  std::string md = "\n## Conflicts\n\n";
  if (conflicts.empty()) return md + "None.\n";
  for (const auto& c : conflicts) util::StrAppend(&md, "- ", Md(c), "\n");
  return md;
}

// An entry's YAML lines before and after the patch (the context covers the whole entry), without
// the hunk header; "" when the merge did not edit it.
std::string YamlLinesMd(const EntryMerge& e) {
  if (e.yaml_before.empty() && e.yaml_after.empty()) return "";
  std::string body;
  auto split =
      diff::SplitDiff(diff::UnifiedDiff(e.file, e.yaml_before, e.yaml_after, {.context = 20}));
  if (split.ok()) {
    for (const auto& fd : *split) {
      auto hunks = diff::ParseHunks(fd);
      if (!hunks.ok()) continue;
      for (const auto& h : *hunks) {
        for (const auto& l : h.lines) util::StrAppend(&body, l, "\n");
      }
    }
  }
  return util::StrCat("- **YAML**\n\n", Fenced("diff", body));
}

// The entry's part of tt-forge-models.patch: its loader's hunks and, for a registry fix, the
// hunks with its class's line.
std::string ForgeDiffMd(const EntryMerge& e,
                        const std::map<std::string, std::vector<diff::Hunk>>& forge_hunks) {
  std::string md;
  std::string loader_rel = e.loader;
  if (std::string_view(loader_rel).starts_with(kForgeModelsPrefix)) {
    loader_rel.erase(0, kForgeModelsPrefix.size());
  }
  if (auto h = forge_hunks.find(loader_rel); h != forge_hunks.end() && !h->second.empty()) {
    util::StrAppend(&md, "- **loader diff** `", loader_rel, "`\n\n",
                    Fenced("diff", HunksText(h->second)));
  }
  if (HasFixStep(e, "registry", /*exact=*/false) && !e.probe->output_class().empty()) {
    const std::string registry_path = RegistryPath();
    auto h = forge_hunks.find(registry_path);
    if (h != forge_hunks.end()) {
      auto mine = RegistryHunks(h->second, e.probe->output_class());
      if (!mine.empty()) {
        util::StrAppend(&md, "- **registry diff** `", registry_path, "`\n\n",
                        Fenced("diff", HunksText(mine)));
      }
    }
  }
  return md;
}

// Inline code for any text: a backtick run longer than any inside it.
std::string Code(std::string_view s) {
  std::size_t longest = 0, run = 0;
  for (char c : s) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool pad = s.starts_with('`') || s.ends_with('`');
  return util::StrCat(fence, pad ? " " : "", s, pad ? " " : "", fence);
}

// The loss target unpack_forward_output chose: its family, whether a family rule decided, and
// every tensor it left out with its shape.
std::string LossTargetMd(const v1::LossTarget& t) {
  std::string md = util::StrCat("- **loss target** ", Md(t.family()), ", ",
                                t.by_rule() ? "by a family rule" : "minimal candidate, for review",
                                ": ", Code(t.chosen()));
  if (t.not_chosen_size() > 0) {
    md += "; not chosen: ";
    md += util::StrJoin(t.not_chosen(), "; ", [](std::string* out, const auto& c) {
      util::StrAppend(out, Code(c.name()), " ", Md(c.shape()));
    });
  }
  return md + "\n";
}

// The entry's findings as the playbook reported them: what the probe found, the loss target and
// the fix path taken (and why not the other).
std::string ProbeMd(const v1::EntryOutcome& probe) {
  std::string md;
  if (!probe.probe_finding().empty()) {
    util::StrAppend(&md, "- **probe** ", Md(probe.probe_finding()), "\n");
  }
  if (probe.has_loss_target()) md += LossTargetMd(probe.loss_target());
  if (!probe.fix_path().empty()) {
    util::StrAppend(
        &md, "- **fix** ", probe.fix_path(),
        probe.why_not_other().empty() ? "" : util::StrCat(" — ", Md(probe.why_not_other())), "\n");
  }
  return md;
}

std::string EvidenceMd(const std::vector<EvidenceLink>* evidence) {
  if (evidence == nullptr || evidence->empty()) return "";
  std::string links;
  for (const auto& link : *evidence) {
    util::StrAppend(&links, links.empty() ? "" : ", ", "[", Md(EvidenceLabel(link)), "](",
                    link.path, ")");
  }
  return util::StrCat("- **evidence** ", links, "\n");
}

// One entry's section of report.md (docs/report.md, "report.md per entry").
std::string EntryMd(const EntryMerge& e, const EntryFacts& f,
                    const std::map<std::string, std::vector<diff::Hunk>>& forge_hunks) {
  std::string md;
  util::StrAppend(&md, "### ", Md(e.key), "\n\n");
  util::StrAppend(
      &md, "- **loader** `", e.loader, "` · playbook ", e.playbook, " / ", e.flavor, " · wave ",
      e.wave, e.carried_from.empty() ? "" : util::StrCat(" · carried from ", e.carried_from), "\n");
  if (const auto chain = PlaybooksOf(e); chain.size() > 1) {
    util::StrAppend(&md, "- **chain** ", util::StrJoin(chain, " → "), "\n");
  }
  util::StrAppend(
      &md, "- **outcome** ", f.label.empty() ? "no result" : f.label,
      e.placement == EntryMerge::Placement::kPerArch ? " (per arch: arch_overrides)" : "", "\n");
  if (e.probe) md += ProbeMd(*e.probe);
  for (const auto& [arch, o] : e.outcomes) {
    util::StrAppend(&md, "- **pytest (", arch.empty() ? "cpu" : arch, ")** ", o.verdict(),
                    o.stage().empty() ? "" : util::StrCat(", ", o.stage()),
                    o.reason().empty() ? "" : util::StrCat(": `", o.reason(), "`"), "\n");
  }
  if (!f.inference.empty()) util::StrAppend(&md, "- **inference** ", Md(f.inference), "\n");
  md += YamlLinesMd(e);
  md += ForgeDiffMd(e, forge_hunks);
  for (const auto& r : f.review) util::StrAppend(&md, "- **review** ", Md(r), "\n");
  if (!e.conflict.empty()) util::StrAppend(&md, "- **conflict** ", Md(e.conflict), "\n");
  md += EvidenceMd(f.evidence);
  md += "\n";
  return md;
}

}  // namespace

std::string EvidenceLabel(const EvidenceLink& link) {
  const std::string name = link.path.substr(link.path.rfind('/') + 1);
  return util::StrCat(link.arch.empty() ? "cpu" : link.arch,
                      link.wave > 1 ? util::StrCat(" wave ", link.wave) : "", ": ", name);
}

// The decided outcomes the patch leaves failing (KNOWN_FAILURE_XFAIL or NOT_SUPPORTED_SKIP on an
// arch), read from report.json's entries.
std::vector<FailingOutcome> FailingOutcomes(const json& entries) {
  std::vector<FailingOutcome> out;
  for (const auto& e : entries) {
    for (const auto& [arch, o] : e.at("arch_outcomes").items()) {
      if (!o.is_object()) continue;
      const std::string status = o.value("status", "");
      if (status != "KNOWN_FAILURE_XFAIL" && status != "NOT_SUPPORTED_SKIP") continue;
      out.push_back({e.at("key").get<std::string>(), arch,
                     o.at("reason").is_string() ? o.at("reason").get<std::string>() : ""});
    }
  }
  return out;
}

json ClustersJson(const std::vector<FailureCluster>& clusters) {
  json out = json::array();
  for (const auto& c : clusters) {
    json members = json::array();
    for (const auto& m : c.entries) members.push_back({{"key", m.key}, {"archs", m.archs}});
    out.push_back({{"signature", c.signature},
                   {"example", c.example},
                   {"size", c.entries.size()},
                   {"entries", members}});
  }
  return out;
}

// report.md's "Failure clusters" section; "" when nothing is left failing.
std::string ClustersMd(const std::vector<FailureCluster>& clusters,
                       const std::vector<std::string>& archs) {
  if (clusters.empty()) return "";
  std::string md =
      "\n## Failure clusters\n\nWhat the patch leaves failing, grouped by the signature of the "
      "reason (numbers written N), largest first: one bug to file per cluster.\n\n"
      "| entries | signature | entries (archs when not all) |\n|---|---|---|\n";
  for (const auto& c : clusters) {
    std::string members;
    for (const auto& m : c.entries) {
      util::StrAppend(&members, members.empty() ? "" : ", ", Code(m.key));
      if (m.archs.size() != archs.size()) {
        util::StrAppend(&members, " (", util::StrJoin(m.archs, ", "), ")");
      }
    }
    util::StrAppend(&md, "| ", c.entries.size(), " | ", Md(c.signature), " | ", members, " |\n");
  }
  return md;
}

// ---- Measured times: each entry's pytest durations, the sweep's makespan (docs/report.md)

namespace {

// Seconds as report.json writes them: to the millisecond, the resolution of what measured them.
double Rounded(double seconds) { return std::round(seconds * 1000) / 1000; }

// An entry's pytest node id (the planner's, so that `triagectl sweep durations` writes keys the
// next sweep's planning finds) and the time its test took on each arch that measured it.
void AddMeasuredTimes(const EntryMerge& e, json& entry) {
  entry["node_id"] = coord::NodeId(e.file, e.key);
  json durations = json::object();
  for (const auto& [arch, o] : e.outcomes) {
    // Under half a millisecond reads as nothing measured, as in the files written from it.
    const double seconds = Rounded(o.duration_seconds());
    if (!arch.empty() && seconds > 0) durations[arch] = seconds;
  }
  entry["durations"] = durations;
}

json MakespanJson(const Makespan& m) {
  json lanes = json::array();
  for (const auto& l : m.lanes) {
    lanes.push_back({{"lane", l.lane},
                     {"shards", l.shards},
                     {"agents", l.agents},
                     {"predicted_device_seconds", Rounded(l.predicted_device_seconds)},
                     {"actual_device_seconds", Rounded(l.actual_device_seconds)},
                     {"predicted_seconds", Rounded(l.predicted_seconds)},
                     {"actual_seconds", Rounded(l.actual_seconds)}});
  }
  return {{"predicted_seconds", Rounded(m.predicted_seconds)},
          {"actual_seconds", Rounded(m.actual_seconds)},
          {"lanes", lanes}};
}

// "42.5s", "4m05s", "2h07m".
std::string HumanSeconds(double seconds) {
  char buf[32];
  if (seconds < 59.95) {
    std::snprintf(buf, sizeof(buf), "%.1fs", seconds);
    return buf;
  }
  const auto s = static_cast<long long>(std::llround(seconds));
  if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  }
  return buf;
}

// report.md's "Makespan: predicted vs actual": the sweep's figures and one row per lane; ""
// when the sweep planned no shard.
std::string MakespanMd(const Makespan& m) {
  if (m.lanes.empty()) return "";
  std::string md = util::StrCat(
      "\n## Makespan: predicted vs actual\n\nPredicted ", HumanSeconds(m.predicted_seconds),
      " (the slowest lane), actual ", HumanSeconds(m.actual_seconds),
      " (the sweep's start to its last accepted result). Lanes run in parallel. Device time: "
      "what planning expected of the lane's shards, and what their taken results ran; a lane's "
      "predicted time is its predicted device time over its agents, its actual time runs from "
      "its first result's start to its last.\n\n"
      "| lane | shards | agents | predicted device | actual device | predicted | actual |\n"
      "|---|---|---|---|---|---|---|\n");
  for (const auto& l : m.lanes) {
    util::StrAppend(&md, "| ", Md(l.lane), " | ", l.shards, " | ", l.agents, " | ",
                    HumanSeconds(l.predicted_device_seconds), " | ",
                    HumanSeconds(l.actual_device_seconds), " | ", HumanSeconds(l.predicted_seconds),
                    " | ", HumanSeconds(l.actual_seconds), " |\n");
  }
  return md;
}

}  // namespace

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
  const std::string since_md = AddWeekOverWeek(in.previous, j);
  j["makespan"] = MakespanJson(in.makespan);

  BuiltReport out;
  out.json = DumpJson(j);
  out.clusters = clusters;
  out.markdown = util::StrCat(HeaderMd(sweep), TotalsMd(counts, by_outcome, tallies), since_md,
                              MakespanMd(in.makespan), RegistryMd(merge.registry, per_class),
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
