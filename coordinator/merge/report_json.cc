// report.json's parts (docs/report.md has the contract): the sweep as a whole, each entry, the
// totals, the failure clusters, each entry's measured times and the sweep's makespan.

#include <cmath>

#include "common/inventory/document.h"
#include "common/util/strings.h"
#include "coordinator/merge/report_internal.h"
#include "coordinator/planning/planner.h"

namespace triage::merge {
namespace report_internal {
namespace {

// The resolved fields a script cares about, or null when the entry did not change.
json Resolved(const inventory::Entry* e, const std::string& arch) {
  if (e == nullptr) return nullptr;
  json o;
  auto str = [&](const char* name) -> json {
    const inventory::Value* v = e->FieldForArch(name, arch);
    return v != nullptr && v->is_string() ? json(v->string) : json(nullptr);
  };
  o["status"] = std::string(e->StatusForArch(arch));
  o["bringup_status"] = str("bringup_status");
  o["reason"] = str("reason");
  const inventory::Value* pcc = e->FieldForArch("assert_pcc", arch);
  o["assert_pcc"] = pcc != nullptr && pcc->kind == inventory::Value::Kind::kBool
                        ? json(pcc->boolean)
                        : json(nullptr);
  const inventory::Value* markers = e->FieldForArch("markers", arch);
  if (markers != nullptr && markers->is_list()) {
    json m = json::array();
    for (const auto& i : markers->list) m.push_back(i.string);
    o["markers"] = m;
  } else {
    o["markers"] = nullptr;
  }
  return o;
}

const char* PlacementName(EntryMerge::Placement p) {
  switch (p) {
    case EntryMerge::Placement::kTopLevel:
      return "top_level";
    case EntryMerge::Placement::kPerArch:
      return "arch_overrides";
    case EntryMerge::Placement::kConflict:
      return "conflict";
    case EntryMerge::Placement::kUnchanged:
      break;
  }
  return "unchanged";
}

}  // namespace

// report.json's fields about the sweep as a whole: what ran, on what, and the merge's registry
// lines and conflicts (the entries and totals are added after).
json SweepJson(const coord::SweepRecord& sweep, const MergeOutput& merge,
               const ClassCounts& per_class) {
  json j;
  j["sweep"] = sweep.id;
  j["state"] = std::string(coord::SweepStateName(sweep.state));
  j["repo"] = sweep.repo;
  j["commits"] = {{"tt-xla", sweep.ttxla_commit},
                  {"tt_forge_models", sweep.forge_commit},
                  {"tt_forge_models_gitlink", sweep.details.forge_gitlink_commit()},
                  {"tt_forge_models_source", sweep.details.forge_source()}};
  j["notes"] = std::vector<std::string>(sweep.details.notes().begin(), sweep.details.notes().end());
  const std::string partial = PartialNote(sweep);
  j["partial"] = partial.empty() ? json(nullptr) : json(partial);
  if (sweep.details.has_carry()) {
    const v1::Carry& c = sweep.details.carry();
    j["carry"] = {{"base", c.base().empty() ? json(nullptr) : json(c.base())},
                  {"loaders", c.loaders()},
                  {"shards", c.shards()},
                  {"entries", c.entries()},
                  {"rerun_loaders", c.rerun_loaders()}};
  } else {
    j["carry"] = nullptr;
  }
  j["archs"] = sweep.archs;
  j["playbooks"] = sweep.playbooks;
  j["executor"] = sweep.request.executor();
  j["conflicts"] = merge.conflicts;
  json registry = json::array();
  for (const auto& op : merge.registry) {
    json r = {{"op", op.kind() == v1::RegistryOp::ADD ? "add" : "remove"}, {"class", op.cls()}};
    if (op.kind() == v1::RegistryOp::ADD) r["attr"] = op.attr();
    r["entries"] = EntriesOfClass(per_class, op.cls());
    registry.push_back(r);
  }
  j["registry"] = registry;
  return j;
}

// One entry of report.json (docs/report.md has the contract).
json EntryJson(const EntryMerge& e, const EntryFacts& f, const std::vector<std::string>& archs) {
  const std::string first_arch = archs.empty() ? "n150" : archs.front();
  json entry;
  entry["key"] = e.key;
  entry["file"] = e.file;
  entry["playbook"] = e.playbook;
  entry["playbooks"] = PlaybooksOf(e);
  entry["flavor"] = e.flavor;
  entry["cluster"] = e.cluster.empty() ? json(nullptr) : json(e.cluster);
  // The first fingerprint a command reported for the entry, in arch order.
  json fingerprint = nullptr;
  for (const auto& t : f.targets) {
    auto o = e.outcomes.find(t);
    if (fingerprint.is_null() && o != e.outcomes.end() && o->second.has_summary()) {
      fingerprint = o->second.summary().fingerprint();
    }
  }
  entry["fingerprint"] = fingerprint;
  entry["loader"] = e.loader;
  entry["wave"] = e.wave;
  entry["carried_from"] = e.carried_from.empty() ? json(nullptr) : json(e.carried_from);
  entry["outcome"] = Resolved(f.final_entry, f.targets.empty() ? first_arch : f.targets.front());
  json arch_outcomes = json::object();
  json verdicts = json::object();
  for (const auto& t : f.targets) {
    arch_outcomes[t] = Resolved(f.final_entry, t);
    auto o = e.outcomes.find(t);
    if (o != e.outcomes.end()) {
      verdicts[t] = {{"verdict", o->second.verdict()},
                     {"stage", o->second.stage()},
                     {"reason", o->second.reason()}};
      // The command executor's check by the farm (docs/farm.md, "Executors"), when it ran.
      if (!o->second.command_check().empty()) {
        verdicts[t]["command_check"] = o->second.command_check();
      }
      // What the command said of its run (docs/remediation.md), when it wrote a summary.
      if (o->second.has_summary()) verdicts[t]["summary"] = CommandSummaryJson(o->second.summary());
      // Fixed by an earlier change with no command run (docs/remediation.md).
      if (!o->second.fixed_by().empty()) verdicts[t]["fixed_by"] = o->second.fixed_by();
      // A command's outcome: the shard whose provenance (report.json's "provenance") it has.
      auto shard = e.deciding_shard.find(t);
      if ((!o->second.command_check().empty() || o->second.verdict() == "command") &&
          shard != e.deciding_shard.end()) {
        verdicts[t]["shard"] = shard->second;
      }
    }
  }
  entry["arch_outcomes"] = arch_outcomes;
  entry["verdicts"] = verdicts;
  entry["placement"] = PlacementName(e.placement);
  entry["label"] = f.label.empty() ? json(nullptr) : json(f.label);
  if (e.probe) {
    entry["probe_finding"] = e.probe->probe_finding();
    entry["fix_path"] = e.probe->fix_path();
    entry["why_not_other"] = e.probe->why_not_other();
    entry["output_class"] = e.probe->output_class();
    if (e.probe->has_loss_target()) {
      const v1::LossTarget& t = e.probe->loss_target();
      json not_chosen = json::array();
      for (const auto& c : t.not_chosen()) {
        not_chosen.push_back({{"name", c.name()}, {"shape", c.shape()}});
      }
      entry["loss_target"] = {{"family", t.family()},
                              {"chosen", t.chosen()},
                              {"reason", t.reason()},
                              {"by_rule", t.by_rule()},
                              {"not_chosen", not_chosen}};
    }
  }
  entry["inference"] = f.inference.empty() ? json(nullptr) : json(f.inference);
  entry["review"] = f.review;
  entry["conflict"] = e.placement == EntryMerge::Placement::kConflict;
  if (!e.conflict.empty()) entry["conflict_reason"] = e.conflict;
  json evidence = json::array();
  if (f.evidence != nullptr) {
    for (const auto& link : *f.evidence) evidence.push_back(link.path);
  }
  entry["evidence"] = evidence;
  return entry;
}

json TotalsJson(const v1::EntryCounts& counts, const std::map<std::string, int>& by_outcome,
                const Tallies& t, std::size_t conflicts) {
  json totals;
  totals["entries"] = counts.total();
  totals["decided"] = counts.decided();
  totals["by_playbook"] = t.by_playbook;
  totals["by_outcome"] = by_outcome;
  totals["review"] = counts.review();
  totals["conflicted_entries"] = counts.conflicts();
  totals["conflicts"] = conflicts;
  totals["by_stage"] = t.by_stage;
  return totals;
}

// The decided outcomes the patch leaves failing (KNOWN_FAILURE_XFAIL or NOT_SUPPORTED_SKIP on an
// arch), read from report.json's entries.
std::vector<FailingOutcome> FailingOutcomes(const json& entries) {
  std::vector<FailingOutcome> out;
  for (const auto& e : entries) {
    for (const auto& [arch, o] : e.at("arch_outcomes").items()) {
      if (!o.is_object()) continue;
      const std::string status = o.value("status", "");
      if (status != "KNOWN_FAILURE_XFAIL" && status != "NOT_SUPPORTED_SKIP") continue;
      out.push_back({e.at("key").get<std::string>(), arch,
                     o.at("reason").is_string() ? o.at("reason").get<std::string>() : ""});
    }
  }
  return out;
}

json ClustersJson(const std::vector<FailureCluster>& clusters) {
  json out = json::array();
  for (const auto& c : clusters) {
    json members = json::array();
    for (const auto& m : c.entries) members.push_back({{"key", m.key}, {"archs", m.archs}});
    out.push_back({{"id", c.id},
                   {"signature", c.signature},
                   {"example", c.example},
                   {"size", c.entries.size()},
                   {"entries", members}});
  }
  return out;
}

// ---- Measured times: each entry's pytest durations, the sweep's makespan (docs/report.md)

namespace {

// Seconds as report.json writes them: to the millisecond, the resolution of what measured them.
double Rounded(double seconds) { return std::round(seconds * 1000) / 1000; }

}  // namespace

// An entry's pytest node id (the planner's, so that `triagectl sweep durations` writes keys the
// next sweep's planning finds) and the time its test took on each arch that measured it.
void AddMeasuredTimes(const EntryMerge& e, json& entry) {
  entry["node_id"] = coord::NodeId(e.file, e.key);
  json durations = json::object();
  for (const auto& [arch, o] : e.outcomes) {
    // Under half a millisecond reads as nothing measured, as in the files written from it.
    const double seconds = Rounded(o.duration_seconds());
    if (!arch.empty() && seconds > 0) durations[arch] = seconds;
  }
  entry["durations"] = durations;
}

json MakespanJson(const Makespan& m) {
  json lanes = json::array();
  for (const auto& l : m.lanes) {
    lanes.push_back({{"lane", l.lane},
                     {"shards", l.shards},
                     {"agents", l.agents},
                     {"predicted_device_seconds", Rounded(l.predicted_device_seconds)},
                     {"actual_device_seconds", Rounded(l.actual_device_seconds)},
                     {"predicted_seconds", Rounded(l.predicted_seconds)},
                     {"actual_seconds", Rounded(l.actual_seconds)},
                     {"backups", l.backups},
                     {"backups_won", l.backups_won},
                     {"backup_device_seconds", Rounded(l.backup_device_seconds)}});
  }
  return {{"predicted_seconds", Rounded(m.predicted_seconds)},
          {"actual_seconds", Rounded(m.actual_seconds)},
          {"predicted_from", m.Basis()},
          {"entries_recorded", m.entries_recorded},
          {"entries_estimated", m.entries_estimated},
          {"lanes", lanes}};
}

}  // namespace report_internal
}  // namespace triage::merge
