// The merge of a sweep's results (coordinator/merge/merge.h) against in-memory pinned files:
// top-level vs per-arch placement, YAML / registry / loader conflicts, command-executor results
// (lifted as their agent lifts them, common/lift/lift.h) merging like native ones, patches that
// `git apply --check` accepts, and a property test that the patches do not depend on the order,
// duplicates or retried attempts of the results. Then the report (coordinator/merge/report.h): each
// entry's part of the forge patch, and, through a real coordinator and store, the outputs of a
// finished sweep (its final state, evidence per arch).

#include "coordinator/merge/merge.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>

#include "common/diff/unified_diff.h"
#include "common/inventory/document.h"
#include "common/inventory/editor.h"
#include "common/lift/lift.h"
#include "common/registry/registry_union.h"
#include "common/util/strings.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/sweep_outputs.h"
#include "coordinator/merge/clusters.h"
#include "coordinator/merge/makespan.h"
#include "coordinator/merge/pr_text.h"
#include "coordinator/merge/report.h"
#include "coordinator/persistence/sqlite_store.h"
#include "coordinator/planning/planner.h"
#include "coordinator/scheduling/result_check.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/memory_pinned_files.h"
#include "tests/support/test_support.h"

namespace triage::merge {
namespace {

constexpr char kYamlPath[] =
    "tests/runner/test_config/torch/test_config_training_single_device.yaml";
constexpr char kUtilsPath[] = "training_utils.py";  // relative to tt_forge_models
constexpr char kLoaderA[] = "a/pytorch/loader.py";
constexpr char kLoaderB[] = "b/pytorch/loader.py";
constexpr char kUnpack[] =
    "tt-forge-models doesn't implement unpack_forward_output for this model.";

constexpr char kV1[] = "a/pytorch-V1-single_device-training";
constexpr char kV2[] = "a/pytorch-V2-single_device-training";
constexpr char kB[] = "b/pytorch-single_device-training";
constexpr char kC[] = "c/pytorch-X-single_device-training";
constexpr char kD[] = "d/pytorch-single_device-training";

std::string Entry(const std::string& key, const std::string& reason) {
  return "  " + key +
         ":\n    status: NOT_SUPPORTED_SKIP\n    bringup_status: FAILED_FE_COMPILATION\n" +
         "    reason: \"" + reason + "\"\n";
}

// Shaped like tt-xla's training YAML (written for this test).
std::string TrainingYaml() {
  return "# Training single-device test configuration.\n"
         "test_config:\n" +
         Entry(kV1, kUnpack) + Entry(kV2, kUnpack) + Entry(kB, kUnpack) +
         Entry(kC, "RuntimeError: 'lu_cpu' not implemented for 'BFloat16'") + "  " + kD +
         ":\n    status: EXPECTED_PASSING\n    markers: [push, nightly]\n";
}

// Shaped like tt-forge-models' training_utils.py (written for this test).
constexpr char kUtils[] =
    "import torch\n"
    "\n"
    "_HANDLER_REGISTRY = {}\n"
    "\n"
    "\n"
    "def _register_attr(cls_name, attr):\n"
    "    pass\n"
    "\n"
    "\n"
    "# One registration per line, sorted by class name (case-insensitive).\n"
    "_register_attr(\"MiniBaseModelOutput\", \"last_hidden_state\")\n"
    "_register_attr(\"MiniCLIPLikeOutput\", \"logits_per_text\")\n"
    "_register_attr(\"MiniMgpstrOutput\", \"logits\")\n"
    "_register_attr(\"MiniSeq2SeqOutput\", \"logits\")\n";

std::string Loader(const std::string& name) {
  return "\"\"\"" + name +
         ": a tiny model.\"\"\"\n"
         "import torch\n"
         "\n"
         "\n"
         "class ModelLoader:\n"
         "    def load_model(self, dtype_override=None):\n"
         "        model = Model()\n"
         "        if dtype_override is not None:\n"
         "            model = model.to(dtype_override)\n"
         "        return model\n"
         "\n"
         "    def load_inputs(self, dtype_override=None):\n"
         "        inputs = torch.randn(1, 3, 8, 8)\n"
         "        return inputs\n";
}

using MapFiles = testing::MemoryPinnedFiles;

MapFiles DefaultFiles() {
  MapFiles f;
  f.ttxla[kYamlPath] = TrainingYaml();
  f.forge[kUtilsPath] = kUtils;
  f.forge[kLoaderA] = Loader("a");
  f.forge[kLoaderB] = Loader("b");
  return f;
}

// ---- builders

v1::YamlValue Str(const std::string& s) {
  v1::YamlValue v;
  v.set_string_value(s);
  return v;
}

// "passes now": status EXPECTED_PASSING, bringup_status and reason removed.
v1::EntryEdit PassEdit(const std::string& key) {
  v1::EntryEdit e;
  e.set_file(kYamlPath);
  e.set_key(key);
  auto* f = e.add_set();
  f->set_name("status");
  *f->mutable_value() = Str("EXPECTED_PASSING");
  e.add_delete_("bringup_status");
  e.add_delete_("reason");
  return e;
}

// "fails at runtime": status KNOWN_FAILURE_XFAIL, bringup_status FAILED_RUNTIME, a reason.
v1::EntryEdit XfailEdit(const std::string& key, const std::string& reason) {
  v1::EntryEdit e;
  e.set_file(kYamlPath);
  e.set_key(key);
  auto* f = e.add_set();
  f->set_name("status");
  *f->mutable_value() = Str("KNOWN_FAILURE_XFAIL");
  f = e.add_set();
  f->set_name("bringup_status");
  *f->mutable_value() = Str("FAILED_RUNTIME");
  f = e.add_set();
  f->set_name("reason");
  *f->mutable_value() = Str(reason);
  return e;
}

v1::EntryOutcome Outcome(const std::string& key, const std::string& arch,
                         const std::optional<v1::EntryEdit>& edit,
                         const std::string& verdict = "pass") {
  v1::EntryOutcome o;
  o.set_key(key);
  o.set_file(kYamlPath);
  o.set_arch(arch);
  o.set_verdict(verdict);
  o.set_flavor("unpack");
  if (edit) {
    o.set_changed(true);
    *o.mutable_edit() = *edit;
  }
  return o;
}

v1::FileEdit LoaderEdit(const std::string& path, const std::string& before,
                        const std::string& after, bool against_pinned = false) {
  v1::FileEdit fe;
  fe.set_repo("tt_forge_models");
  fe.set_path(path);
  fe.set_diff(diff::UnifiedDiff(path, before, after));
  fe.set_against_pinned(against_pinned);
  return fe;
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

struct Sweep {
  MapFiles files = DefaultFiles();
  std::vector<std::string> archs = {"n150", "p150"};
  std::vector<coord::ShardRecord> shards;
  std::vector<coord::ResultRecord> results;
  int next_token = 1;

  // A shard for loader `loader` (a, b, c, d), wave, arch ("" = probe phase).
  std::string AddShard(const std::string& loader, int wave, const std::string& arch,
                       v1::ShardPhase phase = v1::PHASE_FULL) {
    coord::ShardRecord s;
    s.id = util::StrCat("sh-", loader, "-w", wave, "-", arch.empty() ? "probe" : arch, "-",
                        shards.size());
    s.sweep_id = "sw-1";
    s.seq = static_cast<std::int64_t>(shards.size());
    s.spec.set_shard_id(s.id);
    s.spec.set_sweep_id("sw-1");
    s.spec.set_playbook("unpack");
    s.spec.set_loader(util::StrCat("third_party/tt_forge_models/", loader, "/pytorch/loader.py"));
    s.spec.set_wave(wave);
    s.spec.set_phase(phase);
    s.spec.set_arch(arch);
    s.spec.set_executor("native");
    shards.push_back(s);
    return s.id;
  }

  coord::ResultRecord& AddResult(const std::string& shard_id, v1::ShardResult r) {
    coord::ResultRecord rec;
    rec.shard_id = shard_id;
    rec.sweep_id = "sw-1";
    rec.token = next_token++;
    rec.lease_id = util::StrCat("lease-", rec.token);
    r.set_status(v1::ShardResult::SUCCEEDED);
    rec.result = std::move(r);
    results.push_back(std::move(rec));
    return results.back();
  }

  MergeInput Input() {
    MergeInput in;
    in.sweep_id = "sw-1";
    in.archs = archs;
    in.shards = shards;
    in.results = results;
    in.files = &files;
    return in;
  }
};

// The report of a merged sweep of s (sweep sw-1 on s's archs); yaml_after: the test-config file
// after the patch, when the test reads resolved outcomes.
BuiltReport ReportOf(const Sweep& s, const MergeOutput& merged, const std::string& yaml_after = "",
                     const std::string& executor = "") {
  coord::SweepRecord sweep;
  sweep.id = "sw-1";
  sweep.archs = s.archs;
  sweep.request.set_executor(executor);
  ReportInput in;
  in.sweep = &sweep;
  in.merge = &merged;
  if (!yaml_after.empty()) in.yaml_after[kYamlPath] = yaml_after;
  return BuildReport(in);
}

v1::ShardResult WithOutcomes(std::vector<v1::EntryOutcome> os) {
  v1::ShardResult r;
  for (auto& o : os) *r.add_entries() = std::move(o);
  return r;
}

const EntryMerge* FindEntry(const MergeOutput& out, const std::string& key) {
  for (const auto& e : out.entries) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

std::string Joined(const std::vector<std::string>& v) { return util::StrJoin(v, "\n"); }

// Writes the pinned files into two git repositories and runs `git apply --check` (and then the
// real apply) of both patches. Returns the patched texts by path ("tt-xla/..", "forge/..").
void ExpectPatchesApply(const MapFiles& files, const MergeOutput& out,
                        std::map<std::string, std::string>* patched = nullptr) {
  testing::SetGitTestEnv();
  testing::TempDir tmp;
  struct Repo {
    std::filesystem::path dir;
    const std::map<std::string, std::string>* files;
    const std::string* patch;
    std::string prefix;
  };
  std::vector<Repo> repos = {{tmp.path() / "tt-xla", &files.ttxla, &out.ttxla_patch, "tt-xla/"},
                             {tmp.path() / "forge", &files.forge, &out.forge_patch, "forge/"}};
  for (const auto& r : repos) {
    std::filesystem::create_directories(r.dir);
    std::string log;
    ASSERT_EQ(testing::RunCommand({"git", "init", "-q", "."}, r.dir, &log), 0) << log;
    for (const auto& [path, text] : *r.files) {
      std::filesystem::create_directories((r.dir / path).parent_path());
      testing::WriteFileOrDie(r.dir / path, text);
    }
    ASSERT_EQ(testing::RunCommand({"git", "add", "-A"}, r.dir, &log), 0) << log;
    ASSERT_EQ(testing::RunCommand({"git", "commit", "-q", "-m", "pinned"}, r.dir, &log), 0) << log;
    if (r.patch->empty()) continue;
    testing::WriteFileOrDie(tmp.path() / "p.diff", *r.patch);
    const std::string patch_file = (tmp.path() / "p.diff").string();
    ASSERT_EQ(testing::RunCommand({"git", "apply", "--check", patch_file}, r.dir, &log), 0)
        << log << "\n"
        << *r.patch;
    ASSERT_EQ(testing::RunCommand({"git", "apply", patch_file}, r.dir, &log), 0) << log;
    if (patched != nullptr) {
      for (const auto& [path, text] : *r.files) {
        (*patched)[r.prefix + path] = testing::ReadFileOrDie(r.dir / path);
      }
    }
  }
}

// ---- a. equal outcomes on every arch -> top-level fields

TEST(Merge, EqualOutcomesOnAllArchsGoTopLevel) {
  Sweep s;
  for (const std::string arch : {"n150", "p150"}) {
    auto id = s.AddShard("a", 1, arch);
    s.AddResult(id, WithOutcomes({Outcome(kV1, arch, PassEdit(kV1))}));
  }
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->conflicts.empty()) << Joined(out->conflicts);
  const EntryMerge* e = FindEntry(*out, kV1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->placement, EntryMerge::Placement::kTopLevel);
  ASSERT_EQ(e->edits.size(), 1u);
  EXPECT_FALSE(e->edits[0].arch.has_value());
  EXPECT_EQ(e->outcomes.size(), 2u);
  EXPECT_NE(out->ttxla_patch.find("+    status: EXPECTED_PASSING\n"), std::string::npos)
      << out->ttxla_patch;
  EXPECT_NE(out->ttxla_patch.find("-    bringup_status: FAILED_FE_COMPILATION\n"),
            std::string::npos);
  EXPECT_EQ(out->ttxla_patch.find("arch_overrides"), std::string::npos);
  EXPECT_TRUE(out->forge_patch.empty());
  EXPECT_EQ(out->changed_files, std::vector<std::string>{std::string("tt-xla/") + kYamlPath});
  EXPECT_NE(e->yaml_after.find("status: EXPECTED_PASSING"), std::string::npos) << e->yaml_after;

  std::map<std::string, std::string> patched;
  ExpectPatchesApply(s.files, *out, &patched);
  const std::string yaml = patched[std::string("tt-xla/") + kYamlPath];
  auto doc = inventory::Document::Parse(kYamlPath, yaml);
  const inventory::Entry* v1 = doc.Find(kV1);
  ASSERT_NE(v1, nullptr);
  ASSERT_NE(v1->Field("status"), nullptr);
  EXPECT_EQ(v1->Field("status")->string, "EXPECTED_PASSING");
  EXPECT_EQ(v1->Field("reason"), nullptr);
  EXPECT_EQ(v1->Field("arch_overrides"), nullptr);
  // Other entries untouched.
  EXPECT_EQ(doc.Find(kV2)->Field("status")->string, "NOT_SUPPORTED_SKIP");
}

// A sweep of n150 alone: a top-level change also reaches p150, where CI runs single-device
// training too, so the report asks for a look; with both archs there is nothing to say.
TEST(Merge, TopLevelChangeVerifiedOnPartOfTheCiArchsIsFlagged) {
  Sweep s;
  s.archs = {"n150"};
  auto id = s.AddShard("a", 1, "n150");
  s.AddResult(id, WithOutcomes({Outcome(kV1, "n150", PassEdit(kV1))}));
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  const EntryMerge* e = FindEntry(*out, kV1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->placement, EntryMerge::Placement::kTopLevel);
  EXPECT_NE(Joined(e->review).find("verified on n150 only; CI also runs single-device training "
                                   "on p150"),
            std::string::npos)
      << Joined(e->review);

  Sweep both;
  for (const std::string arch : {"n150", "p150"}) {
    auto b = both.AddShard("a", 1, arch);
    both.AddResult(b, WithOutcomes({Outcome(kV1, arch, PassEdit(kV1))}));
  }
  auto all = Merge(both.Input());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(FindEntry(*all, kV1)->review.empty()) << Joined(FindEntry(*all, kV1)->review);
}

// Only one of the two target archs changed: the edit goes into that arch's override.
TEST(Merge, OutcomeOnOneArchOnlyGoesPerArch) {
  Sweep s;
  auto id = s.AddShard("a", 1, "n150");
  s.AddResult(id, WithOutcomes({Outcome(kV1, "n150", PassEdit(kV1))}));
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  const EntryMerge* e = FindEntry(*out, kV1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->placement, EntryMerge::Placement::kPerArch);
  EXPECT_NE(out->ttxla_patch.find("arch_overrides"), std::string::npos) << out->ttxla_patch;
  ExpectPatchesApply(s.files, *out);
}

// ---- b. different outcomes -> arch_overrides per arch

TEST(Merge, DifferentOutcomesGoPerArch) {
  Sweep s;
  auto n = s.AddShard("a", 1, "n150");
  auto p = s.AddShard("a", 1, "p150");
  s.AddResult(n, WithOutcomes({Outcome(kV1, "n150", PassEdit(kV1))}));
  s.AddResult(
      p, WithOutcomes({Outcome(kV1, "p150", XfailEdit(kV1, "TT_FATAL: p150 only"), "failure")}));
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  const EntryMerge* e = FindEntry(*out, kV1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->placement, EntryMerge::Placement::kPerArch) << e->conflict;
  std::set<std::string> archs;
  for (const auto& ed : e->edits) {
    if (ed.arch) archs.insert(*ed.arch);
  }
  EXPECT_EQ(archs, (std::set<std::string>{"n150", "p150"}));
  EXPECT_TRUE(out->conflicts.empty()) << Joined(out->conflicts);

  std::map<std::string, std::string> patched;
  ExpectPatchesApply(s.files, *out, &patched);
  auto doc = inventory::Document::Parse(kYamlPath, patched[std::string("tt-xla/") + kYamlPath]);
  const inventory::Entry* v1 = doc.Find(kV1);
  ASSERT_NE(v1, nullptr);
  const inventory::Value* ao = v1->Field("arch_overrides");
  ASSERT_NE(ao, nullptr) << patched[std::string("tt-xla/") + kYamlPath];
  const inventory::Value* n150 = nullptr;
  const inventory::Value* p150 = nullptr;
  for (const auto& item : ao->map) {
    if (item.key == "n150") n150 = &item.value;
    if (item.key == "p150") p150 = &item.value;
  }
  ASSERT_NE(n150, nullptr);
  ASSERT_NE(p150, nullptr);
  auto field = [](const inventory::Value* m, const std::string& k) -> std::string {
    for (const auto& item : m->map) {
      if (item.key == k) return item.value.string;
    }
    return "<absent>";
  };
  EXPECT_EQ(field(n150, "status"), "EXPECTED_PASSING");
  EXPECT_EQ(field(p150, "status"), "KNOWN_FAILURE_XFAIL");
  EXPECT_EQ(field(p150, "reason"), "TT_FATAL: p150 only");
  // Every arch decided differently: the decided fields are gone from the top level.
  EXPECT_EQ(v1->Field("status"), nullptr);
}

// A later wave's outcome decides an arch (not last-writer-wins inside one wave).
// V1 fails in wave 1 and passes in wave 2, on both archs; wave 2's shards flagged `ahead` if
// asked (planned ahead, then discarded).
Sweep FailsThenPasses(bool second_ahead) {
  Sweep s;
  for (const std::string arch : {"n150", "p150"}) {
    auto w1 = s.AddShard("a", 1, arch);
    s.AddResult(
        w1, WithOutcomes({Outcome(kV1, arch, XfailEdit(kV1, "TT_FATAL: wave one"), "failure")}));
    auto w2 = s.AddShard("a", 2, arch, v1::PHASE_VERIFY);
    s.shards.back().spec.set_ahead(second_ahead);
    s.AddResult(w2, WithOutcomes({Outcome(kV1, arch, PassEdit(kV1))}));
  }
  return s;
}

TEST(Merge, LaterWaveDecides) {
  Sweep s = FailsThenPasses(false);
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->conflicts.empty()) << Joined(out->conflicts);
  const EntryMerge* e = FindEntry(*out, kV1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->placement, EntryMerge::Placement::kTopLevel);
  EXPECT_EQ(e->wave, 2);
  EXPECT_NE(out->ttxla_patch.find("+    status: EXPECTED_PASSING"), std::string::npos);
  EXPECT_EQ(out->ttxla_patch.find("wave one"), std::string::npos);
}

// A shard still flagged as planned ahead was discarded when its wave was planned (docs/farm.md,
// "Registry waves start early"): its result decides nothing, though it is of a later wave.
TEST(Merge, AResultOfAShardPlannedAheadAndDiscardedDecidesNothing) {
  Sweep s = FailsThenPasses(true);
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  const EntryMerge* e = FindEntry(*out, kV1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->wave, 1);
  EXPECT_NE(out->ttxla_patch.find("wave one"), std::string::npos);
  EXPECT_EQ(out->ttxla_patch.find("+    status: EXPECTED_PASSING"), std::string::npos);
}

// ---- c. two accepted results of one wave wanting different edits of one entry

TEST(Merge, ConflictingEditsOfOneEntryAreListedAndLeftUnchanged) {
  Sweep s;
  auto x = s.AddShard("a", 1, "n150");
  auto y = s.AddShard("a", 1, "n150");
  auto p = s.AddShard("a", 1, "p150");
  s.AddResult(
      x, WithOutcomes({Outcome(kV1, "n150", PassEdit(kV1)), Outcome(kV2, "n150", PassEdit(kV2))}));
  s.AddResult(y,
              WithOutcomes({Outcome(kV1, "n150", XfailEdit(kV1, "TT_FATAL: flaky"), "failure")}));
  s.AddResult(
      p, WithOutcomes({Outcome(kV1, "p150", PassEdit(kV1)), Outcome(kV2, "p150", PassEdit(kV2))}));
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->conflict_counts["yaml"], 1);
  ASSERT_EQ(out->conflicts.size(), 1u) << Joined(out->conflicts);
  EXPECT_NE(out->conflicts[0].find(kV1), std::string::npos) << out->conflicts[0];
  EXPECT_NE(out->conflicts[0].find("n150"), std::string::npos) << out->conflicts[0];
  const EntryMerge* e = FindEntry(*out, kV1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->placement, EntryMerge::Placement::kConflict);
  EXPECT_FALSE(e->conflict.empty());
  EXPECT_TRUE(e->edits.empty());
  // V2 still changes, V1 is left as it was.
  EXPECT_EQ(FindEntry(*out, kV2)->placement, EntryMerge::Placement::kTopLevel);
  std::map<std::string, std::string> patched;
  ExpectPatchesApply(s.files, *out, &patched);
  auto doc = inventory::Document::Parse(kYamlPath, patched[std::string("tt-xla/") + kYamlPath]);
  auto before = inventory::Document::Parse(kYamlPath, s.files.ttxla[kYamlPath]);
  EXPECT_TRUE(doc.Find(kV1)->value == before.Find(kV1)->value);
  EXPECT_EQ(doc.Find(kV2)->Field("status")->string, "EXPECTED_PASSING");
  EXPECT_EQ(out->ttxla_patch.find("TT_FATAL: flaky"), std::string::npos);
}

// An edit the editor refuses (an unknown field) is a conflict of that entry only.
TEST(Merge, RefusedEditIsAConflictAndOtherEntriesStillChange) {
  Sweep s;
  v1::EntryEdit bad = PassEdit(kV2);
  auto* f = bad.add_set();
  f->set_name("no_such_field");
  *f->mutable_value() = Str("x");
  for (const std::string arch : {"n150", "p150"}) {
    auto id = s.AddShard("a", 1, arch);
    s.AddResult(id, WithOutcomes({Outcome(kV1, arch, PassEdit(kV1)), Outcome(kV2, arch, bad)}));
  }
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->conflict_counts["yaml"], 1) << Joined(out->conflicts);
  ASSERT_EQ(out->conflicts.size(), 1u);
  EXPECT_NE(out->conflicts[0].find(kV2), std::string::npos) << out->conflicts[0];
  EXPECT_EQ(FindEntry(*out, kV2)->placement, EntryMerge::Placement::kConflict);
  EXPECT_EQ(FindEntry(*out, kV1)->placement, EntryMerge::Placement::kTopLevel);
  std::map<std::string, std::string> patched;
  ExpectPatchesApply(s.files, *out, &patched);
  auto doc = inventory::Document::Parse(kYamlPath, patched[std::string("tt-xla/") + kYamlPath]);
  EXPECT_EQ(doc.Find(kV1)->Field("status")->string, "EXPECTED_PASSING");
  EXPECT_EQ(doc.Find(kV2)->Field("status")->string, "NOT_SUPPORTED_SKIP");
}

// ---- d. registry

TEST(Merge, IdenticalRegistryAddsCollapseIntoOneLine) {
  Sweep s;
  for (const std::string arch : {"n150", "p150"}) {
    auto id = s.AddShard("b", 1, arch);
    v1::ShardResult r = WithOutcomes({Outcome(kB, arch, PassEdit(kB))});
    *r.add_registry_ops() = registry::AddOp("MiniCausalLMOutput", "logits");
    s.AddResult(id, r);
  }
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->conflicts.empty()) << Joined(out->conflicts);
  ASSERT_EQ(out->registry.size(), 1u);
  EXPECT_EQ(out->registry[0].cls(), "MiniCausalLMOutput");
  const std::string line = "+_register_attr(\"MiniCausalLMOutput\", \"logits\")\n";
  auto first = out->forge_patch.find(line);
  ASSERT_NE(first, std::string::npos) << out->forge_patch;
  EXPECT_EQ(out->forge_patch.find(line, first + 1), std::string::npos) << out->forge_patch;
  std::map<std::string, std::string> patched;
  ExpectPatchesApply(s.files, *out, &patched);
  // At its sorted position: after MiniCLIPLikeOutput, before MiniMgpstrOutput.
  const std::string& utils = patched[std::string("forge/") + kUtilsPath];
  auto clip = utils.find("MiniCLIPLikeOutput");
  auto causal = utils.find("MiniCausalLMOutput");
  auto mgp = utils.find("MiniMgpstrOutput");
  ASSERT_NE(causal, std::string::npos);
  EXPECT_LT(causal, mgp);
  EXPECT_TRUE(clip < causal || causal < clip);  // case-insensitive order: either side is sorted
}

TEST(Merge, TwoAttrsForOneClassAreARegistryConflict) {
  Sweep s;
  auto x = s.AddShard("b", 1, "n150");
  auto y = s.AddShard("a", 1, "n150");
  v1::ShardResult rx = WithOutcomes({Outcome(kB, "n150", PassEdit(kB))});
  *rx.add_registry_ops() = registry::AddOp("MiniCausalLMOutput", "logits");
  *rx.add_registry_ops() = registry::AddOp("MiniVitOutput", "logits");
  v1::ShardResult ry = WithOutcomes({Outcome(kV1, "n150", PassEdit(kV1))});
  *ry.add_registry_ops() = registry::AddOp("MiniCausalLMOutput", "last_hidden_state");
  *ry.add_registry_ops() = registry::AddOp("MiniVitOutput", "logits");
  s.AddResult(x, rx);
  s.AddResult(y, ry);
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->conflict_counts["registry"], 1);
  ASSERT_EQ(out->conflicts.size(), 1u) << Joined(out->conflicts);
  EXPECT_NE(out->conflicts[0].find("MiniCausalLMOutput"), std::string::npos);
  EXPECT_EQ(out->forge_patch.find("MiniCausalLMOutput"), std::string::npos) << out->forge_patch;
  // The uncontested class is still added, once.
  ASSERT_EQ(out->registry.size(), 1u);
  EXPECT_EQ(out->registry[0].cls(), "MiniVitOutput");
  EXPECT_NE(out->forge_patch.find("+_register_attr(\"MiniVitOutput\", \"logits\")"),
            std::string::npos);
  ExpectPatchesApply(s.files, *out);
}

// An existing class with a different attribute is refused by the registry file: a conflict.
TEST(Merge, RegistryAddForAnAlreadyRegisteredClassIsAConflict) {
  Sweep s;
  auto x = s.AddShard("b", 1, "n150");
  v1::ShardResult rx = WithOutcomes({Outcome(kB, "n150", PassEdit(kB))});
  *rx.add_registry_ops() = registry::AddOp("MiniSeq2SeqOutput", "last_hidden_state");
  s.AddResult(x, rx);
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->conflict_counts["registry"], 1) << Joined(out->conflicts);
  EXPECT_TRUE(out->forge_patch.empty()) << out->forge_patch;
  EXPECT_TRUE(out->registry.empty());
}

// ---- e. loader edits

TEST(Merge, LoaderEditsChainWaveByWave) {
  Sweep s;
  const std::string base = s.files.forge[kLoaderA];
  const std::string w1 = Replace(base, "        inputs = torch.randn(1, 3, 8, 8)\n",
                                 "        inputs = torch.randn(1, 3, 16, 16)\n");
  const std::string w2 = Replace(w1, "            model = model.to(dtype_override)\n",
                                 "            model = model.to(torch.float32)\n");
  auto a1 = s.AddShard("a", 1, "n150");
  auto a2 = s.AddShard("a", 2, "n150");
  v1::ShardResult r1 = WithOutcomes({Outcome(kV1, "n150", PassEdit(kV1))});
  *r1.add_file_edits() = LoaderEdit(kLoaderA, base, w1);
  v1::ShardResult r2 = WithOutcomes({Outcome(kV1, "n150", PassEdit(kV1))});
  *r2.add_file_edits() = LoaderEdit(kLoaderA, w1, w2);  // made on top of wave 1
  // Inserted in reverse order: the merge orders by wave.
  s.AddResult(a2, r2);
  s.AddResult(a1, r1);
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->conflict_counts["loader"], 0) << Joined(out->conflicts);
  EXPECT_NE(out->forge_patch.find("+        inputs = torch.randn(1, 3, 16, 16)"), std::string::npos)
      << out->forge_patch;
  EXPECT_NE(out->forge_patch.find("+            model = model.to(torch.float32)"),
            std::string::npos);
  std::map<std::string, std::string> patched;
  ExpectPatchesApply(s.files, *out, &patched);
  EXPECT_EQ(patched[std::string("forge/") + kLoaderA], w2);
}

TEST(Merge, TwoDifferentLoaderEditsOfOneWaveAreAConflict) {
  Sweep s;
  const std::string base = s.files.forge[kLoaderA];
  const std::string x = Replace(base, "        inputs = torch.randn(1, 3, 8, 8)\n",
                                "        inputs = torch.randn(1, 3, 16, 16)\n");
  const std::string y = Replace(base, "        inputs = torch.randn(1, 3, 8, 8)\n",
                                "        inputs = torch.zeros(1, 3, 8, 8)\n");
  auto sx = s.AddShard("a", 1, "n150");
  auto sy = s.AddShard("a", 1, "p150");
  // A loader edit to another file still lands.
  const std::string b_after =
      Replace(s.files.forge[kLoaderB], "torch.randn(1, 3, 8, 8)", "torch.randn(1, 3, 4, 4)");
  v1::ShardResult rx = WithOutcomes({Outcome(kV1, "n150", PassEdit(kV1))});
  *rx.add_file_edits() = LoaderEdit(kLoaderA, base, x);
  v1::ShardResult ry = WithOutcomes({Outcome(kV1, "p150", PassEdit(kV1))});
  *ry.add_file_edits() = LoaderEdit(kLoaderA, base, y);
  auto sb = s.AddShard("b", 1, "n150");
  v1::ShardResult rb = WithOutcomes({Outcome(kB, "n150", PassEdit(kB))});
  *rb.add_file_edits() = LoaderEdit(kLoaderB, s.files.forge[kLoaderB], b_after);
  s.AddResult(sx, rx);
  s.AddResult(sy, ry);
  s.AddResult(sb, rb);
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->conflict_counts["loader"], 1) << Joined(out->conflicts);
  EXPECT_NE(Joined(out->conflicts).find(kLoaderA), std::string::npos);
  EXPECT_EQ(out->forge_patch.find(kLoaderA), std::string::npos) << out->forge_patch;
  EXPECT_NE(out->forge_patch.find(kLoaderB), std::string::npos);
  ExpectPatchesApply(s.files, *out);
}

// The same loader fix found independently by two shards of one wave is no conflict.
TEST(Merge, IdenticalLoaderEditsOfOneWaveAreNoConflict) {
  Sweep s;
  const std::string base = s.files.forge[kLoaderA];
  const std::string x = Replace(base, "        inputs = torch.randn(1, 3, 8, 8)\n",
                                "        inputs = torch.randn(1, 3, 16, 16)\n");
  for (const std::string arch : {"n150", "p150"}) {
    auto id = s.AddShard("a", 1, arch);
    v1::ShardResult r = WithOutcomes({Outcome(kV1, arch, PassEdit(kV1))});
    *r.add_file_edits() = LoaderEdit(kLoaderA, base, x);
    s.AddResult(id, r);
  }
  auto out = Merge(s.Input());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->conflict_counts["loader"], 0) << Joined(out->conflicts);
  std::map<std::string, std::string> patched;
  ExpectPatchesApply(s.files, *out, &patched);
  EXPECT_EQ(patched[std::string("forge/") + kLoaderA], x);
}

// ---- f. command-executor results, lifted on their agent, merge like native ones

// What the agent sends for a command's raw diffs in r: the lift (common/lift/lift.h) against the
// pinned files, for the shard's spec with an entry per outcome of r (as the planner gives them).
v1::ShardResult LiftedOnTheAgent(Sweep& s, const std::string& shard_id, v1::ShardResult r,
                                 lift::LiftOutput* lifted = nullptr) {
  for (auto& shard : s.shards) {
    if (shard.id != shard_id) continue;
    for (const auto& o : r.entries()) {
      auto* e = shard.spec.add_entries();
      e->set_key(o.key());
      e->set_file(o.file());
    }
    lift::LiftOutput out = lift::Lift(shard.spec, r, s.files);
    EXPECT_TRUE(r.ttxla_diff().empty() && r.forge_diff().empty());
    if (lifted != nullptr) *lifted = std::move(out);
  }
  return r;
}

const coord::ShardRecord& ShardOf(const Sweep& s, const std::string& id) {
  for (const auto& shard : s.shards) {
    if (shard.id == id) return shard;
  }
  ADD_FAILURE() << "no shard " << id;
  return s.shards.front();
}

// Rejected means rejected: a command's result whose entry change the farm accepted lands its
// loader edit and registry line; one whose every entry the farm overruled lands neither, and its
// entry says so. The farm's own decision for the overruled entry still lands.
TEST(Merge, ACommandsLoaderEditsLandOnlyWithAnEntryChangeTheFarmAccepted) {
  Sweep s;
  s.archs = {"n150"};
  const std::string loader_a = s.files.forge[kLoaderA], loader_b = s.files.forge[kLoaderB];
  auto command_result = [&](const std::string& loader, const std::string& path,
                            const std::string& before, v1::EntryOutcome o, const std::string& cls) {
    const std::string id = s.AddShard(loader, 1, "n150");
    s.shards.back().spec.set_executor("command");
    v1::ShardResult r;
    *r.add_entries() = std::move(o);
    *r.add_registry_ops() = registry::AddOp(cls, "logits");
    *r.add_file_edits() =
        LoaderEdit(path, before, Replace(before, "torch.randn(1, 3, 8, 8)", "torch.ones(1)"),
                   /*against_pinned=*/true);
    s.AddResult(id, r);
    return id;
  };
  v1::EntryOutcome accepted = Outcome(kB, "n150", PassEdit(kB));
  accepted.set_command_check("verified by the farm");
  command_result("b", kLoaderB, loader_b, accepted, "MiniCausalLMOutput");
  v1::EntryOutcome overruled =
      Outcome(kC, "n150", XfailEdit(kC, "RuntimeError: still broken"), "failure");
  overruled.set_command_check("replaced by the farm's decision");
  const std::string rejected = command_result("c", kLoaderA, loader_a, overruled, "MiniOther");

  auto m = Merge(s.Input());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->conflicts.empty()) << Joined(m->conflicts);
  EXPECT_NE(m->forge_patch.find(kLoaderB), std::string::npos) << m->forge_patch;
  EXPECT_NE(m->forge_patch.find("MiniCausalLMOutput"), std::string::npos) << m->forge_patch;
  EXPECT_EQ(m->forge_patch.find(kLoaderA), std::string::npos) << m->forge_patch;
  EXPECT_EQ(m->forge_patch.find("MiniOther"), std::string::npos) << m->forge_patch;
  ASSERT_EQ(m->registry.size(), 1u);
  EXPECT_NE(m->ttxla_patch.find("RuntimeError: still broken"), std::string::npos)
      << "the farm's decision for the overruled entry lands";
  const EntryMerge* c = FindEntry(*m, kC);
  ASSERT_NE(c, nullptr);
  EXPECT_NE(Joined(c->review).find(util::StrCat(
                "not landed: the command's edits of ", kLoaderA,
                ", the registry lines of training_utils.py on n150 (shard ", rejected,
                "): the farm overruled the command's decision and accepted none of its entry "
                "changes")),
            std::string::npos)
      << Joined(c->review);
  EXPECT_EQ(Joined(FindEntry(*m, kB)->review).find("not landed"), std::string::npos);
  ExpectPatchesApply(s.files, *m);

  // A result the farm overruled nothing of keeps its edits: with verify off (no check at all), or
  // where the command changed no entry and the farm agreed.
  for (const std::string check : {"", "verified by the farm"}) {
    SCOPED_TRACE(check);
    Sweep fresh;
    fresh.archs = {"n150"};
    s = fresh;
    v1::EntryOutcome unchanged = Outcome(kB, "n150", std::nullopt, "failure");
    unchanged.set_command_check(check);
    command_result("b", kLoaderB, loader_b, unchanged, "MiniCausalLMOutput");
    auto g = Merge(s.Input());
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_NE(g->forge_patch.find(kLoaderB), std::string::npos);
    EXPECT_EQ(Joined(FindEntry(*g, kB)->review).find("not landed"), std::string::npos);
  }
}

// Shared fixes (docs/remediation.md): a cluster lead's edit of a shared helper lands once; a
// follower that started from it and changed the helper further builds on it; a follower fixed by
// it with no run carries no edit. The report counts the runs against the entries and lists the
// shared fixes with the entries each fixed; the pull-request text lists them first.
TEST(Merge, ASharedFixLandsOnceAndAFollowerBuildsOnIt) {
  Sweep s;
  s.archs = {"n150"};
  const std::string helper = "tools/helper.py";
  const std::string base = "def f():\n    return 1\n";
  const std::string lead_text = "def f():\n    return 2\n";
  const std::string follower_text = "def f():\n    return 2\n\n\ndef g():\n    return 3\n";
  s.files.forge[helper] = base;
  auto command_shard_of = [&](Sweep& in, const char* loader, const std::string& key) {
    const std::string id = in.AddShard(loader, 1, "n150");
    coord::ShardRecord& shard = in.shards.back();
    shard.spec.set_executor("command");
    v1::ShardEntry* se = shard.spec.add_entries();
    se->set_key(key);
    se->set_file(kYamlPath);
    se->set_cluster("c-00000001");
    return id;
  };
  auto command_shard = [&](const char* loader, const std::string& key) {
    return command_shard_of(s, loader, key);
  };
  auto passed = [](const std::string& key, const std::string& check) {
    v1::EntryOutcome o = Outcome(key, "n150", PassEdit(key));
    o.set_command_check(check);
    o.mutable_summary()->set_fingerprint("helper-bug");
    return o;
  };
  const std::string lead = command_shard("b", kB);
  v1::ShardResult r = WithOutcomes({passed(kB, "verified by the farm")});
  *r.add_file_edits() = LoaderEdit(helper, base, lead_text, /*against_pinned=*/true);
  r.set_command_runs(1);
  s.AddResult(lead, r);
  for (const auto& [loader, key] : {std::pair{"c", kC}, std::pair{"d", kD}}) {
    const std::string id = command_shard(loader, key);
    *s.shards.back().spec.add_pre_apply() = LoaderEdit(helper, base, lead_text, true);
    s.shards.back().spec.mutable_fan_out()->set_lead_shard(lead);
    v1::ShardResult f;
    if (key == kC) {  // ran, and added to the helper on top of the lead's fix
      f = WithOutcomes({passed(kC, "verified by the farm")});
      *f.add_file_edits() = LoaderEdit(helper, base, follower_text, true);
      f.set_command_runs(1);
    } else {  // fixed by the lead's change, verified, no run
      v1::EntryOutcome o = passed(kD, "verified by the farm: no command run");
      o.clear_summary();
      o.set_fixed_by(util::StrCat("shard ", lead));
      f = WithOutcomes({o});
    }
    s.AddResult(id, f);
  }
  auto m = Merge(s.Input());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->conflicts.empty()) << Joined(m->conflicts);
  EXPECT_NE(m->forge_patch.find("+def g():"), std::string::npos) << m->forge_patch;
  EXPECT_NE(m->forge_patch.find("+    return 2"), std::string::npos) << m->forge_patch;
  EXPECT_EQ(m->forge_patch.find("+    return 2"), m->forge_patch.rfind("+    return 2"));
  ExpectPatchesApply(s.files, *m);
  EXPECT_EQ(m->command_runs.runs, 2);
  EXPECT_EQ(m->command_runs.entries, 3);
  EXPECT_EQ(m->command_runs.without_run, 1);
  ASSERT_EQ(m->shared_fixes.size(), 2u);
  EXPECT_EQ(m->shared_fixes[0].file, "tt_forge_models/tools/helper.py");
  EXPECT_EQ(m->shared_fixes[0].shard, lead);
  EXPECT_EQ(m->shared_fixes[0].fingerprint, "helper-bug");
  EXPECT_EQ(m->shared_fixes[0].cluster, "c-00000001");
  EXPECT_EQ(m->shared_fixes[0].fixed, (std::vector<std::string>{kB, kD}));
  EXPECT_TRUE(m->shared_fixes[0].landed);

  // Two leads editing the helper differently, neither on top of the other: a conflict, and
  // neither lands.
  Sweep two;
  two.archs = {"n150"};
  two.files.forge[helper] = base;
  two.AddResult(command_shard_of(two, "b", kB), r);
  v1::ShardResult o = WithOutcomes({passed(kC, "verified by the farm")});
  *o.add_file_edits() = LoaderEdit(helper, base, "def f():\n    return 7\n", true);
  two.AddResult(command_shard_of(two, "c", kC), o);
  auto c = Merge(two.Input());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->conflicts.size(), 1u);
  EXPECT_NE(c->conflicts[0].find("shared: tt_forge_models/tools/helper.py"), std::string::npos)
      << c->conflicts[0];
  EXPECT_EQ(c->forge_patch.find("helper.py"), std::string::npos) << c->forge_patch;
  EXPECT_FALSE(c->shared_fixes[0].landed);

  const BuiltReport report = ReportOf(s, *m, "", "command");
  const nlohmann::json j = nlohmann::json::parse(report.json);
  EXPECT_EQ(j["command_runs"], (nlohmann::json{{"runs", 2}, {"entries", 3}, {"without_run", 1}}));
  EXPECT_EQ(j["shared_fixes"][0]["fixed"], (nlohmann::json{kB, kD}));
  EXPECT_NE(report.markdown.find("2 command runs for 3 entries; 1 entry fixed by an earlier"),
            std::string::npos)
      << report.markdown;
  auto pr = BuildPrText(j, PrRepo::kForge);
  ASSERT_TRUE(pr.ok()) << pr.status();
  const auto shared = pr->body.find("## Shared fixes");
  ASSERT_NE(shared, std::string::npos) << pr->body;
  EXPECT_LT(shared, pr->body.find("## Changes by kind"));
  EXPECT_NE(pr->body.find(util::StrCat("`tools/helper.py` (shard ", lead,
                                       ", fingerprint `helper-bug`): fixes 2 entries: `", kB,
                                       "`, `", kD, "`")),
            std::string::npos)
      << pr->body;
}

// The shared fix's wave (docs/remediation.md): a passing entry importing the helper that fails
// with the lead's change holds the change back, with every entry it fixed; a wave that finds
// nothing broken lets it land and is named in report.json and the PR text.
TEST(Merge, AWaveThatFailsAPassingEntryHoldsTheSharedFixBackWithTheEntriesItFixed) {
  const std::string helper = "tools/helper.py";
  const std::string base = "def f():\n    return 1\n";
  const std::string fixed = "def f():\n    return 2\n";
  auto sweep = [&](const std::string& passing_verdict) {
    Sweep s;
    s.archs = {"n150"};
    s.files.forge[helper] = base;
    auto passed = [](const std::string& key) {
      v1::EntryOutcome o = Outcome(key, "n150", PassEdit(key));
      o.set_command_check("verified by the farm");
      return o;
    };
    const std::string lead = s.AddShard("b", 1, "n150");
    s.shards.back().spec.set_executor("command");
    s.shards.back().spec.add_entries()->set_key(kB);
    v1::ShardResult r = WithOutcomes({passed(kB)});
    *r.add_file_edits() = LoaderEdit(helper, base, fixed, /*against_pinned=*/true);
    s.AddResult(lead, r);
    const std::string follower = s.AddShard("d", 1, "n150");
    s.shards.back().spec.set_executor("command");
    s.shards.back().spec.mutable_fan_out()->set_lead_shard(lead);
    v1::EntryOutcome by_lead = passed(kD);
    by_lead.set_fixed_by(util::StrCat("shard ", lead));
    s.AddResult(follower, WithOutcomes({by_lead}));
    const std::string wave = s.AddShard("b", 1, "n150");
    coord::ShardRecord& w = s.shards.back();
    w.spec.set_executor("command");
    w.spec.mutable_fan_out()->set_lead_shard(lead);
    (*w.spec.mutable_params())["wave"] = "{}";
    v1::ShardResult found;
    v1::Evidence* ev = found.add_evidence();
    ev->set_kind("wave");
    ev->set_name("wave.json");
    ev->set_content(nlohmann::json{
        {"lead", lead},
        {"shared_files", {"tt_forge_models:tools/helper.py"}},
        {"candidates", 9},
        {"not_affected", 7},
        {"checked",
         {{{"file", kYamlPath}, {"key", kC}, {"selected", true}, {"verdict", "pass"}},
          {{"file", kYamlPath},
           {"key", "e/pytorch-P-single_device-inference"},
           {"status", "EXPECTED_PASSING"},
           {"selected", false},
           {"verdict", passing_verdict},
           {"reason", passing_verdict == "pass" ? "" : "ValueError: boom"}}}}}
                        .dump());
    if (!passing_verdict.empty()) s.AddResult(wave, found);  // "": the wave has not run
    return s;
  };
  Sweep broken = sweep("fail");
  auto held = Merge(broken.Input());
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->conflicts.size(), 1u) << Joined(held->conflicts);
  EXPECT_NE(held->conflicts[0].find("shared: held back: tt_forge_models:tools/helper.py"),
            std::string::npos)
      << held->conflicts[0];
  EXPECT_NE(held->conflicts[0].find("e/pytorch-P-single_device-inference (fail: ValueError: boom)"),
            std::string::npos)
      << held->conflicts[0];
  EXPECT_EQ(held->forge_patch.find("helper.py"), std::string::npos) << held->forge_patch;
  EXPECT_TRUE(held->ttxla_patch.empty()) << held->ttxla_patch;
  for (const auto& e : held->entries) {
    EXPECT_EQ(e.placement, EntryMerge::Placement::kUnchanged) << e.key;
    EXPECT_NE(Joined(e.review).find("not landed: its fix was held back"), std::string::npos)
        << e.key;
  }
  ASSERT_EQ(held->shared_fixes.size(), 1u);
  EXPECT_FALSE(held->shared_fixes[0].landed);
  EXPECT_EQ(held->shared_fixes[0].wave_broke.size(), 1u);

  // A wave with no result has not checked the fix: it is held back as well.
  Sweep unchecked = sweep("");
  auto waiting = Merge(unchecked.Input());
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  ASSERT_EQ(waiting->conflicts.size(), 1u) << Joined(waiting->conflicts);
  EXPECT_NE(waiting->conflicts[0].find("was not checked: its wave (shard "), std::string::npos)
      << waiting->conflicts[0];
  EXPECT_EQ(waiting->forge_patch.find("helper.py"), std::string::npos) << waiting->forge_patch;

  Sweep sound = sweep("pass");
  auto landed = Merge(sound.Input());
  ASSERT_TRUE(landed.ok()) << landed.status();
  EXPECT_TRUE(landed->conflicts.empty()) << Joined(landed->conflicts);
  EXPECT_NE(landed->forge_patch.find("+    return 2"), std::string::npos);
  ASSERT_EQ(landed->shared_fixes.size(), 1u);
  const SharedFix& fix = landed->shared_fixes[0];
  EXPECT_TRUE(fix.landed);
  EXPECT_EQ(fix.wave_selected, std::vector<std::string>{kC});
  EXPECT_EQ(fix.wave_selected_pass, std::vector<std::string>{kC});
  EXPECT_EQ(fix.wave_passing, std::vector<std::string>{"e/pytorch-P-single_device-inference"});
  EXPECT_EQ(fix.wave_not_affected, 7);
  const BuiltReport report = ReportOf(sound, *landed, "", "command");
  const nlohmann::json j = nlohmann::json::parse(report.json);
  EXPECT_EQ(j["shared_fixes"][0]["wave"]["broke"], nlohmann::json::array());
  EXPECT_EQ(j["shared_fixes"][0]["wave"]["not_affected"], 7);
  EXPECT_NE(report.markdown.find("1 passing, 1 selected checked (1 of these pass), 7 not "
                                 "importing it"),
            std::string::npos)
      << report.markdown;
  auto pr = BuildPrText(j, PrRepo::kForge);
  ASSERT_TRUE(pr.ok()) << pr.status();
  EXPECT_NE(pr->body.find("found 1 passing and 1 other selected entries importing it unbroken"),
            std::string::npos)
      << pr->body;
}

// Guards (docs/remediation.md): a command result whose loader change trims layers, or whose YAML
// edit lowers required_pcc with no measured floor, lands nothing; its entries keep their YAML,
// each naming the finding, and the report and the PR list it. An honest result beside it lands.
TEST(Merge, AChangeHoldingAWorkaroundIsHeldForReviewAndNamed) {
  Sweep s;
  s.archs = {"n150"};
  const std::string loader = "b/pytorch/loader.py";
  const std::string base = "def load(config):\n    return Model(config)\n";
  s.files.forge[loader] = base;
  s.files.forge["c/pytorch/loader.py"] = base;
  auto command_shard = [&](const char* name) {
    const std::string id = s.AddShard(name, 1, "n150");
    s.shards.back().spec.set_executor("command");
    return id;
  };
  auto passed = [](const std::string& key) {
    v1::EntryOutcome o = Outcome(key, "n150", PassEdit(key));
    o.set_command_check("verified by the farm");
    return o;
  };
  const std::string trimmed = command_shard("b");
  v1::ShardResult cheat = WithOutcomes({passed(kB)});
  *cheat.add_file_edits() = LoaderEdit(
      loader, base,
      "def load(config):\n    config.num_hidden_layers = 2\n    return Model(config)\n", true);
  s.AddResult(trimmed, cheat);
  const std::string lowered = command_shard("d");
  v1::EntryOutcome pcc = passed(kD);
  auto* f = pcc.mutable_edit()->add_set();
  f->set_name("required_pcc");
  f->mutable_value()->set_float_value(0.9);
  s.AddResult(lowered, WithOutcomes({pcc}));
  const std::string honest = command_shard("c");
  v1::ShardResult fix = WithOutcomes({passed(kC)});
  *fix.add_file_edits() = LoaderEdit("c/pytorch/loader.py", base,
                                     "def load(config):\n    return Model(config).eval()\n", true);
  s.AddResult(honest, fix);

  auto m = Merge(s.Input());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->workarounds.size(), 2u);
  EXPECT_EQ(m->workarounds[0].shard, trimmed);
  EXPECT_EQ(m->workarounds[0].entries, std::vector<std::string>{kB});
  ASSERT_EQ(m->workarounds[0].found.size(), 1u);
  EXPECT_EQ(m->workarounds[0].found[0].guard, "layers_trimmed");
  EXPECT_EQ(m->workarounds[0].found[0].where, "tt_forge_models/b/pytorch/loader.py:2");
  EXPECT_EQ(m->workarounds[1].found[0].guard, "pcc_lowered");
  EXPECT_EQ(m->workarounds[1].found[0].what, "required_pcc 0.99 -> 0.9 (no measured PCC floor)");
  EXPECT_EQ(m->forge_patch.find("num_hidden_layers"), std::string::npos) << m->forge_patch;
  EXPECT_NE(m->forge_patch.find(".eval()"), std::string::npos) << m->forge_patch;
  for (const char* key : {kB, kD}) {
    const EntryMerge* e = FindEntry(*m, key);
    ASSERT_NE(e, nullptr) << key;
    EXPECT_EQ(e->placement, EntryMerge::Placement::kUnchanged) << key;
    EXPECT_NE(Joined(e->review).find("workaround "), std::string::npos) << Joined(e->review);
    EXPECT_NE(Joined(e->review).find("a reviewer decides"), std::string::npos) << key;
  }
  EXPECT_EQ(FindEntry(*m, kC)->placement, EntryMerge::Placement::kTopLevel);

  const BuiltReport report = ReportOf(s, *m, "", "command");
  const nlohmann::json j = nlohmann::json::parse(report.json);
  ASSERT_EQ(j["workarounds"].size(), 2u) << j["workarounds"].dump(2);
  EXPECT_EQ(j["workarounds"][0]["found"][0]["guard"], "layers_trimmed");
  EXPECT_NE(report.markdown.find("## Workarounds held for review"), std::string::npos);
  auto pr = BuildPrText(j, PrRepo::kTtXla);
  ASSERT_TRUE(pr.ok()) << pr.status();
  EXPECT_NE(pr->body.find("## Held for review: workarounds"), std::string::npos) << pr->body;
  EXPECT_NE(pr->body.find("layers_trimmed at `tt_forge_models/b/pytorch/loader.py:2`"),
            std::string::npos)
      << pr->body;
}

// A threshold at the farm's measured floor (the result's floors.json) is not a workaround: it
// lands; one below it is held and names the floor. A command result's provenance.json reaches
// report.json by shard, and its outcome names that shard.
TEST(Merge, AThresholdAtTheMeasuredFloorLandsAndProvenanceReachesTheReport) {
  Sweep s;
  s.archs = {"n150"};
  auto lowered = [&](const char* name, const std::string& key, double to, double floor) {
    const std::string id = s.AddShard(name, 1, "n150");
    s.shards.back().spec.set_executor("command");
    v1::EntryOutcome o = Outcome(key, "n150", PassEdit(key));
    o.set_command_check("verified by the farm");
    auto* f = o.mutable_edit()->add_set();
    f->set_name("required_pcc");
    f->mutable_value()->set_float_value(to);
    v1::ShardResult r = WithOutcomes({o});
    v1::Evidence* ev = r.add_evidence();
    ev->set_name("floors.json");
    ev->set_kind("pcc_floor");
    ev->set_content(
        nlohmann::json{{"floors", {{{"file", o.file()}, {"key", key}, {"pcc", floor}}}}}.dump());
    v1::Evidence* p = r.add_evidence();
    p->set_name("provenance.json");
    p->set_kind("provenance");
    p->set_content(nlohmann::json{{"hardware", {{"arch", "n150"}}}, {"shard", id}}.dump());
    s.AddResult(id, r);
    return id;
  };
  const std::string honest = lowered("b", kB, 0.96, 0.9639);
  const std::string cheat = lowered("d", kD, 0.9, 0.99998);
  auto m = Merge(s.Input());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->workarounds.size(), 1u);
  EXPECT_EQ(m->workarounds[0].shard, cheat);
  EXPECT_EQ(m->workarounds[0].found[0].what,
            "required_pcc 0.99 -> 0.9 (below the farm's measured CPU bfloat16 floor 0.99998)");
  EXPECT_EQ(FindEntry(*m, kB)->placement, EntryMerge::Placement::kTopLevel);
  EXPECT_EQ(FindEntry(*m, kD)->placement, EntryMerge::Placement::kUnchanged);

  const nlohmann::json j = nlohmann::json::parse(ReportOf(s, *m, "", "command").json);
  EXPECT_EQ(j["provenance"][honest]["shard"], honest) << j["provenance"].dump(2);
  EXPECT_EQ(j["provenance"][cheat]["hardware"]["arch"], "n150") << j["provenance"].dump(2);
  for (const auto& e : j["entries"]) {
    if (e["key"] == kB) EXPECT_EQ(e["verdicts"]["n150"]["shard"], honest) << e.dump(2);
  }
}

// A command sweep's report groups its entries by the fingerprint the command reported, else by
// the failure cluster of the reason they were selected with, and counts what the patch fixed.
TEST(Merge, TheRemediationClustersGroupByFingerprintElseByReasonCluster) {
  Sweep s;
  s.archs = {"n150"};
  v1::CommandSummary summary;
  summary.set_fingerprint("missing-handler");
  summary.set_layer("loader");
  summary.set_fix_kind("loader");
  for (const char* loader : {"b", "c", "d"}) {
    const std::string id = s.AddShard(loader, 1, "n150");
    coord::ShardRecord& shard = s.shards.back();
    shard.spec.set_executor("command");
    const std::string key = loader == std::string("b") ? kB : loader == std::string("c") ? kC : kD;
    v1::ShardEntry* se = shard.spec.add_entries();
    se->set_key(key);
    se->set_file(kYamlPath);
    se->set_cluster(util::StrCat("c-0000000", loader == std::string("d") ? "2" : "1"));
    v1::EntryOutcome o = loader == std::string("c")
                             ? Outcome(key, "n150", XfailEdit(key, "RuntimeError: x"), "failure")
                             : Outcome(key, "n150", PassEdit(key));
    o.set_command_check("verified by the farm");
    if (loader != std::string("d")) *o.mutable_summary() = summary;
    s.AddResult(id, WithOutcomes({o}));
  }
  auto m = Merge(s.Input());
  ASSERT_TRUE(m.ok()) << m.status();
  std::map<std::string, std::string> patched;
  ExpectPatchesApply(s.files, *m, &patched);
  const BuiltReport report =
      ReportOf(s, *m, patched[std::string("tt-xla/") + kYamlPath], "command");
  const nlohmann::json j = nlohmann::json::parse(report.json);
  ASSERT_EQ(j["remediation"].size(), 2u) << j["remediation"].dump(2);
  EXPECT_EQ(j["remediation"][0], nlohmann::json({{"id", "missing-handler"},
                                                 {"by", "fingerprint"},
                                                 {"size", 2},
                                                 {"fixed", 1},
                                                 {"failing", 1},
                                                 {"layers", {"loader"}},
                                                 {"fix_kinds", {"loader"}},
                                                 {"entries", {kB, kC}}}));
  EXPECT_EQ(j["remediation"][1]["id"], "c-00000002");
  EXPECT_EQ(j["remediation"][1]["by"], "reason");
  EXPECT_EQ(j["remediation"][1]["fixed"], 1);
  EXPECT_NE(report.markdown.find("| 2 | 1 | 1 | `missing-handler` | fingerprint | loader |"),
            std::string::npos)
      << report.markdown;
  // Another executor's report has no such section.
  EXPECT_FALSE(nlohmann::json::parse(ReportOf(s, *m).json).contains("remediation"));
}

TEST(Merge, CommandDiffsMergeLikeTheNativeResult) {
  MapFiles files = DefaultFiles();
  const std::string yaml = files.ttxla[kYamlPath];
  auto doc = inventory::Document::Parse(kYamlPath, yaml);
  inventory::EntryEdit pass{kB,
                            std::nullopt,
                            {{"status", inventory::Value::String("EXPECTED_PASSING")}},
                            {"bringup_status", "reason"}};
  auto yaml_after = inventory::ApplyEdits(doc, std::vector<inventory::EntryEdit>{pass});
  ASSERT_TRUE(yaml_after.ok()) << yaml_after.status();
  const std::string utils = files.forge[kUtilsPath];
  const std::string utils_after =
      Replace(utils, "_register_attr(\"MiniMgpstrOutput\", \"logits\")\n",
              "_register_attr(\"MiniCausalLMOutput\", \"logits\")\n"
              "_register_attr(\"MiniMgpstrOutput\", \"logits\")\n");
  const std::string loader = files.forge[kLoaderB];
  const std::string loader_after =
      Replace(loader, "torch.randn(1, 3, 8, 8)", "torch.randn(1, 3, 4, 4)");

  // outside: 0 none, 1 a YAML entry outside the shard, 2 also a loader outside the shard's.
  auto build = [&](bool command, int outside, std::vector<lift::LiftOutput>* lifted = nullptr) {
    Sweep s;
    s.files = files;
    for (const std::string arch : {"n150", "p150"}) {
      auto id = s.AddShard("b", 1, arch);
      v1::ShardResult r;
      if (command) {
        v1::EntryOutcome o = Outcome(kB, arch, std::nullopt);
        *r.add_entries() = o;
        std::string ttxla_diff = diff::UnifiedDiff(kYamlPath, yaml, *yaml_after);
        std::string forge_diff = diff::UnifiedDiff(kUtilsPath, utils, utils_after) +
                                 diff::UnifiedDiff(kLoaderB, loader, loader_after);
        if (outside >= 1) {
          inventory::EntryEdit other{
              kD, std::nullopt, {{"status", inventory::Value::String("NOT_SUPPORTED_SKIP")}}, {}};
          auto both = inventory::ApplyEdits(doc, std::vector<inventory::EntryEdit>{pass, other});
          EXPECT_TRUE(both.ok()) << both.status();
          ttxla_diff = diff::UnifiedDiff(kYamlPath, yaml, *both);
        }
        if (outside >= 2) {
          forge_diff += diff::UnifiedDiff(
              kLoaderA, files.forge[kLoaderA],
              Replace(files.forge[kLoaderA], "torch.randn(1, 3, 8, 8)", "torch.ones(1)"));
        }
        r.set_ttxla_diff(ttxla_diff);
        r.set_forge_diff(forge_diff);
        lift::LiftOutput out;
        r = LiftedOnTheAgent(s, id, r, &out);
        if (lifted != nullptr) lifted->push_back(out);
      } else {
        *r.add_entries() = Outcome(kB, arch, PassEdit(kB));
        *r.add_registry_ops() = registry::AddOp("MiniCausalLMOutput", "logits");
        *r.add_file_edits() = LoaderEdit(kLoaderB, loader, loader_after, /*against_pinned=*/true);
      }
      s.AddResult(id, r);
    }
    return s;
  };
  Sweep native = build(false, 0);
  auto n = Merge(native.Input());
  ASSERT_TRUE(n.ok()) << n.status();
  Sweep command = build(true, 0);
  auto c = Merge(command.Input());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(n->conflicts.empty()) << Joined(n->conflicts);
  EXPECT_TRUE(c->conflicts.empty()) << Joined(c->conflicts);
  EXPECT_FALSE(n->ttxla_patch.empty());
  EXPECT_NE(n->forge_patch.find("MiniCausalLMOutput"), std::string::npos);
  EXPECT_NE(n->forge_patch.find(kLoaderB), std::string::npos);
  EXPECT_EQ(c->ttxla_patch, n->ttxla_patch);
  EXPECT_EQ(c->forge_patch, n->forge_patch);
  EXPECT_EQ(FindEntry(*c, kB)->placement, EntryMerge::Placement::kTopLevel);
  ASSERT_EQ(c->registry.size(), 1u);
  EXPECT_EQ(c->registry[0].cls(), "MiniCausalLMOutput");
  ExpectPatchesApply(command.files, *c);

  // A change of an entry outside the shard is not lifted and is reported (a review flag on the
  // shard's outcomes); the rest is the same.
  Sweep outside = build(true, 1);
  auto o = Merge(outside.Input());
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->ttxla_patch, n->ttxla_patch);
  EXPECT_EQ(o->forge_patch, n->forge_patch);
  EXPECT_EQ(o->ttxla_patch.find(kD), std::string::npos);
  EXPECT_TRUE(o->conflicts.empty()) << Joined(o->conflicts);
  EXPECT_EQ(FindEntry(*o, kD), nullptr);
  const std::string notes = Joined(FindEntry(*o, kB)->review);
  EXPECT_NE(notes.find(util::StrCat("'", kD, "'")), std::string::npos) << notes;
  EXPECT_NE(notes.find("is outside the shard: not lifted"), std::string::npos) << notes;

  // A loader outside the shard's stays in the lifted result, and the coordinator's ownership
  // check rejects the result naming the file (as it rejects a native result editing it).
  std::vector<lift::LiftOutput> lifted;
  Sweep stray = build(true, 2, &lifted);
  ASSERT_EQ(lifted.size(), 2u);
  EXPECT_EQ(lifted[0].outside, (std::vector<std::string>{"tt_forge_models/a/pytorch/loader.py"}));
  for (const auto& rec : stray.results) {
    absl::Status owned = coord::CheckResultOwnership(ShardOf(stray, rec.shard_id).spec, rec.result);
    EXPECT_FALSE(owned.ok());
    EXPECT_NE(
        owned.message().find("tt_forge_models/a/pytorch/loader.py outside the shard's loader"),
        std::string::npos)
        << owned;
  }
}

// A command that writes its arch's result under arch_overrides.<arch> means the same as a
// native result for that arch: the change is lifted from the fields the arch sees, and the merge
// places it. A change to another arch's overrides is not lifted and is flagged for review.
TEST(Merge, CommandArchOverridesAreLiftedForTheShardsArch) {
  MapFiles files = DefaultFiles();
  const std::string yaml = files.ttxla[kYamlPath];
  auto doc = inventory::Document::Parse(kYamlPath, yaml);
  auto override_for = [&](const std::string& arch) {
    inventory::EntryEdit e{
        kB, arch, {{"status", inventory::Value::String("EXPECTED_PASSING")}}, {}};
    auto after = inventory::ApplyEdits(doc, std::vector<inventory::EntryEdit>{e});
    EXPECT_TRUE(after.ok()) << after.status();
    return after.ok() ? *after : yaml;
  };
  v1::EntryEdit status_only;
  status_only.set_file(kYamlPath);
  status_only.set_key(kB);
  auto* f = status_only.add_set();
  f->set_name("status");
  *f->mutable_value() = Str("EXPECTED_PASSING");

  // n150 passes (its command wrote arch_overrides.n150), p150 is unchanged.
  auto build = [&](bool command, const std::string& n150_yaml) {
    Sweep s;
    s.files = files;
    auto n = s.AddShard("b", 1, "n150");
    auto p = s.AddShard("b", 1, "p150");
    v1::ShardResult rn, rp;
    if (command) {
      *rn.add_entries() = Outcome(kB, "n150", std::nullopt);
      rn.set_ttxla_diff(diff::UnifiedDiff(kYamlPath, yaml, n150_yaml));
      rn = LiftedOnTheAgent(s, n, rn);
      *rp.add_entries() = Outcome(kB, "p150", std::nullopt);
    } else {
      *rn.add_entries() = Outcome(kB, "n150", status_only);
      *rp.add_entries() = Outcome(kB, "p150", std::nullopt);
    }
    s.AddResult(n, rn);
    s.AddResult(p, rp);
    return s;
  };
  Sweep native = build(false, "");
  auto want = Merge(native.Input());
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(FindEntry(*want, kB)->placement, EntryMerge::Placement::kPerArch);
  Sweep command = build(true, override_for("n150"));
  auto got = Merge(command.Input());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ttxla_patch, want->ttxla_patch);
  EXPECT_NE(got->ttxla_patch.find("arch_overrides"), std::string::npos) << got->ttxla_patch;
  EXPECT_EQ(FindEntry(*got, kB)->placement, EntryMerge::Placement::kPerArch);
  EXPECT_TRUE(FindEntry(*got, kB)->review.empty()) << Joined(FindEntry(*got, kB)->review);
  ExpectPatchesApply(command.files, *got);

  // The n150 shard's command changed p150's overrides: nothing to lift, flagged for review.
  Sweep wrong = build(true, override_for("p150"));
  auto w = Merge(wrong.Input());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->ttxla_patch, "");
  const std::string review = Joined(FindEntry(*w, kB)->review);
  EXPECT_NE(review.find("arch_overrides.p150 in a shard for n150: not lifted"), std::string::npos)
      << review;
}

// ---- g. property: order, duplicates and retried attempts change no byte

struct Realistic {
  Sweep s;
  std::vector<std::string> final_ids;  // shard of each result in s.results
};

// ~30 results: 4 loaders x 2 archs over 2 waves (plus probe phases), registry ops, loader edits.
Realistic BuildRealistic() {
  Realistic r;
  Sweep& s = r.s;
  const std::string a0 = s.files.forge[kLoaderA];
  const std::string a1 = Replace(a0, "torch.randn(1, 3, 8, 8)", "torch.randn(1, 3, 16, 16)");
  const std::string a2 = Replace(a1, "model.to(dtype_override)", "model.to(torch.float32)");
  const std::string b0 = s.files.forge[kLoaderB];
  const std::string b1 = Replace(b0, "torch.randn(1, 3, 8, 8)", "torch.randn(2, 3, 8, 8)");
  for (const std::string arch : {"n150", "p150"}) {
    // loader a: wave 1 xfail, wave 2 passes (with a chained loader edit).
    auto id = s.AddShard("a", 1, arch);
    v1::ShardResult r1 =
        WithOutcomes({Outcome(kV1, arch, XfailEdit(kV1, "TT_FATAL: first try"), "failure"),
                      Outcome(kV2, arch, PassEdit(kV2))});
    *r1.add_registry_ops() = registry::AddOp("MiniCausalLMOutput", "logits");
    *r1.add_file_edits() = LoaderEdit(kLoaderA, a0, a1);
    s.AddResult(id, r1);  // both archs propose the same loader edit: it lands once
    id = s.AddShard("a", 1, arch, v1::PHASE_VERIFY);
    s.AddResult(id, WithOutcomes({Outcome(kV2, arch, PassEdit(kV2))}));
    id = s.AddShard("a", 2, arch);
    v1::ShardResult r2 = WithOutcomes({Outcome(kV1, arch, PassEdit(kV1))});
    if (arch == "p150") *r2.add_file_edits() = LoaderEdit(kLoaderA, a1, a2);
    s.AddResult(id, r2);
    id = s.AddShard("a", 2, arch, v1::PHASE_VERIFY);
    s.AddResult(id, WithOutcomes({Outcome(kV1, arch, PassEdit(kV1))}));
    // loader b: per-arch outcomes, identical registry adds, a loader edit.
    id = s.AddShard("b", 1, arch);
    v1::ShardResult rb = WithOutcomes(
        {arch == "n150" ? Outcome(kB, arch, PassEdit(kB))
                        : Outcome(kB, arch, XfailEdit(kB, "TT_FATAL: p150 b"), "failure")});
    *rb.add_registry_ops() = registry::AddOp("MiniVitOutput", "logits");
    if (arch == "n150") *rb.add_file_edits() = LoaderEdit(kLoaderB, b0, b1);
    s.AddResult(id, rb);
    // loader c: a probe phase then verification; one wave-1 conflict on n150.
    id = s.AddShard("c", 1, "", v1::PHASE_PROBE);
    s.AddResult(id, WithOutcomes({Outcome(kC, "", std::nullopt, "ready")}));
    id = s.AddShard("c", 1, arch, v1::PHASE_VERIFY);
    s.AddResult(id, WithOutcomes({Outcome(kC, arch, XfailEdit(kC, "TT_FATAL: bf16"), "failure")}));
    if (arch == "n150") {
      id = s.AddShard("c", 1, arch, v1::PHASE_VERIFY);
      s.AddResult(id, WithOutcomes({Outcome(kC, arch, PassEdit(kC))}));
    }
    // loader d: passes already, unchanged; an escalation.
    id = s.AddShard("d", 1, arch);
    s.AddResult(id, WithOutcomes({Outcome(kD, arch, std::nullopt)}));
    id = s.AddShard("d", 2, arch);
    s.AddResult(id, WithOutcomes({Outcome(kD, arch, std::nullopt, "escalate")}));
    // A registry conflict between the archs.
    id = s.AddShard("b", 2, arch);
    v1::ShardResult rc = WithOutcomes({Outcome(kB, arch, std::nullopt, "no_fix")});
    *rc.add_registry_ops() =
        registry::AddOp("MiniSpeechOutput", arch == "n150" ? "logits" : "loss");
    s.AddResult(id, rc);
  }
  for (const auto& rec : s.results) r.final_ids.push_back(rec.shard_id);
  return r;
}

TEST(Merge, ResultOrderDuplicatesAndRetriesChangeNoByte) {
  Realistic base = BuildRealistic();
  ASSERT_GE(base.s.results.size(), 20u);
  auto baseline = Merge(base.s.Input());
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  // The baseline itself is meaningful: changes in both repos, and the planted conflicts.
  EXPECT_FALSE(baseline->ttxla_patch.empty());
  EXPECT_NE(baseline->forge_patch.find("MiniCausalLMOutput"), std::string::npos);
  EXPECT_NE(baseline->forge_patch.find(kLoaderA), std::string::npos);
  EXPECT_NE(baseline->forge_patch.find(kLoaderB), std::string::npos);
  EXPECT_EQ(baseline->conflict_counts["yaml"], 1) << Joined(baseline->conflicts);
  EXPECT_EQ(baseline->conflict_counts["registry"], 1) << Joined(baseline->conflicts);
  EXPECT_EQ(baseline->conflict_counts["loader"], 0) << Joined(baseline->conflicts);
  ExpectPatchesApply(base.s.files, *baseline);

  // A stale attempt: same shard, lower token, a different (wrong) result.
  auto stale = [](const coord::ResultRecord& r, std::int64_t token) {
    coord::ResultRecord x = r;
    x.token = token;
    x.lease_id = util::StrCat("stale-", token);
    x.result.clear_file_edits();
    x.result.clear_registry_ops();
    *x.result.add_registry_ops() = registry::AddOp("StaleOutput", "nope");
    for (auto& o : *x.result.mutable_entries()) {
      o.set_changed(true);
      *o.mutable_edit() = XfailEdit(o.key(), "TT_FATAL: stale attempt");
      o.set_verdict("failure");
    }
    return x;
  };
  for (int seed = 0; seed < 200; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    Sweep s = base.s;
    // Retries: the accepted attempts get new, higher tokens; older attempts stay around.
    std::vector<coord::ResultRecord> all;
    for (auto rec : s.results) {
      const int retries = static_cast<int>(rng() % 3);
      const std::int64_t final_token = 1000 + rec.token * 10;
      for (int k = 0; k < retries; ++k) all.push_back(stale(rec, final_token - 1 - k));
      rec.token = final_token;
      rec.lease_id = util::StrCat("final-", final_token);
      all.push_back(rec);
      if (rng() % 4 == 0) all.push_back(rec);  // delivered twice
    }
    // A result for a shard the sweep does not know.
    if (rng() % 2 == 0) {
      coord::ResultRecord ghost = stale(s.results[0], 99999);
      ghost.shard_id = "unknown-shard";
      all.push_back(ghost);
    }
    std::shuffle(all.begin(), all.end(), rng);
    s.results = all;
    // The shard list order must not matter either.
    std::shuffle(s.shards.begin(), s.shards.end(), rng);
    auto out = Merge(s.Input());
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->ttxla_patch, baseline->ttxla_patch);
    ASSERT_EQ(out->forge_patch, baseline->forge_patch);
    ASSERT_EQ(out->conflicts, baseline->conflicts);
    ASSERT_EQ(out->changed_files, baseline->changed_files);
  }
}

// ---- the report

// report.md's section of one entry (from its heading to the next).
std::string Section(const std::string& md, const std::string& key) {
  std::string heading = "### ";
  for (char c : key) {
    if (c == '_') heading.push_back('\\');
    heading.push_back(c);
  }
  heading += "\n";
  auto at = md.find(heading);
  EXPECT_NE(at, std::string::npos) << key << "\n" << md;
  if (at == std::string::npos) return "";
  auto next = md.find("\n### ", at + heading.size());
  return md.substr(at, next == std::string::npos ? std::string::npos : next + 1 - at);
}

TEST(Report, EachEntryShowsItsLoaderAndRegistryHunks) {
  Sweep s;
  s.archs = {"n150"};
  // A registry with lines far enough apart that two additions are two hunks.
  std::string utils = kUtils;
  utils = Replace(utils, "_register_attr(\"MiniSeq2SeqOutput\"", [] {
    std::string filler;
    for (int i = 0; i < 8; ++i)
      filler += util::StrCat("_register_attr(\"MiniP", i, "Output\", \"x\")\n");
    return filler + "_register_attr(\"MiniSeq2SeqOutput\"";
  }());
  s.files.forge[kUtilsPath] = utils;
  auto with_fix = [](v1::EntryOutcome o, const std::string& fix, const std::string& cls) {
    o.set_fix_path(fix);
    o.set_output_class(cls);
    return o;
  };
  // a: an override in its loader.
  const std::string a_after =
      Loader("a") +
      "\n    def unpack_forward_output(self, fwd_output):\n        return fwd_output[0]\n";
  v1::ShardResult ra =
      WithOutcomes({with_fix(Outcome(kV1, "n150", PassEdit(kV1)), "override", "AOut"),
                    with_fix(Outcome(kV2, "n150", PassEdit(kV2)), "override", "AOut")});
  *ra.add_file_edits() = LoaderEdit(kLoaderA, Loader("a"), a_after);
  s.AddResult(s.AddShard("a", 1, "n150"), ra);
  // b and c: registry lines at both ends of the registry.
  v1::ShardResult rb =
      WithOutcomes({with_fix(Outcome(kB, "n150", PassEdit(kB)), "registry", "AlphaOutput")});
  *rb.add_registry_ops() = registry::AddOp("AlphaOutput", "logits");
  s.AddResult(s.AddShard("b", 1, "n150"), rb);
  v1::ShardResult rc =
      WithOutcomes({with_fix(Outcome(kC, "n150", PassEdit(kC)), "registry", "ZetaOutput")});
  *rc.add_registry_ops() = registry::AddOp("ZetaOutput", "last_hidden_state");
  s.AddResult(s.AddShard("c", 1, "n150"), rc);
  auto merged = Merge(s.Input());
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_TRUE(merged->conflicts.empty()) << Joined(merged->conflicts);
  ExpectPatchesApply(s.files, *merged);

  const std::string md = ReportOf(s, *merged).markdown;

  const std::string a1 = Section(md, kV1);
  EXPECT_NE(a1.find("- **loader diff** `a/pytorch/loader.py`\n\n```diff\n@@ "), std::string::npos)
      << a1;
  EXPECT_NE(a1.find("+    def unpack_forward_output(self, fwd_output):\n"
                    "+        return fwd_output[0]\n"),
            std::string::npos)
      << a1;
  EXPECT_EQ(a1.find("registry diff"), std::string::npos) << "an override: " << a1;
  EXPECT_NE(Section(md, kV2).find("+        return fwd_output[0]\n"), std::string::npos)
      << "every entry of the loader shows it";

  const std::string b = Section(md, kB);
  EXPECT_EQ(b.find("loader diff"), std::string::npos) << "b's loader did not change: " << b;
  EXPECT_NE(b.find("- **registry diff** `training_utils.py`\n\n```diff\n@@ "), std::string::npos)
      << b;
  EXPECT_NE(b.find("+_register_attr(\"AlphaOutput\", \"logits\")\n"), std::string::npos) << b;
  EXPECT_NE(b.find(" _register_attr(\"MiniBaseModelOutput\""), std::string::npos)
      << "with its context: " << b;
  EXPECT_EQ(b.find("ZetaOutput"), std::string::npos) << "only the hunk with b's class: " << b;

  const std::string c = Section(md, kC);
  EXPECT_NE(c.find("+_register_attr(\"ZetaOutput\", \"last_hidden_state\")\n"), std::string::npos)
      << c;
  EXPECT_EQ(c.find("AlphaOutput"), std::string::npos) << c;
}

// The loss target of unpack_forward_output: its family, whether a rule decided, and the
// alternatives with their shapes, in report.md and report.json.
TEST(Report, LossTargetShowsTheAlternatives) {
  Sweep s;
  s.archs = {"n150"};
  auto with_target = [](v1::EntryOutcome o, const std::string& family, const std::string& chosen,
                        bool by_rule, std::vector<std::pair<std::string, std::string>> others) {
    o.set_fix_path("override");
    auto* t = o.mutable_loss_target();
    t->set_family(family);
    t->set_chosen(chosen);
    t->set_reason("why");
    t->set_by_rule(by_rule);
    for (const auto& [name, shape] : others) {
      auto* c = t->add_not_chosen();
      c->set_name(name);
      c->set_shape(shape);
    }
    return o;
  };
  v1::EntryOutcome flagged =
      with_target(Outcome(kB, "n150", PassEdit(kB)), "unknown", "forward_output[0]", false,
                  {{"[1]", "(2, 5)"}, {"[2]", "tuple of 2 tensors (2, 8)"}});
  flagged.add_review("ambiguous loss target: no family rule decided (family unknown)");
  s.AddResult(s.AddShard("b", 1, "n150"), WithOutcomes({flagged}));
  s.AddResult(s.AddShard("c", 1, "n150"),
              WithOutcomes({with_target(Outcome(kC, "n150", PassEdit(kC)), "question_answering",
                                        "torch.stack((forward_output.start_logits, "
                                        "forward_output.end_logits), dim=-1)",
                                        true, {})}));
  auto merged = Merge(s.Input());
  ASSERT_TRUE(merged.ok()) << merged.status();
  const BuiltReport report = ReportOf(s, *merged);

  const std::string b = Section(report.markdown, kB);
  EXPECT_NE(b.find("- **loss target** unknown, minimal candidate, for review: "
                   "`forward_output[0]`; not chosen: `[1]` (2, 5); `[2]` tuple of 2 tensors "
                   "(2, 8)\n"),
            std::string::npos)
      << b;
  EXPECT_NE(b.find("- **review** ambiguous loss target"), std::string::npos) << b;
  const std::string c = Section(report.markdown, kC);
  EXPECT_NE(c.find("- **loss target** question\\_answering, by a family rule: "
                   "`torch.stack((forward_output.start_logits, forward_output.end_logits), "
                   "dim=-1)`\n"),
            std::string::npos)
      << c;

  const nlohmann::json j = nlohmann::json::parse(report.json);
  bool seen = false;
  for (const auto& e : j["entries"]) {
    if (e["key"] != kB) continue;
    seen = true;
    EXPECT_EQ(e["loss_target"]["by_rule"], false);
    EXPECT_EQ(e["loss_target"]["not_chosen"][0],
              nlohmann::json({{"name", "[1]"}, {"shape", "(2, 5)"}}));
  }
  EXPECT_TRUE(seen) << report.json;
}

// Failure clusters (docs/report.md): what the patch leaves failing, grouped by the signature of
// the reason across entries and archs, largest first; passing outcomes are in none.
TEST(Report, FailureClustersGroupRemainingFailuresBySignature) {
  Sweep s;
  s.archs = {"n150", "p150"};
  const std::string oom_a = "Out of Memory: Not enough space to allocate 1048576 B DRAM buffer";
  const std::string oom_b = "Out of Memory: Not enough space to allocate 2097152 B DRAM buffer";
  s.AddResult(s.AddShard("a", 1, "n150"),
              WithOutcomes({Outcome(kV1, "n150", XfailEdit(kV1, oom_a), "failure"),
                            Outcome(kV2, "n150", XfailEdit(kV2, oom_b), "failure")}));
  s.AddResult(s.AddShard("a", 1, "p150"),
              WithOutcomes({Outcome(kV1, "p150", XfailEdit(kV1, oom_a), "failure"),
                            Outcome(kV2, "p150", PassEdit(kV2))}));
  s.AddResult(s.AddShard("b", 1, "n150"),
              WithOutcomes({Outcome(kB, "n150", XfailEdit(kB, "error: 'ttir.gather' op failed"),
                                    "failure")}));
  s.AddResult(s.AddShard("b", 1, "p150"),
              WithOutcomes({Outcome(kB, "p150", XfailEdit(kB, "error: 'ttir.gather' op failed"),
                                    "failure")}));
  s.AddResult(s.AddShard("c", 1, "n150"), WithOutcomes({Outcome(kC, "n150", PassEdit(kC))}));
  s.AddResult(s.AddShard("c", 1, "p150"), WithOutcomes({Outcome(kC, "p150", PassEdit(kC))}));
  auto merged = Merge(s.Input());
  ASSERT_TRUE(merged.ok()) << merged.status();
  std::map<std::string, std::string> patched;
  ExpectPatchesApply(s.files, *merged, &patched);
  const BuiltReport report = ReportOf(s, *merged, patched[std::string("tt-xla/") + kYamlPath]);
  const nlohmann::json j = nlohmann::json::parse(report.json);
  ASSERT_EQ(j["clusters"].size(), 2u) << j["clusters"].dump(2);
  const auto& oom = j["clusters"][0];
  EXPECT_EQ(oom["signature"], "Out of Memory: Not enough space to allocate N B DRAM buffer");
  EXPECT_EQ(oom["size"], 2);
  EXPECT_EQ(oom["example"], oom_a);
  EXPECT_EQ(oom["entries"][0], nlohmann::json({{"key", kV1}, {"archs", {"n150", "p150"}}}));
  EXPECT_EQ(oom["entries"][1], nlohmann::json({{"key", kV2}, {"archs", {"n150"}}}));
  EXPECT_EQ(j["clusters"][1]["size"], 1);
  EXPECT_EQ(j["clusters"][1]["entries"][0]["key"], kB);
  EXPECT_NE(report.markdown.find("## Failure clusters"), std::string::npos);
  // The cluster's id names it from one sweep to the next (sweep patch --issue-links).
  const std::string id = ClusterId("Out of Memory: Not enough space to allocate N B DRAM buffer");
  EXPECT_EQ(oom["id"], id);
  EXPECT_EQ(id.size(), 10u);
  EXPECT_NE(report.markdown.find("| 2 | `" + id +
                                 "` | Out of Memory: Not enough space to allocate N B DRAM "
                                 "buffer | `" +
                                 std::string(kV1) + "`, `" + std::string(kV2) + "` (n150) |\n"),
            std::string::npos)
      << report.markdown;
}

// A chained entry (docs/playbooks.md, "Chaining"): report.json lists every playbook that ran on
// it, report.md shows the chain, and a registry step of the chain shows its registry hunks.
TEST(Report, AChainedEntryShowsEveryPlaybookAndEachFix) {
  Sweep s;
  s.archs = {"n150"};
  // b: the dtype fix in its loader, then a registry line for its output class.
  const std::string b_after = Replace(Loader("b"), "torch.randn(1, 3, 8, 8)",
                                      "torch.randn(1, 3, 8, 8, dtype=dtype_override)");
  v1::EntryOutcome ob = Outcome(kB, "n150", PassEdit(kB));
  ob.set_flavor("cross_dtype");
  ob.set_fix_path("loader_dtype+registry");
  ob.set_output_class("ZetaOutput");
  ob.add_playbooks("dtype_bfloat16");
  ob.add_playbooks("unpack_forward_output");
  v1::ShardResult rb = WithOutcomes({ob});
  *rb.add_file_edits() = LoaderEdit(kLoaderB, Loader("b"), b_after);
  *rb.add_registry_ops() = registry::AddOp("ZetaOutput", "logits");
  const std::string b_shard = s.AddShard("b", 1, "n150");
  s.shards.back().spec.set_playbook("dtype_bfloat16");
  s.AddResult(b_shard, rb);
  // a: one playbook, recorded before outcomes listed theirs.
  s.AddResult(s.AddShard("a", 1, "n150"), WithOutcomes({Outcome(kV1, "n150", PassEdit(kV1))}));
  auto merged = Merge(s.Input());
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_TRUE(merged->conflicts.empty()) << Joined(merged->conflicts);
  ExpectPatchesApply(s.files, *merged);

  const BuiltReport report = ReportOf(s, *merged);
  const nlohmann::json j = nlohmann::json::parse(report.json);
  std::map<std::string, nlohmann::json> entries;
  for (const auto& e : j["entries"]) entries[e["key"]] = e;
  EXPECT_EQ(entries[kB]["playbook"], "dtype_bfloat16");
  EXPECT_EQ(entries[kB]["playbooks"],
            nlohmann::json::array({"dtype_bfloat16", "unpack_forward_output"}));
  EXPECT_EQ(entries[kB]["fix_path"], "loader_dtype+registry");
  EXPECT_EQ(entries[kV1]["playbooks"], nlohmann::json::array({"unpack"}));

  const std::string b = Section(report.markdown, kB);
  EXPECT_NE(b.find("- **chain** dtype_bfloat16 → unpack_forward_output\n"), std::string::npos) << b;
  EXPECT_NE(b.find("- **fix** loader_dtype+registry"), std::string::npos) << b;
  EXPECT_NE(b.find("+        inputs = torch.randn(1, 3, 8, 8, dtype=dtype_override)\n"),
            std::string::npos)
      << b;
  EXPECT_NE(b.find("+_register_attr(\"ZetaOutput\", \"logits\")\n"), std::string::npos) << b;
  EXPECT_EQ(Section(report.markdown, kV1).find("**chain**"), std::string::npos)
      << "one playbook: no chain line";
}

// Each entry's pytest node id (the planner's) and the time its deciding outcome measured per arch;
// an arch that measured nothing (a run that left no testcase) is left out.
TEST(Report, EntriesCarryTheirNodeIdAndMeasuredDurations) {
  Sweep s;
  s.archs = {"n150", "p150"};
  auto timed = [](v1::EntryOutcome o, double seconds) {
    o.set_duration_seconds(seconds);
    return o;
  };
  const std::string a_n150 = s.AddShard("a", 1, "n150");
  s.AddResult(a_n150, WithOutcomes({timed(Outcome(kV1, "n150", PassEdit(kV1)), 99),
                                    timed(Outcome(kV2, "n150", PassEdit(kV2)), 0)}));
  // A later wave decides V1 on n150: its time is the one reported.
  s.AddResult(s.AddShard("a", 2, "n150"),
              WithOutcomes({timed(Outcome(kV1, "n150", PassEdit(kV1)), 12.3456)}));
  s.AddResult(s.AddShard("a", 1, "p150"),
              WithOutcomes({timed(Outcome(kV1, "p150", PassEdit(kV1)), 7.5),
                            timed(Outcome(kV2, "p150", PassEdit(kV2)), 0.25)}));
  auto merged = Merge(s.Input());
  ASSERT_TRUE(merged.ok()) << merged.status();
  const nlohmann::json j = nlohmann::json::parse(ReportOf(s, *merged).json);
  std::map<std::string, nlohmann::json> entries;
  for (const auto& e : j["entries"]) entries[e["key"]] = e;
  ASSERT_TRUE(entries.count(kV1) && entries.count(kV2)) << j.dump(2);
  EXPECT_EQ(entries[kV1]["durations"], nlohmann::json({{"n150", 12.346}, {"p150", 7.5}}));
  EXPECT_EQ(entries[kV2]["durations"], nlohmann::json({{"p150", 0.25}}))
      << "n150 measured nothing for V2";

  const inventory::Document doc = inventory::Document::Parse(kYamlPath, TrainingYaml());
  ASSERT_NE(doc.Find(kV1), nullptr);
  EXPECT_EQ(entries[kV1]["node_id"], coord::NodeId(doc, *doc.Find(kV1)));
  EXPECT_EQ(entries[kV1]["node_id"],
            "tests/runner/test_models.py::test_all_models_torch[" + std::string(kV1) + "]");
  EXPECT_EQ(coord::NodeId("tests/runner/test_config/jax/test_config_inference_single_device.yaml",
                          "m/jax-single_device-inference"),
            "tests/runner/test_models.py::test_all_models_jax[m/jax-single_device-inference]")
      << "the framework comes from where the file sits, as the planner reads it";
}

// A sweep's makespan from its records (docs/report.md, "Makespan"): per lane, the planned
// seconds of its shards and what their taken results ran, over the agents that worked in it.
TEST(Makespan, LanesSumTheirShardsAndDivideByTheirAgents) {
  const TimePoint t0 = TimePoint(std::chrono::seconds(1'700'000'000));
  coord::SweepRecord sweep;
  sweep.id = "sw-1";
  sweep.created_at = t0;
  Sweep s;
  std::vector<coord::AttemptRecord> attempts;
  // A result of shard_id by agent: accepted `at` seconds after the sweep's creation, after
  // running `ran` seconds.
  auto result = [&](const std::string& shard_id, const std::string& agent, double at, double ran) {
    v1::ShardResult r;
    r.set_duration_seconds(ran);
    coord::ResultRecord& rec = s.AddResult(shard_id, r);
    rec.accepted_at = t0 + std::chrono::seconds(static_cast<int>(at));
    if (!agent.empty()) {
      coord::AttemptRecord a;
      a.shard_id = shard_id;
      a.lease_id = rec.lease_id;
      a.agent_id = agent;
      attempts.push_back(a);
    }
  };
  auto shard = [&](const std::string& loader, const std::string& arch, double expected,
                   v1::ShardPhase phase) {
    const std::string id = s.AddShard(loader, 1, arch, phase);
    s.shards.back().expected_seconds = expected;
    auto* e = s.shards.back().spec.add_entries();  // the loader's one entry, in every phase
    e->set_file("test_config/single_device.yaml");
    e->set_key(loader + "/pytorch-single_device-training");
    return id;
  };
  const std::string pa = shard("a", "", 120, v1::PHASE_PROBE);
  const std::string pb = shard("b", "", 80, v1::PHASE_PROBE);
  const std::string na = shard("a", "n150", 600, v1::PHASE_VERIFY);
  const std::string nb = shard("b", "n150", 400, v1::PHASE_VERIFY);
  const std::string nc = shard("c", "n150", 300, v1::PHASE_VERIFY);  // never ran
  const std::string qa = shard("a", "p150", 500, v1::PHASE_VERIFY);
  result(pa, "cpu-1", 50, 50);
  result(pb, "cpu-1", 90, 40);
  result(na, "n-1", 400, 350);
  result(nb, "n-2", 380, 300);
  // p150's shard ran twice (a requeue after its first result): the latest result counts.
  result(qa, "p-1", 300, 250);
  result(qa, "p-2", 900, 200);
  // An n150 result whose attempt the store lost counts its time, but no agent.
  const std::string nd = shard("d", "n150", 100, v1::PHASE_VERIFY);
  result(nd, "", 1000, 10);

  const Makespan m = ComputeMakespan(sweep, s.shards, s.results, attempts);
  ASSERT_EQ(m.lanes.size(), 3u);
  const LaneMakespan& cpu = m.lanes[0];
  EXPECT_EQ(cpu.lane, "cpu");
  EXPECT_EQ(cpu.shards, 2);
  EXPECT_EQ(cpu.agents, 1);
  EXPECT_DOUBLE_EQ(cpu.predicted_device_seconds, 200);
  EXPECT_DOUBLE_EQ(cpu.actual_device_seconds, 90);
  EXPECT_DOUBLE_EQ(cpu.predicted_seconds, 200);
  EXPECT_DOUBLE_EQ(cpu.actual_seconds, 90) << "from the creation (its first start) to 90";
  const LaneMakespan& n150 = m.lanes[1];
  EXPECT_EQ(n150.lane, "n150");
  EXPECT_EQ(n150.shards, 4);
  EXPECT_EQ(n150.agents, 2);
  EXPECT_DOUBLE_EQ(n150.predicted_device_seconds, 1400);
  EXPECT_DOUBLE_EQ(n150.actual_device_seconds, 660);
  EXPECT_DOUBLE_EQ(n150.predicted_seconds, 700);
  EXPECT_DOUBLE_EQ(n150.actual_seconds, 1000 - 50) << "nb started at 80, na at 50";
  const LaneMakespan& p150 = m.lanes[2];
  EXPECT_EQ(p150.agents, 1) << "the agent of the latest result only";
  EXPECT_DOUBLE_EQ(p150.actual_device_seconds, 200);
  EXPECT_DOUBLE_EQ(p150.actual_seconds, 200);
  EXPECT_DOUBLE_EQ(p150.predicted_seconds, 500);
  EXPECT_DOUBLE_EQ(m.predicted_seconds, 700) << "the slowest lane";
  EXPECT_DOUBLE_EQ(m.actual_seconds, 1000);
  // What it rests on: distinct entries, estimated when any of their shards planned them so.
  const int entries = m.entries_recorded + m.entries_estimated;
  EXPECT_EQ(entries, 4) << "the entries of loaders a, b, c and d";
  EXPECT_EQ(m.Basis(), "durations");
  for (auto& sh : s.shards) {
    if (sh.spec.loader().ends_with("/a/pytorch/loader.py") && sh.spec.phase() == v1::PHASE_VERIFY) {
      for (auto& e : *sh.spec.mutable_entries()) e.set_estimated(true);
    }
  }
  const Makespan mixed = ComputeMakespan(sweep, s.shards, s.results, attempts);
  EXPECT_EQ(mixed.entries_estimated, 1) << "a's entry, whichever of its shards says so";
  EXPECT_EQ(mixed.entries_recorded, 3);
  EXPECT_EQ(mixed.Basis(), "mixed");

  EXPECT_EQ(n150.backups, 0);

  // Backup leases (docs/farm.md, "Backup leases"): counted per lane from the attempt rows, with
  // the seconds each ended one ran; one still running counts, but no seconds yet.
  auto backup = [&](const std::string& shard_id, const std::string& outcome, int ran) {
    coord::AttemptRecord a;
    a.shard_id = shard_id;
    a.lease_id = shard_id + "-backup";
    a.agent_id = "n-3";
    a.backup = true;
    a.granted_at = t0 + std::chrono::seconds(100);
    a.ended_at = a.granted_at + std::chrono::seconds(ran);
    a.outcome = outcome;
    attempts.push_back(a);
  };
  backup(na, "succeeded", 300);
  backup(nb, "superseded", 120);
  backup(nc, "", 0);
  const Makespan with_backups = ComputeMakespan(sweep, s.shards, s.results, attempts);
  EXPECT_EQ(with_backups.lanes[1].backups, 3);
  EXPECT_EQ(with_backups.lanes[1].backups_won, 1);
  EXPECT_DOUBLE_EQ(with_backups.lanes[1].backup_device_seconds, 420);
  EXPECT_EQ(with_backups.lanes[0].backups, 0);
  attempts.resize(attempts.size() - 3);

  // A result said to have run longer than the sweep existed starts at the sweep's creation.
  s.results.back().result.set_duration_seconds(5000);
  EXPECT_DOUBLE_EQ(ComputeMakespan(sweep, s.shards, s.results, attempts).lanes[1].actual_seconds,
                   1000);
  // Nothing ran: the predictions stand, every actual figure is 0.
  const Makespan none = ComputeMakespan(sweep, s.shards, {}, {});
  EXPECT_DOUBLE_EQ(none.predicted_seconds, 1400);
  EXPECT_DOUBLE_EQ(none.actual_seconds, 0);
  for (const auto& l : none.lanes) {
    EXPECT_EQ(l.agents, 1) << l.lane;
    EXPECT_DOUBLE_EQ(l.actual_seconds, 0) << l.lane;
  }
}

// report.json's "makespan" and report.md's table, after the totals.
TEST(Report, MakespanIsReportedPerLaneAfterTheTotals) {
  Sweep s;
  s.archs = {"n150"};
  s.AddResult(s.AddShard("a", 1, "n150"), WithOutcomes({Outcome(kV1, "n150", PassEdit(kV1))}));
  auto merged = Merge(s.Input());
  ASSERT_TRUE(merged.ok()) << merged.status();
  coord::SweepRecord sweep;
  sweep.id = "sw-1";
  sweep.archs = s.archs;
  ReportInput in;
  in.sweep = &sweep;
  in.merge = &*merged;
  in.makespan.predicted_seconds = 1800;
  in.makespan.actual_seconds = 2045.6789;
  in.makespan.lanes = {{"cpu", 2, 1, 200, 90, 200, 90},
                       {"n150", 3, 2, 3600, 3000.0004, 1800, 2045.6789, 2, 1, 900.04}};
  in.makespan.entries_estimated = 3;
  const BuiltReport report = BuildReport(in);
  const nlohmann::json j = nlohmann::json::parse(report.json);
  EXPECT_EQ(j["makespan"]["predicted_seconds"], 1800);
  EXPECT_EQ(j["makespan"]["actual_seconds"], 2045.679);
  EXPECT_EQ(j["makespan"]["predicted_from"], "estimates");
  EXPECT_EQ(j["makespan"]["entries_estimated"], 3);
  ASSERT_EQ(j["makespan"]["lanes"].size(), 2u);
  EXPECT_EQ(j["makespan"]["lanes"][1], nlohmann::json({{"lane", "n150"},
                                                       {"shards", 3},
                                                       {"agents", 2},
                                                       {"predicted_device_seconds", 3600},
                                                       {"actual_device_seconds", 3000},
                                                       {"predicted_seconds", 1800},
                                                       {"actual_seconds", 2045.679},
                                                       {"backups", 2},
                                                       {"backups_won", 1},
                                                       {"backup_device_seconds", 900.04}}));
  const std::string& md = report.markdown;
  const auto totals = md.find("## Totals");
  const auto makespan = md.find("## Makespan: predicted vs actual");
  const auto entries = md.find("## Entries");
  ASSERT_NE(makespan, std::string::npos) << md;
  EXPECT_LT(totals, makespan);
  EXPECT_LT(makespan, entries);
  EXPECT_NE(md.find("Predicted 30m00s (the slowest lane; **estimates only**: none of the 3 entries "
                    "had a trusted recorded duration"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("), actual 34m06s"), std::string::npos) << md;
  EXPECT_NE(md.find("| cpu | 2 | 1 | 3m20s | 1m30s | 3m20s | 1m30s |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| n150 | 3 | 2 | 1h00m | 50m00s | 30m00s | 34m06s |\n"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| lane | backups | won | device time they ran |\n|---|---|---|---|\n"
                    "| n150 | 2 | 1 | 15m00s |\n"),
            std::string::npos)
      << md;
  in.makespan.lanes[1].backups = 0;
  EXPECT_EQ(BuildReport(in).markdown.find("Backup leases"), std::string::npos)
      << "no backups, no table";

  // Without figures (no shard planned) report.md has no such section.
  in.makespan = {};
  EXPECT_EQ(BuildReport(in).markdown.find("## Makespan"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(BuildReport(in).json)["makespan"]["lanes"],
            nlohmann::json::array());
}

TEST(Report, EvidenceLabelsNameTheArchAndTheWave) {
  EXPECT_EQ(EvidenceLabel({"evidence/w1-verify-n150-u-a/junit/01-verify.xml", "n150", 1}),
            "n150: 01-verify.xml");
  EXPECT_EQ(EvidenceLabel({"evidence/w1-verify-p150-u-a/junit/01-verify.xml", "p150", 1}),
            "p150: 01-verify.xml");
  EXPECT_EQ(EvidenceLabel({"evidence/w2-verify-p150-u-a/junit/01-verify.xml", "p150", 2}),
            "p150 wave 2: 01-verify.xml");
  EXPECT_EQ(EvidenceLabel({"evidence/w1-probe-cpu-u-a/probes/a.structure.0.json", "", 1}),
            "cpu: a.structure.0.json");
}

// The outputs of a sweep run by a real coordinator over a real (in-memory) store, built by its
// finish hook as in triage-coordinator.
class OutputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = coord::SqliteStore::Open(":memory:");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    coord_ = std::make_unique<coord::Coordinator>(
        coord::CoordinatorOptions{}, store_.get(), &clock_,
        [](const v1::StartSweepRequest& req) -> absl::StatusOr<coord::SweepInput> {
          coord::SweepInput in;
          in.repo = req.repo_path();
          in.ttxla_commit = std::string(40, 'a');
          in.forge_commit = std::string(40, 'b');
          in.inventory.documents.push_back(inventory::Document::Parse(kYamlPath, TrainingYaml()));
          return in;
        });
    outputs_ = std::make_unique<SweepOutputs>(
        coord_.get(), &metrics_, tmp_.path(),
        [](const coord::SweepRecord&) { return std::make_unique<MapFiles>(DefaultFiles()); });
    coord_->SetFinishHook([this](const std::string& id) { return outputs_->Build(id); });
  }

  void Register(const std::string& id, const std::string& arch) {
    v1::RegisterRequest req;
    req.mutable_dimensions()->set_agent_id(id);
    req.mutable_dimensions()->set_arch(arch);
    auto resp = coord_->Register(req);
    ASSERT_TRUE(resp.ok()) << resp.status();
    sessions_[id] = resp->session_id();
  }

  std::string Start(const std::vector<std::string>& archs,
                    const std::string& repo = "/fake/tt-xla") {
    v1::StartSweepRequest req;
    req.set_repo_path(repo);
    for (const auto& a : archs) req.add_archs(a);
    req.add_playbooks("unpack_forward_output");
    req.set_reason("test");
    auto sweep = coord_->StartSweep(req, coord::Caller{"alice", "operator"});
    EXPECT_TRUE(sweep.ok()) << sweep.status();
    return sweep.ok() ? sweep->id() : "";
  }

  // Every shard the agents get passes (but the entries failing names, which fail with the given
  // reason), with a JUnit file of the same name on every arch.
  void RunAll(const std::vector<std::string>& agents,
              const std::map<std::string, std::string>& failing = {}) {
    for (bool granted = true; granted;) {
      granted = false;
      for (const auto& agent : agents) {
        v1::LeaseRequest req;
        req.set_agent_id(agent);
        req.set_session_id(sessions_[agent]);
        absl::StatusOr<v1::LeaseResponse> lease = absl::UnknownError("not answered");
        coord_->Lease(req, [&](absl::StatusOr<v1::LeaseResponse> r) { lease = std::move(r); });
        ASSERT_TRUE(lease.ok()) << lease.status();
        if (!lease->granted()) continue;
        granted = true;
        const v1::ShardSpec& spec = lease->shard();
        v1::ShardResult r;
        r.set_status(v1::ShardResult::SUCCEEDED);
        for (const auto& e : spec.entries()) {
          auto fails = failing.find(e.key());
          v1::EntryOutcome o =
              fails == failing.end()
                  ? Outcome(e.key(), spec.arch(), PassEdit(e.key()))
                  : Outcome(e.key(), spec.arch(), XfailEdit(e.key(), fails->second), "failure");
          o.add_evidence("junit/01-verify.xml");
          *r.add_entries() = o;
        }
        auto* ev = r.add_evidence();
        ev->set_name("junit/01-verify.xml");
        ev->set_kind("junit");
        ev->set_content("<testsuite name=\"" + spec.arch() + "\"/>");
        // Each shard runs run_seconds_ between its lease and its result.
        clock_.Advance(std::chrono::milliseconds(static_cast<int>(run_seconds_ * 1000)));
        r.set_duration_seconds(run_seconds_);
        v1::CompleteRequest done;
        done.set_agent_id(agent);
        done.set_session_id(sessions_[agent]);
        done.set_lease_id(lease->lease_id());
        done.set_fencing_token(lease->fencing_token());
        *done.mutable_result() = r;
        auto resp = coord_->Complete(done);
        ASSERT_TRUE(resp.ok()) << resp.status();
        ASSERT_TRUE(resp->accepted());
      }
    }
  }

  // What the outputs export: each finished sweep's failure clusters.
  struct ClusterMetrics : coord::CoordinatorMetrics {
    void FailureClusters(const std::vector<coord::ClusterSize>& clusters) override {
      calls.push_back(clusters);
    }
    std::vector<std::vector<coord::ClusterSize>> calls;
  };

  testing::TempDir tmp_;
  FakeClock clock_;
  ClusterMetrics metrics_;
  std::unique_ptr<coord::SqliteStore> store_;
  std::unique_ptr<coord::Coordinator> coord_;
  std::unique_ptr<SweepOutputs> outputs_;
  std::map<std::string, std::string> sessions_;
  double run_seconds_ = 0;
};

TEST_F(OutputsTest, ReportOfAFinishedSweepCarriesItsFinalState) {
  Register("n", "n150");
  const std::string id = Start({"n150"});
  RunAll({"n"});
  ASSERT_EQ(coord_->GetSweep(id)->state(), "succeeded");
  const auto dir = tmp_.path() / "sweeps" / id;
  const std::string md_built = testing::ReadFileOrDie(dir / "report.md");
  auto json_built = nlohmann::json::parse(testing::ReadFileOrDie(dir / "report.json"));
  auto report = outputs_->Report(id);
  ASSERT_TRUE(report.ok()) << report.status();
  const auto j = nlohmann::json::parse(report->json(), nullptr, false);
  ASSERT_TRUE(j.is_object()) << report->json();
  EXPECT_EQ(j.value("state", ""), "succeeded");
  EXPECT_TRUE(report->markdown().starts_with("# Sweep " + id + " — succeeded\n"))
      << report->markdown().substr(0, 200);
  EXPECT_EQ(j["entries"].size(), 3u);
  // Nothing but the state differs from what the merge built, and the kept files say so too.
  json_built["state"] = "succeeded";
  EXPECT_EQ(j, json_built);
  EXPECT_EQ(report->markdown().substr(report->markdown().find('\n')),
            md_built.substr(md_built.find('\n')));
  EXPECT_EQ(testing::ReadFileOrDie(dir / "report.json"), report->json());
  EXPECT_EQ(testing::ReadFileOrDie(dir / "report.md"), report->markdown());
}

// The makespan of a finished sweep: the agents of its results come from the store's attempts,
// the times from the coordinator's clock and the results.
TEST_F(OutputsTest, MakespanCountsTheAgentsThatRanTheLane) {
  Register("n1", "n150");
  Register("n2", "n150");
  const std::string id = Start({"n150"});
  run_seconds_ = 100;
  RunAll({"n1", "n2"});
  ASSERT_EQ(coord_->GetSweep(id)->state(), "succeeded");
  auto shards = coord_->Shards(id);
  ASSERT_TRUE(shards.ok()) << shards.status();
  ASSERT_EQ(shards->size(), 2u) << "one shard per loader (a, b)";
  double expected = 0;
  for (const auto& sh : *shards) expected += sh.expected_seconds;
  ASSERT_GT(expected, 0);
  auto report = outputs_->Report(id);
  ASSERT_TRUE(report.ok()) << report.status();
  const auto j = nlohmann::json::parse(report->json(), nullptr, false);
  ASSERT_TRUE(j.is_object()) << report->json();
  const auto& m = j["makespan"];
  ASSERT_EQ(m["lanes"].size(), 1u) << m.dump(2);
  const auto& lane = m["lanes"][0];
  EXPECT_EQ(lane["lane"], "n150");
  EXPECT_EQ(lane["shards"], 2);
  EXPECT_EQ(lane["agents"], 2) << "n1 and n2 each ran one shard";
  EXPECT_DOUBLE_EQ(lane["predicted_device_seconds"].get<double>(), expected);
  EXPECT_DOUBLE_EQ(lane["predicted_seconds"].get<double>(), expected / 2);
  EXPECT_DOUBLE_EQ(lane["actual_device_seconds"].get<double>(), 200);
  // One after the other on this clock: from the first lease to the second result.
  EXPECT_DOUBLE_EQ(lane["actual_seconds"].get<double>(), 200);
  EXPECT_DOUBLE_EQ(m["actual_seconds"].get<double>(), 200);
  EXPECT_DOUBLE_EQ(m["predicted_seconds"].get<double>(), expected / 2);
  EXPECT_NE(report->markdown().find("| n150 | 2 | 2 | "), std::string::npos) << report->markdown();
}

TEST_F(OutputsTest, EvidenceOfEachArchIsKeptApartAndLabelledWithIt) {
  Register("n", "n150");
  Register("p", "p150");
  const std::string id = Start({"n150", "p150"});
  RunAll({"n", "p"});
  ASSERT_EQ(coord_->GetSweep(id)->state(), "succeeded");
  auto report = outputs_->Report(id);
  ASSERT_TRUE(report.ok()) << report.status();
  const auto j = nlohmann::json::parse(report->json(), nullptr, false);
  ASSERT_TRUE(j.is_object()) << report->json();
  std::map<std::string, std::string> files;
  for (const auto& f : report->files()) files[f.name()] = f.content();
  const std::string section = Section(report->markdown(), kB);
  for (const auto& e : j["entries"]) {
    if (e["key"] != kB) continue;
    ASSERT_EQ(e["evidence"].size(), 2u) << e.dump();
    for (const std::string arch : {"n150", "p150"}) {
      SCOPED_TRACE(arch);
      std::string path;
      for (const auto& p : e["evidence"]) {
        if (p.get<std::string>().find("-" + arch + "-") != std::string::npos) path = p;
      }
      ASSERT_FALSE(path.empty()) << e["evidence"].dump();
      EXPECT_TRUE(path.ends_with("/junit/01-verify.xml")) << path;
      EXPECT_EQ(files[path], "<testsuite name=\"" + arch + "\"/>") << "each arch its own file";
      EXPECT_NE(section.find("[" + arch + ": 01-verify.xml](" + path + ")"), std::string::npos)
          << section;
    }
  }
}

// Week over week (docs/report.md): a sweep's report is compared with the latest earlier sweep of
// the same repository that succeeded, never with another repository's or a cancelled one; the
// first sweep of a repository says there is nothing to compare with.
TEST_F(OutputsTest, ReportComparesWithTheLatestEarlierSucceededSweepOfTheRepository) {
  Register("n", "n150");
  const std::string first = Start({"n150"});
  RunAll({"n"});
  ASSERT_EQ(coord_->GetSweep(first)->state(), "succeeded");
  const std::string other_repo = Start({"n150"}, "/fake/other-tt-xla");
  RunAll({"n"});
  ASSERT_EQ(coord_->GetSweep(other_repo)->state(), "succeeded");
  const std::string cancelled = Start({"n150"});
  ASSERT_TRUE(coord_->CancelSweep(cancelled, "test", coord::Caller{"alice", "operator"}).ok());
  ASSERT_TRUE(outputs_->Report(cancelled).ok()) << "its outputs exist, and still it is skipped";
  const std::string oom = "Out of Memory: Not enough space to allocate 1048576 B DRAM buffer";
  const std::string second = Start({"n150"});
  RunAll({"n"}, {{kB, oom}});
  ASSERT_EQ(coord_->GetSweep(second)->state(), "succeeded");

  const auto report_of = [&](const std::string& id) {
    return nlohmann::json::parse(
        testing::ReadFileOrDie(tmp_.path() / "sweeps" / id / "report.json"));
  };
  const nlohmann::json j = report_of(second);
  const nlohmann::json& wow = j["week_over_week"];
  EXPECT_EQ(wow["previous"], first) << wow.dump(2);
  EXPECT_EQ(wow["counts"]["regressed"], 1) << wow.dump(2);
  EXPECT_EQ(wow["counts"]["still_passing"], 2) << wow.dump(2);
  ASSERT_EQ(wow["entries"].size(), 1u) << wow.dump(2);
  EXPECT_EQ(wow["entries"][0]["key"], kB);
  EXPECT_EQ(wow["entries"][0]["arch"], "n150");
  EXPECT_EQ(wow["entries"][0]["category"], "regressed");
  EXPECT_EQ(wow["entries"][0]["after"]["reason"], oom);
  ASSERT_EQ(wow["clusters"].size(), 1u);
  EXPECT_EQ(wow["clusters"][0]["delta"], 1);
  const std::string md = testing::ReadFileOrDie(tmp_.path() / "sweeps" / second / "report.md");
  const std::size_t since = md.find("\n## Since sweep " + first + "\n");
  EXPECT_NE(since, std::string::npos) << md;
  EXPECT_LT(md.find("\n## Totals\n"), since) << "after the totals";
  EXPECT_EQ(report_of(first)["week_over_week"]["previous"], nullptr);
  EXPECT_NE(testing::ReadFileOrDie(tmp_.path() / "sweeps" / first / "report.md")
                .find("\n## Since the previous sweep\n\nNo earlier sweep of this repository"),
            std::string::npos);
  EXPECT_EQ(report_of(other_repo)["week_over_week"]["previous"], nullptr)
      << "another repository's sweep is not its previous one";

  // The clusters of each sweep that ran to its end replace the last one's on /metrics: the first
  // sweep left nothing failing, the second one cluster of one entry.
  ASSERT_GE(metrics_.calls.size(), 3u);
  EXPECT_TRUE(metrics_.calls.front().empty());
  ASSERT_EQ(metrics_.calls.back().size(), 1u);
  EXPECT_EQ(metrics_.calls.back()[0].signature,
            "Out of Memory: Not enough space to allocate N B DRAM buffer");
  EXPECT_EQ(metrics_.calls.back()[0].entries, 1);
}

}  // namespace
}  // namespace triage::merge
