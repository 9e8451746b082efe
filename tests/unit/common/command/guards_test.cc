// Guards (common/command/guards.h): each workaround a command's change may buy a pass with is
// found in the diff and named; an honest fix and a threshold justified by the farm's measured
// floor are not findings.

#include "common/command/guards.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::command {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::string Diff(const std::string& path, const std::vector<std::string>& removed,
                 const std::vector<std::string>& added) {
  std::string d = "--- a/" + path + "\n+++ b/" + path + "\n";
  d += "@@ -10," + std::to_string(removed.size() + 1) + " +10," + std::to_string(added.size() + 1) +
       " @@\n def load(self):\n";
  for (const auto& r : removed) d += "-" + r + "\n";
  for (const auto& a : added) d += "+" + a + "\n";
  return d;
}

std::vector<std::string> Guards(const std::vector<Workaround>& found) {
  std::vector<std::string> out;
  for (const auto& w : found) out.push_back(w.guard);
  return out;
}

constexpr char kLoader[] = "x/pytorch/loader.py";

TEST(Guards, EachCheatInALoaderIsFoundAndNamedWithItsLine) {
  struct Case {
    std::vector<std::string> removed, added;
    const char* guard;
  };
  const Case cases[] = {
      {{}, {"        config.num_hidden_layers = 2"}, "layers_trimmed"},
      {{}, {"        model.model.layers = model.model.layers[:4]"}, "layers_trimmed"},
      {{}, {"        model.vision_tower.to(\"cpu\")"}, "cpu_offload"},
      {{}, {"        model = Model.from_pretrained(name, device_map=\"auto\")"}, "cpu_offload"},
      {{"        inputs = tok(text, max_length=512)"},
       {"        inputs = tok(text, max_length=32)"},
       "inputs_shortened"},
      {{}, {"        input_ids = input_ids[:, :16]"}, "inputs_shortened"},
      {{"        return processor(text=prompt, images=image, return_tensors=\"pt\")"},
       {"        return processor(text=prompt, return_tensors=\"pt\")"},
       "modality_dropped"},
      {{}, {"        x = F.pad(x, (0, 3))"}, "shape_padding"},
      {{},
       {"        try:", "            model.tie_weights()",
        "        except Exception:", "            pass"},
       "exception_suppressed"},
      {{}, {"        with contextlib.suppress(RuntimeError):"}, "exception_suppressed"},
      {{}, {"        warnings.filterwarnings(\"ignore\")"}, "warning_suppressed"},
      {{}, {"        pytest.skip(\"too slow\")"}, "marker_added"},
      {{}, {"        required_pcc = 0.9"}, "pcc_lowered"},
      {{}, {"        assert_pcc = False"}, "pcc_disabled"},
  };
  for (const auto& c : cases) {
    const auto found = ScanFileDiff("tt_forge_models", Diff(kLoader, c.removed, c.added));
    EXPECT_THAT(Guards(found), ::testing::Contains(c.guard)) << c.added.back();
    if (found.empty()) continue;
    EXPECT_THAT(found[0].where, ::testing::StartsWith("tt_forge_models/x/pytorch/loader.py:1"));
    EXPECT_THAT(Describe(found[0]), ::testing::StartsWith("workaround "));
  }
}

TEST(Guards, AnHonestFixAndCommentsAreNotFindings) {
  // The fixture's helper fix, a comment naming a cheat, a moved line, a longer sequence.
  EXPECT_THAT(ScanFileDiff("tt_forge_models",
                           Diff("tools/mini_images.py",
                                {"    return torch.randn(batch_size, size * size, "
                                 "dtype=dtype_override)"},
                                {"    return torch.randn(batch_size, channels * size * size, "
                                 "dtype=dtype_override)"})),
              IsEmpty());
  EXPECT_THAT(ScanFileDiff("tt_forge_models",
                           Diff(kLoader, {"        config.num_hidden_layers = 2  # old"},
                                {"        # no layer trimming: num_hidden_layers = 2 was wrong",
                                 "        config.num_hidden_layers = 2"})),
              IsEmpty());
  EXPECT_THAT(
      ScanFileDiff("tt_forge_models", Diff(kLoader, {"        inputs = tok(text, max_length=32)"},
                                           {"        inputs = tok(text, max_length=128)"})),
      IsEmpty());
  EXPECT_THAT(ScanFileDiff("tt_forge_models",
                           Diff(kLoader, {}, {"        # model.to('cpu') would hide the bug"})),
              IsEmpty());
  // Not a Python or pytest file: not read.
  EXPECT_THAT(ScanFileDiff("tt-xla", Diff("README.md", {}, {"pytest.skip(\"x\")"})), IsEmpty());
}

TEST(Guards, ATestDeselectedInTheRunnersConfigurationIsFound) {
  const auto found = ScanFileDiff(
      "tt-xla", Diff("pytest.ini", {}, {"addopts = --deselect tests/runner/test_models.py::x"}));
  EXPECT_THAT(Guards(found), ElementsAre("test_deselected"));
  EXPECT_EQ(found[0].where, "tt-xla/pytest.ini:11");
}

v1::EntryEdit PccEdit(double pcc) {
  v1::EntryEdit e;
  e.set_file("tests/runner/test_config/torch/test_config_inference_single_device.yaml");
  e.set_key("x/pytorch-Base-single_device-inference");
  auto* f = e.add_set();
  f->set_name("required_pcc");
  f->mutable_value()->set_float_value(pcc);
  return e;
}

TEST(Guards, ALoweredThresholdNeedsTheFarmsMeasuredFloor) {
  // Without a floor: a finding naming both thresholds.
  auto found = ScanEntryEdit(PccEdit(0.95), std::nullopt, std::nullopt);
  ASSERT_THAT(Guards(found), ElementsAre("pcc_lowered"));
  EXPECT_EQ(found[0].what, "required_pcc 0.99 -> 0.95 (no measured PCC floor)");
  // With the farm's floor at 0.955: 0.95 is within the margin, justified.
  EXPECT_THAT(ScanEntryEdit(PccEdit(0.95), std::nullopt, 0.955), IsEmpty());
  // Far under the floor: still a finding, naming the floor.
  found = ScanEntryEdit(PccEdit(0.80), std::nullopt, 0.955);
  ASSERT_THAT(Guards(found), ElementsAre("pcc_lowered"));
  EXPECT_THAT(found[0].what, ::testing::HasSubstr("below the farm's measured CPU bfloat16 floor"));
  // Raised, or kept: nothing.
  EXPECT_THAT(ScanEntryEdit(PccEdit(0.97), 0.95, std::nullopt), IsEmpty());
  // assert_pcc off.
  v1::EntryEdit off;
  auto* f = off.add_set();
  f->set_name("assert_pcc");
  f->mutable_value()->set_bool_value(false);
  EXPECT_THAT(Guards(ScanEntryEdit(off, std::nullopt, std::nullopt)), ElementsAre("pcc_disabled"));
}

TEST(Guards, TheFloorsOfAResultAreReadFromItsFloorEvidence) {
  v1::ShardResult result;
  v1::Evidence* ev = result.add_evidence();
  ev->set_name("floors.json");
  ev->set_kind(std::string(kPccFloorEvidence));
  ev->set_content(R"({"floors": [
      {"file": "a.yaml", "key": "m/pytorch-single_device-inference", "pcc": 0.964, "error": ""},
      {"file": "a.yaml", "key": "n/pytorch-single_device-inference", "pcc": null,
       "error": "RuntimeError: no bf16 kernel"},
      {"key": "no-file", "pcc": 0.5}, "not an object"]})");
  // Evidence of another kind, and a floors.json that is not JSON, add nothing.
  v1::Evidence* other = result.add_evidence();
  other->set_kind("log");
  other->set_content(R"({"floors": [{"file": "a.yaml", "key": "x", "pcc": 0.1}]})");
  v1::Evidence* broken = result.add_evidence();
  broken->set_kind(std::string(kPccFloorEvidence));
  broken->set_content("{\"floors\": [");
  const auto floors = PccFloors(result);
  ASSERT_EQ(floors.size(), 1u);
  EXPECT_DOUBLE_EQ(floors.at({"a.yaml", "m/pytorch-single_device-inference"}), 0.964);
}

TEST(Guards, AMalformedDiffFindsNothingAndDoesNotCrash) {
  for (const char* bad : {"", "@@", "@@ -1 +1 @@", "+++ b/x.py\n@@ -1,5 +1,9 @@\n+pass"}) {
    EXPECT_THAT(ScanFileDiff("tt_forge_models", bad), IsEmpty()) << bad;
  }
  // Counts the hunk does not have: the lines it has are still read.
  EXPECT_THAT(Guards(ScanFileDiff("tt_forge_models",
                                  "+++ b/x.py\n@@ -99999999999 +1,2147483647 @@\n+except:\n")),
              ElementsAre("exception_suppressed"));
}

}  // namespace
}  // namespace triage::command
