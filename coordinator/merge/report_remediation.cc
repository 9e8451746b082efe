// report.json's `remediation` and report.md's "Remediation clusters" (docs/remediation.md, "What
// the report says"): a command sweep's entries grouped by the fingerprint the command reported,
// else by the failure cluster of the reason they were selected with, each with how many the
// sweep fixed.

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "common/util/strings.h"
#include "coordinator/merge/report_internal.h"

namespace triage::merge {
namespace report_internal {
namespace {

bool Failing(const json& outcome) {
  if (!outcome.is_object()) return false;
  const std::string status = outcome.value("status", "");
  return status == "KNOWN_FAILURE_XFAIL" || status == "NOT_SUPPORTED_SKIP";
}

}  // namespace

json CommandSummaryJson(const v1::CommandSummary& s) {
  return {{"fingerprint", s.fingerprint()},
          {"layer", s.layer().empty() ? json(nullptr) : json(s.layer())},
          {"fix_kind", s.fix_kind().empty() ? json(nullptr) : json(s.fix_kind())},
          {"workarounds", std::vector<std::string>(s.workarounds().begin(), s.workarounds().end())},
          {"root_cause", s.root_cause().empty() ? json(nullptr) : json(s.root_cause())},
          {"result", s.result().empty() ? json(nullptr) : json(s.result())}};
}

json RemediationJson(const json& entries) {
  struct Group {
    std::string by;
    std::vector<std::string> keys;
    int fixed = 0;
    std::set<std::string> layers, fix_kinds;
  };
  std::map<std::string, Group> groups;
  for (const auto& e : entries) {
    std::string id, by;
    if (e.value("fingerprint", json(nullptr)).is_string()) {
      id = e["fingerprint"].get<std::string>();
      by = "fingerprint";
    } else if (e.value("cluster", json(nullptr)).is_string()) {
      id = e["cluster"].get<std::string>();
      by = "reason";
    } else {
      continue;  // no reason and no fingerprint: not part of any cluster
    }
    Group& g = groups[by + "\n" + id];
    g.by = by;
    g.keys.push_back(e.value("key", ""));
    // Held by value: items() of a temporary would outlive it.
    const json outcomes = e.value("arch_outcomes", json::object());
    const json verdicts = e.value("verdicts", json::object());
    // An entry the patch leaves as it was (no outcome written) stays failing: a remediation
    // sweep selects failing entries.
    bool failing = false, written = false;
    for (const auto& [arch, o] : outcomes.items()) {
      written |= o.is_object();
      failing |= Failing(o);
    }
    failing |= !written;
    if (!failing) ++g.fixed;
    for (const auto& [arch, v] : verdicts.items()) {
      if (!v.contains("summary")) continue;
      const json& s = v["summary"];
      if (s.value("layer", json(nullptr)).is_string()) g.layers.insert(s["layer"]);
      if (s.value("fix_kind", json(nullptr)).is_string()) g.fix_kinds.insert(s["fix_kind"]);
    }
  }
  std::vector<json> out;
  for (auto& [k, g] : groups) {
    const std::string id = k.substr(k.find('\n') + 1);
    const int size = static_cast<int>(g.keys.size());
    out.push_back({{"id", id},
                   {"by", g.by},
                   {"size", size},
                   {"fixed", g.fixed},
                   {"failing", size - g.fixed},
                   {"layers", g.layers},
                   {"fix_kinds", g.fix_kinds},
                   {"entries", g.keys}});
  }
  std::stable_sort(out.begin(), out.end(), [](const json& a, const json& b) {
    return a["size"].get<int>() > b["size"].get<int>();
  });
  return out;
}

std::string RemediationMd(const json& clusters) {
  if (clusters.empty()) return "";
  std::string md =
      "\n## Remediation clusters\n\nThe entries grouped by the fingerprint their command "
      "reported, else by the failure cluster of their reason, largest first.\n\n"
      "| entries | fixed | still failing | cluster | by | layers |\n|---|---|---|---|---|---|\n";
  for (const auto& c : clusters) {
    std::vector<std::string> layers = c["layers"].get<std::vector<std::string>>();
    util::StrAppend(&md, "| ", c["size"].get<int>(), " | ", c["fixed"].get<int>(), " | ",
                    c["failing"].get<int>(), " | ", Code(c["id"].get<std::string>()), " | ",
                    c["by"].get<std::string>(), " | ",
                    layers.empty() ? std::string("-") : util::StrJoin(layers, ", "), " |\n");
  }
  return md;
}

json CommandRunsJson(const CommandRuns& runs) {
  return {{"runs", runs.runs}, {"entries", runs.entries}, {"without_run", runs.without_run}};
}

json SharedFixesJson(const std::vector<SharedFix>& fixes) {
  json out = json::array();
  for (const auto& f : fixes) {
    out.push_back({{"file", f.file},
                   {"shard", f.shard},
                   {"fingerprint", f.fingerprint.empty() ? json(nullptr) : json(f.fingerprint)},
                   {"cluster", f.cluster.empty() ? json(nullptr) : json(f.cluster)},
                   {"fixed", f.fixed},
                   {"landed", f.landed},
                   {"wave", f.wave_shard.empty() ? json(nullptr)
                                                 : json{{"shard", f.wave_shard},
                                                        {"selected", f.wave_selected},
                                                        {"selected_pass", f.wave_selected_pass},
                                                        {"passing", f.wave_passing},
                                                        {"broke", f.wave_broke},
                                                        {"not_affected", f.wave_not_affected}}}});
  }
  return out;
}

json WorkaroundsJson(const std::vector<WorkaroundsFound>& held) {
  json out = json::array();
  for (const auto& h : held) {
    json found = json::array();
    for (const auto& w : h.found) {
      found.push_back({{"guard", w.guard}, {"where", w.where}, {"what", w.what}});
    }
    out.push_back({{"shard", h.shard}, {"entries", h.entries}, {"found", std::move(found)}});
  }
  return out;
}

json ProvenanceJson(const std::map<std::string, std::string>& by_shard) {
  json out = json::object();
  for (const auto& [shard, text] : by_shard) {
    json p = json::parse(text, nullptr, /*allow_exceptions=*/false);
    out[shard] =
        p.is_object() ? std::move(p) : json{{"error", "provenance.json is not a JSON object"}};
  }
  return out;
}

std::string WorkaroundsMd(const std::vector<WorkaroundsFound>& held) {
  if (held.empty()) return "";
  std::string md =
      "\n## Workarounds held for review\n\nCommand changes in which the farm found a workaround: "
      "none of them lands; their entries keep their YAML until a reviewer decides.\n\n"
      "| shard | entries | found |\n|---|---|---|\n";
  for (const auto& h : held) {
    std::vector<std::string> keys, found;
    for (const auto& k : h.entries) keys.push_back(Code(k));
    for (const auto& w : h.found) {
      found.push_back(util::StrCat(w.guard, " at ", Code(w.where), ": ", Code(w.what)));
    }
    util::StrAppend(&md, "| ", h.shard, " | ", keys.empty() ? "-" : util::StrJoin(keys, ", "),
                    " | ", util::StrJoin(found, "; "), " |\n");
  }
  return md;
}

// One shared fix's wave in a cell: what it checked and what failed with the fix.
std::string WaveMd(const SharedFix& f) {
  if (f.wave_shard.empty()) return "none";
  std::string cell =
      util::StrCat(f.wave_shard, ": ", f.wave_passing.size(), " passing, ", f.wave_selected.size(),
                   " selected checked (", f.wave_selected_pass.size(), " of these pass), ",
                   f.wave_not_affected, " not importing it");
  if (!f.wave_broke.empty()) {
    util::StrAppend(&cell, "; failed with it: ", util::StrJoin(f.wave_broke, "; "));
  }
  return cell;
}

std::string CommandWorkMd(const CommandRuns& runs, const std::vector<SharedFix>& fixes) {
  std::string md = util::StrCat(
      "\n## Agent runs\n\n", runs.runs, " command run", runs.runs == 1 ? "" : "s", " for ",
      runs.entries, " entr", runs.entries == 1 ? "y" : "ies", "; ", runs.without_run, " entr",
      runs.without_run == 1 ? "y" : "ies",
      " fixed by an earlier change (a cluster lead's, or an earlier run of the same shard), "
      "verified by the farm with no run of their own.\n");
  if (fixes.empty()) return md;
  md +=
      "\n## Shared fixes\n\nChanges outside a loader directory, each with the shard that made "
      "it, the entries the farm verified it fixed, and its wave: the entries of other clusters and "
      "the passing entries whose loaders import it, checked with it.\n\n"
      "| file | shard | fingerprint | entries fixed | wave | landed |\n|---|---|---|---|---|---|\n";
  for (const auto& f : fixes) {
    std::vector<std::string> keys;
    for (const auto& k : f.fixed) keys.push_back(Code(k));
    util::StrAppend(&md, "| ", Code(f.file), " | ", f.shard, " | ",
                    f.fingerprint.empty() ? std::string("-") : Code(f.fingerprint), " | ",
                    keys.empty() ? std::string("-") : util::StrJoin(keys, ", "), " | ", WaveMd(f),
                    " | ", f.landed ? "yes" : "no (see Conflicts)", " |\n");
  }
  return md;
}

}  // namespace report_internal
}  // namespace triage::merge
