// A lease's life in LeaseTable (docs/farm.md, "Leases, fencing and retries"): granted (with the
// request that asked for it), renewed by progress, ended by a failed attempt, a revocation or
// expiry, and a Complete's intake checked against it (Admit).

#include <algorithm>
#include <set>

#include "common/util/strings.h"
#include "coordinator/scheduling/lease_table.h"

namespace triage::coord {

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

LeaseInfo LeaseTable::NewLease(const AgentRecord& agent, ShardRecord& s, TimePoint now, bool backup,
                               Mutation& m) const {
  s.token += 1;
  LeaseInfo lease;
  lease.lease_id = util::StrCat(s.id, "-l", s.token);
  lease.agent_id = agent.dims.agent_id();
  lease.session_id = agent.session_id;
  lease.token = s.token;
  lease.granted_at = now;
  lease.deadline = now + options_.lease_ttl;
  lease.backup = backup;
  AttemptRecord a;
  a.shard_id = s.id;
  a.attempt = static_cast<int>(lease.token);
  a.lease_id = lease.lease_id;
  a.agent_id = lease.agent_id;
  a.token = lease.token;
  a.granted_at = now;
  a.backup = backup;
  m.attempts.push_back(a);
  return lease;
}

ShardRecord LeaseTable::Grant(const AgentRecord& agent, const ShardRecord& shard, TimePoint now,
                              Mutation& m) const {
  ShardRecord s = shard;
  s.attempts += 1;
  s.lease = NewLease(agent, s, now, /*backup=*/false, m);
  s.state = ShardState::kLeased;
  s.last_progress_at = now;
  s.last_step.clear();
  s.last_entry.clear();
  s.log_tail.clear();
  metrics_->ShardQueueWait(ShardArch(s), s.spec.playbook(),
                           std::max(0.0, ToSeconds(now - std::max(s.enqueued_at, s.eligible_at))));
  return s;
}

void LeaseTable::RememberRequest(const std::string& lease_id, const std::string& request_id,
                                 int position) {
  if (!request_id.empty()) lease_request_[lease_id] = {request_id, position};
}

void LeaseTable::RememberPlan(const std::string& lease_id, double seconds) {
  planned_[lease_id] = seconds;
}

const ShardRecord* LeaseTable::FindStraggler(const AgentRecord& agent, TimePoint now) const {
  if (options_.backups.after <= 0 || agent.offline || agent.draining || !agent.leases.empty()) {
    return nullptr;
  }
  std::vector<RunningShard> running;
  for (const auto& [lease_id, sid] : lease_to_shard_) {
    const ShardRecord& s = shards_.at(sid);
    if (!s.lease || s.lease->lease_id != lease_id || s.backup ||
        s.lease->agent_id == agent.dims.agent_id() || held_sweeps_.count(s.sweep_id) ||
        no_backup_sweeps_.count(s.sweep_id) ||
        !AgentOffers(agent.dims, s, options_.device_probes)) {
      continue;
    }
    auto plan = planned_.find(lease_id);
    running.push_back({&s, plan != planned_.end() ? plan->second : s.expected_seconds});
  }
  return PickStraggler(running, options_.backups, now);
}

ShardRecord LeaseTable::GrantBackup(const AgentRecord& agent, const ShardRecord& shard,
                                    TimePoint now, Mutation& m) const {
  ShardRecord s = shard;
  s.backup = NewLease(agent, s, now, /*backup=*/true, m);
  metrics_->BackupLease(ShardArch(s), "granted");
  return s;
}

v1::LeaseResponse LeaseTable::GrantedBackup(const ShardRecord& s) {
  if (!s.backup) return {};
  ShardRecord as_lease = s;  // the backup, answered as any lease
  as_lease.lease = s.backup;
  return Granted({&as_lease});
}

void LeaseTable::EndOtherAttempt(ShardRecord& s, TimePoint now, Mutation& m) {
  // Per backup lease: won when its result decides the shard (also once its first lease had
  // failed and it carried the shard alone), lost when the other attempt's does.
  if (s.lease && s.lease->backup) metrics_->BackupLease(ShardArch(s), "won");
  if (!s.backup) return;
  const LeaseInfo other = *s.backup;
  m.attempts.push_back(EndedAttempt(
      s, other, now, "superseded",
      util::StrCat("lease ", s.lease ? s.lease->lease_id : "", " was accepted first")));
  if (other.backup) metrics_->BackupLease(ShardArch(s), "lost");
  if (auto agent = agents_.find(other.agent_id); agent != agents_.end()) {
    // A batch's shards share one session: stopping this one would stop them all.
    const bool batch = agent->second.leases.size() > 1;
    (batch ? agent->second.superseded : agent->second.revoked).insert(other.lease_id);
  }
  s.backup.reset();
}

std::vector<ShardRecord> LeaseTable::YieldBackups(TimePoint now, Mutation& m) {
  std::vector<ShardRecord> out;
  if (!options_.backups.yield || queue_.empty()) return out;
  std::set<std::string> promised;  // queued shards a yielding backup's agent will ask for
  for (const auto& [lease_id, sid] : lease_to_shard_) {
    const ShardRecord& cur = shards_.at(sid);
    if (!cur.backup || !cur.backup->backup || cur.backup->lease_id != lease_id) continue;
    auto agent = agents_.find(cur.backup->agent_id);
    if (agent == agents_.end() || agent->second.offline || agent->second.draining ||
        agent->second.leases.size() != 1) {
      continue;
    }
    AgentRecord free = agent->second;  // as it would ask once the backup ends
    free.leases.clear();
    const ShardRecord* work = FindMatch(free, now);
    const std::string lane = free.dims.cpu_only() ? "cpu" : free.dims.arch();
    if (work == nullptr || ShardArch(*work) != lane || promised.count(work->id)) continue;
    // An idle agent takes the work at its next Lease call: the backup runs on.
    const bool idle_taker = std::any_of(agents_.begin(), agents_.end(), [&](const auto& a) {
      return a.first != free.dims.agent_id() && AgentStateName(a.second) == "idle" &&
             AgentOffers(a.second.dims, *work, options_.device_probes);
    });
    if (idle_taker) continue;
    promised.insert(work->id);
    ShardRecord s = cur;
    m.attempts.push_back(EndedAttempt(
        s, *s.backup, now, "yielded",
        util::StrCat("its agent ", s.backup->agent_id, " is needed for queued shard ", work->id)));
    metrics_->BackupLease(ShardArch(s), "yielded");
    agent->second.revoked.insert(s.backup->lease_id);
    s.backup.reset();
    out.push_back(std::move(s));
  }
  return out;
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
  auto agent = agents_.find(req.agent_id());
  if (agent != agents_.end() && agent->second.superseded.count(req.lease_id())) {
    return resp;  // decided by another attempt; its batch runs on
  }
  auto sid = lease_to_shard_.find(req.lease_id());
  if (sid == lease_to_shard_.end()) {
    resp.set_revoked(true);
    return resp;
  }
  const ShardRecord& current = shards_.at(sid->second);
  const LeaseInfo* held = LeaseNamed(current, req.lease_id());
  if (held == nullptr || held->token != req.fencing_token() || held->agent_id != req.agent_id()) {
    resp.set_revoked(true);
    return resp;
  }
  // In memory only (progress is not persisted).
  ShardRecord s = current;
  LeaseNamed(s, req.lease_id())->deadline = now + options_.lease_ttl;
  s.last_progress_at = now;
  s.last_step = req.step();
  s.last_entry = req.entry();
  if (req.log_tail_size() > 0) s.log_tail.assign(req.log_tail().begin(), req.log_tail().end());
  if (s.state == ShardState::kLeased) s.state = ShardState::kRunning;
  Put(std::move(s));
  if (agent != agents_.end()) agent->second.last_heartbeat = now;
  return resp;
}

AttemptRecord LeaseTable::EndedAttempt(const ShardRecord& s, TimePoint now, std::string outcome,
                                       std::string reason) {
  return EndedAttempt(s, *s.lease, now, std::move(outcome), std::move(reason));
}

AttemptRecord LeaseTable::EndedAttempt(const ShardRecord& s, const LeaseInfo& lease, TimePoint now,
                                       std::string outcome, std::string reason) {
  AttemptRecord a;
  a.shard_id = s.id;
  a.attempt = static_cast<int>(lease.token);
  a.lease_id = lease.lease_id;
  a.agent_id = lease.agent_id;
  a.token = lease.token;
  a.granted_at = lease.granted_at;
  a.ended_at = now;
  a.outcome = std::move(outcome);
  a.reason = std::move(reason);
  a.backup = lease.backup;
  return a;
}

void LeaseTable::FailAttempt(ShardRecord& s, const std::string& outcome, const std::string& reason,
                             TimePoint now, Mutation& m, Fault fault, int max_attempts) const {
  if (s.lease) m.attempts.push_back(EndedAttempt(s, now, outcome, reason));
  s.lease.reset();
  s.last_error = reason;
  if (s.backup) {
    // The other attempt runs on: it carries the shard alone, nothing is requeued.
    s.lease = std::move(s.backup);
    s.backup.reset();
    return;
  }
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
  for (std::optional<LeaseInfo>* l : {&s.lease, &s.backup}) {
    if (!*l) continue;
    m.attempts.push_back(EndedAttempt(s, **l, now, "revoked", why));
    auto agent = agents_.find((*l)->agent_id);
    if (agent != agents_.end()) agent->second.revoked.insert((*l)->lease_id);
    l->reset();
  }
}

std::vector<ShardRecord> LeaseTable::ExpireLeases(
    TimePoint now, Mutation& m, const std::function<int(const ShardRecord&)>& max_attempts) {
  std::vector<ShardRecord> out;
  std::set<std::string> seen;  // a shard with a backup is indexed under both leases
  // Why the lease is lost ("" while it lives); its agent is told to stop it.
  const auto lost = [&](const LeaseInfo& l, const ShardRecord& s) -> std::string {
    auto agent = agents_.find(l.agent_id);
    const bool agent_dead = agent == agents_.end() || agent->second.offline;
    if (!agent_dead && l.deadline > now) return "";
    const std::string why = agent_dead ? "heartbeat_timeout" : "deadline";
    metrics_->LeaseExpired(ShardArch(s), why);
    if (agent != agents_.end()) agent->second.revoked.insert(l.lease_id);
    return util::StrCat("lease ", l.lease_id, " expired (", why, ") on agent ", l.agent_id);
  };
  for (const auto& [lease_id, sid] : lease_to_shard_) {
    if (!seen.insert(sid).second) continue;
    const ShardRecord& cur = shards_.at(sid);
    const std::string backup_lost = cur.backup ? lost(*cur.backup, cur) : "";
    const std::string lease_lost = cur.lease ? lost(*cur.lease, cur) : "";
    if (backup_lost.empty() && lease_lost.empty()) continue;
    ShardRecord s = cur;
    if (!backup_lost.empty()) {
      m.attempts.push_back(EndedAttempt(s, *s.backup, now, "expired", backup_lost));
      s.backup.reset();
    }
    if (!lease_lost.empty()) {
      FailAttempt(s, "expired", lease_lost, now, m, Fault::kInfrastructure, max_attempts(s));
      if (s.state == ShardState::kQuarantined) {
        metrics_->ShardAttempts(s.spec.playbook(), s.attempts);
      }
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
    in.why = util::StrCat(
        "lease ", req.lease_id(),
        " is not current (expired, requeued, cancelled, or its shard was decided by another "
        "attempt)");
    return in;
  }
  const ShardRecord& s = shards_.at(sid->second);
  const LeaseInfo* held = LeaseNamed(s, req.lease_id());
  if (held == nullptr || held->token != req.fencing_token()) {
    in.metric_reason = "fencing";
    in.why = util::StrCat("stale fencing token ", req.fencing_token(), " for shard ", s.id,
                          " (current ", held != nullptr ? held->token : s.token, ")");
    return in;
  }
  if (held->agent_id != req.agent_id()) {
    return absl::PermissionDeniedError(
        util::StrCat("agent ", req.agent_id(), " does not hold lease ", req.lease_id()));
  }
  in.kind = Intake::Kind::kAccept;
  in.shard = s;
  // The result's lease becomes the shard's lease; the other attempt, if any, its backup.
  if (in.shard.backup && in.shard.backup->lease_id == req.lease_id()) {
    std::swap(in.shard.lease, in.shard.backup);
  }
  return in;
}

}  // namespace triage::coord
