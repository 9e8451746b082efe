#include "coordinator/merge/report.h"

#include <algorithm>
#include <set>

#include "common/diff/apply_diff.h"
#include "common/diff/unified_diff.h"
#include "common/inventory/document.h"
#include "common/registry/registry.h"
#include "common/util/strings.h"
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

}  // namespace

std::string EvidenceLabel(const EvidenceLink& link) {
  const std::string name = link.path.substr(link.path.rfind('/') + 1);
  return util::StrCat(link.arch.empty() ? "cpu" : link.arch,
                      link.wave > 1 ? util::StrCat(" wave ", link.wave) : "", ": ", name);
}

BuiltReport BuildReport(const ReportInput& in) {
  const coord::SweepRecord& sweep = *in.sweep;
  const MergeOutput& merge = *in.merge;
  std::map<std::string, inventory::Document> after;
  for (const auto& [file, text] : in.yaml_after) {
    after.emplace(file, inventory::Document::Parse(file, text));
  }
  // The forge patch per file: each entry shows the hunks of its loader (and registry lines).
  std::map<std::string, std::vector<diff::Hunk>> forge_hunks;
  if (auto split = diff::SplitDiff(merge.forge_patch); split.ok()) {
    for (const auto& fd : *split) {
      auto hunks = diff::ParseHunks(fd);
      if (hunks.ok()) forge_hunks[fd.path()] = std::move(*hunks);
    }
  }
  constexpr std::string_view kForgePrefix = "third_party/tt_forge_models/";
  const std::string registry_path(registry::kTrainingUtilsPath.substr(kForgePrefix.size()));
  // How many entries each registry line covers.
  std::map<std::string, int> per_class;
  for (const auto& e : merge.entries) {
    if (e.probe && !e.probe->output_class().empty()) per_class[e.probe->output_class()]++;
  }

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
  j["archs"] = sweep.archs;
  j["playbooks"] = sweep.playbooks;
  j["executor"] = sweep.request.executor();
  j["conflicts"] = merge.conflicts;
  json registry = json::array();
  for (const auto& op : merge.registry) {
    json r = {{"op", op.kind() == v1::RegistryOp::ADD ? "add" : "remove"}, {"class", op.cls()}};
    if (op.kind() == v1::RegistryOp::ADD) r["attr"] = op.attr();
    r["entries"] = per_class[op.cls()];
    registry.push_back(r);
  }
  j["registry"] = registry;

  std::map<std::string, std::map<std::string, int>> by_playbook;  // playbook -> outcome -> n
  std::map<std::string, int> by_stage;
  std::map<std::string, coord::EntryTally> tallies;  // file + '\n' + key
  json entries = json::array();
  const std::string first_arch = sweep.archs.empty() ? "n150" : sweep.archs.front();
  std::string md_entries;
  for (const auto& e : merge.entries) {
    const inventory::Entry* final_entry = nullptr;
    if (!e.edits.empty() && e.placement != EntryMerge::Placement::kConflict) {
      auto doc = after.find(e.file);
      if (doc != after.end()) final_entry = doc->second.Find(e.key);
    }
    const bool tp = e.key.find("-tensor_parallel-") != std::string::npos;
    const std::vector<std::string> targets =
        tp ? std::vector<std::string>{"n300-llmbox"} : sweep.archs;
    json entry;
    entry["key"] = e.key;
    entry["file"] = e.file;
    entry["playbook"] = e.playbook;
    entry["flavor"] = e.flavor;
    entry["loader"] = e.loader;
    entry["wave"] = e.wave;
    entry["outcome"] = Resolved(final_entry, targets.empty() ? first_arch : targets.front());
    json arch_outcomes = json::object();
    json verdicts = json::object();
    for (const auto& t : targets) {
      arch_outcomes[t] = Resolved(final_entry, t);
      auto o = e.outcomes.find(t);
      if (o != e.outcomes.end()) {
        verdicts[t] = {{"verdict", o->second.verdict()},
                       {"stage", o->second.stage()},
                       {"reason", o->second.reason()}};
      }
    }
    entry["arch_outcomes"] = arch_outcomes;
    entry["verdicts"] = verdicts;
    entry["placement"] = e.placement == EntryMerge::Placement::kTopLevel   ? "top_level"
                         : e.placement == EntryMerge::Placement::kPerArch  ? "arch_overrides"
                         : e.placement == EntryMerge::Placement::kConflict ? "conflict"
                                                                           : "unchanged";
    std::vector<std::string> review = e.review;
    if (e.probe) {
      entry["probe_finding"] = e.probe->probe_finding();
      entry["fix_path"] = e.probe->fix_path();
      entry["why_not_other"] = e.probe->why_not_other();
      entry["output_class"] = e.probe->output_class();
      if (e.probe->fix_path() == "registry" &&
          per_class[e.probe->output_class()] >= in.many_entries) {
        review.push_back(util::StrCat("the registry line for ", e.probe->output_class(),
                                      " touched ", per_class[e.probe->output_class()],
                                      " entries of this sweep"));
      }
    }
    std::string inference;
    for (const auto& [arch, o] : e.outcomes) {
      if (!o.inference_outcome().empty()) inference = o.inference_outcome();
    }
    entry["inference"] = inference.empty() ? json(nullptr) : json(inference);
    entry["review"] = review;
    entry["conflict"] = e.placement == EntryMerge::Placement::kConflict;
    if (!e.conflict.empty()) entry["conflict_reason"] = e.conflict;
    auto ev = in.evidence.find(e.file + "\n" + e.key);
    json evidence = json::array();
    if (ev != in.evidence.end()) {
      for (const auto& link : ev->second) evidence.push_back(link.path);
    }
    entry["evidence"] = evidence;
    entries.push_back(entry);

    // Counted like everywhere else (outcome_counts.h): the first target arch's decision.
    std::map<std::string, v1::EntryOutcome> decisions = e.outcomes;
    if (e.probe) decisions.emplace("", *e.probe);
    const v1::EntryOutcome* deciding = coord::ForFirstArch(decisions, sweep.archs);
    const std::string label = e.placement == EntryMerge::Placement::kConflict ? "conflict"
                              : deciding != nullptr ? coord::OutcomeLabel(*deciding)
                                                    : "";
    tallies[e.file + "\n" + e.key] = {coord::EntryTally::Phase::kDone, label, !review.empty()};
    by_playbook[e.playbook][label.empty() ? "no_result" : label]++;
    if (!entry["outcome"].is_null() && entry["outcome"]["bringup_status"].is_string()) {
      by_stage[entry["outcome"]["bringup_status"].get<std::string>()]++;
    }

    // Markdown for this entry.
    util::StrAppend(&md_entries, "### ", Md(e.key), "\n\n");
    util::StrAppend(&md_entries, "- **loader** `", e.loader, "` · playbook ", e.playbook, " / ",
                    e.flavor, " · wave ", e.wave, "\n");
    util::StrAppend(
        &md_entries, "- **outcome** ", label.empty() ? "no result" : label,
        e.placement == EntryMerge::Placement::kPerArch ? " (per arch: arch_overrides)" : "", "\n");
    if (e.probe) {
      if (!e.probe->probe_finding().empty()) {
        util::StrAppend(&md_entries, "- **probe** ", Md(e.probe->probe_finding()), "\n");
      }
      if (!e.probe->fix_path().empty()) {
        util::StrAppend(&md_entries, "- **fix** ", e.probe->fix_path(),
                        e.probe->why_not_other().empty()
                            ? ""
                            : util::StrCat(" — ", Md(e.probe->why_not_other())),
                        "\n");
      }
    }
    for (const auto& [arch, o] : e.outcomes) {
      util::StrAppend(&md_entries, "- **pytest (", arch.empty() ? "cpu" : arch, ")** ", o.verdict(),
                      o.stage().empty() ? "" : util::StrCat(", ", o.stage()),
                      o.reason().empty() ? "" : util::StrCat(": `", o.reason(), "`"), "\n");
    }
    if (!inference.empty()) util::StrAppend(&md_entries, "- **inference** ", Md(inference), "\n");
    if (!e.yaml_before.empty() || !e.yaml_after.empty()) {
      // The entry's lines (the context covers the whole entry), without the hunk header.
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
      util::StrAppend(&md_entries, "- **YAML**\n\n", Fenced("diff", body));
    }
    // The entry's part of tt-forge-models.patch: its loader's hunks and, for a registry fix,
    // the hunks with its class's line.
    std::string loader_rel = e.loader;
    if (std::string_view(loader_rel).starts_with(kForgePrefix)) {
      loader_rel.erase(0, kForgePrefix.size());
    }
    if (auto h = forge_hunks.find(loader_rel); h != forge_hunks.end() && !h->second.empty()) {
      util::StrAppend(&md_entries, "- **loader diff** `", loader_rel, "`\n\n",
                      Fenced("diff", HunksText(h->second)));
    }
    if (e.probe && std::string_view(e.probe->fix_path()).starts_with("registry") &&
        !e.probe->output_class().empty()) {
      auto h = forge_hunks.find(registry_path);
      if (h != forge_hunks.end()) {
        auto mine = RegistryHunks(h->second, e.probe->output_class());
        if (!mine.empty()) {
          util::StrAppend(&md_entries, "- **registry diff** `", registry_path, "`\n\n",
                          Fenced("diff", HunksText(mine)));
        }
      }
    }
    for (const auto& r : review) util::StrAppend(&md_entries, "- **review** ", Md(r), "\n");
    if (!e.conflict.empty()) util::StrAppend(&md_entries, "- **conflict** ", Md(e.conflict), "\n");
    if (ev != in.evidence.end() && !ev->second.empty()) {
      std::string links;
      for (const auto& link : ev->second) {
        util::StrAppend(&links, links.empty() ? "" : ", ", "[", Md(EvidenceLabel(link)), "](",
                        link.path, ")");
      }
      util::StrAppend(&md_entries, "- **evidence** ", links, "\n");
    }
    md_entries += "\n";
  }
  j["entries"] = entries;
  v1::EntryCounts counts;
  if (in.settle_counts) {
    counts = in.settle_counts(tallies);
  } else {
    std::vector<coord::EntryTally> all;
    for (const auto& [k, t] : tallies) all.push_back(t);
    counts = coord::CountEntries(all);
  }
  const std::map<std::string, int> by_outcome(counts.by_outcome().begin(),
                                              counts.by_outcome().end());
  json totals;
  totals["entries"] = counts.total();
  totals["decided"] = counts.decided();
  totals["by_playbook"] = by_playbook;
  totals["by_outcome"] = by_outcome;
  totals["review"] = counts.review();
  totals["conflicted_entries"] = counts.conflicts();
  totals["conflicts"] = merge.conflicts.size();
  totals["by_stage"] = by_stage;
  j["totals"] = totals;

  BuiltReport out;
  out.json = DumpJson(j);
  std::string& md = out.markdown;
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
  if (!partial.empty()) util::StrAppend(&md, "- **partial**: ", Md(partial), "\n");
  md += "\n";
  util::StrAppend(&md, "## Totals\n\n", totals["decided"].get<int>(), " of ", counts.total(),
                  " entries decided: ");
  {
    std::string parts;
    for (const auto& [o, c] : by_outcome) {
      util::StrAppend(&parts, parts.empty() ? "" : ", ", o, " ", c);
    }
    util::StrAppend(&md, parts.empty() ? "none" : parts, ". Flagged for review: ", counts.review(),
                    ". Entries in conflict: ", counts.conflicts(), ".\n\n");
  }
  util::StrAppend(&md, "| playbook | entries | outcomes |\n|---|---|---|\n");
  for (const auto& [pb, outcomes] : by_playbook) {
    int n = 0;
    std::string parts;
    for (const auto& [o, c] : outcomes) {
      n += c;
      util::StrAppend(&parts, parts.empty() ? "" : ", ", o, ": ", c);
    }
    util::StrAppend(&md, "| ", pb, " | ", n, " | ", parts, " |\n");
  }
  if (!by_stage.empty()) {
    util::StrAppend(&md, "\nStages of the new failures: ");
    std::string parts;
    for (const auto& [s, c] : by_stage)
      util::StrAppend(&parts, parts.empty() ? "" : ", ", s, " ", c);
    util::StrAppend(&md, parts, "\n");
  }
  if (!merge.registry.empty()) {
    util::StrAppend(&md, "\n## Registry (training_utils.py)\n\n");
    for (const auto& op : merge.registry) {
      util::StrAppend(
          &md, "- ",
          op.kind() == v1::RegistryOp::ADD
              ? util::StrCat("add `_register_attr(\"", op.cls(), "\", \"", op.attr(), "\")`")
              : util::StrCat("remove the line for `", op.cls(), "`"),
          " — ", per_class[op.cls()], " entr", per_class[op.cls()] == 1 ? "y" : "ies",
          " of this sweep return this class\n");
    }
  }
  util::StrAppend(&md, "\n## Conflicts\n\n");
  if (merge.conflicts.empty()) {
    md += "None.\n";
  } else {
    for (const auto& c : merge.conflicts) util::StrAppend(&md, "- ", Md(c), "\n");
  }
  util::StrAppend(&md, "\n## Entries\n\n", md_entries);
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
