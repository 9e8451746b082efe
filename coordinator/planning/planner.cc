#include "coordinator/planning/planner.h"

#include <algorithm>
#include <cstdio>

#include "common/registry/registry.h"
#include "common/util/strings.h"

namespace triage::coord {
namespace {

std::string TestFunction(const inventory::Document& doc) {
  if (doc.framework() == "jax") return "test_all_models_jax";
  return "test_all_models_torch";
}

std::string ShardId(const std::string& sweep_id, int n) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%03d", n);
  return util::StrCat(sweep_id, "-s", buf);
}

}  // namespace

std::string NodeId(const inventory::Document& doc, const inventory::Entry& entry) {
  return util::StrCat("tests/runner/test_models.py::", TestFunction(doc), "[", entry.key, "]");
}

Plan PlanSweep(const inventory::Inventory& inventory, const classify::Classifier& rules,
               const PlanOptions& options, const std::string& sweep_id,
               const std::string& ttxla_commit, const std::string& forge_commit) {
  Plan plan;
  struct Group {
    std::string playbook;
    std::string loader;
    bool tensor_parallel = false;
    std::vector<v1::ShardEntry> entries;
    double expected = 0;
    std::set<std::string> files;
  };
  std::map<std::tuple<std::string, std::string, bool>, Group> groups;
  std::vector<std::tuple<std::string, std::string, bool>> order;

  std::set<std::string> bad_files;
  for (const auto& d : inventory.diagnostics) {
    if (d.severity == util::Severity::kError) bad_files.insert(d.file);
  }
  for (const auto& ref : inventory.TestEntries()) {
    const inventory::Entry& e = *ref.entry;
    if (!e.parts) continue;
    auto c = rules.Classify(e);
    if (!c.match) continue;
    const auto& pb = c.match->playbook;
    if (!options.playbooks.empty() && std::find(options.playbooks.begin(), options.playbooks.end(),
                                                pb) == options.playbooks.end()) {
      continue;
    }
    if (bad_files.count(ref.document->path())) {
      plan.problems.push_back(util::StrCat(ref.document->path(), ": entry '", e.key,
                                           "' left out: the file has validation errors"));
      continue;
    }
    v1::ShardEntry se;
    se.set_key(e.key);
    se.set_file(ref.document->path());
    se.set_flavor(c.match->flavor);
    se.set_reason(c.match->reason);
    se.set_status(std::string(c.match->arch.empty() ? e.Status() : e.StatusForArch(c.match->arch)));
    se.set_bringup_status(std::string(e.StringField("bringup_status")));
    se.set_override_arch(c.match->arch);
    for (const auto& cap : c.match->captures) se.add_captures(cap);

    const bool tp = e.parts->parallelism == "tensor_parallel";
    auto key = std::make_tuple(pb, e.loader, tp);
    auto [it, inserted] = groups.try_emplace(key);
    if (inserted) {
      order.push_back(key);
      it->second.playbook = pb;
      it->second.loader = e.loader;
      it->second.tensor_parallel = tp;
    }
    double seconds = 0;
    if (auto d = options.durations.find(NodeId(*ref.document, e));
        d != options.durations.end() && d->second >= options.min_trusted_seconds) {
      seconds = d->second;
    } else if (auto est = options.playbook_estimates.find(pb);
               est != options.playbook_estimates.end()) {
      seconds = est->second;
    } else {
      seconds = options.default_estimate;
    }
    it->second.expected += seconds;
    it->second.files.insert(ref.document->path());
    it->second.entries.push_back(se);
    plan.entries.push_back(se);
    plan.entry_playbooks.push_back(pb);
  }

  std::vector<std::string> archs =
      options.archs.empty() ? std::vector<std::string>{"n150"} : options.archs;
  int n = 0;
  for (const auto& key : order) {
    const Group& g = groups[key];
    auto base = [&](v1::ShardPhase phase, const std::string& arch) {
      ShardRecord s;
      s.id = ShardId(sweep_id, ++n);
      s.sweep_id = sweep_id;
      s.priority = options.priority;
      s.expected_seconds = phase == v1::PHASE_PROBE ? g.expected * 0.2 : g.expected;
      v1::ShardSpec& spec = s.spec;
      spec.set_shard_id(s.id);
      spec.set_sweep_id(sweep_id);
      spec.set_playbook(g.playbook);
      spec.set_loader(g.loader);
      spec.set_wave(1);
      spec.set_phase(phase);
      spec.set_arch(arch);
      for (const auto& e : g.entries) *spec.add_entries() = e;
      spec.set_ttxla_commit(ttxla_commit);
      spec.set_forge_commit(forge_commit);
      spec.set_repo_url(options.repo_url);
      spec.set_executor(options.executor);
      for (const auto& [k, v] : options.params) (*spec.mutable_params())[k] = v;
      spec.set_timeout_seconds(static_cast<std::int64_t>(std::max(1800.0, 3 * s.expected_seconds)));
      // What the shard may change: its loader's directory, the registry, its YAML files.
      std::string loader_dir = g.loader.substr(0, g.loader.rfind('/') + 1);
      spec.add_owned_files(loader_dir);
      spec.add_owned_files(std::string(registry::kTrainingUtilsPath));
      for (const auto& f : g.files) spec.add_owned_files(f);
      if (phase == v1::PHASE_PROBE) {
        s.cpu_ok = true;
      } else {
        s.archs = {arch};
      }
      return s;
    };
    if (g.tensor_parallel) {
      plan.shards.push_back(base(v1::PHASE_FULL, "n300-llmbox"));
      continue;
    }
    std::string first_id;
    std::size_t verify_from = 0;
    if (options.split_probe) {
      plan.shards.push_back(base(v1::PHASE_PROBE, ""));
    } else {
      plan.shards.push_back(base(v1::PHASE_FULL, archs[0]));
      verify_from = 1;
    }
    first_id = plan.shards.back().id;
    for (std::size_t i = verify_from; i < archs.size(); ++i) {
      ShardRecord v = base(v1::PHASE_VERIFY, archs[i]);
      v.depends_on = first_id;
      v.state = ShardState::kWaiting;
      plan.shards.push_back(std::move(v));
    }
  }
  return plan;
}

}  // namespace triage::coord
