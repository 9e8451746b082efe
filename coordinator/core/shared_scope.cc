// The shared scope's conflict rule (docs/remediation.md, "Shared fixes beyond the loader"): two
// clusters' leads that change the same shared file differently are never merged blindly. The
// result accepted first stands; a later one that did not start from it is not recorded, and its
// shard runs again with the first one's edit pre-applied, so that its change is made, and
// verified, on top of it.

#include "common/util/strings.h"
#include "coordinator/core/attempt_log.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/planning/fan_out.h"

namespace triage::coord {

std::optional<absl::StatusOr<v1::CompleteResponse>> Coordinator::RunAgainOnTopLocked(
    ShardRecord& s, const v1::ShardResult& result, Effects& after) {
  if (s.spec.executor() != "command" || result.file_edits().empty()) return std::nullopt;
  auto sweep = sweeps_.find(s.sweep_id);
  if (sweep == sweeps_.end()) return std::nullopt;
  std::vector<AcceptedResult> earlier;
  for (const auto& r : sweep->second.results) {
    const ShardRecord* other = table_.FindShard(r.shard_id);
    if (other != nullptr) earlier.push_back({&other->spec, &r.result});
  }
  const std::vector<v1::FileEdit> build_on = SharedEditsToBuildOn(s.spec, result, earlier);
  if (build_on.empty()) return std::nullopt;
  std::vector<std::string> files;
  for (const auto& fe : build_on) files.push_back(util::StrCat(fe.repo(), "/", fe.path()));
  const std::string why =
      util::StrCat("its change of ", util::StrJoin(files, ", "),
                   " was made beside another cluster's accepted first: it runs again on top of it");
  Mutation m;
  m.name = "RunAgainOnTop";
  for (const auto& fe : build_on) *s.spec.add_pre_apply() = fe;
  // Not the work's fault: the attempt is given back, as for a lost lease.
  table_.FailAttempt(s, "run again", why, clock_->Now(), m, Fault::kInfrastructure, MaxAttempts(s));
  const std::string id = s.id;
  const std::string sweep_id = s.sweep_id;
  const std::string lease_id = m.attempts.empty() ? "" : m.attempts.front().lease_id;
  std::vector<ShardRecord> shards{std::move(s)};
  m.shard_specs.push_back(&shards.front());
  std::vector<AgentRecord> agents;
  if (auto st = CommitLocked(m, shards, agents, after); !st.ok())
    return absl::StatusOr<v1::CompleteResponse>(st);
  after.push_back(AttemptLog(spdlog::level::info, sweep_id, id, lease_id, why));
  EmitLocked(sweep_id, util::StrCat("shard ", id, ": ", why), after);
  v1::CompleteResponse resp;
  resp.set_accepted(true);
  return absl::StatusOr<v1::CompleteResponse>(std::move(resp));
}

}  // namespace triage::coord
