#include "agent/executor/native_executor.h"

#include <algorithm>

#include "agent/executor/native_tools.h"
#include "agent/executor/replay_tools.h"
#include "agent/playbooks/playbooks.h"
#include "agent/playbooks/registry.h"
#include "agent/workspace/workspace.h"
#include "common/evidence/evidence_layout.h"
#include "common/util/strings.h"

namespace triage::agent {

NativeExecutor::NativeExecutor(std::filesystem::path scripts_dir, std::filesystem::path replay_dir)
    : scripts_dir_(std::move(scripts_dir)), replay_dir_(std::move(replay_dir)) {}

absl::StatusOr<v1::ShardResult> NativeExecutor::Run(ExecContext& ctx) {
  if (ctx.workspace == nullptr) {
    return absl::FailedPreconditionError("the native executor needs a workspace");
  }
  const v1::ShardSpec& spec = *ctx.spec;
  std::unique_ptr<playbooks::PlaybookTools> tools;
  if (replay_dir_.empty()) {
    NativeToolsOptions o;
    o.workspace = ctx.workspace->root();
    o.shard_dir = ctx.shard_dir;
    o.scripts_dir = scripts_dir_;
    o.python = ctx.settings.python;
    o.arch = spec.arch().empty() ? "n150" : spec.arch();
    o.probe_timeout = ctx.settings.probe_timeout;
    o.pytest_timeout = ctx.settings.pytest_timeout;
    o.cancelled = ctx.cancelled;
    tools = std::make_unique<NativeTools>(o);
  } else {
    std::filesystem::path dir = replay_dir_ / evidence::ShardDirName(spec);
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) dir = replay_dir_;
    // What answers is recorded in the shard's directory, as a native run records what it ran.
    auto replay = ReplayTools::Load(dir, ctx.shard_dir);
    if (!replay.ok()) return replay.status();
    tools = std::move(*replay);
  }
  playbooks::PlaybookContext pc;
  pc.spec = &spec;
  pc.workspace = ctx.workspace->root();
  pc.tools = tools.get();
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
