// The lift of a command executor's raw diffs into structured edits (common/lift/lift.h), against
// in-memory pinned files: YAML entry edits (top level and arch_overrides), registry operations,
// loader file edits, and what is not lifted: changes outside the shard, diffs that do not apply,
// a YAML file left invalid.

#include "common/lift/lift.h"

#include <map>

#include "common/diff/unified_diff.h"
#include "common/util/strings.h"
#include "coordinator/scheduling/result_check.h"
#include "gtest/gtest.h"
#include "tests/support/memory_pinned_files.h"

namespace triage::lift {
namespace {

constexpr char kYamlPath[] =
    "tests/runner/test_config/torch/test_config_training_single_device.yaml";
constexpr char kUtilsPath[] = "training_utils.py";  // relative to tt_forge_models
constexpr char kLoaderA[] = "a/pytorch/loader.py";
constexpr char kLoaderB[] = "b/pytorch/loader.py";
constexpr char kA[] = "a/pytorch-single_device-training";
constexpr char kB[] = "b/pytorch-single_device-training";

constexpr char kYaml[] =
    "test_config:\n"
    "  a/pytorch-single_device-training:\n"
    "    status: NOT_SUPPORTED_SKIP\n"
    "    bringup_status: FAILED_FE_COMPILATION\n"
    "    reason: \"tt-forge-models doesn't implement unpack_forward_output for this model.\"\n"
    "  b/pytorch-single_device-training:\n"
    "    status: NOT_SUPPORTED_SKIP\n";

constexpr char kUtils[] =
    "_HANDLER_REGISTRY = {}\n"
    "\n"
    "\n"
    "def _register_attr(cls_name, attr):\n"
    "    pass\n"
    "\n"
    "\n"
    "_register_attr(\"MiniBaseModelOutput\", \"last_hidden_state\")\n"
    "_register_attr(\"MiniMgpstrOutput\", \"logits\")\n"
    "_register_attr(\"MiniSeq2SeqOutput\", \"logits\")\n";

constexpr char kLoader[] =
    "class ModelLoader:\n"
    "    def load_inputs(self, dtype_override=None):\n"
    "        return torch.randn(1, 3, 8, 8)\n";

// The shard's YAML, training_utils.py and both loaders at the pinned commits.
struct MapFiles : testing::MemoryPinnedFiles {
  MapFiles() {
    ttxla = {{kYamlPath, kYaml}};
    forge = {{kUtilsPath, kUtils}, {kLoaderA, kLoader}, {kLoaderB, kLoader}};
  }
};

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

class LiftTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.set_shard_id("sw-0001-s001");
    spec_.set_loader("third_party/tt_forge_models/a/pytorch/loader.py");
    spec_.set_arch("n150");
    auto* e = spec_.add_entries();
    e->set_key(kA);
    e->set_file(kYamlPath);
  }

  // A command executor's result for the shard: one unchanged outcome per entry, and the diffs.
  v1::ShardResult Command(const std::string& ttxla_diff, const std::string& forge_diff) {
    v1::ShardResult r;
    r.set_status(v1::ShardResult::SUCCEEDED);
    for (const auto& e : spec_.entries()) {
      auto* o = r.add_entries();
      o->set_key(e.key());
      o->set_file(e.file());
      o->set_arch(spec_.arch());
      o->set_verdict("command");
    }
    r.set_ttxla_diff(ttxla_diff);
    r.set_forge_diff(forge_diff);
    return r;
  }

  std::string YamlDiff(const std::string& after) {
    return diff::UnifiedDiff(kYamlPath, kYaml, after);
  }

  v1::ShardSpec spec_;
  MapFiles files_;
};

std::map<std::string, std::string> Sets(const v1::EntryEdit& e) {
  std::map<std::string, std::string> out;
  for (const auto& f : e.set()) out[f.name()] = f.value().string_value();
  return out;
}

TEST_F(LiftTest, AYamlHunkBecomesTheEntrysFieldEdit) {
  const std::string after =
      Replace(kYaml,
              "    status: NOT_SUPPORTED_SKIP\n    bringup_status: FAILED_FE_COMPILATION\n"
              "    reason: \"tt-forge-models doesn't implement unpack_forward_output for "
              "this model.\"\n",
              "    status: EXPECTED_PASSING\n");
  v1::ShardResult r = Command(YamlDiff(after), "");
  LiftOutput out = Lift(spec_, r, files_);
  EXPECT_TRUE(out.notes.empty()) << util::StrJoin(out.notes, "\n");
  EXPECT_TRUE(out.outside.empty());
  EXPECT_TRUE(r.ttxla_diff().empty());
  EXPECT_TRUE(r.forge_diff().empty());
  ASSERT_EQ(r.entries_size(), 1);
  const auto& o = r.entries(0);
  EXPECT_TRUE(o.changed());
  EXPECT_EQ(o.edit().key(), kA);
  EXPECT_EQ(o.edit().file(), kYamlPath);
  EXPECT_EQ(Sets(o.edit()), (std::map<std::string, std::string>{{"status", "EXPECTED_PASSING"}}));
  EXPECT_EQ(std::vector<std::string>(o.edit().delete_().begin(), o.edit().delete_().end()),
            (std::vector<std::string>{"bringup_status", "reason"}));
  EXPECT_EQ(o.review_size(), 0);
  EXPECT_TRUE(coord::CheckResultOwnership(spec_, r).ok());
}

// The shard's arch reads arch_overrides.<arch> on top of the top level: a change there is lifted
// like a top-level one; another arch's overrides are not lifted and are flagged.
TEST_F(LiftTest, ArchOverridesAreReadAsTheShardsArchSeesThem) {
  const std::string base_entry =
      "    reason: \"tt-forge-models doesn't implement "
      "unpack_forward_output for this model.\"\n";
  auto with_override = [&](const std::string& arch) {
    return Replace(kYaml, base_entry,
                   base_entry + "    arch_overrides:\n      " + arch +
                       ":\n        status: EXPECTED_PASSING\n");
  };
  v1::ShardResult mine = Command(YamlDiff(with_override("n150")), "");
  LiftOutput out = Lift(spec_, mine, files_);
  EXPECT_TRUE(out.notes.empty()) << util::StrJoin(out.notes, "\n");
  ASSERT_TRUE(mine.entries(0).changed());
  EXPECT_EQ(Sets(mine.entries(0).edit()),
            (std::map<std::string, std::string>{{"status", "EXPECTED_PASSING"}}));
  EXPECT_EQ(mine.entries(0).edit().delete__size(), 0);
  EXPECT_EQ(mine.entries(0).review_size(), 0);

  v1::ShardResult other = Command(YamlDiff(with_override("p150")), "");
  Lift(spec_, other, files_);
  EXPECT_FALSE(other.entries(0).changed());
  ASSERT_EQ(other.entries(0).review_size(), 1);
  EXPECT_EQ(other.entries(0).review(0),
            "the command changed arch_overrides.p150 in a shard for n150: not lifted");
}

TEST_F(LiftTest, TrainingUtilsLinesBecomeRegistryOps) {
  // An added line, a removed line and a changed attribute (a remove and an add).
  std::string after = Replace(kUtils, "_register_attr(\"MiniMgpstrOutput\", \"logits\")\n",
                              "_register_attr(\"MiniCausalLMOutput\", \"logits\")\n");
  after = Replace(after, "_register_attr(\"MiniSeq2SeqOutput\", \"logits\")\n",
                  "_register_attr(\"MiniSeq2SeqOutput\", \"last_hidden_state\")\n");
  v1::ShardResult r = Command("", diff::UnifiedDiff(kUtilsPath, kUtils, after));
  LiftOutput out = Lift(spec_, r, files_);
  EXPECT_TRUE(out.notes.empty()) << util::StrJoin(out.notes, "\n");
  std::vector<std::string> ops;
  for (const auto& op : r.registry_ops()) {
    ops.push_back(
        util::StrCat(v1::RegistryOp::Kind_Name(op.kind()), " ", op.cls(), " ", op.attr()));
  }
  EXPECT_EQ(ops, (std::vector<std::string>{"REMOVE MiniMgpstrOutput ", "REMOVE MiniSeq2SeqOutput ",
                                           "ADD MiniCausalLMOutput logits",
                                           "ADD MiniSeq2SeqOutput last_hidden_state"}));
  EXPECT_EQ(r.file_edits_size(), 0) << "training_utils.py travels as registry ops only";
  EXPECT_FALSE(r.entries(0).changed());
  EXPECT_TRUE(coord::CheckResultOwnership(spec_, r).ok());
}

TEST_F(LiftTest, ALoaderHunkBecomesAFileEditAgainstThePinnedCommit) {
  const std::string after = Replace(kLoader, "torch.randn(1, 3, 8, 8)", "torch.randn(1, 3, 4, 4)");
  const std::string d = diff::UnifiedDiff(kLoaderA, kLoader, after);
  v1::ShardResult r = Command("", d);
  LiftOutput out = Lift(spec_, r, files_);
  EXPECT_TRUE(out.notes.empty()) << util::StrJoin(out.notes, "\n");
  ASSERT_EQ(r.file_edits_size(), 1);
  EXPECT_EQ(r.file_edits(0).repo(), "tt_forge_models");
  EXPECT_EQ(r.file_edits(0).path(), kLoaderA);
  EXPECT_EQ(r.file_edits(0).diff(), d);
  EXPECT_TRUE(r.file_edits(0).against_pinned());
  EXPECT_EQ(r.registry_ops_size(), 0);
  EXPECT_TRUE(coord::CheckResultOwnership(spec_, r).ok());
}

// Another entry's change is not lifted and is flagged on the shard's outcomes; files the shard
// does not own stay in the result, and the ownership check rejects it naming them.
TEST_F(LiftTest, ChangesOutsideTheShardAreFlaggedOrLeftForTheOwnershipCheck) {
  const std::string yaml_after =
      Replace(kYaml, "  b/pytorch-single_device-training:\n    status: NOT_SUPPORTED_SKIP\n",
              "  b/pytorch-single_device-training:\n    status: EXPECTED_PASSING\n");
  v1::ShardResult r = Command(YamlDiff(yaml_after), "");
  LiftOutput out = Lift(spec_, r, files_);
  ASSERT_EQ(out.notes.size(), 1u);
  EXPECT_EQ(out.notes[0], util::StrCat("change of entry '", kB, "' in ", kYamlPath,
                                       " is outside the shard: not lifted"));
  EXPECT_FALSE(r.entries(0).changed());
  ASSERT_EQ(r.entries(0).review_size(), 1);
  EXPECT_EQ(r.entries(0).review(0), out.notes[0]);
  EXPECT_TRUE(coord::CheckResultOwnership(spec_, r).ok()) << "the rest of the result is kept";

  // Another loader's file.
  const std::string loader_after = Replace(kLoader, "torch.randn", "torch.ones");
  r = Command("", diff::UnifiedDiff(kLoaderB, kLoader, loader_after));
  out = Lift(spec_, r, files_);
  EXPECT_TRUE(out.notes.empty());
  EXPECT_EQ(out.outside, (std::vector<std::string>{"tt_forge_models/b/pytorch/loader.py"}));
  absl::Status owned = coord::CheckResultOwnership(spec_, r);
  EXPECT_FALSE(owned.ok());
  EXPECT_NE(owned.message().find("tt_forge_models/b/pytorch/loader.py outside the shard's loader"),
            std::string::npos)
      << owned;

  // A tt-xla file that is not one of the shard's YAML files.
  r = Command(diff::UnifiedDiff("setup.py", "x = 1\n", "x = 2\n"), "");
  out = Lift(spec_, r, files_);
  EXPECT_EQ(out.outside, (std::vector<std::string>{"tt-xla/setup.py"}));
  owned = coord::CheckResultOwnership(spec_, r);
  EXPECT_FALSE(owned.ok());
  EXPECT_NE(owned.message().find("'tt-xla' (setup.py)"), std::string::npos) << owned;
}

// The shared scope of a remediation sweep (docs/remediation.md, "Shared fixes beyond the
// loader"): a file under one of the shard's shared paths is an edit the ownership check accepts;
// the same file without a shared path, or one beside it, is rejected as before.
TEST_F(LiftTest, FilesInTheShardsSharedScopeAreSharedEditsTheOwnershipCheckAccepts) {
  spec_.add_shared_paths("tt-xla:python_package/");
  spec_.add_shared_paths("tt_forge_models:tools/");
  const std::string ttxla =
      diff::UnifiedDiff("python_package/tt_torch/backend.py", "x = 1\n", "x = 2\n");
  const std::string forge = diff::UnifiedDiff("tools/utils.py", "y = 1\n", "y = 2\n");
  v1::ShardResult r = Command(ttxla, forge);
  LiftOutput out = Lift(spec_, r, files_);
  EXPECT_TRUE(out.outside.empty()) << util::StrJoin(out.outside, ", ");
  ASSERT_EQ(r.file_edits_size(), 2);
  EXPECT_EQ(r.file_edits(0).repo(), "tt-xla");
  EXPECT_EQ(r.file_edits(0).path(), "python_package/tt_torch/backend.py");
  EXPECT_EQ(r.file_edits(1).repo(), "tt_forge_models");
  EXPECT_TRUE(coord::CheckResultOwnership(spec_, r).ok()) << coord::CheckResultOwnership(spec_, r);

  r = Command(diff::UnifiedDiff("python_package_other/x.py", "x = 1\n", "x = 2\n"), "");
  out = Lift(spec_, r, files_);
  EXPECT_EQ(out.outside, (std::vector<std::string>{"tt-xla/python_package_other/x.py"}));
  EXPECT_FALSE(coord::CheckResultOwnership(spec_, r).ok());

  spec_.clear_shared_paths();
  r = Command("", forge);
  out = Lift(spec_, r, files_);
  EXPECT_EQ(out.outside, (std::vector<std::string>{"tt_forge_models/tools/utils.py"}));
  EXPECT_FALSE(coord::CheckResultOwnership(spec_, r).ok());
}

TEST_F(LiftTest, WhatCannotBeReadIsFlaggedForReview) {
  // A diff that does not apply to the pinned file.
  const std::string stale =
      diff::UnifiedDiff(kYamlPath, "test_config:\n  x: 1\n", "test_config:\n");
  v1::ShardResult r = Command(stale, "");
  LiftOutput out = Lift(spec_, r, files_);
  ASSERT_EQ(out.notes.size(), 1u);
  EXPECT_NE(out.notes[0].find("does not apply"), std::string::npos) << out.notes[0];
  ASSERT_EQ(r.entries(0).review_size(), 1);
  EXPECT_FALSE(r.entries(0).changed());

  // A YAML file the command left invalid.
  r = Command(YamlDiff(std::string(kYaml) + "  : [\n"), "");
  out = Lift(spec_, r, files_);
  ASSERT_EQ(out.notes.size(), 1u);
  EXPECT_NE(out.notes[0].find("the command left " + std::string(kYamlPath) + " invalid"),
            std::string::npos)
      << out.notes[0];
  EXPECT_EQ(r.entries(0).review(0), out.notes[0]);

  // An entry the command removed.
  r = Command(YamlDiff(Replace(kYaml,
                               "  b/pytorch-single_device-training:\n    status: "
                               "NOT_SUPPORTED_SKIP\n",
                               "")),
              "");
  out = Lift(spec_, r, files_);
  ASSERT_EQ(out.notes.size(), 1u);
  EXPECT_EQ(out.notes[0],
            util::StrCat("the command removed entry '", kB, "' from ", kYamlPath, ": not lifted"));

  // training_utils.py missing at the pinned commit.
  files_.forge.erase(kUtilsPath);
  r = Command("", diff::UnifiedDiff(kUtilsPath, kUtils, std::string(kUtils) + "\n"));
  out = Lift(spec_, r, files_);
  ASSERT_EQ(out.notes.size(), 1u);
  EXPECT_NE(out.notes[0].find("tt_forge_models/training_utils.py at the pinned commit"),
            std::string::npos)
      << out.notes[0];
  EXPECT_EQ(r.registry_ops_size(), 0);
  EXPECT_TRUE(r.forge_diff().empty());
}

}  // namespace
}  // namespace triage::lift
