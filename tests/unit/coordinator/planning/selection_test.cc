// Which entries a sweep takes (coordinator/planning/selection.h): every failing entry with or
// without a reason, the filters, the limit by cluster size, errors that leave out one key or a
// whole file; the planner's shards of a failing selection; and the same on tt-xla's real files.

#include "coordinator/planning/selection.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/playbooks/catalog.h"
#include "common/inventory/inventory.h"
#include "common/junit/reason.h"
#include "coordinator/planning/planner.h"
#include "coordinator/planning/shared_wave.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_support.h"

namespace triage::coord {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr const char* kTorchInference =
    "tests/runner/test_config/torch/test_config_inference_single_device.yaml";
constexpr const char* kTorchTraining =
    "tests/runner/test_config/torch/test_config_training_single_device.yaml";

// A checkout's test-config tree in a temp dir: path (under the root) -> YAML.
inventory::Inventory Load(const testing::TempDir& dir,
                          const std::map<std::string, std::string>& files) {
  for (const auto& [path, text] : files) testing::WriteFileOrDie(dir.path() / path, text);
  inventory::WorkTreeSource source(dir.path());
  auto inv = inventory::LoadInventory(source, {});
  EXPECT_TRUE(inv.ok()) << inv.status();
  return std::move(*inv);
}

Selector Compile(const v1::Selection& s) {
  auto c = Selector::Compile(s);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

v1::Selection Failing() {
  v1::Selection s;
  s.set_failing(true);
  return s;
}

std::vector<std::string> Keys(const Selection& s) {
  std::vector<std::string> keys;
  for (const auto& e : s.entries) keys.push_back(e.shard_entry.key());
  return keys;
}

SelectOptions On(std::vector<std::string> archs) {
  SelectOptions o;
  o.archs = std::move(archs);
  return o;
}

constexpr const char* kMixed = R"yaml(test_config:
  pass/pytorch-A-single_device-inference:
    status: EXPECTED_PASSING
  xfail/pytorch-B-single_device-inference:
    status: KNOWN_FAILURE_XFAIL
    reason: "Out of Memory: Not enough space to allocate 2048 B DRAM buffer"
  skip/pytorch-C-single_device-inference:
    status: NOT_SUPPORTED_SKIP
  over/pytorch-D-single_device-inference:
    status: EXPECTED_PASSING
    arch_overrides:
      n150:
        status: KNOWN_FAILURE_XFAIL
        reason: "Hang"
)yaml";

TEST(Selection, FailingTakesEveryFailingEntryWithOrWithoutAReasonOnTheTargetArch) {
  testing::TempDir dir;
  const auto inv = Load(dir, {{kTorchInference, kMixed}});
  const Selector failing = Compile(Failing());
  const Selection n150 = SelectEntries(inv, failing, On({"n150"}));
  EXPECT_THAT(Keys(n150), ElementsAre("xfail/pytorch-B-single_device-inference",
                                      "skip/pytorch-C-single_device-inference",
                                      "over/pytorch-D-single_device-inference"));
  EXPECT_EQ(n150.matched, 3);
  EXPECT_EQ(n150.without_reason, 1);
  const v1::ShardEntry& b = n150.entries[0].shard_entry;
  EXPECT_EQ(n150.entries[0].playbook, kRemediatePlaybook);
  EXPECT_EQ(b.status(), "KNOWN_FAILURE_XFAIL");
  EXPECT_EQ(b.cluster(), junit::ClusterIdOfReason(b.reason()));
  EXPECT_EQ(b.override_arch(), "");
  EXPECT_EQ(n150.entries[1].shard_entry.cluster(), "") << "no reason, no cluster";
  const v1::ShardEntry& d = n150.entries[2].shard_entry;
  EXPECT_EQ(d.override_arch(), "n150");
  EXPECT_EQ(d.reason(), "Hang");
  EXPECT_EQ(d.status(), "KNOWN_FAILURE_XFAIL");

  // On p150 the override does not apply: the entry passes there.
  EXPECT_THAT(Keys(SelectEntries(inv, failing, On({"p150"}))),
              ElementsAre("xfail/pytorch-B-single_device-inference",
                          "skip/pytorch-C-single_device-inference"));
  // Seen on the first arch it fails on.
  EXPECT_EQ(
      SelectEntries(inv, failing, On({"p150", "n150"})).entries[2].shard_entry.override_arch(),
      "n150");
}

TEST(Selection, FiltersNarrowTheFailingEntries) {
  testing::TempDir dir;
  const auto inv = Load(dir, {{kTorchInference, kMixed}});
  auto with = [&](auto edit) {
    v1::Selection s = Failing();
    edit(s);
    return Keys(SelectEntries(inv, Compile(s), On({"n150"})));
  };
  EXPECT_THAT(with([](auto& s) { s.add_keys("skip/pytorch-C-single_device-inference"); }),
              ElementsAre("skip/pytorch-C-single_device-inference"));
  EXPECT_THAT(with([](auto& s) { s.add_statuses("NOT_SUPPORTED_SKIP"); }),
              ElementsAre("skip/pytorch-C-single_device-inference"));
  EXPECT_THAT(with([](auto& s) { s.set_reason_regex("(?i)out of memory"); }),
              ElementsAre("xfail/pytorch-B-single_device-inference"));
  EXPECT_THAT(with([](auto& s) { s.set_reason_regex("^$"); }),
              ElementsAre("skip/pytorch-C-single_device-inference"));
  EXPECT_THAT(with([](auto& s) { s.add_clusters(junit::ClusterIdOfReason("Hang")); }),
              ElementsAre("over/pytorch-D-single_device-inference"));
  EXPECT_THAT(with([](auto& s) { s.add_files(kTorchTraining); }), IsEmpty());
  // A key that passes is not failing: a failing selection never takes it.
  EXPECT_THAT(with([](auto& s) { s.add_keys("pass/pytorch-A-single_device-inference"); }),
              IsEmpty());
}

TEST(Selection, TheLimitTakesTheLargestClustersFirst) {
  testing::TempDir dir;
  std::string yaml = "test_config:\n";
  auto add = [&](const std::string& model, const std::string& reason) {
    yaml += "  " + model + "/pytorch-V-single_device-inference:\n    status: KNOWN_FAILURE_XFAIL\n";
    if (!reason.empty()) yaml += "    reason: \"" + reason + "\"\n";
  };
  add("single", "ValueError: one of a kind");
  add("nor1", "");
  add("two1", "Hang");
  add("oom1", "Out of Memory: Not enough space to allocate 1024 B DRAM buffer");
  add("two2", "Hang");
  add("oom2", "Out of Memory: Not enough space to allocate 4096 B DRAM buffer");
  add("oom3", "Out of Memory: Not enough space to allocate 8 B DRAM buffer");
  const auto inv = Load(dir, {{kTorchInference, yaml}});
  v1::Selection s = Failing();
  s.set_limit(4);
  const Selection got = SelectEntries(inv, Compile(s), On({"n150"}));
  // Three OOMs (one cluster: the sizes differ only in numbers), then one of the two hangs; the
  // entries stay in file order.
  EXPECT_THAT(Keys(got), ElementsAre("two1/pytorch-V-single_device-inference",
                                     "oom1/pytorch-V-single_device-inference",
                                     "oom2/pytorch-V-single_device-inference",
                                     "oom3/pytorch-V-single_device-inference"));
  EXPECT_EQ(got.matched, 7);
  ASSERT_THAT(got.clusters, SizeIs(3));
  EXPECT_EQ(got.clusters[0].matched, 3);
  EXPECT_EQ(got.clusters[0].taken, 3);
  EXPECT_EQ(got.clusters[0].signature,
            "Out of Memory: Not enough space to allocate N B DRAM buffer");
  EXPECT_EQ(got.clusters[1].id, junit::ClusterIdOfReason("Hang"));
  EXPECT_EQ(got.clusters[1].taken, 1);
  EXPECT_EQ(got.clusters[2].taken, 0);
  // Entries without a reason come after every cluster.
  s.set_limit(6);
  EXPECT_THAT(Keys(SelectEntries(inv, Compile(s), On({"n150"}))),
              ::testing::Not(::testing::Contains("nor1/pytorch-V-single_device-inference")));
}

TEST(Selection, AKeyDefinedInTwoFilesIsLeftOutAloneTheFilesOtherEntriesStay) {
  testing::TempDir dir;
  const std::string dup =
      "  dup/pytorch-V-single_device-inference:\n    status: KNOWN_FAILURE_XFAIL\n";
  const auto inv = Load(
      dir, {{kTorchInference, std::string(kMixed) + dup},
            {"tests/runner/test_config/torch/test_config_inference_data_parallel.yaml",
             "test_config:\n" + dup +
                 "  other/pytorch-V-data_parallel-inference:\n    status: NOT_SUPPORTED_SKIP\n"}});
  ASSERT_FALSE(inv.ok()) << "the duplicate is an error";
  const Selection got = SelectEntries(inv, Compile(Failing()), On({"n150"}));
  EXPECT_THAT(Keys(got), ElementsAre("other/pytorch-V-data_parallel-inference",
                                     "xfail/pytorch-B-single_device-inference",
                                     "skip/pytorch-C-single_device-inference",
                                     "over/pytorch-D-single_device-inference"));
  ASSERT_THAT(got.problems, SizeIs(2));
  EXPECT_THAT(got.problems[0],
              HasSubstr("entry 'dup/pytorch-V-single_device-inference' left out: "));
  EXPECT_THAT(got.problems[0], HasSubstr("duplicate key 'dup/pytorch-V-single_device-inference'"));
}

TEST(Selection, AFileWithAnErrorOfItsOwnIsLeftOutWhole) {
  testing::TempDir dir;
  const auto inv = Load(dir, {{kTorchInference, std::string(kMixed) + "    bogus_field: 1\n"}});
  ASSERT_FALSE(inv.ok());
  const Selection got = SelectEntries(inv, Compile(Failing()), On({"n150"}));
  EXPECT_THAT(got.entries, IsEmpty());
  ASSERT_THAT(got.problems, SizeIs(3));
  EXPECT_THAT(got.problems[0], HasSubstr("left out: the file has validation errors"));
}

TEST(Selection, WithoutFailingTheFiltersNarrowTheClassifiedEntries) {
  testing::TempDir dir;
  const std::string yaml = R"yaml(test_config:
  a/pytorch-V-single_device-training:
    status: KNOWN_FAILURE_XFAIL
    reason: "No handler for class CausalLMOutputWithPast exists in `unpack_forward_output`"
  b/pytorch-V-single_device-training:
    status: KNOWN_FAILURE_XFAIL
    reason: "No handler for class Seq2SeqLMOutput exists in `unpack_forward_output`"
  c/pytorch-V-single_device-training:
    status: KNOWN_FAILURE_XFAIL
    reason: "Something no playbook handles"
)yaml";
  const auto inv = Load(dir, {{kTorchTraining, yaml}});
  SelectOptions o = On({"n150"});
  o.rules = &playbooks::DefaultClassifier();
  const Selection all = SelectEntries(inv, Compile(v1::Selection()), o);
  ASSERT_THAT(Keys(all), ElementsAre("a/pytorch-V-single_device-training",
                                     "b/pytorch-V-single_device-training"));
  EXPECT_EQ(all.entries[0].playbook, "unpack_forward_output");
  v1::Selection keys;
  keys.add_keys("b/pytorch-V-single_device-training");
  keys.add_keys("c/pytorch-V-single_device-training");
  EXPECT_THAT(Keys(SelectEntries(inv, Compile(keys), o)),
              ElementsAre("b/pytorch-V-single_device-training"));
}

TEST(Selection, PlannedShardsOfAFailingSelectionArePerLoaderWithTheirClusters) {
  testing::TempDir dir;
  const auto inv = Load(dir, {{kTorchInference, kMixed}});
  const Selector failing = Compile(Failing());
  PlanOptions options;
  options.archs = {"n150", "p150"};
  options.executor = "command";
  options.selector = &failing;
  const Plan plan = PlanSweep(inv, playbooks::DefaultClassifier(), options, "sw", "a", "b");
  ASSERT_THAT(plan.entries, SizeIs(3));
  // One shard per loader and arch (the first arch runs the command, the second verifies).
  ASSERT_THAT(plan.shards, SizeIs(6));
  std::set<std::string> loaders;
  for (const auto& s : plan.shards) {
    EXPECT_EQ(s.spec.playbook(), kRemediatePlaybook);
    ASSERT_EQ(s.spec.entries_size(), 1);
    loaders.insert(s.spec.loader());
    if (s.spec.entries(0).key() == "xfail/pytorch-B-single_device-inference") {
      EXPECT_EQ(s.spec.entries(0).cluster(), junit::ClusterIdOfReason(s.spec.entries(0).reason()));
    }
  }
  EXPECT_THAT(loaders, SizeIs(3));
}

// Fix once, verify many (docs/remediation.md): a cluster in three loaders is led by the loader
// holding most of its entries; its entries in the other loaders move to follower shards that
// wait for the lead's first shard; every entry is planned once per arch.
constexpr const char* kCluster = R"yaml(test_config:
  a/pytorch-X-single_device-inference:
    status: KNOWN_FAILURE_XFAIL
    reason: "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x64 and 192x4)"
  other/pytorch-Y-single_device-inference:
    status: KNOWN_FAILURE_XFAIL
    reason: "Hang"
  b/pytorch-X-single_device-inference:
    status: KNOWN_FAILURE_XFAIL
    reason: "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x64 and 192x4)"
  b/pytorch-Y-single_device-inference:
    status: KNOWN_FAILURE_XFAIL
    reason: "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x64 and 192x4)"
  c/pytorch-X-single_device-inference:
    status: NOT_SUPPORTED_SKIP
    reason: "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x64 and 192x4)"
  c/pytorch-Z-single_device-inference:
    status: KNOWN_FAILURE_XFAIL
  d/pytorch-P-single_device-inference:
    status: EXPECTED_PASSING
)yaml";

TEST(Selection, AClusterAcrossLoadersIsLedByOneShardAndItsOtherEntriesFollow) {
  testing::TempDir dir;
  const auto inv = Load(dir, {{kTorchInference, kCluster}});
  const Selector failing = Compile(Failing());
  PlanOptions options;
  options.archs = {"n150", "p150"};
  options.executor = "command";
  options.selector = &failing;
  const Plan plan = PlanSweep(inv, playbooks::DefaultClassifier(), options, "sw", "a", "b");
  ASSERT_THAT(plan.entries, SizeIs(6));
  const std::string cluster = junit::ClusterIdOfReason(
      "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x64 and 192x4)");
  std::map<std::string, const ShardRecord*> by_id;
  for (const auto& s : plan.shards) by_id[s.id] = &s;
  std::map<std::string, int> planned;  // key + arch -> times
  std::string lead;
  std::set<std::string> followers;
  std::vector<const ShardRecord*> waves;
  for (const auto& s : plan.shards) {
    if (IsWaveShard(s.spec)) {
      waves.push_back(&s);
      continue;
    }
    for (const auto& e : s.spec.entries()) ++planned[e.key() + " " + s.spec.arch()];
    EXPECT_THAT(s.spec.shared_paths(),
                ElementsAre("tt-xla:python_package/", "tt_forge_models:tools/",
                            "tt_forge_models:base.py", "tt_forge_models:config.py"));
    if (!s.spec.has_fan_out()) continue;
    // A follower: the first phase on n150, waiting for the lead's first shard on n150.
    EXPECT_EQ(s.spec.arch(), "n150");
    EXPECT_EQ(s.state, ShardState::kWaiting);
    EXPECT_EQ(s.depends_on, s.spec.fan_out().lead_shard());
    EXPECT_EQ(s.spec.fan_out().cluster(), cluster);
    for (const auto& e : s.spec.entries()) EXPECT_EQ(e.cluster(), cluster) << e.key();
    followers.insert(s.spec.loader());
    lead = s.spec.fan_out().lead_shard();
  }
  for (const auto& [id, n] : planned) EXPECT_EQ(n, 1) << id;
  EXPECT_THAT(planned, SizeIs(12));
  // b holds two of the cluster's entries: it leads; a's and c's follow, c's other entry stays.
  ASSERT_TRUE(by_id.count(lead)) << lead;
  EXPECT_THAT(by_id[lead]->spec.loader(), HasSubstr("/b/"));
  EXPECT_EQ(by_id[lead]->spec.entries_size(), 2);
  EXPECT_THAT(followers, SizeIs(2));
  // The lead's wave: waits for it on its arch, holds no entry of its own; its candidates are the
  // selected entries outside the lead's loader and cluster (c's other entry) and the passing ones.
  ASSERT_THAT(waves, SizeIs(1));
  const ShardRecord& wave = *waves[0];
  EXPECT_EQ(wave.depends_on, lead);
  EXPECT_EQ(wave.state, ShardState::kWaiting);
  EXPECT_EQ(wave.spec.arch(), "n150");
  EXPECT_EQ(wave.spec.entries_size(), 0);
  EXPECT_EQ(wave.spec.fan_out().cluster(), cluster) << "the clusters it leads";
  EXPECT_THAT(wave.spec.owned_files(), IsEmpty());
  const auto candidates =
      nlohmann::json::parse(wave.spec.params().at(std::string(kWaveParam)))["candidates"];
  std::set<std::string> selected_keys, passing_keys;
  for (const auto& c : candidates) {
    (c.value("selected", false) ? selected_keys : passing_keys).insert(c["key"].get<std::string>());
  }
  EXPECT_THAT(selected_keys, ElementsAre("c/pytorch-Z-single_device-inference",
                                         "other/pytorch-Y-single_device-inference"));
  EXPECT_THAT(passing_keys, ElementsAre("d/pytorch-P-single_device-inference"));
  for (const auto& s : plan.shards) {
    if (IsWaveShard(s.spec)) continue;
    const bool follows =
        s.spec.has_fan_out() || (!s.depends_on.empty() && by_id[s.depends_on]->spec.has_fan_out());
    if (follows || s.spec.loader().find("/c/") == std::string::npos) continue;
    ASSERT_EQ(s.spec.entries_size(), 1);
    EXPECT_EQ(s.spec.entries(0).key(), "c/pytorch-Z-single_device-inference");
  }

  // --no-fan-out: one shard per loader and arch, none waiting on another loader's.
  v1::Selection alone = Failing();
  alone.set_no_fan_out(true);
  alone.add_shared_paths("none");
  const Selector no_fan_out = Compile(alone);
  options.selector = &no_fan_out;
  const Plan flat = PlanSweep(inv, playbooks::DefaultClassifier(), options, "sw", "a", "b");
  EXPECT_THAT(flat.shards, SizeIs(8));
  for (const auto& s : flat.shards) {
    EXPECT_FALSE(s.spec.has_fan_out());
    EXPECT_THAT(s.spec.shared_paths(), IsEmpty());
  }
}

TEST(Selection, SharedPathsAreCheckedAndBelongToAFailingSelection) {
  auto refused = [](std::vector<std::string> paths, bool failing = true) {
    v1::Selection s;
    s.set_failing(failing);
    for (auto& p : paths) s.add_shared_paths(p);
    auto c = Selector::Compile(s);
    return c.ok() ? std::string() : std::string(c.status().message());
  };
  EXPECT_EQ(refused({"tt-xla:python_package/", "tt_forge_models:tools/utils.py"}), "");
  EXPECT_THAT(refused({"python_package/"}), HasSubstr("write it as tt-xla:<path>"));
  EXPECT_THAT(refused({"tt-mlir:lib/"}), HasSubstr("neither tt-xla nor tt_forge_models"));
  EXPECT_THAT(refused({"tt-xla:tests/runner/"}), HasSubstr("never shared scope"));
  EXPECT_THAT(refused({"tt-xla:tests/"}), HasSubstr("never shared scope"));
  EXPECT_THAT(refused({"tt-xla:"}), HasSubstr("relative"));
  EXPECT_THAT(refused({"tt-xla:/etc/"}), HasSubstr("relative"));
  EXPECT_THAT(refused({"tt_forge_models:../x/"}), HasSubstr("relative"));
  EXPECT_THAT(refused({"tt_forge_models:training_utils.py"}), HasSubstr("registry"));
  EXPECT_THAT(refused({"tt-xla:.github/workflows/"}), HasSubstr("CI"));
  EXPECT_THAT(refused({"none", "tt-xla:python_package/"}), HasSubstr("'none'"));
  EXPECT_THAT(refused({"tt-xla:python_package/"}, false), HasSubstr("only a failing selection"));
}

// tt-xla's own files: every entry failing on n150 (the tensor-parallel ones on n300-llmbox) is
// taken but the key defined in two files; the jax file holding that key keeps its other
// entries; a limit takes whole clusters, largest first.
TEST(Selection, RealTtXlaEveryFailingEntryButTheDuplicatedKey) {
  TRIAGE_REQUIRE_SHARED_DATA(data);
  inventory::WorkTreeSource source(data / "head");
  auto inv = inventory::LoadInventory(source, {});
  ASSERT_TRUE(inv.ok()) << inv.status();
  std::set<std::string> duplicated;
  for (const auto& d : inv->diagnostics) {
    if (d.severity == util::Severity::kError && !d.key.empty()) duplicated.insert(d.key);
  }
  ASSERT_THAT(duplicated, SizeIs(1)) << "tt-xla's main defines one jax key in two files";
  int expected = 0, without_reason = 0, in_jax_file = 0;
  for (const auto& ref : inv->TestEntries()) {
    const auto& e = *ref.entry;
    if (!e.parts || duplicated.count(e.key)) continue;
    const std::string arch = e.parts->parallelism == "tensor_parallel" ? "n300-llmbox" : "n150";
    const std::string_view status = e.StatusForArch(arch);
    if (status != "KNOWN_FAILURE_XFAIL" && status != "NOT_SUPPORTED_SKIP") continue;
    ++expected;
    const auto* reason = e.FieldForArch("reason", arch);
    if (reason == nullptr || !reason->is_string() || reason->string.empty()) ++without_reason;
    if (ref.document->path() ==
        "tests/runner/test_config/jax/test_config_inference_single_device.yaml") {
      ++in_jax_file;
    }
  }
  const Selection got = SelectEntries(*inv, Compile(Failing()), On({"n150"}));
  EXPECT_EQ(got.matched, expected);
  EXPECT_EQ(static_cast<int>(got.entries.size()), expected);
  EXPECT_EQ(got.without_reason, without_reason);
  EXPECT_GT(without_reason, 200) << "tt-xla keeps hundreds of failing entries without a reason";
  EXPECT_GT(in_jax_file, 100);
  int taken_in_jax_file = 0;
  for (const auto& e : got.entries) {
    taken_in_jax_file += e.shard_entry.file() ==
                         "tests/runner/test_config/jax/test_config_inference_single_device.yaml";
  }
  EXPECT_EQ(taken_in_jax_file, in_jax_file);
  ASSERT_THAT(got.problems, SizeIs(2)) << "the key, in each of its two files";

  v1::Selection limited = Failing();
  limited.set_limit(100);
  const Selection top = SelectEntries(*inv, Compile(limited), On({"n150"}));
  ASSERT_THAT(top.entries, SizeIs(100));
  int smallest_taken = 1 << 30, largest_left = 0;
  for (const auto& c : top.clusters) {
    if (c.taken > 0) smallest_taken = std::min(smallest_taken, c.matched);
    if (c.taken < c.matched) largest_left = std::max(largest_left, c.matched);
  }
  EXPECT_GE(smallest_taken, largest_left);
  for (const auto& e : top.entries)
    EXPECT_FALSE(e.shard_entry.cluster().empty()) << e.shard_entry.key();

  // The fan-out on the real files: every taken entry planned once; the clusters spanning
  // loaders have one lead each, and their other entries wait in follower shards.
  const Selector failing = Compile(Failing());
  PlanOptions options;
  options.archs = {"n150"};
  options.executor = "command";
  options.selector = &failing;
  const Plan plan = PlanSweep(*inv, playbooks::DefaultClassifier(), options, "sw", "a", "b");
  std::map<std::string, int> planned;
  std::map<std::string, std::set<std::string>> leads;  // cluster -> its lead shards
  std::set<std::string> lead_shards;
  int followers = 0, follower_entries = 0;
  std::size_t waves = 0, wave_bytes = 0, wave_selected = 0, wave_passing = 0;
  for (const auto& s : plan.shards) {
    for (const auto& e : s.spec.entries()) ++planned[e.file() + "\n" + e.key()];
    if (IsWaveShard(s.spec)) {
      // One wave per lead, waiting for it; its candidates: the selected entries of other
      // loaders and clusters, and every passing entry on the arch.
      ++waves;
      const std::string& param = s.spec.params().at(std::string(kWaveParam));
      wave_bytes = std::max(wave_bytes, param.size());
      const auto j = nlohmann::json::parse(param);
      std::size_t selected = 0;
      for (const auto& c : j["candidates"]) selected += c.value("selected", false) ? 1 : 0;
      wave_selected = std::max(wave_selected, selected);
      wave_passing = std::max(wave_passing, j["candidates"].size() - selected);
      EXPECT_EQ(s.depends_on, s.spec.fan_out().lead_shard());
      continue;
    }
    if (!s.spec.has_fan_out()) continue;
    ++followers;
    follower_entries += s.spec.entries_size();
    leads[s.spec.fan_out().cluster()].insert(s.spec.fan_out().lead_shard());
    lead_shards.insert(s.spec.fan_out().lead_shard());
  }
  EXPECT_EQ(static_cast<int>(planned.size()), expected);
  for (const auto& [id, n] : planned) EXPECT_EQ(n, 1) << id;
  for (const auto& [cluster, shards] : leads) EXPECT_EQ(shards.size(), 1u) << cluster;
  EXPECT_GT(followers, 100);
  EXPECT_EQ(waves, lead_shards.size());
  EXPECT_GT(wave_passing, 500u) << "tt-xla's main passes most of its tests on n150";
  v1::Selection flat_selection = Failing();
  flat_selection.set_no_fan_out(true);
  const Selector flat_selector = Compile(flat_selection);
  options.selector = &flat_selector;
  const Plan flat = PlanSweep(*inv, playbooks::DefaultClassifier(), options, "sw", "a", "b");
  std::printf(
      "fan-out on tt-xla's main (n150): %d entries in %zu shards (%zu without the "
      "fan-out); %zu clusters span loaders, led by %zu shards; %d follower shards hold %d "
      "entries; %zu wave shards, each with up to %zu selected and %zu passing candidates (%zu "
      "bytes of parameters at most)\n",
      expected, plan.shards.size() - waves, flat.shards.size(), leads.size(), lead_shards.size(),
      followers, follower_entries, waves, wave_selected, wave_passing, wave_bytes);
}

}  // namespace
}  // namespace triage::coord
