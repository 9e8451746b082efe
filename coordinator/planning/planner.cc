#include "coordinator/planning/planner.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "agent/playbooks/catalog.h"
#include "common/inventory/key.h"
#include "common/registry/registry.h"
#include "common/util/strings.h"
#include "coordinator/planning/nightly_plan.h"
#include "coordinator/planning/phases.h"
#include "coordinator/planning/shared_wave.h"

namespace triage::coord {
namespace {

std::string TestFunction(std::string_view framework) {
  if (framework == "jax") return "test_all_models_jax";
  return "test_all_models_torch";
}

using Selected = SelectedEntry;

// The entries of one (playbook, loader): single-device or tensor-parallel ones.
struct Group {
  std::string playbook;
  std::string loader;
  bool tensor_parallel = false;
  std::vector<v1::ShardEntry> entries;
  double expected = 0;  // seconds, summed over the entries
  std::set<std::string> files;
  // A cluster's followers (docs/remediation.md, "Fix once, verify many"): the index of the
  // group whose first shard leads the cluster, and the cluster.
  int lead = -1;
  std::string cluster;
};

// Seconds an entry is expected to take: its pytest duration when trusted, else its playbook's
// estimate, else the default; and whether it is an estimate.
std::pair<double, bool> ExpectedSeconds(const PlanOptions& options, const Selected& s) {
  if (auto d = options.durations.find(NodeId(*s.document, *s.entry));
      d != options.durations.end() && d->second >= options.min_trusted_seconds) {
    return {d->second, false};
  }
  if (auto est = options.playbook_estimates.find(s.playbook);
      est != options.playbook_estimates.end()) {
    return {est->second, true};
  }
  return {options.default_estimate, true};
}

// The entry's input hash, for the archs its shards verify on.
std::string InputHash(const PlanOptions& options, const Selected& s,
                      const std::vector<std::string>& archs) {
  const playbooks::CatalogItem* item = playbooks::FindInCatalog(s.playbook);
  const std::string yaml = s.document->EntryText(*s.entry);
  EntryInputs in;
  in.entry_yaml = yaml;
  in.loader = s.entry->loader;
  in.playbook = s.playbook;
  in.playbook_version = item != nullptr ? item->entry->version : "";
  in.executor = options.executor;
  in.params = &options.params;
  in.archs = &archs;
  return EntryInputHash(*options.inputs, s.shard_entry, in);
}

// Loader-wide scope: one group per (playbook, loader), tensor-parallel entries apart, in the
// order of each group's first entry.
std::vector<Group> GroupPerLoader(const std::vector<Selected>& selected, const PlanOptions& options,
                                  const std::vector<std::string>& archs) {
  const std::vector<std::string> tp_archs = {std::string(inventory::kTensorParallelArch)};
  std::vector<Group> groups;
  std::map<std::tuple<std::string, std::string, bool>, std::size_t> index;
  for (const auto& s : selected) {
    const bool tp = s.entry->parts->parallelism == "tensor_parallel";
    auto [it, inserted] =
        index.try_emplace(std::make_tuple(s.playbook, s.entry->loader, tp), groups.size());
    if (inserted) {
      Group& g = groups.emplace_back();
      g.playbook = s.playbook;
      g.loader = s.entry->loader;
      g.tensor_parallel = tp;
    }
    Group& g = groups[it->second];
    const auto [seconds, estimated] = ExpectedSeconds(options, s);
    g.expected += seconds;
    g.files.insert(s.document->path());
    g.entries.push_back(s.shard_entry);
    g.entries.back().set_expected_seconds(seconds);
    g.entries.back().set_estimated(estimated);
    if (options.inputs != nullptr) {
      g.entries.back().set_input_hash(InputHash(options, s, tp ? tp_archs : archs));
    }
  }
  return groups;
}

// Fix once, verify many (docs/remediation.md): each failure cluster with entries in more than
// one group is led by the group holding most of its entries (the first such on a tie); its
// entries in other groups move to follower groups, one per (cluster, loader), placed after the
// groups they came from. A group left without entries is dropped. Tensor-parallel groups are
// neither leads nor followers (they run whole on their own machine).
std::vector<Group> FanOutClusters(std::vector<Group> groups) {
  std::map<std::string, std::map<std::size_t, int>> members;  // cluster -> group -> entries
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].tensor_parallel) continue;
    for (const auto& e : groups[g].entries) {
      if (!e.cluster().empty()) ++members[e.cluster()][g];
    }
  }
  std::map<std::string, std::size_t> lead;  // cluster -> its lead group (old index)
  for (const auto& [cluster, by_group] : members) {
    if (by_group.size() < 2) continue;
    std::size_t best = by_group.begin()->first;
    for (const auto& [g, n] : by_group) {
      if (n > by_group.at(best)) best = g;
    }
    lead[cluster] = best;
  }
  if (lead.empty()) return groups;
  std::vector<Group> out;
  std::vector<int> renumbered(groups.size(), -1);
  std::vector<Group> followers;  // lead as an old index until renumbered
  for (std::size_t g = 0; g < groups.size(); ++g) {
    // Each part keeps its own entries' seconds and test-config files.
    auto empty_like = [&groups, g]() {
      Group part = groups[g];
      part.entries.clear();
      part.expected = 0;
      part.files.clear();
      return part;
    };
    auto add = [](Group& part, const v1::ShardEntry& e) {
      part.entries.push_back(e);
      part.expected += e.expected_seconds();
      part.files.insert(e.file());
    };
    Group kept = empty_like();
    std::map<std::string, std::size_t> mine;  // cluster -> index in followers
    for (const auto& e : groups[g].entries) {
      auto l = lead.find(e.cluster());
      if (groups[g].tensor_parallel || l == lead.end() || l->second == g) {
        add(kept, e);
        continue;
      }
      auto [at, fresh] = mine.try_emplace(e.cluster(), followers.size());
      if (fresh) {
        Group& f = followers.emplace_back(empty_like());
        f.lead = static_cast<int>(l->second);
        f.cluster = e.cluster();
      }
      add(followers[at->second], e);
    }
    if (!kept.entries.empty()) {
      renumbered[g] = static_cast<int>(out.size());
      out.push_back(std::move(kept));
    }
  }
  for (auto& f : followers) {
    f.lead = renumbered[f.lead];  // a lead group keeps its cluster's entries: never dropped
    out.push_back(std::move(f));
  }
  return out;
}

// Makes the first wave's shards, numbered in the order they are made.
class ShardMaker {
 public:
  ShardMaker(const PlanOptions& options, const std::string& sweep_id,
             const std::string& ttxla_commit, const std::string& forge_commit)
      : options_(options),
        sweep_id_(sweep_id),
        ttxla_commit_(ttxla_commit),
        forge_commit_(forge_commit) {}

  ShardRecord Make(const Group& g, v1::ShardPhase phase, const std::string& arch) {
    ShardRecord s;
    s.id = planning::ShardId(sweep_id_, ++n_);
    s.sweep_id = sweep_id_;
    s.priority = options_.priority;
    s.expected_seconds = phase == v1::PHASE_PROBE ? g.expected * planning::kProbeShare : g.expected;
    v1::ShardSpec& spec = s.spec;
    spec.set_shard_id(s.id);
    spec.set_sweep_id(sweep_id_);
    spec.set_playbook(g.playbook);
    spec.set_loader(g.loader);
    spec.set_wave(1);
    spec.set_phase(phase);
    spec.set_arch(arch);
    for (const auto& e : g.entries) *spec.add_entries() = e;
    spec.set_ttxla_commit(ttxla_commit_);
    spec.set_forge_commit(forge_commit_);
    spec.set_repo_url(options_.repo_url);
    spec.set_executor(options_.executor);
    for (const auto& [k, v] : options_.params) (*spec.mutable_params())[k] = v;
    spec.set_timeout_seconds(static_cast<std::int64_t>(std::max(1800.0, 3 * s.expected_seconds)));
    // What the shard may change: its loader's directory, the registry, its YAML files.
    std::string loader_dir = g.loader.substr(0, g.loader.rfind('/') + 1);
    spec.add_owned_files(loader_dir);
    spec.add_owned_files(std::string(registry::kTrainingUtilsPath));
    for (const auto& f : g.files) spec.add_owned_files(f);
    if (options_.selector != nullptr) {
      for (const auto& p : options_.selector->shared_paths()) spec.add_shared_paths(p);
    }
    if (phase == v1::PHASE_PROBE) {
      s.cpu_ok = true;
    } else {
      s.archs = {arch};
    }
    return s;
  }

  std::string NextId() { return planning::ShardId(sweep_id_, ++n_); }

 private:
  const PlanOptions& options_;
  const std::string& sweep_id_;
  const std::string& ttxla_commit_;
  const std::string& forge_commit_;
  int n_ = 0;
};

}  // namespace

std::string NodeId(const inventory::Document& doc, const inventory::Entry& entry) {
  return util::StrCat("tests/runner/test_models.py::", TestFunction(doc.framework()), "[",
                      entry.key, "]");
}

std::string NodeId(std::string_view file, std::string_view key) {
  return util::StrCat("tests/runner/test_models.py::",
                      TestFunction(inventory::FrameworkOfPath(file)), "[", key, "]");
}

Plan PlanSweep(const inventory::Inventory& inventory, const classify::Classifier& rules,
               const PlanOptions& options, const std::string& sweep_id,
               const std::string& ttxla_commit, const std::string& forge_commit) {
  Plan plan;
  static const Selector* const every_classified = [] {
    return new Selector(*Selector::Compile(v1::Selection()));
  }();
  SelectOptions select{&rules, options.playbooks, options.archs};
  Selection selection = SelectEntries(
      inventory, options.selector != nullptr ? *options.selector : *every_classified, select);
  plan.problems = std::move(selection.problems);
  const std::vector<Selected>& selected = selection.entries;
  for (const auto& s : selected) {
    plan.entries.push_back(s.shard_entry);
    plan.entry_playbooks.push_back(s.playbook);
  }
  const std::vector<std::string> archs =
      options.archs.empty() ? std::vector<std::string>{"n150"} : options.archs;
  ShardMaker maker(options, sweep_id, ttxla_commit, forge_commit);
  std::vector<Group> groups = GroupPerLoader(selected, options, archs);
  // A probe phase on a CPU verifies nothing, so no lead could be accepted before its followers.
  if (options.selector != nullptr && options.selector->fan_out() && !options.split_probe) {
    groups = FanOutClusters(std::move(groups));
  }
  std::vector<std::size_t> first_shard(groups.size());  // index in plan.shards
  // Groups leading a cluster, in order, with the clusters each leads.
  std::vector<std::pair<int, std::set<std::string>>> leads;
  for (std::size_t k = 0; k < groups.size(); ++k) {
    const Group& g = groups[k];
    first_shard[k] = plan.shards.size();
    if (g.tensor_parallel) {  // tensor-parallel entries run whole on n300-llmbox
      plan.shards.push_back(
          maker.Make(g, v1::PHASE_FULL, std::string(inventory::kTensorParallelArch)));
      continue;
    }
    planning::AddPhases(
        archs, options.split_probe,
        [&](v1::ShardPhase phase, const std::string& arch) { return maker.Make(g, phase, arch); },
        plan.shards);
    if (g.lead >= 0) {
      // A follower's first shard waits for its lead's first shard, which runs on the same arch.
      ShardRecord& f = plan.shards[first_shard[k]];
      const ShardRecord& lead = plan.shards[first_shard[g.lead]];
      f.state = ShardState::kWaiting;
      f.depends_on = lead.id;
      f.spec.mutable_fan_out()->set_lead_shard(lead.id);
      f.spec.mutable_fan_out()->set_cluster(g.cluster);
      if (options.selector->shared_paths().empty()) continue;
      auto l = std::find_if(leads.begin(), leads.end(),
                            [&g](const auto& led) { return led.first == g.lead; });
      if (l == leads.end()) l = leads.insert(leads.end(), {g.lead, {}});
      l->second.insert(g.cluster);
    }
  }
  // Each lead's shared fix is checked in a wave over what else it can affect (shared_wave.h).
  for (const auto& [lead, clusters] : leads) {
    plan.shards.push_back(MakeWaveShard(plan.shards[first_shard[lead]], maker.NextId(), selected,
                                        inventory, clusters));
  }
  return plan;
}

std::string RecheckKey(std::string_view file, std::string_view key, std::string_view arch) {
  return util::StrCat(file, "\n", key, "\n", arch);
}

Plan PlanEntries(const inventory::Inventory& inventory, const classify::Classifier& rules,
                 const v1::StartSweepRequest& request, const PlanOptions& options,
                 const std::string& sweep_id, const std::string& ttxla_commit,
                 const std::string& forge_commit, TimePoint now) {
  if (!request.nightly().empty()) {
    return PlanNightly(inventory, request, options, sweep_id, ttxla_commit, forge_commit, now);
  }
  if (request.recheck_skipped()) {
    return PlanRecheck(inventory, request, options, sweep_id, ttxla_commit, forge_commit, now);
  }
  return PlanSweep(inventory, rules, options, sweep_id, ttxla_commit, forge_commit);
}

}  // namespace triage::coord
