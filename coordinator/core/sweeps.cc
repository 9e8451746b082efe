// The front door's sweep lifecycle: start (validate, read, plan), registry waves, finishing,
// views, counts and watches (docs/architecture.md).

#include <algorithm>
#include <cstdio>
#include <set>

#include "common/util/log.h"
#include "common/util/strings.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/planning/carry.h"
#include "coordinator/planning/phases.h"
#include "coordinator/planning/planner.h"
#include "coordinator/planning/start_request.h"
#include "coordinator/planning/waves.h"
#include "coordinator/scheduling/result_check.h"

namespace triage::coord {

static_assert(static_cast<int>(ShardState::kCancelled) == 7, "SweepRt::by_state has 8 slots");

std::string Coordinator::EntryStateName(const EntryRt& e) {
  if (e.shards > 0 && e.terminal == e.shards) return "done";
  return e.active > 0 ? "running" : "queued";
}

// A shard's record changes (LeaseTable::Put): its sweep's entries, per-state counts and lanes
// follow.
void Coordinator::OnShardChanged(const ShardRecord* old, const ShardRecord& updated) {
  auto sweep = sweeps_.find(updated.sweep_id);
  if (sweep == sweeps_.end()) return;
  SweepRt& sw = sweep->second;
  const ShardState old_state = old != nullptr ? old->state : updated.state;
  auto active = [](ShardState s) { return s == ShardState::kLeased || s == ShardState::kRunning; };
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
      EntryRt& rt = sw.entries[EntryKey(e)];
      std::string before = EntryStateName(rt);
      rt.terminal += 1;
      std::string after = EntryStateName(rt);
      if (before != after) metrics_->EntryStateChanged(rt.playbook, before, after);
    }
  }
  if (d_terminal != 0 || d_active != 0 || old == nullptr) {
    for (const auto& e : updated.spec.entries()) {
      EntryRt& rt = sw.entries[EntryKey(e)];
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
  if (old == nullptr) {
    sw.shard_ids.push_back(updated.id);
    sw.shards_by_loader[updated.spec.loader()].push_back(updated.id);
    sw.verify_may_change |= !VerifyChangesOnlyYaml(updated.spec.executor());
  }
  // Carried shards keep waves at or below 0 (CarryForward): only this sweep's own count; a
  // shard planned ahead counts once its wave adopts it.
  if (!updated.spec.ahead()) sw.wave = std::max(sw.wave, updated.spec.wave());
  if (updated.spec.ahead()) {
    sw.planned_ahead.insert(updated.id);
  } else if (old != nullptr && old->spec.ahead()) {
    sw.planned_ahead.erase(updated.id);
  }
  const bool was_open = old != nullptr && !IsTerminal(old_state);
  const bool is_open = !IsTerminal(updated.state);
  sw.unfinished += (is_open ? 1 : 0) - (was_open ? 1 : 0);
  if (updated.spec.phase() != v1::PHASE_VERIFY) {
    const int d =
        (is_open && !updated.spec.ahead() ? 1 : 0) - (was_open && !old->spec.ahead() ? 1 : 0);
    sw.open_first += d;
    if (d != 0) sw.open_first_by_loader[updated.spec.loader()] += d;
  }
  sw.lanes[LeaseTable::ShardArch(updated)].open += (is_open ? 1 : 0) - (was_open ? 1 : 0);
  if (old != nullptr) sw.by_state[static_cast<int>(old_state)] -= 1;
  sw.by_state[static_cast<int>(updated.state)] += 1;
  if (old_state != updated.state) CheckBudgetLocked(sw);
}

namespace {

// A result whose every device-verified entry crashed or hung: from the coordinator, a device
// that takes every test down looks exactly like this, so it counts against the failure budget.
bool DeviceTookEveryTestDown(const v1::ShardResult& result) {
  int verified = 0;
  for (const auto& o : result.entries()) {
    if (o.arch().empty() || o.verdict().empty()) continue;
    if (o.verdict() != "crash" && o.verdict() != "timeout") return false;
    ++verified;
  }
  return verified > 0;
}

}  // namespace

int Coordinator::FailedShards(const SweepRt& s) {
  return s.by_state[static_cast<int>(ShardState::kQuarantined)] +
         static_cast<int>(s.device_down.size());
}

void Coordinator::CheckBudgetLocked(SweepRt& s) {
  const int budget = s.rec.request.max_failed_shards();
  const bool over = s.rec.state == SweepState::kRunning && budget > 0 && FailedShards(s) > budget;
  if (over == s.over_budget) return;
  s.over_budget = over;
  table_.Hold(s.rec.id, over);
}

const Coordinator::SweepRt* Coordinator::FindRequestLocked(const std::string& request_id) const {
  if (request_id.empty()) return nullptr;
  for (const auto& [id, sw] : sweeps_) {
    if (sw.rec.request.request_id() == request_id) return &sw;
  }
  return nullptr;
}

absl::StatusOr<const Coordinator::SweepRt*> Coordinator::CarryBaseLocked(
    const v1::StartSweepRequest& req, const std::string& repo) const {
  SweepRecord asked;
  asked.request = req;
  asked.repo = repo;
  if (!req.since().empty()) {
    auto it = sweeps_.find(req.since());
    if (it == sweeps_.end()) {
      return absl::NotFoundError(util::StrCat("since: no sweep ", req.since()));
    }
    const SweepRecord& base = it->second.rec;
    if (base.state == SweepState::kRunning || base.state == SweepState::kMerging) {
      return absl::FailedPreconditionError(util::StrCat("since: sweep ", base.id, " is still ",
                                                        SweepStateName(base.state),
                                                        "; carry from a finished sweep"));
    }
    if (!SameRepository(base, asked)) {
      return absl::InvalidArgumentError(
          util::StrCat("since: sweep ", base.id, " swept ", base.repo, ", not this repository"));
    }
    return &it->second;
  }
  asked.seq = next_seq_;  // after every sweep there is
  asked.created_at = TimePoint::max();
  const auto earlier = EarlierSucceededLocked(asked);
  return earlier.empty() ? nullptr : earlier.front();
}

std::vector<const Coordinator::SweepRt*> Coordinator::EarlierSucceededLocked(
    const SweepRecord& like) const {
  const auto order = [](const SweepRecord& s) { return std::pair(s.created_at, s.seq); };
  std::vector<const SweepRt*> out;
  for (const auto& [id, sw] : sweeps_) {
    if (sw.rec.state != SweepState::kSucceeded || !SameRepository(sw.rec, like) ||
        order(sw.rec) >= order(like)) {
      continue;
    }
    out.push_back(&sw);
  }
  std::sort(out.begin(), out.end(),
            [&](const SweepRt* a, const SweepRt* b) { return order(a->rec) > order(b->rec); });
  return out;
}

std::vector<SweepRecord> Coordinator::EarlierSucceeded(const SweepRecord& like) {
  std::lock_guard lock(mu_);
  std::vector<SweepRecord> out;
  for (const SweepRt* sw : EarlierSucceededLocked(like)) out.push_back(sw->rec);
  return out;
}

void Coordinator::ApplyResultLocked(const ResultRecord& r) {
  table_.PutResult(r);
  auto sw = sweeps_.find(r.sweep_id);
  if (sw == sweeps_.end()) return;
  const ShardRecord* shard = table_.FindShard(r.shard_id);
  // Waves overlap (docs/farm.md, "Registry waves start early"): a later wave's outcome stands
  // whichever arrives first.
  // A shard planned ahead decides nothing until its wave adopts it (PlanWaveLocked).
  if (shard == nullptr || !shard->spec.ahead()) {
    NoteDecidedLocked(sw->second, r, shard != nullptr ? shard->spec.wave() : 0);
  }
  // A carried result ran in another sweep: neither this sweep's pace nor its fleet's health.
  const bool carried = shard != nullptr && shard->spec.has_carried_from();
  if (shard != nullptr && !carried) {
    LaneProgress& lane = sw->second.lanes[LeaseTable::ShardArch(*shard)];
    const TimePoint started =
        r.accepted_at - std::chrono::duration_cast<Duration>(
                            std::chrono::duration<double>(r.result.duration_seconds()));
    if (lane.results == 0 || started < lane.first_start) lane.first_start = started;
    ++lane.results;
  }
  if (shard != nullptr && !carried) LearnFromLocked(sw->second, *shard, r);
  if (shard != nullptr && !carried && !shard->spec.ahead() &&
      shard->spec.phase() != v1::PHASE_VERIFY) {
    auto& classes = sw->second.classes_by_loader[shard->spec.loader()];
    for (const auto& o : r.result.entries()) {
      if (!o.output_class().empty()) classes.insert(o.output_class());
    }
  }
  if (shard != nullptr && !carried) {
    // A line for a class: the wave's queued verifications of that class's entries wait behind
    // the others, for the next wave that supersedes them.
    bool new_class = false;
    for (const auto& op : r.result.registry_ops()) {
      if (op.kind() == v1::RegistryOp::ADD) {
        new_class |= sw->second.proposed.insert({shard->spec.wave(), op.cls()}).second;
      }
    }
    if (new_class) {
      for (const auto& id : sw->second.shard_ids) {
        const ShardRecord& s = table_.shard(id);
        if (s.state != ShardState::kQueued || s.likely_superseded ||
            !LikelySupersededLocked(sw->second, s)) {
          continue;
        }
        ShardRecord u = s;
        u.likely_superseded = true;
        table_.Put(std::move(u));
      }
    }
  }
  if (!carried && DeviceTookEveryTestDown(r.result)) {
    sw->second.device_down.insert(r.shard_id);
  } else {
    sw->second.device_down.erase(r.shard_id);
  }
  CheckBudgetLocked(sw->second);
  sw->second.results.push_back(r);
}

void Coordinator::NoteDecidedLocked(SweepRt& sweep, const ResultRecord& r, int wave) {
  for (const auto& o : r.result.entries()) {
    auto e = sweep.entries.find(o.file() + "\n" + o.key());
    if (e == sweep.entries.end()) continue;
    e->second.review |= o.review_size() > 0;
    auto [at, first] = e->second.decided_wave.try_emplace(o.arch(), wave);
    if (!first && at->second > wave) continue;
    at->second = wave;
    e->second.decided[o.arch()] = OutcomeLabel(o);
  }
}

// The entries a verification measured (a testcase's time) that planning had only an estimate
// for: once learn_estimates_after of them were measured, on any arch, their mean stands in for
// such entries' estimates when batches are held to verify_batch_max, as a trusted duration
// does for its entry (docs/farm.md, "Batched verification"). Derived from the results, so a
// restarted coordinator learns it again.
void Coordinator::LearnFromLocked(SweepRt& sw, const ShardRecord& shard, const ResultRecord& r) {
  if (options_.learn_estimates_after <= 0) return;
  for (const auto& o : r.result.entries()) {
    if (o.duration_seconds() <= 0) continue;
    const auto& planned = shard.spec.entries();
    const auto e = std::find_if(planned.begin(), planned.end(), [&o](const v1::ShardEntry& x) {
      return x.key() == o.key() && x.file() == o.file();
    });
    if (e == planned.end() || !e->estimated()) continue;
    ++sw.measured_estimated;
    sw.seconds_estimated += o.duration_seconds();
    if (sw.measured_estimated >= options_.learn_estimates_after) {
      table_.SetLearnedSeconds(sw.rec.id, sw.seconds_estimated / sw.measured_estimated);
    }
  }
}

namespace {

// What the planner is told: the validated request's playbooks, archs, durations (moved out of
// start) and executor, its params and priority, the farm's estimates, and the repository agents
// fetch.
PlanOptions PlanOptionsFor(const v1::StartSweepRequest& req, StartRequest& start,
                           const SweepInput& input, const CoordinatorOptions& options) {
  PlanOptions plan_options;
  plan_options.playbooks = start.playbooks;
  plan_options.archs = start.archs;
  plan_options.durations = std::move(start.durations);
  plan_options.executor = start.executor;
  for (const auto& [k, v] : req.params()) plan_options.params[k] = v;
  plan_options.priority = req.priority();
  plan_options.min_trusted_seconds = options.min_trusted_seconds;
  plan_options.playbook_estimates = options.playbook_estimates;
  plan_options.repo_url =
      req.agent_repo_url().empty() ? input.agent_repo_url : req.agent_repo_url();
  return plan_options;
}

// A running sweep's record as read and planned: the request (without its durations), the pinned
// commits and where the forge commit came from, the archs and playbooks, and the problems (files
// with validation errors, then what the planner left out).
SweepRecord RunningSweepRecord(const v1::StartSweepRequest& req, const std::string& executor,
                               const SweepInput& input, const PlanOptions& plan_options,
                               const classify::Classifier& rules,
                               std::vector<std::string> plan_problems) {
  SweepRecord rec;
  rec.state = SweepState::kRunning;
  rec.request = req;
  rec.request.clear_durations_json();
  rec.request.set_executor(executor);
  rec.repo = input.repo;
  rec.ttxla_commit = input.ttxla_commit;
  rec.forge_commit = input.forge_commit;
  rec.details.set_forge_gitlink_commit(input.forge_gitlink.empty() ? input.forge_commit
                                                                   : input.forge_gitlink);
  rec.details.set_forge_source(input.forge_source.empty() ? "gitlink" : input.forge_source);
  for (const auto& n : input.notes) rec.details.add_notes(n);
  rec.archs = plan_options.archs;
  rec.playbooks = plan_options.playbooks.empty() ? rules.Playbooks() : plan_options.playbooks;
  for (const auto& d : input.inventory.diagnostics) {
    if (d.severity == util::Severity::kError) rec.problems.push_back(d.ToString());
  }
  for (auto& p : plan_problems) rec.problems.push_back(std::move(p));
  return rec;
}

}  // namespace

absl::StatusOr<v1::Sweep> Coordinator::StartSweep(const v1::StartSweepRequest& req,
                                                  const Caller& caller) {
  auto start = ValidateStartRequest(req, {options_.default_executor, options_.default_archs});
  if (!start.ok()) return start.status();

  // Reading through git happens outside the state lock; planning is quick and runs under it,
  // with the fleet as it is (whether probes can go to cpu agents).
  std::lock_guard start_lock(start_mu_);
  if (!req.request_id().empty()) {
    // A repeated request (a retried CronJob pod, a re-run pipeline) gets the sweep the first
    // one started; the same key with other options is a mistake worth an error.
    std::lock_guard lock(mu_);
    if (const SweepRt* first = FindRequestLocked(req.request_id())) {
      v1::StartSweepRequest asked = req;
      asked.set_executor(start->executor);
      const auto differ = StartOptionsDiffer(first->rec.request, asked);
      if (!differ.empty()) {
        return absl::AlreadyExistsError(
            util::StrCat("request id '", req.request_id(), "' already started sweep ",
                         first->rec.id, " with other options (", util::StrJoin(differ, ", "),
                         " differ): give another request id for another sweep"));
      }
      v1::Sweep view = ViewLocked(*first);
      view.set_existing(true);
      return view;
    }
  }
  auto input = reader_(req);
  if (!input.ok()) return input.status();

  PlanOptions plan_options = PlanOptionsFor(req, *start, *input, options_);
  plan_options.inputs = input->inputs ? &*input->inputs : nullptr;
  const classify::Classifier& rules = *start->rules;

  return Operate(Ack::kDurable, [&](Effects& after) -> absl::StatusOr<v1::Sweep> {
    const SweepRt* base = nullptr;
    if (req.incremental()) {
      auto found = CarryBaseLocked(req, input->repo);
      if (!found.ok()) return found.status();
      base = *found;
    }
    plan_options.split_probe = table_.AnyCpuAgentServing();
    const TimePoint now = clock_->Now();
    char id[32];
    std::snprintf(id, sizeof(id), "sw-%04lld", static_cast<long long>(next_sweep_++));
    Plan plan = PlanSweep(input->inventory, rules, plan_options, id, input->ttxla_commit,
                          input->forge_commit);
    SweepRecord rec = RunningSweepRecord(req, start->executor, *input, plan_options, rules,
                                         std::move(plan.problems));
    rec.id = id;
    rec.seq = next_seq_++;
    rec.created_by = caller.name;
    rec.created_at = now;
    CarryPlan carry;
    if (base != nullptr) {
      CarryBase from{base->rec.id, {}, &base->results};
      for (const auto& sid : base->shard_ids) from.shards.push_back(&table_.shard(sid));
      carry = CarryForward(
          plan, from, {id, input->ttxla_commit, input->forge_commit, plan_options.repo_url, now});
      for (auto& s : carry.shards) plan.shards.push_back(std::move(s));
    } else if (req.incremental()) {
      carry.note = "incremental: no earlier succeeded sweep of this repository; every loader runs";
    }
    if (req.incremental()) {
      *rec.details.mutable_carry() = carry.summary;
      rec.details.add_notes(carry.note);
    }
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
    m.carried_results = std::move(carry.results);
    const int carried = carry.summary.shards();
    AuditLocked(m, caller, "start_sweep", rec.id,
                util::StrCat(req.reason(), req.reason().empty() ? "" : "; ", input->repo, "@",
                             input->ttxla_commit.substr(0, 12), ", ", plan.shards.size() - carried,
                             " shards, ", plan.entries.size(), " entries",
                             carried > 0 ? util::StrCat(", ", carried, " shards carried from ",
                                                        carry.summary.base())
                                         : ""));
    SweepRt rt;
    rt.rec = rec;
    sweeps_[rec.id] = std::move(rt);
    std::vector<AgentRecord> agents;
    if (auto st = CommitLocked(m, plan.shards, agents, after); !st.ok()) {
      sweeps_.erase(rec.id);
      return st;
    }
    metrics_->SweepStateChanged("", "running");
    if (plan.shards.empty()) MaybeFinishSweepLocked(rec.id, after);
    EmitLocked(rec.id,
               util::StrCat("sweep started: ", plan.shards.size() - carried, " shards",
                            carried > 0 ? util::StrCat(" (", carried, " more carried)") : ""),
               after);
    return ViewLocked(sweeps_.at(rec.id));
  });
}

bool Coordinator::PlanWaveLocked(const std::string& sweep_id, Effects& after) {
  SweepRt& sweep = sweeps_.at(sweep_id);
  const int wave = sweep.wave;
  std::vector<const ShardRecord*> shards;
  for (const auto& id : sweep.shard_ids) shards.push_back(&table_.shard(id));
  WavePlan plan;
  if (wave < kMaxWaves) {
    plan = PlanNextWave(sweep_id, shards, sweep.results, sweep.rec.archs,
                        table_.AnyCpuAgentServing(), static_cast<int>(sweep.shard_ids.size()) + 1);
  }
  if (plan.shards.empty() && plan.adopted.empty() && plan.discarded.empty()) {
    sweep.next_wave_planned_after = wave;
    return false;
  }
  const TimePoint now = clock_->Now();
  Mutation m;
  m.name = "PlanWave";
  for (auto& s : plan.shards) {
    s.seq = next_seq_++;
    s.enqueued_at = now;
    s.eligible_at = now;
    m.shard_specs.push_back(&s);
  }
  // Shards planned ahead: those that stand join the wave; the others stop, and their results
  // never count (the flag stays).
  std::vector<ShardRecord> ahead;
  for (const auto& id : plan.adopted) {
    ShardRecord u = table_.shard(id);
    u.spec.set_ahead(false);
    ahead.push_back(std::move(u));
  }
  for (const auto& id : plan.discarded) {
    ShardRecord u = table_.shard(id);
    if (IsTerminal(u.state)) continue;
    const std::string why =
        util::StrCat("discarded: wave ", wave + 1,
                     " was planned with other registry lines or loader edits for its entries");
    table_.Revoke(u, now, why, m);
    u.state = ShardState::kCancelled;
    u.last_error = why;
    ahead.push_back(std::move(u));
  }
  for (const auto& s : ahead) m.shard_specs.push_back(&s);
  std::set<std::string> again;  // the entries the next wave verifies, adopted shards' too
  for (const auto& s : plan.shards) {
    for (const auto& e : s.spec.entries()) again.insert(EntryKey(e));
  }
  for (const auto& s : ahead) {
    if (s.spec.ahead()) continue;  // discarded
    for (const auto& e : s.spec.entries()) again.insert(EntryKey(e));
  }
  std::vector<ShardRecord> superseded = SupersededLocked(sweep, wave, again);
  for (const auto& s : superseded) m.shard_specs.push_back(&s);
  if (!journal_.Stage(m, after).ok()) return false;  // retried on the next completion or Tick
  sweep.next_wave_planned_after = wave;
  for (auto& s : superseded) table_.Put(std::move(s));
  for (auto& s : ahead) table_.Put(std::move(s));
  const std::set<std::string> adopted(plan.adopted.begin(), plan.adopted.end());
  for (const auto& r : sweep.results) {
    if (adopted.count(r.shard_id)) NoteDecidedLocked(sweep, r, wave + 1);
  }
  const std::size_t made = plan.shards.size();
  for (auto& s : plan.shards) table_.Put(std::move(s));
  if (made + plan.adopted.size() == 0) {
    EmitLocked(sweep_id,
               util::StrCat("wave ", wave + 1, ": ", plan.discarded.size(),
                            " shard(s) planned ahead discarded, nothing to verify again"),
               after);
    return false;
  }
  EmitLocked(sweep_id,
             util::StrCat("wave ", wave + 1, ": ", made,
                          " shard(s) re-verify entries touched by registry lines",
                          plan.adopted.empty() && plan.discarded.empty()
                              ? ""
                              : util::StrCat(", ", plan.adopted.size(), " planned ahead kept, ",
                                             plan.discarded.size(), " discarded")),
             after);
  return true;
}

void Coordinator::GateAheadLocked(const SweepRt& sweep, std::vector<ShardRecord>& shards) const {
  if (!options_.early_waves || sweep.verify_may_change) return;
  std::map<std::string, double> gates;  // loader -> the longest verification to come again
  for (const auto& s : shards) {
    if (s.state != ShardState::kQueued || !s.likely_superseded || s.sweep_id != sweep.rec.id) {
      continue;
    }
    double& g = gates[s.spec.loader()];
    g = std::max(g, s.expected_seconds);
  }
  if (gates.empty()) return;
  std::map<std::string, std::size_t> listed;
  for (std::size_t k = 0; k < shards.size(); ++k) listed[shards[k].id] = k;
  for (const auto& [loader, seconds] : gates) {
    auto ids = sweep.shards_by_loader.find(loader);
    if (ids == sweep.shards_by_loader.end()) continue;
    for (const auto& id : ids->second) {
      const ShardRecord& q = table_.shard(id);
      if (q.state != ShardState::kQueued || q.spec.phase() == v1::PHASE_VERIFY || q.spec.ahead() ||
          q.spec.wave() != sweep.wave || q.gates_seconds >= seconds) {
        continue;
      }
      if (auto at = listed.find(id); at != listed.end()) {
        shards[at->second].gates_seconds = seconds;
      } else {
        ShardRecord u = q;
        u.gates_seconds = seconds;
        shards.push_back(std::move(u));
      }
    }
  }
}

void Coordinator::PlanAheadLocked(SweepRt& sweep, const std::set<std::string>& loaders,
                                  Effects& after) {
  if (!options_.early_waves || sweep.verify_may_change || sweep.open_first == 0 ||
      sweep.wave >= kMaxWaves || sweep.next_wave_planned_after >= sweep.wave || loaders.empty()) {
    return;
  }
  // Planning reads every result: only for loaders with an entry of a class some result of
  // these waves proposed a line for, and with those loaders' shards only.
  std::set<std::string> lined;
  for (const auto& [w, cls] : sweep.proposed) lined.insert(cls);
  std::set<std::string> with_lines;
  for (const auto& l : loaders) {
    auto classes = sweep.classes_by_loader.find(l);
    if (classes == sweep.classes_by_loader.end()) continue;
    if (std::any_of(classes->second.begin(), classes->second.end(),
                    [&](const std::string& c) { return lined.count(c) > 0; })) {
      with_lines.insert(l);
    }
  }
  if (with_lines.empty()) return;
  std::vector<const ShardRecord*> shards;
  for (const auto& l : with_lines) {
    for (const auto& id : sweep.shards_by_loader[l]) shards.push_back(&table_.shard(id));
  }
  const AheadScope scope{with_lines, sweep.wave, sweep.planned_ahead};
  WavePlan plan = PlanNextWave(sweep.rec.id, shards, sweep.results, sweep.rec.archs,
                               table_.AnyCpuAgentServing(),
                               static_cast<int>(sweep.shard_ids.size()) + 1, &scope);
  if (plan.shards.empty()) return;
  const TimePoint now = clock_->Now();
  Mutation m;
  m.name = "PlanAhead";
  std::set<std::string> planned;
  for (auto& s : plan.shards) {
    s.seq = next_seq_++;
    s.enqueued_at = now;
    s.eligible_at = now;
    m.shard_specs.push_back(&s);
    planned.insert(s.spec.loader());
  }
  if (!journal_.Stage(m, after).ok()) return;  // the wave plans them
  const std::size_t made = plan.shards.size();
  for (auto& s : plan.shards) table_.Put(std::move(s));
  EmitLocked(sweep.rec.id,
             util::StrCat("wave ", sweep.wave + 1, ": ", made, " shard(s) planned ahead for ",
                          util::StrJoin(planned, ", "),
                          ": their loaders' probes have ended and their classes have lines"),
             after);
  ServeWaitersLocked(after);
}

// A wave's verifications that have not started yet, for entries the next wave verifies again:
// the later wave's outcome is the one that counts (docs/report.md), and theirs would be of the
// loader without the merged registry lines, which the patch holds. Those entries are taken out
// of them (a shard left with none is done, as "superseded"), so that no device runs a
// verification whose outcome is replaced (docs/farm.md, "Registry waves start early").
std::vector<ShardRecord> Coordinator::SupersededLocked(const SweepRt& sweep, int wave,
                                                       const std::set<std::string>& again) {
  std::vector<ShardRecord> out;
  for (const auto& id : sweep.shard_ids) {
    const ShardRecord& s = table_.shard(id);
    if (s.state != ShardState::kQueued || s.spec.phase() != v1::PHASE_VERIFY ||
        s.spec.wave() != wave) {
      continue;
    }
    ShardRecord u = s;
    if (DropEntriesVerifiedAgain(u, again)) out.push_back(std::move(u));
  }
  return out;
}

bool Coordinator::DropEntriesVerifiedAgain(ShardRecord& u, const std::set<std::string>& again) {
  auto* entries = u.spec.mutable_entries();
  const int planned = entries->size();
  for (int i = entries->size() - 1; i >= 0; --i) {
    if (again.count(EntryKey(entries->Get(i)))) entries->DeleteSubrange(i, 1);
  }
  if (entries->size() == planned) return false;
  if (entries->empty()) {
    u.state = ShardState::kSucceeded;
    u.last_error = util::StrCat("superseded: wave ", u.spec.wave() + 1,
                                " verifies its entries again with the merged registry lines");
  } else {
    u.expected_seconds = u.expected_seconds * entries->size() / planned;
  }
  return true;
}

// The same rule for a verification queued again (a failed attempt, an expired lease, an
// on-call requeue) after the next wave was planned while it ran: its retry leaves out the
// entries the next wave verifies again.
void Coordinator::SupersedeRequeuedLocked(std::vector<ShardRecord>& shards) {
  std::map<std::pair<std::string, int>, std::set<std::string>> again;  // (sweep, wave) -> entries
  for (auto& u : shards) {
    if (u.state != ShardState::kQueued || u.spec.phase() != v1::PHASE_VERIFY) continue;
    auto sweep = sweeps_.find(u.sweep_id);
    if (sweep == sweeps_.end() || sweep->second.wave <= u.spec.wave()) continue;
    const ShardRecord* before = table_.FindShard(u.id);
    if (before == nullptr || before->state == ShardState::kQueued) continue;  // not queued again
    auto [it, fresh] = again.try_emplace({u.sweep_id, u.spec.wave() + 1});
    if (fresh) {
      for (const auto& id : sweep->second.shard_ids) {
        const ShardRecord& s = table_.shard(id);
        if (s.spec.wave() != u.spec.wave() + 1 || s.spec.ahead()) continue;
        for (const auto& e : s.spec.entries()) it->second.insert(EntryKey(e));
      }
    }
    DropEntriesVerifiedAgain(u, it->second);
  }
}

std::vector<bool> Coordinator::AtRiskLocked(const SweepRt& sweep, const ShardRecord& s,
                                            const std::set<std::string>& fresh) const {
  std::vector<bool> out(s.spec.entries_size(), false);
  if (!options_.early_waves || sweep.verify_may_change || s.spec.phase() != v1::PHASE_VERIFY ||
      s.spec.has_carried_from() || s.spec.wave() >= kMaxWaves) {
    return out;
  }
  std::set<std::string> applied;
  for (const auto& op : s.spec.pre_registry()) applied.insert(op.cls());
  for (int i = 0; i < s.spec.entries_size(); ++i) {
    const std::string& cls = s.spec.entries(i).output_class();
    out[i] = !cls.empty() && !applied.count(cls) &&
             (fresh.count(cls) || sweep.proposed.count({s.spec.wave(), cls}));
  }
  return out;
}

bool Coordinator::LikelySupersededLocked(const SweepRt& sweep, const ShardRecord& s) const {
  const std::vector<bool> risk = AtRiskLocked(sweep, s, {});
  return !risk.empty() && std::all_of(risk.begin(), risk.end(), [](bool r) { return r; });
}

// A queued verification with some entries whose output class got a registry line elsewhere in
// its wave (one it does not pre-apply), and some without: the next wave will most likely verify
// the first kind again, with the line, and replace their outcome. They move to a shard of their
// own, queued behind the others (likely superseded), so that the rest is not held back with
// them and they are not run with it (docs/farm.md, "Registry waves start early"). The shard
// keeps its place; the new one is numbered after the sweep's last.
std::vector<std::string> Coordinator::SplitAtRiskLocked(const SweepRt& sweep,
                                                        const std::set<std::string>& fresh,
                                                        std::vector<ShardRecord>& shards) {
  std::vector<std::string> events;
  const std::size_t before = shards.size();
  int number = NextShardNumberLocked(sweep, shards);
  for (std::size_t k = 0; k < before; ++k) {
    ShardRecord& u = shards[k];
    if (u.state != ShardState::kQueued || u.sweep_id != sweep.rec.id) continue;
    const std::vector<bool> risk = AtRiskLocked(sweep, u, fresh);
    const auto at_risk = std::count(risk.begin(), risk.end(), true);
    if (at_risk == 0) continue;
    if (at_risk == static_cast<long>(risk.size())) {
      u.likely_superseded = true;
      continue;
    }
    ShardRecord n = SplitOffLocked(u, risk, static_cast<double>(at_risk) / risk.size(), number++);
    n.likely_superseded = true;
    const int moved = n.spec.entries_size();
    events.push_back(util::StrCat("shard ", u.id, ": ", moved, moved == 1 ? " entry" : " entries",
                                  " split off to ", n.id, ", queued last: wave ", u.spec.wave(),
                                  " proposed a registry line for ", moved == 1 ? "its" : "their",
                                  " output class"));
    shards.push_back(std::move(n));
  }
  return events;
}

int Coordinator::NextShardNumberLocked(const SweepRt& sweep,
                                       const std::vector<ShardRecord>& shards) const {
  int number = static_cast<int>(sweep.shard_ids.size()) + 1;
  for (const auto& s : shards) number += table_.FindShard(s.id) == nullptr;  // new ones too
  return number;
}

ShardRecord Coordinator::SplitOffLocked(ShardRecord& u, const std::vector<bool>& move, double share,
                                        int number) {
  ShardRecord n = u;
  n.id = planning::ShardId(u.sweep_id, number);
  n.spec.set_shard_id(n.id);
  n.spec.clear_entries();
  n.seq = next_seq_++;
  n.attempts = 0;
  n.infra_losses = 0;
  n.last_error.clear();
  auto* kept = u.spec.mutable_entries();
  for (int i = kept->size() - 1; i >= 0; --i) {
    if (!move[i]) continue;
    *n.spec.add_entries() = kept->Get(i);
    kept->DeleteSubrange(i, 1);
  }
  std::reverse(n.spec.mutable_entries()->begin(), n.spec.mutable_entries()->end());
  n.expected_seconds = u.expected_seconds * share;
  u.expected_seconds -= n.expected_seconds;
  return n;
}

std::vector<std::string> Coordinator::SplitLongLocked(const SweepRt& sweep, std::size_t from,
                                                      std::size_t to,
                                                      std::vector<ShardRecord>& shards) {
  std::vector<std::string> events;
  const double limit = ToSeconds(options_.verify_batch_shard_max);
  if (limit <= 0) return events;
  int number = NextShardNumberLocked(sweep, shards);
  for (std::size_t k = from; k < to; ++k) {
    if (shards[k].state != ShardState::kQueued || shards[k].spec.phase() != v1::PHASE_VERIFY ||
        shards[k].spec.entries_size() < 2) {
      continue;
    }
    // Whole, a shard within each agent's share of its arch's queued work (itself included)
    // ends with the others: splitting it would only add sessions.
    if (shards[k].expected_seconds <=
        table_.FairShare(Requirement::Of(shards[k]), shards[k].expected_seconds)) {
      continue;
    }
    // The first long entry stays where it is when every entry is long.
    int left = shards[k].spec.entries_size();
    for (int i = shards[k].spec.entries_size() - 1; i >= 0 && left > 1; --i) {
      const v1::ShardEntry& e = shards[k].spec.entries(i);
      if (e.estimated() || e.expected_seconds() <= limit) continue;
      std::vector<bool> move(shards[k].spec.entries_size(), false);
      move[i] = true;
      const std::string key = e.key();
      const double seconds = e.expected_seconds();
      // Its share of the shard's expectation: its planned seconds among the entries'.
      double planned = 0;
      for (const auto& o : shards[k].spec.entries()) planned += std::max(0.0, o.expected_seconds());
      ShardRecord n =
          SplitOffLocked(shards[k], move, planned > 0 ? seconds / planned : 0, number++);
      --left;
      events.push_back(util::StrCat("shard ", shards[k].id, ": ", key, " split off to ", n.id,
                                    ": known to run ", static_cast<long long>(seconds),
                                    " s, over verify_batch_shard_max_seconds (",
                                    static_cast<long long>(limit), " s)"));
      shards.push_back(std::move(n));  // shards[k] may move: read through the index only
    }
  }
  return events;
}

// Which entries the next wave verifies again, with which registry lines and loader edits, is
// read from first phases only (PlanNextWave): a native or replayed verify phase changes no file
// and proposes no registry line (CheckResultOwnership refuses one that does). So once the
// latest wave's first phases have all ended, the next wave is what it will be when the verify
// phases have ended too, and it starts now instead of behind the wave's longest verification.
// A command executor's verify phase runs an arbitrary command that may change the registry:
// its sweeps keep the barrier.
void Coordinator::MaybePlanWaveEarlyLocked(SweepRt& sweep, Effects& after) {
  if (!options_.early_waves || sweep.verify_may_change || sweep.open_first > 0 ||
      sweep.next_wave_planned_after >= sweep.wave) {
    return;
  }
  if (PlanWaveLocked(sweep.rec.id, after)) ServeWaitersLocked(after);
}

void Coordinator::ScheduleFinishLocked(const std::string& sweep_id, Effects& after) {
  if (finishing_.insert(sweep_id).second) {
    after.last.push_back({[this, sweep_id] { FinishSweep(sweep_id); },
                          [this, sweep_id](const absl::Status&) { Unfinish(sweep_id); }});
  }
}

void Coordinator::MaybeFinishSweepLocked(const std::string& sweep_id, Effects& after) {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end() || it->second.rec.state != SweepState::kRunning) return;
  if (it->second.unfinished > 0) {
    MaybePlanWaveEarlyLocked(it->second, after);
    return;
  }
  // Registry lines proposed in this wave may touch entries verified without them.
  if (PlanWaveLocked(sweep_id, after)) {
    ServeWaitersLocked(after);
    return;
  }
  // Every shard ended: merge (hook) outside the lock, then record the final state.
  it->second.rec.state = SweepState::kMerging;
  metrics_->SweepStateChanged("running", "merging");
  ScheduleFinishLocked(sweep_id, after);
}

void Coordinator::FinishSweep(const std::string& sweep_id) {
  FinishHook hook;
  {
    std::lock_guard lock(mu_);
    hook = finish_hook_;
  }
  absl::Status merged = hook ? hook(sweep_id) : absl::OkStatus();
  Effects after;
  {
    std::lock_guard lock(mu_);
    auto it = sweeps_.find(sweep_id);
    finishing_.erase(sweep_id);
    if (it == sweeps_.end() || it->second.rec.state != SweepState::kMerging) return;
    SweepRecord rec = it->second.rec;
    bool any_failed = false;
    for (const auto& id : it->second.shard_ids) {
      any_failed |= table_.shard(id).state == ShardState::kFailed;
    }
    rec.state = (!merged.ok() || any_failed) ? SweepState::kFailed : SweepState::kSucceeded;
    if (!merged.ok()) rec.error = util::StrCat("merge: ", util::MessageOf(merged));
    rec.finished_at = clock_->Now();
    Mutation m;
    m.name = "FinishSweep";
    m.sweeps.push_back(&rec);
    if (!journal_.Stage(m, after).ok()) return;  // stays merging; retried on the next Tick
    metrics_->SweepStateChanged("merging", SweepStateName(rec.state));
    if (rec.state == SweepState::kSucceeded) {
      metrics_->SweepSucceeded(ToSeconds(rec.finished_at.time_since_epoch()));
    }
    it->second.rec = rec;
    EmitLocked(sweep_id, util::StrCat("sweep ", SweepStateName(rec.state)), after);
  }
  journal_.Settle(after);
}

void Coordinator::Unfinish(const std::string& sweep_id) {
  std::lock_guard lock(mu_);
  finishing_.erase(sweep_id);
}

// ---------------------------------------------------------------------------------------------
// Views

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
  for (const auto& id : it->second.shard_ids) out.push_back(table_.shard(id));
  return out;
}

absl::StatusOr<std::vector<AttemptRecord>> Coordinator::Attempts(const std::string& sweep_id) {
  std::vector<std::string> shard_ids;
  {
    std::lock_guard lock(mu_);
    auto it = sweeps_.find(sweep_id);
    if (it == sweeps_.end()) return absl::NotFoundError(util::StrCat("no sweep ", sweep_id));
    shard_ids = it->second.shard_ids;
  }
  // Read without the state lock: the store serialises its own reads.
  std::vector<AttemptRecord> out;
  for (const auto& id : shard_ids) {
    auto attempts = journal_.Attempts(id);
    if (!attempts.ok()) return attempts.status();
    out.insert(out.end(), attempts->begin(), attempts->end());
  }
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
  return Operate(Ack::kDurable, [&](Effects& after) -> absl::StatusOr<v1::EntryCounts> {
    auto it = sweeps_.find(sweep_id);
    if (it == sweeps_.end()) return absl::NotFoundError(util::StrCat("no sweep ", sweep_id));
    v1::EntryCounts counts = CountLocked(it->second, &merged);
    SweepRecord rec = it->second.rec;
    *rec.details.mutable_final_entries() = counts;
    Mutation m;
    m.name = "SettleCounts";
    m.sweeps.push_back(&rec);
    std::vector<ShardRecord> shards;
    std::vector<AgentRecord> agents;
    if (auto st = CommitLocked(m, shards, agents, after); !st.ok()) return st;
    it->second.rec.details = rec.details;
    return counts;
  });
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
  v.set_request_id(r.request.request_id());
  v.set_failed_shards(FailedShards(s));
  v.set_max_failed_shards(r.request.max_failed_shards());
  v.set_over_budget(s.over_budget);
  if (r.details.has_carry()) *v.mutable_carry() = r.details.carry();
  if (r.state == SweepState::kRunning && s.blocked) v.set_state("blocked");
  // ETA: measured on this sweep only (docs/farm.md), unknown until enough shards finished.
  v.set_eta_seconds(r.state == SweepState::kRunning ? EstimateEta(s.lanes, clock_->Now()) : 0);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Watches

void Coordinator::EmitLocked(const std::string& sweep_id, const std::string& message,
                             Effects& after) {
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

}  // namespace triage::coord
