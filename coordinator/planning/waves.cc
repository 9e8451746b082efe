#include "coordinator/planning/waves.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "common/inventory/key.h"
#include "common/registry/registry_union.h"
#include "common/util/strings.h"
#include "coordinator/planning/phases.h"

namespace triage::coord {

bool NeedsVerification(const v1::EntryOutcome& o) {
  switch (o.disposition()) {
    case v1::EntryOutcome::DONE:
    case v1::EntryOutcome::VERIFY:
      return true;
    case v1::EntryOutcome::NEEDS_PLAYBOOK:
    case v1::EntryOutcome::NEEDS_REVIEW:
      return false;
    default:
      break;
  }
  // Outcomes without a disposition (recorded before it existed): by their verdict names.
  static const std::set<std::string> kStopped = {"not_reproduced", "escalate",   "needs_unpack",
                                                 "gate_misfired",  "no_fix",     "probe_failed",
                                                 "conflict",       "fix_failed", "no_evidence"};
  return !kStopped.count(o.verdict());
}

std::vector<bool> AtRisk(const v1::ShardSpec& spec, bool enabled, int max_wave,
                         const std::set<std::pair<int, std::string>>& proposed,
                         const std::set<std::string>& fresh) {
  std::vector<bool> out(spec.entries_size(), false);
  if (!enabled || spec.phase() != v1::PHASE_VERIFY || spec.has_carried_from() ||
      spec.wave() >= max_wave) {
    return out;
  }
  std::set<std::string> applied;
  for (const auto& op : spec.pre_registry()) applied.insert(op.cls());
  for (int i = 0; i < spec.entries_size(); ++i) {
    const std::string& cls = spec.entries(i).output_class();
    out[i] = !cls.empty() && !applied.count(cls) &&
             (fresh.count(cls) || proposed.count({spec.wave(), cls}));
  }
  return out;
}

std::vector<int> LongEntriesToSplit(const v1::ShardSpec& spec, double expected_seconds,
                                    double fair_share, double limit) {
  std::vector<int> out;
  if (limit <= 0 || spec.phase() != v1::PHASE_VERIFY || spec.entries_size() < 2 ||
      expected_seconds <= fair_share) {
    return out;
  }
  int left = spec.entries_size();
  for (int i = spec.entries_size() - 1; i >= 0 && left > 1; --i) {
    const v1::ShardEntry& e = spec.entries(i);
    if (e.estimated() || e.expected_seconds() <= limit) continue;
    out.push_back(i);
    --left;
  }
  return out;
}

bool DropEntriesVerifiedAgain(ShardRecord& u, const std::set<std::string>& again) {
  auto* entries = u.spec.mutable_entries();
  const int planned = entries->size();
  for (int i = entries->size() - 1; i >= 0; --i) {
    const v1::ShardEntry& e = entries->Get(i);
    if (again.count(e.file() + "\n" + e.key())) entries->DeleteSubrange(i, 1);
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

std::map<std::string, double> VerificationsAgainByLoader(const std::vector<ShardRecord>& shards,
                                                         const std::string& sweep_id) {
  std::map<std::string, double> gates;
  for (const auto& s : shards) {
    if (s.state != ShardState::kQueued || !s.likely_superseded || s.sweep_id != sweep_id) continue;
    double& g = gates[s.spec.loader()];
    g = std::max(g, s.expected_seconds);
  }
  return gates;
}

bool TakesGate(const ShardRecord& q, int wave, double seconds) {
  return q.state == ShardState::kQueued && q.spec.phase() != v1::PHASE_VERIFY && !q.spec.ahead() &&
         q.spec.wave() == wave && q.gates_seconds < seconds;
}

std::set<std::string> LoadersWithLines(
    const std::set<std::string>& loaders,
    const std::map<std::string, std::set<std::string>>& classes_by_loader,
    const std::set<std::pair<int, std::string>>& proposed) {
  std::set<std::string> lined;
  for (const auto& [wave, cls] : proposed) lined.insert(cls);
  std::set<std::string> out;
  for (const auto& l : loaders) {
    auto classes = classes_by_loader.find(l);
    if (classes == classes_by_loader.end()) continue;
    if (std::any_of(classes->second.begin(), classes->second.end(),
                    [&](const std::string& c) { return lined.count(c) > 0; })) {
      out.insert(l);
    }
  }
  return out;
}

bool AwaitsVerification(const v1::EntryOutcome& o) {
  if (o.disposition() != v1::EntryOutcome::DISPOSITION_UNSPECIFIED) {
    return o.disposition() == v1::EntryOutcome::VERIFY;
  }
  return o.verdict() == "ready";
}

WavePlan MergeRegistry(const std::vector<ResultRecord>& results) {
  return MergeRegistry(results, {});
}

WavePlan MergeRegistry(const std::vector<ResultRecord>& results,
                       const std::set<std::string>& skip_shards) {
  WavePlan plan;
  std::map<std::string, std::set<std::string>> adds;
  std::set<std::string> removes;
  for (const auto& r : results) {
    if (r.result.registry_ops().empty() || skip_shards.count(r.shard_id)) continue;
    for (const auto& op : r.result.registry_ops()) {
      if (op.kind() == v1::RegistryOp::ADD) adds[op.cls()].insert(op.attr());
      if (op.kind() == v1::RegistryOp::REMOVE) removes.insert(op.cls());
    }
  }
  for (const auto& cls : removes) plan.merged.push_back(registry::RemoveOp(cls));
  for (const auto& [cls, attrs] : adds) {
    if (attrs.size() > 1) {
      plan.conflicts.push_back(util::StrCat("registry: class ", cls, ": attributes ",
                                            util::StrJoin(attrs, ", "),
                                            " proposed; no line written"));
      continue;
    }
    plan.merged.push_back(registry::AddOp(cls, *attrs.begin()));
  }
  return plan;
}

namespace {

// The sweep's shards by id, and its latest wave.
struct SweepShards {
  std::map<std::string, const ShardRecord*> by_id;
  int wave = 0;
};

bool Carried(const ShardRecord& s) { return s.spec.has_carried_from(); }

// The latest wave is the latest of this sweep's own shards: carried ones (renumbered to end at
// 0) never move it.
SweepShards IndexShards(const std::vector<const ShardRecord*>& shards) {
  SweepShards sweep;
  sweep.wave = 1;
  for (const auto* s : shards) {
    sweep.by_id[s->id] = s;
    if (!Carried(*s)) sweep.wave = std::max(sweep.wave, s->spec.wave());
  }
  return sweep;
}

std::set<std::string> MergedClasses(const std::vector<v1::RegistryOp>& merged) {
  std::set<std::string> classes;
  for (const auto& op : merged) classes.insert(op.cls());
  return classes;
}

// The classes a shard's result was verified with: the registry lines pre-applied to the shard
// and those the result proposed.
std::set<std::string> ClassesVerifiedWith(const ShardRecord& s, const ResultRecord& r) {
  std::set<std::string> applied;
  for (const auto& op : s.spec.pre_registry()) applied.insert(op.cls());
  for (const auto& op : r.result.registry_ops()) applied.insert(op.cls());
  return applied;
}

bool SameOp(const v1::RegistryOp& a, const v1::RegistryOp& b) {
  return a.kind() == b.kind() && a.cls() == b.cls() && a.attr() == b.attr();
}

// A carried result was verified with the lines of its own sweep. When one of them, for the
// entry's class, is not among this sweep's merged lines (another attribute now, a conflict, or
// its proposer re-ran without it), the carried verdict no longer stands.
bool VerifiedWithAnotherLine(const ShardRecord& s, const ResultRecord& r, const std::string& cls,
                             const std::vector<v1::RegistryOp>& merged) {
  auto stale = [&](const v1::RegistryOp& op) {
    return op.cls() == cls &&
           std::none_of(merged.begin(), merged.end(), [&](const auto& m) { return SameOp(m, op); });
  };
  return std::any_of(s.spec.pre_registry().begin(), s.spec.pre_registry().end(), stale) ||
         std::any_of(r.result.registry_ops().begin(), r.result.registry_ops().end(), stale);
}

// An entry to verify again, as the shard of its newest result carried it.
struct Candidate {
  const ShardRecord* shard;
  v1::ShardEntry entry;
  int wave;
  std::string cls;  // the output class its probe saw
};

// The latest verdict per entry comes from the latest wave (a carried result is older than any
// of this sweep's own): only entries whose newest result missed a merged line are candidates,
// and carried ones verified with a line this sweep does not write. Keyed by file + key.
std::map<std::string, Candidate> EntriesMissingAMergedLine(
    const std::vector<ResultRecord>& results, const SweepShards& sweep,
    const std::vector<v1::RegistryOp>& merged) {
  const std::set<std::string> classes = MergedClasses(merged);
  std::map<std::string, Candidate> latest;             // file + key -> newest candidate (or none)
  std::map<std::string, std::pair<bool, int>> newest;  // file + key -> (own, wave)
  for (const auto& r : results) {
    auto it = sweep.by_id.find(r.shard_id);
    if (it == sweep.by_id.end()) continue;
    const ShardRecord* s = it->second;
    if (s->spec.phase() == v1::PHASE_VERIFY) continue;  // no probe there
    const std::set<std::string> applied = ClassesVerifiedWith(*s, r);
    const std::pair<bool, int> order{!Carried(*s), s->spec.wave()};
    for (const auto& o : r.result.entries()) {
      const std::string id = o.file() + "\n" + o.key();
      auto [at, first] = newest.try_emplace(id, order);
      if (!first && at->second > order) continue;
      at->second = order;
      latest.erase(id);
      const std::string& cls = o.output_class();
      if (cls.empty()) continue;
      const bool missing = classes.count(cls) && !applied.count(cls);
      if (!missing && !(Carried(*s) && VerifiedWithAnotherLine(*s, r, cls, merged))) continue;
      for (const auto& e : s->spec.entries()) {
        if (e.key() == o.key() && e.file() == o.file()) {
          latest[id] = Candidate{s, e, s->spec.wave(), cls};
        }
      }
    }
  }
  return latest;
}

// The latest wave's candidates per (playbook, loader), like the first wave; a candidate from an
// earlier wave was already re-verified in a later one.
std::map<std::pair<std::string, std::string>, std::vector<Candidate>> GroupPerLoader(
    const std::map<std::string, Candidate>& latest, int wave) {
  std::map<std::pair<std::string, std::string>, std::vector<Candidate>> groups;
  for (const auto& [id, c] : latest) {
    if (c.wave != wave && !Carried(*c.shard)) continue;
    groups[{c.shard->spec.playbook(), c.shard->spec.loader()}].push_back(c);
  }
  return groups;
}

// Each loader's edits so far (from the shards of that loader, in acceptance order), so a later
// edit builds on them. One pass over the results for every loader of the wave.
std::map<std::string, std::vector<v1::FileEdit>> EditsPerLoader(
    const std::vector<ResultRecord>& results, const SweepShards& sweep) {
  std::map<std::string, std::vector<v1::FileEdit>> edits;
  for (const auto& r : results) {
    if (r.result.file_edits().empty()) continue;
    auto it = sweep.by_id.find(r.shard_id);
    if (it == sweep.by_id.end()) continue;
    auto& loader = edits[it->second->spec.loader()];
    for (const auto& fe : r.result.file_edits()) loader.push_back(fe);
  }
  return edits;
}

// Tensor-parallel shards stay on n300-llmbox; the others verify on the sweep's archs.
std::vector<std::string> TargetArchs(const ShardRecord& origin,
                                     const std::vector<std::string>& archs) {
  return origin.archs.size() == 1 && origin.archs[0] == inventory::kTensorParallelArch
             ? std::vector<std::string>{std::string(inventory::kTensorParallelArch)}
             : archs;
}

// One (playbook, loader)'s entries to verify again, and what their shards pre-apply.
struct Group {
  const ShardRecord* origin;  // the shard of the first candidate: the new shards copy its spec
  std::vector<Candidate> candidates;
  std::vector<v1::FileEdit> loader_edits;
};

// Makes the next wave's shards, numbered on from the sweep's last shard.
class ShardMaker {
 public:
  ShardMaker(const std::string& sweep_id, int wave, const std::vector<v1::RegistryOp>& merged,
             int first_number, bool ahead)
      : sweep_id_(sweep_id), wave_(wave), merged_(merged), n_(first_number), ahead_(ahead) {}

  // The origin's spec with the group's entries, the loader's edits and every merged registry
  // line pre-applied.
  ShardRecord Make(const Group& g, v1::ShardPhase phase, const std::string& arch) {
    ShardRecord s;
    s.id = planning::ShardId(sweep_id_, n_++);
    s.sweep_id = sweep_id_;
    s.priority = g.origin->priority;
    // The origin's estimate for its whole group, for the share of its entries verified again,
    // and for this phase (a probe phase: kProbeShare of it, as the planner estimates).
    const double origin_share =
        g.origin->spec.phase() == v1::PHASE_PROBE ? planning::kProbeShare : 1;
    const int planned = g.origin->spec.entries_size();
    const double entries_share =
        planned > 0 ? static_cast<double>(g.candidates.size()) / planned : 1;
    s.expected_seconds = g.origin->expected_seconds / origin_share * entries_share *
                         (phase == v1::PHASE_PROBE ? planning::kProbeShare : 1);
    s.spec = g.origin->spec;
    s.spec.clear_carried_from();
    s.spec.set_shard_id(s.id);
    s.spec.set_wave(wave_);
    s.spec.set_phase(phase);
    s.spec.set_arch(arch);
    s.spec.clear_entries();
    for (const auto& c : g.candidates) *s.spec.add_entries() = c.entry;
    s.spec.clear_pre_apply();
    for (const auto& fe : g.loader_edits) *s.spec.add_pre_apply() = fe;
    s.spec.clear_pre_registry();
    for (const auto& op : merged_) *s.spec.add_pre_registry() = op;
    s.spec.set_ahead(ahead_);
    if (phase == v1::PHASE_PROBE) {
      s.cpu_ok = true;
    } else {
      s.archs = {arch};
    }
    return s;
  }

 private:
  const std::string& sweep_id_;
  const int wave_;
  const std::vector<v1::RegistryOp>& merged_;
  int n_;
  const bool ahead_;
};

std::string EntryId(const v1::ShardEntry& e) { return e.file() + "\n" + e.key(); }

// A shard planned ahead stands when the wave is planned if what it verifies is what the wave
// would verify: each entry is still a candidate, the merged line of its output class is the one
// it pre-applied, and its loader's edits are those it started from (a verify phase adds its
// probe's after them). A line for another class does not change an entry's verification:
// unpack_forward_output looks its handler up by the output's exact class name
// (docs/farm.md, "Registry waves start early": next-wave shards planned ahead).
bool Stands(const ShardRecord& a, const std::map<std::string, Candidate>& latest,
            const std::vector<v1::RegistryOp>& merged, const std::vector<v1::FileEdit>& edits) {
  if (a.spec.pre_apply_size() < static_cast<int>(edits.size())) return false;
  for (std::size_t i = 0; i < edits.size(); ++i) {
    if (a.spec.pre_apply(static_cast<int>(i)).SerializeAsString() != edits[i].SerializeAsString()) {
      return false;
    }
  }
  for (const auto& e : a.spec.entries()) {
    auto c = latest.find(EntryId(e));
    if (c == latest.end()) return false;
    auto final_op = std::find_if(merged.begin(), merged.end(),
                                 [&](const auto& op) { return op.cls() == c->second.cls; });
    auto used = std::find_if(a.spec.pre_registry().begin(), a.spec.pre_registry().end(),
                             [&](const auto& op) { return op.cls() == c->second.cls; });
    if (final_op == merged.end() || used == a.spec.pre_registry().end() ||
        !SameOp(*final_op, *used)) {
      return false;
    }
  }
  return true;
}

}  // namespace

WavePlan PlanNextWave(const std::string& sweep_id, const std::vector<const ShardRecord*>& shards,
                      const std::vector<ResultRecord>& results,
                      const std::vector<std::string>& archs, bool split_probe,
                      int first_shard_number, const AheadScope* ahead_scope) {
  // Shards planned ahead count once adopted: until then neither their results nor their wave.
  std::vector<const ShardRecord*> counted;
  std::vector<const ShardRecord*> ahead;
  std::set<std::string> ahead_ids;
  for (const auto* s : shards) {
    if (s->spec.ahead()) {
      ahead.push_back(s);
      ahead_ids.insert(s->id);
    } else {
      counted.push_back(s);
    }
  }
  WavePlan plan =
      MergeRegistry(results, ahead_scope != nullptr ? ahead_scope->planned_ahead : ahead_ids);
  const bool any_carried_line = std::any_of(counted.begin(), counted.end(), [](const auto* s) {
    return Carried(*s) && s->spec.pre_registry_size() > 0;
  });
  // Ahead, `shards` are the loaders' own (an entry belongs to one loader); the latest wave is
  // the sweep's.
  SweepShards sweep = IndexShards(counted);
  if (ahead_scope != nullptr) sweep.wave = ahead_scope->latest_wave;
  // The next wave's shards planned ahead so far (an earlier wave's still flagged were discarded).
  std::erase_if(ahead, [&](const auto* s) { return s->spec.wave() != sweep.wave + 1; });
  if (plan.merged.empty() && !any_carried_line) {
    if (ahead_scope == nullptr) {
      for (const auto* a : ahead) plan.discarded.push_back(a->id);
    }
    return plan;
  }

  const std::map<std::string, std::vector<v1::FileEdit>> edits = EditsPerLoader(results, sweep);
  auto loader_edits = [&](const std::string& loader) {
    auto it = edits.find(loader);
    return it == edits.end() ? std::vector<v1::FileEdit>{} : it->second;
  };
  std::map<std::string, Candidate> latest = EntriesMissingAMergedLine(results, sweep, plan.merged);
  if (ahead_scope != nullptr) {
    // Ahead: only entries no shard planned ahead holds yet.
    for (const auto* a : ahead) {
      for (const auto& e : a->spec.entries()) latest.erase(EntryId(e));
    }
  } else {
    // The wave: the shards planned ahead that stand join it, with their entries; the others are
    // discarded and their entries planned again.
    std::set<std::string> gone;  // a verify phase whose probe is discarded goes with it
    for (const auto* a : ahead) {
      if (!Stands(*a, latest, plan.merged, loader_edits(a->spec.loader()))) gone.insert(a->id);
    }
    for (const auto* a : ahead) {
      if (!a->depends_on.empty() && gone.count(a->depends_on)) gone.insert(a->id);
    }
    std::vector<const ShardRecord*> standing;
    for (const auto* a : ahead) {
      if (gone.count(a->id)) {
        plan.discarded.push_back(a->id);
      } else {
        plan.adopted.push_back(a->id);
        standing.push_back(a);
      }
    }
    for (const auto* a : standing) {
      for (const auto& e : a->spec.entries()) latest.erase(EntryId(e));
    }
  }
  ShardMaker maker(sweep_id, sweep.wave + 1, plan.merged, first_shard_number,
                   ahead_scope != nullptr);
  for (auto& [key, candidates] : GroupPerLoader(latest, sweep.wave)) {
    const ShardRecord& origin = *candidates.front().shard;
    const Group group{&origin, std::move(candidates), loader_edits(origin.spec.loader())};
    planning::AddPhases(
        TargetArchs(origin, archs), split_probe,
        [&](v1::ShardPhase phase, const std::string& arch) {
          return maker.Make(group, phase, arch);
        },
        plan.shards);
  }
  return plan;
}

}  // namespace triage::coord
