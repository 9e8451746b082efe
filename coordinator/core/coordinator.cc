// The front door: construction, the apply path, recovery, and the agent service. Sweeps are in
// sweeps.cc (their accounting in sweep_accounting.cc, registry waves in sweep_waves.cc),
// on-call operations and time in on_call.cc (docs/architecture.md).

#include "coordinator/core/coordinator.h"

#include <algorithm>
#include <cstdio>
#include <future>
#include <map>

#include "common/util/log.h"
#include "common/util/log_context.h"
#include "common/util/strings.h"
#include "coordinator/core/attempt_log.h"
#include "coordinator/planning/fan_out.h"
#include "coordinator/planning/shared_wave.h"
#include "coordinator/planning/waves.h"
#include "coordinator/scheduling/result_check.h"

namespace triage::coord {

Coordinator::Coordinator(CoordinatorOptions options, Store* store, Clock* clock, SweepReader reader,
                         CoordinatorMetrics* metrics)
    : options_(std::move(options)),
      clock_(clock),
      reader_(std::move(reader)),
      metrics_(metrics != nullptr ? metrics : &default_metrics_),
      journal_(store, metrics_, [this](const absl::Status& why) { Rebuild(why); }),
      uploads_(clock),
      table_(options_.scheduling(), metrics_,
             [this](const ShardRecord* old, const ShardRecord& updated) {
               OnShardChanged(old, updated);
             }) {}

Coordinator::~Coordinator() {
  journal_.Stop();  // its threads run callbacks that use the members below
  std::vector<LeaseTable::Waiter> waiters;
  {
    std::lock_guard lock(mu_);
    waiters = table_.TakeAllWaiters();
  }
  for (auto& w : waiters) w.done(absl::UnavailableError("coordinator shutting down"));
}

void Coordinator::StartCommitter() { journal_.Start(); }

void Coordinator::SetFinishHook(FinishHook hook) {
  std::lock_guard lock(mu_);
  finish_hook_ = std::move(hook);
}

bool Coordinator::healthy() const { return journal_.healthy(); }

int Coordinator::MaxAttempts(const ShardRecord& s) const {
  auto it = sweeps_.find(s.sweep_id);
  if (it != sweeps_.end() && it->second.rec.request.max_attempts() > 0) {
    return it->second.rec.request.max_attempts();
  }
  return options_.default_max_attempts;
}

// ---------------------------------------------------------------------------------------------
// The apply path

absl::Status Coordinator::CommitLocked(Mutation& m, std::vector<ShardRecord>& shards,
                                       std::vector<AgentRecord>& agents, Effects& after) {
  SupersedeRequeuedLocked(shards);
  m.shards.clear();
  for (const auto& s : shards) m.shards.push_back(&s);
  m.agents.clear();
  for (const auto& a : agents) m.agents.push_back(&a);
  if (absl::Status st = journal_.Stage(m, after); !st.ok()) return st;
  for (const auto& a : m.attempts) {
    // Device time spent on backups (docs/farm.md, "Backup leases"), counted when one ends.
    if (!a.backup || a.outcome.empty()) continue;
    if (const ShardRecord* s = table_.FindShard(a.shard_id)) {
      metrics_->BackupSeconds(LeaseTable::ShardArch(*s), ToSeconds(a.ended_at - a.granted_at));
    }
  }
  if (m.result) ApplyResultLocked(*m.result);
  std::set<std::string> touched_sweeps;
  for (auto& a : agents) table_.Put(std::move(a));
  for (auto& s : shards) {
    touched_sweeps.insert(s.sweep_id);
    table_.Put(std::move(s));
  }
  for (const auto& r : m.carried_results) ApplyResultLocked(r);
  for (const auto& id : touched_sweeps) MaybeFinishSweepLocked(id, after);
  ServeWaitersLocked(after);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Agent service

absl::StatusOr<v1::RegisterResponse> Coordinator::Register(const v1::RegisterRequest& req) {
  const auto& dims = req.dimensions();
  if (dims.agent_id().empty()) return absl::InvalidArgumentError("agent_id is required");
  if (!dims.cpu_only() && dims.arch().empty()) {
    return absl::InvalidArgumentError("arch is required for a device agent");
  }
  return Operate(Ack::kDurable, [&](Effects& after) -> absl::StatusOr<v1::RegisterResponse> {
    const TimePoint now = clock_->Now();
    AgentRecord agent;
    std::vector<ShardRecord> shards;
    Mutation m;
    m.name = "RegisterAgent";
    const AgentRecord* known = table_.FindAgent(dims.agent_id());
    if (known != nullptr) agent = *known;
    const std::string problem_before = agent.dims.runner_problem();
    const bool resumed = known != nullptr && !req.resume_session_id().empty() &&
                         req.resume_session_id() == known->session_id;
    agent.dims = dims;
    if (agent.dims.cpu_only() && agent.dims.arch().empty()) agent.dims.set_arch("cpu");
    if (!resumed) {
      agent.session_id = table_.NewSessionId();
      agent.registered_at = now;
      if (known != nullptr) {
        const std::set<std::string> held(req.held_lease_ids().begin(), req.held_lease_ids().end());
        shards = table_.FenceRestartedAgent(*known, held, now, m);
        agent.revoked.clear();
      }
    }
    agent.last_heartbeat = now;
    agent.offline = false;
    std::vector<AgentRecord> agents{agent};
    if (auto st = CommitLocked(m, shards, agents, after); !st.ok()) return st;
    // docs/farm.md, "Only a working agent is a witness": the next tick's problems see it too.
    if (dims.runner_problem() != problem_before) {
      after.push_back([id = dims.agent_id(), problem = dims.runner_problem()] {
        if (problem.empty()) {
          spdlog::info("agent {}: its runner check passes: native work goes to it again", id);
        } else {
          spdlog::warn("agent {} cannot run tt-xla's runner: {}; no native work goes to it", id,
                       problem);
        }
      });
    }
    v1::RegisterResponse resp;
    resp.set_session_id(agent.session_id);
    resp.set_heartbeat_interval_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.heartbeat_interval).count());
    resp.set_lease_wait_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.lease_wait_limit).count());
    resp.set_resumed(resumed);
    return resp;
  });
}

absl::StatusOr<v1::HeartbeatResponse> Coordinator::Heartbeat(const v1::HeartbeatRequest& req) {
  return Operate(Ack::kAtOnce, [&](Effects& after) -> absl::StatusOr<v1::HeartbeatResponse> {
    v1::HeartbeatResponse resp = table_.Heartbeat(req, clock_->Now());
    if (!resp.reregister()) ServeWaitersLocked(after);
    return resp;
  });
}

absl::StatusOr<v1::LeaseResponse> Coordinator::GrantLocked(const AgentRecord& agent,
                                                           const ShardRecord& shard,
                                                           const std::string& request_id,
                                                           int max_batch, Effects& after) {
  const TimePoint now = clock_->Now();
  Mutation m;
  m.name = "GrantLease";
  // The head and, for a verify phase, the batch the agent can run with it: one commit.
  std::vector<ShardRecord> shards{table_.Grant(agent, shard, now, m)};
  for (const ShardRecord* more : table_.BatchFor(agent, shard, max_batch, now)) {
    shards.push_back(table_.Grant(agent, *more, now, m));
  }
  std::vector<std::string> ids;
  for (const auto& s : shards) ids.push_back(s.id);
  const std::string sweep_id = shards.front().sweep_id;
  const bool verify = shards.front().spec.phase() == v1::PHASE_VERIFY;
  const std::string arch = shards.front().spec.arch();
  std::vector<AgentRecord> agents;
  if (auto st = CommitLocked(m, shards, agents, after); !st.ok()) return st;
  if (verify) metrics_->VerifyBatch(arch, static_cast<int>(ids.size()));
  std::vector<const ShardRecord*> granted;
  double planned = 0;  // a batch's shard ends after those before it
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const ShardRecord& g = table_.shard(ids[i]);
    granted.push_back(&g);
    table_.RememberRequest(g.lease->lease_id, request_id, static_cast<int>(i));
    planned += std::max(0.0, g.expected_seconds);
    table_.RememberPlan(g.lease->lease_id, planned);
    const std::string with =
        i == 0 ? std::string() : util::StrCat(" in a batch with ", ids.front());
    EmitLocked(sweep_id, util::StrCat("shard ", g.id, " leased by ", g.lease->agent_id, with),
               after);
    after.push_back(AttemptLog(spdlog::level::info, sweep_id, g.id, g.lease->lease_id,
                               util::StrCat("leased by ", g.lease->agent_id, with)));
  }
  return LeaseTable::Granted(granted);
}

absl::StatusOr<v1::LeaseResponse> Coordinator::GrantBackupLocked(const AgentRecord& agent,
                                                                 const ShardRecord& straggler,
                                                                 Effects& after) {
  const TimePoint now = clock_->Now();
  Mutation m;
  m.name = "GrantBackup";
  std::vector<ShardRecord> shards{table_.GrantBackup(agent, straggler, now, m)};
  std::vector<AgentRecord> agents;
  const std::string id = straggler.id;
  const std::string sweep_id = straggler.sweep_id;
  const std::string why =
      util::StrCat("backup on ", agent.dims.agent_id(), ": running on ", straggler.lease->agent_id,
                   " for ", static_cast<long long>(ToSeconds(now - straggler.lease->granted_at)),
                   " s, expected ", static_cast<long long>(straggler.expected_seconds), " s");
  if (auto st = CommitLocked(m, shards, agents, after); !st.ok()) return st;
  const ShardRecord& s = table_.shard(id);
  table_.RememberPlan(s.backup->lease_id, s.expected_seconds);
  EmitLocked(sweep_id, util::StrCat("shard ", id, " ", why), after);
  after.push_back(AttemptLog(spdlog::level::info, sweep_id, id, s.backup->lease_id, why));
  return LeaseTable::GrantedBackup(s);
}

std::int64_t Coordinator::Lease(const v1::LeaseRequest& req, LeaseCallback done) {
  Effects after;
  std::int64_t wait_id = 0;
  {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_->Now();
    AgentRecord* agent = table_.FindAgent(req.agent_id());
    v1::LeaseResponse resp;
    if (agent == nullptr || agent->session_id != req.session_id()) {
      resp.set_reregister(true);
      after.Answer(done, resp);
    } else {
      table_.Seen(*agent, now);
      if (auto same = table_.SameRequest(*agent, req.request_id()); !same.empty()) {
        // A retried Lease (same request id) gets the same grant back.
        after.Answer(done, LeaseTable::Granted(same));
      } else if (agent->draining) {
        resp.set_draining(true);
        after.Answer(done, resp);
      } else if (const ShardRecord* shard = table_.FindMatch(*agent, now, req.max_batch())) {
        after.Answer(done, GrantLocked(*agent, *shard, req.request_id(), req.max_batch(), after));
      } else if (const ShardRecord* straggler = table_.FindStraggler(*agent, now)) {
        // Nothing queued for it: it runs a second attempt of a straggler.
        after.Answer(done, GrantBackupLocked(*agent, *straggler, after));
      } else if (req.wait_ms() <= 0) {
        after.Answer(done, resp);
      } else {
        wait_id = table_.AddWaiter(req, now, std::move(done));
      }
    }
    // A retried grant, or an answer that reflects writes still being committed, is sent once
    // they are durable.
    journal_.WaitForStaged(after);
  }
  journal_.Settle(after);
  return wait_id;
}

void Coordinator::CancelLease(std::int64_t wait_id) {
  LeaseCallback done;
  {
    std::lock_guard lock(mu_);
    done = table_.CancelWaiter(wait_id);
  }
  if (done) done(absl::CancelledError("lease wait cancelled"));
}

void Coordinator::ServeWaitersLocked(Effects& after) {
  table_.ServeWaiters(
      clock_->Now(),
      [&](LeaseTable::Waiter& w, const AgentRecord& agent, const ShardRecord& shard) {
        after.Answer(w.done, GrantLocked(agent, shard, w.request_id, w.max_batch, after));
      },
      [&](LeaseTable::Waiter& w) {
        v1::LeaseResponse resp;
        resp.set_reregister(true);
        after.Answer(w.done, resp);
      });
}

absl::StatusOr<v1::ProgressResponse> Coordinator::ReportProgress(const v1::ProgressRequest& req) {
  return Operate(Ack::kAtOnce, [&](Effects& after) -> absl::StatusOr<v1::ProgressResponse> {
    v1::ProgressResponse resp = table_.Progress(req, clock_->Now());
    if (resp.revoked()) return resp;
    const ShardRecord* s = table_.ShardOfLease(req.lease_id());
    EmitLocked(s->sweep_id,
               util::StrCat("shard ", s->id, ": ", req.step(),
                            req.entry().empty() ? "" : util::StrCat(" ", req.entry())),
               after);
    return resp;
  });
}

absl::StatusOr<v1::CompleteResponse> Coordinator::Complete(const v1::CompleteRequest& req) {
  std::promise<absl::StatusOr<v1::CompleteResponse>> answer;
  auto got = answer.get_future();
  Complete(req,
           [&answer](absl::StatusOr<v1::CompleteResponse> r) { answer.set_value(std::move(r)); });
  return got.get();
}

void Coordinator::Complete(const v1::CompleteRequest& req, CompleteCallback done) {
  Effects after;
  absl::StatusOr<v1::CompleteResponse> r;
  {
    std::lock_guard lock(mu_);
    r = CompleteLocked(req, after);
    // Answered once everything staged so far is durable: also a duplicate, whose first copy
    // may still be in the commit under way.
    journal_.WaitForStaged(after);
  }
  after.Answer(done, std::move(r));
  journal_.Settle(after);
}

absl::StatusOr<v1::CompleteResponse> Coordinator::CompleteLocked(const v1::CompleteRequest& req,
                                                                 Effects& after) {
  v1::CompleteResponse resp;
  const TimePoint now = clock_->Now();
  auto intake = table_.Admit(req);
  if (!intake.ok()) return intake.status();
  if (intake->kind == LeaseTable::Intake::Kind::kDuplicate) {
    resp.set_accepted(true);
    resp.set_duplicate(true);
    return resp;
  }
  if (intake->kind == LeaseTable::Intake::Kind::kStale) {
    metrics_->StaleResultRejected(intake->metric_reason);
    resp.set_accepted(false);
    resp.set_rejected_reason(intake->why);
    return resp;
  }
  ShardRecord s = std::move(intake->shard);
  const TimePoint granted_at = s.lease->granted_at;
  metrics_->ShardRunTime(LeaseTable::ShardArch(s), s.spec.playbook(), ToSeconds(now - granted_at));
  if (absl::Status owned = CheckResultOwnership(s.spec, req.result()); !owned.ok()) {
    return EndAttemptLocked(std::move(s), "RejectResult", util::MessageOf(owned), after);
  }
  if (req.result().status() != v1::ShardResult::SUCCEEDED) {
    return EndAttemptLocked(
        std::move(s), "FailAttempt",
        req.result().error().empty() ? "the agent reported a failure" : req.result().error(),
        after);
  }
  if (auto again = RunAgainOnTopLocked(s, req.result(), after)) return std::move(*again);
  return RecordResultLocked(std::move(s), req.result(), after);
}

absl::StatusOr<v1::CompleteResponse> Coordinator::EndAttemptLocked(ShardRecord s,
                                                                   const std::string& operation,
                                                                   const std::string& why,
                                                                   Effects& after) {
  // A rejected result (it broke the shard's rules) or a failure the agent reported: both are
  // the work's fault, so they count toward max_attempts.
  const bool rejected = operation == "RejectResult";
  const std::string arch = LeaseTable::ShardArch(s);
  Mutation m;
  m.name = operation;
  table_.FailAttempt(s, rejected ? "rejected" : "failed", why, clock_->Now(), m, Fault::kWork,
                     MaxAttempts(s));
  metrics_->ShardCompleted(arch, s.spec.playbook(), rejected ? "rejected" : "failed");
  if (s.state == ShardState::kQuarantined) metrics_->ShardAttempts(s.spec.playbook(), s.attempts);
  const std::string id = s.id;
  const std::string sweep_id = s.sweep_id;
  const std::string lease_id = m.attempts.empty() ? "" : m.attempts.front().lease_id;
  std::vector<ShardRecord> shards{std::move(s)};
  std::vector<AgentRecord> agents;
  if (auto st = CommitLocked(m, shards, agents, after); !st.ok()) return st;
  after.push_back(
      AttemptLog(spdlog::level::warn, sweep_id, id, lease_id,
                 util::StrCat(rejected ? "result rejected: " : "attempt failed: ", why)));
  if (auto sw = sweeps_.find(sweep_id); sw != sweeps_.end()) NoteFarmFailureLocked(sw->second, id);
  v1::CompleteResponse resp;
  if (rejected) {
    EmitLocked(sweep_id, util::StrCat("shard ", id, " result rejected: ", why), after);
    metrics_->StaleResultRejected("disallowed_file");
    resp.set_accepted(false);
    resp.set_rejected_reason(why);
  } else {
    EmitLocked(sweep_id, util::StrCat("shard ", id, " attempt failed: ", why), after);
    resp.set_accepted(true);
  }
  return resp;
}

absl::StatusOr<v1::CompleteResponse> Coordinator::RecordResultLocked(ShardRecord s,
                                                                     const v1::ShardResult& result,
                                                                     Effects& after) {
  const TimePoint now = clock_->Now();
  const LeaseInfo lease = *s.lease;
  Mutation m;
  m.name = "RecordResult";
  m.attempts.push_back(LeaseTable::EndedAttempt(s, now, "succeeded", ""));
  // A backup, or the lease a backup beat: superseded in this commit.
  const std::optional<LeaseInfo> other = s.backup;
  table_.EndOtherAttempt(s, now, m);
  ResultRecord r;
  r.lease_id = lease.lease_id;
  r.shard_id = s.id;
  r.sweep_id = s.sweep_id;
  r.token = lease.token;
  r.accepted_at = now;
  r.result = result;
  m.result = r;
  s.lease.reset();
  s.state = ShardState::kSucceeded;
  s.last_error.clear();
  std::vector<ShardRecord> dependents;
  std::vector<std::string> followers;
  CascadeLocked(s, &result, dependents, &followers);
  const std::string id = s.id;
  const std::string sweep_id = s.sweep_id;
  const std::string arch = LeaseTable::ShardArch(s);
  const std::string playbook = s.spec.playbook();
  const int attempts = s.attempts;
  const int wave = s.spec.wave();
  const bool first_phase = s.spec.phase() != v1::PHASE_VERIFY && !s.spec.has_carried_from();
  const bool ahead = s.spec.ahead();
  const std::string loader = s.spec.loader();
  std::vector<ShardRecord> shards{std::move(s)};
  for (auto& d : dependents) shards.push_back(std::move(d));
  // Registry lines this result proposes that its wave did not have yet: the wave's queued
  // verifications of their classes' entries are split (SplitAtRiskLocked).
  SweepRt& sweep = sweeps_.at(sweep_id);
  std::set<std::string> fresh;
  for (const auto& op : result.registry_ops()) {
    if (first_phase && op.kind() == v1::RegistryOp::ADD &&
        !sweep.proposed.count({wave, op.cls()})) {
      fresh.insert(op.cls());
    }
  }
  const std::size_t released = shards.size();
  if (!fresh.empty()) {
    std::set<std::string> listed;
    for (const auto& d : shards) listed.insert(d.id);
    for (const auto& sid : sweep.shard_ids) {
      const ShardRecord& q = table_.shard(sid);
      if (q.state == ShardState::kQueued && q.spec.phase() == v1::PHASE_VERIFY &&
          q.spec.wave() == wave && !listed.count(sid)) {
        shards.push_back(q);
      }
    }
  }
  const std::size_t listed_end = shards.size();
  std::vector<std::string> splits = SplitLongLocked(sweep, 1, released, shards);
  for (auto& line : SplitAtRiskLocked(sweep, fresh, shards)) splits.push_back(std::move(line));
  GateAheadLocked(sweep, shards);
  {
    // Of the queued ones listed, only those split or ranked again are written.
    std::vector<ShardRecord> kept;
    for (std::size_t k = 0; k < shards.size(); ++k) {
      if (k >= released && k < listed_end &&
          shards[k].spec.entries_size() == table_.shard(shards[k].id).spec.entries_size() &&
          shards[k].gates_seconds == table_.shard(shards[k].id).gates_seconds) {
        continue;
      }
      kept.push_back(std::move(shards[k]));
    }
    shards = std::move(kept);
  }
  for (const auto& d : shards) {
    const ShardRecord* old = table_.FindShard(d.id);
    if (d.id != id &&
        (old == nullptr || d.spec.SerializeAsString() != old->spec.SerializeAsString())) {
      m.shard_specs.push_back(&d);
    }
  }
  std::vector<AgentRecord> agents;
  if (auto st = CommitLocked(m, shards, agents, after); !st.ok()) return st;
  metrics_->ShardCompleted(arch, playbook, "succeeded");
  metrics_->ShardAttempts(playbook, attempts);
  EmitLocked(sweep_id, util::StrCat("shard ", id, " completed by ", lease.agent_id), after);
  for (const auto& line : followers) {
    EmitLocked(sweep_id, line, after);
    after.push_back(AttemptLog(spdlog::level::info, sweep_id, id, lease.lease_id, line));
  }
  for (const auto& line : splits) EmitLocked(sweep_id, line, after);
  if (first_phase && !ahead && wave == sweep.wave) {
    // The next wave's shards whose inputs this result may have completed: its loader's, once
    // the loader's first phases have all ended; with a new line, every such loader's.
    std::set<std::string> loaders;
    if (!fresh.empty()) {
      for (const auto& [l, open] : sweep.open_first_by_loader) {
        if (open == 0) loaders.insert(l);
      }
    } else if (auto it = sweep.open_first_by_loader.find(loader);
               it != sweep.open_first_by_loader.end() && it->second == 0) {
      loaders.insert(loader);
    }
    PlanAheadLocked(sweep, loaders, after);
  }
  after.push_back(AttemptLog(spdlog::level::info, sweep_id, id, lease.lease_id,
                             util::StrCat("completed by ", lease.agent_id)));
  if (other) {
    const std::string race =
        util::StrCat(lease.backup ? "backup on " : "first lease on ", lease.agent_id,
                     " accepted first; ", other->backup ? "the backup on " : "the first lease on ",
                     other->agent_id, " is superseded");
    EmitLocked(sweep_id, util::StrCat("shard ", id, ": ", race), after);
    after.push_back(AttemptLog(spdlog::level::info, sweep_id, id, other->lease_id, race));
  }
  v1::CompleteResponse resp;
  resp.set_accepted(true);
  return resp;
}

void Coordinator::CascadeLocked(const ShardRecord& ended, const v1::ShardResult* result,
                                std::vector<ShardRecord>& out, std::vector<std::string>* events) {
  for (const auto& id : table_.Dependents(ended.id)) {
    const ShardRecord& d = table_.shard(id);
    if (d.state != ShardState::kWaiting) continue;
    ShardRecord u = d;
    const TimePoint now = clock_->Now();
    if (u.spec.fan_out().lead_shard() == ended.id && IsWaveShard(u.spec)) {
      // The wave over what the lead's shared fix can affect (docs/remediation.md).
      std::string line = ReleaseWave(ended, result, u, now);
      if (events != nullptr) events->push_back(std::move(line));
      out.push_back(u);
      continue;
    }
    if (u.spec.fan_out().lead_shard() == ended.id) {
      // A cluster's follower (docs/remediation.md, "Fix once, verify many"): released by its
      // lead whatever the lead's end; a lead that failed or was cancelled costs it no run.
      std::string line = ReleaseFollower(ended, result, u, now);
      if (events != nullptr) events->push_back(std::move(line));
      out.push_back(u);
      continue;
    }
    if (ended.spec.has_fan_out()) {
      // A follower's own later phases verify with what it verified with: the lead's pre-applied
      // shared edits and registry lines, then its own.
      for (const auto& fe : ended.spec.pre_apply()) *u.spec.add_pre_apply() = fe;
      for (const auto& op : ended.spec.pre_registry()) *u.spec.add_pre_registry() = op;
    }
    if (ended.state == ShardState::kSucceeded && result != nullptr) {
      // Only entries the earlier phase left for verification go on, each with the output
      // class the probe saw (which registry lines its verification depends on) and whether the
      // probe showed its reason to be false.
      std::map<std::string, const v1::EntryOutcome*> keep;  // file + key -> its probe outcome
      for (const auto& o : result->entries()) {
        if (NeedsVerification(o)) keep[o.file() + "\n" + o.key()] = &o;
      }
      if (result->entries_size() > 0) {
        auto* entries = u.spec.mutable_entries();
        for (int i = entries->size() - 1; i >= 0; --i) {
          auto k = keep.find(entries->Get(i).file() + "\n" + entries->Get(i).key());
          if (k == keep.end()) {
            entries->DeleteSubrange(i, 1);
          } else {
            entries->Mutable(i)->set_output_class(k->second->output_class());
            entries->Mutable(i)->set_old_reason_stale(k->second->old_reason_stale());
          }
        }
        if (entries->empty()) {
          u.state = ShardState::kSucceeded;
          u.last_error = "nothing left to verify";
          out.push_back(u);
          continue;
        }
        // The estimate follows the entries left (longest-first would otherwise put a shard
        // whose entries mostly stopped ahead of one that verifies them all).
        const int planned = d.spec.entries_size();
        if (planned > 0 && entries->size() < planned) {
          u.expected_seconds = d.expected_seconds * entries->size() / planned;
        }
      }
      for (const auto& fe : result->file_edits()) *u.spec.add_pre_apply() = fe;
      for (const auto& op : result->registry_ops()) *u.spec.add_pre_registry() = op;
      u.state = ShardState::kQueued;  // whether likely superseded: SplitAtRiskLocked, after
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
// Recovery

absl::Status Coordinator::Recover() {
  auto snap = journal_.Load();
  if (!snap.ok()) return snap.status();
  Effects after;
  {
    std::lock_guard lock(mu_);
    RecoverLocked(std::move(*snap), after);
  }
  journal_.Settle(after);
  return absl::OkStatus();
}

void Coordinator::RecoverLocked(Snapshot snap, Effects& after) {
  const TimePoint now = clock_->Now();
  recovering_ = true;
  for (auto& a : snap.agents) table_.Recovered(std::move(a), now);
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
    AddSweepLocked(std::move(rt));
  }
  std::sort(snap.shards.begin(), snap.shards.end(),
            [](const ShardRecord& a, const ShardRecord& b) { return a.seq < b.seq; });
  for (auto& s : snap.shards) {
    next_seq_ = std::max(next_seq_, s.seq + 1);
    table_.Recovered(std::move(s), now);
  }
  for (const auto& r : snap.results) ApplyResultLocked(r);
  // The failure budget of the sweeps still running: their shards' failed and rejected attempts,
  // from the store (quarantined shards were counted as they were recovered).
  for (auto& [id, sw] : sweeps_) {
    if (sw.rec.state != SweepState::kRunning) continue;
    for (const auto& sid : std::vector<std::string>(sw.shard_ids)) {
      auto attempts = journal_.Attempts(sid);
      if (!attempts.ok()) continue;  // the store answers for itself on its next commit
      for (const auto& a : *attempts) {
        if (a.outcome == "failed" || a.outcome == "rejected") NoteFarmFailureLocked(sw, sid);
      }
    }
  }
  recovering_ = false;
  for (auto& [id, sw] : sweeps_) MaybeFinishSweepLocked(id, after);
}

void Coordinator::ResetLocked() {
  for (const auto& [id, sw] : sweeps_) {
    for (const auto& [key, e] : sw.entries) {
      metrics_->EntryStateChanged(e.playbook, EntryStateName(e), "");
    }
    metrics_->SweepStateChanged(SweepStateName(sw.rec.state), "");
  }
  table_.Clear();
  sweeps_.clear();
}

void Coordinator::Rebuild(const absl::Status& why) {
  Effects after;
  {
    std::lock_guard lock(mu_);
    Snapshot snap = journal_.Rewind(why);
    ResetLocked();
    RecoverLocked(std::move(snap), after);
  }
  journal_.Settle(after);
}

}  // namespace triage::coord
