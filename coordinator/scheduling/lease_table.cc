// LeaseTable's records, agents, Lease long-polls (waiters) and the on-call view. Matching and
// batches are in lease_matching.cc; a lease's life, from its grant to a result's intake, in
// lease_lifecycle.cc.

#include "coordinator/scheduling/lease_table.h"

#include <algorithm>
#include <random>

#include "common/util/strings.h"
#include "coordinator/planning/phases.h"

namespace triage::coord {
namespace {

bool Active(ShardState s) { return s == ShardState::kLeased || s == ShardState::kRunning; }

}  // namespace

LeaseTable::LeaseTable(SchedulingOptions options, CoordinatorMetrics* metrics,
                       ShardListener listener)
    : options_(std::move(options)),
      metrics_(metrics),
      listener_(std::move(listener)),
      demand_(options_.device_probes) {}

// ---------------------------------------------------------------------------------------------
// Records

LeaseTable::QueueKey LeaseTable::KeyOf(const ShardRecord& s) const {
  // A probe gating a longer next-wave verification ranks as that verification's probe would.
  const double longest = options_.queue_order == QueueOrder::kLongestFirst
                             ? std::max(s.expected_seconds, planning::kProbeShare * s.gates_seconds)
                             : 0;
  return {-s.priority, s.likely_superseded, -longest, s.seq, s.id};
}

std::string LeaseTable::ShardArch(const ShardRecord& s) { return ShardLane(s); }

std::string LeaseTable::AgentStateName(const AgentRecord& a) {
  if (a.offline) return "offline";
  if (a.draining) return "draining";
  return a.leases.empty() ? "idle" : "busy";
}

const ShardRecord* LeaseTable::FindShard(const std::string& id) const {
  auto it = shards_.find(id);
  return it == shards_.end() ? nullptr : &it->second;
}

AgentRecord* LeaseTable::FindAgent(const std::string& id) {
  auto it = agents_.find(id);
  return it == agents_.end() ? nullptr : &it->second;
}

const ShardRecord* LeaseTable::ShardOfLease(const std::string& lease_id) const {
  auto it = lease_to_shard_.find(lease_id);
  return it == lease_to_shard_.end() ? nullptr : &shards_.at(it->second);
}

std::vector<std::string> LeaseTable::Dependents(const std::string& shard_id) const {
  auto it = dependents_.find(shard_id);
  return it == dependents_.end() ? std::vector<std::string>{} : it->second;
}

bool LeaseTable::AnyCpuAgentServing() const {
  return std::any_of(agents_.begin(), agents_.end(), [](const auto& a) {
    return a.second.dims.cpu_only() && !a.second.offline && !a.second.draining;
  });
}

void LeaseTable::AgentLeases(const std::string& agent_id, const std::string& lease_id, bool add) {
  auto agent = agents_.find(agent_id);
  if (agent == agents_.end()) return;
  std::string before = AgentStateName(agent->second);
  if (add) {
    agent->second.leases.insert(lease_id);
  } else {
    agent->second.leases.erase(lease_id);
  }
  std::string after = AgentStateName(agent->second);
  if (before != after) metrics_->AgentStateChanged(agent->second.dims.arch(), before, after);
}

void LeaseTable::Enqueue(const ShardRecord& s) {
  const Requirement r = Requirement::Of(s);
  if (!queue_[r].insert(KeyOf(s)).second) return;
  ++queued_;
  queued_seconds_[r] += std::max(0.0, s.expected_seconds);
}

void LeaseTable::Dequeue(const ShardRecord& s) {
  const Requirement r = Requirement::Of(s);
  auto group = queue_.find(r);
  if (group == queue_.end() || group->second.erase(KeyOf(s)) == 0) return;
  --queued_;
  if (group->second.empty()) {
    queue_.erase(group);
    queued_seconds_.erase(r);
  } else {
    queued_seconds_[r] = std::max(0.0, queued_seconds_[r] - std::max(0.0, s.expected_seconds));
  }
}

void LeaseTable::Put(ShardRecord updated) {
  auto it = shards_.find(updated.id);
  const ShardRecord* old = it == shards_.end() ? nullptr : &it->second;
  if (old != nullptr) {
    if (old->state == ShardState::kQueued) Dequeue(*old);
    if (old->state == ShardState::kQueued || old->state == ShardState::kWaiting) {
      demand_.Add(old->sweep_id, Requirement::Of(*old), old->state == ShardState::kWaiting, -1);
    }
    for (const auto* l : {&old->lease, &old->backup}) {
      if (*l && LeaseNamed(updated, (*l)->lease_id) == nullptr) {
        lease_to_shard_.erase((*l)->lease_id);
        lease_request_.erase((*l)->lease_id);
        planned_.erase((*l)->lease_id);
        AgentLeases((*l)->agent_id, (*l)->lease_id, false);
      }
    }
  }
  const std::string arch = ShardArch(updated);
  if (old == nullptr) {
    metrics_->ShardStateChanged(arch, "", ShardStateName(updated.state));
  } else if (old->state != updated.state) {
    metrics_->ShardStateChanged(arch, ShardStateName(old->state), ShardStateName(updated.state));
  }
  if (listener_) listener_(old, updated);
  if (old == nullptr && !updated.depends_on.empty()) {
    dependents_[updated.depends_on].push_back(updated.id);
  }
  if (updated.state == ShardState::kQueued) Enqueue(updated);
  if (updated.state == ShardState::kQueued || updated.state == ShardState::kWaiting) {
    demand_.Add(updated.sweep_id, Requirement::Of(updated), updated.state == ShardState::kWaiting,
                +1);
  }
  for (const auto* l : {&updated.lease, &updated.backup}) {
    if (*l && (old == nullptr || LeaseNamed(*old, (*l)->lease_id) == nullptr)) {
      lease_to_shard_[(*l)->lease_id] = updated.id;
      AgentLeases((*l)->agent_id, (*l)->lease_id, true);
    }
  }
  shards_[updated.id] = std::move(updated);
}

void LeaseTable::Put(AgentRecord updated) {
  auto it = agents_.find(updated.dims.agent_id());
  if (it == agents_.end()) {
    metrics_->AgentStateChanged(updated.dims.arch(), "", AgentStateName(updated));
    agents_[updated.dims.agent_id()] = std::move(updated);
    return;
  }
  // Lease membership is owned by Put(ShardRecord); keep it.
  updated.leases = it->second.leases;
  std::string before = AgentStateName(it->second);
  std::string after = AgentStateName(updated);
  if (before != after || it->second.dims.arch() != updated.dims.arch()) {
    metrics_->AgentStateChanged(it->second.dims.arch(), before, "");
    metrics_->AgentStateChanged(updated.dims.arch(), "", after);
  }
  it->second = std::move(updated);
}

void LeaseTable::Remove(const std::string& agent_id) {
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return;
  metrics_->AgentStateChanged(it->second.dims.arch(), AgentStateName(it->second), "");
  agents_.erase(it);
}

void LeaseTable::Clear() {
  for (const auto& [id, a] : agents_) {
    metrics_->AgentStateChanged(a.dims.arch(), AgentStateName(a), "");
  }
  for (const auto& [id, s] : shards_) {
    metrics_->ShardStateChanged(ShardArch(s), ShardStateName(s.state), "");
  }
  shards_.clear();
  agents_.clear();
  lease_to_shard_.clear();
  dependents_.clear();
  lease_request_.clear();
  accepted_leases_.clear();
  queue_.clear();
  queued_ = 0;
  demand_.Clear();
  held_sweeps_.clear();
  no_backup_sweeps_.clear();
}

void LeaseTable::Hold(const std::string& sweep_id, bool held) {
  if (held) {
    held_sweeps_.insert(sweep_id);
  } else {
    held_sweeps_.erase(sweep_id);
  }
}

void LeaseTable::Recovered(AgentRecord a, TimePoint now) {
  a.last_heartbeat = now;  // a grace period to re-attach
  a.offline = false;
  a.leases.clear();
  metrics_->AgentStateChanged(a.dims.arch(), "", AgentStateName(a));
  agents_[a.dims.agent_id()] = std::move(a);
}

void LeaseTable::Recovered(ShardRecord s, TimePoint now) {
  for (auto* l : {&s.lease, &s.backup}) {
    if (!*l) continue;
    (*l)->deadline = now + options_.lease_ttl;
    s.last_progress_at = now;
  }
  Put(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// Agents

std::string LeaseTable::NewSessionId() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return util::StrCat("sess-", next_session_++, "-", util::Hex(rng(), 16));
}

std::vector<ShardRecord> LeaseTable::FenceRestartedAgent(const AgentRecord& previous,
                                                         const std::set<std::string>& held,
                                                         TimePoint now, Mutation& m) {
  std::vector<ShardRecord> out;
  for (const auto& lease_id : previous.leases) {
    auto sid = lease_to_shard_.find(lease_id);
    if (sid == lease_to_shard_.end()) continue;
    ShardRecord& current = shards_.at(sid->second);
    LeaseInfo* lease = LeaseNamed(current, lease_id);
    if (lease == nullptr) continue;
    if (held.count(lease_id)) {
      // Kept: the lease's life starts again so that the re-sent result arrives in time.
      lease->deadline = now + options_.lease_ttl;
      continue;
    }
    ShardRecord s = current;
    metrics_->LeaseExpired(ShardArch(s), "agent_restart");
    const std::string why = "agent re-registered (restart): lease fenced";
    if (s.backup && s.backup->lease_id == lease_id) {
      m.attempts.push_back(EndedAttempt(s, *s.backup, now, "expired", why));
      s.backup.reset();  // the shard's lease runs on
    } else {
      // An agent restart says nothing about the work: its own budget, not max_attempts.
      FailAttempt(s, "expired", why, now, m, Fault::kInfrastructure, 0);
    }
    out.push_back(std::move(s));
  }
  return out;
}

void LeaseTable::Seen(AgentRecord& agent, TimePoint now) {
  agent.last_heartbeat = now;
  if (agent.offline) {
    std::string before = AgentStateName(agent);
    agent.offline = false;
    metrics_->AgentStateChanged(agent.dims.arch(), before, AgentStateName(agent));
  }
}

v1::HeartbeatResponse LeaseTable::Heartbeat(const v1::HeartbeatRequest& req, TimePoint now) {
  v1::HeartbeatResponse resp;
  auto it = agents_.find(req.agent_id());
  if (it == agents_.end() || it->second.session_id != req.session_id()) {
    resp.set_reregister(true);
    return resp;
  }
  AgentRecord& agent = it->second;
  metrics_->HeartbeatAge(agent.dims.arch(), ToSeconds(now - agent.last_heartbeat));
  Seen(agent, now);
  const auto named = [&req](const std::string& lease_id) {
    return std::find(req.lease_ids().begin(), req.lease_ids().end(), lease_id) !=
           req.lease_ids().end();
  };
  for (const auto& lease_id : req.lease_ids()) {
    if (agent.superseded.count(lease_id)) continue;  // its batch runs on (EndOtherAttempt)
    auto sid = lease_to_shard_.find(lease_id);
    if (sid == lease_to_shard_.end()) {
      resp.add_revoked_lease_ids(lease_id);
      continue;
    }
    LeaseInfo* lease = LeaseNamed(shards_.at(sid->second), lease_id);
    if (lease != nullptr && lease->agent_id == agent.dims.agent_id()) {
      lease->deadline = now + options_.lease_ttl;
    } else {
      resp.add_revoked_lease_ids(lease_id);
    }
  }
  for (const auto& lease_id : agent.revoked) {
    if (named(lease_id) &&
        std::find(resp.revoked_lease_ids().begin(), resp.revoked_lease_ids().end(), lease_id) ==
            resp.revoked_lease_ids().end()) {
      resp.add_revoked_lease_ids(lease_id);
    }
  }
  // Revocations the agent no longer mentions have been acted on.
  for (auto* leases : {&agent.revoked, &agent.superseded}) {
    for (auto r = leases->begin(); r != leases->end();) {
      r = named(*r) ? std::next(r) : leases->erase(r);
    }
  }
  resp.set_draining(agent.draining);
  return resp;
}

void LeaseTable::MarkSilentAgentsOffline(TimePoint now) {
  for (auto& [id, a] : agents_) {
    if (!a.offline && now - a.last_heartbeat > options_.agent_dead_after) {
      std::string before = AgentStateName(a);
      a.offline = true;
      metrics_->AgentStateChanged(a.dims.arch(), before, AgentStateName(a));
    }
  }
}

std::vector<std::string> LeaseTable::ForgettableAgents(TimePoint now) const {
  std::vector<std::string> out;
  for (const auto& [id, a] : agents_) {
    if (a.offline && a.leases.empty() && now - a.last_heartbeat > options_.offline_retention) {
      out.push_back(id);
    }
  }
  return out;
}

void LeaseTable::StartGrace(TimePoint now) {
  for (auto& [id, a] : agents_) a.last_heartbeat = std::max(a.last_heartbeat, now);
  for (auto& [lease_id, sid] : lease_to_shard_) {
    ShardRecord& s = shards_.at(sid);
    LeaseInfo* lease = LeaseNamed(s, lease_id);
    if (lease == nullptr) continue;
    lease->deadline = std::max(lease->deadline, now + options_.lease_ttl);
    s.last_progress_at = std::max(s.last_progress_at, now);
  }
}

// ---------------------------------------------------------------------------------------------
// Waiters

std::int64_t LeaseTable::AddWaiter(const v1::LeaseRequest& req, TimePoint now, LeaseCallback done) {
  Duration wait =
      std::min<Duration>(std::chrono::milliseconds(req.wait_ms()), options_.lease_wait_limit);
  const std::int64_t id = next_wait_id_++;
  waiters_.push_back(Waiter{id, req.agent_id(), req.session_id(), req.request_id(), req.max_batch(),
                            now + wait, std::move(done)});
  return id;
}

LeaseTable::LeaseCallback LeaseTable::CancelWaiter(std::int64_t id) {
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    if (it->id == id) {
      LeaseCallback done = std::move(it->done);
      waiters_.erase(it);
      return done;
    }
  }
  return nullptr;
}

std::vector<LeaseTable::Waiter> LeaseTable::TakeExpiredWaiters(TimePoint now) {
  std::vector<Waiter> out;
  for (auto w = waiters_.begin(); w != waiters_.end();) {
    if (w->deadline <= now) {
      out.push_back(std::move(*w));
      w = waiters_.erase(w);
    } else {
      ++w;
    }
  }
  return out;
}

std::vector<LeaseTable::Waiter> LeaseTable::TakeWaitersOf(const std::string& agent_id) {
  std::vector<Waiter> out;
  for (auto w = waiters_.begin(); w != waiters_.end();) {
    if (w->agent_id == agent_id) {
      out.push_back(std::move(*w));
      w = waiters_.erase(w);
    } else {
      ++w;
    }
  }
  return out;
}

std::vector<LeaseTable::Waiter> LeaseTable::TakeAllWaiters() {
  std::vector<Waiter> out(std::make_move_iterator(waiters_.begin()),
                          std::make_move_iterator(waiters_.end()));
  waiters_.clear();
  return out;
}

void LeaseTable::ServeWaiters(
    TimePoint now,
    const std::function<void(Waiter&, const AgentRecord&, const ShardRecord&)>& grant,
    const std::function<void(Waiter&)>& reregister) {
  if (serving_waiters_ || waiters_.empty() || queued_ == 0) return;
  serving_waiters_ = true;
  for (auto it = waiters_.begin(); it != waiters_.end() && queued_ > 0;) {
    auto agent = agents_.find(it->agent_id);
    if (agent == agents_.end() || agent->second.session_id != it->session_id) {
      reregister(*it);
      it = waiters_.erase(it);
      continue;
    }
    const ShardRecord* shard = FindMatch(agent->second, now, it->max_batch);
    if (shard == nullptr) {
      ++it;
      continue;
    }
    Waiter w = std::move(*it);
    it = waiters_.erase(it);
    grant(w, agent->second, *shard);
  }
  serving_waiters_ = false;
}

// ---------------------------------------------------------------------------------------------
// The on-call view

std::vector<Unservable> LeaseTable::FindUnservable() {
  std::vector<const AgentRecord*> agents;
  agents.reserve(agents_.size());
  for (const auto& [id, a] : agents_) agents.push_back(&a);
  std::vector<coord::Unservable> out = demand_.Evaluate(agents);
  std::map<std::pair<std::string, std::string>, int> gauges;  // (arch, reason) -> shards
  for (const auto& u : out) gauges[{u.arch, u.reason}] += u.shards;
  for (const auto& key : unservable_reported_) gauges.try_emplace(key, 0);
  for (const auto& [key, n] : gauges) {
    metrics_->UnservableShards(key.first, key.second, n);
    unservable_reported_.insert(key);
  }
  return out;
}

void LeaseTable::ReportOnCallAges(TimePoint now) {
  std::map<std::string, std::pair<double, double>> ages;  // arch -> {progress, queued}
  for (const auto& arch : on_call_archs_) ages[arch] = {0, 0};
  for (const auto& [id, s] : shards_) {
    if (Active(s.state)) {
      auto& a = ages[ShardArch(s)];
      a.first = std::max(a.first, ToSeconds(now - s.last_progress_at));
    } else if (s.state == ShardState::kQueued && s.eligible_at <= now) {
      auto& a = ages[ShardArch(s)];
      a.second = std::max(a.second, ToSeconds(now - s.eligible_at));
    }
  }
  for (const auto& [arch, a] : ages) {
    on_call_archs_.insert(arch);
    metrics_->OnCallAges(arch, a.first, a.second);
  }
}

void LeaseTable::ReportRunnerProblems() {
  std::map<std::string, int> problems;  // arch -> live agents with a problem
  for (const auto& arch : runner_archs_) problems[arch] = 0;
  for (const auto& [id, a] : agents_) {
    int& n = problems[a.dims.arch()];
    if (!a.offline && !a.dims.runner_problem().empty()) ++n;
  }
  for (const auto& [arch, n] : problems) {
    runner_archs_.insert(arch);
    metrics_->RunnerProblems(arch, n);
  }
}

}  // namespace triage::coord
