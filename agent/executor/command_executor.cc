#include "agent/executor/command_executor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include "nlohmann/json.hpp"

#include "agent/executor/command_floor.h"
#include "agent/executor/command_provenance.h"
#include "agent/executor/command_verify.h"
#include "agent/executor/shared_wave.h"
#include "agent/workspace/workspace.h"
#include "common/command/command_params.h"
#include "common/command/shared_scope.h"
#include "common/command/summary.h"
#include "common/diff/apply_diff.h"
#include "common/lift/lift.h"
#include "common/process/process.h"
#include "common/registry/registry.h"
#include "common/util/file.h"
#include "common/util/strings.h"

extern char** environ;

namespace triage::agent {
namespace {

std::string Replace(std::string item, const std::map<std::string, std::string>& values) {
  std::string out;
  std::size_t i = 0;
  while (i < item.size()) {
    if (item[i] == '{') {
      std::size_t close = item.find('}', i);
      if (close != std::string::npos) {
        auto it = values.find(item.substr(i + 1, close - i - 1));
        if (it != values.end()) {
          out += it->second;
          i = close + 1;
          continue;
        }
      }
    }
    out.push_back(item[i++]);
  }
  return out;
}

// The shard's base files: both repositories at the spec's pinned commits, read from the
// workspace's git object store (the working tree holds what the command changed).
class WorkspacePinnedFiles : public lift::PinnedFiles {
 public:
  WorkspacePinnedFiles(const workspace::Workspace& ws, const v1::ShardSpec& spec)
      : ws_(ws), spec_(spec) {}
  absl::StatusOr<std::string> ReadTtXla(const std::string& path) override {
    return ws_.ReadAtCommit(workspace::kTtXlaRepo, spec_.ttxla_commit(), path);
  }
  absl::StatusOr<std::string> ReadForge(const std::string& path) override {
    return ws_.ReadAtCommit(workspace::kForgeRepo, spec_.forge_commit(), path);
  }

 private:
  const workspace::Workspace& ws_;
  const v1::ShardSpec& spec_;
};

// The summary a run's command wrote to $TRIAGE_SUMMARY (docs/remediation.md, "The command's
// summary"): kept as evidence (summaries/run-<n>.json) and, when valid, on the run's outcomes;
// one that is not valid is a review flag saying why, and nothing else of the run changes.
void ReadSummary(const std::filesystem::path& path, v1::ShardResult& result,
                 std::optional<v1::CommandSummary>& summary, std::string& review) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return;
  const std::string name = util::StrCat("summaries/", path.filename().string());
  auto text = util::ReadFile(path, command::kMaxSummaryBytes);
  if (!text.ok()) {
    review = util::StrCat("summary not used: ", name, ": ", text.status().message());
    return;
  }
  auto parsed = command::ParseSummary(*text, name);
  if (!parsed.ok()) {
    review = util::StrCat("summary not used: ", parsed.status().message());
    return;
  }
  v1::Evidence* ev = result.add_evidence();
  ev->set_name(name);
  ev->set_kind("summary");
  ev->set_content(std::move(*text));
  summary = std::move(*parsed);
}

// What the shard's pre-applied edits and registry lines made of their files before the command
// ran (fix once, verify many: a follower starts from its lead's shared fix). A file the command
// left as it was is not the command's change, so the result does not carry it again.
struct PreApplied {
  std::map<std::pair<std::string, std::string>, std::string> files;  // (repo, path) -> text
  std::optional<std::string> registry;  // training_utils.py, with pre_registry lines
};

std::filesystem::path RepoFile(const workspace::Workspace& ws, const std::string& repo,
                               const std::string& path) {
  return (repo == workspace::kForgeRepo ? ws.forge_root() : ws.root()) / path;
}

std::string TextOrEmpty(const std::filesystem::path& p) {
  auto text = util::ReadFile(p, 64 << 20);
  return text.ok() ? std::move(*text) : std::string();
}

const std::string& RegistryPath() {
  static const std::string path(
      registry::kTrainingUtilsPath.substr(std::string_view("third_party/tt_forge_models/").size()));
  return path;
}

PreApplied SnapshotPreApplied(const workspace::Workspace& ws, const v1::ShardSpec& spec) {
  PreApplied pre;
  for (const auto& fe : spec.pre_apply()) {
    std::vector<std::string> paths;
    if (!fe.path().empty()) paths.push_back(fe.path());
    if (auto split = diff::SplitDiff(fe.diff()); split.ok()) {
      for (const auto& fd : *split) {
        if (!fd.path().empty()) paths.push_back(fd.path());
      }
    }
    for (const auto& p : paths) {
      pre.files[{fe.repo(), p}] = TextOrEmpty(RepoFile(ws, fe.repo(), p));
    }
  }
  if (!spec.pre_registry().empty()) {
    pre.registry = TextOrEmpty(RepoFile(ws, std::string(workspace::kForgeRepo), RegistryPath()));
  }
  return pre;
}

// Drops from the lifted result what the shard's pre-applied state holds and the command did not
// change further.
void DropPreApplied(const workspace::Workspace& ws, const PreApplied& pre,
                    v1::ShardResult& result) {
  auto* edits = result.mutable_file_edits();
  for (int i = edits->size() - 1; i >= 0; --i) {
    const v1::FileEdit& fe = edits->Get(i);
    auto it = pre.files.find({fe.repo(), fe.path()});
    if (it != pre.files.end() && TextOrEmpty(RepoFile(ws, fe.repo(), fe.path())) == it->second) {
      edits->DeleteSubrange(i, 1);
    }
  }
  if (pre.registry && TextOrEmpty(RepoFile(ws, std::string(workspace::kForgeRepo),
                                           RegistryPath())) == *pre.registry) {
    result.clear_registry_ops();
  }
}

// The hint a run's command gets at $TRIAGE_HINT (docs/remediation.md, "Fix once, verify many"):
// what the cluster's lead found, or an earlier run of this shard for the same cluster.
std::string HintJson(const v1::ShardSpec& spec, const v1::CommandSummary* earlier,
                     const std::string& earlier_key) {
  nlohmann::json hint = nlohmann::json::object();
  const v1::CommandSummary* summary = earlier;
  if (spec.has_fan_out() && earlier == nullptr) {
    const v1::FanOut& f = spec.fan_out();
    hint["lead_shard"] = f.lead_shard();
    hint["cluster"] = f.cluster();
    hint["lead_fixed"] = f.lead_fixed();
    hint["lead_fixed_keys"] =
        std::vector<std::string>(f.lead_fixed_keys().begin(), f.lead_fixed_keys().end());
    hint["shared_files"] =
        std::vector<std::string>(f.shared_files().begin(), f.shared_files().end());
    if (f.has_lead_summary()) summary = &f.lead_summary();
  } else if (earlier != nullptr) {
    hint["earlier_key"] = earlier_key;
  }
  if (summary != nullptr) {
    hint["summary"] = {{"fingerprint", summary->fingerprint()},
                       {"layer", summary->layer()},
                       {"fix_kind", summary->fix_kind()},
                       {"root_cause", summary->root_cause()},
                       {"result", summary->result()}};
  }
  return hint.dump(2) + "\n";
}

std::string EntryId(const v1::ShardEntry& e) { return e.file() + "\n" + e.key(); }

// What fixed each entry, as the report and the pull requests say it (fix_path): the shard's own
// changes for the entries a command ran for ("loader", "shared", "registry", joined by "+"; the
// diffs are collected once per shard, so every run's entries share them), the lead's shared fix
// for a follower's entry it fixed (with the lead's summary, the bug's fingerprint).
void DescribeFixes(const v1::ShardSpec& spec, v1::ShardResult& result) {
  std::vector<std::string> parts;
  auto add = [&parts](const char* p) {
    if (std::find(parts.begin(), parts.end(), p) == parts.end()) parts.emplace_back(p);
  };
  for (const auto& fe : result.file_edits()) {
    add(command::OutsideLoader(spec.loader(), fe.repo(), fe.path()) ? "shared" : "loader");
  }
  if (!result.registry_ops().empty()) add("registry");
  const std::string own = util::StrJoin(parts, "+");
  const std::string by_lead = util::StrCat("shard ", spec.fan_out().lead_shard());
  for (auto& o : *result.mutable_entries()) {
    if (o.fixed_by().empty() || o.fixed_by().starts_with("run for ")) {
      o.set_fix_path(own);
    } else if (spec.has_fan_out() && o.fixed_by() == by_lead) {
      if (!spec.fan_out().shared_files().empty()) o.set_fix_path("shared");
      if (spec.fan_out().has_lead_summary() && !o.has_summary()) {
        *o.mutable_summary() = spec.fan_out().lead_summary();
      }
    }
  }
}

}  // namespace

absl::StatusOr<v1::ShardResult> CommandExecutor::VerifyEntries(
    ExecContext& ctx, const std::filesystem::path& scripts,
    const std::vector<const v1::ShardEntry*>& entries) {
  v1::ShardSpec some = *ctx.spec;
  some.clear_entries();
  for (const auto* e : entries) *some.add_entries() = *e;
  ExecContext sub = ctx;
  sub.spec = &some;
  return RunFarmVerification(sub, scripts);
}

CommandExecutor::CommandExecutor(std::filesystem::path scripts_dir)
    : scripts_dir_(std::move(scripts_dir)) {}

std::vector<std::pair<std::string, std::string>> CommandExecutor::Environment(
    const std::vector<std::string>& extra_allow) {
  std::vector<std::string> own;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) own.emplace_back(*e);
  return command::AllowedEnvironment(extra_allow, own);
}

std::vector<std::string> CommandExecutor::BuildArgv(
    const std::vector<std::string>& command, const std::map<std::string, std::string>& values,
    const std::vector<std::string>& keys) {
  std::vector<std::string> argv;
  for (const std::string& s : command) {
    if (s == "{keys}") {
      argv.insert(argv.end(), keys.begin(), keys.end());
      continue;
    }
    argv.push_back(Replace(s, values));
  }
  return argv;
}

absl::StatusOr<v1::ShardResult> CommandExecutor::Run(ExecContext& ctx) {
  const v1::ShardSpec& spec = *ctx.spec;
  if (ctx.workspace == nullptr) {
    return absl::FailedPreconditionError("the command executor needs a workspace");
  }
  auto params = command::ParseParams({spec.params().begin(), spec.params().end()});
  if (!params.ok()) return params.status();
  const bool per_shard = params->per_shard;
  std::chrono::seconds timeout(spec.timeout_seconds());
  if (ctx.settings.command_timeout.count() > 0) timeout = ctx.settings.command_timeout;
  if (params->timeout) timeout = *params->timeout;
  const std::filesystem::path junit_dir = ctx.shard_dir / "junit";
  const std::filesystem::path log_dir = ctx.shard_dir / "logs";
  std::filesystem::create_directories(junit_dir);
  std::filesystem::create_directories(log_dir);
  const std::filesystem::path summary_dir = ctx.shard_dir / "summaries";
  std::filesystem::create_directories(summary_dir);
  std::string loader_dir = spec.loader().substr(0, spec.loader().rfind('/'));
  const PreApplied pre = SnapshotPreApplied(*ctx.workspace, spec);
  // The farm verifies on a device: not in a probe phase, not with verify off.
  const bool verify = params->verify && spec.phase() != v1::PHASE_PROBE;
  std::filesystem::path scripts = scripts_dir_;
  if (scripts.empty()) scripts = ctx.settings.probe_script.parent_path();
  if (verify && scripts.empty()) {
    return absl::FailedPreconditionError(
        "params.verify: the command executor's verification needs the agent's scripts_dir "
        "(triage_pytest_plugin.py)");
  }

  if (spec.params().count(std::string(command::kWaveParam))) {
    // A shared fix's wave (agent/executor/shared_wave.h): checks only, no command runs.
    if (!verify) {
      return absl::FailedPreconditionError("a shared fix's wave verifies on a device: verify off");
    }
    return RunSharedWave(ctx, [&](const std::vector<const v1::ShardEntry*>& entries) {
      return VerifyEntries(ctx, scripts, entries);
    });
  }
  v1::ShardResult result;
  result.set_status(v1::ShardResult::SUCCEEDED);
  // Fix once, verify many (docs/remediation.md): entries an earlier change fixed, verified by
  // the farm before any command ran for them (file + key -> what fixed them), and those checks.
  std::map<std::string, std::string> fixed_by;
  v1::ShardResult checks;
  auto check = [&](const std::vector<const v1::ShardEntry*>& entries,
                   const std::string& by) -> absl::Status {
    if (ctx.progress) ctx.progress("verify", entries.size() == 1 ? entries[0]->key() : "", {by});
    auto farm = VerifyEntries(ctx, scripts, entries);
    if (!farm.ok()) return farm.status();
    for (const auto& o : farm->entries()) {
      if (o.verdict() == "pass") fixed_by[o.file() + "\n" + o.key()] = by;
      *checks.add_entries() = o;
    }
    for (const auto& ev : farm->evidence()) *checks.add_evidence() = ev;
    return absl::OkStatus();
  };
  // A follower whose lead's fix was accepted, and a later phase on another arch: their entries
  // are verified with what is pre-applied before any command runs for them.
  const bool pre_applied = spec.pre_apply_size() > 0 || spec.pre_registry_size() > 0;
  if (verify && pre_applied && (spec.fan_out().lead_fixed() || spec.phase() == v1::PHASE_VERIFY)) {
    std::vector<const v1::ShardEntry*> all;
    for (const auto& e : spec.entries()) all.push_back(&e);
    const std::string by = spec.fan_out().lead_fixed()
                               ? util::StrCat("shard ", spec.fan_out().lead_shard())
                               : std::string("the first phase");
    if (auto s = check(all, by); !s.ok()) return s;
  }

  struct Run {
    const v1::ShardEntry* entry = nullptr;  // null: per shard
    int number = 0;  // 1, 2, ...: logs/command-<n>.log, summaries/run-<n>.json
    std::string review;
    std::optional<v1::CommandSummary> summary;  // what the command wrote to $TRIAGE_SUMMARY
    std::string summary_review;                 // why what it wrote is not used
    double seconds = 0;                         // its wall time
    std::string ended;                          // how it ended ("exit 0", ...)
  };
  std::vector<Run> runs;
  std::vector<std::string> keys;  // {keys}: the entries the command runs for
  for (const auto& e : spec.entries()) {
    if (!fixed_by.count(EntryId(e))) keys.push_back(e.key());
  }
  auto add_run = [&runs](const v1::ShardEntry* entry) {
    Run run;
    run.entry = entry;
    runs.push_back(std::move(run));
  };
  if (per_shard) {
    if (!keys.empty()) add_run(nullptr);
  } else {
    for (const auto& e : spec.entries()) {
      if (!fixed_by.count(EntryId(e))) add_run(&e);
    }
  }
  // An entry whose cluster an earlier run of this shard changed the workspace for is verified
  // before its own run: the same bug in one loader is often fixed for all its variants at once.
  std::map<std::string, const Run*> changed_for;  // cluster -> the run that changed files for it
  std::string state;                              // the workspace's diffs after the last run
  const bool within = verify && !per_shard && runs.size() > 1;
  if (within) {
    auto diffs = ctx.workspace->CollectDiffs(spec.ttxla_commit(), spec.forge_commit());
    if (!diffs.ok()) return diffs.status();
    state = diffs->ttxla + diffs->forge;
  }
  int n = 0;
  for (auto& run : runs) {
    if (ctx.cancelled && ctx.cancelled()) return absl::CancelledError("lease revoked");
    const std::string cluster = run.entry != nullptr ? run.entry->cluster() : "";
    const Run* earlier = nullptr;
    if (auto it = changed_for.find(cluster);
        within && !cluster.empty() && it != changed_for.end()) {
      earlier = it->second;
      if (auto s = check({run.entry}, util::StrCat("run for ", earlier->entry->key())); !s.ok()) {
        return s;
      }
      if (fixed_by.count(EntryId(*run.entry))) continue;
    }
    run.number = ++n;
    std::map<std::string, std::string> values = {
        {"loader", spec.loader()},
        {"loader_dir", loader_dir},
        {"playbook", spec.playbook()},
        {"arch", spec.arch()},
        {"workspace", ctx.workspace->root().string()},
        {"shard_dir", ctx.shard_dir.string()},
        {"junit", (junit_dir / util::StrCat("run-", n, ".xml")).string()},
        {"sweep", spec.sweep_id()},
        {"shard", spec.shard_id()},
    };
    if (run.entry != nullptr) {
      values["key"] = run.entry->key();
      values["file"] = run.entry->file();
      values["flavor"] = run.entry->flavor();
      values["reason"] = run.entry->reason();
    }
    const std::vector<std::string> argv = BuildArgv(params->command, values, keys);
    const std::string label = run.entry != nullptr ? run.entry->key() : "";
    const std::filesystem::path log = log_dir / util::StrCat("command-", n, ".log");
    const std::filesystem::path summary = summary_dir / util::StrCat("run-", n, ".json");
    std::error_code rm;
    std::filesystem::remove(summary, rm);
    // The hint: the cluster lead's findings, or this shard's earlier run for the same cluster.
    const std::filesystem::path hint = ctx.shard_dir / util::StrCat("hint-", n, ".json");
    const bool hinted = spec.has_fan_out() || (earlier != nullptr && earlier->summary);
    if (hinted) {
      const std::string text =
          HintJson(spec, earlier != nullptr && earlier->summary ? &*earlier->summary : nullptr,
                   earlier != nullptr ? earlier->entry->key() : "");
      if (auto s = util::WriteFileAtomic(hint, text); !s.ok()) return s;
    }
    if (ctx.progress)
      ctx.progress("command", label, {util::StrCat("$ ", util::StrJoin(argv, " "))});
    process::RunOptions opts;
    opts.argv = argv;
    opts.cwd = ctx.workspace->root();
    opts.timeout = timeout;
    opts.log_path = log;
    opts.cancelled = ctx.cancelled;
    // A scrubbed environment: the allow-list and the executor's own variables, never the agent's
    // whole environment (no API tokens, no cloud credentials; docs/farm.md, "Executors").
    opts.inherit_env = false;
    opts.env = Environment(ctx.settings.command_env_allow);
    opts.env.insert(opts.env.end(), {{"TRIAGE_SHARD_DIR", ctx.shard_dir.string()},
                                     {"TRIAGE_JUNIT", values["junit"]},
                                     {"TRIAGE_KEY", values.count("key") ? values["key"] : ""},
                                     {"TRIAGE_SUMMARY", summary.string()}});
    if (hinted) opts.env.emplace_back("TRIAGE_HINT", hint.string());
    auto res = process::Run(opts);
    if (!res.ok()) return res.status();  // could not start: the agent's setup is wrong
    if (res->cancelled) return absl::CancelledError("lease revoked");
    run.seconds = std::chrono::duration<double>(res->duration).count();
    run.ended = res->Describe();
    if (!res->ok()) {
      run.review =
          util::StrCat("command ", res->Describe(), " (log ", log.filename().string(), ")");
      result.set_exit_code(res->exit_code != 0 ? res->exit_code : -1);
    }
    if (ctx.progress) ctx.progress("command", label, process::TailLines(log, 10));
    // The run's transcript (stdout and stderr) is evidence: logs/command-<n>.log
    // (docs/evidence.md), its last 256 KiB as the native executor's logs.
    v1::Evidence* ev = result.add_evidence();
    ev->set_name(util::StrCat("logs/", log.filename().string()));
    ev->set_kind("log");
    auto text = util::ReadFile(log, 64 << 20);
    std::string content = text.ok() ? std::move(*text) : "";
    if (content.size() > (256u << 10)) content.erase(0, content.size() - (256u << 10));
    ev->set_content(std::move(content));
    ReadSummary(summary, result, run.summary, run.summary_review);
    if (within && !cluster.empty()) {
      auto diffs = ctx.workspace->CollectDiffs(spec.ttxla_commit(), spec.forge_commit());
      if (!diffs.ok()) return diffs.status();
      std::string now = diffs->ttxla + diffs->forge;
      if (now != state) changed_for[cluster] = &run;
      state = std::move(now);
    }
  }
  result.set_command_runs(n);

  // What the command changed, and what it recorded.
  auto diffs = ctx.workspace->CollectDiffs(spec.ttxla_commit(), spec.forge_commit());
  if (!diffs.ok()) return diffs.status();
  result.set_ttxla_diff(diffs->ttxla);
  result.set_forge_diff(diffs->forge);
  std::vector<std::filesystem::path> junits;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(junit_dir, ec)) {
    // The command's own JUnit files: not those of the farm's checks before its runs.
    const std::string name = util::StrCat("junit/", f.path().filename().string());
    const bool checked = std::any_of(checks.evidence().begin(), checks.evidence().end(),
                                     [&](const v1::Evidence& ev) { return ev.name() == name; });
    if (f.path().extension() == ".xml" && !checked) junits.push_back(f.path());
  }
  std::sort(junits.begin(), junits.end());
  std::vector<std::string> junit_names;
  for (const auto& f : junits) {
    auto xml = util::ReadFile(f, 64 << 20);
    if (!xml.ok()) continue;
    v1::Evidence* ev = result.add_evidence();
    ev->set_name(util::StrCat("junit/", f.filename().string()));
    ev->set_kind("junit");
    ev->set_content(*xml);
    junit_names.push_back(ev->name());
  }
  auto outcome = [&](const v1::ShardEntry& e) {
    v1::EntryOutcome* o = result.add_entries();
    o->set_key(e.key());
    o->set_file(e.file());
    o->set_arch(spec.arch());
    o->set_flavor(e.flavor());
    o->set_verdict("command");
    o->set_disposition(v1::EntryOutcome::DONE);  // the command's run decides it
    o->set_changed(false);                       // until the lift below finds a change of the entry
    return o;
  };
  for (const auto& run : runs) {
    if (run.number == 0) continue;  // fixed by an earlier run: no command ran
    std::vector<const v1::ShardEntry*> entries;
    if (run.entry != nullptr) {
      entries.push_back(run.entry);
    } else {
      for (const auto& e : spec.entries()) {
        if (!fixed_by.count(EntryId(e))) entries.push_back(&e);
      }
    }
    for (const auto* e : entries) {
      v1::EntryOutcome* o = outcome(*e);
      if (!run.review.empty()) o->add_review(run.review);
      if (!run.summary_review.empty()) o->add_review(run.summary_review);
      if (run.summary) {
        *o->mutable_summary() = *run.summary;
        o->add_evidence(util::StrCat("summaries/run-", run.number, ".json"));
      }
      // The log of the entry's run and the JUnit files (as the native playbooks link them).
      o->add_evidence(util::StrCat("logs/command-", run.number, ".log"));
      for (const auto& name : junit_names) o->add_evidence(name);
    }
  }
  for (const auto& e : spec.entries()) {
    auto by = fixed_by.find(EntryId(e));
    if (by == fixed_by.end()) continue;
    v1::EntryOutcome* o = outcome(e);
    o->set_fixed_by(by->second);
    for (const auto& c : checks.entries()) {
      if (c.key() != e.key() || c.file() != e.file()) continue;
      for (const auto& name : c.evidence()) o->add_evidence(name);
    }
  }
  // One result format: the diffs become entry edits, registry operations and loader file edits
  // here, once, and the coordinator never sees raw diffs (docs/farm.md, "Executors"). What cannot
  // be lifted is flagged for review on the outcomes; files outside the shard stay in the result,
  // and the coordinator's ownership check rejects it naming them.
  WorkspacePinnedFiles pinned(*ctx.workspace, spec);
  const lift::LiftOutput lifted = lift::Lift(spec, result, pinned);
  DropPreApplied(*ctx.workspace, pre, result);
  DescribeFixes(spec, result);
  // A threshold the command set is judged against the farm's own measured floor (the merge's
  // guards read it): measured here, on CPU, in the workspace as the command left it.
  if (auto s = MeasurePccFloors(ctx, scripts, result); !s.ok()) return s;
  if (ctx.progress && (!lifted.notes.empty() || !lifted.outside.empty())) {
    std::vector<std::string> lines = lifted.notes;
    for (const auto& f : lifted.outside) {
      lines.push_back(util::StrCat(f, " is outside the shard: the result will be rejected"));
    }
    ctx.progress("lift", "", lines);
  }
  // Provenance (docs/remediation.md): the workspace's repositories, what the command reported,
  // the hardware, each run's time, end and transcript, and the farm's verification time.
  auto provenance = [&](double verification_seconds) {
    std::vector<CommandRunRecord> records;
    for (const auto& run : runs) {
      if (run.number == 0) continue;
      records.push_back({run.number, run.entry != nullptr ? run.entry->key() : "", run.seconds,
                         run.ended,
                         run.summary ? util::StrCat("summaries/run-", run.number, ".json") : ""});
    }
    RecordProvenance(ctx, params->command, records, verification_seconds, result);
  };
  // A probe phase runs on a CPU agent, which has no device to verify on.
  if (!verify) {
    provenance(0);
    return result;
  }
  // The farm's own verification of what the command decided (docs/farm.md, "Executors"): the
  // native playbooks' pytest session and decision, in the workspace as the command left it. When
  // no command ran, the checks before are that verification.
  if (n == 0 && !checks.entries().empty() &&
      static_cast<int>(fixed_by.size()) == spec.entries_size()) {
    ApplyFarmVerification(spec, pinned, checks, result);
    provenance(0);
    return result;
  }
  for (const auto& ev : checks.evidence()) *result.add_evidence() = ev;
  const auto verify_start = std::chrono::steady_clock::now();
  auto farm = RunFarmVerification(ctx, scripts);
  if (!farm.ok()) return farm.status();
  ApplyFarmVerification(spec, pinned, *farm, result);
  provenance(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - verify_start).count());
  return result;
}

}  // namespace triage::agent
