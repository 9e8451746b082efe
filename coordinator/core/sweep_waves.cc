// The front door's registry waves (docs/farm.md, "Registry waves start early"): the next wave
// planned (early, once the latest wave's first phases ended) or planned ahead per loader, the
// first phases gating it, verifications the next wave repeats superseded, and entries at risk
// or known to run long split off to shards of their own (docs/architecture.md).

#include <algorithm>
#include <map>
#include <set>

#include "common/util/strings.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/planning/phases.h"
#include "coordinator/planning/waves.h"

namespace triage::coord {

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
  const std::map<std::string, double> gates = VerificationsAgainByLoader(shards, sweep.rec.id);
  if (gates.empty()) return;
  std::map<std::string, std::size_t> listed;
  for (std::size_t k = 0; k < shards.size(); ++k) listed[shards[k].id] = k;
  for (const auto& [loader, seconds] : gates) {
    auto ids = sweep.shards_by_loader.find(loader);
    if (ids == sweep.shards_by_loader.end()) continue;
    for (const auto& id : ids->second) {
      const ShardRecord& q = table_.shard(id);
      if (!TakesGate(q, sweep.wave, seconds)) continue;
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
  const std::set<std::string> with_lines =
      LoadersWithLines(loaders, sweep.classes_by_loader, sweep.proposed);
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
  return AtRisk(s.spec, options_.early_waves && !sweep.verify_may_change, kMaxWaves, sweep.proposed,
                fresh);
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
    const std::vector<int> long_entries = LongEntriesToSplit(
        shards[k].spec, shards[k].expected_seconds,
        table_.FairShare(Requirement::Of(shards[k]), shards[k].expected_seconds), limit);
    for (int i : long_entries) {
      const v1::ShardEntry& e = shards[k].spec.entries(i);
      std::vector<bool> move(shards[k].spec.entries_size(), false);
      move[i] = true;
      const std::string key = e.key();
      const double seconds = e.expected_seconds();
      // Its share of the shard's expectation: its planned seconds among the entries'.
      double planned = 0;
      for (const auto& o : shards[k].spec.entries()) planned += std::max(0.0, o.expected_seconds());
      ShardRecord n =
          SplitOffLocked(shards[k], move, planned > 0 ? seconds / planned : 0, number++);
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

}  // namespace triage::coord
