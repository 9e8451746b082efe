// The front door's per-sweep accounting (SweepRt), kept in step with its shards
// (OnShardChanged) and accepted results (ApplyResultLocked): entry states, lanes, decided
// outcomes, learned estimates and the failure budget (docs/architecture.md).

#include <algorithm>
#include <set>

#include "coordinator/core/coordinator.h"
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
      CountDecidedLocked(sw, rt);
    }
  }
  if (d_terminal != 0 || d_active != 0 || old == nullptr) {
    for (const auto& e : updated.spec.entries()) {
      EntryRt& rt = sw.entries[EntryKey(e)];
      // A new shard of an entry another shard already counted moves it from its state (a later
      // phase or wave reopens it); only an entry's first shard brings it into the gauge.
      std::string before = old == nullptr && rt.shards == 0 ? "" : EntryStateName(rt);
      if (old == nullptr) {
        rt.playbook = updated.spec.playbook();
        ++rt.shards;
      }
      rt.terminal += d_terminal;
      rt.active += d_active;
      std::string after = EntryStateName(rt);
      if (before != after) metrics_->EntryStateChanged(rt.playbook, before, after);
      CountDecidedLocked(sw, rt);
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
  if (updated.state == ShardState::kQuarantined) NoteFarmFailureLocked(sw, updated.id);
  if (old_state != updated.state) CheckBudgetLocked(sw);
}

int Coordinator::FailedShards(const SweepRt& s) { return static_cast<int>(s.farm_failed.size()); }

void Coordinator::NoteFarmFailureLocked(SweepRt& s, const std::string& shard_id) {
  if (std::find(s.farm_failed.begin(), s.farm_failed.end(), shard_id) != s.farm_failed.end()) {
    return;
  }
  s.farm_failed.push_back(shard_id);
  CheckBudgetLocked(s);
}

void Coordinator::CheckBudgetLocked(SweepRt& s) {
  const int budget = s.rec.request.max_failed_shards();
  const bool over = s.rec.state == SweepState::kRunning && budget > 0 && FailedShards(s) > budget;
  if (over == s.over_budget) return;
  s.over_budget = over;
  table_.Hold(s.rec.id, over);
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
  // A carried result ran in another sweep, one decided when the sweep was planned ran nowhere:
  // neither is this sweep's pace nor its fleet's health.
  const bool carried =
      shard != nullptr && (shard->spec.has_carried_from() || shard->spec.decided_at_planning());
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
    e->second.stage[o.arch()] = o.stage();
    CountDecidedLocked(sweep, e->second);
  }
}

// Counted when the entry is done and decided, whichever comes last (a carried result is
// recorded after its shard ended): triage_entries_done_total, the farm's progress. Its outcome
// is counted when the sweep's counts settle (SettleCounts), under the label they settle on. An
// entry a later wave reopens keeps the count it has: a counter only goes up.
void Coordinator::CountDecidedLocked(const SweepRt& sweep, EntryRt& e) {
  if (e.counted || EntryStateName(e) != "done") return;
  if (DecidingLabel(e.decided, sweep.rec.archs) == nullptr) return;
  e.counted = true;
  if (recovering_) return;
  metrics_->EntryDone(e.playbook);
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

}  // namespace triage::coord
