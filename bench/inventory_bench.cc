// Figures for the inventory core on the real tt-xla files (../shared/data/tt-xla):
//   load+validate of all 13 test-config files; 500 entry edits on the training YAML.
// Run: scripts/bench.sh (or build/bench/inventory_bench --benchmark_repetitions=5).

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "benchmark/benchmark.h"
#include "common/inventory/editor.h"
#include "common/inventory/inventory.h"
#include "common/util/file.h"

namespace triage {
namespace {

std::filesystem::path DataDir() {
  const char* env = std::getenv("TRIAGE_SHARED_DIR");
  return std::filesystem::path(env != nullptr ? env : TRIAGE_SHARED_DIR) / "data" / "tt-xla";
}

void BM_LoadValidateAll(benchmark::State& state) {
  inventory::WorkTreeSource source(DataDir() / "head");
  std::size_t entries = 0;
  for (auto _ : state) {
    auto inv = inventory::LoadInventory(source);
    if (!inv.ok()) {
      state.SkipWithError(std::string(inv.status().message()).c_str());
      return;
    }
    entries = inv->TestEntries().size();
    benchmark::DoNotOptimize(inv->diagnostics.size());
  }
  state.counters["files"] = 13;
  state.counters["entries"] = static_cast<double>(entries);
}
BENCHMARK(BM_LoadValidateAll)->Unit(benchmark::kMillisecond);

void BM_Apply500Edits(benchmark::State& state) {
  const std::string rel = "tests/runner/test_config/torch/test_config_training_single_device.yaml";
  auto bytes = util::ReadFile(DataDir() / "head" / rel);
  if (!bytes.ok()) {
    state.SkipWithError("real training YAML not found");
    return;
  }
  inventory::Document doc = inventory::Document::Parse(rel, *bytes);
  std::vector<inventory::EntryEdit> edits;
  const auto& entries = doc.entries();
  for (int i = 0; i < 500; ++i) {
    const auto& e = entries[(i * 7) % entries.size()];
    inventory::EntryEdit edit{e.key, {}, {}, {}};
    if (i % 2 == 0) {
      edit.set = {
          {"status", inventory::Value::String("KNOWN_FAILURE_XFAIL")},
          {"bringup_status", inventory::Value::String("FAILED_RUNTIME")},
          {"reason", inventory::Value::String("TT_FATAL: benchmark edit #" + std::to_string(i))}};
    } else {
      edit.set = {{"status", inventory::Value::String("EXPECTED_PASSING")},
                  {"assert_pcc", inventory::Value::Bool(false)}};
      edit.del = {"bringup_status", "reason"};
    }
    edits.push_back(std::move(edit));
  }
  for (auto _ : state) {
    auto out = inventory::ApplyEdits(doc, edits);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(out->size());
  }
  state.counters["edits"] = 500;
}
BENCHMARK(BM_Apply500Edits)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace triage

BENCHMARK_MAIN();
