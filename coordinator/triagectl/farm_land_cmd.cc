#include "coordinator/triagectl/farm_land_cmd.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/git/git.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "coordinator/merge/pr_text.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "coordinator/triagectl/land_plan.h"
#include "nlohmann/json.hpp"

namespace triage::ctl::farm {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxFileBytes = 16 << 20;

struct Sweep {
  v1::Patch patch;
  json report;
};

absl::StatusOr<Sweep> FetchSweep(Client& client, const std::string& id, bool with_patch) {
  Sweep s;
  if (with_patch) {
    v1::GetPatchRequest req;
    req.set_sweep_id(id);
    auto p = client.Call<v1::GetPatchRequest, v1::Patch>(&Stub::GetPatch, req);
    if (!p.ok()) return p.status();
    s.patch = std::move(*p);
  }
  v1::GetReportRequest req;
  req.set_sweep_id(id);
  auto r = client.Call<v1::GetReportRequest, v1::Report>(&Stub::GetReport, req);
  if (!r.ok()) return r.status();
  s.report = json::parse(r->json(), nullptr, false);
  if (!s.report.is_object() || !s.report.contains("entries")) {
    return absl::InvalidArgumentError(
        util::StrCat("sweep ", id, ": the coordinator's report.json is not a sweep report"));
  }
  return s;
}

// --exclude and --exclude-review as key -> why. InvalidArgument for a key the sweep lacks.
absl::StatusOr<std::map<std::string, std::string>> Excluded(const json& report,
                                                            const FarmOptions& o) {
  std::map<std::string, std::string> out;
  std::map<std::string, const json*> entries;
  for (const auto& e : report["entries"]) entries[e.value("key", "")] = &e;
  for (const auto& key : o.exclude) {
    if (key.empty()) continue;
    if (!entries.count(key)) {
      return absl::InvalidArgumentError(
          util::StrCat("--exclude: sweep ", o.id, " has no entry ", key));
    }
    out[key] = "excluded (--exclude)";
  }
  if (o.exclude_review) {
    for (const auto& [key, e] : entries) {
      const json& review = e->value("review", json::array());
      if (review.empty() || out.count(key)) continue;
      out[key] = util::StrCat("flagged for a person (--exclude-review): ",
                              review.front().is_string() ? review.front().get<std::string>() : "");
    }
  }
  return out;
}

// "Name <email>" -> {name, email}; nullopt when it is not that.
std::optional<std::pair<std::string, std::string>> Identity(const std::string& s) {
  const auto lt = s.rfind('<');
  if (lt == std::string::npos || lt == 0 || !s.ends_with(">")) return std::nullopt;
  std::string name(util::TrimWhitespace(std::string_view(s).substr(0, lt)));
  std::string email = s.substr(lt + 1, s.size() - lt - 2);
  if (name.empty() || email.empty() || email.find('@') == std::string::npos) return std::nullopt;
  return std::pair{name, email};
}

// Refuses anything but a clean checkout at exactly the sweep's commits. The submodule's gitlink
// may differ from its HEAD (a sweep of a moved submodule leaves tt-xla showing
// `M third_party/tt_forge_models`): what counts is that its HEAD is the sweep's commit.
std::optional<int> CheckAtSweep(const git::Git& repo, const git::Git& forge, const v1::Patch& p,
                                std::ostream& err) {
  for (const auto& [g, commit, name] : {std::tuple{&repo, p.ttxla_commit(), "tt-xla"},
                                        std::tuple{&forge, p.forge_commit(), "tt_forge_models"}}) {
    auto head = g->RevParse("HEAD");
    if (!head.ok()) return Error(err, head.status());
    if (*head != commit) {
      err << "triagectl: " << name << " in " << g->repo().string() << " is at "
          << head->substr(0, 12) << ", the sweep read " << commit.substr(0, 12)
          << ": check out the sweep's commits first (git -C " << g->repo().string() << " checkout "
          << commit << "), or land it on later ones with --onto\n";
      return kExitProblems;
    }
  }
  return std::nullopt;
}

std::optional<int> CheckClean(const git::Git& g, const char* name, std::ostream& err) {
  auto changes = g.WorkTreeChanges();
  if (!changes.ok()) return Error(err, changes.status());
  if (changes->empty()) return std::nullopt;
  err << "triagectl: " << name << " checkout " << g.repo().string()
      << " has local changes; apply needs a clean tree:\n";
  for (const auto& c : *changes) err << "  " << c << "\n";
  return kExitProblems;
}

// Where the changes land: both bases, resolved (docs/landing.md, "Onto a later main").
struct Bases {
  std::string ttxla;
  std::string forge;
};

absl::StatusOr<Bases> ResolveBases(const git::Git& repo, const git::Git& forge, const v1::Patch& p,
                                   const FarmOptions& o) {
  Bases b{p.ttxla_commit(), p.forge_commit()};
  if (!o.onto.empty()) {
    auto sha = repo.RevParse(o.onto);
    if (!sha.ok()) {
      return absl::InvalidArgumentError(util::StrCat("--onto ", o.onto, ": not a commit of ",
                                                     repo.repo().string(), " (",
                                                     util::MessageOf(sha.status()), ")"));
    }
    b.ttxla = *sha;
  }
  if (!o.forge_onto.empty()) {
    auto sha = forge.RevParse(o.forge_onto);
    if (!sha.ok()) {
      return absl::InvalidArgumentError(util::StrCat("--forge-onto ", o.forge_onto,
                                                     ": not a commit of ", forge.repo().string(),
                                                     " (", util::MessageOf(sha.status()), ")"));
    }
    b.forge = *sha;
  } else if (!o.onto.empty()) {
    auto link = repo.SubmoduleCommit(b.ttxla, git::kForgeSubmodulePath);
    if (!link.ok()) return link.status();
    b.forge = *link;
  }
  for (const auto& [g, sha, what] :
       {std::tuple{&repo, p.ttxla_commit(), "the sweep's tt-xla commit"},
        std::tuple{&forge, b.forge, "tt-forge-models base"}}) {
    auto has = g->HasCommit(sha);
    if (!has.ok()) return has.status();
    if (!*has) {
      return absl::FailedPreconditionError(util::StrCat(g->repo().string(), " does not have ", what,
                                                        " ", sha, ": fetch it first (git -C ",
                                                        g->repo().string(), " fetch)"));
    }
  }
  return b;
}

// A file at commit, "" when absent (a file the patch creates).
land::ReadFile Reader(const git::Git& g, std::string commit) {
  return [&g, commit](const std::string& path) -> absl::StatusOr<std::string> {
    auto text = g.Show(commit, path, kMaxFileBytes);
    if (absl::IsNotFound(text.status())) return std::string();
    return text;
  };
}

bool BranchExists(const git::Git& g, const std::string& branch) {
  return g.Run({"rev-parse", "--verify", "-q", "refs/heads/" + branch}).ok();
}

// Checks out base (as branch when given) in g, unless it is there already without a branch.
absl::Status CheckOut(const git::Git& g, const std::string& branch, const std::string& base,
                      bool force) {
  if (branch.empty()) {
    auto head = g.RevParse("HEAD");
    if (head.ok() && *head == base) return absl::OkStatus();
    return g.Run({"checkout", "-q", "--detach", base}).status();
  }
  return g.Run({"checkout", "-q", force ? "-B" : "-b", branch, base}).status();
}

// git -c user.name/-c user.email for --committer, then args.
std::vector<std::string> WithIdentity(const FarmOptions& o, std::vector<std::string> args) {
  std::vector<std::string> out;
  if (auto id = Identity(o.committer)) {
    out = {"-c", "user.name=" + id->first, "-c", "user.email=" + id->second};
  }
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

// Stages paths and commits them with message: the new commit's sha.
absl::StatusOr<std::string> Commit(const git::Git& g, const std::vector<std::string>& paths,
                                   const std::string& message, const FarmOptions& o) {
  std::vector<std::string> add = {"add", "--"};
  add.insert(add.end(), paths.begin(), paths.end());
  if (auto r = g.Run(add); !r.ok()) return r.status();
  std::vector<std::string> commit = {"commit", "-q", "--no-verify", "-F", "-"};
  if (!o.author.empty()) commit.push_back("--author=" + o.author);
  git::Git::CallOptions call;
  call.stdin_data = message;
  if (auto r = g.RunWith(WithIdentity(o, commit), call); !r.ok()) {
    return absl::FailedPreconditionError(
        util::StrCat("git commit in ", g.repo().string(), " failed: ", util::MessageOf(r.status()),
                     " (git's user.name and user.email, or --author and --committer, name who "
                     "commits)"));
  }
  return g.RevParse("HEAD");
}

struct Landing {
  Bases bases;
  land::Plan plan;
  // One part of --split-by: its entries (the others are in other parts) and its name.
  std::optional<std::set<std::string>> only;
  std::string part;
  bool forge_branch = false;
  std::string forge_commit;  // after --commit
  std::string ttxla_commit;  // after --commit ("" = nothing to commit)
  std::vector<std::string> pushed;
};

merge::PrOptions PrOptionsOf(const Landing& l, const v1::Patch& p, const FarmOptions& o) {
  merge::PrOptions opt;
  opt.left_out = l.plan.left_out;
  if (l.bases.ttxla != p.ttxla_commit()) opt.ttxla_base = l.bases.ttxla;
  if (l.bases.forge != p.forge_commit()) opt.forge_base = l.bases.forge;
  opt.forge_commit = l.forge_commit;
  opt.evidence_url = o.evidence_url;
  opt.only = l.only;
  opt.part = l.part;
  return opt;
}

// Writes the plan's files, commits and pushes as asked. Why it stopped, or OK.
absl::Status Land(const git::Git& repo, const git::Git& forge, const Sweep& s, const FarmOptions& o,
                  Landing& l) {
  l.forge_branch = !o.branch.empty() && !l.plan.forge.empty();
  if (auto st = CheckOut(forge, l.forge_branch ? o.branch : "", l.bases.forge, o.force); !st.ok()) {
    return st;
  }
  if (auto st = CheckOut(repo, o.branch, l.bases.ttxla, o.force); !st.ok()) return st;
  std::vector<std::string> forge_paths, ttxla_paths;
  for (const auto& f : l.plan.forge) {
    if (auto st = util::WriteFileAtomic(forge.repo() / f.path, f.text); !st.ok()) return st;
    forge_paths.push_back(f.path);
  }
  for (const auto& f : l.plan.ttxla) {
    if (auto st = util::WriteFileAtomic(repo.repo() / f.path, f.text); !st.ok()) return st;
    ttxla_paths.push_back(f.path);
  }
  if (!o.commit) return absl::OkStatus();
  l.forge_commit = l.bases.forge;
  if (!forge_paths.empty()) {
    auto text = merge::BuildPrText(s.report, merge::PrRepo::kForge, PrOptionsOf(l, s.patch, o));
    if (!text.ok()) return text.status();
    auto sha = Commit(forge, forge_paths, text->CommitMessage(), o);
    if (!sha.ok()) return sha.status();
    l.forge_commit = *sha;
  }
  // tt-xla: the YAML and the submodule at the forge commit, so the branch tests what it lands.
  ttxla_paths.push_back(std::string(git::kForgeSubmodulePath));
  auto text = merge::BuildPrText(s.report, merge::PrRepo::kTtXla, PrOptionsOf(l, s.patch, o));
  if (!text.ok()) return text.status();
  std::vector<std::string> add = {"add", "--"};
  add.insert(add.end(), ttxla_paths.begin(), ttxla_paths.end());
  if (auto r = repo.Run(add); !r.ok()) return r.status();
  auto staged = repo.Run({"diff", "--cached", "--name-only"});
  if (!staged.ok()) return staged.status();
  if (!util::TrimWhitespace(*staged).empty()) {
    auto sha = Commit(repo, ttxla_paths, text->CommitMessage(), o);
    if (!sha.ok()) return sha.status();
    l.ttxla_commit = *sha;
  }
  if (o.push_remote.empty()) return absl::OkStatus();
  for (const auto& [g, branch_made, name] :
       {std::tuple{&forge, l.forge_branch, "tt_forge_models"}, std::tuple{&repo, true, "tt-xla"}}) {
    if (!branch_made) continue;
    std::vector<std::string> push = {"push", "-q"};
    if (o.force) push.push_back("--force");
    push.insert(push.end(), {o.push_remote, "refs/heads/" + o.branch + ":refs/heads/" + o.branch});
    if (auto r = g->Run(push); !r.ok()) {
      return absl::FailedPreconditionError(util::StrCat("pushing ", o.branch, " of ", name, " to ",
                                                        o.push_remote,
                                                        " failed: ", util::MessageOf(r.status())));
    }
    l.pushed.push_back(name);
  }
  return absl::OkStatus();
}

json LandingJson(const Landing& l, const v1::Patch& p, const FarmOptions& o) {
  json files = json::array();
  for (const auto& f : l.plan.forge) files.push_back("tt_forge_models/" + f.path);
  for (const auto& f : l.plan.ttxla) files.push_back("tt-xla/" + f.path);
  json j = json{{"sweep", p.sweep_id()},
                {"bases", {{"tt-xla", l.bases.ttxla}, {"tt_forge_models", l.bases.forge}}},
                {"branch", o.branch.empty() ? json(nullptr) : json(o.branch)},
                {"commits",
                 {{"tt-xla", l.ttxla_commit.empty() ? json(nullptr) : json(l.ttxla_commit)},
                  {"tt_forge_models", l.forge_commit.empty() || l.forge_commit == l.bases.forge
                                          ? json(nullptr)
                                          : json(l.forge_commit)}}},
                {"changed_files", files},
                {"landed", l.plan.landed},
                {"left_out", l.plan.left_out},
                {"problems", l.plan.problems},
                {"committed", o.commit},
                {"pushed", l.pushed},
                {"partial", p.partial().empty() ? json(nullptr) : json(p.partial())}};
  if (l.only) j["part"] = l.part;
  return j;
}

// What a landing did: JSON (-o json), else lines; its warnings on err. json_parts: a --split-by
// landing collects each part's JSON there instead (printed together at the end).
void PrintLanding(const Landing& l, const v1::Patch& p, const FarmOptions& o, std::ostream& out,
                  std::ostream& err, json* json_parts = nullptr) {
  const bool json_out = o.output == "json";
  if (json_out) {
    if (json_parts != nullptr) {
      json_parts->push_back(LandingJson(l, p, o));
    } else {
      out << LandingJson(l, p, o).dump(2) << "\n";
    }
  } else {
    if (l.only) out << "part " << l.part << ":\n";
    for (const auto& [name, base, files, commit] :
         {std::tuple{"tt_forge_models", l.bases.forge, l.plan.forge.size(),
                     l.forge_commit == l.bases.forge ? std::string() : l.forge_commit},
          std::tuple{"tt-xla", l.bases.ttxla, l.plan.ttxla.size(), l.ttxla_commit}}) {
      out << name << ": " << files << " file" << (files == 1 ? "" : "s") << " changed on "
          << (o.branch.empty() || (files == 0 && std::string(name) == "tt_forge_models")
                  ? std::string("")
                  : "branch " + o.branch + " at ")
          << base.substr(0, 12);
      if (!commit.empty()) out << ", committed " << commit.substr(0, 12);
      out << "\n";
    }
    out << "landed " << l.plan.landed.size() << " entries";
    if (!l.plan.left_out.empty()) out << "; left out " << l.plan.left_out.size() << ":";
    out << "\n";
    for (const auto& [key, why] : l.plan.left_out) out << "  " << key << ": " << why << "\n";
    for (const auto& pushed : l.pushed) {
      out << "pushed " << o.branch << " of " << pushed << " to " << o.push_remote << "\n";
    }
    if (!o.commit) out << "nothing was committed: review with `git diff` in both repositories\n";
  }
  for (const auto& problem : l.plan.problems) err << "triagectl: warning: " << problem << "\n";
  if (!p.partial().empty()) err << "triagectl: warning: partial patches: " << p.partial() << "\n";
}

}  // namespace

namespace {

// A part's branch: the --branch name and the part's, in characters git takes ("nightly-1-torch-
// test_config_inference_single_device", "nightly-1-promoted").
std::string PartBranch(const std::string& branch, std::string part) {
  static constexpr std::string_view kConfigs = "tests/runner/test_config/";
  if (part.starts_with(kConfigs)) part = part.substr(kConfigs.size());
  if (part.ends_with(".yaml")) part.resize(part.size() - 5);
  for (char& c : part) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) c = '-';
  }
  return branch + "-" + part;
}

// sweep apply --split-by: one branch and commit per part, each from the same bases, the other
// parts' entries not in it.
int ApplyParts(const git::Git& repo, const git::Git& forge, const Sweep& s, const FarmOptions& o,
               const Bases& bases, land::PlanInput in, std::ostream& out, std::ostream& err) {
  if (!s.patch.forge_patch().empty()) {
    err << "triagectl: --split-by splits tt-xla's changes, and sweep " << o.id
        << " changes tt-forge-models too: land it whole\n";
    return kExitUsage;
  }
  auto parts = merge::SplitParts(s.report, o.split_by);
  if (!parts.ok()) return Error(err, parts.status());
  // Before anything changes: no part's branch may exist unless --force.
  for (const auto& [part, keys] : *parts) {
    const std::string branch = PartBranch(o.branch, part);
    if (!o.force && BranchExists(repo, branch)) {
      err << "triagectl: tt-xla in " << repo.repo().string() << " has a branch " << branch
          << " already: pass --force to reset it, or name another\n";
      return kExitProblems;
    }
  }
  const std::map<std::string, std::string> excluded = in.excluded;
  json json_parts = json::array();
  int rc = kExitOk;
  for (const auto& [part, keys] : *parts) {
    FarmOptions po = o;
    po.branch = PartBranch(o.branch, part);
    in.excluded = excluded;
    std::set<std::string> others;
    for (const auto& [other, other_keys] : *parts) {
      if (other == part) continue;
      for (const auto& k : other_keys) {
        others.insert(k);
        in.excluded.emplace(k, "in part " + other + " (--split-by)");
      }
    }
    auto plan = land::PlanLanding(in);
    if (!plan.ok()) return Error(err, plan.status());
    Landing l;
    l.bases = bases;
    l.plan = std::move(*plan);
    for (const auto& k : others) l.plan.left_out.erase(k);
    l.only = keys;
    l.part = part;
    if (auto st = Land(repo, forge, s, po, l); !st.ok()) {
      err << "triagectl: part " << part << ": " << util::MessageOf(st) << "\n";
      rc = kExitProblems;
    }
    PrintLanding(l, s.patch, po, out, err, &json_parts);
    if (rc != kExitOk) break;
  }
  if (o.output == "json") out << json{{"parts", json_parts}}.dump(2) << "\n";
  return rc;
}

}  // namespace

int RunSweepApply(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  if (!o.split_by.empty() && !o.commit) {
    err << "triagectl: --split-by needs --branch NAME and --commit (a branch and a commit per "
           "part)\n";
    return kExitUsage;
  }
  if (o.commit && o.branch.empty()) {
    err << "triagectl: --commit needs --branch NAME (the commits go on new branches)\n";
    return kExitUsage;
  }
  if (!o.push_remote.empty() && !o.commit) {
    err << "triagectl: --push needs --commit (and --branch)\n";
    return kExitUsage;
  }
  if (o.force && o.branch.empty()) {
    err << "triagectl: --force resets an existing --branch; give one\n";
    return kExitUsage;
  }
  for (const auto& [flag, value] :
       {std::pair{"--author", &o.author}, {"--committer", &o.committer}}) {
    if (!value->empty() && !Identity(*value)) {
      err << "triagectl: " << flag << " " << *value << ": must be \"Name <email>\"\n";
      return kExitUsage;
    }
  }
  auto s = FetchSweep(client, o.id, true);
  if (!s.ok()) return Error(err, s.status());
  const git::Git repo(o.repo);
  const git::Git forge(std::filesystem::path(o.repo) / git::kForgeSubmodulePath);
  for (const auto* g : {&repo, &forge}) {
    if (auto head = g->RevParse("HEAD"); !head.ok()) {
      err << "triagectl: " << g->repo().string()
          << " is not a git checkout: " << util::MessageOf(head.status()) << "\n";
      return kExitProblems;
    }
  }
  const bool moved = !o.onto.empty() || !o.forge_onto.empty();
  if (!moved && o.branch.empty()) {
    if (auto rc = CheckAtSweep(repo, forge, s->patch, err)) return *rc;
  }
  if (auto rc = CheckClean(repo, "tt-xla", err)) return *rc;
  if (auto rc = CheckClean(forge, "tt_forge_models", err)) return *rc;
  Landing l;
  auto bases = ResolveBases(repo, forge, s->patch, o);
  if (!bases.ok()) return Error(err, bases.status());
  l.bases = *bases;
  auto excluded = Excluded(s->report, o);
  if (!excluded.ok()) return Error(err, excluded.status());
  land::PlanInput in;
  in.ttxla_patch = s->patch.ttxla_patch();
  in.forge_patch = s->patch.forge_patch();
  in.report = &s->report;
  in.ttxla_at_sweep = Reader(repo, s->patch.ttxla_commit());
  in.ttxla_target = Reader(repo, l.bases.ttxla);
  in.forge_target = Reader(forge, l.bases.forge);
  in.excluded = *excluded;
  if (!o.split_by.empty()) return ApplyParts(repo, forge, *s, o, l.bases, std::move(in), out, err);
  auto plan = land::PlanLanding(in);
  if (!plan.ok()) return Error(err, plan.status());
  l.plan = std::move(*plan);
  if (!o.branch.empty()) {
    // Before anything changes: an existing branch is reset only with --force.
    for (const auto& [g, needed, name] :
         {std::tuple{&forge, !l.plan.forge.empty(), "tt_forge_models"},
          std::tuple{&repo, true, "tt-xla"}}) {
      if (needed && !o.force && BranchExists(*g, o.branch)) {
        err << "triagectl: " << name << " in " << g->repo().string() << " has a branch " << o.branch
            << " already: pass --force to reset it, or name another\n";
        return kExitProblems;
      }
    }
  }
  if (auto st = Land(repo, forge, *s, o, l); !st.ok()) {
    err << "triagectl: " << util::MessageOf(st) << "\n";
    PrintLanding(l, s->patch, o, out, err);
    return kExitProblems;
  }
  PrintLanding(l, s->patch, o, out, err);
  return kExitOk;
}

int RunSweepPrBody(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  if (!o.split_by.empty() && o.pr_repo == "forge") {
    err << "triagectl: --split-by splits tt-xla's pull request: it does not apply to --repo "
           "forge\n";
    return kExitUsage;
  }
  auto s = FetchSweep(client, o.id, true);
  if (!s.ok()) return Error(err, s.status());
  auto excluded = Excluded(s->report, o);
  if (!excluded.ok()) return Error(err, excluded.status());
  merge::PrOptions opt;
  opt.left_out = *excluded;
  opt.evidence_url = o.evidence_url;
  // tt-forge-models' text when its patch changes something (or when asked for), then tt-xla's:
  // one, or one per part.
  struct Text {
    std::string repo;
    std::string part;
    merge::PrText text;
  };
  std::vector<Text> texts;
  if (o.pr_repo == "forge" || (o.pr_repo.empty() && !s->patch.forge_patch().empty())) {
    auto text = merge::BuildPrText(s->report, merge::PrRepo::kForge, opt);
    if (!text.ok()) return Error(err, text.status());
    texts.push_back({"forge", "", std::move(*text)});
  }
  if (o.pr_repo.empty() || o.pr_repo == "tt-xla") {
    std::map<std::string, std::set<std::string>> parts = {{"", {}}};
    if (!o.split_by.empty()) {
      auto split = merge::SplitParts(s->report, o.split_by);
      if (!split.ok()) return Error(err, split.status());
      parts = std::move(*split);
    }
    for (auto& [part, keys] : parts) {
      merge::PrOptions p = opt;
      if (!o.split_by.empty()) {
        p.only = std::move(keys);
        p.part = part;
      }
      auto text = merge::BuildPrText(s->report, merge::PrRepo::kTtXla, p);
      if (!text.ok()) return Error(err, text.status());
      texts.push_back({"tt-xla", part, std::move(*text)});
    }
  }
  if (o.output == "json") {
    json j = json::object();
    for (const auto& t : texts) {
      json one = {{"title", t.text.title}, {"body", t.text.body}};
      if (t.repo == "tt-xla") one["counts"] = t.text.counts;
      if (o.split_by.empty()) {
        j[t.repo] = std::move(one);
      } else if (t.repo == "forge") {
        j["forge"] = std::move(one);
      } else {
        one["part"] = t.part;
        j["tt-xla"].push_back(std::move(one));
      }
    }
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (i > 0) out << "\n---\n\n";
    out << "# " << texts[i].text.title << "\n\n" << texts[i].text.body;
  }
  return kExitOk;
}

}  // namespace triage::ctl::farm
