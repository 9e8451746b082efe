#include "agent/executor/command_provenance.h"

#include <chrono>
#include <string_view>
#include <utility>

#include "nlohmann/json.hpp"

#include "agent/workspace/workspace.h"
#include "common/command/summary.h"
#include "common/process/process.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::agent {
namespace {

using nlohmann::json;

// git's stdout, or an error naming what failed.
absl::StatusOr<std::string> Git(const std::filesystem::path& root,
                                const std::vector<std::string>& args) {
  process::RunOptions run;
  run.argv = {"git", "-C", root.string()};
  run.argv.insert(run.argv.end(), args.begin(), args.end());
  run.separate_stderr = true;
  run.timeout = std::chrono::seconds(60);
  auto res = process::Run(run);
  if (!res.ok()) return res.status();
  if (!res->ok()) {
    return absl::InternalError(util::StrCat("git ", util::StrJoin(args, " "), ": ", res->Describe(),
                                            ": ", util::TrimWhitespace(res->err)));
  }
  return res->output;
}

// The workspace's repositories: its own HEAD and every submodule's commit, recursively.
json Repositories(const std::filesystem::path& root) {
  json out = json::array();
  auto head = Git(root, {"rev-parse", "HEAD"});
  if (head.ok()) {
    out.push_back({{"path", "."}, {"commit", std::string(util::TrimWhitespace(*head))}});
  } else {
    out.push_back({{"path", "."}, {"error", std::string(head.status().message())}});
  }
  auto status = Git(root, {"submodule", "status", "--recursive"});
  if (!status.ok()) {
    out.push_back({{"path", "(submodules)"}, {"error", std::string(status.status().message())}});
    return out;
  }
  // " <sha> <path> (<describe>)": the first column is ' ', '+' (checked out elsewhere than the
  // gitlink), '-' (not initialized: the gitlink's commit) or 'U' (conflicts).
  for (std::string_view line : util::SplitLines(*status)) {
    if (line.size() < 2) continue;
    const char state = line[0];
    line.remove_prefix(1);
    const auto space = line.find(' ');
    if (space == std::string_view::npos) continue;
    std::string_view path = line.substr(space + 1);
    if (auto paren = path.find(" ("); paren != std::string_view::npos) path = path.substr(0, paren);
    json repo = {{"path", std::string(path)}, {"commit", std::string(line.substr(0, space))}};
    if (state == '+') repo["note"] = "checked out at another commit than the gitlink";
    if (state == '-') repo["note"] = "not initialized: the gitlink's commit";
    out.push_back(std::move(repo));
  }
  return out;
}

}  // namespace

void RecordProvenance(const ExecContext& ctx, const std::vector<std::string>& command,
                      const std::vector<CommandRunRecord>& runs, double verification_seconds,
                      v1::ShardResult& result) {
  const v1::ShardSpec& spec = *ctx.spec;
  json j;
  j["schema"] = 1;
  j["repositories"] =
      ctx.workspace != nullptr ? Repositories(ctx.workspace->root()) : json::array();
  j["pinned"] = {{"tt-xla", spec.ttxla_commit()}, {"tt_forge_models", spec.forge_commit()}};
  json pins = json::object();
  std::string version;
  json out_runs = json::array();
  for (const auto& r : runs) {
    json run = {{"number", r.number},
                {"key", r.key},
                {"seconds", r.seconds},
                {"ended", r.ended},
                {"transcript", util::StrCat("logs/command-", r.number, ".log")},
                {"summary", r.summary.empty() ? json(nullptr) : json(r.summary)}};
    out_runs.push_back(std::move(run));
    if (r.summary.empty()) continue;
    auto text = util::ReadFile(ctx.shard_dir / r.summary, command::kMaxSummaryBytes + 1);
    if (!text.ok()) continue;
    const command::SummaryProvenance p = command::ProvenanceOfSummary(*text);
    if (!p.version.empty()) version = p.version;
    for (const auto& [name, commit] : p.pins) pins[name] = commit;
  }
  j["reported"] = {{"pins", pins}, {"version", version.empty() ? json(nullptr) : json(version)}};
  json hardware = {{"arch", spec.arch()}};
  if (ctx.agent != nullptr) {
    hardware["agent"] = ctx.agent->agent_id();
    hardware["device_count"] = ctx.agent->device_count();
    hardware["pool"] = ctx.agent->pool();
    hardware["host"] = ctx.agent->hostname();
    hardware["agent_version"] = ctx.agent->version();
  }
  j["hardware"] = std::move(hardware);
  j["command"] = command;
  j["runs"] = std::move(out_runs);
  j["verification_seconds"] = verification_seconds;
  const std::string text = j.dump(2) + "\n";
  (void)util::WriteFileAtomic(ctx.shard_dir / kProvenanceName, text);
  v1::Evidence* ev = result.add_evidence();
  ev->set_name(kProvenanceName);
  ev->set_kind(kProvenanceEvidence);
  ev->set_content(text);
}

}  // namespace triage::agent
