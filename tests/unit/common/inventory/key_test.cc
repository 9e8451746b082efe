#include "common/inventory/key.h"

#include "gtest/gtest.h"

namespace triage::inventory {
namespace {

TEST(ParseKey, Grammar) {
  struct Case {
    std::string key, model_path, framework, variant, llm, parallelism, mesh, run_mode;
  };
  const Case cases[] = {
      {"bert/question_answering/pytorch-Base-single_device-training", "bert/question_answering",
       "pytorch", "Base", "", "single_device", "", "training"},
      {"bert/token_classification/pytorch-dbmdz/bert-large-cased-finetuned-conll03-english-"
       "single_device-training",
       "bert/token_classification", "pytorch", "dbmdz/bert-large-cased-finetuned-conll03-english",
       "", "single_device", "", "training"},
      {"mgp_str_base/pytorch-single_device-training", "mgp_str_base", "pytorch", "", "",
       "single_device", "", "training"},
      {"qwen_2_5/causal_lm/pytorch-0.5B_Instruct-single_device-training", "qwen_2_5/causal_lm",
       "pytorch", "0.5B_Instruct", "", "single_device", "", "training"},
      {"foo/pytorch-v1.5+x_y-tensor_parallel-inference", "foo", "pytorch", "v1.5+x_y", "",
       "tensor_parallel", "", "inference"},
      {"albert/masked_lm/jax-Base_v2-data_parallel-inference", "albert/masked_lm", "jax", "Base_v2",
       "", "data_parallel", "", "inference"},
      {"falcon/pytorch-3_1B_Base-llm_decode-seq_1-batch_1-single_device-mesh_default-inference",
       "falcon", "pytorch", "3_1B_Base", "llm_decode-seq_1-batch_1", "single_device",
       "mesh_default", "inference"},
      {"llama/causal_lm/pytorch-3.2_1B-llm_prefill-seq_128-batch_4-single_device-mesh_default-"
       "inference",
       "llama/causal_lm", "pytorch", "3.2_1B", "llm_prefill-seq_128-batch_4", "single_device",
       "mesh_default", "inference"},
  };
  for (const auto& c : cases) {
    auto parts = ParseKey(c.key);
    ASSERT_TRUE(parts.ok()) << c.key << ": " << parts.status();
    EXPECT_EQ(parts->model_path, c.model_path) << c.key;
    EXPECT_EQ(parts->framework, c.framework) << c.key;
    EXPECT_EQ(parts->variant, c.variant) << c.key;
    EXPECT_EQ(parts->llm_params, c.llm) << c.key;
    EXPECT_EQ(parts->parallelism, c.parallelism) << c.key;
    EXPECT_EQ(parts->mesh, c.mesh) << c.key;
    EXPECT_EQ(parts->run_mode, c.run_mode) << c.key;
  }
}

TEST(ParseKey, LoaderPathUsesEverythingBeforeTheFirstPytorchSegment) {
  auto parts = ParseKey("bert/question_answering/pytorch-Base-single_device-training");
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->LoaderPath(),
            "third_party/tt_forge_models/bert/question_answering/pytorch/loader.py");
  EXPECT_EQ(parts->EntryId(), "bert/question_answering/pytorch-Base");
  auto no_variant = ParseKey("mgp_str_base/pytorch-single_device-training");
  ASSERT_TRUE(no_variant.ok());
  EXPECT_EQ(no_variant->EntryId(), "mgp_str_base/pytorch");
  EXPECT_EQ(MakeKey("bert/qa", "pytorch", "Base", "single_device", "training"),
            "bert/qa/pytorch-Base-single_device-training");
  EXPECT_EQ(MakeKey("m", "pytorch", "", "single_device", "training"),
            "m/pytorch-single_device-training");
}

TEST(ParseKey, RejectsMalformedKeys) {
  for (const char* key : {"nofw-single_device-training", "/pytorch-x-single_device-training",
                          "a/pytorch-x-single_device-testing", "a/pytorch-x-quad_device-training",
                          "a/pytorch-x", "Hiperglobal Shallow uNet"}) {
    auto parts = ParseKey(key);
    EXPECT_FALSE(parts.ok()) << key;
    EXPECT_NE(std::string(parts.status().message()).find(key), std::string::npos) << key;
  }
}

TEST(ParseKey, ModelPathMustStayInsideTheRepository) {
  for (const char* key :
       {"../../etc/x/pytorch-V-single_device-training", "a/../b/pytorch-single_device-training",
        "..//pytorch-single_device-inference", "a/..//pytorch-single_device-inference",
        "//etc/x/pytorch-single_device-inference", "/etc/x/pytorch-V-single_device-training"}) {
    auto parts = ParseKey(key);
    ASSERT_FALSE(parts.ok()) << key;
    EXPECT_EQ(parts.status().message(),
              std::string("key '") + key + "' names a model path outside the repository (" +
                  (key[0] == '/' ? "an absolute path)" : "a '..' component)"));
  }
  for (const char* key :
       {"a//b/pytorch-single_device-training", "./a/pytorch-single_device-training",
        "a/./b/pytorch-X-data_parallel-inference"}) {
    auto parts = ParseKey(key);
    ASSERT_FALSE(parts.ok()) << key;
    EXPECT_EQ(parts.status().message(),
              std::string("key '") + key + "' has a model path with an empty or '.' component");
  }
  // '..' inside a name, and '/..' in the variant (not part of the loader path), are fine.
  auto dots = ParseKey("a..b/c.d/pytorch-v/../x-single_device-training");
  ASSERT_TRUE(dots.ok()) << dots.status();
  EXPECT_EQ(dots->LoaderPath(), "third_party/tt_forge_models/a..b/c.d/pytorch/loader.py");
}

}  // namespace
}  // namespace triage::inventory
