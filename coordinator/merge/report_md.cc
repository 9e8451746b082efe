// report.md's sections (docs/report.md): the title and the sweep's facts, the totals, the
// registry lines, the conflicts, the failure clusters, the makespan, and each entry's section
// with its YAML lines, its part of the forge patch, its findings and its evidence.

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/diff/apply_diff.h"
#include "common/diff/unified_diff.h"
#include "common/inventory/key.h"
#include "common/registry/registry.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "coordinator/merge/report_internal.h"

namespace triage::merge {
namespace report_internal {
namespace {

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

using inventory::kForgeModelsPrefix;

// training_utils.py's path in tt-forge-models.patch (relative to tt_forge_models).
std::string RegistryPath() {
  return std::string(registry::kTrainingUtilsPath.substr(kForgeModelsPrefix.size()));
}

// An entry's YAML lines before and after the patch (the context covers the whole entry), without
// the hunk header; "" when the merge did not edit it.
std::string YamlLinesMd(const EntryMerge& e) {
  if (e.yaml_before.empty() && e.yaml_after.empty()) return "";
  return util::StrCat("- **YAML**\n\n", Fenced("diff", YamlDiffLines(e)));
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

}  // namespace

std::string Md(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|' || c == '`' || c == '*' || c == '_' || c == '<') out.push_back('\\');
    out.push_back(c);
  }
  return out;
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

// The entry's lines as the patch changes them: its unified diff's lines, with all of the
// entry as context.
std::string YamlDiffLines(const EntryMerge& e) {
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
  return body;
}

// report.md's first line.
std::string Title(const coord::SweepRecord& sweep) {
  return util::StrCat("# Sweep ", sweep.id, " — ", coord::SweepStateName(sweep.state));
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
                    o.reason().empty() ? "" : util::StrCat(": `", o.reason(), "`"),
                    o.command_check().empty() ? "" : util::StrCat(" · ", o.command_check()), "\n");
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

// report.md's "Failure clusters" section; "" when nothing is left failing.
std::string ClustersMd(const std::vector<FailureCluster>& clusters,
                       const std::vector<std::string>& archs) {
  if (clusters.empty()) return "";
  std::string md =
      "\n## Failure clusters\n\nWhat the patch leaves failing, grouped by the signature of the "
      "reason (numbers written N), largest first: one bug to file per cluster (its id names it "
      "in `sweep patch --issue-links`).\n\n"
      "| entries | id | signature | entries (archs when not all) |\n|---|---|---|---|\n";
  // A table row stays readable at tt-xla's size: the first kMaxMembers entries and the
  // signature's first kMaxSignatureBytes; report.json's `clusters` has them all.
  constexpr std::size_t kMaxMembers = 20;
  constexpr std::size_t kMaxSignatureBytes = 300;
  for (const auto& c : clusters) {
    std::string members;
    for (std::size_t i = 0; i < c.entries.size() && i < kMaxMembers; ++i) {
      const auto& m = c.entries[i];
      util::StrAppend(&members, members.empty() ? "" : ", ", Code(m.key));
      if (m.archs.size() != archs.size()) {
        util::StrAppend(&members, " (", util::StrJoin(m.archs, ", "), ")");
      }
    }
    if (c.entries.size() > kMaxMembers) {
      util::StrAppend(&members, " and ", c.entries.size() - kMaxMembers,
                      " more (report.json's `clusters`)");
    }
    std::string signature(util::TruncateUtf8(std::string_view(c.signature), kMaxSignatureBytes));
    if (signature.size() < c.signature.size()) signature += "…";
    util::StrAppend(&md, "| ", c.entries.size(), " | ", Code(c.id), " | ", Md(signature), " | ",
                    members, " |\n");
  }
  return md;
}

// ---- Measured times: each entry's pytest durations, the sweep's makespan (docs/report.md)

namespace {

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

}  // namespace

// report.md's "Makespan: predicted vs actual": the sweep's figures and one row per lane; ""
// when the sweep planned no shard.
std::string MakespanMd(const Makespan& m) {
  if (m.lanes.empty()) return "";
  const int entries = m.entries_recorded + m.entries_estimated;
  const std::string basis =
      m.Basis() == "estimates"
          ? util::StrCat("**estimates only**: none of the ", entries,
                         " entries had a trusted recorded duration, so the playbooks' estimates "
                         "for real models stand in")
      : m.Basis() == "mixed"
          ? util::StrCat("from recorded durations for ", m.entries_recorded, " of ", entries,
                         " entries, the playbooks' estimates for the rest")
          : util::StrCat("from recorded durations for all ", entries, " entries");
  std::string md = util::StrCat(
      "\n## Makespan: predicted vs actual\n\nPredicted ", HumanSeconds(m.predicted_seconds),
      " (the slowest lane; ", basis, "), actual ", HumanSeconds(m.actual_seconds),
      " (the sweep's start to its last accepted result). Lanes run in parallel. Device time: "
      "what planning expected of the lane's shards, and what their taken results ran; a lane's "
      "predicted time is its predicted device time over its agents, its actual time runs from "
      "its first result's start to its last.\n\n"
      "| lane | shards | agents | predicted device | actual device | predicted | actual |\n"
      "|---|---|---|---|---|---|---|\n");
  int backups = 0;
  for (const auto& l : m.lanes) {
    util::StrAppend(&md, "| ", Md(l.lane), " | ", l.shards, " | ", l.agents, " | ",
                    HumanSeconds(l.predicted_device_seconds), " | ",
                    HumanSeconds(l.actual_device_seconds), " | ", HumanSeconds(l.predicted_seconds),
                    " | ", HumanSeconds(l.actual_seconds), " |\n");
    backups += l.backups;
  }
  if (backups > 0) {
    util::StrAppend(&md,
                    "\nBackup leases of stragglers (a second attempt on an idle agent; the first "
                    "accepted result decided):\n\n| lane | backups | won | device time they ran "
                    "|\n|---|---|---|---|\n");
    for (const auto& l : m.lanes) {
      if (l.backups == 0) continue;
      util::StrAppend(&md, "| ", Md(l.lane), " | ", l.backups, " | ", l.backups_won, " | ",
                      HumanSeconds(l.backup_device_seconds), " |\n");
    }
  }
  return md;
}

}  // namespace report_internal

std::string EvidenceLabel(const EvidenceLink& link) {
  const std::string name = link.path.substr(link.path.rfind('/') + 1);
  return util::StrCat(link.arch.empty() ? "cpu" : link.arch,
                      link.wave > 1 ? util::StrCat(" wave ", link.wave) : "", ": ", name);
}

}  // namespace triage::merge
