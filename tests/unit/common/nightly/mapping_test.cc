// The runs' records mapped to the checkout (docs/nightly.md, section 1, "Mapping").

#include "common/nightly/mapping.h"

#include "gtest/gtest.h"
#include "tests/unit/common/nightly/nightly_test_support.h"

namespace triage::nightly {
namespace {

using namespace testing;  // NOLINT

constexpr char kTorchInference[] =
    "tests/runner/test_config/torch/test_config_inference_single_device.yaml";
constexpr char kJaxInference[] =
    "tests/runner/test_config/jax/test_config_inference_single_device.yaml";

inventory::Inventory Checkout() {
  inventory::Inventory inv;
  inv.documents.push_back(inventory::Document::Parse(
      kJaxInference,
      "test_config:\n  j/jax-Base-single_device-inference:\n    status: KNOWN_FAILURE_XFAIL\n"));
  inv.documents.push_back(inventory::Document::Parse(
      kTorchInference,
      "test_config:\n  a/pytorch-Base-single_device-inference:\n    status: EXPECTED_PASSING\n\n"
      "  b/pytorch-Base-single_device-inference:\n    status: KNOWN_FAILURE_XFAIL\n"));
  for (const auto& d : inv.documents) EXPECT_TRUE(d.ok());
  return inv;
}

v1::NightlyRecord For(std::string fn, std::string key, v1::NightlyRecord r,
                      std::string source = "x.xml:1") {
  r.set_test_function(std::move(fn));
  r.set_key(std::move(key));
  r.set_source(std::move(source));
  return r;
}

v1::NightlyRun NightRun(std::string label, std::int64_t started,
                        std::vector<v1::NightlyRecord> rs) {
  v1::NightlyRun run;
  run.set_label(std::move(label));
  run.set_started_unix_ms(started);
  run.set_testcases(static_cast<int>(rs.size()));
  for (auto& r : rs) *run.add_records() = std::move(r);
  return run;
}

TEST(NightlyMapping, RecordsFindTheirEntriesInTheirFrameworksFiles) {
  const inventory::Inventory inv = Checkout();
  Mapping m = MapRuns(
      inv,
      {NightRun("night", 1,
                {For("test_all_models_torch", "a/pytorch-Base-single_device-inference", Pass()),
                 For("test_all_models_jax", "j/jax-Base-single_device-inference", XfailPass()),
                 For("test_all_models_torch", "a/pytorch-Base-single_device-inference",
                     Pass(0.999, "p150"))})});
  ASSERT_EQ(m.tests.size(), 2u);
  // Inventory order: the jax file sorts first.
  EXPECT_EQ(m.tests[0].key, "j/jax-Base-single_device-inference");
  EXPECT_EQ(m.tests[0].document->path(), kJaxInference);
  EXPECT_EQ(m.tests[1].archs, (std::vector<std::string>{"n150", "p150"}));
  ASSERT_EQ(m.tests[1].histories.size(), 2u);
  EXPECT_EQ(m.tests[1].histories[0].completed_elsewhere, std::vector<std::string>{"p150"});
  EXPECT_EQ(m.intake.mapped(), 3);
  EXPECT_EQ(m.intake.unmapped(), 0);
}

TEST(NightlyMapping, RunsAreReadOldestFirstByTheirTimestamps) {
  const inventory::Inventory inv = Checkout();
  const std::string key = "a/pytorch-Base-single_device-inference";
  Mapping m =
      MapRuns(inv, {NightRun("newer", 200, {For("test_all_models_torch", key, Pass(0.995))}),
                    NightRun("older", 100, {For("test_all_models_torch", key, Pass(0.991))})});
  ASSERT_EQ(m.tests.size(), 1u);
  ASSERT_EQ(m.tests[0].histories[0].records.size(), 2u);
  EXPECT_DOUBLE_EQ(m.tests[0].histories[0].records[1].pcc(), 0.995);
  // Without timestamps: as given.
  const std::vector<v1::NightlyRun> runs = {NightRun("first", 0, {}), NightRun("second", 100, {})};
  auto undated = OrderRuns(runs);
  EXPECT_EQ(undated[0]->label(), "first");
}

TEST(NightlyMapping, DuplicatesAndContradictionsAreCountedNeverGuessed) {
  const inventory::Inventory inv = Checkout();
  const std::string a = "a/pytorch-Base-single_device-inference";
  const std::string b = "b/pytorch-Base-single_device-inference";
  Mapping m = MapRuns(
      inv, {NightRun("night", 1,
                     {For("test_all_models_torch", a, Pass(), "one.xml:3"),
                      For("test_all_models_torch", a, Pass(), "two.xml:9"),
                      For("test_all_models_torch", b, XfailPass(), "one.xml:5"),
                      For("test_all_models_torch", b,
                          Fail("FAILED_RUNTIME", "x", v1::NightlyRecord::XFAILED), "two.xml:7")})});
  EXPECT_EQ(m.intake.duplicates(), 1);
  EXPECT_EQ(m.intake.contradictory(), 1);
  ASSERT_EQ(m.tests.size(), 1u) << "the contradicted test keeps no record";
  EXPECT_EQ(m.tests[0].key, a);
  ASSERT_EQ(m.intake.examples_size(), 1);
  EXPECT_NE(m.intake.examples(0).find("one.xml:5 XFAILED, two.xml:7 XFAILED"), std::string::npos)
      << m.intake.examples(0);
}

TEST(NightlyMapping, TheIntakesCountedDuplicatesAreDuplicates) {
  // The intake keeps one of identical testcases and counts the others in the run: the summary
  // counts them as it counts copies it is sent.
  const inventory::Inventory inv = Checkout();
  const std::string a = "a/pytorch-Base-single_device-inference";
  v1::NightlyRun run = NightRun("night", 1,
                                {For("test_all_models_torch", a, Pass(), "one.xml:3"),
                                 For("test_all_models_torch", a, Pass(0.998), "two.xml:9")});
  run.set_duplicate_testcases(1999998);
  run.set_testcases(2000000);
  v1::NightlyRun other = NightRun("other", 2, {For("test_all_models_torch", a, Pass())});
  other.set_duplicate_testcases(3);
  Mapping m = MapRuns(inv, {run, other});
  EXPECT_EQ(m.intake.testcases(), 2000001);
  EXPECT_EQ(m.intake.records(), 2000000 + 4);
  EXPECT_EQ(m.intake.duplicates(), 1999998 + 1 + 3);
  EXPECT_EQ(m.intake.contradictory(), 0);
  ASSERT_EQ(m.tests.size(), 1u);
  EXPECT_EQ(m.tests[0].histories.at(0).records.size(), 2u);  // one per run
}

TEST(NightlyMapping, UnmappedRecordsAreNamed) {
  inventory::Inventory inv = Checkout();
  // A key in another framework's file is not this function's entry; a key of no file is new,
  // and a new key needs a file of its run mode and parallelism to go to.
  Mapping m = MapRuns(
      inv,
      {NightRun("night", 1,
                {For("test_all_models_torch", "j/jax-Base-single_device-inference", Pass()),
                 For("test_all_models_torch", "n/pytorch-Base-single_device-inference", Pass()),
                 For("test_all_models_torch", "n/pytorch-Base-single_device-training", Pass())})});
  EXPECT_EQ(m.intake.unmapped(), 2);
  ASSERT_EQ(m.tests.size(), 1u);
  EXPECT_EQ(m.tests[0].key, "n/pytorch-Base-single_device-inference");
  EXPECT_EQ(m.tests[0].entry, nullptr);
  EXPECT_EQ(m.tests[0].document->path(), kTorchInference);
  EXPECT_EQ(FileForNewEntry("test_llms_torch",
                            "q/pytorch-0.5B-llm_decode-seq_1-batch_1-single_device-mesh_default-"
                            "inference"),
            "tests/runner/test_config/torch_llm/test_config_inference_single_device.yaml");
}

TEST(NightlyMapping, AKeyDefinedInTwoFilesOfItsFrameworkIsNotGuessed) {
  inventory::Inventory inv = Checkout();
  inv.documents.push_back(inventory::Document::Parse(
      "tests/runner/test_config/torch/test_config_inference_data_parallel.yaml",
      "test_config:\n  a/pytorch-Base-single_device-inference:\n    status: EXPECTED_PASSING\n"));
  Mapping m = MapRuns(
      inv,
      {NightRun("night", 1,
                {For("test_all_models_torch", "a/pytorch-Base-single_device-inference", Pass())})});
  EXPECT_TRUE(m.tests.empty());
  EXPECT_EQ(m.intake.unmapped(), 1);
  ASSERT_EQ(m.intake.examples_size(), 1);
  EXPECT_NE(m.intake.examples(0).find("defined in"), std::string::npos);
}

}  // namespace
}  // namespace triage::nightly
