// missing_inputs (docs/playbooks.md, "missing_inputs"): the sub-pattern table, the load_inputs
// edits, and whole runs over fake tools (the e2e test runs the real probe and pytest).

#include "agent/playbooks/missing_inputs/missing_inputs.h"

#include "agent/playbooks/playbooks.h"
#include "agent/playbooks/shard_run.h"
#include "gtest/gtest.h"
#include "tests/support/fake_playbook_tools.h"
#include "tests/support/test_support.h"

namespace triage::playbooks::missing_inputs {
namespace {

using nlohmann::json;

ProbeDoc::Error Err(const std::string& type, const std::string& message) {
  return ProbeError(type, message);
}

ProbeDoc::Param P(const std::string& name, bool has_default = false, const std::string& def = "",
                  const std::string& kind = "positional") {
  return {name, kind, has_default, def};
}

// A train or eval document of the inputs mode.
ProbeDoc Phase(const std::string& key, const std::string& phase, std::optional<ProbeDoc::Error> e) {
  ProbeDoc d;
  d.key = key;
  d.phase = phase;
  d.ok = !e;
  d.error = e;
  d.variant_member = "BASE";
  d.container = "dict";
  d.inputs = {{"input_ids", "torch.int64", "tensor", {1, 8}, nullptr},
              {"attention_mask", "torch.int64", "tensor", {1, 8}, nullptr}};
  ProbeDoc::Forward f;
  f.model_class = "MiniSeq2Seq";
  f.model_module = "third_party.tt_forge_models.s.pytorch.loader";
  f.params = {P("input_ids"), P("attention_mask", true, "None"),
              P("decoder_input_ids", true, "None")};
  d.forward = f;
  d.load_inputs_params = {P("dtype_override", true, "None"), P("batch_size", true, "1")};
  d.has_binding = true;
  d.binding_ok = true;
  d.binding = {{"input_ids", "input_ids"}, {"attention_mask", "attention_mask"}};
  d.config = ProbeDoc::Config{true, 2, 0};
  return d;
}

ProbeDoc Targets(const std::string& cls, const std::string& module, const std::string& container,
                 std::optional<ProbeDoc::Error> e) {
  ProbeDoc d = Phase("k", "train", e);
  d.container = container;
  d.inputs = {
      {container == "dict" ? "images" : "0", "torch.bfloat16", "tensor", {2, 3, 32, 32}, nullptr}};
  if (container == "tensor") d.inputs[0].name = "<single>";
  d.forward->model_class = cls;
  d.forward->model_module = module;
  d.forward->params = {P("images"), P("targets", true, "None")};
  d.binding = {{d.inputs[0].name, "images"}};
  d.config.reset();
  return d;
}

const std::string kSeqLoader = R"(import torch


class ModelLoader:
    def load_model(self, dtype_override=None):
        return None

    def load_inputs(self, dtype_override=None, batch_size=1):
        """Token ids and their mask."""
        inputs = {"input_ids": torch.ones((batch_size, 8), dtype=torch.long)}
        inputs["attention_mask"] = torch.ones((batch_size, 8), dtype=torch.long)
        return inputs
)";

TEST(MissingInputs, SubPatternTable) {
  const auto decoder =
      Err("ValueError", "You have to specify either decoder_input_ids or decoder_inputs_embeds.");
  const auto ok = std::optional<ProbeDoc::Error>{};
  struct Case {
    std::string name;
    ProbeDoc train, eval;
    SubPattern want;
  };
  ProbeDoc unpack = Phase("k", "train", Err("ValueError", "No handler for class X"));
  unpack.has_unpacked = true;
  unpack.unpacked_ok = false;
  ProbeDoc missing = Phase("k", "train", Err("ModuleNotFoundError", "No module named 'gliner'"));
  const std::vector<Case> cases = {
      {"missing package", missing, missing, SubPattern::kMissingPackage},
      {"stale: trains", Phase("k", "train", ok), Phase("k", "eval", ok),
       SubPattern::kNotReproduced},
      {"unpack next", unpack, Phase("k", "eval", ok), SubPattern::kNeedsUnpack},
      {"seq2seq", Phase("k", "train", decoder), Phase("k", "eval", decoder), SubPattern::kSeq2Seq},
      {"batchnorm",
       Phase("k", "train",
             Err("ValueError",
                 "Expected more than 1 value per channel when training, got input size "
                 "torch.Size([1, 16, 1, 1])")),
       Phase("k", "eval", ok), SubPattern::kBatchNorm},
      {"torchvision targets",
       Targets("SSD", "torchvision.models.detection.ssd", "tensor",
               Err("AssertionError", "targets should not be none when in training mode")),
       Phase("k", "eval", ok), SubPattern::kDetectionTargets},
      {"yolo targets", Targets("YOLOX", "yolox.models.yolox", "tensor", Err("AssertionError", "")),
       Phase("k", "eval", ok), SubPattern::kYoloTargets},
      {"stale NoneType text, a YOLO forward",
       Targets("MiniYOLOXDetector", "x", "tensor",
               Err("AttributeError", "'NoneType' object has no attribute 'max'")),
       Phase("k", "eval", ok), SubPattern::kYoloTargets},
      {"assert with targets, no family", Targets("Net", "x", "tensor", Err("AssertionError", "")),
       Phase("k", "eval", ok), SubPattern::kTargetsNoRule},
      {"the same assert in eval is not about targets",
       Targets("SSD", "torchvision.models.detection.ssd", "tensor", Err("AssertionError", "x")),
       Targets("SSD", "torchvision.models.detection.ssd", "tensor", Err("AssertionError", "x")),
       SubPattern::kMismatched},
      {"assert without a targets parameter", Phase("k", "train", Err("AssertionError", "")),
       Phase("k", "eval", ok), SubPattern::kMismatched},
      {"bfloat16 error",
       Phase("k", "train", Err("RuntimeError", "expected scalar type BFloat16 but found Float")),
       Phase("k", "eval", ok), SubPattern::kNeedsDtype},
      {"other", Phase("k", "train", Err("RuntimeError", "shape mismatch")), Phase("k", "eval", ok),
       SubPattern::kMismatched},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(SubPatternName(ClassifyInputs(c.train, c.eval)), SubPatternName(c.want)) << c.name;
  }
}

TEST(MissingInputs, Seq2SeqDictGetsDecoderInputIdsFromTheConfig) {
  const ProbeDoc train = Phase("k", "train", Err("ValueError", "decoder"));
  auto edit = MakeInputsEdit(kSeqLoader, {SubPattern::kSeq2Seq, &train, {}, false});
  ASSERT_TRUE(edit.ok()) << edit.status();
  EXPECT_NE(
      edit->text.find(
          "        inputs[\"decoder_input_ids\"] = torch.full((inputs[\"input_ids\"].shape[0], "
          "2), 2, dtype=torch.long)\n        return inputs\n"),
      std::string::npos)
      << edit->text;
  EXPECT_TRUE(edit->review.empty()) << "a dict keeps its form";
  // Without the start token there is nothing to build the ids from.
  ProbeDoc no_config = train;
  no_config.config.reset();
  auto refused = MakeInputsEdit(kSeqLoader, {SubPattern::kSeq2Seq, &no_config, {}, false});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("decoder_start_token_id"), std::string::npos);
}

TEST(MissingInputs, Seq2SeqListBecomesADictByTheBinding) {
  ProbeDoc train = Phase("k", "train", Err("ValueError", "decoder"));
  train.container = "list";
  train.inputs[0].name = "0";
  train.inputs[1].name = "1";
  train.binding = {{"0", "input_ids"}, {"1", "attention_mask"}};
  const std::string loader =
      "class ModelLoader:\n    def load_inputs(self, batch_size=1):\n"
      "        return [\n            torch.ones((batch_size, 8)),\n"
      "            torch.ones((batch_size, 8)),\n        ]\n";
  auto edit = MakeInputsEdit(loader, {SubPattern::kSeq2Seq, &train, {}, false});
  ASSERT_TRUE(edit.ok()) << edit.status();
  EXPECT_NE(edit->text.find("        inputs = [\n            torch.ones((batch_size, 8)),\n"),
            std::string::npos)
      << edit->text;
  EXPECT_NE(edit->text.find("        return {\"input_ids\": inputs[0], \"attention_mask\": "
                            "inputs[1], \"decoder_input_ids\": torch.full((inputs[0].shape[0], "
                            "2), 2, dtype=torch.long)}\n"),
            std::string::npos)
      << edit->text;
  EXPECT_TRUE(edit->text.starts_with("import torch\n")) << "torch imported for the new tensor";
  EXPECT_EQ(edit->review.size(), 2u) << "positional binding and the changed form";
  // Items that do not bind are not guessed.
  train.binding_ok = false;
  train.binding_error = "too many positional arguments";
  EXPECT_FALSE(MakeInputsEdit(loader, {SubPattern::kSeq2Seq, &train, {}, false}).ok());
}

TEST(MissingInputs, DetectionTargetsFollowTheMainInput) {
  const ProbeDoc train = Targets("SSD", "torchvision.models.detection.ssd", "tensor",
                                 Err("AssertionError", "targets should not be none"));
  const std::string loader =
      "import torch\n\nclass ModelLoader:\n    def load_inputs(self, dtype_override=None, "
      "batch_size=1):\n        images = torch.rand(batch_size, 3, 32, 32)\n"
      "        if dtype_override is not None:\n            images = images.to(dtype_override)\n"
      "        return images\n";
  auto edit = MakeInputsEdit(loader, {SubPattern::kDetectionTargets, &train, {}, false});
  ASSERT_TRUE(edit.ok()) << edit.status();
  EXPECT_NE(edit->text.find(
                "        targets = [\n            {\"boxes\": torch.tensor([[0.0, 0.0, "
                "images.shape[-1] / 2, images.shape[-2] / 2]], dtype=images.dtype), \"labels\": "
                "torch.ones(1, dtype=torch.long)}\n            for _ in range(images.shape[0])\n"
                "        ]\n        return [images, targets]\n"),
            std::string::npos)
      << edit->text;
  // A dict gets a key; a one-item list gets the targets appended.
  ProbeDoc dict = Targets("SSD", "torchvision.models.detection.ssd", "dict", {});
  const std::string dict_loader =
      "class ModelLoader:\n    def load_inputs(self):\n        return {\"images\": x}\n";
  auto d = MakeInputsEdit(dict_loader, {SubPattern::kDetectionTargets, &dict, {}, false});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_NE(d->text.find("        inputs = {\"images\": x}\n"), std::string::npos) << d->text;
  EXPECT_NE(d->text.find("        inputs[\"targets\"] = targets\n        return inputs\n"),
            std::string::npos);
  ProbeDoc list = Targets("SSD", "torchvision.models.detection.ssd", "list", {});
  auto l = MakeInputsEdit("class ModelLoader:\n    def load_inputs(self):\n        return [x]\n",
                          {SubPattern::kDetectionTargets, &list, {}, false});
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_NE(l->text.find("        return [*inputs, targets]\n"), std::string::npos) << l->text;
  // targets not next in line: no edit.
  ProbeDoc far = train;
  far.forward->params = {P("images"), P("sizes"), P("targets", true, "None")};
  EXPECT_FALSE(MakeInputsEdit(loader, {SubPattern::kDetectionTargets, &far, {}, false}).ok());
}

TEST(MissingInputs, YoloTargetsAreOneBoxPerImageAndFlagged) {
  const ProbeDoc train = Targets("YOLOX", "yolox.models", "tensor", Err("AssertionError", ""));
  const std::string loader =
      "class ModelLoader:\n    def load_inputs(self, batch_size=1):\n        # images\n"
      "        return torch.rand(batch_size, 3, 64, 64)\n";
  auto edit = MakeInputsEdit(loader, {SubPattern::kYoloTargets, &train, {}, false});
  ASSERT_TRUE(edit.ok()) << edit.status();
  EXPECT_NE(edit->text.find("        inputs = torch.rand(batch_size, 3, 64, 64)\n"),
            std::string::npos);
  EXPECT_NE(edit->text.find("        targets = torch.tensor([1.0, inputs.shape[-1] / 2, "
                            "inputs.shape[-2] / 2, inputs.shape[-1] / 4, inputs.shape[-2] / 4], "
                            "dtype=inputs.dtype).repeat(inputs.shape[0], 1, 1)\n        return "
                            "[inputs, targets]\n"),
            std::string::npos)
      << edit->text;
  ASSERT_EQ(edit->review.size(), 1u);
  EXPECT_NE(edit->review[0].find("YOLOX layout"), std::string::npos);
}

TEST(MissingInputs, BatchNormRaisesTheBatchByVariantOrDefault) {
  const std::string loader =
      "from enum import Enum\n\nclass ModelVariant(Enum):\n    BASE = \"Base\"\n\n"
      "class ModelLoader:\n    def load_inputs(\n        self, dtype_override=None, batch_size: "
      "int = 1\n    ):\n        \"\"\"Images.\n\n        More.\n        \"\"\"\n"
      "        return torch.rand(batch_size, 3, 8, 8)\n";
  ProbeDoc train = Phase("k", "train", Err("ValueError", "Expected more than 1 value"));
  // An inference entry that passes keeps its batch: only this variant's training input changes.
  auto cond = MakeInputsEdit(loader, {SubPattern::kBatchNorm, &train, {"BASE"}, false});
  ASSERT_TRUE(cond.ok()) << cond.status();
  EXPECT_NE(cond->text.find("        \"\"\"\n        if self._variant == ModelVariant.BASE and "
                            "batch_size < 2:\n            batch_size = 2  # BatchNorm in training "
                            "needs more than one value per channel\n        return"),
            std::string::npos)
      << cond->text;
  ASSERT_EQ(cond->review.size(), 1u);
  auto two = MakeInputsEdit(loader, {SubPattern::kBatchNorm, &train, {"BASE", "LARGE"}, false});
  ASSERT_TRUE(two.ok());
  EXPECT_NE(two->text.find("if self._variant in (ModelVariant.BASE, ModelVariant.LARGE) and "),
            std::string::npos);
  // Every gated variant's inference already fails: the default changes.
  auto def = MakeInputsEdit(loader, {SubPattern::kBatchNorm, &train, {"BASE"}, true});
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_NE(def->text.find("self, dtype_override=None, batch_size: int = 2\n"), std::string::npos)
      << def->text;
  // No batch_size to raise: nothing edited.
  train.load_inputs_params = {P("dtype_override", true, "None")};
  EXPECT_FALSE(MakeInputsEdit(loader, {SubPattern::kBatchNorm, &train, {"BASE"}, true}).ok());
}

// --- whole runs over fake tools --------------------------------------------------------------

class MissingInputsRunTest : public ::testing::Test {
 protected:
  static constexpr const char* kKey = "s/pytorch-Base-single_device-training";
  void SetUp() override {
    ws_ = tmp_.path();
    testing::WriteFileOrDie(ws_ / "third_party/tt_forge_models/training_utils.py",
                            "_register_attr(\"Alpha\", \"logits\")\n");
    testing::WriteFileOrDie(ws_ / "third_party/tt_forge_models/s/pytorch/loader.py", kSeqLoader);
    testing::WriteFileOrDie(
        ws_ / "tests/runner/test_config/torch/test_config_training_single_device.yaml",
        std::string("test_config:\n  ") + kKey +
            ":\n    status: NOT_SUPPORTED_SKIP\n    bringup_status: FAILED_FE_COMPILATION\n"
            "    reason: \"ValueError: You have to specify either decoder_input_ids or "
            "decoder_inputs_embeds.\"\n");
    spec_.set_shard_id("s1");
    spec_.set_loader("third_party/tt_forge_models/s/pytorch/loader.py");
    spec_.set_phase(v1::PHASE_FULL);
    spec_.set_arch("n150");
    spec_.set_playbook("missing_inputs");
    auto* e = spec_.add_entries();
    e->set_key(kKey);
    e->set_file("tests/runner/test_config/torch/test_config_training_single_device.yaml");
    e->set_status("NOT_SUPPORTED_SKIP");
    e->set_flavor("decoder_input_ids");
  }
  absl::StatusOr<v1::ShardResult> Run() {
    PlaybookContext ctx;
    ctx.spec = &spec_;
    ctx.workspace = ws_;
    ctx.tools = &tools_;
    return RunPlaybook(ctx);
  }
  std::string Loader() {
    return testing::ReadFileOrDie(ws_ / "third_party/tt_forge_models/s/pytorch/loader.py");
  }
  const ProbeDoc::Error decoder_ =
      Err("ValueError", "You have to specify either decoder_input_ids or decoder_inputs_embeds.");
  testing::TempDir tmp_;
  std::filesystem::path ws_;
  v1::ShardSpec spec_;
  FakeTools tools_;
};

TEST_F(MissingInputsRunTest, FixedSeq2SeqIsVerifiedAndPasses) {
  tools_.probes[kKey] = {{Phase(kKey, "train", decoder_), Phase(kKey, "eval", decoder_)},
                         {Phase(kKey, "train", {}), Phase(kKey, "eval", {})}};
  auto r = Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->entries_size(), 1);
  const auto& e = r->entries(0);
  EXPECT_EQ(e.fix_path(), "loader_inputs");
  EXPECT_EQ(e.disposition(), v1::EntryOutcome::DONE);
  EXPECT_EQ(e.verdict(), "pass");
  ASSERT_GE(e.edit().set_size(), 1);
  EXPECT_EQ(e.edit().set(0).value().string_value(), "EXPECTED_PASSING");
  ASSERT_EQ(r->file_edits_size(), 1);
  EXPECT_NE(r->file_edits(0).diff().find("+        inputs[\"decoder_input_ids\"] = torch.full("),
            std::string::npos);
  EXPECT_EQ(tools_.pytest_calls.size(), 1u);
}

// The edit did not remove the error: the loader goes back as it was and a person looks.
TEST_F(MissingInputsRunTest, AnEditThatDoesNotHelpIsReverted) {
  tools_.probes[kKey] = {{Phase(kKey, "train", decoder_), Phase(kKey, "eval", decoder_)}};
  tools_.cases[kKey].outcome = junit::Outcome::kFailed;
  auto r = Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Loader(), kSeqLoader);
  EXPECT_EQ(r->file_edits_size(), 0);
  const auto& e = r->entries(0);
  EXPECT_EQ(e.fix_path(), "none");
  ASSERT_GE(e.review_size(), 1);
  EXPECT_NE(e.review(0).find("the edit did not remove the error"), std::string::npos)
      << e.review(0);
}

// The edit lets the forward run and unpack_forward_output has no handler: the unpack playbook
// runs next on the edited loader, in the same shard.
TEST_F(MissingInputsRunTest, CascadesIntoUnpackOnTheEditedLoader) {
  ProbeDoc unpack = Phase(kKey, "train", Err("ValueError", "No handler for class MiniSeq"));
  unpack.has_output = true;
  unpack.output_class = "MiniSeq";
  unpack.tree = {{"type", "object"},
                 {"class", "MiniSeq"},
                 {"attrs", {{"logits", {{"type", "tensor"}, {"shape", {1, 2, 16}}}}}}};
  unpack.has_unpacked = true;
  unpack.unpacked_ok = false;
  ProbeDoc structure_fail = unpack;
  structure_fail.phase = "structure";
  ProbeDoc structure_ok = structure_fail;
  structure_ok.ok = true;
  structure_ok.error.reset();
  structure_ok.unpacked_ok = true;
  tools_.probes[kKey] = {{Phase(kKey, "train", decoder_), Phase(kKey, "eval", decoder_)},
                         {unpack, Phase(kKey, "eval", {})},
                         {structure_fail},
                         {structure_ok}};
  auto r = Run();
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& e = r->entries(0);
  EXPECT_EQ(std::vector<std::string>(e.playbooks().begin(), e.playbooks().end()),
            (std::vector<std::string>{"missing_inputs", "unpack_forward_output"}));
  EXPECT_TRUE(e.fix_path().starts_with("loader_inputs+")) << e.fix_path();
  ASSERT_EQ(r->registry_ops_size(), 1);
  EXPECT_EQ(r->registry_ops(0).cls(), "MiniSeq");
  EXPECT_NE(Loader().find("decoder_input_ids"), std::string::npos) << "the edit stays";
}

// A package the machine lacks: nothing is installed, guessed or edited; a person decides.
TEST_F(MissingInputsRunTest, MissingPackageIsRecordedForReview) {
  ProbeDoc missing = Phase(kKey, "train", Err("ModuleNotFoundError", "No module named 'mini_pkg'"));
  missing.error->module = "mini_pkg";
  missing.requirements = {{"requirements.txt", {"mini-pkg==0.1"}}};
  tools_.probes[kKey] = {{missing, missing}};
  auto r = Run();
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& e = r->entries(0);
  EXPECT_EQ(e.disposition(), v1::EntryOutcome::NEEDS_REVIEW);
  EXPECT_EQ(e.verdict(), "missing_package");
  EXPECT_FALSE(e.has_edit());
  ASSERT_EQ(e.review_size(), 1);
  EXPECT_NE(e.review(0).find("requirements.txt (pip install -r; mini-pkg==0.1)"), std::string::npos)
      << e.review(0);
  EXPECT_TRUE(tools_.pytest_calls.empty());
  EXPECT_EQ(Loader(), kSeqLoader);
}

}  // namespace
}  // namespace triage::playbooks::missing_inputs
