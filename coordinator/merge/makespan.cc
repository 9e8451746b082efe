#include "coordinator/merge/makespan.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "coordinator/merge/merge.h"

namespace triage::merge {
namespace {

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// What one lane's taken results say, before the division by agents.
struct LaneAcc {
  LaneMakespan out;
  std::set<std::string> agents;
  bool has_results = false;
  TimePoint first_start;
  TimePoint last_accepted;
};

}  // namespace

Makespan ComputeMakespan(const coord::SweepRecord& sweep,
                         const std::vector<coord::ShardRecord>& shards,
                         const std::vector<coord::ResultRecord>& results,
                         const std::vector<coord::AttemptRecord>& attempts) {
  std::map<std::string, std::string> agent_of_lease;
  for (const auto& a : attempts) {
    if (!a.lease_id.empty() && !a.agent_id.empty()) agent_of_lease[a.lease_id] = a.agent_id;
  }
  const auto latest = LatestResults(results);
  std::map<std::string, LaneAcc> lanes;
  std::map<std::string, std::string> lane_of;  // shard id -> lane
  for (const auto& s : shards) lane_of[s.id] = coord::ShardLane(s);
  for (const auto& a : attempts) {
    auto lane = lane_of.find(a.shard_id);
    if (!a.backup || lane == lane_of.end()) continue;
    LaneMakespan& out = lanes[lane->second].out;
    ++out.backups;
    if (a.outcome == "succeeded") ++out.backups_won;
    if (!a.outcome.empty())
      out.backup_device_seconds += std::max(0.0, Seconds(a.ended_at - a.granted_at));
  }
  Makespan m;
  bool any_result = false;
  TimePoint last_accepted;
  std::map<std::string, bool> estimated;  // file + '\n' + key -> planned at an estimate
  for (const auto& s : shards) {
    for (const auto& e : s.spec.entries()) {
      estimated[e.file() + "\n" + e.key()] |= e.estimated();
    }
    LaneAcc& lane = lanes[coord::ShardLane(s)];
    ++lane.out.shards;
    lane.out.predicted_device_seconds += s.expected_seconds;
    auto r = latest.find(s.id);
    if (r == latest.end()) continue;
    const coord::ResultRecord& rec = *r->second;
    const double ran = std::max(0.0, rec.result.duration_seconds());
    lane.out.actual_device_seconds += ran;
    if (auto agent = agent_of_lease.find(rec.lease_id); agent != agent_of_lease.end()) {
      lane.agents.insert(agent->second);
    }
    // Its start as the ETA reads it (docs/farm.md, "Progress"): the agent's own measure of the
    // run before its acceptance. A clock step cannot put it before the sweep existed.
    const TimePoint start = std::max(
        sweep.created_at,
        rec.accepted_at - std::chrono::duration_cast<Duration>(std::chrono::duration<double>(ran)));
    if (!lane.has_results || start < lane.first_start) lane.first_start = start;
    if (!lane.has_results || rec.accepted_at > lane.last_accepted) {
      lane.last_accepted = rec.accepted_at;
    }
    lane.has_results = true;
    if (!any_result || rec.accepted_at > last_accepted) last_accepted = rec.accepted_at;
    any_result = true;
  }
  for (auto& [name, lane] : lanes) {
    LaneMakespan& out = lane.out;
    out.lane = name;
    out.agents = std::max<int>(1, static_cast<int>(lane.agents.size()));
    out.predicted_seconds = out.predicted_device_seconds / out.agents;
    if (lane.has_results) {
      out.actual_seconds = std::max(0.0, Seconds(lane.last_accepted - lane.first_start));
    }
    m.predicted_seconds = std::max(m.predicted_seconds, out.predicted_seconds);
    m.lanes.push_back(out);
  }
  if (any_result) m.actual_seconds = std::max(0.0, Seconds(last_accepted - sweep.created_at));
  for (const auto& [entry, is_estimate] : estimated) {
    ++(is_estimate ? m.entries_estimated : m.entries_recorded);
  }
  return m;
}

std::string Makespan::Basis() const {
  if (entries_recorded + entries_estimated == 0) return "";
  if (entries_estimated == 0) return "durations";
  return entries_recorded == 0 ? "estimates" : "mixed";
}

}  // namespace triage::merge
