#include "coordinator/scheduling/lease_table.h"

#include <algorithm>
#include <random>

#include "common/registry/registry_union.h"
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
    if (old->lease && (!updated.lease || updated.lease->lease_id != old->lease->lease_id)) {
      lease_to_shard_.erase(old->lease->lease_id);
      lease_request_.erase(old->lease->lease_id);
      AgentLeases(old->lease->agent_id, old->lease->lease_id, false);
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
  if (updated.lease &&
      (old == nullptr || !old->lease || old->lease->lease_id != updated.lease->lease_id)) {
    lease_to_shard_[updated.lease->lease_id] = updated.id;
    AgentLeases(updated.lease->agent_id, updated.lease->lease_id, true);
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
  if (s.lease) {
    s.lease->deadline = now + options_.lease_ttl;
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
    if (held.count(lease_id) && current.lease) {
      // Kept: the lease's life starts again so that the re-sent result arrives in time.
      current.lease->deadline = now + options_.lease_ttl;
      continue;
    }
    ShardRecord s = current;
    metrics_->LeaseExpired(ShardArch(s), "agent_restart");
    // An agent restart says nothing about the work: its own budget, not max_attempts.
    FailAttempt(s, "expired", "agent re-registered (restart): lease fenced", now, m,
                Fault::kInfrastructure, 0);
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
    auto sid = lease_to_shard_.find(lease_id);
    if (sid == lease_to_shard_.end()) {
      resp.add_revoked_lease_ids(lease_id);
      continue;
    }
    ShardRecord& s = shards_.at(sid->second);
    if (s.lease && s.lease->agent_id == agent.dims.agent_id()) {
      s.lease->deadline = now + options_.lease_ttl;
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
  for (auto r = agent.revoked.begin(); r != agent.revoked.end();) {
    r = named(*r) ? std::next(r) : agent.revoked.erase(r);
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
    if (!s.lease) continue;
    s.lease->deadline = std::max(s.lease->deadline, now + options_.lease_ttl);
    s.last_progress_at = std::max(s.last_progress_at, now);
  }
}

// ---------------------------------------------------------------------------------------------
// Leases

bool LeaseTable::Matches(const AgentRecord& agent, const ShardRecord& shard, TimePoint now) const {
  if (shard.state != ShardState::kQueued || shard.eligible_at > now) return false;
  if (!held_sweeps_.empty() && held_sweeps_.count(shard.sweep_id)) return false;
  return AgentOffers(agent.dims, shard.spec.executor(), shard.spec.playbook(), shard.archs,
                     shard.cpu_ok, options_.device_probes);
}

// Per requirement group the agent offers, the first shard it may take now (a group's head, past
// shards in backoff or of held sweeps); the best of those by queue order, its own arch's first.
// A lease costs the number of groups (playbooks x archs x executors), not the queue's length.
const ShardRecord* LeaseTable::FindMatch(const AgentRecord& agent, TimePoint now,
                                         int max_batch) const {
  if (agent.offline || agent.draining) return nullptr;
  struct Best {
    const QueueKey* key = nullptr;
    const ShardRecord* shard = nullptr;
  } own, probe;  // probe: a device agent's fallback, probe-phase work
  for (const auto& [req, keys] : queue_) {
    if (!AgentOffers(agent.dims, req, options_.device_probes)) continue;
    const bool mine = agent.dims.cpu_only() || std::find(req.archs.begin(), req.archs.end(),
                                                         agent.dims.arch()) != req.archs.end();
    Best& best = mine ? own : probe;
    for (const auto& key : keys) {
      if (best.key != nullptr && !(key < *best.key)) break;  // cannot beat what was found
      const ShardRecord& s = shards_.at(std::get<4>(key));
      if (!Matches(agent, s, now)) continue;
      best = {&key, &s};
      break;
    }
  }
  if (own.shard != nullptr && probe.shard != nullptr &&
      Gathers(agent, *own.shard, *probe.shard, max_batch, now)) {
    return probe.shard;
  }
  // No queued probe to gather with, but a running one releases company soon: the agent waits
  // for it (its Lease long-polls; the probe's result serves it), or probes meanwhile.
  if (own.shard != nullptr && Holds(agent, *own.shard, max_batch, now)) return probe.shard;
  return own.shard != nullptr ? own.shard : probe.shard;
}

double LeaseTable::FairShare(const Requirement& lane, double extra) const {
  double work = extra;
  for (const auto& [req, seconds] : queued_seconds_) {
    if (req.executor == lane.executor && req.archs == lane.archs && req.cpu_ok == lane.cpu_ok) {
      work += seconds;
    }
  }
  // Every agent known to serve the lane counts, offline and drained ones too: they are
  // expected back, and a batch sized while one is away would leave it nothing on its return.
  int serving = 0;
  for (const auto& [id, a] : agents_) {
    if (AgentOffers(a.dims, lane, false)) ++serving;
  }
  return work / std::max(1, serving);
}

void LeaseTable::SetLearnedSeconds(const std::string& sweep_id, double seconds) {
  learned_[sweep_id] = seconds;
}

double LeaseTable::CappedSeconds(const ShardRecord& s) const {
  const double planned = std::max(0.0, s.expected_seconds);
  auto learned = learned_.find(s.sweep_id);
  if (learned == learned_.end()) return planned;
  double seconds = 0;
  for (const auto& e : s.spec.entries()) {
    if (!e.estimated() && e.expected_seconds() <= 0) return planned;  // planned before per-entry
    seconds += e.estimated() ? learned->second : e.expected_seconds();
  }
  return seconds;
}

bool LeaseTable::RunsAlone(const ShardRecord& s) const {
  if (options_.verify_batch_shard_max <= Duration::zero()) return false;
  const bool learned = learned_.count(s.sweep_id) > 0;
  for (const auto& e : s.spec.entries()) {
    // An estimate the sweep has not measured yet, or a plan that did not say per entry.
    if (e.estimated() ? !learned : e.expected_seconds() <= 0) return false;
  }
  return CappedSeconds(s) > ToSeconds(options_.verify_batch_shard_max);
}

// Gathering (docs/farm.md, "Batched verification"). A device agent whose verify phase would run
// in a batch short of max_batch for want of queued company, while a probe of the same wave that
// it may take would release a verification of its arch, takes the probe: the probe lane's work
// is done either way, and a later lease finds more verifications together. Only while the batch
// with that company would fit the agent's fair share (on a fleet with an agent free for every
// shard it never holds a verification back) and for at most verify_gather after the verify
// phase was queued (what it can cost the wave's end).
bool LeaseTable::Gathers(const AgentRecord& agent, const ShardRecord& verify,
                         const ShardRecord& probe, int max_batch, TimePoint now) const {
  if (!MayGather(agent, verify, max_batch, now) || probe.spec.phase() != v1::PHASE_PROBE ||
      probe.sweep_id != verify.sweep_id || probe.spec.wave() != verify.spec.wave()) {
    return false;
  }
  const ShardRecord* company = CompanyFrom(probe, verify);
  return company != nullptr && RoomFor(agent, verify, *company, max_batch, now);
}

// Holding: the same, for a probe of the wave that is already running (no probe is queued at the
// wave's tail), expected to end within the verify phase's gather window. The agent gets no
// lease meanwhile (or a probe, FindMatch): its verification waits for the company the probe
// releases instead of starting a session of its own, and the wait ends with the window.
bool LeaseTable::Holds(const AgentRecord& agent, const ShardRecord& verify, int max_batch,
                       TimePoint now) const {
  if (!MayGather(agent, verify, max_batch, now)) return false;
  const TimePoint window_end = verify.enqueued_at + options_.verify_gather;
  for (const auto& [lease_id, id] : lease_to_shard_) {
    const ShardRecord& probe = shards_.at(id);
    if (!probe.lease || probe.spec.phase() != v1::PHASE_PROBE ||
        probe.sweep_id != verify.sweep_id || probe.spec.wave() != verify.spec.wave()) {
      continue;
    }
    const TimePoint expected_end =
        probe.lease->granted_at +
        std::chrono::duration_cast<Duration>(
            std::chrono::duration<double>(std::max(0.0, probe.expected_seconds)));
    if (expected_end > window_end) continue;
    const ShardRecord* company = CompanyFrom(probe, verify);
    if (company != nullptr && RoomFor(agent, verify, *company, max_batch, now)) return true;
  }
  return false;
}

bool LeaseTable::MayGather(const AgentRecord& agent, const ShardRecord& verify, int max_batch,
                           TimePoint now) const {
  return max_batch > 1 && !agent.dims.cpu_only() && options_.verify_gather > Duration::zero() &&
         options_.verify_batch_max > Duration::zero() && verify.spec.phase() == v1::PHASE_VERIFY &&
         now - verify.enqueued_at < options_.verify_gather && !RunsAlone(verify);
}

const ShardRecord* LeaseTable::CompanyFrom(const ShardRecord& probe,
                                           const ShardRecord& verify) const {
  for (const auto& id : Dependents(probe.id)) {
    const ShardRecord& d = shards_.at(id);
    if (d.state == ShardState::kWaiting && d.spec.phase() == v1::PHASE_VERIFY &&
        d.spec.arch() == verify.spec.arch() && d.spec.executor() == verify.spec.executor() &&
        d.archs == verify.archs) {
      return &d;
    }
  }
  return nullptr;
}

bool LeaseTable::RoomFor(const AgentRecord& agent, const ShardRecord& verify,
                         const ShardRecord& company, int max_batch, TimePoint now) const {
  if (RunsAlone(company)) return false;
  const std::vector<const ShardRecord*> batch = BatchFor(agent, verify, max_batch, now);
  if (static_cast<int>(batch.size()) + 2 > max_batch) return false;
  const double more = std::max(0.0, company.expected_seconds);
  double seconds = std::max(0.0, verify.expected_seconds) + more;
  double capped = CappedSeconds(verify) + CappedSeconds(company);
  for (const ShardRecord* s : batch) {
    seconds += std::max(0.0, s->expected_seconds);
    capped += CappedSeconds(*s);
  }
  return seconds <= FairShare(Requirement::Of(verify), more) &&
         capped <= ToSeconds(options_.verify_batch_max);
}

// A batch (docs/farm.md, "Batched verification"): verify-phase shards of the head's sweep, wave,
// arch and executor, whose workspaces are the same but for disjoint pre-applied files and for
// registry lines none of the others depends on (registry::RegistryUnion), so one workspace and
// one pytest session serve them all. The batch takes the shortest such shards
// (a session's start weighs most on them) while its expected seconds stay within the agent's
// fair share of the queued work of that arch and executor (that work over the agents that can
// take it) and within verify_batch_max (what an agent's death can lose at once). With few
// agents for a deep queue a batch is large; on a fleet with an agent free for every shard it is
// the head alone, so batching never holds back work another agent would start.
std::vector<const ShardRecord*> LeaseTable::BatchFor(const AgentRecord& agent,
                                                     const ShardRecord& head, int max_batch,
                                                     TimePoint now) const {
  std::vector<const ShardRecord*> batch;
  if (max_batch <= 1 || agent.dims.cpu_only() || head.spec.phase() != v1::PHASE_VERIFY ||
      options_.verify_batch_max <= Duration::zero() || RunsAlone(head)) {
    return batch;
  }
  const Requirement own = Requirement::Of(head);
  auto same_lane = [&](const Requirement& r) {
    return r.executor == own.executor && r.archs == own.archs && r.cpu_ok == own.cpu_ok;
  };
  std::set<std::string> files;  // what the batch's pre-applied edits touch
  auto touched = [](const ShardRecord& s) {
    std::vector<std::string> out;
    for (const auto& e : s.spec.pre_apply()) out.push_back(util::StrCat(e.repo(), "/", e.path()));
    return out;
  };
  for (auto& f : touched(head)) files.insert(std::move(f));
  registry::RegistryUnion lines;  // what the batch's training_utils.py gets
  lines.Add(head.spec);
  // Candidates: a bounded look at each group's tail, where its shortest shards are.
  const std::size_t look = static_cast<std::size_t>(max_batch) * 8;
  std::vector<const ShardRecord*> candidates;
  for (const auto& [req, keys] : queue_) {
    if (!same_lane(req)) continue;
    std::size_t seen = 0;
    for (auto k = keys.rbegin(); k != keys.rend() && seen < look; ++k, ++seen) {
      const ShardRecord& s = shards_.at(std::get<4>(*k));
      if (s.id == head.id || s.sweep_id != head.sweep_id || s.spec.wave() != head.spec.wave() ||
          s.spec.phase() != v1::PHASE_VERIFY || s.spec.arch() != head.spec.arch() ||
          !Matches(agent, s, now)) {
        continue;
      }
      candidates.push_back(&s);
    }
  }
  if (candidates.empty()) return batch;
  // Two bounds: the agent's fair share of the queued work, in planned seconds as the queue
  // counts it, and verify_batch_max, in the best estimate of what the batch will run (what an
  // agent's death can lose: CappedSeconds).
  const double share = FairShare(own, 0);
  const double cap = ToSeconds(options_.verify_batch_max);
  double seconds = std::max(0.0, head.expected_seconds);
  double capped = CappedSeconds(head);
  std::stable_sort(
      candidates.begin(), candidates.end(), [](const ShardRecord* a, const ShardRecord* b) {
        return std::tie(a->expected_seconds, a->seq) < std::tie(b->expected_seconds, b->seq);
      });
  for (const ShardRecord* s : candidates) {
    if (static_cast<int>(batch.size()) + 1 >= max_batch) break;
    if (seconds + std::max(0.0, s->expected_seconds) > share) break;
    if (capped + CappedSeconds(*s) > cap || RunsAlone(*s)) continue;
    std::vector<std::string> mine = touched(*s);
    if (std::any_of(mine.begin(), mine.end(), [&](const auto& f) { return files.count(f) > 0; })) {
      continue;
    }
    if (!lines.Add(s->spec)) continue;
    for (auto& f : mine) files.insert(std::move(f));
    seconds += std::max(0.0, s->expected_seconds);
    capped += CappedSeconds(*s);
    batch.push_back(s);
  }
  return batch;
}

std::vector<const ShardRecord*> LeaseTable::SameRequest(const AgentRecord& agent,
                                                        const std::string& request_id) const {
  std::vector<const ShardRecord*> same;
  if (request_id.empty()) return same;
  for (const auto& lease_id : agent.leases) {
    auto r = lease_request_.find(lease_id);
    if (r != lease_request_.end() && r->second.first == request_id) {
      same.push_back(&shards_.at(lease_to_shard_.at(lease_id)));
    }
  }
  // The head first, then the batch in the order it was granted.
  std::sort(same.begin(), same.end(), [this](const ShardRecord* a, const ShardRecord* b) {
    return lease_request_.at(a->lease->lease_id).second <
           lease_request_.at(b->lease->lease_id).second;
  });
  return same;
}

ShardRecord LeaseTable::Grant(const AgentRecord& agent, const ShardRecord& shard, TimePoint now,
                              Mutation& m) const {
  ShardRecord s = shard;
  s.attempts += 1;
  s.token += 1;
  LeaseInfo lease;
  lease.lease_id = util::StrCat(s.id, "-l", s.token);
  lease.agent_id = agent.dims.agent_id();
  lease.session_id = agent.session_id;
  lease.token = s.token;
  lease.granted_at = now;
  lease.deadline = now + options_.lease_ttl;
  s.lease = lease;
  s.state = ShardState::kLeased;
  s.last_progress_at = now;
  s.last_step.clear();
  s.last_entry.clear();
  s.log_tail.clear();
  AttemptRecord a;
  a.shard_id = s.id;
  a.attempt = static_cast<int>(lease.token);
  a.lease_id = lease.lease_id;
  a.agent_id = lease.agent_id;
  a.token = lease.token;
  a.granted_at = now;
  m.attempts.push_back(a);
  metrics_->ShardQueueWait(ShardArch(s), s.spec.playbook(),
                           std::max(0.0, ToSeconds(now - std::max(s.enqueued_at, s.eligible_at))));
  return s;
}

void LeaseTable::RememberRequest(const std::string& lease_id, const std::string& request_id,
                                 int position) {
  if (!request_id.empty()) lease_request_[lease_id] = {request_id, position};
}

v1::LeaseResponse LeaseTable::Granted(const std::vector<const ShardRecord*>& leases) {
  v1::LeaseResponse resp;
  if (leases.empty()) return resp;
  const ShardRecord& s = *leases.front();
  resp.set_granted(true);
  resp.set_lease_id(s.lease->lease_id);
  resp.set_fencing_token(s.lease->token);
  resp.set_deadline_unix_ms(ToUnixMillis(s.lease->deadline));
  *resp.mutable_shard() = s.spec;
  for (std::size_t i = 1; i < leases.size(); ++i) {
    const ShardRecord& b = *leases[i];
    v1::BatchGrant* g = resp.add_batch();
    g->set_lease_id(b.lease->lease_id);
    g->set_fencing_token(b.lease->token);
    g->set_deadline_unix_ms(ToUnixMillis(b.lease->deadline));
    *g->mutable_shard() = b.spec;
  }
  return resp;
}

v1::ProgressResponse LeaseTable::Progress(const v1::ProgressRequest& req, TimePoint now) {
  v1::ProgressResponse resp;
  auto sid = lease_to_shard_.find(req.lease_id());
  if (sid == lease_to_shard_.end()) {
    resp.set_revoked(true);
    return resp;
  }
  const ShardRecord& current = shards_.at(sid->second);
  if (!current.lease || current.lease->token != req.fencing_token() ||
      current.lease->agent_id != req.agent_id()) {
    resp.set_revoked(true);
    return resp;
  }
  // In memory only (progress is not persisted).
  ShardRecord s = current;
  s.lease->deadline = now + options_.lease_ttl;
  s.last_progress_at = now;
  s.last_step = req.step();
  s.last_entry = req.entry();
  if (req.log_tail_size() > 0) s.log_tail.assign(req.log_tail().begin(), req.log_tail().end());
  if (s.state == ShardState::kLeased) s.state = ShardState::kRunning;
  Put(std::move(s));
  if (auto agent = agents_.find(req.agent_id()); agent != agents_.end()) {
    agent->second.last_heartbeat = now;
  }
  return resp;
}

AttemptRecord LeaseTable::EndedAttempt(const ShardRecord& s, TimePoint now, std::string outcome,
                                       std::string reason) {
  AttemptRecord a;
  a.shard_id = s.id;
  a.attempt = static_cast<int>(s.lease->token);
  a.lease_id = s.lease->lease_id;
  a.agent_id = s.lease->agent_id;
  a.token = s.lease->token;
  a.granted_at = s.lease->granted_at;
  a.ended_at = now;
  a.outcome = std::move(outcome);
  a.reason = std::move(reason);
  return a;
}

void LeaseTable::FailAttempt(ShardRecord& s, const std::string& outcome, const std::string& reason,
                             TimePoint now, Mutation& m, Fault fault, int max_attempts) const {
  if (s.lease) m.attempts.push_back(EndedAttempt(s, now, outcome, reason));
  s.lease.reset();
  s.last_error = reason;
  if (fault == Fault::kInfrastructure) {
    // The grant is given back: the work was not tried to its end.
    s.attempts = std::max(0, s.attempts - 1);
    s.infra_losses += 1;
    if (s.infra_losses >= options_.max_infra_losses) {
      s.last_error = util::StrCat(reason, " (", s.infra_losses,
                                  " leases lost to agents or the coordinator going away)");
      s.state = ShardState::kQuarantined;
      return;
    }
    s.state = ShardState::kQueued;
    s.enqueued_at = now;
    s.eligible_at = now;  // nothing to wait for: another agent may take it at once
    metrics_->Requeued(ShardArch(s), "infra");
    return;
  }
  if (s.attempts >= max_attempts) {
    s.state = ShardState::kQuarantined;
    return;
  }
  auto backoff = options_.backoff_base;
  for (int i = 1; i < s.attempts && backoff < options_.backoff_max; ++i) backoff *= 2;
  backoff = std::min<Duration>(backoff, options_.backoff_max);
  s.state = ShardState::kQueued;
  s.enqueued_at = now;
  s.eligible_at = now + backoff;
  metrics_->Requeued(ShardArch(s), "auto");
}

void LeaseTable::Revoke(ShardRecord& s, TimePoint now, const std::string& why, Mutation& m) {
  if (!s.lease) return;
  m.attempts.push_back(EndedAttempt(s, now, "revoked", why));
  auto agent = agents_.find(s.lease->agent_id);
  if (agent != agents_.end()) agent->second.revoked.insert(s.lease->lease_id);
  s.lease.reset();
}

std::vector<ShardRecord> LeaseTable::ExpireLeases(
    TimePoint now, Mutation& m, const std::function<int(const ShardRecord&)>& max_attempts) {
  std::vector<ShardRecord> out;
  for (const auto& [lease_id, sid] : lease_to_shard_) {
    const ShardRecord& cur = shards_.at(sid);
    if (!cur.lease) continue;
    auto agent = agents_.find(cur.lease->agent_id);
    const bool agent_dead = agent == agents_.end() || agent->second.offline;
    if (!agent_dead && cur.lease->deadline > now) continue;
    ShardRecord s = cur;
    const std::string why = agent_dead ? "heartbeat_timeout" : "deadline";
    metrics_->LeaseExpired(ShardArch(s), why);
    if (agent != agents_.end()) agent->second.revoked.insert(lease_id);
    FailAttempt(
        s, "expired",
        util::StrCat("lease ", lease_id, " expired (", why, ") on agent ", s.lease->agent_id), now,
        m, Fault::kInfrastructure, max_attempts(s));
    if (s.state == ShardState::kQuarantined) {
      metrics_->ShardAttempts(s.spec.playbook(), s.attempts);
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<LeaseTable::Intake> LeaseTable::Admit(const v1::CompleteRequest& req) const {
  Intake in;
  if (accepted_leases_.count(req.lease_id())) {
    in.kind = Intake::Kind::kDuplicate;
    return in;
  }
  auto sid = lease_to_shard_.find(req.lease_id());
  if (sid == lease_to_shard_.end()) {
    in.metric_reason = "unknown_lease";
    in.why =
        util::StrCat("lease ", req.lease_id(), " is not current (expired, requeued or cancelled)");
    return in;
  }
  const ShardRecord& s = shards_.at(sid->second);
  if (!s.lease || s.lease->token != req.fencing_token()) {
    in.metric_reason = "fencing";
    in.why = util::StrCat("stale fencing token ", req.fencing_token(), " for shard ", s.id,
                          " (current ", s.lease ? s.lease->token : s.token, ")");
    return in;
  }
  if (s.lease->agent_id != req.agent_id()) {
    return absl::PermissionDeniedError(
        util::StrCat("agent ", req.agent_id(), " does not hold lease ", req.lease_id()));
  }
  in.kind = Intake::Kind::kAccept;
  in.shard = s;
  return in;
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

}  // namespace triage::coord
