// A lease's life in LeaseTable (docs/farm.md, "Leases, fencing and retries"): granted (with the
// request that asked for it), renewed by progress, ended by a failed attempt, a revocation or
// expiry, and a Complete's intake checked against it (Admit).

#include <algorithm>

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

}  // namespace triage::coord
