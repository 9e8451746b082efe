#include "coordinator/triagectl/farm_oncall_cmd.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/util/strings.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "coordinator/triagectl/sweep_view.h"

namespace triage::ctl::farm {
namespace {

std::string Ago(std::int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  std::int64_t s = std::max<std::int64_t>(0, (now - unix_ms) / 1000);
  if (s < 120) return util::StrCat(s, "s");
  if (s < 7200) return util::StrCat(s / 60, "m");
  return util::StrCat(s / 3600, "h", (s % 3600) / 60, "m");
}

std::string PhaseName(v1::ShardPhase p) {
  switch (p) {
    case v1::PHASE_FULL:
      return "full";
    case v1::PHASE_PROBE:
      return "probe";
    case v1::PHASE_VERIFY:
      return "verify";
    default:
      return "-";
  }
}

v1::ShardActionRequest ShardAction(const FarmOptions& o) {
  v1::ShardActionRequest req;
  req.set_shard_id(o.id);
  req.set_reason(o.reason);
  return req;
}

// What requeue and cancel print: the shard, as JSON or its new state.
int ShowShard(const absl::StatusOr<v1::Shard>& r, const FarmOptions& o, std::ostream& out,
              std::ostream& err) {
  if (!r.ok()) return Error(err, r.status());
  if (o.output == "json") {
    out << Json(*r) << "\n";
  } else {
    out << "shard " << r->id() << ": " << r->state() << "\n";
  }
  return kExitOk;
}

v1::AgentActionRequest AgentAction(const FarmOptions& o) {
  v1::AgentActionRequest req;
  req.set_agent_id(o.id);
  req.set_reason(o.reason);
  return req;
}

// What drain and undrain print: the agent, as JSON or its new state.
int ShowAgent(const absl::StatusOr<v1::Agent>& r, const FarmOptions& o, std::ostream& out,
              std::ostream& err) {
  if (!r.ok()) return Error(err, r.status());
  if (o.output == "json") {
    out << Json(*r) << "\n";
  } else {
    out << "agent " << r->dimensions().agent_id() << ": " << r->state() << "\n";
  }
  return kExitOk;
}

}  // namespace

int RunShardsList(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  v1::ListShardsRequest req;
  req.set_sweep_id(o.sweep);
  req.set_state(o.state);
  if (o.stuck || o.stuck_minutes != FarmOptions{}.stuck_minutes) {
    // Whole seconds, at least one: 0 would mean "no filter" and list every shard.
    req.set_stuck_seconds(
        std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(o.stuck_minutes * 60))));
  }
  auto r = client.Call<v1::ListShardsRequest, v1::ListShardsResponse>(&Stub::ListShards, req);
  if (!r.ok()) return Error(err, r.status());
  if (o.output == "json") {
    out << Json(*r) << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : r->shards()) {
    std::string loader = s.loader();
    if (auto p = loader.find("tt_forge_models/"); p != std::string::npos)
      loader = loader.substr(p + 16);
    rows.push_back(
        {s.id(), s.state(), s.playbook(), PhaseName(s.phase()), s.arch().empty() ? "cpu" : s.arch(),
         std::to_string(s.keys_size()), std::to_string(s.attempts()),
         s.has_carried_from()          ? "carried:" + s.carried_from().sweep_id()
         : s.agent_id().empty()        ? "-"
         : s.backup_agent_id().empty() ? s.agent_id()
                                       : s.agent_id() + " +backup " + s.backup_agent_id(),
         s.last_step().empty() ? "-" : s.last_step(),
         s.agent_id().empty() ? "-" : Ago(s.last_progress_unix_ms()), loader});
  }
  PrintTable(out,
             {"SHARD", "STATE", "PLAYBOOK", "PHASE", "ARCH", "ENTRIES", "ATTEMPTS", "AGENT",
              "LAST STEP", "IDLE", "LOADER"},
             rows);
  if (req.stuck_seconds() > 0 && !r->shards().empty()) {
    out << "\nrequeue with: triagectl shard requeue SHARD --reason '...'\n";
  }
  return kExitOk;
}

int RunShardRequeue(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  return ShowShard(
      client.Call<v1::ShardActionRequest, v1::Shard>(&Stub::RequeueShard, ShardAction(o)), o, out,
      err);
}

int RunShardCancel(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  return ShowShard(
      client.Call<v1::ShardActionRequest, v1::Shard>(&Stub::CancelShard, ShardAction(o)), o, out,
      err);
}

int RunAgentsList(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  auto r = client.Call<v1::ListAgentsRequest, v1::ListAgentsResponse>(&Stub::ListAgents, {});
  if (!r.ok()) return Error(err, r.status());
  if (o.output == "json") {
    out << Json(*r) << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& a : r->agents()) {
    const auto& d = a.dimensions();
    // docs/farm.md, "Only a working agent is a witness": what its self-check found.
    rows.push_back({d.agent_id(), a.state(), d.cpu_only() ? "cpu" : d.arch(),
                    std::to_string(d.device_count()), d.pool(), util::StrJoin(d.executors(), ","),
                    Ago(a.last_heartbeat_unix_ms()),
                    a.shard_ids().empty() ? "-" : util::StrJoin(a.shard_ids(), ","),
                    d.runner_problem().empty() ? "ok" : d.runner_problem()});
  }
  PrintTable(
      out,
      {"AGENT", "STATE", "ARCH", "DEVICES", "POOL", "EXECUTORS", "HEARTBEAT", "SHARDS", "RUNNER"},
      rows);
  return kExitOk;
}

int RunAgentDrain(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  return ShowAgent(
      client.Call<v1::AgentActionRequest, v1::Agent>(&Stub::DrainAgent, AgentAction(o)), o, out,
      err);
}

int RunAgentUndrain(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  return ShowAgent(
      client.Call<v1::AgentActionRequest, v1::Agent>(&Stub::UndrainAgent, AgentAction(o)), o, out,
      err);
}

int RunAuditList(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err) {
  v1::ListAuditRequest req;
  req.set_sweep_id(o.sweep);
  req.set_limit(o.limit);
  auto r = client.Call<v1::ListAuditRequest, v1::ListAuditResponse>(&Stub::ListAudit, req);
  if (!r.ok()) return Error(err, r.status());
  if (o.output == "json") {
    out << Json(*r) << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : r->entries()) {
    rows.push_back({Time(e.at_unix_ms()), e.who(), e.role(), e.action(), e.target(),
                    e.reason().empty() ? "-" : e.reason()});
  }
  PrintTable(out, {"TIME", "WHO", "ROLE", "ACTION", "TARGET", "REASON"}, rows);
  return kExitOk;
}

}  // namespace triage::ctl::farm
