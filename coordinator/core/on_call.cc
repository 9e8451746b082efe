// The front door's on-call side: audited operations on shards, sweeps and agents, the lists
// operators read, and time (Tick: expiry, offline agents, problems) (docs/architecture.md).

#include <algorithm>

#include "common/util/log.h"
#include "common/util/strings.h"
#include "coordinator/core/attempt_log.h"
#include "coordinator/core/coordinator.h"

namespace triage::coord {

void Coordinator::AuditLocked(Mutation& m, const Caller& caller, std::string action,
                              std::string target, std::string reason) {
  m.audit.push_back(AuditRecord{clock_->Now(), caller.name, caller.role, std::move(action),
                                std::move(target), std::move(reason)});
}

absl::StatusOr<std::vector<v1::AuditEntry>> Coordinator::ListAudit(
    const v1::ListAuditRequest& req) {
  constexpr int kDefaultLimit = 100;
  constexpr int kMaxLimit = 10000;
  if (req.limit() < 0 || req.limit() > kMaxLimit) {
    return absl::InvalidArgumentError(
        util::StrCat("limit must be 0..", kMaxLimit, ", got ", req.limit()));
  }
  const int limit = req.limit() > 0 ? req.limit() : kDefaultLimit;
  const std::string& sweep = req.sweep_id();
  if (!sweep.empty()) {
    std::lock_guard lock(mu_);
    if (!sweeps_.count(sweep)) return absl::NotFoundError(util::StrCat("no sweep ", sweep));
  }
  // Read without the state lock: the store serialises its own reads. A sweep's actions are
  // among the latest kMaxLimit of the farm's (a handful per sweep).
  auto records = journal_.AuditLog(sweep.empty() ? limit : kMaxLimit);
  if (!records.ok()) return records.status();
  std::vector<v1::AuditEntry> out;
  for (const AuditRecord& a : *records) {
    // A shard's id is its sweep's followed by "-s<n>".
    if (!sweep.empty() && a.target != sweep && !a.target.starts_with(sweep + "-")) continue;
    v1::AuditEntry& e = out.emplace_back();
    e.set_at_unix_ms(ToUnixMillis(a.at));
    e.set_who(a.who);
    e.set_role(a.role);
    e.set_action(a.action);
    e.set_target(a.target);
    e.set_reason(a.reason);
  }
  if (static_cast<int>(out.size()) > limit) out.erase(out.begin(), out.end() - limit);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Shards

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
  if (s.backup) {
    v.set_backup_agent_id(s.backup->agent_id);
    v.set_backup_lease_id(s.backup->lease_id);
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
  if (s.spec.has_carried_from()) *v.mutable_carried_from() = s.spec.carried_from();
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
  for (const auto& [id, s] : table_.shards()) {
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
  return Operate(Ack::kDurable, [&](Effects& after) -> absl::StatusOr<v1::Shard> {
    const ShardRecord* found = table_.FindShard(id);
    if (found == nullptr) return absl::NotFoundError(util::StrCat("no shard ", id));
    ShardRecord s = *found;
    if (s.state == ShardState::kWaiting) {
      const ShardRecord* dep = table_.FindShard(s.depends_on);
      return absl::FailedPreconditionError(util::StrCat(
          "shard ", id, " is waiting: it runs once shard ", s.depends_on,
          dep == nullptr ? "" : util::StrCat(" (", ShardStateName(dep->state), ")"),
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
    if (s.spec.ahead() && sweep != sweeps_.end() &&
        sweep->second.next_wave_planned_after >= s.spec.wave() - 1) {
      return absl::FailedPreconditionError(util::StrCat(
          "shard ", id, " was planned ahead of wave ", s.spec.wave(),
          " and discarded when that wave was planned (", s.last_error,
          "): its results would never count; the wave's own shards verify its entries"));
    }
    const TimePoint now = clock_->Now();
    Mutation m;
    m.name = "RequeueShard";
    table_.Revoke(s, now, util::StrCat("requeued by ", caller.name, ": ", reason), m);
    s.state = ShardState::kQueued;
    s.attempts = 0;  // a fresh attempt budget
    s.infra_losses = 0;
    s.enqueued_at = now;
    s.eligible_at = now;
    s.last_error = util::StrCat("requeued by ", caller.name, ": ", reason);
    AuditLocked(m, caller, "requeue_shard", id, reason);
    const std::string arch = LeaseTable::ShardArch(s);
    const std::string sweep_id = s.sweep_id;
    std::vector<ShardRecord> shards{std::move(s)};
    // A finished sweep runs again.
    SweepRecord reopened;
    if (sweep != sweeps_.end() && sweep->second.rec.state != SweepState::kRunning) {
      reopened = sweep->second.rec;
      reopened.state = SweepState::kRunning;
      reopened.finished_at = TimePoint{};
      m.sweeps.push_back(&reopened);
    }
    std::vector<AgentRecord> agents;
    if (auto st = CommitLocked(m, shards, agents, after); !st.ok()) return st;
    if (!reopened.id.empty()) {
      metrics_->SweepStateChanged(SweepStateName(sweep->second.rec.state), "running");
      sweep->second.rec = reopened;
    }
    metrics_->Requeued(arch, "manual");
    EmitLocked(sweep_id, util::StrCat("shard ", id, " requeued by ", caller.name), after);
    after.push_back(AttemptLog(spdlog::level::info, sweep_id, id, "",
                               util::StrCat("requeued by ", caller.name, ": ", reason)));
    return ShardViewLocked(table_.shard(id));
  });
}

absl::StatusOr<v1::Shard> Coordinator::CancelShard(const std::string& id, const std::string& reason,
                                                   const Caller& caller) {
  return Operate(Ack::kDurable, [&](Effects& after) -> absl::StatusOr<v1::Shard> {
    const ShardRecord* found = table_.FindShard(id);
    if (found == nullptr) return absl::NotFoundError(util::StrCat("no shard ", id));
    ShardRecord s = *found;
    if (IsTerminal(s.state)) {
      return absl::FailedPreconditionError(
          util::StrCat("shard ", id, " already ended (", ShardStateName(s.state), ")"));
    }
    Mutation m;
    m.name = "CancelShard";
    table_.Revoke(s, clock_->Now(), util::StrCat("cancelled by ", caller.name), m);
    s.state = ShardState::kCancelled;
    s.last_error = util::StrCat("cancelled by ", caller.name, reason.empty() ? "" : ": ", reason);
    AuditLocked(m, caller, "cancel_shard", id, reason);
    const std::string sweep_id = s.sweep_id;
    std::vector<ShardRecord> shards{s};
    std::vector<std::string> released;
    CascadeLocked(s, nullptr, shards, &released);
    std::vector<AgentRecord> agents;
    if (auto st = CommitLocked(m, shards, agents, after); !st.ok()) return st;
    EmitLocked(sweep_id, util::StrCat("shard ", id, " cancelled by ", caller.name), after);
    for (const auto& line : released) EmitLocked(sweep_id, line, after);
    return ShardViewLocked(table_.shard(id));
  });
}

absl::StatusOr<v1::Sweep> Coordinator::CancelSweep(const std::string& id, const std::string& reason,
                                                   const Caller& caller) {
  return Operate(Ack::kDurable, [&](Effects& after) -> absl::StatusOr<v1::Sweep> {
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
      ShardRecord s = table_.shard(sid);
      if (IsTerminal(s.state)) continue;
      table_.Revoke(s, now, "sweep cancelled", m);
      s.state = ShardState::kCancelled;
      s.last_error = "sweep cancelled";
      shards.push_back(std::move(s));
    }
    SweepRecord rec = it->second.rec;
    rec.state = SweepState::kCancelled;
    rec.finished_at = now;
    rec.error = util::StrCat("cancelled by ", caller.name, reason.empty() ? "" : ": ", reason);
    // What it decided before the cancel is final: its outcomes are counted now (and not again
    // when its outputs are built on request).
    const bool count_outcomes = !rec.details.outcomes_counted();
    rec.details.set_outcomes_counted(true);
    m.sweeps.push_back(&rec);
    AuditLocked(m, caller, "cancel_sweep", id, reason);
    it->second.rec.state = SweepState::kCancelled;  // keeps MaybeFinish from merging
    std::vector<AgentRecord> agents;
    if (auto st = CommitLocked(m, shards, agents, after); !st.ok()) {
      it->second.rec.state = SweepState::kRunning;
      return st;
    }
    it->second.rec = rec;
    if (count_outcomes) CountOutcomes(TalliesLocked(it->second, nullptr));
    metrics_->SweepStateChanged("running", "cancelled");
    EmitLocked(id, util::StrCat("sweep cancelled by ", caller.name), after);
    return ViewLocked(it->second);
  });
}

absl::StatusOr<v1::Sweep> Coordinator::ResumeSweep(const std::string& id, int max_failed_shards,
                                                   const std::string& reason,
                                                   const Caller& caller) {
  return Operate(Ack::kDurable, [&](Effects& after) -> absl::StatusOr<v1::Sweep> {
    auto it = sweeps_.find(id);
    if (it == sweeps_.end()) return absl::NotFoundError(util::StrCat("no sweep ", id));
    SweepRt& sw = it->second;
    if (sw.rec.state != SweepState::kRunning) {
      return absl::FailedPreconditionError(
          util::StrCat("sweep ", id, " is ", SweepStateName(sw.rec.state), ", not running"));
    }
    const int failed = FailedShards(sw);
    if (max_failed_shards < 0 || max_failed_shards > 100000 ||
        (max_failed_shards > 0 && max_failed_shards <= failed)) {
      return absl::InvalidArgumentError(
          util::StrCat("max_failed_shards must be above the sweep's ", failed,
                       " failed shards (or 0: no budget), got ", max_failed_shards));
    }
    SweepRecord rec = sw.rec;
    rec.request.set_max_failed_shards(max_failed_shards);
    Mutation m;
    m.name = "ResumeSweep";
    m.sweeps.push_back(&rec);
    AuditLocked(m, caller, "resume_sweep", id,
                util::StrCat("max_failed_shards ", sw.rec.request.max_failed_shards(), " -> ",
                             max_failed_shards, reason.empty() ? "" : "; ", reason));
    std::vector<ShardRecord> shards;
    std::vector<AgentRecord> agents;
    if (auto st = CommitLocked(m, shards, agents, after); !st.ok()) return st;
    sw.rec = rec;
    CheckBudgetLocked(sw);
    RefreshProblemsLocked(after);
    ServeWaitersLocked(after);
    EmitLocked(id, util::StrCat("failure budget set to ", max_failed_shards, " by ", caller.name),
               after);
    return ViewLocked(sw);
  });
}

// ---------------------------------------------------------------------------------------------
// Agents

v1::Agent Coordinator::AgentViewLocked(const AgentRecord& a) const {
  v1::Agent v;
  *v.mutable_dimensions() = a.dims;
  v.set_state(LeaseTable::AgentStateName(a));
  v.set_session_id(a.session_id);
  v.set_last_heartbeat_unix_ms(ToUnixMillis(a.last_heartbeat));
  v.set_registered_unix_ms(ToUnixMillis(a.registered_at));
  for (const auto& l : a.leases) {
    if (const ShardRecord* s = table_.ShardOfLease(l)) v.add_shard_ids(s->id);
  }
  return v;
}

std::vector<v1::Agent> Coordinator::ListAgents() {
  std::lock_guard lock(mu_);
  std::vector<v1::Agent> out;
  for (const auto& [id, a] : table_.agents()) out.push_back(AgentViewLocked(a));
  return out;
}

absl::StatusOr<v1::Agent> Coordinator::SetDraining(const std::string& agent_id, bool draining,
                                                   const std::string& reason,
                                                   const Caller& caller) {
  return Operate(Ack::kDurable, [&](Effects& after) -> absl::StatusOr<v1::Agent> {
    const AgentRecord* found = table_.FindAgent(agent_id);
    if (found == nullptr) return absl::NotFoundError(util::StrCat("no agent ", agent_id));
    AgentRecord a = *found;
    a.draining = draining;
    Mutation m;
    m.name = draining ? "DrainAgent" : "UndrainAgent";
    AuditLocked(m, caller, draining ? "drain_agent" : "undrain_agent", agent_id, reason);
    std::vector<ShardRecord> shards;
    std::vector<AgentRecord> agents{a};
    if (auto st = CommitLocked(m, shards, agents, after); !st.ok()) return st;
    if (draining) {
      // Its waiting long-polls end now.
      for (auto& w : table_.TakeWaitersOf(agent_id)) {
        v1::LeaseResponse resp;
        resp.set_draining(true);
        after.Answer(w.done, resp);
      }
    }
    return AgentViewLocked(*table_.FindAgent(agent_id));
  });
}

// ---------------------------------------------------------------------------------------------
// Time

void Coordinator::ForgetOfflineAgentsLocked(TimePoint now, Effects& after) {
  Mutation m;
  m.name = "ForgetAgents";
  m.removed_agents = table_.ForgettableAgents(now);
  if (m.removed_agents.empty()) return;
  std::vector<ShardRecord> shards;
  std::vector<AgentRecord> agents;
  if (!CommitLocked(m, shards, agents, after).ok()) return;  // tried again next tick
  for (const auto& id : m.removed_agents) {
    table_.Remove(id);
    spdlog::info("agent {} forgotten: offline for more than {} s", id,
                 static_cast<long long>(ToSeconds(options_.offline_retention)));
  }
}

void Coordinator::ExpireLeasesLocked(TimePoint now, Effects& after) {
  Mutation m;
  m.name = "ExpireLeases";
  std::vector<ShardRecord> shards =
      table_.ExpireLeases(now, m, [this](const ShardRecord& s) { return MaxAttempts(s); });
  if (shards.empty()) return;
  std::vector<AgentRecord> agents;
  std::set<std::string> sweeps;
  for (const auto& s : shards) sweeps.insert(s.sweep_id);
  if (!CommitLocked(m, shards, agents, after).ok()) return;
  for (const auto& a : m.attempts) {
    const ShardRecord* s = table_.FindShard(a.shard_id);
    after.push_back(AttemptLog(spdlog::level::warn, s != nullptr ? s->sweep_id : "", a.shard_id,
                               a.lease_id, a.reason));
  }
  for (const auto& sw : sweeps) EmitLocked(sw, "leases expired", after);
}

void Coordinator::YieldBackupsLocked(TimePoint now, Effects& after) {
  Mutation m;
  m.name = "YieldBackups";
  std::vector<ShardRecord> shards = table_.YieldBackups(now, m);
  if (shards.empty()) return;
  std::vector<AgentRecord> agents;
  if (!CommitLocked(m, shards, agents, after).ok()) return;
  for (const auto& a : m.attempts) {
    const ShardRecord* s = table_.FindShard(a.shard_id);
    const std::string sweep_id = s != nullptr ? s->sweep_id : "";
    EmitLocked(sweep_id, util::StrCat("shard ", a.shard_id, ": backup yielded, ", a.reason), after);
    after.push_back(AttemptLog(spdlog::level::info, sweep_id, a.shard_id, a.lease_id,
                               util::StrCat("backup yielded: ", a.reason)));
  }
}

void Coordinator::RefreshProblemsLocked(Effects& after) {
  std::map<std::string, std::vector<Unservable>> by_sweep;
  for (auto& u : table_.FindUnservable()) by_sweep[u.sweep_id].push_back(std::move(u));
  int blocked_sweeps = 0;
  std::vector<SweepProgress> running;
  for (auto& [id, sw] : sweeps_) {
    if (sw.rec.state != SweepState::kRunning) {
      sw.live_problems.clear();
      sw.blocked = false;
      CheckBudgetLocked(sw);  // an ended sweep holds nothing
      continue;
    }
    const v1::EntryCounts counts = CountLocked(sw, nullptr);
    running.push_back({id, counts.queued(), counts.running(), counts.done()});
    std::vector<std::string> problems;
    int unservable = 0;
    for (auto& [lane, p] : sw.lanes) p.unservable = false;
    for (const auto& u : by_sweep[id]) {
      problems.push_back(u.message);
      unservable += u.queued;
      // The lane its shards run in (ShardArch): probe work is cpu, the rest its one arch.
      const auto& req = u.requirement;
      sw.lanes[req.cpu_ok || req.archs.empty() ? std::string("cpu") : req.archs.front()]
          .unservable = true;
    }
    const int quarantined = sw.by_state[static_cast<int>(ShardState::kQuarantined)];
    if (quarantined > 0) {
      constexpr int kListed = 5;
      std::vector<std::string> listed;
      for (const auto& sid : sw.shard_ids) {
        const ShardRecord& sh = table_.shard(sid);
        if (sh.state != ShardState::kQuarantined) continue;
        if (static_cast<int>(listed.size()) == kListed) break;
        listed.push_back(util::StrCat(sid, sh.last_error.empty() ? "" : ": ", sh.last_error));
      }
      problems.push_back(util::StrCat(
          quarantined, quarantined == 1 ? " shard is" : " shards are",
          " quarantined after their attempts failed; `triagectl shard requeue ID` retries one (",
          util::StrJoin(listed, "; "), quarantined > kListed ? "; ..." : "", ")"));
    }
    if (sw.over_budget) {
      std::vector<std::string> listed;
      constexpr std::size_t kListed = 5;
      for (const auto& sid : sw.farm_failed) {
        if (listed.size() == kListed) break;
        listed.push_back(sid);
      }
      problems.push_back(util::StrCat(
          "failure budget spent: ", FailedShards(sw), " shards failed on the farm (max ",
          sw.rec.request.max_failed_shards(),
          "; an attempt the agent reported failed or whose result was rejected, or quarantined; "
          "a model's crash or timeout is its entry's outcome and does not count): ",
          util::StrJoin(listed, ", "), sw.farm_failed.size() > listed.size() ? ", ..." : "",
          ", so no more shards are leased; look at the agents, then `triagectl sweep resume ", id,
          " --max-failed-shards ",
          FailedShards(sw) + std::max(1, sw.rec.request.max_failed_shards()),
          " --reason \"agents checked\"` or `triagectl sweep cancel ", id,
          " --reason \"failure budget spent\"`"));
    }
    const int active = sw.by_state[static_cast<int>(ShardState::kLeased)] +
                       sw.by_state[static_cast<int>(ShardState::kRunning)];
    const int servable = sw.by_state[static_cast<int>(ShardState::kQueued)] - unservable;
    const bool blocked = sw.over_budget || (sw.unfinished > 0 && active == 0 && servable <= 0);
    blocked_sweeps += blocked ? 1 : 0;
    if (problems != sw.live_problems || blocked != sw.blocked) {
      const bool became_blocked = blocked && !sw.blocked;
      sw.live_problems = std::move(problems);
      sw.blocked = blocked;
      EmitLocked(id,
                 became_blocked && sw.over_budget
                     ? "sweep stopped at its failure budget: it needs a person (see problems)"
                 : became_blocked           ? "sweep blocked: it needs a person (see problems)"
                 : sw.live_problems.empty() ? "problems cleared"
                                            : "problems changed",
                 after);
    }
  }
  metrics_->BlockedSweeps(blocked_sweeps);
  metrics_->RunningSweeps(running);
}

void Coordinator::Tick() {
  uploads_.Expire();
  Effects after;
  {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_->Now();
    // Silent agents go offline; their leases expire below.
    table_.MarkSilentAgentsOffline(now);
    ForgetOfflineAgentsLocked(now, after);
    ExpireLeasesLocked(now, after);
    // Long-polls that reached their limit.
    for (auto& w : table_.TakeExpiredWaiters(now)) after.Answer(w.done, v1::LeaseResponse{});
    // Backoffs that ended.
    ServeWaitersLocked(after);
    // Queued work that no idle agent took ends the backups of agents that can run it.
    YieldBackupsLocked(now, after);
    // A finished sweep whose final state could not be stored is retried.
    for (const auto& [id, sw] : sweeps_) {
      if (sw.rec.state == SweepState::kMerging) ScheduleFinishLocked(id, after);
    }
    // Health follows commits; the journal notices a database file deleted or replaced.
    journal_.Probe();
    table_.ReportOnCallAges(now);
    table_.ReportRunnerProblems();
    RefreshProblemsLocked(after);
  }
  journal_.Settle(after);
}

void Coordinator::StartGrace() {
  std::lock_guard lock(mu_);
  table_.StartGrace(clock_->Now());
}

}  // namespace triage::coord
