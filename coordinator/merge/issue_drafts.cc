#include "coordinator/merge/issue_drafts.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "nlohmann/json.hpp"

#include "common/util/strings.h"
#include "coordinator/merge/report_text.h"

namespace triage::merge {
namespace {

using nlohmann::json;
using report_text::Code;
using report_text::Short;
using report_text::Str;

// Where the list of affected tests stops, leaving room for the sections after it.
constexpr std::size_t kTestsBudget = 50000;

bool FailingStatus(const json& outcome) {
  const std::string status = Str(outcome, "status");
  return status == "KNOWN_FAILURE_XFAIL" || status == "NOT_SUPPORTED_SKIP";
}

// The archs an entry still fails on (an arch whose outcome the patch does not write fails as it
// did: a remediation sweep selects failing entries), with the status it keeps.
std::map<std::string, std::string> FailingArchs(const json& e) {
  std::map<std::string, std::string> out;
  const json outcomes = e.value("arch_outcomes", json::object());
  const json verdicts = e.value("verdicts", json::object());
  // "<verdict>; entry unchanged" where the patch writes nothing for the arch.
  auto unchanged = [&](const std::string& arch) {
    const std::string verdict =
        verdicts.contains(arch) ? Str(verdicts[arch], "verdict") : std::string();
    return verdict.empty() ? std::string("entry unchanged") : verdict + "; entry unchanged";
  };
  for (const auto& [arch, o] : outcomes.items()) {
    if (o.is_object() && FailingStatus(o)) out[arch] = Str(o, "status");
    if (!o.is_object()) out[arch] = unchanged(arch);
  }
  if (outcomes.empty()) {
    for (const auto& [arch, v] : verdicts.items()) out[arch] = unchanged(arch);
  }
  return out;
}

// A file-safe form of an id: [A-Za-z0-9._-], others '_', at most 100 characters.
std::string FileSafe(std::string id) {
  for (char& c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (id.size() > 100) id.resize(100);
  if (id.empty() || id[0] == '.') id.insert(0, "_");
  return id;
}

struct Cluster {
  const json* group = nullptr;       // report.json's remediation[] item
  std::vector<const json*> failing;  // its entries still failing
  std::map<std::string, std::vector<std::pair<const json*, std::string>>> by_arch;
  std::map<std::string, int> errors;            // verdict reason -> how many
  std::map<std::string, std::string> stage_of;  // reason -> its stage
  std::vector<std::string> causes;              // the command's root causes, first seen order
  std::set<std::string> results;                // the command's results
  std::set<std::string> shards;
};

void Collect(const json& e, Cluster& c) {
  const auto archs = FailingArchs(e);
  if (archs.empty()) return;
  c.failing.push_back(&e);
  for (const auto& [arch, status] : archs) c.by_arch[arch].push_back({&e, status});
  const json verdicts = e.value("verdicts", json::object());
  bool any_reason = false;
  for (const auto& [arch, v] : verdicts.items()) {
    if (!archs.count(arch)) continue;
    const std::string reason = Str(v, "reason");
    if (!reason.empty()) {
      ++c.errors[reason];
      c.stage_of.emplace(reason, Str(v, "stage"));
      any_reason = true;
    }
    if (!Str(v, "shard").empty()) c.shards.insert(Str(v, "shard"));
    if (v.contains("summary") && v["summary"].is_object()) {
      const std::string cause = Str(v["summary"], "root_cause");
      if (!cause.empty() && std::find(c.causes.begin(), c.causes.end(), cause) == c.causes.end()) {
        c.causes.push_back(cause);
      }
      if (!Str(v["summary"], "result").empty()) c.results.insert(Str(v["summary"], "result"));
    }
  }
  if (!any_reason) {
    const std::string reason = Str(e.value("outcome", json::object()), "reason");
    if (!reason.empty()) ++c.errors[reason];
  }
}

std::string TheError(const Cluster& c) {
  std::string best;
  int most = 0;
  for (const auto& [reason, n] : c.errors) {
    if (n > most) best = reason, most = n;
  }
  return best;
}

std::string Body(const json& report, const Cluster& c, const IssueDraft& d, const IssueOptions& o) {
  const json& g = *c.group;
  const json commits = report.value("commits", json::object());
  std::string md;
  util::StrAppend(&md, "<!-- triage-farm issue draft: sweep ", Str(report, "sweep"), ", ", d.by,
                  " ", d.id, " -->\n\n");
  if (d.by == "fingerprint") {
    util::StrAppend(&md, "**Fingerprint:** ", Code(d.id), " (named by the coding agent)\n");
  } else {
    util::StrAppend(&md, "**Failure cluster:** ", Code(d.id),
                    " (entries whose reasons share one error signature; no agent named a "
                    "fingerprint)\n");
  }
  std::vector<std::string> layers;
  for (const auto& l : g.value("layers", json::array())) {
    if (l.is_string()) layers.push_back(l.get<std::string>());
  }
  util::StrAppend(&md, "**Layer:** ", layers.empty() ? "unknown" : util::StrJoin(layers, ", "),
                  "\n**Tests still failing:** ", d.failing, " of ", g.value("size", 0),
                  " in the cluster (the sweep fixed ", g.value("fixed", 0), ")\n");
  util::StrAppend(&md, "**Found by:** sweep ", Code(Str(report, "sweep")), " at tt-xla ",
                  Code(Str(commits, "tt-xla").substr(0, 12)), ", tt-forge-models ",
                  Code(Str(commits, "tt_forge_models").substr(0, 12)));
  std::map<std::string, std::string> pins;
  const json provenance = report.value("provenance", json::object());
  for (const auto& shard : c.shards) {
    if (!provenance.contains(shard)) continue;
    const json reported = provenance[shard].value("reported", json::object());
    // Held by value: items() of a temporary would outlive it.
    const json reported_pins = reported.value("pins", json::object());
    for (const auto& [name, commit] : reported_pins.items()) {
      if (commit.is_string()) pins.emplace(name, commit.get<std::string>());
    }
  }
  if (!pins.empty()) {
    std::vector<std::string> parts;
    for (const auto& [name, commit] : pins)
      parts.push_back(name + " " + Code(commit.substr(0, 12)));
    util::StrAppend(&md, "; built with ", util::StrJoin(parts, ", "), " (as the agent reported)");
  }
  md += "\n\n## Error\n\n";
  const std::string error = TheError(c);
  if (error.empty()) {
    md += "No error was recorded for these tests.\n";
  } else {
    util::StrAppend(&md, "```\n", error, "\n```\n");
    auto stage = c.stage_of.find(error);
    if (stage != c.stage_of.end() && !stage->second.empty()) {
      util::StrAppend(&md, "\nStage: ", Code(stage->second), ".\n");
    }
  }
  if (!c.causes.empty()) {
    md += "\n## Diagnosis (the coding agent's)\n\n";
    for (const auto& cause : c.causes) util::StrAppend(&md, "- ", Short(cause, 600), "\n");
  }
  md += "\n## Affected tests\n";
  for (const auto& [arch, tests] : c.by_arch) {
    util::StrAppend(&md, "\n### ", arch, " (", tests.size(), ")\n\n");
    std::size_t listed = 0;
    for (const auto& [e, status] : tests) {
      // A tracker caps an issue's text (GitHub at 65,536 characters): the rest is in the report.
      if (md.size() > kTestsBudget) break;
      util::StrAppend(&md, "- ", Code(Str(*e, "key")), " (", status, ")",
                      report_text::EvidenceLink(*e, o.evidence_url), "\n");
      ++listed;
    }
    if (listed < tests.size()) {
      util::StrAppend(&md, "- and ", tests.size() - listed, " more: see the sweep's report.json\n");
    }
  }
  // What the sweep tried and did not land.
  std::vector<std::string> tried;
  std::set<std::string> keys;
  for (const auto* e : c.failing) keys.insert(Str(*e, "key"));
  for (const auto& w : report.value("workarounds", json::array())) {
    bool ours = false;
    for (const auto& k : w.value("entries", json::array())) ours |= k.is_string() && keys.count(k);
    if (!ours) continue;
    std::vector<std::string> found;
    for (const auto& f : w.value("found", json::array())) {
      found.push_back(util::StrCat(Str(f, "guard"), " at ", Code(Str(f, "where"))));
    }
    tried.push_back(util::StrCat("shard ", Str(w, "shard"),
                                 "'s change was held for review: ", util::StrJoin(found, "; ")));
  }
  for (const auto& f : report.value("shared_fixes", json::array())) {
    const bool ours = (d.by == "fingerprint" && Str(f, "fingerprint") == d.id) ||
                      (d.by == "reason" && Str(f, "cluster") == d.id);
    if (!ours || f.value("landed", true)) continue;
    std::string why;
    if (f.contains("wave") && f["wave"].is_object()) {
      std::vector<std::string> broke;
      for (const auto& b : f["wave"].value("broke", json::array())) {
        if (b.is_string()) broke.push_back(b.get<std::string>());
      }
      if (!broke.empty())
        why = ": its wave found " + util::StrJoin(broke, ", ") + " failing with it";
    }
    tried.push_back(util::StrCat("a shared fix of ", Code(Str(f, "file")), " (shard ",
                                 Str(f, "shard"), ") was held back", why));
  }
  if (!c.results.empty()) {
    tried.push_back(util::StrCat(
        "the coding agent's result: ",
        util::StrJoin(std::vector<std::string>(c.results.begin(), c.results.end()), ", ")));
  }
  if (!tried.empty()) {
    md += "\n## What the sweep tried\n\n";
    for (const auto& t : tried) util::StrAppend(&md, "- ", t, "\n");
  }
  const std::string node = Str(*c.failing.front(), "node_id");
  if (!node.empty()) {
    util::StrAppend(&md, "\n## Reproduce\n\nIn a tt-xla checkout at the commits above, on ",
                    c.by_arch.begin()->first, ":\n\n```\npytest -svv '", node, "'\n```\n");
  }
  return md;
}

}  // namespace

absl::StatusOr<std::vector<IssueDraft>> BuildIssueDrafts(const json& report,
                                                         const IssueOptions& options) {
  if (!report.is_object() || !report.contains("entries") || !report["entries"].is_array()) {
    return absl::InvalidArgumentError("not a sweep's report.json: no entries");
  }
  if (!report.contains("remediation") || !report["remediation"].is_array()) {
    return absl::InvalidArgumentError(util::StrCat(
        "sweep ", Str(report, "sweep"),
        " has no remediation clusters: issue drafts are for a command sweep (--executor command)"));
  }
  std::multimap<std::string, const json*> by_key;
  for (const auto& e : report["entries"]) by_key.emplace(Str(e, "key"), &e);
  std::vector<IssueDraft> drafts;
  for (const auto& g : report["remediation"]) {
    if (!g.is_object() || g.value("failing", 0) <= 0) continue;
    Cluster c;
    c.group = &g;
    const std::string id = Str(g, "id");
    const std::string by = Str(g, "by");
    std::set<std::string> keys;  // a key in two files is listed twice, and found twice below
    for (const auto& k : g.value("entries", json::array())) {
      if (k.is_string()) keys.insert(k.get<std::string>());
    }
    for (const auto& k : keys) {
      auto [from, to] = by_key.equal_range(k);
      for (auto it = from; it != to; ++it) {
        // The entry of this cluster (a key may be in two files).
        const json& e = *it->second;
        const bool ours = by == "fingerprint"
                              ? Str(e, "fingerprint") == id
                              : Str(e, "fingerprint").empty() && Str(e, "cluster") == id;
        if (ours) Collect(e, c);
      }
    }
    if (c.failing.empty()) continue;
    IssueDraft d;
    d.id = id;
    d.by = by;
    d.failing = static_cast<int>(c.failing.size());
    d.file = util::StrCat(by == "fingerprint" ? "fingerprint-" : "cluster-", FileSafe(id), ".md");
    const std::string error = TheError(c);
    d.title = util::StrCat(id, ": ", error.empty() ? "failing" : Short(error, 100), " (", d.failing,
                           d.failing == 1 ? " test)" : " tests)");
    d.body = Body(report, c, d, options);
    drafts.push_back(std::move(d));
  }
  std::stable_sort(drafts.begin(), drafts.end(), [](const IssueDraft& a, const IssueDraft& b) {
    return a.failing != b.failing ? a.failing > b.failing : a.file < b.file;
  });
  return drafts;
}

}  // namespace triage::merge
