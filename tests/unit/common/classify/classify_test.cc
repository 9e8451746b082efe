#include "common/classify/classify.h"
#include "agent/playbooks/catalog.h"

#include "gtest/gtest.h"

namespace triage::classify {
namespace {

TEST(Classifier, DefaultRulesTable) {
  struct Case {
    std::string reason, status, run_mode, playbook, flavor;
  };
  const std::string skip = "NOT_SUPPORTED_SKIP", xfail = "KNOWN_FAILURE_XFAIL";
  const Case cases[] = {
      {"tt-forge-models doesn't implement unpack_forward_output for this model.", skip, "training",
       "unpack_forward_output", "not_implemented"},
      {"No handler for class YolosObjectDetectionOutput exists in `unpack_forward_output`", skip,
       "training", "unpack_forward_output", "no_handler"},
      {"RuntimeError: 'deformable_im2col' not implemented for 'BFloat16'", skip, "training",
       "dtype_bfloat16", "op_not_implemented"},
      {"RuntimeError: mat1 and mat2 must have the same dtype, but got Float and BFloat16", xfail,
       "training", "dtype_bfloat16", "cross_dtype"},
      {"RuntimeError: Index put requires the source and destination dtypes match, got Float for "
       "the destination and BFloat16 for the source.",
       skip, "training", "dtype_bfloat16", "cross_dtype"},
      {"RuntimeError: expected scalar type Float but found BFloat16", skip, "training",
       "dtype_bfloat16", "cross_dtype"},
      // The bf16 gate needs BFloat16 *and* a signature.
      {"RuntimeError: expected scalar type Float but found Half", skip, "training", "", ""},
      {"RuntimeError: BFloat16 is slow", skip, "training", "", ""},
      {"ValueError: You have to specify either decoder_input_ids or decoder_inputs_embeds.", skip,
       "training", "missing_inputs", "decoder_input_ids"},
      {"AssertionError: targets should not be none when in training mode", skip, "training",
       "missing_inputs", "detection_targets"},
      // Reasons recorded against older environments: the probe decides what they are.
      {"Model expects targets to be passed while in training mode", skip, "training",
       "missing_inputs", "stale_suspect"},
      {"AttributeError: 'NoneType' object has no attribute 'max'", skip, "training",
       "missing_inputs", "stale_suspect"},
      {"EOFError: Ran out of input", xfail, "training", "missing_inputs", "stale_suspect"},
      {"ModuleNotFoundError: No module named 'gliner'", skip, "training", "missing_inputs",
       "missing_package"},
      {"ValueError: Expected more than 1 value per channel when training, got input size "
       "torch.Size([1, 256, 1, 1])",
       skip, "training", "missing_inputs", "batchnorm_single_value"},
      // Statuses and run modes outside the playbooks' scope.
      {"tt-forge-models doesn't implement unpack_forward_output for this model.",
       "EXPECTED_PASSING", "training", "", ""},
      {"tt-forge-models doesn't implement unpack_forward_output for this model.", skip, "inference",
       "", ""},
      {"TT_FATAL: out of memory", skip, "training", "", ""},
  };
  for (const auto& c : cases) {
    auto m = playbooks::DefaultClassifier().ClassifyReason(c.reason, c.status, c.run_mode);
    if (c.playbook.empty()) {
      EXPECT_FALSE(m.has_value()) << c.reason << " -> " << (m ? m->playbook : "");
      continue;
    }
    ASSERT_TRUE(m.has_value()) << c.reason;
    EXPECT_EQ(m->playbook, c.playbook) << c.reason;
    EXPECT_EQ(m->flavor, c.flavor) << c.reason;
  }
}

TEST(Classifier, CapturesTheClassName) {
  auto m = playbooks::DefaultClassifier().ClassifyReason(
      "No handler for class MgpstrModelOutput exists in `unpack_forward_output`.Register a "
      "handler",
      "KNOWN_FAILURE_XFAIL", "training");
  ASSERT_TRUE(m.has_value());
  ASSERT_EQ(m->captures.size(), 1u);
  EXPECT_EQ(m->captures[0], "MgpstrModelOutput");
}

TEST(Classifier, ClassifiesEntriesIncludingOverrideOnlyOnes) {
  inventory::Document doc = inventory::Document::Parse(
      "tests/runner/test_config/torch/test_config_training_single_device.yaml",
      "test_config:\n"
      "  a/pytorch-X-single_device-training:\n"
      "    arch_overrides:\n"
      "      n150:\n"
      "        status: NOT_SUPPORTED_SKIP\n"
      "        reason: \"Out of Memory: Not enough space\"\n"
      "      p150:\n"
      "        status: NOT_SUPPORTED_SKIP\n"
      "        reason: \"RuntimeError: 'lu_cpu' not implemented for 'BFloat16'\"\n"
      "  b/pytorch-single_device-training:\n"
      "    status: EXPECTED_PASSING\n"
      "  c/pytorch-single_device-training:\n"
      "    status: NOT_SUPPORTED_SKIP\n"
      "    reason: \"Flax model class removed\"\n");
  ASSERT_TRUE(doc.ok());
  auto a = playbooks::DefaultClassifier().Classify(doc.entries()[0]);
  ASSERT_TRUE(a.match.has_value());
  EXPECT_EQ(a.match->playbook, "dtype_bfloat16");
  EXPECT_EQ(a.match->arch, "p150");
  auto b = playbooks::DefaultClassifier().Classify(doc.entries()[1]);
  EXPECT_FALSE(b.match.has_value());
  EXPECT_EQ(b.why_not, "no reason");
  auto c = playbooks::DefaultClassifier().Classify(doc.entries()[2]);
  EXPECT_FALSE(c.match.has_value());
  EXPECT_EQ(c.reason, "Flax model class removed") << "the reason is kept";
  EXPECT_EQ(c.why_not, "reason matches no playbook");
}

TEST(Classifier, RulesFileErrorsNameFileLineAndColumn) {
  struct Case {
    std::string yaml, want;
  };
  const Case cases[] = {
      {"playbooks:\n  - name: x\n    flavors:\n      - name: f\n        any: ['(unclosed']\n",
       "rules.yaml:5:15: any: invalid RE2 pattern '(unclosed'"},
      {"playbooks:\n  - name: x\n    flavours: []\n", "rules.yaml:3:5: unknown playbook field"},
      {"playbooks:\n  - name: x\n    flavors: []\n", "needs a non-empty 'flavors' list"},
      {"playbooks:\n  - name: x\n    statuses: [PASSING]\n    flavors:\n      - name: f\n"
       "        any: [a]\n",
       "rules.yaml:3:15: statuses: unknown status 'PASSING'"},
      {"rules: []\n", "expected a mapping with a 'playbooks' list"},
      {"playbooks: [\n", "rules.yaml:"},
      {"playbooks:\n  - name: x\n    flavors:\n      - name: f\n        any: [a]\n  - name: x\n"
       "    flavors:\n      - name: g\n        any: [b]\n",
       "rules.yaml:6:11: playbook 'x' defined twice"},
  };
  for (const auto& c : cases) {
    auto rules = Classifier::FromYaml(c.yaml, "rules.yaml");
    ASSERT_FALSE(rules.ok()) << c.yaml;
    EXPECT_NE(std::string(rules.status().message()).find(c.want), std::string::npos)
        << rules.status() << "\nwant: " << c.want;
  }
}

TEST(Classifier, CustomRulesAndOrder) {
  auto rules = Classifier::FromYaml(
      "playbooks:\n"
      "  - name: oom\n"
      "    statuses: [KNOWN_FAILURE_XFAIL]\n"
      "    flavors:\n"
      "      - name: dram\n"
      "        any: ['Out of Memory: .*DRAM']\n",
      "custom.yaml");
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(rules->Playbooks(), std::vector<std::string>{"oom"});
  EXPECT_EQ(rules->Flavors("oom"), std::vector<std::string>{"dram"});
  EXPECT_TRUE(rules->ClassifyReason("Out of Memory: 1 B DRAM", "KNOWN_FAILURE_XFAIL", "inference"));
  EXPECT_FALSE(rules->ClassifyReason("Out of Memory: 1 B DRAM", "NOT_SUPPORTED_SKIP", "training"));
  EXPECT_EQ(
      playbooks::DefaultClassifier().Playbooks(),
      (std::vector<std::string>{"unpack_forward_output", "dtype_bfloat16", "missing_inputs"}));
}

}  // namespace
}  // namespace triage::classify
