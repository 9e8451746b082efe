#include "coordinator/planning/waves.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "common/util/strings.h"

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

bool AwaitsVerification(const v1::EntryOutcome& o) {
  if (o.disposition() != v1::EntryOutcome::DISPOSITION_UNSPECIFIED) {
    return o.disposition() == v1::EntryOutcome::VERIFY;
  }
  return o.verdict() == "ready";
}

WavePlan MergeRegistry(const std::vector<ResultRecord>& results) {
  WavePlan plan;
  std::map<std::string, std::set<std::string>> adds;
  std::set<std::string> removes;
  for (const auto& r : results) {
    for (const auto& op : r.result.registry_ops()) {
      if (op.kind() == v1::RegistryOp::ADD) adds[op.cls()].insert(op.attr());
      if (op.kind() == v1::RegistryOp::REMOVE) removes.insert(op.cls());
    }
  }
  for (const auto& cls : removes) {
    v1::RegistryOp op;
    op.set_kind(v1::RegistryOp::REMOVE);
    op.set_cls(cls);
    plan.merged.push_back(op);
  }
  for (const auto& [cls, attrs] : adds) {
    if (attrs.size() > 1) {
      plan.conflicts.push_back(util::StrCat("registry: class ", cls, ": attributes ",
                                            util::StrJoin(attrs, ", "),
                                            " proposed; no line written"));
      continue;
    }
    v1::RegistryOp op;
    op.set_kind(v1::RegistryOp::ADD);
    op.set_cls(cls);
    op.set_attr(*attrs.begin());
    plan.merged.push_back(op);
  }
  return plan;
}

WavePlan PlanNextWave(const std::string& sweep_id, const std::vector<const ShardRecord*>& shards,
                      const std::vector<ResultRecord>& results,
                      const std::vector<std::string>& archs, bool split_probe,
                      int first_shard_number) {
  WavePlan plan = MergeRegistry(results);
  std::set<std::string> classes;
  for (const auto& op : plan.merged) classes.insert(op.cls());
  if (classes.empty()) return plan;

  std::map<std::string, const ShardRecord*> by_id;
  int wave = 0;
  for (const auto* s : shards) {
    by_id[s->id] = s;
    wave = std::max(wave, s->spec.wave());
  }
  // The latest verdict per entry comes from the latest wave: only entries whose newest result
  // missed a merged line are candidates.
  struct Candidate {
    const ShardRecord* shard;
    v1::ShardEntry entry;
    int wave;
  };
  std::map<std::string, Candidate> latest;  // file + key -> newest candidate (or none)
  std::map<std::string, int> newest_wave;
  for (const auto& r : results) {
    auto it = by_id.find(r.shard_id);
    if (it == by_id.end()) continue;
    const ShardRecord* s = it->second;
    if (s->spec.phase() == v1::PHASE_VERIFY) continue;  // no probe there
    std::set<std::string> applied;
    for (const auto& op : s->spec.pre_registry()) applied.insert(op.cls());
    for (const auto& op : r.result.registry_ops()) applied.insert(op.cls());
    for (const auto& o : r.result.entries()) {
      const std::string id = o.file() + "\n" + o.key();
      if (newest_wave[id] > s->spec.wave()) continue;
      newest_wave[id] = s->spec.wave();
      latest.erase(id);
      if (o.output_class().empty() || !classes.count(o.output_class()) ||
          applied.count(o.output_class())) {
        continue;
      }
      for (const auto& e : s->spec.entries()) {
        if (e.key() == o.key() && e.file() == o.file()) {
          latest[id] = Candidate{s, e, s->spec.wave()};
        }
      }
    }
  }
  // Group per (playbook, loader) like the first wave.
  std::map<std::pair<std::string, std::string>, std::vector<Candidate>> groups;
  for (auto& [id, c] : latest) {
    if (c.wave != wave) continue;  // already re-verified in a later wave
    groups[{c.shard->spec.playbook(), c.shard->spec.loader()}].push_back(c);
  }
  int n = first_shard_number;
  for (auto& [key, cands] : groups) {
    const ShardRecord* origin = cands.front().shard;
    // The loader's edits so far (from the shards of this loader), so a later edit builds on them.
    std::vector<v1::FileEdit> loader_edits;
    for (const auto& r : results) {
      auto it = by_id.find(r.shard_id);
      if (it == by_id.end() || it->second->spec.loader() != origin->spec.loader()) continue;
      for (const auto& fe : r.result.file_edits()) loader_edits.push_back(fe);
    }
    auto make = [&](v1::ShardPhase phase, const std::string& arch) {
      ShardRecord s;
      char buf[16];
      std::snprintf(buf, sizeof(buf), "%03d", n++);
      s.id = util::StrCat(sweep_id, "-s", buf);
      s.sweep_id = sweep_id;
      s.priority = origin->priority;
      s.expected_seconds = origin->expected_seconds;
      s.spec = origin->spec;
      s.spec.set_shard_id(s.id);
      s.spec.set_wave(wave + 1);
      s.spec.set_phase(phase);
      s.spec.set_arch(arch);
      s.spec.clear_entries();
      for (const auto& c : cands) *s.spec.add_entries() = c.entry;
      s.spec.clear_pre_apply();
      for (const auto& fe : loader_edits) *s.spec.add_pre_apply() = fe;
      s.spec.clear_pre_registry();
      for (const auto& op : plan.merged) *s.spec.add_pre_registry() = op;
      if (phase == v1::PHASE_PROBE) {
        s.cpu_ok = true;
      } else {
        s.archs = {arch};
      }
      return s;
    };
    std::vector<std::string> targets =
        origin->archs.size() == 1 && origin->archs[0] == "n300-llmbox"
            ? std::vector<std::string>{"n300-llmbox"}
            : archs;
    std::size_t verify_from = 0;
    if (split_probe) {
      plan.shards.push_back(make(v1::PHASE_PROBE, ""));
    } else {
      plan.shards.push_back(make(v1::PHASE_FULL, targets[0]));
      verify_from = 1;
    }
    const std::string first = plan.shards.back().id;
    for (std::size_t i = verify_from; i < targets.size(); ++i) {
      ShardRecord v = make(v1::PHASE_VERIFY, targets[i]);
      v.depends_on = first;
      v.state = ShardState::kWaiting;
      plan.shards.push_back(std::move(v));
    }
  }
  return plan;
}

}  // namespace triage::coord
