// Merge of 500 shard results (one status edit each) against the real tt-xla training YAML
// (../shared/data/tt-xla/head), read at run time. Target: under 50 ms per merge.
// Run: build/bench/merge_bench --benchmark_repetitions=5

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/diff/unified_diff.h"
#include "common/inventory/document.h"
#include "common/inventory/editor.h"
#include "common/util/file.h"
#include "common/util/strings.h"
#include "coordinator/merge/merge.h"

namespace triage {
namespace {

constexpr char kRel[] = "tests/runner/test_config/torch/test_config_training_single_device.yaml";

std::filesystem::path DataDir() {
  const char* env = std::getenv("TRIAGE_SHARED_DIR");
  return std::filesystem::path(env != nullptr ? env : TRIAGE_SHARED_DIR) / "data" / "tt-xla";
}

class MapFiles : public merge::PinnedFiles {
 public:
  std::map<std::string, std::string> ttxla;
  absl::StatusOr<std::string> ReadTtXla(const std::string& path) override {
    auto it = ttxla.find(path);
    if (it == ttxla.end()) return absl::NotFoundError(path);
    return it->second;
  }
  absl::StatusOr<std::string> ReadForge(const std::string& path) override {
    return absl::NotFoundError(path);
  }
};

v1::FieldChange Field(const std::string& name, const std::string& value) {
  v1::FieldChange f;
  f.set_name(name);
  f.mutable_value()->set_string_value(value);
  return f;
}

void BM_Merge500Results(benchmark::State& state) {
  auto bytes = util::ReadFile(DataDir() / "head" / kRel);
  if (!bytes.ok()) {
    state.SkipWithError("real training YAML not found");
    return;
  }
  MapFiles files;
  files.ttxla[kRel] = *bytes;
  inventory::Document doc = inventory::Document::Parse(kRel, *bytes);
  std::vector<std::string> keys;
  for (const auto& e : doc.entries()) {
    if (keys.size() == 500) break;
    keys.push_back(e.key);
  }
  if (keys.empty()) {
    state.SkipWithError("no entries in the training YAML");
    return;
  }
  merge::MergeInput input;
  input.sweep_id = "bench";
  input.archs = {"n150", "p150"};
  input.files = &files;
  for (int i = 0; i < 500; ++i) {
    const std::string& key = keys[i % keys.size()];
    const std::string arch = input.archs[(i + i / keys.size()) % 2];
    coord::ShardRecord s;
    s.id = util::StrCat("shard-", i);
    s.sweep_id = "bench";
    s.spec.set_shard_id(s.id);
    s.spec.set_playbook("bench");
    s.spec.set_wave(1);
    s.spec.set_phase(v1::PHASE_FULL);
    s.spec.set_arch(arch);
    input.shards.push_back(s);
    coord::ResultRecord r;
    r.shard_id = s.id;
    r.sweep_id = "bench";
    r.token = 1;
    r.lease_id = util::StrCat("lease-", i);
    r.result.set_status(v1::ShardResult::SUCCEEDED);
    auto* o = r.result.add_entries();
    o->set_key(key);
    o->set_file(kRel);
    o->set_arch(arch);
    o->set_verdict("failure");
    o->set_changed(true);
    auto* edit = o->mutable_edit();
    edit->set_file(kRel);
    edit->set_key(key);
    *edit->add_set() = Field("status", "KNOWN_FAILURE_XFAIL");
    *edit->add_set() = Field("bringup_status", "FAILED_RUNTIME");
    *edit->add_set() = Field("reason", "TT_FATAL: benchmark edit");
    input.results.push_back(std::move(r));
  }
  std::size_t conflicts = 0;
  std::size_t patch_bytes = 0;
  for (auto _ : state) {
    auto out = merge::Merge(input);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
    conflicts = out->conflicts.size();
    patch_bytes = out->ttxla_patch.size();
    benchmark::DoNotOptimize(out->ttxla_patch.data());
  }
  state.counters["results"] = 500;
  state.counters["entries"] = static_cast<double>(keys.size());
  state.counters["conflicts"] = static_cast<double>(conflicts);
  state.counters["patch_bytes"] = static_cast<double>(patch_bytes);
}
BENCHMARK(BM_Merge500Results)->Unit(benchmark::kMillisecond);

// Where the time goes: one parse of the real YAML (Merge parses it about three times: before,
// the editor's re-check, after) and one unified diff of the merged file.
void BM_ParseTrainingYaml(benchmark::State& state) {
  auto bytes = util::ReadFile(DataDir() / "head" / kRel);
  if (!bytes.ok()) {
    state.SkipWithError("real training YAML not found");
    return;
  }
  for (auto _ : state) {
    inventory::Document doc = inventory::Document::Parse(kRel, *bytes);
    benchmark::DoNotOptimize(doc.entries().size());
  }
}
BENCHMARK(BM_ParseTrainingYaml)->Unit(benchmark::kMillisecond);

// The same 500 status edits, applied by the editor in one batch, and the unified diff of it.
void BM_EditAndDiffTrainingYaml(benchmark::State& state) {
  auto bytes = util::ReadFile(DataDir() / "head" / kRel);
  if (!bytes.ok()) {
    state.SkipWithError("real training YAML not found");
    return;
  }
  inventory::Document doc = inventory::Document::Parse(kRel, *bytes);
  std::vector<inventory::EntryEdit> edits;
  for (const auto& e : doc.entries()) {
    if (edits.size() == 500) break;
    edits.push_back({e.key,
                     std::string(edits.size() % 2 == 0 ? "n150" : "p150"),
                     {{"status", inventory::Value::String("KNOWN_FAILURE_XFAIL")},
                      {"bringup_status", inventory::Value::String("FAILED_RUNTIME")},
                      {"reason", inventory::Value::String("TT_FATAL: benchmark edit")}},
                     {}});
  }
  auto edited = inventory::ApplyEdits(doc, edits);
  if (!edited.ok()) {
    state.SkipWithError(std::string(edited.status().message()).c_str());
    return;
  }
  const bool diff_only = state.range(0) == 1;
  for (auto _ : state) {
    if (!diff_only) {
      auto again = inventory::ApplyEdits(doc, edits);
      benchmark::DoNotOptimize(again.ok());
    } else {
      benchmark::DoNotOptimize(diff::UnifiedDiff(kRel, *bytes, *edited).size());
    }
  }
  state.SetLabel(diff_only ? "UnifiedDiff" : "ApplyEdits");
}
BENCHMARK(BM_EditAndDiffTrainingYaml)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace triage

BENCHMARK_MAIN();
