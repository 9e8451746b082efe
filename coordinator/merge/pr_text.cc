#include "coordinator/merge/pr_text.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

#include "common/util/strings.h"
#include "coordinator/merge/pr_body_layout.h"
#include "coordinator/merge/report_text.h"
#include "nlohmann/json.hpp"

namespace triage::merge {
namespace {

using nlohmann::json;
using pr_layout::Group;
using pr_layout::kBodyBudget;
using pr_layout::Part;
using pr_layout::RenderParts;
using report_text::Code;
using report_text::Short;
using report_text::Str;

std::string Commit12(const std::string& sha) { return sha.substr(0, 12); }

// "status: X, assert_pcc: false, bringup_status: Y, reason: ..." of one outcome.
std::string OutcomeText(const json& o) {
  std::vector<std::string> parts;
  if (!Str(o, "status").empty()) parts.push_back("status: " + Str(o, "status"));
  if (o.contains("assert_pcc") && o["assert_pcc"].is_boolean() && !o["assert_pcc"].get<bool>()) {
    parts.push_back("assert_pcc: false");
  }
  if (o.contains("markers") && o["markers"].is_array() && !o["markers"].empty()) {
    std::vector<std::string> m;
    for (const auto& x : o["markers"]) m.push_back(x.get<std::string>());
    parts.push_back("markers: [" + util::StrJoin(m, ", ") + "]");
  }
  if (!Str(o, "bringup_status").empty())
    parts.push_back("bringup_status: " + Str(o, "bringup_status"));
  if (!Str(o, "reason").empty())
    parts.push_back("reason: \"" + Short(Str(o, "reason"), 200) + "\"");
  return util::StrJoin(parts, ", ");
}

// The kind an entry's change is listed under, from its outcome (per arch when they differ).
std::string TriageKind(const json& e) {
  const json& o = e.contains("outcome") ? e["outcome"] : json();
  if (Str(e, "placement") == "arch_overrides") return "Per-arch outcomes";
  const std::string status = Str(o, "status");
  if (status == "EXPECTED_PASSING") return "Promoted to EXPECTED_PASSING";
  if (status == "KNOWN_FAILURE_XFAIL")
    return "KNOWN_FAILURE_XFAIL with the failure the device shows";
  if (status == "NOT_SUPPORTED_SKIP") return "NOT_SUPPORTED_SKIP";
  return status.empty() ? "" : "Status " + status;
}

// What the device runs showed, per arch: "n150 pass; p150 failure at FAILED_RUNTIME".
std::string Verdicts(const json& e) {
  if (!e.contains("verdicts") || !e["verdicts"].is_object()) return "";
  std::vector<std::string> parts;
  for (const auto& [arch, v] : e["verdicts"].items()) {
    std::string s = arch + " " + Str(v, "verdict");
    std::string upper = Str(v, "verdict");
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const std::string stage = Str(v, "stage");
    if (!stage.empty() && stage != "PASSED" && stage != upper) s += " at " + stage;
    parts.push_back(s);
  }
  return util::StrJoin(parts, "; ");
}

std::string EvidenceLink(const json& e, const PrOptions& o) {
  return report_text::EvidenceLink(e, o.evidence_url);
}

// One line of a triage sweep's entry: its change and why.
std::string TriageLine(const json& e, const PrOptions& o) {
  std::string change;
  if (Str(e, "placement") == "arch_overrides" && e["arch_outcomes"].is_object()) {
    std::vector<std::string> parts;
    for (const auto& [arch, out] : e["arch_outcomes"].items()) {
      parts.push_back(arch + ": " + OutcomeText(out));
    }
    change = util::StrJoin(parts, "; ");
  } else {
    change = OutcomeText(e["outcome"]);
  }
  std::string why = Str(e, "playbook");
  if (!Str(e, "fix_path").empty() && Str(e, "fix_path") != "none") {
    why += ", fix " + Code(Str(e, "fix_path"));
  }
  if (e.contains("loss_target") && e["loss_target"].is_object() &&
      !Str(e["loss_target"], "reason").empty()) {
    why += "; loss target " + Short(Str(e["loss_target"], "reason"), 140);
  }
  const std::string verdicts = Verdicts(e);
  if (!verdicts.empty()) why += "; verified: " + verdicts;
  return util::StrCat("- ", Code(Str(e, "key")), ": ", change, ". Why: ", why, EvidenceLink(e, o),
                      "\n");
}

// What the fleet's confirmation runs say of a decision: "confirmed by 2 runs on the fleet".
std::string FleetText(const std::string& decision, int runs) {
  if (decision == "confirmed") {
    return util::StrCat("confirmed by ", runs, " run", runs == 1 ? "" : "s", " on the fleet");
  }
  if (decision == "no_confirm") return "";  // the section says it
  if (decision.empty()) return "";
  if (decision == "already") return "already at target";
  return util::StrCat(decision, runs > 0 ? util::StrCat(" after ", runs, " fleet runs") : "");
}

// One line of a nightly entry (its items: one per arch): the archs, the change (per arch when
// they differ), and why: the tags and PCC figures behind it and the fleet's confirmation.
std::string NightlyLine(const std::vector<const json*>& items) {
  std::vector<std::string> archs;
  std::map<std::string, std::vector<std::string>> by_change;
  std::set<std::string> tags, rules;
  std::map<std::string, std::vector<std::string>> fleet;  // what the fleet said -> archs
  std::string figure;
  for (const json* item : items) {
    const std::string arch = Str(*item, "arch");
    archs.push_back(arch);
    by_change[Short(Str(*item, "change"), 200)].push_back(arch);
    if (!Str(*item, "rule").empty()) rules.insert(Str(*item, "rule"));
    int runs = 0;
    for (const char* field : {"confirmations", "nightly"}) {
      if (!item->contains(field) || !(*item)[field].is_array()) continue;
      for (const auto& r : (*item)[field]) {
        runs += std::string_view(field) == "confirmations";
        if (r.contains("guidance") && r["guidance"].is_array()) {
          for (const auto& g : r["guidance"]) {
            if (g.is_string()) tags.insert(g.get<std::string>());
          }
        }
        if (figure.empty() && r.contains("pcc") && r["pcc"].is_number()) {
          figure = util::StrCat("pcc ", r["pcc"].get<double>());
          if (r.contains("pcc_threshold") && r["pcc_threshold"].is_number()) {
            figure += util::StrCat(" (required ", r["pcc_threshold"].get<double>(), ")");
          }
          figure += util::StrCat(" on ", arch);
        }
      }
    }
    const std::string f = FleetText(Str(*item, "decision"), runs);
    if (!f.empty()) fleet[f].push_back(arch);
  }
  std::string line =
      util::StrCat("- ", Code(Str(*items.front(), "key")), " on ", util::StrJoin(archs, ", "));
  if (by_change.size() == 1) {
    if (!by_change.begin()->first.empty()) line += ": " + by_change.begin()->first;
  } else {
    std::vector<std::string> parts;
    for (const auto& [change, which] : by_change) {
      parts.push_back(
          util::StrCat(util::StrJoin(which, ", "), " ", change.empty() ? "unchanged" : change));
    }
    line += ": " + util::StrJoin(parts, "; ");
  }
  std::vector<std::string> why;
  if (!rules.empty()) {
    why.push_back(
        Short(util::StrJoin(std::vector<std::string>(rules.begin(), rules.end()), "; "), 200));
  }
  if (!tags.empty()) {
    why.push_back("guidance " +
                  util::StrJoin(std::vector<std::string>(tags.begin(), tags.end()), ", "));
  }
  if (!figure.empty()) why.push_back(figure);
  // Said once when every arch says it, else with the archs that do.
  for (const auto& [f, which] : fleet) {
    why.push_back(fleet.size() == 1 && which.size() == archs.size()
                      ? f
                      : util::StrCat(util::StrJoin(which, ", "), " ", f));
  }
  if (!why.empty()) line += ". Why: " + util::StrJoin(why, "; ");
  return line + "\n";
}

// A group's name in a title line ("14 promoted, 8 xfail").
std::string ShortKind(const std::string& title) {
  static constexpr std::pair<std::string_view, std::string_view> kShort[] = {
      {"Promoted", "promoted"},         {"Demoted", "demoted"},
      {"Skipped", "skipped"},           {"Unskipped", "unskipped"},
      {"Skips", "skips refreshed"},     {"Thresholds", "thresholds"},
      {"Reasons", "reasons refreshed"}, {"New entries", "new entries"},
      {"KNOWN_FAILURE_XFAIL", "xfail"}, {"NOT_SUPPORTED_SKIP", "skip"},
      {"Per-arch", "per-arch"}};
  for (const auto& [prefix, name] : kShort) {
    if (title.starts_with(prefix)) return std::string(name);
  }
  return title;
}

bool Changed(const json& e) { return e.contains("outcome") && e["outcome"].is_object(); }

// What a shared fix's wave checked, as its PR line ends.
std::string WaveLine(const json& f) {
  const json w = f.value("wave", json());
  if (!w.is_object()) return "; no wave checked what else it can affect";
  const std::size_t checked =
      w.value("passing", json::array()).size() + w.value("selected", json::array()).size();
  if (checked == 0) {
    return util::StrCat("; its wave (shard ", Str(w, "shard"),
                        ") found no other loader importing it");
  }
  return util::StrCat("; its wave (shard ", Str(w, "shard"), ") found ",
                      w.value("passing", json::array()).size(), " passing and ",
                      w.value("selected", json::array()).size(),
                      " other selected entries importing it unbroken");
}

// A command sweep's shared fixes in this repository (report.json's shared_fixes, those that
// landed), listed before the per-entry changes: each fixes several entries at once
// (docs/remediation.md, "Shared fixes beyond the loader").
std::string SharedFixesSection(const json& report, std::string_view repo) {
  std::string lines;
  for (const auto& f : report.value("shared_fixes", json::array())) {
    const std::string file = Str(f, "file");
    if (!f.value("landed", false) || !std::string_view(file).starts_with(repo)) continue;
    std::vector<std::string> keys;
    for (const auto& k : f.value("fixed", json::array()))
      keys.push_back(Code(k.get<std::string>()));
    util::StrAppend(
        &lines, "- ", Code(file.substr(repo.size())), " (shard ", Str(f, "shard"),
        Str(f, "fingerprint").empty() ? "" : ", fingerprint " + Code(Str(f, "fingerprint")),
        "): fixes ", keys.size(), " entr", keys.size() == 1 ? "y" : "ies",
        keys.empty() ? "" : ": " + util::StrJoin(keys, ", "), WaveLine(f), "\n");
  }
  if (lines.empty()) return "";
  return "\n## Shared fixes\n\nChanges outside a loader directory that fix several entries at "
         "once, each with the entries the farm verified it fixed (docs/remediation.md).\n\n" +
         lines;
}

// A command sweep's results held for a reviewer (report.json's workarounds): what the farm
// found, and the entries that keep their YAML for it (docs/remediation.md, "Guards").
std::string WorkaroundsSection(const json& report) {
  std::string lines;
  for (const auto& h : report.value("workarounds", json::array())) {
    std::vector<std::string> keys, found;
    for (const auto& k : h.value("entries", json::array())) {
      if (k.is_string()) keys.push_back(Code(k.get<std::string>()));
    }
    for (const auto& w : h.value("found", json::array())) {
      found.push_back(util::StrCat(Str(w, "guard"), " at ", Code(Str(w, "where")), ": ",
                                   Code(Short(Str(w, "what"), 160))));
    }
    util::StrAppend(&lines, "- shard ", Str(h, "shard"), " (", keys.size(), " entr",
                    keys.size() == 1 ? "y" : "ies",
                    keys.empty() ? "" : ": " + util::StrJoin(keys, ", "),
                    "): ", util::StrJoin(found, "; "), "\n");
  }
  if (lines.empty()) return "";
  return "\n## Held for review: workarounds\n\nCommand changes the farm found a workaround in "
         "(a lowered threshold without a measured floor, fewer layers, CPU offload, shortened "
         "inputs, padding, suppressed errors, skipped tests): not in this PR; their entries keep "
         "their YAML until a reviewer decides (docs/remediation.md, \"Guards\").\n\n" +
         lines;
}

// An entry this text does not carry: left out by the landing, or in another part.
bool Skip(const PrOptions& o, const std::string& key) {
  return o.left_out.count(key) > 0 || (o.only && !o.only->count(key));
}

Group LeftOutGroup(const PrOptions& o) {
  Group g{"Left out of this PR", {}};
  for (const auto& [key, why] : o.left_out) {
    g.lines.push_back(util::StrCat("- ", Code(key), ": ", Short(why, 240), "\n"));
  }
  return g;
}

// Entries flagged for a person that this PR carries. A nightly sweep's --no-confirm changes
// have a part of their own: their flag says nothing more.
Group ReviewGroup(const json& entries, const PrOptions& o, bool forge_only) {
  Group g{"Needs a person", {}};
  for (const auto& e : entries) {
    if (!e["review"].is_array() || e["review"].empty() || Skip(o, Str(e, "key"))) continue;
    if (forge_only && (Str(e, "fix_path").empty() || Str(e, "fix_path") == "none")) continue;
    std::vector<std::string> flags;
    for (const auto& r : e["review"]) flags.push_back(Short(r.get<std::string>(), 240));
    g.lines.push_back(
        util::StrCat("- ", Code(Str(e, "key")), ": ", util::StrJoin(flags, "; "), "\n"));
  }
  return g;
}

// The parts after the changes: what needs a person and what the landing left out.
void AddReviewParts(std::vector<Part>& parts, Group review, Group left_out) {
  if (!review.lines.empty()) {
    const std::size_t n = review.lines.size();
    review.title.clear();
    parts.push_back({util::StrCat("\n## Needs a person (", n, ")\n"),
                     "\nLanded as the sweep decided; a reviewer should check these:\n",
                     {std::move(review)}});
  }
  if (!left_out.lines.empty()) {
    const std::size_t n = left_out.lines.size();
    left_out.title.clear();
    parts.push_back(
        {util::StrCat("\n## Left out of this PR (", n, ")\n"), "", {std::move(left_out)}});
  }
}

std::string EvidenceSection(const json& report, const PrOptions& o) {
  const std::string id = Str(report, "sweep");
  std::string md = "\n## Evidence\n\n";
  if (!o.evidence_url.empty()) {
    md += util::StrCat("Each entry links its evidence under ", o.evidence_url, ". ");
  }
  md += util::StrCat("`triagectl sweep report ", id,
                     " --out DIR` writes report.md, report.json and evidence/ (each entry's "
                     "JUnit files, logs and probe documents).\n");
  return md;
}

// The sweep's line: id, executor, playbooks, archs, commits (and runs).
std::string SummaryHead(const json& report, const PrOptions& o) {
  const json& commits = report["commits"];
  std::vector<std::string> playbooks, archs;
  for (const auto& p : report.value("playbooks", json::array())) playbooks.push_back(p);
  for (const auto& a : report.value("archs", json::array())) archs.push_back(a);
  std::string md = util::StrCat(
      "Sweep ", Code(Str(report, "sweep")), " (executor ", Code(Str(report, "executor")),
      playbooks.empty() ? "" : "; playbooks " + util::StrJoin(playbooks, ", "),
      archs.empty() ? "" : "; archs " + util::StrJoin(archs, ", "), ") read tt-xla ",
      Code(Commit12(Str(commits, "tt-xla"))), " and tt-forge-models ",
      Code(Commit12(Str(commits, "tt_forge_models"))), ".");
  if (report.contains("nightly") && report["nightly"].is_object()) {
    const json& intake = report["nightly"].value("intake", json::object());
    std::vector<std::string> runs;
    for (const auto& r : intake.value("run_labels", json::array())) runs.push_back(Code(r));
    md += util::StrCat(
        " Nightly runs (oldest first): ",
        runs.empty() ? util::StrCat(intake.value("runs", 0), " runs") : util::StrJoin(runs, ", "),
        ".");
  }
  if (!o.ttxla_base.empty() || !o.forge_base.empty()) {
    md += " Applied entry by entry onto";
    if (!o.ttxla_base.empty()) md += " tt-xla " + Code(Commit12(o.ttxla_base));
    if (!o.forge_base.empty()) md += " tt-forge-models " + Code(Commit12(o.forge_base));
    md += ", later than the sweep's commits.";
  }
  if (!Str(report, "partial").empty()) {
    md += " **The sweep's results are partial:** " + Str(report, "partial") + ".";
  }
  return md + "\n";
}

// A nightly sweep's sections (report.json's nightly.sections), each entry once: in the section
// of its label, its items (one per arch) in one line.
struct NightlyKindText {
  const char* id;
  const char* title;
  const char* short_name;  // in the title line
  bool change;             // its entries change in the patch
};
constexpr NightlyKindText kNightlyText[] = {
    {"promoted", "Promoted", "promoted", true},
    {"demoted", "Demoted to KNOWN_FAILURE_XFAIL", "demoted", true},
    {"skipped", "Skipped (NOT_SUPPORTED_SKIP)", "skipped", true},
    {"unskipped", "Unskipped (NOT_SUPPORTED_SKIP to KNOWN_FAILURE_XFAIL)", "unskipped", true},
    {"skips_refreshed", "Skips with refreshed reasons", "skips refreshed", true},
    {"thresholds", "Thresholds changed", "thresholds", true},
    {"reasons", "Reasons refreshed", "reasons refreshed", true},
    {"new_entries", "New entries", "new entries", true},
    {"flaky", "Flaky (not changed)", "flaky", false},
    {"unconfirmed", "Unconfirmed (not changed)", "unconfirmed", false},
    {"already", "Already at target", "already at target", false},
    {"flagged", "Flagged for a person (not changed)", "flagged", false},
};

PrText TtXlaText(const json& report, const PrOptions& o) {
  const json& entries = report["entries"];
  std::set<std::string> files;
  int changed = 0;
  for (const auto& e : entries) {
    if (!Changed(e) || Skip(o, Str(e, "key"))) continue;
    ++changed;
    files.insert(Str(e, "file"));
  }
  const bool nightly = report.contains("nightly") && report["nightly"].is_object();
  const bool recheck = report.contains("recheck") && report["recheck"].is_object();
  Part confirmed{"\n## Changes by kind\n", "", {}};
  Part proposed{"\n## Proposed from the nightly alone (--no-confirm)\n",
                "\nNot confirmed on the fleet: the sweep decided these from the nightly runs "
                "alone (`--no-confirm`). A sweep without it confirms them on the devices.\n",
                {}};
  Part unchanged{"\n## Not changed\n", "", {}};
  PrText t;
  // Kind, entries: the title's counts and the summary's table.
  std::vector<std::pair<std::string, std::size_t>> table;
  std::string title_counts;
  if (nightly) {
    const json& sections = report["nightly"].value("sections", json::object());
    for (const auto& k : kNightlyText) {
      std::vector<std::string> order;
      std::map<std::string, std::vector<const json*>> by_key;
      if (sections.contains(k.id) && sections[k.id].is_array()) {
        for (const auto& item : sections[k.id]) {
          const std::string key = Str(item, "key");
          if (Skip(o, key)) continue;
          auto& items = by_key[key];
          if (items.empty()) order.push_back(key);
          items.push_back(&item);
        }
      }
      if (order.empty()) continue;
      Group sure{k.title, {}}, alone{k.title, {}};
      for (const auto& key : order) {
        // Only a change is "proposed from the nightly alone"; what stays is listed once.
        bool no_confirm = false;
        for (const json* item : by_key[key]) no_confirm |= Str(*item, "decision") == "no_confirm";
        (no_confirm && k.change ? alone : sure).lines.push_back(NightlyLine(by_key[key]));
      }
      table.emplace_back(k.title, order.size());
      t.counts[k.id] = order.size();
      if (k.change) {
        util::StrAppend(&title_counts, title_counts.empty() ? "" : ", ", order.size(), " ",
                        k.short_name);
      }
      Part& home = k.change ? confirmed : unchanged;
      if (!sure.lines.empty()) home.groups.push_back(std::move(sure));
      if (!alone.lines.empty())
        (k.change ? proposed : unchanged).groups.push_back(std::move(alone));
    }
  } else {
    std::map<std::string, std::size_t> group_of;
    for (const auto& e : entries) {
      if (!Changed(e) || Skip(o, Str(e, "key"))) continue;
      const std::string title = TriageKind(e);
      auto [it, fresh] = group_of.try_emplace(title, confirmed.groups.size());
      if (fresh) confirmed.groups.push_back({title, {}});
      confirmed.groups[it->second].lines.push_back(TriageLine(e, o));
    }
    for (const auto& e : entries) {
      if (Changed(e) && !Skip(o, Str(e, "key"))) ++t.counts[Str(e["outcome"], "status")];
    }
    for (const auto& g : confirmed.groups) {
      table.emplace_back(g.title, g.lines.size());
      util::StrAppend(&title_counts, title_counts.empty() ? "" : ", ", g.lines.size(), " ",
                      ShortKind(g.title));
    }
    Group g{"Unchanged (left as they are)", {}};
    for (const auto& e : entries) {
      if (Changed(e) || Skip(o, Str(e, "key"))) continue;
      g.lines.push_back(util::StrCat("- ", Code(Str(e, "key")), " (", Str(e, "playbook"), ")\n"));
    }
    if (!g.lines.empty()) {
      table.emplace_back(g.title, g.lines.size());
      unchanged.groups.push_back(std::move(g));
    }
  }
  t.title = util::StrCat(recheck   ? "Skipped entries rechecked "
                         : nightly ? "Nightly maintenance "
                                   : "Triage sweep ",
                         Str(report, "sweep"), o.part.empty() ? "" : " (" + o.part + ")", ": ",
                         title_counts.empty() ? "no YAML changes" : title_counts);
  std::string head = "## Summary\n\n" + SummaryHead(report, o);
  util::StrAppend(&head, "\nThis PR edits ", changed, " entries in ", files.size(),
                  " test-config file", files.size() == 1 ? "" : "s");
  if (!o.forge_commit.empty()) {
    util::StrAppend(&head, " and moves `third_party/tt_forge_models` to ", Code(o.forge_commit),
                    " (the loader and registry changes, in tt-forge-models' own PR)");
  }
  head += ".\n";
  if (!proposed.groups.empty()) {
    std::size_t n = 0;
    for (const auto& g : proposed.groups) n += g.lines.size();
    util::StrAppend(&head, "\n**", n,
                    " of the changes were decided from the nightly runs alone "
                    "(`--no-confirm`): no device confirmed them.**\n");
  }
  if (!table.empty()) {
    head += "\n| Kind | Entries |\n| --- | ---: |\n";
    for (const auto& [kind, n] : table) util::StrAppend(&head, "| ", kind, " | ", n, " |\n");
  }
  head += SharedFixesSection(report, "tt-xla/");
  head += WorkaroundsSection(report);
  std::vector<Part> parts;
  for (Part* p : {&confirmed, &proposed, &unchanged}) {
    if (!p->groups.empty()) parts.push_back(std::move(*p));
  }
  AddReviewParts(parts, ReviewGroup(entries, o, false), LeftOutGroup(o));
  const std::string evidence = EvidenceSection(report, o);
  const std::string hint = util::StrCat("`triagectl sweep report ", Str(report, "sweep"), "`");
  t.body = head + RenderParts(parts, head.size() + evidence.size(), hint) + evidence;
  return t;
}

PrText ForgeText(const json& report, const PrOptions& o) {
  const json& entries = report["entries"];
  std::string md = "## Summary\n\n" + SummaryHead(report, o);
  md +=
      "\nThe loader and registry changes of the sweep; tt-xla's PR moves its submodule here and "
      "updates the test configs.\n";
  int registry_lines = 0;
  std::string registry;
  for (const auto& r : report.value("registry", json::array())) {
    const std::string cls = Str(r, "class");
    std::vector<std::string> keys;
    std::string why;
    for (const auto& e : entries) {
      if (Str(e, "output_class") != cls ||
          Str(e, "fix_path").find("registry") == std::string::npos) {
        continue;
      }
      keys.push_back(Code(Str(e, "key")));
      if (why.empty() && e.contains("loss_target") && e["loss_target"].is_object()) {
        why = Str(e["loss_target"], "reason");
      }
    }
    ++registry_lines;
    registry += Str(r, "op") == "remove"
                    ? util::StrCat("- remove the line for ", Code(cls))
                    : util::StrCat("- ", Code(util::StrCat("_register_attr(\"", cls, "\", \"",
                                                           Str(r, "attr"), "\")")));
    registry += util::StrCat(" for ", keys.empty() ? util::StrCat(r.value("entries", 0), " entries")
                                                   : util::StrJoin(keys, ", "));
    if (!why.empty()) registry += ". Why: " + Short(why, 200);
    registry += "\n";
  }
  std::map<std::string, std::vector<std::string>> by_loader;
  for (const auto& e : entries) {
    const std::string fix = Str(e, "fix_path");
    if (Skip(o, Str(e, "key")) || fix.empty() || fix == "none" ||
        (fix.find("loader") == std::string::npos && fix.find("override") == std::string::npos)) {
      continue;
    }
    // A command's loader edits that did not land (the farm overruled it: docs/remediation.md).
    bool landed = true;
    for (const auto& r : e.value("review", json::array())) {
      landed &= !(r.is_string() && r.get<std::string>().starts_with("not landed: "));
    }
    if (!landed) continue;
    std::string loader = Str(e, "loader");
    if (loader.starts_with("third_party/tt_forge_models/")) loader = loader.substr(28);
    std::string why = Short(Str(e, "probe_finding"), 200);
    if (e.contains("loss_target") && e["loss_target"].is_object() &&
        !Str(e["loss_target"], "reason").empty()) {
      why = "loss target " + Short(Str(e["loss_target"], "reason"), 200);
    }
    by_loader[loader].push_back(util::StrCat(
        "- ", Code(Str(e, "key")), ": ", Code(fix), why.empty() ? "" : ". Why: " + why,
        Verdicts(e).empty() ? "" : "; verified: " + Verdicts(e), EvidenceLink(e, o), "\n"));
  }
  PrText t;
  std::size_t shared = 0;
  for (const auto& f : report.value("shared_fixes", json::array())) {
    shared += f.value("landed", false) && Str(f, "file").starts_with("tt_forge_models/");
  }
  t.title = util::StrCat(
      "Triage sweep ", Str(report, "sweep"), ": ", registry_lines, " registry line",
      registry_lines == 1 ? "" : "s", ", ", by_loader.size(), " loader",
      by_loader.size() == 1 ? "" : "s",
      shared == 0 ? "" : util::StrCat(", ", shared, " shared fix", shared == 1 ? "" : "es"));
  md += SharedFixesSection(report, "tt_forge_models/");
  md += WorkaroundsSection(report);
  md += "\n## Changes by kind\n";
  if (registry_lines > 0) {
    md += util::StrCat("\n### Registry lines in training_utils.py (", registry_lines, ")\n\n",
                       registry);
  }
  if (!by_loader.empty()) {
    md += util::StrCat("\n### Loaders (", by_loader.size(), ")\n");
    for (const auto& [loader, lines] : by_loader) {
      md += "\n" + Code(loader) + ":\n\n";
      for (const auto& l : lines) md += l;
    }
  }
  std::vector<Part> parts;
  AddReviewParts(parts, ReviewGroup(entries, o, true), LeftOutGroup(o));
  const std::string evidence = EvidenceSection(report, o);
  const std::string hint = util::StrCat("`triagectl sweep report ", Str(report, "sweep"), "`");
  t.body = md + RenderParts(parts, md.size() + evidence.size(), hint) + evidence;
  return t;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::set<std::string>>> SplitParts(const json& report,
                                                                        const std::string& by) {
  if (by != "file" && by != "kind") {
    return absl::InvalidArgumentError(util::StrCat("--split-by: '", by, "' is not file or kind"));
  }
  if (!report.is_object() || !report.contains("entries") || !report["entries"].is_array()) {
    return absl::InvalidArgumentError("report.json has no 'entries': not a sweep's report");
  }
  std::map<std::string, std::set<std::string>> parts;
  for (const auto& e : report["entries"]) {
    if (!Changed(e)) continue;
    std::string part = by == "file" ? Str(e, "file") : Str(e, "label");
    if (part.empty()) part = Str(e["outcome"], "status");
    parts[part].insert(Str(e, "key"));
  }
  return parts;
}

absl::StatusOr<PrText> BuildPrText(const json& report, PrRepo repo, const PrOptions& options) {
  for (const char* field : {"sweep", "commits", "entries"}) {
    if (!report.is_object() || !report.contains(field)) {
      return absl::InvalidArgumentError(
          util::StrCat("report.json has no '", field, "': not a sweep's report"));
    }
  }
  if (!report["entries"].is_array() || !report["commits"].is_object()) {
    return absl::InvalidArgumentError("report.json: 'entries' must be a list, 'commits' an object");
  }
  return repo == PrRepo::kForge ? ForgeText(report, options) : TtXlaText(report, options);
}

}  // namespace triage::merge
