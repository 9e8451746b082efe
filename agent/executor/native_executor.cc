#include "agent/executor/native_executor.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "agent/executor/native_tools.h"
#include "agent/executor/replay_tools.h"
#include "agent/playbooks/playbooks.h"
#include "agent/playbooks/registry.h"
#include "agent/playbooks/shard_run.h"
#include "agent/workspace/workspace.h"
#include "common/evidence/evidence_layout.h"
#include "common/util/file.h"
#include "common/util/strings.h"

namespace triage::agent {

NativeExecutor::NativeExecutor(std::filesystem::path scripts_dir, std::filesystem::path replay_dir)
    : scripts_dir_(std::move(scripts_dir)), replay_dir_(std::move(replay_dir)) {}

namespace {

// A batched shard's tools: its "verify" and "inference" runs answered from the batch's session
// when that session left a testcase for every key asked, once per key; everything else (probes,
// a run alone after a crash, a key the session has no testcase for, a second ask) run by the
// shard's own tools.
// One pytest session of a batch: the keys it ran, in order, and what it answered.
struct BatchSession {
  std::vector<std::string> keys;
  playbooks::PytestRun run;
};

// The testcase a session left for each key it ran; nullptr where it left none.
const junit::TestCase* CaseOf(const BatchSession& s, std::size_t i) {
  if (i >= s.run.cases.size() || s.run.cases[i].outcome == junit::Outcome::kMissing) {
    return nullptr;
  }
  return &s.run.cases[i];
}

// A shard's tools within a batch: its verification (and inference) runs are answered from the
// batch's sessions when one session left a testcase for every key asked (its log, signal and
// files go with them), and run for real otherwise; probes and other runs are the shard's own.
class BatchAnswers : public playbooks::PlaybookTools {
 public:
  BatchAnswers(playbooks::PlaybookTools& own, const std::vector<BatchSession>& sessions,
               std::map<std::string, std::filesystem::path> session_evidence)
      : own_(own), sessions_(sessions), session_evidence_(std::move(session_evidence)) {
    for (std::size_t s = 0; s < sessions_.size(); ++s) {
      for (std::size_t i = 0; i < sessions_[s].keys.size(); ++i) {
        if (CaseOf(sessions_[s], i) != nullptr) index_.try_emplace(sessions_[s].keys[i], s, i);
      }
    }
  }

  absl::StatusOr<std::vector<playbooks::ProbeDoc>> Probe(const std::string& key,
                                                         const std::string& mode) override {
    return own_.Probe(key, mode);
  }

  void SetPytestTimeout(std::chrono::seconds limit) override { own_.SetPytestTimeout(limit); }

  absl::StatusOr<playbooks::PytestRun> Pytest(const std::vector<std::string>& keys,
                                              const std::string& label) override {
    if ((label != "verify" && label != "inference") || keys.empty()) {
      return own_.Pytest(keys, label);
    }
    playbooks::PytestRun run;
    std::optional<std::size_t> session;
    for (const auto& k : keys) {
      auto at = index_.find(k);
      if (at == index_.end() || answered_.count(k) || (session && *session != at->second.first)) {
        return own_.Pytest(keys, label);
      }
      session = at->second.first;
      run.cases.push_back(sessions_[*session].run.cases[at->second.second]);
    }
    answered_.insert(keys.begin(), keys.end());
    const playbooks::PytestRun& from = sessions_[*session].run;
    run.log = from.log;
    run.xml = from.xml;
    run.exit_code = from.exit_code;
    run.signal = from.signal;
    run.evidence = from.evidence;
    run.session_tests = from.session_tests;
    used_.insert(*session);
    return run;
  }

  std::map<std::string, std::filesystem::path> Evidence() const override {
    auto out = own_.Evidence();
    for (std::size_t s : used_) {
      for (const auto& name : sessions_[s].run.evidence) {
        if (auto it = session_evidence_.find(name); it != session_evidence_.end()) {
          out.emplace(name, it->second);
        }
      }
    }
    return out;
  }

 private:
  playbooks::PlaybookTools& own_;
  const std::vector<BatchSession>& sessions_;
  // key -> the session and testcase that answered it (the first session that did)
  std::map<std::string, std::pair<std::size_t, std::size_t>> index_;
  std::map<std::string, std::filesystem::path> session_evidence_;
  std::set<std::string> answered_;  // keys the sessions answered: a second ask runs for real
  std::set<std::size_t> used_;      // sessions that answered something: their files are evidence
};

// The tools of a shard decided while its batch's session runs on: everything it asks must be
// answered by the session, so a run of its own (the device is busy) is refused and noted, and
// the shard is decided again when the batch ends.
class SessionOnly : public playbooks::PlaybookTools {
 public:
  absl::StatusOr<std::vector<playbooks::ProbeDoc>> Probe(const std::string& /*key*/,
                                                         const std::string& /*mode*/) override {
    asked_ = true;
    return absl::FailedPreconditionError("no probe while the batch's session runs");
  }
  absl::StatusOr<playbooks::PytestRun> Pytest(const std::vector<std::string>& /*keys*/,
                                              const std::string& /*label*/) override {
    asked_ = true;
    return absl::FailedPreconditionError("no run of its own while the batch's session runs");
  }
  std::map<std::string, std::filesystem::path> Evidence() const override { return {}; }
  bool asked() const { return asked_; }

 private:
  bool asked_ = false;
};

}  // namespace

NativeToolsOptions NativeExecutor::ToolsOptionsFor(const ExecContext& ctx,
                                                   const std::filesystem::path& scripts_dir) {
  NativeToolsOptions o;
  o.workspace = ctx.workspace->root();
  o.shard_dir = ctx.shard_dir;
  o.scripts_dir = scripts_dir;
  o.python = ctx.settings.python;
  o.arch = ctx.spec->arch().empty() ? "n150" : ctx.spec->arch();
  o.probe_timeout = ctx.settings.probe_timeout;
  o.probe_nice = ctx.settings.probe_nice;
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
  // The session: each shard's entries and then the inference entry it looks at for
  // information (its first entry's that has one, as ShardRun picks it, so that the shard needs
  // no session of its own for it), every key once. A shard's keys are next to each other, so
  // that a session that dies leaves each shard before it whole.
  std::vector<std::string> keys;
  std::vector<std::set<std::string>> keys_of(specs.size());  // every key a shard may ask about
  std::set<std::string> seen;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    for (const auto& e : specs[i]->entries()) {
      keys_of[i].insert(e.key());
      if (seen.insert(e.key()).second) keys.push_back(e.key());
    }
    const std::string key = playbooks::InferenceKeyOf(ctx.workspace->root(), *specs[i]);
    if (!key.empty()) keys_of[i].insert(key);
    if (!key.empty() && seen.insert(key).second) keys.push_back(key);
  }
  auto shard_ctx = [&ctx](const v1::ShardSpec* spec) {
    ExecContext one = ctx;
    one.spec = spec;
    one.shard_dir = ctx.shard_dir / spec->shard_id();
    return one;
  };
  std::vector<BatchSession> sessions;
  std::vector<std::string> todo = keys;
  NativeToolsOptions o = ToolsOptions(ctx);
  o.shard_dir = ctx.shard_dir / "batch";
  o.pytest_timeout *= static_cast<int>(specs.size());  // the shards' runs, one after another
  // Streaming: a shard whose every key has its testcase in the running session's partial JUnit
  // file is decided then, and reported through ctx.early_result, so that a death of the agent
  // or the device later in the batch loses only the shards not yet passed. Its evidence is the
  // session's JUnit file and log as they were when it was decided (copied into its own
  // directory under the names the finished session's files have). A testcase in the partial
  // file is the one the final file holds; the log is read only when a testcase gives no reason.
  std::vector<std::optional<v1::ShardResult>> early(specs.size());
  std::map<std::string, std::filesystem::path> earlier_files;  // the finished sessions' files
  if (ctx.early_result) {
    o.on_progress = [&](const PytestProgress& p) {
      if (ctx.cancelled && ctx.cancelled()) return;
      std::set<std::string> finished;
      for (std::size_t k = 0; k < todo.size() && k < p.cases.size(); ++k) {
        if (p.cases[k].outcome != junit::Outcome::kMissing) finished.insert(todo[k]);
      }
      std::optional<std::vector<BatchSession>> now;  // the sessions so far and this one, as read
      for (std::size_t i = 0; i < specs.size(); ++i) {
        if (early[i] || !std::includes(finished.begin(), finished.end(), keys_of[i].begin(),
                                       keys_of[i].end())) {
          continue;
        }
        if (!now) {
          auto log_text = util::ReadFile(p.log, 64 << 20);
          if (!log_text.ok()) return;  // the next change decides them
          playbooks::PytestRun run;
          run.cases = p.cases;
          run.log = std::move(*log_text);
          run.xml = true;
          run.evidence = {p.log_name, p.junit_name};
          run.session_tests = todo.size();
          now = sessions;
          now->push_back({todo, std::move(run)});
        }
        ExecContext one = shard_ctx(specs[i]);
        const auto xml_copy = one.shard_dir / p.junit_name;
        const auto log_copy = one.shard_dir / p.log_name;
        std::error_code ec;
        std::filesystem::create_directories(xml_copy.parent_path(), ec);
        std::filesystem::create_directories(log_copy.parent_path(), ec);
        std::filesystem::copy_file(p.partial_xml, xml_copy,
                                   std::filesystem::copy_options::overwrite_existing, ec);
        if (ec || !util::WriteFileAtomic(log_copy, now->back().run.log).ok()) continue;
        std::map<std::string, std::filesystem::path> files = earlier_files;
        files[p.junit_name] = xml_copy;
        files[p.log_name] = log_copy;
        SessionOnly none;
        BatchAnswers tools(none, *now, files);
        absl::StatusOr<v1::ShardResult> result = RunWith(one, tools);
        if (none.asked() || !result.ok()) continue;  // decided when the batch ends
        early[i] = *result;
        ctx.early_result(i, *early[i]);
      }
    };
  }
  NativeTools batch(o);
  if (ctx.progress) ctx.progress("verify-batch", "", {});
  // A session that dies (a crash, or a hang the run's timeout ends) leaves no testcase from the
  // key it died in on. The keys after that one never ran: they resume in a session of their own,
  // without it (whose shard runs its own session, as alone). Once a resumed session dies in its
  // first key too, what is left runs shard by shard: two deaths in a row are more likely the
  // device than the tests.
  while (!todo.empty()) {
    absl::StatusOr<playbooks::PytestRun> session = batch.Pytest(todo, "verify-batch");
    if (absl::IsCancelled(session.status())) {
      out.assign(specs.size(), session.status());
      return out;
    }
    if (!session.ok()) break;  // a session that could not run leaves each shard to run its own
    sessions.push_back({todo, std::move(*session)});
    earlier_files = batch.Evidence();
    const BatchSession& last = sessions.back();
    std::size_t died = 0;
    while (died < todo.size() && CaseOf(last, died) != nullptr) ++died;
    if (died + 1 >= todo.size() || (sessions.size() > 1 && died == 0)) break;
    std::vector<std::string> rest;
    for (std::size_t i = died + 1; i < todo.size(); ++i) {
      if (CaseOf(last, i) == nullptr) rest.push_back(todo[i]);
    }
    todo = std::move(rest);
    if (ctx.progress) ctx.progress("verify-batch-resume", todo.front(), {});
  }
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (early[i]) {
      out.push_back(*early[i]);
      continue;
    }
    ExecContext one = shard_ctx(specs[i]);
    NativeToolsOptions mine = ToolsOptions(one);
    // Its own runs are numbered after the sessions it shares.
    mine.first_run = static_cast<int>(std::max<std::size_t>(1, sessions.size()));
    NativeTools own(mine);
    BatchAnswers tools(own, sessions, batch.Evidence());
    out.push_back(RunWith(one, tools));
  }
  return out;
}

playbooks::PlaybookContext NativeExecutor::ContextFor(ExecContext& ctx, const v1::ShardSpec& spec,
                                                      playbooks::PlaybookTools& tools) {
  playbooks::PlaybookContext pc;
  pc.spec = &spec;
  pc.workspace = ctx.workspace->root();
  pc.tools = &tools;
  pc.progress = [&ctx](const std::string& step, const std::string& entry) {
    if (ctx.progress) ctx.progress(step, entry, {});
  };
  pc.cancelled = ctx.cancelled;
  pc.chain = [](std::string_view) -> const playbooks::Playbook* { return nullptr; };
  return pc;
}

absl::StatusOr<v1::ShardResult> NativeExecutor::RunWith(ExecContext& ctx,
                                                        playbooks::PlaybookTools& tools) {
  const v1::ShardSpec& spec = *ctx.spec;
  playbooks::PlaybookContext pc = ContextFor(ctx, spec, tools);
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
