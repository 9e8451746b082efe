#include "coordinator/planning/shared_wave.h"

#include <set>

#include "nlohmann/json.hpp"

#include "common/inventory/key.h"
#include "common/util/strings.h"
#include "coordinator/planning/fan_out.h"

namespace triage::coord {

using json = nlohmann::json;

bool IsWaveShard(const v1::ShardSpec& spec) {
  return spec.params().count(std::string(kWaveParam)) > 0;
}

ShardRecord MakeWaveShard(const ShardRecord& lead, const std::string& id,
                          const std::vector<SelectedEntry>& selected,
                          const inventory::Inventory& inventory,
                          const std::set<std::string>& clusters) {
  const std::string& arch = lead.spec.arch();
  json candidates = json::array();
  for (const auto& s : selected) {
    if (s.entry->loader.empty() || s.entry->loader == lead.spec.loader()) continue;
    if (clusters.count(s.shard_entry.cluster())) continue;  // the followers'
    if (s.entry->parts && s.entry->parts->parallelism == "tensor_parallel") continue;
    const v1::ShardEntry& e = s.shard_entry;
    json c = {{"file", e.file()},
              {"key", e.key()},
              {"status", e.status()},
              {"loader", s.entry->loader},
              {"selected", true}};
    if (!e.reason().empty()) c["reason"] = e.reason();
    if (!e.cluster().empty()) c["cluster"] = e.cluster();
    candidates.push_back(std::move(c));
  }
  for (const auto& ref : inventory.TestEntries()) {
    const inventory::Entry& e = *ref.entry;
    if (e.loader.empty() || ref.document->parallelism() == "tensor_parallel") continue;
    if (e.parts && e.parts->parallelism == "tensor_parallel") continue;
    if (e.StatusForArch(arch) != "EXPECTED_PASSING") continue;
    // The most numerous candidates: only what the agent needs (selected false, no reason).
    candidates.push_back({{"file", ref.document->path()},
                          {"key", e.key},
                          {"status", "EXPECTED_PASSING"},
                          {"loader", e.loader}});
  }
  ShardRecord w;
  w.id = id;
  w.sweep_id = lead.sweep_id;
  w.priority = lead.priority;
  w.state = ShardState::kWaiting;
  w.depends_on = lead.id;
  w.archs = lead.archs;
  w.spec = lead.spec;
  w.spec.set_shard_id(id);
  w.spec.clear_entries();
  w.spec.clear_owned_files();  // it changes nothing
  w.spec.mutable_fan_out()->set_lead_shard(lead.id);
  w.spec.mutable_fan_out()->set_cluster(util::StrJoin(clusters, ", "));
  const json wave = {{"lead", lead.id},
                     {"clusters", clusters},
                     {"sample", kWaveSample},
                     {"candidates", std::move(candidates)}};
  (*w.spec.mutable_params())[std::string(kWaveParam)] = wave.dump();
  // A guess until the lead's fix is known: a sample's worth of the lead's own entries' time.
  const int n = std::max(1, lead.spec.entries_size());
  w.expected_seconds = lead.expected_seconds / n * kWaveSample;
  return w;
}

std::string ReleaseWave(const ShardRecord& lead, const v1::ShardResult* result, ShardRecord& wave,
                        TimePoint now) {
  wave.spec.mutable_fan_out()->set_released(true);
  wave.enqueued_at = now;
  wave.eligible_at = now;
  std::vector<std::string> shared;
  if (lead.state == ShardState::kSucceeded && result != nullptr && CommandEditsLand(*result)) {
    for (const auto& fe : result->file_edits()) {
      if (IsSharedEdit(lead.spec, fe)) shared.push_back(util::StrCat(fe.repo(), ":", fe.path()));
    }
  }
  if (shared.empty()) {
    wave.state = ShardState::kSucceeded;
    wave.last_error = "nothing to verify: the lead made no shared fix that lands";
    return util::StrCat("shard ", wave.id, ": its lead ", lead.id,
                        " made no shared fix that lands; no wave to run");
  }
  for (const auto& fe : result->file_edits()) *wave.spec.add_pre_apply() = fe;
  for (const auto& op : result->registry_ops()) *wave.spec.add_pre_registry() = op;
  for (const auto& f : shared) wave.spec.mutable_fan_out()->add_shared_files(f);
  wave.spec.mutable_fan_out()->set_lead_fixed(true);
  wave.state = ShardState::kQueued;
  return util::StrCat("shard ", wave.id, ": the wave of ", util::StrJoin(shared, ", "), " (lead ",
                      lead.id, ") checks the selected and passing entries whose loaders import it");
}

bool ReadWaveFindings(const v1::ShardResult& result, WaveFindings& out) {
  for (const auto& ev : result.evidence()) {
    if (ev.kind() != "wave") continue;
    const json j = json::parse(ev.content(), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return false;
    out.lead = j.value("lead", "");
    for (const auto& f : j.value("shared_files", json::array())) {
      if (f.is_string()) out.shared_files.push_back(f.get<std::string>());
    }
    out.candidates = j.value("candidates", 0);
    out.not_affected = j.value("not_affected", 0);
    for (const auto& c : j.value("checked", json::array())) {
      if (!c.is_object()) continue;
      WaveFindings::Check k{c.value("file", ""),   c.value("key", ""),
                            c.value("status", ""), c.value("verdict", ""),
                            c.value("reason", ""), c.value("selected", false)};
      if (!k.selected && k.verdict != kPassVerdict) {
        out.broke.push_back(util::StrCat(k.key, " (", k.verdict.empty() ? "no result" : k.verdict,
                                         k.reason.empty() ? "" : ": " + k.reason, ")"));
      }
      out.checked.push_back(std::move(k));
    }
    return true;
  }
  return false;
}

}  // namespace triage::coord
