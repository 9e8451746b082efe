#include "agent/executor/native_executor.h"

#include <algorithm>
#include <map>
#include <set>

#include "agent/executor/native_tools.h"
#include "agent/executor/replay_tools.h"
#include "agent/playbooks/playbooks.h"
#include "agent/playbooks/registry.h"
#include "agent/playbooks/shard_run.h"
#include "agent/workspace/workspace.h"
#include "common/evidence/evidence_layout.h"
#include "common/util/strings.h"

namespace triage::agent {

NativeExecutor::NativeExecutor(std::filesystem::path scripts_dir, std::filesystem::path replay_dir)
    : scripts_dir_(std::move(scripts_dir)), replay_dir_(std::move(replay_dir)) {}

namespace {

// A batched shard's tools: its "verify" and "inference" runs answered from the batch's session
// when that session left a testcase for every key asked, once per key; everything else (probes,
// a run alone after a crash, a key the session has no testcase for, a second ask) run by the
// shard's own tools.
class BatchAnswers : public playbooks::PlaybookTools {
 public:
  BatchAnswers(playbooks::PlaybookTools& own, const playbooks::PytestRun* session,
               const std::vector<std::string>& session_keys,
               std::map<std::string, std::filesystem::path> session_evidence)
      : own_(own), session_(session), session_evidence_(std::move(session_evidence)) {
    for (std::size_t i = 0; session_ != nullptr && i < session_keys.size(); ++i) {
      index_[session_keys[i]] = i;
    }
  }

  absl::StatusOr<std::vector<playbooks::ProbeDoc>> Probe(const std::string& key,
                                                         const std::string& mode) override {
    return own_.Probe(key, mode);
  }

  absl::StatusOr<playbooks::PytestRun> Pytest(const std::vector<std::string>& keys,
                                              const std::string& label) override {
    if ((label != "verify" && label != "inference") || session_ == nullptr) {
      return own_.Pytest(keys, label);
    }
    playbooks::PytestRun run;
    for (const auto& k : keys) {
      auto at = index_.find(k);
      if (at == index_.end() || answered_.count(k) || at->second >= session_->cases.size() ||
          session_->cases[at->second].outcome == junit::Outcome::kMissing) {
        return own_.Pytest(keys, label);
      }
      run.cases.push_back(session_->cases[at->second]);
    }
    answered_.insert(keys.begin(), keys.end());
    run.log = session_->log;
    run.xml = session_->xml;
    run.exit_code = session_->exit_code;
    run.signal = session_->signal;
    run.evidence = session_->evidence;
    used_ = true;
    return run;
  }

  std::map<std::string, std::filesystem::path> Evidence() const override {
    auto out = own_.Evidence();
    if (used_) {
      for (const auto& name : session_->evidence) {
        if (auto it = session_evidence_.find(name); it != session_evidence_.end()) {
          out.emplace(name, it->second);
        }
      }
    }
    return out;
  }

 private:
  playbooks::PlaybookTools& own_;
  const playbooks::PytestRun* session_;
  std::map<std::string, std::size_t> index_;  // key -> its testcase in the session
  std::map<std::string, std::filesystem::path> session_evidence_;
  std::set<std::string> answered_;  // keys the session answered: a second ask runs for real
  bool used_ = false;               // the session answered something: its files are evidence
};

}  // namespace

NativeToolsOptions NativeExecutor::ToolsOptions(const ExecContext& ctx) const {
  NativeToolsOptions o;
  o.workspace = ctx.workspace->root();
  o.shard_dir = ctx.shard_dir;
  o.scripts_dir = scripts_dir_;
  o.python = ctx.settings.python;
  o.arch = ctx.spec->arch().empty() ? "n150" : ctx.spec->arch();
  o.probe_timeout = ctx.settings.probe_timeout;
  o.pytest_timeout = ctx.settings.pytest_timeout;
  o.cancelled = ctx.cancelled;
  return o;
}

absl::StatusOr<v1::ShardResult> NativeExecutor::Run(ExecContext& ctx) {
  if (ctx.workspace == nullptr) {
    return absl::FailedPreconditionError("the native executor needs a workspace");
  }
  const v1::ShardSpec& spec = *ctx.spec;
  std::unique_ptr<playbooks::PlaybookTools> tools;
  if (replay_dir_.empty()) {
    tools = std::make_unique<NativeTools>(ToolsOptions(ctx));
  } else {
    std::filesystem::path dir = replay_dir_ / evidence::ShardDirName(spec);
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) dir = replay_dir_;
    // What answers is recorded in the shard's directory, as a native run records what it ran.
    auto replay = ReplayTools::Load(dir, ctx.shard_dir);
    if (!replay.ok()) return replay.status();
    tools = std::move(*replay);
  }
  return RunWith(ctx, *tools);
}

std::vector<absl::StatusOr<v1::ShardResult>> NativeExecutor::RunBatch(
    ExecContext& ctx, const std::vector<const v1::ShardSpec*>& specs) {
  std::vector<absl::StatusOr<v1::ShardResult>> out;
  if (ctx.workspace == nullptr || !CanBatch()) {
    out.assign(specs.size(),
               absl::FailedPreconditionError("a batch needs the native executor and a workspace"));
    return out;
  }
  // The session: every entry of every shard, once, in one pytest process, and the inference
  // entry each shard looks at for information (its first entry's that has one, as ShardRun
  // picks it), so that the shard needs no session of its own for it.
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const v1::ShardSpec* spec : specs) {
    for (const auto& e : spec->entries()) {
      if (seen.insert(e.key()).second) keys.push_back(e.key());
    }
  }
  for (const v1::ShardSpec* spec : specs) {
    const std::string key = playbooks::InferenceKeyOf(ctx.workspace->root(), *spec);
    if (!key.empty() && seen.insert(key).second) keys.push_back(key);
  }
  NativeToolsOptions o = ToolsOptions(ctx);
  o.shard_dir = ctx.shard_dir / "batch";
  o.pytest_timeout *= static_cast<int>(specs.size());  // the shards' runs, one after another
  NativeTools batch(o);
  if (ctx.progress) ctx.progress("verify-batch", "", {});
  absl::StatusOr<playbooks::PytestRun> session = batch.Pytest(keys, "verify-batch");
  if (absl::IsCancelled(session.status())) {
    out.assign(specs.size(), session.status());
    return out;
  }
  // A session that could not run at all leaves each shard to run its own.
  const playbooks::PytestRun* answers = session.ok() ? &*session : nullptr;
  for (const v1::ShardSpec* spec : specs) {
    ExecContext one = ctx;
    one.spec = spec;
    one.shard_dir = ctx.shard_dir / spec->shard_id();
    NativeToolsOptions mine = ToolsOptions(one);
    mine.first_run = 1;  // its own runs are numbered after the session it shares
    NativeTools own(mine);
    BatchAnswers tools(own, answers, keys, batch.Evidence());
    out.push_back(RunWith(one, tools));
  }
  return out;
}

absl::StatusOr<v1::ShardResult> NativeExecutor::RunWith(ExecContext& ctx,
                                                        playbooks::PlaybookTools& tools) {
  const v1::ShardSpec& spec = *ctx.spec;
  playbooks::PlaybookContext pc;
  pc.spec = &spec;
  pc.workspace = ctx.workspace->root();
  pc.tools = &tools;
  pc.progress = [&ctx](const std::string& step, const std::string& entry) {
    if (ctx.progress) ctx.progress(step, entry, {});
  };
  pc.cancelled = ctx.cancelled;
  // A chain goes on with the playbooks this agent runs, as its leases do.
  const std::vector<std::string>& mine = ctx.settings.playbooks;
  pc.chain = [&mine](std::string_view name) -> const playbooks::Playbook* {
    if (!mine.empty() && std::find(mine.begin(), mine.end(), name) == mine.end()) return nullptr;
    return playbooks::FindPlaybook(name);
  };
  // Probe documents, JUnit files and recorded evidence are input from files and subprocesses: a
  // shape the playbook code did not expect fails this shard with the reason, never the agent.
  try {
    return playbooks::RunPlaybook(pc);
  } catch (const std::exception& e) {
    return absl::InternalError(
        util::StrCat("shard ", spec.shard_id(), " (", name(), "): malformed input: ", e.what()));
  }
}

}  // namespace triage::agent
