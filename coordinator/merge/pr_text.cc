#include "coordinator/merge/pr_text.h"

#include <cctype>
#include <set>
#include <vector>

#include "common/util/strings.h"
#include "nlohmann/json.hpp"

namespace triage::merge {
namespace {

using nlohmann::json;

std::string Str(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

std::string Short(std::string s, std::size_t n = 160) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

// Inline code: backticks inside become quotes, so the span cannot end early.
std::string Code(std::string s) {
  for (char& c : s) {
    if (c == '`') c = '\'';
  }
  return "`" + s + "`";
}

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
  if (!e.contains("evidence") || !e["evidence"].is_array()) return "";
  std::string first;
  for (const auto& f : e["evidence"]) {
    const std::string path = f.is_string() ? f.get<std::string>() : "";
    if (path.find("/junit/") != std::string::npos) {
      first = path;
      break;
    }
    if (first.empty()) first = path;
  }
  if (first.empty()) return "";
  if (o.evidence_url.empty()) return " (evidence: " + Code(first) + ")";
  std::string base = o.evidence_url;
  if (!base.ends_with("/")) base += "/";
  return " ([evidence](" + base + first + "))";
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

// One line of a nightly section's item: the change, the tag or figure behind it, the runs.
std::string NightlyLine(const json& item) {
  std::string line = util::StrCat("- ", Code(Str(item, "key")), " on ", Str(item, "arch"));
  if (!Str(item, "change").empty()) line += ": " + Short(Str(item, "change"), 200);
  std::set<std::string> tags;
  std::vector<std::string> figures;
  int confirmed = 0, total = 0;
  if (item.contains("confirmations") && item["confirmations"].is_array()) {
    for (const auto& c : item["confirmations"]) {
      ++total;
      confirmed += Str(c, "outcome") == "passed";
      if (c.contains("guidance") && c["guidance"].is_array()) {
        for (const auto& g : c["guidance"]) tags.insert(g.get<std::string>());
      }
      if (c.contains("pcc") && c["pcc"].is_number()) {
        std::string f = util::StrCat("pcc ", c["pcc"].get<double>());
        if (c.contains("pcc_threshold") && c["pcc_threshold"].is_number()) {
          f += util::StrCat(" (required ", c["pcc_threshold"].get<double>(), ")");
        }
        figures.push_back(f);
      }
    }
  }
  std::vector<std::string> why;
  if (!tags.empty()) {
    why.push_back("guidance " +
                  util::StrJoin(std::vector<std::string>(tags.begin(), tags.end()), ", "));
  }
  if (!figures.empty()) why.push_back(figures.front());
  if (total > 0) why.push_back(util::StrCat(confirmed, "/", total, " confirmation runs passed"));
  if (!Str(item, "decision").empty()) why.push_back("decision " + Str(item, "decision"));
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

struct Group {
  std::string title;
  std::vector<std::string> lines;
};

void AppendGroups(std::string& md, const std::vector<Group>& groups) {
  for (const auto& g : groups) {
    if (g.lines.empty()) continue;
    util::StrAppend(&md, "\n### ", g.title, " (", g.lines.size(), ")\n\n");
    for (const auto& l : g.lines) md += l;
  }
}

bool Changed(const json& e) { return e.contains("outcome") && e["outcome"].is_object(); }

std::string LeftOutSection(const PrOptions& o) {
  if (o.left_out.empty()) return "";
  std::string md = util::StrCat("\n## Left out of this PR (", o.left_out.size(), ")\n\n");
  for (const auto& [key, why] : o.left_out) md += util::StrCat("- ", Code(key), ": ", why, "\n");
  return md;
}

std::string ReviewSection(const json& entries, const PrOptions& o, bool forge_only) {
  std::vector<std::string> lines;
  for (const auto& e : entries) {
    if (!e["review"].is_array() || e["review"].empty() || o.left_out.count(Str(e, "key"))) continue;
    if (forge_only && (Str(e, "fix_path").empty() || Str(e, "fix_path") == "none")) continue;
    std::vector<std::string> flags;
    for (const auto& r : e["review"]) flags.push_back(Short(r.get<std::string>(), 240));
    lines.push_back(
        util::StrCat("- ", Code(Str(e, "key")), ": ", util::StrJoin(flags, "; "), "\n"));
  }
  if (lines.empty()) return "";
  std::string md = util::StrCat("\n## Needs a person (", lines.size(), ")\n\n",
                                "Landed as the sweep decided; a reviewer should check these:\n\n");
  for (const auto& l : lines) md += l;
  return md;
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

PrText TtXlaText(const json& report, const PrOptions& o) {
  const json& entries = report["entries"];
  std::vector<Group> groups;
  std::map<std::string, std::size_t> group_of;
  const auto add = [&](const std::string& title, std::string line) {
    auto [it, fresh] = group_of.try_emplace(title, groups.size());
    if (fresh) groups.push_back({title, {}});
    groups[it->second].lines.push_back(std::move(line));
  };
  std::set<std::string> files;
  int changed = 0;
  const bool nightly = report.contains("nightly") && report["nightly"].is_object();
  if (nightly) {
    const json& sections = report["nightly"].value("sections", json::object());
    static constexpr std::pair<const char*, const char*> kSections[] = {
        {"promoted", "Promoted"},
        {"demoted", "Demoted to KNOWN_FAILURE_XFAIL"},
        {"skipped", "Skipped (NOT_SUPPORTED_SKIP)"},
        {"unskipped", "Unskipped (NOT_SUPPORTED_SKIP to KNOWN_FAILURE_XFAIL)"},
        {"skips_refreshed", "Skips with refreshed reasons"},
        {"thresholds", "Thresholds changed"},
        {"reasons", "Reasons refreshed"},
        {"new_entries", "New entries"}};
    for (const auto& [name, title] : kSections) {
      for (const auto& item : sections.value(name, json::array())) {
        if (o.left_out.count(Str(item, "key"))) continue;
        add(title, NightlyLine(item));
      }
    }
  }
  for (const auto& e : entries) {
    if (!Changed(e) || o.left_out.count(Str(e, "key"))) continue;
    ++changed;
    files.insert(Str(e, "file"));
    if (!nightly) add(TriageKind(e), TriageLine(e, o));
  }
  std::string title_counts;
  for (const auto& g : groups) {
    title_counts +=
        util::StrCat(title_counts.empty() ? "" : ", ", g.lines.size(), " ", ShortKind(g.title));
  }
  PrText t;
  const bool recheck = report.contains("recheck") && report["recheck"].is_object();
  t.title = util::StrCat(recheck   ? "Skipped entries rechecked "
                         : nightly ? "Nightly maintenance "
                                   : "Triage sweep ",
                         Str(report, "sweep"), ": ",
                         title_counts.empty() ? "no YAML changes" : title_counts);
  std::string md = "## Summary\n\n" + SummaryHead(report, o);
  md += util::StrCat("\nThis PR edits ", changed, " entries in ", files.size(), " test-config file",
                     files.size() == 1 ? "" : "s");
  if (!o.forge_commit.empty()) {
    md += util::StrCat(" and moves `third_party/tt_forge_models` to ", Code(o.forge_commit),
                       " (the loader and registry changes, in tt-forge-models' own PR)");
  }
  md += ".\n\n## Changes by kind\n";
  AppendGroups(md, groups);
  // Entries the sweep left as they were, and a nightly sweep's flaky and unconfirmed ones.
  std::vector<Group> rest;
  if (nightly) {
    const json& sections = report["nightly"].value("sections", json::object());
    for (const auto& [name, title] :
         {std::pair{"already", "Already at target"}, std::pair{"flaky", "Flaky (not changed)"},
          std::pair{"unconfirmed", "Unconfirmed (not changed)"}}) {
      Group g{title, {}};
      for (const auto& item : sections.value(name, json::array()))
        g.lines.push_back(NightlyLine(item));
      rest.push_back(std::move(g));
    }
  } else {
    Group g{"Unchanged (left as they are)", {}};
    for (const auto& e : entries) {
      if (Changed(e) || o.left_out.count(Str(e, "key"))) continue;
      g.lines.push_back(util::StrCat("- ", Code(Str(e, "key")), " (", Str(e, "playbook"), ")\n"));
    }
    rest.push_back(std::move(g));
  }
  bool any_rest = false;
  for (const auto& g : rest) any_rest |= !g.lines.empty();
  if (any_rest) {
    md += "\n## Not changed\n";
    AppendGroups(md, rest);
  }
  md += ReviewSection(entries, o, false);
  md += LeftOutSection(o);
  md += EvidenceSection(report, o);
  t.body = md;
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
    if (o.left_out.count(Str(e, "key")) || fix.empty() || fix == "none" ||
        (fix.find("loader") == std::string::npos && fix.find("override") == std::string::npos)) {
      continue;
    }
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
  t.title = util::StrCat("Triage sweep ", Str(report, "sweep"), ": ", registry_lines,
                         " registry line", registry_lines == 1 ? "" : "s", ", ", by_loader.size(),
                         " loader", by_loader.size() == 1 ? "" : "s");
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
  md += ReviewSection(entries, o, true);
  md += LeftOutSection(o);
  md += EvidenceSection(report, o);
  t.body = md;
  return t;
}

}  // namespace

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
