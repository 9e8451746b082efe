// A night whose keys are of another grammar than the checkout's (docs/nightly.md, "Mapping"):
// the intake reads it, and the mapping names such records unmapped with the grammar they miss;
// with a checkout whose runner makes those keys, they map to its entries.

#include <string>
#include <vector>

#include "common/inventory/inventory.h"
#include "common/nightly/intake.h"
#include "common/nightly/mapping.h"
#include "common/nightly/record.h"
#include "common/util/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/pytest_xml.h"
#include "tests/support/test_support.h"

namespace triage::nightly {
namespace {

using ::testing::ElementsAre;

constexpr char kToday[] = "resnet/pytorch-resnet_50_hf-single_device-inference";
constexpr char kDecember[] = "gemma/pytorch-google/gemma-2-9b-it-single_device-full-inference";
constexpr char kInferenceFile[] =
    "tests/runner/test_config/torch/test_config_inference_single_device.yaml";

// December 2025's runner: entry, parallelism, op-by-op, run mode.
constexpr char kOpByOpRunner[] =
    "@pytest.mark.model_test\n"
    "@pytest.mark.parametrize(\n"
    "    \"run_mode\",\n"
    "    [\n"
    "        pytest.param(RunMode.INFERENCE, id=\"inference\", marks=pytest.mark.inference),\n"
    "        pytest.param(RunMode.TRAINING, id=\"training\", marks=pytest.mark.training),\n"
    "    ],\n"
    ")\n"
    "@pytest.mark.parametrize(\n"
    "    \"op_by_op\",\n"
    "    [None, OpByOpBackend.TORCH, OpByOpBackend.STABLEHLO],\n"
    "    ids=[\"full\", \"op_by_op_torch\", \"op_by_op_stablehlo\"],\n"
    ")\n"
    "@pytest.mark.parametrize(\n"
    "    \"parallelism\",\n"
    "    [\n"
    "        pytest.param(Parallelism.SINGLE_DEVICE, id=\"single_device\"),\n"
    "        pytest.param(Parallelism.DATA_PARALLEL, id=\"data_parallel\"),\n"
    "    ],\n"
    ")\n"
    "@pytest.mark.parametrize(\"test_entry\", test_entries, ids=make_test_id)\n"
    "def test_all_models_torch(test_entry, run_mode, op_by_op, parallelism):\n"
    "    run(test_entry)\n";

testing::Case Passed(std::string_view key) {
  testing::Tags tags;
  tags.specific_test_case = util::StrCat("test_all_models_torch[", key, "]");
  testing::Case c;
  c.name = tags.specific_test_case;
  c.tags = tags.Literal();
  return c;
}

// The night: one record of today's grammar and one of December's, read by the intake.
v1::NightlyRun Night() {
  v1::NightlyRun run;
  run.set_label("night");
  absl::Status status = ReadJUnitBytes(testing::Report({Passed(kToday), Passed(kDecember)}),
                                       "test-reports-n150/a.xml", run);
  EXPECT_TRUE(status.ok()) << status;
  return run;
}

TEST(NightlyGrammar, AKeyOfAnotherGrammarIsARecord) {
  EXPECT_TRUE(CheckKey(kDecember).ok()) << CheckKey(kDecember);
  EXPECT_TRUE(CheckKey("hrnet/pytorch-hrnetv2_w48_osmr-full-inference").ok());
  const v1::NightlyRun run = Night();
  ASSERT_EQ(run.records_size(), 2);
  EXPECT_EQ(run.records(1).key(), kDecember);
  EXPECT_EQ(run.problems_size(), 0);
}

TEST(NightlyGrammar, TodaysCheckoutLeavesTheOlderKeyUnmapped) {
  // A checkout without a runner reads keys with the built-in grammar (today's).
  triage::testing::TempDir repo;
  triage::testing::WriteFileOrDie(repo.path() / kInferenceFile,
                                  util::StrCat("test_config:\n  ", kToday,
                                               ":\n    status: "
                                               "EXPECTED_PASSING\n"));
  auto inv = inventory::LoadInventory(inventory::WorkTreeSource(repo.path()));
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_TRUE(inv->ok());
  Mapping m = MapRuns(*inv, {Night()});
  EXPECT_EQ(m.intake.records(), 2);
  EXPECT_EQ(m.intake.mapped(), 1);
  EXPECT_EQ(m.intake.unmapped(), 1);
  ASSERT_EQ(m.tests.size(), 1u);
  EXPECT_EQ(m.tests[0].key, kToday);
  EXPECT_THAT(
      m.intake.examples(),
      ElementsAre(util::StrCat("unmapped: test_all_models_torch[", kDecember,
                               "]: not a key of this checkout's grammar (built-in): does not "
                               "match <model_path>/<framework>[-<variant>]-<parallelism>-"
                               "<run_mode>: no single_device/data_parallel/tensor_parallel "
                               "segment")));
}

TEST(NightlyGrammar, ACheckoutWhoseRunnerMakesTheKeyMapsIt) {
  triage::testing::TempDir december;
  triage::testing::WriteFileOrDie(
      december.path() / kInferenceFile,
      util::StrCat("test_config:\n  ", kDecember, ":\n    status: EXPECTED_PASSING\n"));
  triage::testing::WriteFileOrDie(december.path() / inventory::kRunnerPath, kOpByOpRunner);
  auto checkout = inventory::LoadInventory(inventory::WorkTreeSource(december.path()));
  ASSERT_TRUE(checkout.ok()) << checkout.status();
  ASSERT_TRUE(checkout->ok());
  EXPECT_EQ(checkout->grammar.source, "tests/runner/test_models.py:22");
  Mapping m = MapRuns(*checkout, {Night()});
  EXPECT_EQ(m.intake.mapped(), 1);
  EXPECT_EQ(m.intake.unmapped(), 1);
  ASSERT_EQ(m.tests.size(), 1u);
  EXPECT_EQ(m.tests[0].key, kDecember);
  ASSERT_NE(m.tests[0].entry, nullptr);
  EXPECT_EQ(m.tests[0].entry->key, kDecember);
  EXPECT_EQ(m.tests[0].document->path(), kInferenceFile);
  EXPECT_EQ(m.tests[0].archs, std::vector<std::string>{"n150"});
  // Today's key is the one named now, with the runner's grammar.
  EXPECT_THAT(m.intake.examples(),
              ElementsAre(util::StrCat(
                  "unmapped: test_all_models_torch[", kToday,
                  "]: not a key of this checkout's grammar (tests/runner/test_models.py:22): does "
                  "not match <model_path>/<framework>[-<variant>]-<parallelism>-<op_by_op>-"
                  "<run_mode>: no full/op_by_op_torch/op_by_op_stablehlo segment")));
  // A new entry for a key of that grammar goes to the file of its run mode and parallelism.
  EXPECT_EQ(FileForNewEntry("test_all_models_torch", "m/pytorch-data_parallel-full-inference",
                            checkout->grammar),
            "tests/runner/test_config/torch/test_config_inference_data_parallel.yaml");
}

}  // namespace
}  // namespace triage::nightly
