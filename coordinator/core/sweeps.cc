// The front door's sweep lifecycle: start (validate, read, plan), finishing, views, counts and
// watches (docs/architecture.md). Registry waves are in sweep_waves.cc; the accounting kept in
// step with shards and results in sweep_accounting.cc.

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "common/nightly/learn.h"
#include "common/nightly/policy_options.h"
#include "common/util/log.h"
#include "common/util/strings.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/planning/carry.h"
#include "coordinator/planning/planner.h"
#include "coordinator/planning/start_request.h"

namespace triage::coord {

const Coordinator::SweepRt* Coordinator::FindRequestLocked(const std::string& request_id) const {
  if (request_id.empty()) return nullptr;
  for (const auto& [id, sw] : sweeps_) {
    if (sw.rec.request.request_id() == request_id) return &sw;
  }
  return nullptr;
}

void Coordinator::AddSweepLocked(SweepRt rt) {
  // A device-time budget planned the sweep's device hours: no backups beyond them.
  if (rt.rec.request.nightly_options().max_device_hours() > 0) table_.NoBackups(rt.rec.id);
  const std::string id = rt.rec.id;
  sweeps_[id] = std::move(rt);
}

absl::StatusOr<const Coordinator::SweepRt*> Coordinator::CarryBaseLocked(const SweepRecord& like,
                                                                         std::string* why) const {
  const v1::StartSweepRequest& req = like.request;
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
    if (!SameRepository(base, like)) {
      return absl::InvalidArgumentError(
          util::StrCat("since: sweep ", base.id, " swept ", base.repo, ", not this repository"));
    }
    if (std::string mismatch = CarryMismatch(base, like); !mismatch.empty()) {
      *why = util::StrCat("incremental: --since ", base.id, " ran ", mismatch,
                          ": none of its results can be carried");
    }
    return &it->second;
  }
  SweepRecord asked = like;
  asked.seq = next_seq_;  // after every sweep there is
  asked.created_at = TimePoint::max();
  std::vector<std::string> passed;
  for (const SweepRt* sw : EarlierSucceededLocked(asked)) {
    std::string mismatch = CarryMismatch(sw->rec, like);
    if (mismatch.empty()) {
      *why = util::StrCat("incremental: carries from ", sw->rec.id,
                          ", the latest succeeded sweep of this repository with the same archs, "
                          "executor and parameters and a playbook in common",
                          passed.empty() ? "" : "; passed over ", util::StrJoin(passed, ", "));
      return sw;
    }
    constexpr std::size_t kListed = 5;
    if (passed.size() < kListed) passed.push_back(util::StrCat(sw->rec.id, " (", mismatch, ")"));
  }
  if (!passed.empty()) {
    *why = util::StrCat(
        "incremental: no earlier succeeded sweep of this repository has the same archs, executor "
        "and parameters and a playbook in common (",
        util::StrJoin(passed, ", "), ")");
  }
  return nullptr;
}

std::vector<const Coordinator::SweepRt*> Coordinator::EarlierSucceededLocked(
    const SweepRecord& like) const {
  const auto order = [](const SweepRecord& s) { return std::pair(s.created_at, s.seq); };
  std::vector<const SweepRt*> out;
  for (const auto& [id, sw] : sweeps_) {
    // A nightly sweep's entries are another kind of work than a playbook sweep's: neither is the
    // other's base to carry from nor its previous week.
    const bool same_kind =
        sw.rec.details.has_nightly() == like.details.has_nightly() &&
        sw.rec.request.nightly_digest().empty() == like.request.nightly_digest().empty();
    if (sw.rec.state != SweepState::kSucceeded || !SameRepository(sw.rec, like) || !same_kind ||
        order(sw.rec) >= order(like)) {
      continue;
    }
    out.push_back(&sw);
  }
  std::sort(out.begin(), out.end(),
            [&](const SweepRt* a, const SweepRt* b) { return order(a->rec) > order(b->rec); });
  return out;
}

std::map<std::string, std::int64_t> Coordinator::RecheckedLocked(const SweepRecord& like) const {
  std::map<std::string, std::int64_t> out;
  for (const auto& [id, sw] : sweeps_) {
    if (!sw.rec.request.recheck_skipped() || !SameRepository(sw.rec, like)) continue;
    // Every accepted run counts, a cancelled sweep's too: the check happened.
    for (const ResultRecord& r : sw.results) {
      const std::int64_t at = ToUnixMillis(r.accepted_at);
      for (const auto& o : r.result.entries()) {
        if (!o.has_nightly() || o.nightly().confirmations().empty()) continue;
        auto& last = out[RecheckKey(o.file(), o.key(), o.arch())];
        last = std::max(last, at);
      }
    }
  }
  return out;
}

std::vector<SweepRecord> Coordinator::EarlierSucceeded(const SweepRecord& like) {
  std::lock_guard lock(mu_);
  std::vector<SweepRecord> out;
  for (const SweepRt* sw : EarlierSucceededLocked(like)) out.push_back(sw->rec);
  return out;
}

namespace {

// What the planner is told: the validated request's playbooks, archs, durations (moved out of
// start) and executor, its params and priority, the farm's estimates, and the repository agents
// fetch.
PlanOptions PlanOptionsFor(const v1::StartSweepRequest& req, StartRequest& start,
                           const SweepInput& input, const CoordinatorOptions& options) {
  PlanOptions plan_options;
  plan_options.playbooks = start.playbooks;
  plan_options.selector = start.selector.get();
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
                               const classify::Classifier& rules, Plan& plan) {
  SweepRecord rec;
  rec.state = SweepState::kRunning;
  // A nightly sweep's runs live on in its shards' candidates: the request keeps their digest.
  rec.request = WithoutNightlyRuns(req);
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
  if (plan_options.selector != nullptr && plan_options.selector->failing()) {
    rec.playbooks = {std::string(kRemediatePlaybook)};
  }
  if (plan.nightly) {
    rec.archs.assign(plan.nightly->archs().begin(), plan.nightly->archs().end());
    rec.playbooks = {"nightly"};
    *rec.details.mutable_nightly() = *plan.nightly;
  }
  if (plan.recheck) *rec.details.mutable_recheck() = *plan.recheck;
  for (const auto& d : input.inventory.diagnostics) {
    if (d.severity == util::Severity::kError) rec.problems.push_back(d.ToString());
  }
  for (auto& p : plan.problems) rec.problems.push_back(std::move(p));
  plan.problems.clear();
  return rec;
}

// "nightly policy: 6 knob(s) learned from <what>, 1 from policy.yaml, 4 default(s); the report
// lists each knob".
std::string PolicyNote(const v1::NightlyOptions& o) {
  int learned = 0, defaults = 0;
  std::map<std::string, int> asked;
  for (std::string_view knob : nightly::kPolicyKnobs) {
    auto it = o.policy_sources().find(std::string(knob));
    if (it == o.policy_sources().end() || it->second == "default") {
      ++defaults;
    } else if (nightly::IsLearnedSource(it->second)) {
      ++learned;
    } else {
      asked[it->second.substr(0, it->second.rfind(':'))]++;
    }
  }
  std::vector<std::string> parts;
  if (learned > 0) {
    parts.push_back(util::StrCat(learned, " knob(s) learned from ", o.policy_learned_from()));
  }
  for (const auto& [from, n] : asked) parts.push_back(util::StrCat(n, " from ", from));
  parts.push_back(util::StrCat(defaults, " default(s)"));
  std::string note = util::StrCat("nightly policy: ", util::StrJoin(parts, ", "));
  if (learned == 0 && !o.no_learn() && !o.policy_learned_from().empty()) {
    util::StrAppend(&note, " (", o.policy_learned_from(), " speak to none)");
  }
  if (o.no_learn()) util::StrAppend(&note, " (not learned: no_learn)");
  return util::StrCat(note, "; the report lists each knob");
}

}  // namespace

absl::StatusOr<v1::Sweep> Coordinator::StartSweep(const v1::StartSweepRequest& req,
                                                  const Caller& caller) {
  if (req.nightly_upload().empty()) return StartSweepWithRuns(req, caller);
  if (!req.nightly().empty()) {
    return absl::InvalidArgumentError(
        "give the nightly runs (nightly) or an upload of them (nightly_upload), not both");
  }
  auto runs = uploads_.Take(req.nightly_upload(), caller.name);
  if (!runs.ok()) return runs.status();
  v1::StartSweepRequest full = req;  // no runs yet: a small copy
  full.clear_nightly_upload();
  full.mutable_nightly()->Swap(&*runs);
  return StartSweepWithRuns(full, caller);
}

absl::StatusOr<v1::Sweep> Coordinator::CheckSweep(const v1::CheckSweepRequest& check,
                                                  const Caller& /*caller*/) {
  const v1::StartSweepRequest& req = check.sweep();
  auto start = ValidateStartRequest(req, {options_.default_executor, options_.default_archs},
                                    check.nightly_to_come());
  if (!start.ok()) return start.status();
  std::lock_guard start_lock(start_mu_);
  v1::Sweep view;
  if (!req.request_id().empty()) {
    std::lock_guard lock(mu_);
    if (const SweepRt* first = FindRequestLocked(req.request_id())) {
      // The runs are compared once they came (StartSweep): everything else now.
      v1::StartSweepRequest kept = first->rec.request;
      v1::StartSweepRequest asked = WithoutNightlyRuns(req);
      asked.set_executor(start->executor);
      for (auto* r : {&kept, &asked}) {
        r->clear_nightly_digest();
        r->clear_nightly_upload();
      }
      const auto differ = StartOptionsDiffer(kept, asked);
      if (!differ.empty()) {
        return absl::AlreadyExistsError(
            util::StrCat("request id '", req.request_id(), "' already started sweep ",
                         first->rec.id, " with other options (", util::StrJoin(differ, ", "),
                         " differ): give another request id for another sweep"));
      }
      view = ViewLocked(*first);
      view.set_existing(true);
      return view;
    }
  }
  auto input = reader_(req);
  if (!input.ok()) return input.status();
  view.set_repo(input->repo);
  view.set_ttxla_commit(input->ttxla_commit);
  view.set_forge_commit(input->forge_commit);
  view.set_forge_gitlink_commit(input->forge_gitlink);
  view.set_forge_source(input->forge_source);
  for (const auto& n : input->notes) view.add_notes(n);
  for (const auto& a : start->archs) view.add_archs(a);
  view.set_executor(start->executor);
  view.set_request_id(req.request_id());
  return view;
}

absl::StatusOr<v1::Sweep> Coordinator::StartSweepWithRuns(const v1::StartSweepRequest& req,
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
      v1::StartSweepRequest asked = WithoutNightlyRuns(req);
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
  // The rules' policy, once for the sweep: what its shards, its agents and its report follow.
  std::optional<v1::NightlyOptions> resolved;
  if (!req.nightly().empty() || req.recheck_skipped()) {
    auto r = nightly::ResolvePolicy(req.nightly_options(),
                                    input->learned_policy ? &*input->learned_policy : nullptr,
                                    input->learned_from);
    if (!r.ok()) return r.status();
    resolved = std::move(*r);
    plan_options.nightly_options = &*resolved;
    input->notes.push_back(PolicyNote(*resolved));
  }
  plan_options.inputs = input->inputs ? &*input->inputs : nullptr;
  if (req.durations_json().empty() && !input->checkout_durations.empty()) {
    // The checkout's own record (tt-xla keeps .test_durations at its root): planning's times
    // and the report's predicted makespan come from it where it is trusted.
    auto own = ParseDurations(input->checkout_durations);
    if (own.ok()) {
      int trusted = 0;
      for (const auto& [node, seconds] : *own) trusted += seconds >= options_.min_trusted_seconds;
      input->notes.push_back(util::StrCat("durations: the checkout's .test_durations (",
                                          own->size(), " tests, ", trusted, " of them at least ",
                                          options_.min_trusted_seconds, " s and so trusted)"));
      plan_options.durations = std::move(*own);
    } else {
      input->notes.push_back(util::StrCat("the checkout's .test_durations is not used: ",
                                          util::MessageOf(own.status())));
    }
  }
  const classify::Classifier& rules = *start->rules;

  return Operate(Ack::kDurable, [&](Effects& after) -> absl::StatusOr<v1::Sweep> {
    const SweepRt* base = nullptr;
    std::string base_why;
    if (req.incremental()) {
      SweepRecord like;
      like.repo = input->repo;
      like.request = req;
      like.request.set_executor(start->executor);
      like.archs = plan_options.archs;
      like.playbooks = plan_options.playbooks.empty() ? rules.Playbooks() : plan_options.playbooks;
      auto found = CarryBaseLocked(like, &base_why);
      if (!found.ok()) return found.status();
      base = *found;
    }
    plan_options.split_probe = table_.AnyCpuAgentServing();
    std::map<std::string, std::int64_t> rechecked;
    if (req.recheck_skipped()) {
      SweepRecord like;
      like.repo = input->repo;
      like.request = req;
      rechecked = RecheckedLocked(like);
      plan_options.rechecked = &rechecked;
    }
    const TimePoint now = clock_->Now();
    char id[32];
    std::snprintf(id, sizeof(id), "sw-%04lld", static_cast<long long>(next_sweep_++));
    Plan plan = PlanEntries(input->inventory, rules, req, plan_options, id, input->ttxla_commit,
                            input->forge_commit, now);
    SweepRecord rec = RunningSweepRecord(req, start->executor, *input, plan_options, rules, plan);
    if (resolved) *rec.request.mutable_nightly_options() = *resolved;
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
      if (!base_why.empty()) rec.details.add_notes(base_why);
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
    // Results decided when the sweep was planned (a nightly sweep's --no-confirm, budget and
    // report-only outcomes) are inserted like carried ones.
    for (auto& r : plan.decided) m.carried_results.push_back(std::move(r));
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
    AddSweepLocked(std::move(rt));
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
  return CountEntries(TalliesLocked(s, merged));
}

std::vector<EntryTally> Coordinator::TalliesLocked(
    const SweepRt& s, const std::map<std::string, EntryTally>* merged) const {
  std::vector<EntryTally> tallies;
  tallies.reserve(s.entries.size());
  for (const auto& [k, e] : s.entries) {
    EntryTally& t = tallies.emplace_back();
    const std::string st = EntryStateName(e);
    t.phase = st == "done"      ? EntryTally::Phase::kDone
              : st == "running" ? EntryTally::Phase::kRunning
                                : EntryTally::Phase::kQueued;
    if (t.phase != EntryTally::Phase::kDone && e.counted) {
      t.phase = EntryTally::Phase::kDone;
      t.rechecking = true;
    }
    if (const std::string* label = DecidingLabel(e.decided, s.rec.archs)) t.label = *label;
    t.review = e.review;
    t.playbook = e.playbook;
    if (const std::string* stage = ForFirstArch(e.stage, s.rec.archs)) t.stage = *stage;
    if (merged == nullptr) continue;
    if (auto m = merged->find(k); m != merged->end()) {
      t.label = m->second.label;
      t.review = m->second.review;
      if (!m->second.stage.empty()) t.stage = m->second.stage;
    }
  }
  return tallies;
}

void Coordinator::CountOutcomes(const std::vector<EntryTally>& tallies) {
  for (const EntryTally& t : tallies) {
    if (CountsAsDecided(t)) metrics_->EntryDecided(t.playbook, t.label, t.stage);
  }
}

absl::StatusOr<v1::EntryCounts> Coordinator::SettleCounts(
    const std::string& sweep_id, const std::map<std::string, EntryTally>& merged) {
  return Operate(Ack::kDurable, [&](Effects& after) -> absl::StatusOr<v1::EntryCounts> {
    auto it = sweeps_.find(sweep_id);
    if (it == sweeps_.end()) return absl::NotFoundError(util::StrCat("no sweep ", sweep_id));
    const std::vector<EntryTally> tallies = TalliesLocked(it->second, &merged);
    v1::EntryCounts counts = CountEntries(tallies);
    SweepRecord rec = it->second.rec;
    *rec.details.mutable_final_entries() = counts;
    // The outcomes are counted once, under the labels the sweep's counts settle on.
    const bool count_outcomes = !rec.details.outcomes_counted();
    rec.details.set_outcomes_counted(true);
    Mutation m;
    m.name = "SettleCounts";
    m.sweeps.push_back(&rec);
    std::vector<ShardRecord> shards;
    std::vector<AgentRecord> agents;
    if (auto st = CommitLocked(m, shards, agents, after); !st.ok()) return st;
    it->second.rec.details = rec.details;
    if (count_outcomes) CountOutcomes(tallies);
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
  if (r.details.has_nightly()) *v.mutable_nightly() = r.details.nightly();
  if (r.details.has_recheck()) *v.mutable_recheck() = r.details.recheck();
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
