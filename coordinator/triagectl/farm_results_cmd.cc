#include "coordinator/triagectl/farm_results_cmd.h"

#include <map>
#include <string_view>
#include <utility>

#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "coordinator/merge/issue_drafts.h"
#include "coordinator/merge/sweep_diff.h"
#include "coordinator/triagectl/farm_nightly.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "nlohmann/json.hpp"

namespace triage::ctl::farm {
namespace {

// "diff --git" headers in a patch: the files it changes.
int CountPatchedFiles(std::string_view patch) {
  int n = 0;
  for (std::string_view line : util::SplitLines(patch)) n += line.starts_with("diff --git ");
  return n;
}

std::filesystem::path OutDir(const FarmOptions& o) { return o.out_dir.empty() ? "." : o.out_dir; }

// Made once the coordinator has answered: a refused request leaves nothing behind.
absl::Status MakeOutDir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        util::StrCat("--out ", dir.string(), ": cannot create the directory: ", ec.message()));
  }
  return absl::OkStatus();
}

// Writes the report's evidence/ files under dir; how many.
absl::StatusOr<int> WriteEvidence(const v1::Report& r, const std::filesystem::path& dir) {
  int evidence = 0;
  for (const auto& f : r.files()) {
    const std::string& name = f.name();
    if (!name.starts_with("evidence/") || name.find("..") != std::string::npos) continue;
    std::error_code ec;
    std::filesystem::create_directories((dir / name).parent_path(), ec);
    if (auto st = util::WriteFileAtomic(dir / name, f.content()); !st.ok()) return st;
    ++evidence;
  }
  return evidence;
}

// A sweep's report.json, through GetReport (which builds the outputs of a finished sweep when
// needed); warns on err when the report is partial.
absl::StatusOr<nlohmann::json> FetchReportJson(Client& client, const std::string& id,
                                               std::ostream& err) {
  v1::GetReportRequest req;
  req.set_sweep_id(id);
  auto r = client.Call<v1::GetReportRequest, v1::Report>(&Stub::GetReport, req);
  if (!r.ok()) return r.status();
  nlohmann::json j = nlohmann::json::parse(r->json(), nullptr, false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        util::StrCat("sweep ", id, ": the coordinator's report.json is not a JSON object"));
  }
  if (j.contains("partial") && j["partial"].is_string()) {
    err << "triagectl: warning: sweep " << id
        << "'s report is partial: " << j["partial"].get<std::string>() << "\n";
  }
  return j;
}

// `sweep diff` as text: the counts, the entries of each category shown, the cluster deltas.
void PrintDiff(std::ostream& out, const merge::SweepDiff& diff, bool all) {
  out << "sweep " << diff.before_sweep << " -> " << diff.after_sweep << "\n\n";
  const auto counts = diff.Counts();
  std::vector<std::vector<std::string>> rows;
  for (const auto& [c, n] : counts) {
    rows.push_back({std::string(merge::DiffCategoryName(c)), std::to_string(n)});
  }
  PrintTable(out, {"CATEGORY", "ENTRIES"}, rows);
  for (merge::DiffCategory c : merge::kDiffCategories) {
    if (counts.at(c) == 0 || (!all && merge::IsTrivial(c))) continue;
    rows.clear();
    for (const auto& e : diff.entries) {
      if (e.category != c) continue;
      rows.push_back(
          {e.key, e.arch, merge::StateText(e.before),
           e.carried_from.empty()
               ? merge::StateText(e.after)
               : util::StrCat(merge::StateText(e.after), " (carried from ", e.carried_from, ")")});
    }
    out << "\n" << merge::DiffCategoryName(c) << ":\n";
    PrintTable(out, {"ENTRY", "ARCH", "BEFORE", "AFTER"}, rows);
  }
  out << "\nfailure clusters (entries):\n";
  if (diff.clusters.empty()) {
    out << "none in either sweep\n";
    return;
  }
  rows.clear();
  for (const auto& cl : diff.clusters) {
    rows.push_back({std::to_string(cl.before), std::to_string(cl.after),
                    util::StrCat(cl.delta() > 0 ? "+" : "", cl.delta()), cl.signature});
  }
  PrintTable(out, {"BEFORE", "AFTER", "DELTA", "SIGNATURE"}, rows);
}

}  // namespace

std::string OutDirProblem(const std::filesystem::path& path) {
  std::error_code ec;
  for (auto p = path; !p.empty(); p = p.parent_path()) {
    const auto st = std::filesystem::status(p, ec);
    if (std::filesystem::exists(st)) {
      if (std::filesystem::is_directory(st)) return "";
      const char* what = std::filesystem::is_regular_file(st) ? "is a file, not a directory"
                                                              : "is not a directory";
      return p == path ? std::string(what) : util::StrCat(p.string(), " ", what);
    }
    if (std::filesystem::is_symlink(std::filesystem::symlink_status(p, ec))) {
      return util::StrCat(p.string(), " is a dangling symbolic link");
    }
    if (p == p.parent_path()) break;
  }
  return "";
}

int RunSweepPatch(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  const bool json = o.output == "json";
  const std::filesystem::path dir = OutDir(o);
  v1::GetPatchRequest req;
  req.set_sweep_id(o.id);
  if (!o.issue_links.empty()) {
    std::map<std::string, std::string> links;
    if (auto rc = ReadIssueLinks(o.issue_links, links, err)) return *rc;
    req.mutable_issue_links()->insert(links.begin(), links.end());
  }
  auto p = client.Call<v1::GetPatchRequest, v1::Patch>(&Stub::GetPatch, req);
  if (!p.ok()) return Error(err, p.status());
  if (auto st = MakeOutDir(dir); !st.ok()) return Error(err, st);
  nlohmann::json written = nlohmann::json::array();
  for (const auto& [name, text] : {std::pair{"tt-xla.patch", p->ttxla_patch()},
                                   std::pair{"tt-forge-models.patch", p->forge_patch()}}) {
    if (auto st = util::WriteFileAtomic(dir / name, text); !st.ok()) return Error(err, st);
    written.push_back({{"path", (dir / name).string()},
                       {"bytes", text.size()},
                       {"files", CountPatchedFiles(text)}});
    if (!json) out << (dir / name).string() << "\n";
  }
  for (const auto& c : p->conflicts()) err << "conflict: " << c << "\n";
  if (!p->partial().empty()) err << "triagectl: warning: partial patches: " << p->partial() << "\n";
  if (json) {
    nlohmann::json j = {
        {"sweep", p->sweep_id()},
        {"state", p->sweep_state()},
        {"partial", p->partial().empty() ? nlohmann::json(nullptr) : nlohmann::json(p->partial())},
        {"commits", {{"tt-xla", p->ttxla_commit()}, {"tt_forge_models", p->forge_commit()}}},
        {"written", written},
        {"conflicts", p->conflicts()}};
    out << j.dump(2) << "\n";
  }
  return kExitOk;
}

int RunSweepIssues(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  v1::GetReportRequest req;
  req.set_sweep_id(o.id);
  auto r = client.Call<v1::GetReportRequest, v1::Report>(&Stub::GetReport, req);
  if (!r.ok()) return Error(err, r.status());
  const nlohmann::json report = nlohmann::json::parse(r->json(), nullptr, false);
  auto drafts = merge::BuildIssueDrafts(report, {.evidence_url = o.evidence_url});
  if (!drafts.ok()) return Error(err, drafts.status());
  int failing = 0;
  for (const auto& d : *drafts) failing += d.failing;
  const bool json = o.output == "json";
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& d : *drafts) {
      j.push_back(
          {{"id", d.id},
           {"by", d.by},
           {"file",
            o.out_dir.empty() ? d.file : (std::filesystem::path(o.out_dir) / d.file).string()},
           {"title", d.title},
           {"failing", d.failing},
           {"body", d.body}});
    }
    if (o.out_dir.empty()) {
      out << j.dump(2) << "\n";
      return kExitOk;
    }
    // With --out the files are written below and the list printed without the bodies.
    for (auto& d : j) d.erase("body");
    if (auto st = MakeOutDir(o.out_dir); !st.ok()) return Error(err, st);
    for (const auto& d : *drafts) {
      const std::string text = util::StrCat("# ", d.title, "\n\n", d.body);
      if (auto st = util::WriteFileAtomic(std::filesystem::path(o.out_dir) / d.file, text);
          !st.ok()) {
        return Error(err, st);
      }
    }
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  if (drafts->empty()) {
    out << "sweep " << o.id << ": no remediation cluster is left failing: no issue drafts\n";
    return kExitOk;
  }
  if (o.out_dir.empty()) {
    for (std::size_t i = 0; i < drafts->size(); ++i) {
      if (i > 0) out << "\n---\n\n";
      out << "# " << (*drafts)[i].title << "\n\n" << (*drafts)[i].body;
    }
    return kExitOk;
  }
  if (auto st = MakeOutDir(o.out_dir); !st.ok()) return Error(err, st);
  for (const auto& d : *drafts) {
    const std::filesystem::path path = std::filesystem::path(o.out_dir) / d.file;
    const std::string text = util::StrCat("# ", d.title, "\n\n", d.body);
    if (auto st = util::WriteFileAtomic(path, text); !st.ok()) return Error(err, st);
    out << path.string() << "  " << d.failing << (d.failing == 1 ? " test  " : " tests  ")
        << d.title << "\n";
  }
  out << drafts->size() << " issue draft" << (drafts->size() == 1 ? "" : "s") << " for " << failing
      << " test" << (failing == 1 ? "" : "s") << " still failing\n";
  return kExitOk;
}

int RunSweepReport(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  const bool json = o.output == "json";
  const std::filesystem::path dir = OutDir(o);
  v1::GetReportRequest req;
  req.set_sweep_id(o.id);
  if (!o.issue_links.empty()) {
    std::map<std::string, std::string> links;
    if (auto rc = ReadIssueLinks(o.issue_links, links, err)) return *rc;
    req.mutable_issue_links()->insert(links.begin(), links.end());
  }
  auto r = client.Call<v1::GetReportRequest, v1::Report>(&Stub::GetReport, req);
  if (!r.ok()) return Error(err, r.status());
  if (auto st = MakeOutDir(dir); !st.ok()) return Error(err, st);
  nlohmann::json written = nlohmann::json::array();
  for (const auto& [name, text] :
       {std::pair{"report.md", r->markdown()}, std::pair{"report.json", r->json()}}) {
    if (auto st = util::WriteFileAtomic(dir / name, text); !st.ok()) return Error(err, st);
    written.push_back((dir / name).string());
    if (!json) out << (dir / name).string() << "\n";
  }
  auto evidence = WriteEvidence(*r, dir);
  if (!evidence.ok()) return Error(err, evidence.status());
  if (*evidence > 0 && !json) {
    out << (dir / "evidence").string() << "/ (" << *evidence << " files)\n";
  }
  const nlohmann::json report = nlohmann::json::parse(r->json(), nullptr, false);
  const auto field = [&](const char* name) {
    return report.is_object() && report.contains(name) ? report[name] : nlohmann::json(nullptr);
  };
  if (!field("partial").is_null()) {
    err << "triagectl: warning: partial report: " << field("partial").get<std::string>() << "\n";
  }
  if (json) {
    nlohmann::json j = {{"sweep", r->sweep_id()},
                        {"state", field("state")},
                        {"partial", field("partial")},
                        {"written", written},
                        {"evidence_dir", (dir / "evidence").string()},
                        {"evidence_files", *evidence},
                        {"totals", field("totals")}};
    out << j.dump(2) << "\n";
  }
  return kExitOk;
}

int RunSweepDiff(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  auto before = FetchReportJson(client, o.id, err);
  if (!before.ok()) return Error(err, before.status());
  auto after = FetchReportJson(client, o.other_id, err);
  if (!after.ok()) return Error(err, after.status());
  if (before->value("repo", "") != after->value("repo", "")) {
    err << "triagectl: warning: the sweeps read different repositories ("
        << before->value("repo", "") << ", " << after->value("repo", "") << ")\n";
  }
  auto diff = merge::DiffSweeps(*before, *after);
  if (!diff.ok()) return Error(err, diff.status());
  if (o.output == "json") {
    out << merge::DiffJson(*diff, o.all).dump(2) << "\n";
  } else {
    PrintDiff(out, *diff, o.all);
  }
  return kExitOk;
}

}  // namespace triage::ctl::farm
