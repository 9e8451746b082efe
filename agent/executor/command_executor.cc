#include "agent/executor/command_executor.h"

#include <algorithm>
#include <optional>

#include "agent/executor/command_verify.h"
#include "agent/workspace/workspace.h"
#include "common/command/command_params.h"
#include "common/command/summary.h"
#include "common/lift/lift.h"
#include "common/process/process.h"
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

}  // namespace

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

  v1::ShardResult result;
  result.set_status(v1::ShardResult::SUCCEEDED);
  std::vector<std::string> keys;
  for (const auto& e : spec.entries()) keys.push_back(e.key());

  struct Run {
    const v1::ShardEntry* entry;  // null: per shard
    std::string review;
    std::optional<v1::CommandSummary> summary;  // what the command wrote to $TRIAGE_SUMMARY
    std::string summary_review;                 // why what it wrote is not used
  };
  std::vector<Run> runs;
  if (per_shard) {
    runs.push_back({nullptr, ""});
  } else {
    for (const auto& e : spec.entries()) runs.push_back({&e, ""});
  }
  int n = 0;
  for (auto& run : runs) {
    if (ctx.cancelled && ctx.cancelled()) return absl::CancelledError("lease revoked");
    ++n;
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
    auto res = process::Run(opts);
    if (!res.ok()) return res.status();  // could not start: the agent's setup is wrong
    if (res->cancelled) return absl::CancelledError("lease revoked");
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
  }

  // What the command changed, and what it recorded.
  auto diffs = ctx.workspace->CollectDiffs(spec.ttxla_commit(), spec.forge_commit());
  if (!diffs.ok()) return diffs.status();
  result.set_ttxla_diff(diffs->ttxla);
  result.set_forge_diff(diffs->forge);
  std::vector<std::filesystem::path> junits;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(junit_dir, ec)) {
    if (f.path().extension() == ".xml") junits.push_back(f.path());
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
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::vector<const v1::ShardEntry*> entries;
    if (runs[i].entry != nullptr) {
      entries.push_back(runs[i].entry);
    } else {
      for (const auto& e : spec.entries()) entries.push_back(&e);
    }
    for (const auto* e : entries) {
      v1::EntryOutcome* o = result.add_entries();
      o->set_key(e->key());
      o->set_file(e->file());
      o->set_arch(spec.arch());
      o->set_flavor(e->flavor());
      o->set_verdict("command");
      o->set_disposition(v1::EntryOutcome::DONE);  // the command's run decides it
      o->set_changed(false);  // until the lift below finds a change of the entry
      if (!runs[i].review.empty()) o->add_review(runs[i].review);
      if (!runs[i].summary_review.empty()) o->add_review(runs[i].summary_review);
      if (runs[i].summary) {
        *o->mutable_summary() = *runs[i].summary;
        o->add_evidence(util::StrCat("summaries/run-", i + 1, ".json"));
      }
      // The log of the entry's run and the JUnit files (as the native playbooks link them).
      o->add_evidence(util::StrCat("logs/command-", i + 1, ".log"));
      for (const auto& name : junit_names) o->add_evidence(name);
    }
  }
  // One result format: the diffs become entry edits, registry operations and loader file edits
  // here, once, and the coordinator never sees raw diffs (docs/farm.md, "Executors"). What cannot
  // be lifted is flagged for review on the outcomes; files outside the shard stay in the result,
  // and the coordinator's ownership check rejects it naming them.
  WorkspacePinnedFiles pinned(*ctx.workspace, spec);
  const lift::LiftOutput lifted = lift::Lift(spec, result, pinned);
  if (ctx.progress && (!lifted.notes.empty() || !lifted.outside.empty())) {
    std::vector<std::string> lines = lifted.notes;
    for (const auto& f : lifted.outside) {
      lines.push_back(util::StrCat(f, " is outside the shard: the result will be rejected"));
    }
    ctx.progress("lift", "", lines);
  }
  // A probe phase runs on a CPU agent, which has no device to verify on.
  if (!params->verify || spec.phase() == v1::PHASE_PROBE) return result;
  // The farm's own verification of what the command decided (docs/farm.md, "Executors"): the
  // native playbooks' pytest session and decision, in the workspace as the command left it.
  std::filesystem::path scripts = scripts_dir_;
  if (scripts.empty()) scripts = ctx.settings.probe_script.parent_path();
  if (scripts.empty()) {
    return absl::FailedPreconditionError(
        "params.verify: the command executor's verification needs the agent's scripts_dir "
        "(triage_pytest_plugin.py)");
  }
  auto farm = RunFarmVerification(ctx, scripts);
  if (!farm.ok()) return farm.status();
  ApplyFarmVerification(spec, pinned, *farm, result);
  return result;
}

}  // namespace triage::agent
