#include "coordinator/core/coordinator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <future>
#include <random>

#include "common/classify/classify.h"
#include "common/command/command_params.h"
#include "common/inventory/schema.h"
#include "common/util/log.h"
#include "common/util/log_context.h"
#include "common/util/strings.h"
#include "coordinator/core/outcome_counts.h"
#include "coordinator/core/planner.h"
#include "coordinator/core/result_check.h"
#include "coordinator/core/waves.h"
#include "nlohmann/json.hpp"

namespace triage::coord {
namespace {

constexpr std::string_view kCpuArch = "cpu";

// A log line about one shard attempt (docs/observability.md, "Logs"), written by the deferred
// work once the operation's writes are durable.
std::function<void()> AttemptLog(spdlog::level::level_enum level, std::string_view sweep_id,
                                 std::string_view shard_id, std::string_view lease_id,
                                 std::string_view what) {
  if (!spdlog::should_log(level)) return [] {};  // not built at all (e.g. farm_bench at err)
  return [level, line = util::StrCat(util::ShardLogContext(sweep_id, shard_id, lease_id), " ",
                                     what)] { spdlog::log(level, "{}", line); };
}

template <typename R>
bool ContainsProto(const R& repeated, std::string_view s) {
  for (const auto& x : repeated) {
    if (x == s) return true;
  }
  return false;
}

std::map<std::string, double> ParseDurations(const std::string& json, std::string* error) {
  std::map<std::string, double> out;
  if (json.empty()) return out;
  try {
    auto j = nlohmann::json::parse(json);
    if (!j.is_object()) {
      *error = "durations: expected a JSON object of node id -> seconds";
      return out;
    }
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.value().is_number()) out[it.key()] = it.value().get<double>();
    }
  } catch (const nlohmann::json::exception& e) {
    *error = util::StrCat("durations: invalid JSON: ", e.what());
  }
  return out;
}

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options, Store* store, Clock* clock, SweepReader reader,
                         CoordinatorMetrics* metrics)
    : options_(std::move(options)),
      store_(store),
      clock_(clock),
      reader_(std::move(reader)),
      metrics_(metrics != nullptr ? metrics : &default_metrics_),
      commits_(
          store, [this](const absl::Status& st) { OnFlushFailure(st); },
          [this](double seconds, std::uint64_t mutations, bool ok) {
            healthy_.store(ok);
            metrics_->StoreCommit(seconds, static_cast<int>(mutations), ok);
          }) {}

Coordinator::~Coordinator() {
  commits_.Stop();  // its threads run callbacks that use the members below
  std::list<Waiter> waiters;
  {
    std::lock_guard lock(mu_);
    waiters.swap(waiters_);
  }
  for (auto& w : waiters) w.done(absl::UnavailableError("coordinator shutting down"));
}

void Coordinator::StartCommitter() { commits_.Start(); }

void Coordinator::SetFinishHook(FinishHook hook) {
  std::lock_guard lock(mu_);
  finish_hook_ = std::move(hook);
}

bool Coordinator::healthy() const { return healthy_.load(); }

void Coordinator::RecordFailure(const absl::Status& status) {
  if (!status.ok()) healthy_ = false;
}

// ---------------------------------------------------------------------------------------------
// Helpers

Coordinator::QueueKey Coordinator::KeyOf(const ShardRecord& s) {
  return {-s.priority, -s.expected_seconds, s.seq, s.id};
}

static_assert(static_cast<int>(ShardState::kCancelled) == 7, "SweepRt::by_state has 8 slots");

std::string Coordinator::ShardArch(const ShardRecord& s) {
  return s.spec.arch().empty() ? std::string(kCpuArch) : s.spec.arch();
}

std::string Coordinator::AgentStateName(const AgentRecord& a) const {
  if (a.offline) return "offline";
  if (a.draining) return "draining";
  return a.leases.empty() ? "idle" : "busy";
}

std::string Coordinator::EntryStateName(const EntryRt& e) const {
  if (e.shards > 0 && e.terminal == e.shards) return "done";
  return e.active > 0 ? "running" : "queued";
}

int Coordinator::MaxAttempts(const ShardRecord& s) const {
  auto it = sweeps_.find(s.sweep_id);
  if (it != sweeps_.end() && it->second.rec.request.max_attempts() > 0) {
    return it->second.rec.request.max_attempts();
  }
  return options_.default_max_attempts;
}

AttemptRecord Coordinator::EndedAttempt(const ShardRecord& s, TimePoint now, std::string outcome,
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

std::string Coordinator::NewSessionId() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return util::StrCat("sess-", next_session_++, "-", util::Hex(rng(), 16));
}

void Coordinator::AuditLocked(Mutation& m, const Caller& caller, std::string action,
                              std::string target, std::string reason) {
  m.audit.push_back(AuditRecord{clock_->Now(), caller.name, caller.role, std::move(action),
                                std::move(target), std::move(reason)});
}

bool Coordinator::Matches(const AgentRecord& agent, const ShardRecord& shard, TimePoint now) const {
  if (shard.state != ShardState::kQueued || shard.eligible_at > now) return false;
  return AgentOffers(agent.dims, shard.spec.executor(), shard.spec.playbook(), shard.archs,
                     shard.cpu_ok);
}

ShardRecord* Coordinator::FindMatch(const AgentRecord& agent, TimePoint now) {
  if (agent.offline || agent.draining) return nullptr;
  for (const auto& key : queue_) {
    ShardRecord& s = shards_.at(std::get<3>(key));
    if (Matches(agent, s, now)) return &s;
  }
  return nullptr;
}

void Coordinator::CommitShard(ShardRecord updated) {
  auto it = shards_.find(updated.id);
  ShardRecord* old = it == shards_.end() ? nullptr : &it->second;
  const std::string arch = ShardArch(updated);
  const ShardState old_state = old != nullptr ? old->state : updated.state;
  if (old != nullptr) {
    if (old->state == ShardState::kQueued) queue_.erase(KeyOf(*old));
    if (old->state == ShardState::kQueued || old->state == ShardState::kWaiting) {
      demand_.Add(old->sweep_id, Requirement::Of(*old), old->state == ShardState::kWaiting, -1);
    }
    if (old->lease && (!updated.lease || updated.lease->lease_id != old->lease->lease_id)) {
      lease_to_shard_.erase(old->lease->lease_id);
      lease_request_.erase(old->lease->lease_id);
      auto agent = agents_.find(old->lease->agent_id);
      if (agent != agents_.end()) {
        std::string before = AgentStateName(agent->second);
        agent->second.leases.erase(old->lease->lease_id);
        std::string after = AgentStateName(agent->second);
        if (before != after) metrics_->AgentStateChanged(agent->second.dims.arch(), before, after);
      }
    }
  }
  if (old == nullptr) {
    metrics_->ShardStateChanged(arch, "", ShardStateName(updated.state));
  } else if (old_state != updated.state) {
    metrics_->ShardStateChanged(arch, ShardStateName(old_state), ShardStateName(updated.state));
  }
  // Entry accounting.
  auto sweep = sweeps_.find(updated.sweep_id);
  if (sweep != sweeps_.end()) {
    auto active = [](ShardState s) {
      return s == ShardState::kLeased || s == ShardState::kRunning;
    };
    const int d_terminal =
        (IsTerminal(updated.state) ? 1 : 0) - (old != nullptr && IsTerminal(old_state) ? 1 : 0);
    const int d_active =
        (active(updated.state) ? 1 : 0) - (old != nullptr && active(old_state) ? 1 : 0);
    // Entries a later phase no longer carries (the earlier phase settled them) are done as far
    // as this shard is concerned.
    if (old != nullptr && !IsTerminal(old_state) &&
        old->spec.entries_size() > updated.spec.entries_size()) {
      std::set<std::string> kept;
      for (const auto& e : updated.spec.entries()) kept.insert(EntryKey(e));
      for (const auto& e : old->spec.entries()) {
        if (kept.count(EntryKey(e))) continue;
        EntryRt& rt = sweep->second.entries[EntryKey(e)];
        std::string before = EntryStateName(rt);
        rt.terminal += 1;
        std::string after = EntryStateName(rt);
        if (before != after) metrics_->EntryStateChanged(rt.playbook, before, after);
      }
    }
    if (d_terminal != 0 || d_active != 0 || old == nullptr) {
      for (const auto& e : updated.spec.entries()) {
        EntryRt& rt = sweep->second.entries[EntryKey(e)];
        std::string before = old == nullptr ? "" : EntryStateName(rt);
        if (old == nullptr) {
          rt.playbook = updated.spec.playbook();
          ++rt.shards;
        }
        rt.terminal += d_terminal;
        rt.active += d_active;
        std::string after = EntryStateName(rt);
        if (before != after) metrics_->EntryStateChanged(rt.playbook, before, after);
      }
    }
    if (old == nullptr) sweep->second.shard_ids.push_back(updated.id);
    const bool was_open = old != nullptr && !IsTerminal(old_state);
    const bool is_open = !IsTerminal(updated.state);
    sweep->second.unfinished += (is_open ? 1 : 0) - (was_open ? 1 : 0);
    sweep->second.lanes[arch].open += (is_open ? 1 : 0) - (was_open ? 1 : 0);
    if (old != nullptr) sweep->second.by_state[static_cast<int>(old_state)] -= 1;
    sweep->second.by_state[static_cast<int>(updated.state)] += 1;
  }
  if (old == nullptr && !updated.depends_on.empty()) {
    dependents_[updated.depends_on].push_back(updated.id);
  }
  if (updated.state == ShardState::kQueued) queue_.insert(KeyOf(updated));
  if (updated.state == ShardState::kQueued || updated.state == ShardState::kWaiting) {
    demand_.Add(updated.sweep_id, Requirement::Of(updated), updated.state == ShardState::kWaiting,
                +1);
  }
  if (updated.lease &&
      (old == nullptr || !old->lease || old->lease->lease_id != updated.lease->lease_id)) {
    lease_to_shard_[updated.lease->lease_id] = updated.id;
    auto agent = agents_.find(updated.lease->agent_id);
    if (agent != agents_.end()) {
      std::string before = AgentStateName(agent->second);
      agent->second.leases.insert(updated.lease->lease_id);
      std::string after = AgentStateName(agent->second);
      if (before != after) metrics_->AgentStateChanged(agent->second.dims.arch(), before, after);
    }
  }
  shards_[updated.id] = std::move(updated);
}

void Coordinator::CommitResultLocked(const ResultRecord& r) {
  accepted_leases_.insert(r.lease_id);
  auto sw = sweeps_.find(r.sweep_id);
  if (sw == sweeps_.end()) return;
  for (const auto& o : r.result.entries()) {
    auto e = sw->second.entries.find(o.file() + "\n" + o.key());
    if (e != sw->second.entries.end()) {
      e->second.decided[o.arch()] = OutcomeLabel(o);
      e->second.review |= o.review_size() > 0;
    }
  }
  auto shard = shards_.find(r.shard_id);
  if (shard != shards_.end()) {
    LaneProgress& lane = sw->second.lanes[ShardArch(shard->second)];
    const TimePoint started =
        r.accepted_at - std::chrono::duration_cast<Duration>(
                            std::chrono::duration<double>(r.result.duration_seconds()));
    if (lane.results == 0 || started < lane.first_start) lane.first_start = started;
    ++lane.results;
  }
  sw->second.results.push_back(r);
}

void Coordinator::CommitAgent(AgentRecord updated) {
  auto it = agents_.find(updated.dims.agent_id());
  if (it == agents_.end()) {
    metrics_->AgentStateChanged(updated.dims.arch(), "", AgentStateName(updated));
    agents_[updated.dims.agent_id()] = std::move(updated);
    return;
  }
  // Lease membership is owned by CommitShard; keep it.
  updated.leases = it->second.leases;
  std::string before = AgentStateName(it->second);
  std::string after = AgentStateName(updated);
  if (before != after || it->second.dims.arch() != updated.dims.arch()) {
    metrics_->AgentStateChanged(it->second.dims.arch(), before, "");
    metrics_->AgentStateChanged(updated.dims.arch(), "", after);
  }
  it->second = std::move(updated);
}

absl::Status Coordinator::ApplyAndCommit(Mutation& m, std::vector<ShardRecord>& shards,
                                         std::vector<AgentRecord>& agents, Deferred& after) {
  m.shards.clear();
  for (const auto& s : shards) m.shards.push_back(&s);
  m.agents.clear();
  for (const auto& a : agents) m.agents.push_back(&a);
  auto ticket = store_->Stage(m);
  if (!ticket.ok()) {
    RecordFailure(ticket.status());
    return absl::UnavailableError(util::StrCat("store: ", util::MessageOf(ticket.status())));
  }
  after.ticket = last_staged_ = *ticket;
  if (m.result) CommitResultLocked(*m.result);
  std::set<std::string> touched_sweeps;
  for (auto& a : agents) CommitAgent(std::move(a));
  for (auto& s : shards) {
    touched_sweeps.insert(s.sweep_id);
    CommitShard(std::move(s));
  }
  for (const auto& id : touched_sweeps) MaybeFinishSweepLocked(id, after);
  ServeWaitersLocked(after);
  return absl::OkStatus();
}

void Coordinator::FailAttempt(ShardRecord& s, const std::string& outcome, const std::string& reason,
                              TimePoint now, Mutation& m, Fault fault) {
  if (s.lease) {
    m.attempts.push_back(EndedAttempt(s, now, outcome, reason));
  }
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
  if (s.attempts >= MaxAttempts(s)) {
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

// ---------------------------------------------------------------------------------------------
// AgentService

absl::StatusOr<v1::RegisterResponse> Coordinator::Register(const v1::RegisterRequest& req) {
  const auto& dims = req.dimensions();
  if (dims.agent_id().empty()) return absl::InvalidArgumentError("agent_id is required");
  if (!dims.cpu_only() && dims.arch().empty()) {
    return absl::InvalidArgumentError("arch is required for a device agent");
  }
  Deferred after;
  v1::RegisterResponse resp;
  {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_->Now();
    AgentRecord agent;
    std::vector<ShardRecord> shards;
    Mutation m;
    m.name = "RegisterAgent";
    auto it = agents_.find(dims.agent_id());
    if (it != agents_.end()) agent = it->second;
    const bool resumed = it != agents_.end() && !req.resume_session_id().empty() &&
                         req.resume_session_id() == it->second.session_id;
    agent.dims = dims;
    if (agent.dims.cpu_only() && agent.dims.arch().empty())
      agent.dims.set_arch(std::string(kCpuArch));
    if (!resumed) {
      agent.session_id = NewSessionId();
      agent.registered_at = now;
      // A restarted agent: its old leases are fenced (the shards go back to the queue), but
      // for those whose finished results it holds and is about to re-send.
      if (it != agents_.end()) {
        const std::set<std::string> held(req.held_lease_ids().begin(), req.held_lease_ids().end());
        for (const auto& lease_id : it->second.leases) {
          auto sid = lease_to_shard_.find(lease_id);
          if (sid == lease_to_shard_.end()) continue;
          ShardRecord s = shards_.at(sid->second);
          if (held.count(lease_id) && s.lease) {
            // Kept: the lease's life starts again so that the re-sent result arrives in time.
            shards_.at(sid->second).lease->deadline = now + options_.lease_ttl;
            continue;
          }
          metrics_->LeaseExpired(ShardArch(s), "agent_restart");
          FailAttempt(s, "expired", "agent re-registered (restart): lease fenced", now, m,
                      Fault::kInfrastructure);
          shards.push_back(std::move(s));
        }
        agent.revoked.clear();
      }
    }
    agent.last_heartbeat = now;
    agent.offline = false;
    std::vector<AgentRecord> agents{agent};
    if (auto st = ApplyAndCommit(m, shards, agents, after); !st.ok()) return st;
    resp.set_session_id(agent.session_id);
    resp.set_heartbeat_interval_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.heartbeat_interval).count());
    resp.set_lease_wait_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.lease_wait_limit).count());
    resp.set_resumed(resumed);
  }
  if (auto st = SettleAndWait(after); !st.ok()) return st;
  return resp;
}

absl::StatusOr<v1::HeartbeatResponse> Coordinator::Heartbeat(const v1::HeartbeatRequest& req) {
  Deferred after;
  v1::HeartbeatResponse resp;
  {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_->Now();
    auto it = agents_.find(req.agent_id());
    if (it == agents_.end() || it->second.session_id != req.session_id()) {
      resp.set_reregister(true);
      return resp;
    }
    AgentRecord& agent = it->second;
    metrics_->HeartbeatAge(agent.dims.arch(), ToSeconds(now - agent.last_heartbeat));
    if (agent.offline) {
      std::string before = AgentStateName(agent);
      agent.offline = false;
      metrics_->AgentStateChanged(agent.dims.arch(), before, AgentStateName(agent));
    }
    agent.last_heartbeat = now;
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
      if (std::find(req.lease_ids().begin(), req.lease_ids().end(), lease_id) !=
              req.lease_ids().end() &&
          std::find(resp.revoked_lease_ids().begin(), resp.revoked_lease_ids().end(), lease_id) ==
              resp.revoked_lease_ids().end()) {
        resp.add_revoked_lease_ids(lease_id);
      }
    }
    // Revocations the agent no longer mentions have been acted on.
    for (auto r = agent.revoked.begin(); r != agent.revoked.end();) {
      if (std::find(req.lease_ids().begin(), req.lease_ids().end(), *r) == req.lease_ids().end()) {
        r = agent.revoked.erase(r);
      } else {
        ++r;
      }
    }
    resp.set_draining(agent.draining);
    ServeWaitersLocked(after);
  }
  Settle(after);
  return resp;
}

absl::StatusOr<v1::LeaseResponse> Coordinator::GrantLocked(AgentRecord& agent, ShardRecord& shard,
                                                           const std::string& request_id,
                                                           Deferred& after) {
  const TimePoint now = clock_->Now();
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
  Mutation m;
  m.name = "GrantLease";
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
  const std::string id = s.id;
  const std::string sweep_id = s.sweep_id;
  std::vector<ShardRecord> shards;
  shards.push_back(std::move(s));
  std::vector<AgentRecord> agents;
  if (auto st = ApplyAndCommit(m, shards, agents, after); !st.ok()) return st;
  if (!request_id.empty()) lease_request_[lease.lease_id] = request_id;
  const ShardRecord& granted = shards_.at(id);
  v1::LeaseResponse resp;
  resp.set_granted(true);
  resp.set_lease_id(lease.lease_id);
  resp.set_fencing_token(lease.token);
  resp.set_deadline_unix_ms(ToUnixMillis(lease.deadline));
  *resp.mutable_shard() = granted.spec;
  EmitLocked(sweep_id, util::StrCat("shard ", id, " leased by ", lease.agent_id), after);
  after.push_back(AttemptLog(spdlog::level::info, sweep_id, id, lease.lease_id,
                             util::StrCat("leased by ", lease.agent_id)));
  return resp;
}

std::int64_t Coordinator::Lease(const v1::LeaseRequest& req, LeaseCallback done) {
  Deferred after;
  std::int64_t wait_id = 0;
  {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_->Now();
    auto it = agents_.find(req.agent_id());
    v1::LeaseResponse resp;
    if (it == agents_.end() || it->second.session_id != req.session_id()) {
      resp.set_reregister(true);
      after.Answer(done, resp);
    } else {
      AgentRecord& agent = it->second;
      agent.last_heartbeat = now;
      if (agent.offline) {
        std::string before = AgentStateName(agent);
        agent.offline = false;
        metrics_->AgentStateChanged(agent.dims.arch(), before, AgentStateName(agent));
      }
      // A retried Lease (same request id) gets the same grant back.
      const std::string* same = nullptr;
      if (!req.request_id().empty()) {
        for (const auto& lease_id : agent.leases) {
          auto r = lease_request_.find(lease_id);
          if (r != lease_request_.end() && r->second == req.request_id()) same = &r->first;
        }
      }
      if (same != nullptr) {
        const ShardRecord& s = shards_.at(lease_to_shard_.at(*same));
        resp.set_granted(true);
        resp.set_lease_id(s.lease->lease_id);
        resp.set_fencing_token(s.lease->token);
        resp.set_deadline_unix_ms(ToUnixMillis(s.lease->deadline));
        *resp.mutable_shard() = s.spec;
        after.Answer(done, resp);
      } else if (agent.draining) {
        resp.set_draining(true);
        after.Answer(done, resp);
      } else if (ShardRecord* shard = FindMatch(agent, now)) {
        auto granted = GrantLocked(agent, *shard, req.request_id(), after);
        after.Answer(done, std::move(granted));
      } else if (req.wait_ms() <= 0) {
        after.Answer(done, resp);
      } else {
        Duration wait =
            std::min<Duration>(std::chrono::milliseconds(req.wait_ms()), options_.lease_wait_limit);
        wait_id = next_wait_id_++;
        waiters_.push_back(Waiter{wait_id, req.agent_id(), req.session_id(), req.request_id(),
                                  now + wait, std::move(done)});
      }
    }
    // A retried grant, or an answer that reflects writes still being committed, is sent once
    // they are durable.
    after.ticket = last_staged_;
  }
  Settle(after);
  return wait_id;
}

void Coordinator::CancelLease(std::int64_t wait_id) {
  LeaseCallback done;
  {
    std::lock_guard lock(mu_);
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (it->id == wait_id) {
        done = std::move(it->done);
        waiters_.erase(it);
        break;
      }
    }
  }
  if (done) done(absl::CancelledError("lease wait cancelled"));
}

void Coordinator::ServeWaitersLocked(Deferred& after) {
  // A grant commits through ApplyAndCommit, which calls back here: the outer loop serves.
  if (serving_waiters_ || waiters_.empty() || queue_.empty()) return;
  serving_waiters_ = true;
  const TimePoint now = clock_->Now();
  for (auto it = waiters_.begin(); it != waiters_.end() && !queue_.empty();) {
    auto agent = agents_.find(it->agent_id);
    if (agent == agents_.end() || agent->second.session_id != it->session_id) {
      v1::LeaseResponse resp;
      resp.set_reregister(true);
      after.Answer(it->done, resp);
      it = waiters_.erase(it);
      continue;
    }
    ShardRecord* shard = FindMatch(agent->second, now);
    if (shard == nullptr) {
      ++it;
      continue;
    }
    auto granted = GrantLocked(agent->second, *shard, it->request_id, after);
    after.Answer(it->done, std::move(granted));
    it = waiters_.erase(it);
  }
  serving_waiters_ = false;
}

absl::StatusOr<v1::ProgressResponse> Coordinator::ReportProgress(const v1::ProgressRequest& req) {
  Deferred after;
  v1::ProgressResponse resp;
  {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_->Now();
    auto sid = lease_to_shard_.find(req.lease_id());
    if (sid == lease_to_shard_.end()) {
      resp.set_revoked(true);
      return resp;
    }
    ShardRecord& s = shards_.at(sid->second);
    if (!s.lease || s.lease->token != req.fencing_token() || s.lease->agent_id != req.agent_id()) {
      resp.set_revoked(true);
      return resp;
    }
    s.lease->deadline = now + options_.lease_ttl;
    s.last_progress_at = now;
    s.last_step = req.step();
    s.last_entry = req.entry();
    if (req.log_tail_size() > 0) s.log_tail.assign(req.log_tail().begin(), req.log_tail().end());
    if (s.state == ShardState::kLeased) {
      // In memory only (progress is not persisted): keep the sweep's per-state counts in step.
      metrics_->ShardStateChanged(ShardArch(s), "leased", "running");
      s.state = ShardState::kRunning;
      if (auto sw = sweeps_.find(s.sweep_id); sw != sweeps_.end()) {
        sw->second.by_state[static_cast<int>(ShardState::kLeased)] -= 1;
        sw->second.by_state[static_cast<int>(ShardState::kRunning)] += 1;
      }
    }
    auto agent = agents_.find(req.agent_id());
    if (agent != agents_.end()) agent->second.last_heartbeat = now;
    EmitLocked(s.sweep_id,
               util::StrCat("shard ", s.id, ": ", req.step(),
                            req.entry().empty() ? "" : util::StrCat(" ", req.entry())),
               after);
  }
  Settle(after);
  return resp;
}

absl::Status Coordinator::CheckResultLocked(const ShardRecord& shard,
                                            const v1::ShardResult& result) const {
  return CheckResultOwnership(shard.spec, result);
}

absl::StatusOr<v1::CompleteResponse> Coordinator::Complete(const v1::CompleteRequest& req) {
  std::promise<absl::StatusOr<v1::CompleteResponse>> answer;
  auto got = answer.get_future();
  Complete(req,
           [&answer](absl::StatusOr<v1::CompleteResponse> r) { answer.set_value(std::move(r)); });
  return got.get();
}

void Coordinator::Complete(const v1::CompleteRequest& req, CompleteCallback done) {
  Deferred after;
  absl::StatusOr<v1::CompleteResponse> r;
  {
    std::lock_guard lock(mu_);
    r = CompleteLocked(req, after);
    // Answered once everything staged so far is durable: also a duplicate, whose first copy
    // may still be in the commit under way.
    after.ticket = last_staged_;
  }
  after.Answer(done, std::move(r));
  Settle(after);
}

absl::StatusOr<v1::CompleteResponse> Coordinator::CompleteLocked(const v1::CompleteRequest& req,
                                                                 Deferred& after) {
  v1::CompleteResponse resp;
  const TimePoint now = clock_->Now();
  if (accepted_leases_.count(req.lease_id())) {
    resp.set_accepted(true);
    resp.set_duplicate(true);
    return resp;
  }
  auto reject = [&](std::string_view metric_reason, std::string why) {
    metrics_->StaleResultRejected(metric_reason);
    resp.set_accepted(false);
    resp.set_rejected_reason(std::move(why));
    return resp;
  };
  auto sid = lease_to_shard_.find(req.lease_id());
  if (sid == lease_to_shard_.end()) {
    return reject("unknown_lease", util::StrCat("lease ", req.lease_id(),
                                                " is not current (expired, requeued or "
                                                "cancelled)"));
  }
  ShardRecord s = shards_.at(sid->second);
  if (!s.lease || s.lease->token != req.fencing_token()) {
    return reject("fencing",
                  util::StrCat("stale fencing token ", req.fencing_token(), " for shard ", s.id,
                               " (current ", s.lease ? s.lease->token : s.token, ")"));
  }
  if (s.lease->agent_id != req.agent_id()) {
    return absl::PermissionDeniedError(
        util::StrCat("agent ", req.agent_id(), " does not hold lease ", req.lease_id()));
  }
  Mutation m;
  std::vector<ShardRecord> shards;
  const LeaseInfo lease = *s.lease;
  const std::string arch = ShardArch(s);
  metrics_->ShardRunTime(arch, s.spec.playbook(), ToSeconds(now - lease.granted_at));
  if (absl::Status owned = CheckResultLocked(s, req.result()); !owned.ok()) {
    m.name = "RejectResult";
    FailAttempt(s, "rejected", util::MessageOf(owned), now, m, Fault::kWork);
    metrics_->ShardCompleted(arch, s.spec.playbook(), "rejected");
    std::string why = util::MessageOf(owned);
    const bool ended = s.state != ShardState::kQueued;
    shards.push_back(s);
    if (ended && s.state == ShardState::kQuarantined)
      metrics_->ShardAttempts(s.spec.playbook(), s.attempts);
    std::vector<AgentRecord> agents;
    if (auto st = ApplyAndCommit(m, shards, agents, after); !st.ok()) return st;
    EmitLocked(s.sweep_id, util::StrCat("shard ", s.id, " result rejected: ", why), after);
    after.push_back(AttemptLog(spdlog::level::warn, s.sweep_id, s.id, lease.lease_id,
                               util::StrCat("result rejected: ", why)));
    metrics_->StaleResultRejected("disallowed_file");
    resp.set_accepted(false);
    resp.set_rejected_reason(why);
  } else if (req.result().status() != v1::ShardResult::SUCCEEDED) {
    m.name = "FailAttempt";
    std::string why =
        req.result().error().empty() ? "the agent reported a failure" : req.result().error();
    FailAttempt(s, "failed", why, now, m, Fault::kWork);
    metrics_->ShardCompleted(arch, s.spec.playbook(), "failed");
    if (s.state == ShardState::kQuarantined) metrics_->ShardAttempts(s.spec.playbook(), s.attempts);
    shards.push_back(s);
    std::vector<AgentRecord> agents;
    if (auto st = ApplyAndCommit(m, shards, agents, after); !st.ok()) return st;
    EmitLocked(s.sweep_id, util::StrCat("shard ", s.id, " attempt failed: ", why), after);
    after.push_back(AttemptLog(spdlog::level::warn, s.sweep_id, s.id, lease.lease_id,
                               util::StrCat("attempt failed: ", why)));
    resp.set_accepted(true);
  } else {
    m.name = "RecordResult";
    AttemptRecord a;
    a.shard_id = s.id;
    a.attempt = static_cast<int>(lease.token);
    a.lease_id = lease.lease_id;
    a.agent_id = lease.agent_id;
    a.token = lease.token;
    a.granted_at = lease.granted_at;
    a.ended_at = now;
    a.outcome = "succeeded";
    m.attempts.push_back(a);
    ResultRecord r;
    r.lease_id = lease.lease_id;
    r.shard_id = s.id;
    r.sweep_id = s.sweep_id;
    r.token = lease.token;
    r.accepted_at = now;
    r.result = req.result();
    m.result = r;
    s.lease.reset();
    s.state = ShardState::kSucceeded;
    s.last_error.clear();
    std::vector<ShardRecord> dependents;
    CascadeLocked(s, &req.result(), dependents);
    const std::string id = s.id;
    const std::string sweep_id = s.sweep_id;
    const std::string playbook = s.spec.playbook();
    const int attempts = s.attempts;
    shards.push_back(std::move(s));
    for (auto& d : dependents) shards.push_back(std::move(d));
    for (const auto& d : shards) {
      if (d.id != id && d.spec.SerializeAsString() != shards_.at(d.id).spec.SerializeAsString()) {
        m.shard_specs.push_back(&d);
      }
    }
    std::vector<AgentRecord> agents;
    if (auto st = ApplyAndCommit(m, shards, agents, after); !st.ok()) return st;
    metrics_->ShardCompleted(arch, playbook, "succeeded");
    metrics_->ShardAttempts(playbook, attempts);
    const auto& entries = sweeps_.at(sweep_id).entries;
    for (const auto& o : req.result().entries()) {
      auto e = entries.find(o.file() + "\n" + o.key());
      if (e != entries.end())
        metrics_->EntryDecided(e->second.playbook, OutcomeLabel(o), o.stage());
    }
    EmitLocked(sweep_id, util::StrCat("shard ", id, " completed by ", lease.agent_id), after);
    after.push_back(AttemptLog(spdlog::level::info, sweep_id, id, lease.lease_id,
                               util::StrCat("completed by ", lease.agent_id)));
    resp.set_accepted(true);
  }
  return resp;
}

void Coordinator::CascadeLocked(const ShardRecord& ended, const v1::ShardResult* result,
                                std::vector<ShardRecord>& out) {
  auto deps = dependents_.find(ended.id);
  if (deps == dependents_.end()) return;
  for (const auto& id : deps->second) {
    const ShardRecord& d = shards_.at(id);
    if (d.state != ShardState::kWaiting) continue;
    ShardRecord u = d;
    const TimePoint now = clock_->Now();
    if (ended.state == ShardState::kSucceeded && result != nullptr) {
      // Only entries the earlier phase left for verification go on.
      std::set<std::string> keep;
      for (const auto& o : result->entries()) {
        if (NeedsVerification(o)) keep.insert(o.file() + "\n" + o.key());
      }
      if (result->entries_size() > 0) {
        auto* entries = u.spec.mutable_entries();
        for (int i = entries->size() - 1; i >= 0; --i) {
          if (!keep.count(entries->Get(i).file() + "\n" + entries->Get(i).key())) {
            entries->DeleteSubrange(i, 1);
          }
        }
        if (entries->empty()) {
          u.state = ShardState::kSucceeded;
          u.last_error = "nothing left to verify";
          out.push_back(u);
          continue;
        }
      }
      for (const auto& fe : result->file_edits()) *u.spec.add_pre_apply() = fe;
      for (const auto& op : result->registry_ops()) *u.spec.add_pre_registry() = op;
      if (!result->forge_diff().empty()) {
        v1::FileEdit fe;
        fe.set_repo("tt_forge_models");
        fe.set_diff(result->forge_diff());
        *u.spec.add_pre_apply() = fe;
      }
      u.state = ShardState::kQueued;
      u.enqueued_at = now;
      u.eligible_at = now;
    } else if (ended.state == ShardState::kCancelled) {
      u.state = ShardState::kCancelled;
      u.last_error = util::StrCat("shard ", ended.id, " it depends on was cancelled");
    } else if (ended.state == ShardState::kFailed) {
      u.state = ShardState::kFailed;
      u.last_error = util::StrCat("shard ", ended.id, " it depends on failed");
    } else {
      continue;
    }
    out.push_back(u);
  }
}

// ---------------------------------------------------------------------------------------------
// Sweeps

absl::StatusOr<v1::Sweep> Coordinator::StartSweep(const v1::StartSweepRequest& req,
                                                  const Caller& caller) {
  if (req.repo_path().empty() == req.git_url().empty()) {
    return absl::InvalidArgumentError("give exactly one of repo_path or git_url");
  }
  const std::string executor = req.executor().empty() ? options_.default_executor : req.executor();
  if (executor != "native" && executor != "command" && executor != "replay") {
    return absl::InvalidArgumentError(
        util::StrCat("unknown executor '", executor, "' (native, command, replay)"));
  }
  for (const auto& arch : req.archs()) {
    if (!inventory::IsKnownArch(arch)) {
      return absl::InvalidArgumentError(util::StrCat("unknown arch '", arch, "'"));
    }
  }
  // 0: the coordinator's max_attempts.
  if (req.max_attempts() < 0 || req.max_attempts() > 1000) {
    return absl::InvalidArgumentError(
        util::StrCat("max_attempts must be between 1 and 1000 (0: the coordinator's default), got ",
                     req.max_attempts()));
  }
  if (executor == "command") {
    // Refused now, not on every agent later.
    auto params = command::ParseParams({req.params().begin(), req.params().end()});
    if (!params.ok()) return params.status();
  }
  std::unique_ptr<classify::Classifier> custom;
  const classify::Classifier* rules = &classify::Classifier::Default();
  if (!req.rules_yaml().empty()) {
    auto c = classify::Classifier::FromYaml(req.rules_yaml(), "rules");
    if (!c.ok()) return c.status();
    custom = std::make_unique<classify::Classifier>(std::move(*c));
    rules = custom.get();
  }
  for (const auto& pb : req.playbooks()) {
    auto known = rules->Playbooks();
    if (std::find(known.begin(), known.end(), pb) == known.end()) {
      return absl::InvalidArgumentError(util::StrCat("unknown playbook '", pb, "'"));
    }
  }
  std::string durations_error;
  auto durations = ParseDurations(req.durations_json(), &durations_error);
  if (!durations_error.empty()) return absl::InvalidArgumentError(durations_error);

  // Reading through git and planning happen outside the state lock.
  std::lock_guard start_lock(start_mu_);
  auto input = reader_(req);
  if (!input.ok()) return input.status();

  PlanOptions plan_options;
  plan_options.playbooks.assign(req.playbooks().begin(), req.playbooks().end());
  plan_options.archs.assign(req.archs().begin(), req.archs().end());
  if (plan_options.archs.empty()) plan_options.archs = options_.default_archs;
  plan_options.durations = std::move(durations);
  plan_options.executor = executor;
  for (const auto& [k, v] : req.params()) plan_options.params[k] = v;
  plan_options.priority = req.priority();
  plan_options.min_trusted_seconds = options_.min_trusted_seconds;
  plan_options.playbook_estimates = options_.playbook_estimates;
  plan_options.repo_url =
      req.agent_repo_url().empty() ? input->agent_repo_url : req.agent_repo_url();

  Deferred after;
  v1::Sweep view;
  {
    std::lock_guard lock(mu_);
    plan_options.split_probe = std::any_of(agents_.begin(), agents_.end(), [](const auto& a) {
      return a.second.dims.cpu_only() && !a.second.offline && !a.second.draining;
    });
    const TimePoint now = clock_->Now();
    char id[32];
    std::snprintf(id, sizeof(id), "sw-%04lld", static_cast<long long>(next_sweep_++));
    Plan plan = PlanSweep(input->inventory, *rules, plan_options, id, input->ttxla_commit,
                          input->forge_commit);
    SweepRecord rec;
    rec.id = id;
    rec.seq = next_seq_++;
    rec.state = SweepState::kRunning;
    rec.request = req;
    rec.request.clear_durations_json();
    rec.request.set_executor(executor);
    rec.repo = input->repo;
    rec.ttxla_commit = input->ttxla_commit;
    rec.forge_commit = input->forge_commit;
    rec.details.set_forge_gitlink_commit(input->forge_gitlink.empty() ? input->forge_commit
                                                                      : input->forge_gitlink);
    rec.details.set_forge_source(input->forge_source.empty() ? "gitlink" : input->forge_source);
    for (const auto& n : input->notes) rec.details.add_notes(n);
    rec.archs = plan_options.archs;
    rec.playbooks = plan_options.playbooks.empty() ? rules->Playbooks() : plan_options.playbooks;
    for (const auto& d : input->inventory.diagnostics) {
      if (d.severity == util::Severity::kError) rec.problems.push_back(d.ToString());
    }
    for (auto& p : plan.problems) rec.problems.push_back(std::move(p));
    rec.created_by = caller.name;
    rec.created_at = now;
    for (auto& s : plan.shards) {
      s.seq = next_seq_++;
      s.enqueued_at = now;
      s.eligible_at = now;
    }
    Mutation m;
    m.name = "CreateSweep";
    m.sweeps.push_back(&rec);
    for (const auto& s : plan.shards) m.shard_specs.push_back(&s);
    for (const auto& e : plan.entries) m.entries.emplace_back(rec.id, e);
    AuditLocked(m, caller, "start_sweep", rec.id,
                util::StrCat(req.reason(), req.reason().empty() ? "" : "; ", input->repo, "@",
                             input->ttxla_commit.substr(0, 12), ", ", plan.shards.size(),
                             " shards, ", plan.entries.size(), " entries"));
    SweepRt rt;
    rt.rec = rec;
    sweeps_[rec.id] = std::move(rt);
    std::vector<AgentRecord> agents;
    if (auto st = ApplyAndCommit(m, plan.shards, agents, after); !st.ok()) {
      sweeps_.erase(rec.id);
      return st;
    }
    metrics_->SweepStateChanged("", "running");
    if (plan.shards.empty()) MaybeFinishSweepLocked(rec.id, after);
    view = ViewLocked(sweeps_.at(rec.id));
    EmitLocked(rec.id, util::StrCat("sweep started: ", plan.shards.size(), " shards"), after);
  }
  if (auto st = SettleAndWait(after); !st.ok()) return st;
  return view;
}

bool Coordinator::PlanWaveLocked(const std::string& sweep_id, Deferred& after) {
  constexpr int kMaxWaves = 3;
  SweepRt& sweep = sweeps_.at(sweep_id);
  std::vector<const ShardRecord*> shards;
  int wave = 0;
  for (const auto& id : sweep.shard_ids) {
    shards.push_back(&shards_.at(id));
    wave = std::max(wave, shards.back()->spec.wave());
  }
  if (wave >= kMaxWaves) return false;
  const bool split = std::any_of(agents_.begin(), agents_.end(), [](const auto& a) {
    return a.second.dims.cpu_only() && !a.second.offline && !a.second.draining;
  });
  WavePlan plan = PlanNextWave(sweep_id, shards, sweep.results, sweep.rec.archs, split,
                               static_cast<int>(sweep.shard_ids.size()) + 1);
  if (plan.shards.empty()) return false;
  const TimePoint now = clock_->Now();
  Mutation m;
  m.name = "PlanWave";
  for (auto& s : plan.shards) {
    s.seq = next_seq_++;
    s.enqueued_at = now;
    s.eligible_at = now;
    m.shard_specs.push_back(&s);
  }
  auto ticket = store_->Stage(m);
  if (!ticket.ok()) {
    RecordFailure(ticket.status());
    return false;  // retried on the next completion or Tick
  }
  after.ticket = last_staged_ = *ticket;
  for (auto& s : plan.shards) CommitShard(std::move(s));
  EmitLocked(sweep_id,
             util::StrCat("wave ", wave + 1, ": ", plan.shards.size(),
                          " shard(s) re-verify entries touched by registry lines"),
             after);
  return true;
}

void Coordinator::MaybeFinishSweepLocked(const std::string& sweep_id, Deferred& after) {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end() || it->second.rec.state != SweepState::kRunning) return;
  if (it->second.unfinished > 0) return;
  // Registry lines proposed in this wave may touch entries verified without them.
  if (PlanWaveLocked(sweep_id, after)) {
    ServeWaitersLocked(after);
    return;
  }
  // Every shard ended: merge (hook) outside the lock, then record the final state.
  it->second.rec.state = SweepState::kMerging;
  metrics_->SweepStateChanged("running", "merging");
  if (finishing_.insert(sweep_id).second) {
    after.last.push_back({[this, sweep_id] { FinishSweep(sweep_id); },
                          [this, sweep_id](const absl::Status&) { Unfinish(sweep_id); }});
  }
}

void Coordinator::FinishSweep(const std::string& sweep_id) {
  FinishHook hook;
  {
    std::lock_guard lock(mu_);
    hook = finish_hook_;
  }
  absl::Status merged = hook ? hook(sweep_id) : absl::OkStatus();
  Deferred after;
  {
    std::lock_guard lock(mu_);
    auto it = sweeps_.find(sweep_id);
    finishing_.erase(sweep_id);
    if (it == sweeps_.end() || it->second.rec.state != SweepState::kMerging) return;
    SweepRecord rec = it->second.rec;
    bool any_failed = false;
    for (const auto& id : it->second.shard_ids) {
      any_failed |= shards_.at(id).state == ShardState::kFailed;
    }
    rec.state = (!merged.ok() || any_failed) ? SweepState::kFailed : SweepState::kSucceeded;
    if (!merged.ok()) rec.error = util::StrCat("merge: ", util::MessageOf(merged));
    rec.finished_at = clock_->Now();
    Mutation m;
    m.name = "FinishSweep";
    m.sweeps.push_back(&rec);
    auto ticket = store_->Stage(m);
    if (!ticket.ok()) {
      RecordFailure(ticket.status());
      return;  // stays merging; retried on the next Tick
    }
    after.ticket = last_staged_ = *ticket;
    metrics_->SweepStateChanged("merging", SweepStateName(rec.state));
    if (rec.state == SweepState::kSucceeded) {
      metrics_->SweepSucceeded(ToSeconds(rec.finished_at.time_since_epoch()));
    }
    it->second.rec = rec;
    EmitLocked(sweep_id, util::StrCat("sweep ", SweepStateName(rec.state)), after);
  }
  Settle(after);
}

absl::StatusOr<v1::Sweep> Coordinator::GetSweep(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sweeps_.find(id);
  if (it == sweeps_.end()) return absl::NotFoundError(util::StrCat("no sweep ", id));
  return ViewLocked(it->second);
}

std::vector<v1::Sweep> Coordinator::ListSweeps() {
  std::lock_guard lock(mu_);
  std::vector<v1::Sweep> out;
  for (const auto& [id, s] : sweeps_) out.push_back(ViewLocked(s));
  return out;
}

absl::StatusOr<SweepRecord> Coordinator::SweepInfo(const std::string& sweep_id) {
  std::lock_guard lock(mu_);
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return absl::NotFoundError(util::StrCat("no sweep ", sweep_id));
  return it->second.rec;
}

absl::StatusOr<std::vector<ShardRecord>> Coordinator::Shards(const std::string& sweep_id) {
  std::lock_guard lock(mu_);
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return absl::NotFoundError(util::StrCat("no sweep ", sweep_id));
  std::vector<ShardRecord> out;
  for (const auto& id : it->second.shard_ids) out.push_back(shards_.at(id));
  return out;
}

absl::StatusOr<std::vector<ResultRecord>> Coordinator::Results(const std::string& sweep_id) {
  std::lock_guard lock(mu_);
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return absl::NotFoundError(util::StrCat("no sweep ", sweep_id));
  return it->second.results;
}

v1::EntryCounts Coordinator::CountLocked(const SweepRt& s,
                                         const std::map<std::string, EntryTally>* merged) const {
  std::vector<EntryTally> tallies;
  tallies.reserve(s.entries.size());
  for (const auto& [k, e] : s.entries) {
    EntryTally& t = tallies.emplace_back();
    const std::string st = EntryStateName(e);
    t.phase = st == "done"      ? EntryTally::Phase::kDone
              : st == "running" ? EntryTally::Phase::kRunning
                                : EntryTally::Phase::kQueued;
    if (const std::string* label = ForFirstArch(e.decided, s.rec.archs)) t.label = *label;
    t.review = e.review;
    if (merged == nullptr) continue;
    if (auto m = merged->find(k); m != merged->end()) {
      t.label = m->second.label;
      t.review = m->second.review;
    }
  }
  return CountEntries(tallies);
}

absl::StatusOr<v1::EntryCounts> Coordinator::SettleCounts(
    const std::string& sweep_id, const std::map<std::string, EntryTally>& merged) {
  Deferred after;
  v1::EntryCounts counts;
  {
    std::lock_guard lock(mu_);
    auto it = sweeps_.find(sweep_id);
    if (it == sweeps_.end()) return absl::NotFoundError(util::StrCat("no sweep ", sweep_id));
    counts = CountLocked(it->second, &merged);
    SweepRecord rec = it->second.rec;
    *rec.details.mutable_final_entries() = counts;
    Mutation m;
    m.name = "SettleCounts";
    m.sweeps.push_back(&rec);
    std::vector<ShardRecord> shards;
    std::vector<AgentRecord> agents;
    if (auto st = ApplyAndCommit(m, shards, agents, after); !st.ok()) return st;
    it->second.rec.details = rec.details;
  }
  if (auto st = SettleAndWait(after); !st.ok()) return st;
  return counts;
}

v1::Sweep Coordinator::ViewLocked(const SweepRt& s) const {
  v1::Sweep v;
  const SweepRecord& r = s.rec;
  v.set_id(r.id);
  v.set_state(std::string(SweepStateName(r.state)));
  v.set_repo(r.repo);
  v.set_ttxla_commit(r.ttxla_commit);
  v.set_forge_commit(r.forge_commit);
  v.set_forge_gitlink_commit(r.details.forge_gitlink_commit());
  v.set_forge_source(r.details.forge_source());
  for (const auto& n : r.details.notes()) v.add_notes(n);
  for (const auto& p : r.playbooks) v.add_playbooks(p);
  for (const auto& a : r.archs) v.add_archs(a);
  v.set_executor(r.request.executor());
  v.set_created_unix_ms(ToUnixMillis(r.created_at));
  if (r.finished_at != TimePoint{}) v.set_finished_unix_ms(ToUnixMillis(r.finished_at));
  for (const auto& p : r.problems) v.add_problems(p);
  v.set_created_by(r.created_by);
  v.set_priority(r.request.priority());
  v.set_error(r.error);
  // Once the merge settled the counts (conflicts and its review flags included) they are final.
  *v.mutable_entries() =
      r.details.has_final_entries() ? r.details.final_entries() : CountLocked(s, nullptr);
  for (int st = 0; st < static_cast<int>(s.by_state.size()); ++st) {
    if (s.by_state[st] > 0) {
      (*v.mutable_shards_by_state())[std::string(ShardStateName(static_cast<ShardState>(st)))] =
          s.by_state[st];
    }
  }
  for (const auto& p : s.live_problems) v.add_problems(p);
  if (r.state == SweepState::kRunning && s.blocked) v.set_state("blocked");
  // ETA: measured on this sweep only (docs/farm.md), unknown until enough shards finished.
  v.set_eta_seconds(r.state == SweepState::kRunning ? EstimateEta(s.lanes, clock_->Now()) : 0);
  return v;
}

void Coordinator::EmitLocked(const std::string& sweep_id, const std::string& message,
                             Deferred& after) {
  bool any = false;
  for (const auto& [id, w] : watchers_) any |= w.first == sweep_id;
  if (!any) return;
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return;
  v1::SweepEvent ev;
  *ev.mutable_sweep() = ViewLocked(it->second);
  ev.set_message(message);
  for (const auto& [id, w] : watchers_) {
    if (w.first == sweep_id) after.push_back([cb = w.second, ev] { cb(ev); });
  }
}

absl::StatusOr<int> Coordinator::Watch(const std::string& sweep_id, WatchCallback cb) {
  v1::SweepEvent ev;
  int id;
  {
    std::lock_guard lock(mu_);
    auto it = sweeps_.find(sweep_id);
    if (it == sweeps_.end()) return absl::NotFoundError(util::StrCat("no sweep ", sweep_id));
    id = next_watch_++;
    watchers_[id] = {sweep_id, cb};
    *ev.mutable_sweep() = ViewLocked(it->second);
    ev.set_message("watching");
  }
  cb(ev);
  return id;
}

void Coordinator::Unwatch(int id) {
  std::lock_guard lock(mu_);
  watchers_.erase(id);
}

// ---------------------------------------------------------------------------------------------
// Shards and agents (operators)

v1::Shard Coordinator::ShardViewLocked(const ShardRecord& s) const {
  v1::Shard v;
  v.set_id(s.id);
  v.set_sweep_id(s.sweep_id);
  v.set_playbook(s.spec.playbook());
  v.set_loader(s.spec.loader());
  v.set_wave(s.spec.wave());
  v.set_phase(s.spec.phase());
  v.set_arch(s.spec.arch());
  v.set_state(std::string(ShardStateName(s.state)));
  v.set_attempts(s.attempts);
  if (s.lease) {
    v.set_agent_id(s.lease->agent_id);
    v.set_lease_id(s.lease->lease_id);
    v.set_fencing_token(s.lease->token);
    v.set_last_progress_unix_ms(ToUnixMillis(s.last_progress_at));
  }
  v.set_last_step(s.last_step);
  v.set_last_entry(s.last_entry);
  v.set_enqueued_unix_ms(ToUnixMillis(s.enqueued_at));
  v.set_eligible_unix_ms(ToUnixMillis(s.eligible_at));
  v.set_expected_seconds(s.expected_seconds);
  v.set_priority(s.priority);
  for (const auto& e : s.spec.entries()) v.add_keys(e.key());
  v.set_last_error(s.last_error);
  for (const auto& l : s.log_tail) v.add_log_tail(l);
  for (const auto& a : s.archs) v.add_requires_archs(a);
  v.set_cpu_ok(s.cpu_ok);
  return v;
}

absl::StatusOr<std::vector<v1::Shard>> Coordinator::ListShards(const v1::ListShardsRequest& req) {
  std::lock_guard lock(mu_);
  if (!req.sweep_id().empty() && !sweeps_.count(req.sweep_id())) {
    return absl::NotFoundError(util::StrCat("no sweep ", req.sweep_id()));
  }
  if (!req.state().empty() && !ParseShardState(req.state())) {
    return absl::InvalidArgumentError(util::StrCat(
        "unknown shard state '", req.state(),
        "' (waiting, queued, leased, running, succeeded, failed, quarantined, cancelled)"));
  }
  if (req.stuck_seconds() < 0) {
    return absl::InvalidArgumentError("stuck_seconds must be positive (0 = not filtering)");
  }
  const TimePoint now = clock_->Now();
  std::vector<const ShardRecord*> rows;
  for (const auto& [id, s] : shards_) {
    if (!req.sweep_id().empty() && s.sweep_id != req.sweep_id()) continue;
    if (!req.state().empty() && ShardStateName(s.state) != req.state()) continue;
    if (req.stuck_seconds() > 0) {
      if (s.state != ShardState::kLeased && s.state != ShardState::kRunning) continue;
      if (now - s.last_progress_at < std::chrono::seconds(req.stuck_seconds())) continue;
    }
    rows.push_back(&s);
  }
  std::sort(rows.begin(), rows.end(),
            [](const ShardRecord* a, const ShardRecord* b) { return a->seq < b->seq; });
  std::vector<v1::Shard> out;
  for (const auto* s : rows) out.push_back(ShardViewLocked(*s));
  return out;
}

absl::StatusOr<v1::Shard> Coordinator::RequeueShard(const std::string& id,
                                                    const std::string& reason,
                                                    const Caller& caller) {
  if (reason.empty()) return absl::InvalidArgumentError("a requeue needs a reason");
  Deferred after;
  v1::Shard view;
  {
    std::lock_guard lock(mu_);
    auto it = shards_.find(id);
    if (it == shards_.end()) return absl::NotFoundError(util::StrCat("no shard ", id));
    ShardRecord s = it->second;
    if (s.state == ShardState::kWaiting) {
      const auto dep = shards_.find(s.depends_on);
      return absl::FailedPreconditionError(util::StrCat(
          "shard ", id, " is waiting: it runs once shard ", s.depends_on,
          dep == shards_.end() ? "" : util::StrCat(" (", ShardStateName(dep->second.state), ")"),
          " succeeds, with that shard's edits applied, so there is nothing to requeue yet. If ",
          s.depends_on, " is stuck or quarantined, requeue that one; `triagectl shard cancel ", id,
          "` gives up on this one"));
    }
    if (s.state == ShardState::kSucceeded) {
      return absl::FailedPreconditionError(util::StrCat(
          "shard ", id, " succeeded; only unfinished or failed shards can be requeued"));
    }
    auto sweep = sweeps_.find(s.sweep_id);
    if (sweep != sweeps_.end() && sweep->second.rec.state == SweepState::kCancelled) {
      return absl::FailedPreconditionError(util::StrCat("sweep ", s.sweep_id, " is cancelled"));
    }
    const TimePoint now = clock_->Now();
    Mutation m;
    m.name = "RequeueShard";
    RevokeLeaseLocked(s, now, util::StrCat("requeued by ", caller.name, ": ", reason), m);
    s.state = ShardState::kQueued;
    s.attempts = 0;  // a fresh attempt budget
    s.infra_losses = 0;
    s.enqueued_at = now;
    s.eligible_at = now;
    s.last_error = util::StrCat("requeued by ", caller.name, ": ", reason);
    AuditLocked(m, caller, "requeue_shard", id, reason);
    std::vector<ShardRecord> shards{s};
    // A finished sweep runs again.
    SweepRecord reopened;
    if (sweep != sweeps_.end() && sweep->second.rec.state != SweepState::kRunning) {
      reopened = sweep->second.rec;
      reopened.state = SweepState::kRunning;
      reopened.finished_at = TimePoint{};
      m.sweeps.push_back(&reopened);
    }
    std::vector<AgentRecord> agents;
    if (auto st = ApplyAndCommit(m, shards, agents, after); !st.ok()) return st;
    if (!reopened.id.empty()) {
      metrics_->SweepStateChanged(SweepStateName(sweep->second.rec.state), "running");
      sweep->second.rec = reopened;
    }
    metrics_->Requeued(ShardArch(s), "manual");
    EmitLocked(s.sweep_id, util::StrCat("shard ", id, " requeued by ", caller.name), after);
    after.push_back(AttemptLog(spdlog::level::info, s.sweep_id, id, "",
                               util::StrCat("requeued by ", caller.name, ": ", reason)));
    view = ShardViewLocked(shards_.at(id));
  }
  if (auto st = SettleAndWait(after); !st.ok()) return st;
  return view;
}

void Coordinator::RevokeLeaseLocked(ShardRecord& s, TimePoint now, const std::string& why,
                                    Mutation& m) {
  if (!s.lease) return;
  m.attempts.push_back(EndedAttempt(s, now, "revoked", why));
  auto agent = agents_.find(s.lease->agent_id);
  if (agent != agents_.end()) agent->second.revoked.insert(s.lease->lease_id);
  s.lease.reset();
}

absl::StatusOr<v1::Shard> Coordinator::CancelShard(const std::string& id, const std::string& reason,
                                                   const Caller& caller) {
  Deferred after;
  v1::Shard view;
  {
    std::lock_guard lock(mu_);
    auto it = shards_.find(id);
    if (it == shards_.end()) return absl::NotFoundError(util::StrCat("no shard ", id));
    ShardRecord s = it->second;
    if (IsTerminal(s.state)) {
      return absl::FailedPreconditionError(
          util::StrCat("shard ", id, " already ended (", ShardStateName(s.state), ")"));
    }
    const TimePoint now = clock_->Now();
    Mutation m;
    m.name = "CancelShard";
    RevokeLeaseLocked(s, now, util::StrCat("cancelled by ", caller.name), m);
    s.state = ShardState::kCancelled;
    s.last_error = util::StrCat("cancelled by ", caller.name, reason.empty() ? "" : ": ", reason);
    AuditLocked(m, caller, "cancel_shard", id, reason);
    std::vector<ShardRecord> shards{s};
    CascadeLocked(s, nullptr, shards);
    std::vector<AgentRecord> agents;
    if (auto st = ApplyAndCommit(m, shards, agents, after); !st.ok()) return st;
    EmitLocked(s.sweep_id, util::StrCat("shard ", id, " cancelled by ", caller.name), after);
    view = ShardViewLocked(shards_.at(id));
  }
  if (auto st = SettleAndWait(after); !st.ok()) return st;
  return view;
}

absl::StatusOr<v1::Sweep> Coordinator::CancelSweep(const std::string& id, const std::string& reason,
                                                   const Caller& caller) {
  Deferred after;
  v1::Sweep view;
  {
    std::lock_guard lock(mu_);
    auto it = sweeps_.find(id);
    if (it == sweeps_.end()) return absl::NotFoundError(util::StrCat("no sweep ", id));
    if (it->second.rec.state != SweepState::kRunning) {
      return absl::FailedPreconditionError(util::StrCat(
          "sweep ", id, " is ", SweepStateName(it->second.rec.state), ", not running"));
    }
    const TimePoint now = clock_->Now();
    Mutation m;
    m.name = "CancelSweep";
    std::vector<ShardRecord> shards;
    for (const auto& sid : it->second.shard_ids) {
      ShardRecord s = shards_.at(sid);
      if (IsTerminal(s.state)) continue;
      RevokeLeaseLocked(s, now, "sweep cancelled", m);
      s.state = ShardState::kCancelled;
      s.last_error = "sweep cancelled";
      shards.push_back(std::move(s));
    }
    SweepRecord rec = it->second.rec;
    rec.state = SweepState::kCancelled;
    rec.finished_at = now;
    rec.error = util::StrCat("cancelled by ", caller.name, reason.empty() ? "" : ": ", reason);
    m.sweeps.push_back(&rec);
    AuditLocked(m, caller, "cancel_sweep", id, reason);
    it->second.rec.state = SweepState::kCancelled;  // keeps MaybeFinish from merging
    std::vector<AgentRecord> agents;
    if (auto st = ApplyAndCommit(m, shards, agents, after); !st.ok()) {
      it->second.rec.state = SweepState::kRunning;
      return st;
    }
    it->second.rec = rec;
    metrics_->SweepStateChanged("running", "cancelled");
    EmitLocked(id, util::StrCat("sweep cancelled by ", caller.name), after);
    view = ViewLocked(it->second);
  }
  if (auto st = SettleAndWait(after); !st.ok()) return st;
  return view;
}

v1::Agent Coordinator::AgentViewLocked(const AgentRecord& a) const {
  v1::Agent v;
  *v.mutable_dimensions() = a.dims;
  v.set_state(AgentStateName(a));
  v.set_session_id(a.session_id);
  v.set_last_heartbeat_unix_ms(ToUnixMillis(a.last_heartbeat));
  v.set_registered_unix_ms(ToUnixMillis(a.registered_at));
  for (const auto& l : a.leases) {
    auto sid = lease_to_shard_.find(l);
    if (sid != lease_to_shard_.end()) v.add_shard_ids(sid->second);
  }
  return v;
}

std::vector<v1::Agent> Coordinator::ListAgents() {
  std::lock_guard lock(mu_);
  std::vector<v1::Agent> out;
  for (const auto& [id, a] : agents_) out.push_back(AgentViewLocked(a));
  return out;
}

absl::StatusOr<v1::Agent> Coordinator::SetDraining(const std::string& agent_id, bool draining,
                                                   const std::string& reason,
                                                   const Caller& caller) {
  Deferred after;
  v1::Agent view;
  {
    std::lock_guard lock(mu_);
    auto it = agents_.find(agent_id);
    if (it == agents_.end()) return absl::NotFoundError(util::StrCat("no agent ", agent_id));
    AgentRecord a = it->second;
    a.draining = draining;
    Mutation m;
    m.name = draining ? "DrainAgent" : "UndrainAgent";
    AuditLocked(m, caller, draining ? "drain_agent" : "undrain_agent", agent_id, reason);
    std::vector<ShardRecord> shards;
    std::vector<AgentRecord> agents{a};
    if (auto st = ApplyAndCommit(m, shards, agents, after); !st.ok()) return st;
    view = AgentViewLocked(agents_.at(agent_id));
    if (draining) {
      // Its waiting long-polls end now.
      for (auto w = waiters_.begin(); w != waiters_.end();) {
        if (w->agent_id == agent_id) {
          v1::LeaseResponse resp;
          resp.set_draining(true);
          after.Answer(w->done, resp);
          w = waiters_.erase(w);
        } else {
          ++w;
        }
      }
    }
  }
  if (auto st = SettleAndWait(after); !st.ok()) return st;
  return view;
}

// ---------------------------------------------------------------------------------------------
// Time

void Coordinator::ForgetOfflineAgentsLocked(TimePoint now, Deferred& after) {
  Mutation m;
  m.name = "ForgetAgents";
  for (const auto& [id, a] : agents_) {
    if (a.offline && a.leases.empty() && now - a.last_heartbeat > options_.offline_retention) {
      m.removed_agents.push_back(id);
    }
  }
  if (m.removed_agents.empty()) return;
  std::vector<ShardRecord> shards;
  std::vector<AgentRecord> agents;
  if (!ApplyAndCommit(m, shards, agents, after).ok()) return;  // tried again next tick
  for (const auto& id : m.removed_agents) {
    auto it = agents_.find(id);
    metrics_->AgentStateChanged(it->second.dims.arch(), AgentStateName(it->second), "");
    spdlog::info("agent {} forgotten: offline for more than {} s", id,
                 static_cast<long long>(ToSeconds(options_.offline_retention)));
    agents_.erase(it);
  }
}

void Coordinator::RefreshProblemsLocked(Deferred& after) {
  std::vector<const AgentRecord*> agents;
  agents.reserve(agents_.size());
  for (const auto& [id, a] : agents_) agents.push_back(&a);
  std::map<std::string, std::vector<Unservable>> by_sweep;
  std::map<std::pair<std::string, std::string>, int> gauges;  // (arch, reason) -> shards
  for (auto& u : demand_.Evaluate(agents)) {
    gauges[{u.arch, u.reason}] += u.shards;
    by_sweep[u.sweep_id].push_back(std::move(u));
  }
  for (const auto& key : unservable_reported_) gauges.try_emplace(key, 0);
  for (const auto& [key, n] : gauges) {
    metrics_->UnservableShards(key.first, key.second, n);
    unservable_reported_.insert(key);
  }
  int blocked_sweeps = 0;
  for (auto& [id, sw] : sweeps_) {
    if (sw.rec.state != SweepState::kRunning) {
      if (!sw.live_problems.empty() || sw.blocked) {
        sw.live_problems.clear();
        sw.blocked = false;
      }
      continue;
    }
    std::vector<std::string> problems;
    int unservable = 0;
    for (auto& [lane, p] : sw.lanes) p.unservable = false;
    for (const auto& u : by_sweep[id]) {
      problems.push_back(u.message);
      unservable += u.queued;
      // The lane its shards run in (ShardArch): probe work is cpu, the rest its one arch.
      const auto& req = u.requirement;
      sw.lanes[req.cpu_ok || req.archs.empty() ? std::string(kCpuArch) : req.archs.front()]
          .unservable = true;
    }
    const int quarantined = sw.by_state[static_cast<int>(ShardState::kQuarantined)];
    if (quarantined > 0) {
      constexpr int kListed = 5;
      std::vector<std::string> listed;
      for (const auto& sid : sw.shard_ids) {
        const ShardRecord& sh = shards_.at(sid);
        if (sh.state != ShardState::kQuarantined) continue;
        if (static_cast<int>(listed.size()) == kListed) break;
        listed.push_back(util::StrCat(sid, sh.last_error.empty() ? "" : ": ", sh.last_error));
      }
      problems.push_back(util::StrCat(
          quarantined, quarantined == 1 ? " shard is" : " shards are",
          " quarantined after their attempts failed; `triagectl shard requeue ID` retries one (",
          util::StrJoin(listed, "; "), quarantined > kListed ? "; ..." : "", ")"));
    }
    const int active = sw.by_state[static_cast<int>(ShardState::kLeased)] +
                       sw.by_state[static_cast<int>(ShardState::kRunning)];
    const int servable = sw.by_state[static_cast<int>(ShardState::kQueued)] - unservable;
    const bool blocked = sw.unfinished > 0 && active == 0 && servable <= 0;
    blocked_sweeps += blocked ? 1 : 0;
    if (problems != sw.live_problems || blocked != sw.blocked) {
      const bool became_blocked = blocked && !sw.blocked;
      sw.live_problems = std::move(problems);
      sw.blocked = blocked;
      EmitLocked(id,
                 became_blocked             ? "sweep blocked: it needs a person (see problems)"
                 : sw.live_problems.empty() ? "problems cleared"
                                            : "problems changed",
                 after);
    }
  }
  metrics_->BlockedSweeps(blocked_sweeps);
}

void Coordinator::Tick() {
  Deferred after;
  {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_->Now();
    // Silent agents go offline; their leases expire below.
    for (auto& [id, a] : agents_) {
      if (!a.offline && now - a.last_heartbeat > options_.agent_dead_after) {
        std::string before = AgentStateName(a);
        a.offline = true;
        metrics_->AgentStateChanged(a.dims.arch(), before, AgentStateName(a));
      }
    }
    ForgetOfflineAgentsLocked(now, after);
    Mutation m;
    m.name = "ExpireLeases";
    std::vector<ShardRecord> shards;
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
      after.push_back(AttemptLog(spdlog::level::warn, s.sweep_id, s.id, lease_id,
                                 util::StrCat("expired (", why, ") on agent ", s.lease->agent_id)));
      FailAttempt(
          s, "expired",
          util::StrCat("lease ", lease_id, " expired (", why, ") on agent ", s.lease->agent_id),
          now, m, Fault::kInfrastructure);
      if (s.state == ShardState::kQuarantined)
        metrics_->ShardAttempts(s.spec.playbook(), s.attempts);
      shards.push_back(std::move(s));
    }
    if (!shards.empty()) {
      std::vector<AgentRecord> agents;
      std::set<std::string> sweeps;
      for (const auto& s : shards) sweeps.insert(s.sweep_id);
      if (ApplyAndCommit(m, shards, agents, after).ok()) {
        for (const auto& sw : sweeps) EmitLocked(sw, "leases expired", after);
      }
    }
    // Long-polls that reached their limit.
    for (auto w = waiters_.begin(); w != waiters_.end();) {
      if (w->deadline <= now) {
        after.Answer(w->done, v1::LeaseResponse{});
        w = waiters_.erase(w);
      } else {
        ++w;
      }
    }
    // Backoffs that ended.
    ServeWaitersLocked(after);
    // A finished sweep whose final state could not be stored is retried.
    for (const auto& [id, sw] : sweeps_) {
      if (sw.rec.state == SweepState::kMerging && finishing_.insert(id).second) {
        after.last.push_back({[this, sweep_id = id] { FinishSweep(sweep_id); },
                              [this, sweep_id = id](const absl::Status&) { Unfinish(sweep_id); }});
      }
    }
    // Health follows commits. A database file that is no longer the one open (deleted or
    // replaced) is noticed here even when nothing is being written; the store's Check puts a
    // deleted one back and proves with a commit that writing works again.
    if (!store_->FileIntact()) {
      if (healthy_.exchange(false)) {
        spdlog::error("coordinator: the database file was deleted or replaced while open");
      }
    }
    if (!healthy_.load()) healthy_.store(store_->Check().ok());
    ReportOnCallAgesLocked(now);
    RefreshProblemsLocked(after);
  }
  Settle(after);
}

void Coordinator::StartGrace() {
  std::lock_guard lock(mu_);
  const TimePoint now = clock_->Now();
  for (auto& [id, a] : agents_) a.last_heartbeat = std::max(a.last_heartbeat, now);
  for (auto& [lease_id, sid] : lease_to_shard_) {
    ShardRecord& s = shards_.at(sid);
    if (!s.lease) continue;
    s.lease->deadline = std::max(s.lease->deadline, now + options_.lease_ttl);
    s.last_progress_at = std::max(s.last_progress_at, now);
  }
}

void Coordinator::ReportOnCallAgesLocked(TimePoint now) {
  std::map<std::string, std::pair<double, double>> ages;  // arch -> {progress, queued}
  for (const auto& arch : on_call_archs_) ages[arch] = {0, 0};
  auto seconds = [](Duration d) { return std::chrono::duration<double>(d).count(); };
  for (const auto& [id, s] : shards_) {
    if (s.state == ShardState::kLeased || s.state == ShardState::kRunning) {
      auto& a = ages[ShardArch(s)];
      a.first = std::max(a.first, seconds(now - s.last_progress_at));
    } else if (s.state == ShardState::kQueued && s.eligible_at <= now) {
      auto& a = ages[ShardArch(s)];
      a.second = std::max(a.second, seconds(now - s.eligible_at));
    }
  }
  for (const auto& [arch, a] : ages) {
    on_call_archs_.insert(arch);
    metrics_->OnCallAges(arch, a.first, a.second);
  }
}

// ---------------------------------------------------------------------------------------------
// Recovery

absl::Status Coordinator::Recover() {
  auto snap = store_->Load();
  if (!snap.ok()) return snap.status();
  Deferred after;
  {
    std::lock_guard lock(mu_);
    RecoverLocked(std::move(*snap), after);
  }
  Settle(after);
  return absl::OkStatus();
}

void Coordinator::RecoverLocked(Snapshot snap, Deferred& after) {
  const TimePoint now = clock_->Now();
  for (auto& a : snap.agents) {
    a.last_heartbeat = now;  // a grace period to re-attach
    a.offline = false;
    a.leases.clear();
    metrics_->AgentStateChanged(a.dims.arch(), "", AgentStateName(a));
    agents_[a.dims.agent_id()] = std::move(a);
  }
  for (auto& r : snap.sweeps) {
    next_seq_ = std::max(next_seq_, r.seq + 1);
    long long n = 0;
    if (std::sscanf(r.id.c_str(), "sw-%lld", &n) == 1) {
      next_sweep_ = std::max<std::int64_t>(next_sweep_, n + 1);
    }
    SweepRt rt;
    rt.rec = r;
    // Sweeps caught between their last shard and their final state merge again.
    if (rt.rec.state == SweepState::kMerging) rt.rec.state = SweepState::kRunning;
    metrics_->SweepStateChanged("", SweepStateName(rt.rec.state));
    sweeps_[r.id] = std::move(rt);
  }
  std::sort(snap.shards.begin(), snap.shards.end(),
            [](const ShardRecord& a, const ShardRecord& b) { return a.seq < b.seq; });
  for (auto& s : snap.shards) {
    next_seq_ = std::max(next_seq_, s.seq + 1);
    if (s.lease) {
      s.lease->deadline = now + options_.lease_ttl;
      s.last_progress_at = now;
    }
    CommitShard(std::move(s));
  }
  for (const auto& r : snap.results) CommitResultLocked(r);
  for (auto& [id, sw] : sweeps_) MaybeFinishSweepLocked(id, after);
}

void Coordinator::ResetLocked() {
  for (const auto& [id, a] : agents_)
    metrics_->AgentStateChanged(a.dims.arch(), AgentStateName(a), "");
  for (const auto& [id, s] : shards_)
    metrics_->ShardStateChanged(ShardArch(s), ShardStateName(s.state), "");
  for (const auto& [id, sw] : sweeps_) {
    for (const auto& [key, e] : sw.entries)
      metrics_->EntryStateChanged(e.playbook, EntryStateName(e), "");
    metrics_->SweepStateChanged(SweepStateName(sw.rec.state), "");
  }
  sweeps_.clear();
  shards_.clear();
  agents_.clear();
  lease_to_shard_.clear();
  dependents_.clear();
  lease_request_.clear();
  accepted_leases_.clear();
  queue_.clear();
  demand_.Clear();
}

void Coordinator::OnFlushFailure(const absl::Status& status) {
  Deferred after;
  {
    std::lock_guard lock(mu_);
    RecordFailure(status);
    // Everything staged since the last good commit is gone from the store (also what was
    // staged while the commit ran: it was built on top of the lost state). Memory follows.
    commits_.Lost(store_->Abort());
    auto snap = store_->Load();
    if (!snap.ok()) {
      spdlog::critical(
          "coordinator: a commit failed ({}) and the state cannot be reloaded "
          "({}); exiting so that a restart recovers from the database",
          util::MessageOf(status), util::MessageOf(snap.status()));
      std::abort();
    }
    spdlog::error(
        "coordinator: a commit failed ({}); state reloaded from the database, the "
        "operations in that commit were answered UNAVAILABLE",
        util::MessageOf(status));
    ResetLocked();
    RecoverLocked(std::move(*snap), after);
  }
  Settle(after);
}

void Coordinator::Settle(Deferred& after) {
  std::vector<GroupCommit::Item> items = std::move(after.now);
  for (auto& item : after.last) {
    item.last = true;
    items.push_back(std::move(item));
  }
  after.now.clear();
  after.last.clear();
  commits_.Submit(after.ticket, std::move(items));
}

absl::Status Coordinator::SettleAndWait(Deferred& after) {
  auto result = std::make_shared<std::promise<absl::Status>>();
  auto got = result->get_future();
  after.Reply([result] { result->set_value(absl::OkStatus()); },
              [result](const absl::Status& st) { result->set_value(st); });
  Settle(after);
  return got.get();
}

void Coordinator::Unfinish(const std::string& sweep_id) {
  std::lock_guard lock(mu_);
  finishing_.erase(sweep_id);
}

}  // namespace triage::coord
