#include "coordinator/merge/nightly_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "common/lift/lift.h"
#include "common/nightly/learn.h"
#include "common/nightly/rules.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "coordinator/merge/report.h"
#include "coordinator/merge/report_internal.h"
#include "coordinator/model/outcome_counts.h"

namespace triage::merge {
namespace {

using report_internal::Code;
using report_internal::Md;
using report_internal::YamlDiffLines;

using json = nlohmann::json;

struct Section {
  std::string_view id;
  std::string_view title;
  std::string_view says;
};

constexpr Section kSections[] = {
    {"promoted", "Promoted",
     "KNOWN_FAILURE_XFAIL (or rechecked NOT_SUPPORTED_SKIP) tests that pass now: "
     "EXPECTED_PASSING."},
    {"demoted", "Demoted", "EXPECTED_PASSING tests that fail now: KNOWN_FAILURE_XFAIL."},
    {"skipped", "Skipped",
     "Tests that hang, crash or are killed: NOT_SUPPORTED_SKIP (an xfail would still take the "
     "CI job down)."},
    {"unskipped", "Unskipped",
     "Rechecked NOT_SUPPORTED_SKIP tests that now fail cleanly: KNOWN_FAILURE_XFAIL with their "
     "failure."},
    {"skips_refreshed", "Skips refreshed",
     "Rechecked NOT_SUPPORTED_SKIP tests that still hang or crash: the skip stays, its reason "
     "says what the runs showed."},
    {"thresholds", "Thresholds changed", "PCC checks enabled, raised, lowered or disabled."},
    {"reasons", "Reasons refreshed", "Still failing, but not as the reason said."},
    {"new_entries", "New entries", "Tests without an entry that pass: added as EXPECTED_PASSING."},
    {"flaky", "Flaky", "The fleet's runs disagreed with the nightly: the YAML stays."},
    {"unconfirmed", "Unconfirmed",
     "Candidates the fleet did not confirm (the device-time budget, or skipped there): the YAML "
     "stays."},
    {"already", "Already at target state", "The runner hinted at a change the YAML already has."},
    {"flagged", "Flagged for a person", "Never decided by the farm."},
};

const Section& SectionOf(std::string_view id) {
  for (const Section& s : kSections) {
    if (s.id == id) return s;
  }
  return kSections[std::size(kSections) - 1];
}

std::string Fixed(double v, int digits) {
  if (std::isnan(v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string Outcome(const v1::NightlyRecord& r) {
  std::string s = v1::NightlyRecord::Outcome_Name(r.outcome());
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return s;
}

// One run in a line: "xfailed PASSED pcc 0.9990 (threshold 0.99) [RM_XFAIL]".
std::string RecordText(const v1::NightlyRecord& r) {
  std::string s = Outcome(r);
  if (!r.bringup_status().empty()) util::StrAppend(&s, " ", r.bringup_status());
  if (r.has_pcc()) {
    util::StrAppend(&s, " pcc ", Fixed(r.pcc(), 4));
    if (r.has_pcc_threshold()) {
      util::StrAppend(
          &s, " (threshold ", Fixed(r.pcc_threshold(), 2),
          r.has_pcc_assertion_enabled() && !r.pcc_assertion_enabled() ? ", check off" : "", ")");
    }
  }
  if (r.crash_signal() > 0) util::StrAppend(&s, " signal ", r.crash_signal());
  if (r.timed_out()) s += " timeout";
  if (!r.guidance().empty()) util::StrAppend(&s, " [", util::StrJoin(r.guidance(), ", "), "]");
  return s;
}

json RecordJson(const v1::NightlyRecord& r) {
  json j = {{"source", r.source()},
            {"outcome", Outcome(r)},
            {"bringup_status", r.bringup_status()},
            {"pcc", r.has_pcc() && !std::isnan(r.pcc()) ? json(r.pcc()) : json(nullptr)},
            {"pcc_threshold", r.has_pcc_threshold() ? json(r.pcc_threshold()) : json(nullptr)},
            {"pcc_assertion_enabled",
             r.has_pcc_assertion_enabled() ? json(r.pcc_assertion_enabled()) : json(nullptr)},
            {"guidance", json(std::vector<std::string>(r.guidance().begin(), r.guidance().end()))},
            {"duration_seconds", r.duration_seconds()}};
  const std::string& error = !r.real_error().empty()      ? r.real_error()
                             : !r.error_message().empty() ? r.error_message()
                                                          : r.failure();
  j["error"] = error.empty() ? json(nullptr) : json(error.substr(0, error.find('\n')));
  return j;
}

// "status: EXPECTED_PASSING, removed reason, bringup_status".
std::string ChangeText(const v1::EntryEdit& e) {
  std::vector<std::string> parts;
  for (const auto& f : e.set()) {
    parts.push_back(util::StrCat(f.name(), ": ", lift::FromYaml(f.value()).DebugString()));
  }
  if (!e.delete_().empty())
    parts.push_back(util::StrCat("removed ", util::StrJoin(e.delete_(), ", ")));
  return util::StrJoin(parts, ", ");
}

// One line of a section: an entry, with what each arch found, grouped where the archs agree.
struct Line {
  const EntryMerge* entry = nullptr;
  std::vector<std::string> archs;
  std::map<std::string, std::vector<std::string>> archs_by_finding, archs_by_change, archs_by_rule,
      archs_by_runs;
  std::vector<std::string> review;
};

// "n150, p150: text" per group of archs that say the same ("text" alone when every arch does).
void Grouped(std::string& md, std::string_view label,
             const std::map<std::string, std::vector<std::string>>& groups, std::size_t archs) {
  for (const auto& [text, which] : groups) {
    if (text.empty()) continue;
    util::StrAppend(&md, "\n  - ", label,
                    groups.size() == 1 && which.size() == archs
                        ? ""
                        : util::StrCat(" (", util::StrJoin(which, ", "), ")"),
                    ": ", text);
  }
}

}  // namespace

NightlySections BuildNightlySections(const MergeOutput& merge, const v1::NightlyIntake& intake,
                                     const v1::NightlyOptions& asked,
                                     const std::vector<std::string>& archs) {
  NightlySections out;
  const nightly::RuleOptions rule_options = nightly::RuleOptionsFrom(asked);
  const v1::NightlyOptions options = nightly::ToProto(rule_options);
  const std::vector<nightly::KnobValue> policy = nightly::PolicyValues(rule_options.policy);
  std::map<std::string, json> sections;
  std::map<std::string, std::vector<Line>> lines;  // section -> its entries, in merge order
  for (const auto& e : merge.entries) {
    // The entry's section: the label it is counted under.
    const std::string section = EntryLabel(e, archs);
    if (coord::NightlyKindRank(section) < 0) continue;
    Line line;
    line.entry = &e;
    for (const auto& [arch, o] : e.outcomes) {
      if (!o.has_nightly()) continue;
      std::string finding = coord::NightlyKind(o);
      // A change the merge could not place is a person's.
      if (e.placement == EntryMerge::Placement::kConflict && o.changed()) finding = "flagged";
      if (finding.empty()) continue;
      const v1::NightlyFinding& f = o.nightly();
      json nightly = json::array(), fleet = json::array();
      std::vector<std::string> nightly_text, fleet_text;
      for (const auto& r : f.nightly()) {
        nightly.push_back(RecordJson(r));
        nightly_text.push_back(RecordText(r));
      }
      for (const auto& r : f.confirmations()) {
        fleet.push_back(RecordJson(r));
        fleet_text.push_back(RecordText(r));
      }
      const std::string change = o.changed() ? ChangeText(o.edit()) : "";
      sections[section].push_back(
          {{"key", e.key},
           {"file", e.file},
           {"arch", arch},
           {"kind", f.kind()},
           {"finding", finding},
           {"decision", f.decision()},
           {"change", change.empty() ? json(nullptr) : json(change)},
           {"placement", e.placement == EntryMerge::Placement::kPerArch    ? "arch_overrides"
                         : e.placement == EntryMerge::Placement::kTopLevel ? "top level"
                         : e.placement == EntryMerge::Placement::kConflict ? "conflict"
                                                                           : "unchanged"},
           {"rule", f.rule()},
           {"worst_pcc",
            f.has_worst_pcc() && !std::isnan(f.worst_pcc()) ? json(f.worst_pcc()) : json(nullptr)},
           {"issue", e.issue_link.empty() ? json(nullptr) : json(e.issue_link)},
           {"review", json(std::vector<std::string>(o.review().begin(), o.review().end()))},
           {"nightly", nightly},
           {"confirmations", fleet}});
      line.archs.push_back(arch);
      line.archs_by_finding[finding].push_back(arch);
      line.archs_by_change[change.empty() ? "" : Md(change)].push_back(arch);
      line.archs_by_rule[Md(f.rule()) +
                         (f.decision() == "no_confirm" ? " (not confirmed: --no-confirm)" : "")]
          .push_back(arch);
      std::string runs = util::StrCat("nightly ", Md(util::StrJoin(nightly_text, "; ")));
      if (!fleet_text.empty())
        util::StrAppend(&runs, " · fleet ", Md(util::StrJoin(fleet_text, "; ")));
      line.archs_by_runs[runs].push_back(arch);
      for (const auto& r : o.review()) {
        if (std::find(line.review.begin(), line.review.end(), r) == line.review.end()) {
          line.review.push_back(r);
        }
      }
    }
    if (!line.archs.empty()) lines[section].push_back(std::move(line));
  }
  std::map<std::string, std::string> md;
  for (const auto& [section, entries] : lines) {
    for (const Line& l : entries) {
      const EntryMerge& e = *l.entry;
      std::string text = util::StrCat("- ", Code(e.key), " on ", util::StrJoin(l.archs, ", "));
      if (!e.issue_link.empty()) util::StrAppend(&text, " — ", e.issue_link);
      // The archs' findings, when they differ (promoted on one, already at target on another).
      if (l.archs_by_finding.size() > 1) {
        std::map<std::string, std::vector<std::string>> titles;
        for (const auto& [finding, which] : l.archs_by_finding) {
          titles[std::string(SectionOf(finding).title)] = which;
        }
        Grouped(text, "finding", titles, l.archs.size());
      }
      Grouped(text, "change", l.archs_by_change, l.archs.size());
      if (coord::IsChangeKind(section) && e.yaml_before != e.yaml_after) {
        // The entry as the patch changes it, fenced inside the list item.
        util::StrAppend(&text, "\n  - YAML\n\n    ```diff\n");
        const std::string diff = YamlDiffLines(e);
        for (std::string_view yaml_line : util::SplitLines(diff)) {
          if (!yaml_line.empty()) util::StrAppend(&text, "    ", yaml_line, "\n");
        }
        text += "    ```";
      }
      Grouped(text, "why", l.archs_by_rule, l.archs.size());
      Grouped(text, "runs", l.archs_by_runs, l.archs.size());
      for (const auto& r : l.review) util::StrAppend(&text, "\n  - review: ", Md(r));
      md[section] += text + "\n";
    }
  }

  json intake_json = {
      {"runs", intake.runs()},
      {"run_labels",
       std::vector<std::string>(intake.run_labels().begin(), intake.run_labels().end())},
      {"archs", std::vector<std::string>(intake.archs().begin(), intake.archs().end())},
      {"testcases", intake.testcases()},
      {"records", intake.records()},
      {"mapped", intake.mapped()},
      {"unmapped", intake.unmapped()},
      {"duplicates", intake.duplicates()},
      {"contradictory", intake.contradictory()},
      {"not_model_tests", intake.not_model_tests()},
      {"left_out", intake.left_out()},
      {"candidates",
       json(std::map<std::string, int>(intake.candidates().begin(), intake.candidates().end()))},
      {"already", intake.already()},
      {"flagged", intake.flagged()},
      {"unconfirmed", intake.unconfirmed()},
      {"examples", std::vector<std::string>(intake.examples().begin(), intake.examples().end())}};
  json options_json = {{"confirm", options.confirm()},
                       {"no_confirm", options.no_confirm()},
                       {"max_device_hours", options.max_device_hours()},
                       {"pcc_margin", options.pcc_margin()},
                       {"pcc_step", options.pcc_step()},
                       {"pcc_far_below", options.pcc_far_below()},
                       {"regression_runs", options.regression_runs()},
                       {"promote_runs", options.promote_runs()}};
  // The policy the rules followed, each knob with where it came from.
  json policy_json = json::object();
  for (const auto& k : policy) {
    policy_json[std::string(k.knob)] = {{"value", k.value}, {"source", k.source}};
  }
  options_json["policy"] = std::move(policy_json);
  options_json["policy_learned_from"] = asked.policy_learned_from();
  json sections_json = json::object();
  for (const auto& s : kSections) {
    const std::string id(s.id);
    sections_json[id] = sections.count(id) ? sections[id] : json::array();
  }
  out.json = {{"intake", intake_json}, {"options", options_json}, {"sections", sections_json}};

  std::string text = util::StrCat(
      "\n## Nightly maintenance\n\n", intake.runs(), " run(s) on ",
      util::StrJoin(intake.archs(), ", "), ": ", intake.testcases(), " testcases, ",
      intake.records(), " model test records; ", intake.mapped(), " mapped, ", intake.unmapped(),
      " unmapped, ", intake.duplicates(), " duplicates, ", intake.contradictory(), " contradictory",
      intake.left_out() > 0 ? util::StrCat(", ", intake.left_out(), " left out") : "",
      ". Confirmation: ",
      options.no_confirm() ? "none (--no-confirm: every change is proposed from the nightly alone)"
                           : util::StrCat(options.confirm(), " run(s) per candidate on its arch"),
      options.max_device_hours() > 0
          ? util::StrCat(", within ", Fixed(options.max_device_hours(), 1), " device hours")
          : "",
      ".\n");
  for (const auto& ex : intake.examples()) util::StrAppend(&text, "- ", Md(ex), "\n");
  // "learned from ..." only when the history spoke to a knob.
  const bool learned = std::any_of(policy.begin(), policy.end(), [](const nightly::KnobValue& k) {
    return nightly::IsLearnedSource(k.source);
  });
  util::StrAppend(&text, "\nThe rules followed this policy",
                  !learned || asked.policy_learned_from().empty()
                      ? ""
                      : util::StrCat(", learned from ", Md(asked.policy_learned_from()),
                                     " where that history speaks to a knob"),
                  ":\n\n| knob | value | from |\n|---|---|---|\n");
  for (const auto& k : policy) {
    util::StrAppend(&text, "| ", Code(k.knob), " | ", Code(k.value), " | ", Md(k.source), " |\n");
  }
  for (const auto& s : kSections) {
    const std::string id(s.id);
    if (!md.count(id)) continue;
    util::StrAppend(&text, "\n### ", s.title, " (", lines[id].size(), ")\n\n", s.says, "\n\n",
                    md[id]);
  }
  out.markdown = std::move(text);
  return out;
}

}  // namespace triage::merge
