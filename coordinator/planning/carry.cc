#include "coordinator/planning/carry.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <tuple>

#include "common/util/strings.h"
#include "coordinator/planning/phases.h"

namespace triage::coord {
namespace {

// (playbook, file, key, input hash) of every entry of a loader's first wave.
using EntrySet = std::set<std::tuple<std::string, std::string, std::string, std::string>>;

struct LoaderShards {
  std::vector<const ShardRecord*> shards;
  int first_wave = INT_MAX;
};

// Shards that carry a group's whole entry list: its first wave's FULL or PROBE shards.
EntrySet FirstWaveEntries(const std::vector<const ShardRecord*>& shards, int first_wave,
                          bool* all_hashed) {
  EntrySet entries;
  for (const ShardRecord* s : shards) {
    if (s->spec.wave() != first_wave || s->spec.phase() == v1::PHASE_VERIFY) continue;
    for (const auto& e : s->spec.entries()) {
      *all_hashed &= !e.input_hash().empty();
      entries.emplace(s->spec.playbook(), e.file(), e.key(), e.input_hash());
    }
  }
  return entries;
}

std::map<std::string, LoaderShards> ByLoader(const std::vector<const ShardRecord*>& shards) {
  std::map<std::string, LoaderShards> loaders;
  for (const ShardRecord* s : shards) {
    LoaderShards& l = loaders[s->spec.loader()];
    l.shards.push_back(s);
    l.first_wave = std::min(l.first_wave, s->spec.wave());
  }
  return loaders;
}

// Why a planned loader is not carried ("" = it is).
std::string WhyNotCarried(const LoaderShards& planned, const LoaderShards* in_base,
                          const std::set<std::string>& with_result) {
  bool hashed = true;
  const EntrySet now = FirstWaveEntries(planned.shards, planned.first_wave, &hashed);
  if (!hashed) return "no input hash";
  if (in_base == nullptr) return "not in the base sweep";
  bool base_hashed = true;
  const EntrySet before = FirstWaveEntries(in_base->shards, in_base->first_wave, &base_hashed);
  if (!base_hashed) return "no input hash in the base sweep";
  if (now != before) return "inputs changed";
  // A later phase left with no entry (the earlier one settled them all) succeeds unleased,
  // with no result.
  for (const ShardRecord* s : in_base->shards) {
    if (s->state != ShardState::kSucceeded ||
        (!with_result.count(s->id) && s->spec.entries_size() > 0)) {
      return "a base shard did not succeed";
    }
  }
  return "";
}

}  // namespace

std::string CarryMismatch(const SweepRecord& base, const SweepRecord& like) {
  if (base.archs != like.archs) {
    return util::StrCat("archs ", util::StrJoin(base.archs, ","), ", not ",
                        util::StrJoin(like.archs, ","));
  }
  if (base.request.executor() != like.request.executor()) {
    return util::StrCat("executor ", base.request.executor(), ", not ", like.request.executor());
  }
  const std::map<std::string, std::string> a(base.request.params().begin(),
                                             base.request.params().end());
  const std::map<std::string, std::string> b(like.request.params().begin(),
                                             like.request.params().end());
  if (a != b) return "other executor parameters";
  for (const auto& p : like.playbooks) {
    if (std::find(base.playbooks.begin(), base.playbooks.end(), p) != base.playbooks.end()) {
      return "";
    }
  }
  return util::StrCat("playbooks ", util::StrJoin(base.playbooks, ","), ", none of ",
                      util::StrJoin(like.playbooks, ","));
}

CarryPlan CarryForward(Plan& plan, const CarryBase& base, const CarryTarget& target) {
  CarryPlan out;
  out.summary.set_base(base.sweep_id);
  std::vector<const ShardRecord*> planned_ptrs;
  for (const auto& s : plan.shards) planned_ptrs.push_back(&s);
  const auto planned = ByLoader(planned_ptrs);
  const auto before = ByLoader(base.shards);
  std::set<std::string> with_result;
  if (base.results != nullptr) {
    for (const auto& r : *base.results) with_result.insert(r.shard_id);
  }

  std::set<std::string> carried_loaders;
  std::map<std::string, int> rerun;  // reason -> loaders
  for (const auto& [loader, shards] : planned) {
    auto b = before.find(loader);
    const std::string why =
        WhyNotCarried(shards, b == before.end() ? nullptr : &b->second, with_result);
    if (why.empty()) {
      carried_loaders.insert(loader);
    } else {
      ++rerun[why];
    }
  }

  // The plan's other shards, numbered densely from 1.
  std::vector<ShardRecord> kept;
  std::map<std::string, std::string> renamed;
  for (auto& s : plan.shards) {
    if (carried_loaders.count(s.spec.loader())) {
      out.summary.set_entries(out.summary.entries() +
                              (s.spec.phase() == v1::PHASE_VERIFY ? 0 : s.spec.entries_size()));
      continue;
    }
    const std::string id = planning::ShardId(target.sweep_id, static_cast<int>(kept.size()) + 1);
    renamed[s.id] = id;
    s.id = id;
    s.spec.set_shard_id(id);
    kept.push_back(std::move(s));
  }
  for (auto& s : kept) {
    if (!s.depends_on.empty()) s.depends_on = renamed.at(s.depends_on);
  }
  plan.shards = std::move(kept);

  // The copies, after them, in the base's order; waves shifted so the last ends at 0.
  std::vector<const ShardRecord*> copied;
  int last_wave = INT_MIN;
  for (const ShardRecord* s : base.shards) {
    if (!carried_loaders.count(s->spec.loader())) continue;
    copied.push_back(s);
    last_wave = std::max(last_wave, s->spec.wave());
  }
  std::map<std::string, std::string> copy_ids;
  int n = static_cast<int>(plan.shards.size());
  for (const ShardRecord* s : copied) copy_ids[s->id] = planning::ShardId(target.sweep_id, ++n);
  for (const ShardRecord* s : copied) {
    ShardRecord c = *s;
    c.id = copy_ids.at(s->id);
    c.sweep_id = target.sweep_id;
    c.lease.reset();
    c.enqueued_at = target.now;
    c.eligible_at = target.now;
    auto dep = copy_ids.find(s->depends_on);
    c.depends_on = dep == copy_ids.end() ? "" : dep->second;
    v1::ShardSpec& spec = c.spec;
    if (!spec.has_carried_from()) {
      spec.mutable_carried_from()->set_sweep_id(s->sweep_id);
      spec.mutable_carried_from()->set_shard_id(s->id);
      spec.mutable_carried_from()->set_wave(s->spec.wave());
    }
    spec.set_shard_id(c.id);
    spec.set_sweep_id(target.sweep_id);
    spec.set_wave(s->spec.wave() - last_wave);
    spec.set_ttxla_commit(target.ttxla_commit);
    spec.set_forge_commit(target.forge_commit);
    spec.set_repo_url(target.repo_url);
    out.shards.push_back(std::move(c));
  }
  if (base.results != nullptr) {
    std::map<std::string, int> copies;
    for (const auto& r : *base.results) {
      auto id = copy_ids.find(r.shard_id);
      if (id == copy_ids.end()) continue;
      ResultRecord c = r;
      c.shard_id = id->second;
      c.sweep_id = target.sweep_id;
      c.lease_id = util::StrCat(id->second, "-carried-", ++copies[id->second]);
      out.results.push_back(std::move(c));
    }
  }

  out.summary.set_loaders(static_cast<int>(carried_loaders.size()));
  out.summary.set_shards(static_cast<int>(out.shards.size()));
  int reruns = 0;
  std::vector<std::string> reasons;
  for (const auto& [why, count] : rerun) {
    reruns += count;
    reasons.push_back(util::StrCat(count, " ", why));
  }
  out.summary.set_rerun_loaders(reruns);
  out.note = util::StrCat("incremental: ", carried_loaders.size(), " loader(s), ",
                          out.summary.entries(), " entries carried from ", base.sweep_id,
                          reruns == 0 ? ""
                                      : util::StrCat("; ", reruns, " loader(s) run (",
                                                     util::StrJoin(reasons, ", "), ")"));
  return out;
}

}  // namespace triage::coord
