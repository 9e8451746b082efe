// RecordOf and the test-function helpers (common/nightly/record.h): one testcase as the
// streaming intake and the confirmation runner hand it over.

#include "common/nightly/record.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/junit/junit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/pytest_xml.h"
#include "tests/support/test_support.h"
#include "yaml-cpp/yaml.h"

namespace triage::nightly {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr std::string_view kKey = "resnet/pytorch-50-single_device-inference";

junit::TestCase Case(std::string name, std::optional<std::string> tags) {
  junit::TestCase tc;
  tc.name = std::move(name);
  tc.classname = "tests.runner.test_models";
  tc.key = junit::KeyOfTestName(tc.name);
  tc.time_seconds = 41.25;
  if (tags) tc.properties.emplace_back("tags", *tags);
  tc.properties.emplace_back("owner", "tt-xla");
  return tc;
}

std::string TorchName(std::string_view key = kKey) {
  return util::StrCat("test_all_models_torch[", key, "]");
}

v1::NightlyRecord RecordOrDie(const junit::TestCase& tc, std::string_view where = "a.xml:7") {
  absl::StatusOr<std::optional<v1::NightlyRecord>> r = RecordOf(tc, where);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok() || !r->has_value()) {
    ADD_FAILURE() << "no record";
    return {};
  }
  return **r;
}

std::string ErrorOf(const junit::TestCase& tc, std::string_view where = "run/a.xml:7") {
  absl::StatusOr<std::optional<v1::NightlyRecord>> r = RecordOf(tc, where);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

TEST(TestFunctions, ModelFunctionsAndTheirFrameworks) {
  EXPECT_TRUE(IsModelTestFunction("test_all_models_torch"));
  EXPECT_TRUE(IsModelTestFunction("test_all_models_jax"));
  EXPECT_TRUE(IsModelTestFunction("test_llms_torch"));
  EXPECT_FALSE(IsModelTestFunction("test_placeholder_models"));
  EXPECT_FALSE(IsModelTestFunction("test_all_models_op_by_op"));
  EXPECT_FALSE(IsModelTestFunction(""));
  EXPECT_EQ(FrameworkOfTestFunction("test_all_models_torch"), "torch");
  EXPECT_EQ(FrameworkOfTestFunction("test_all_models_jax"), "jax");
  EXPECT_EQ(FrameworkOfTestFunction("test_llms_torch"), "torch_llm");
  EXPECT_EQ(FrameworkOfTestFunction("test_placeholder_models"), "");
}

TEST(TestFunctions, OfTestConfigFiles) {
  EXPECT_EQ(
      TestFunctionOfFile("tests/runner/test_config/torch/test_config_inference_single_device.yaml"),
      "test_all_models_torch");
  EXPECT_EQ(
      TestFunctionOfFile("tests/runner/test_config/jax/test_config_training_single_device.yaml"),
      "test_all_models_jax");
  EXPECT_EQ(TestFunctionOfFile(
                "tests/runner/test_config/torch_llm/test_config_inference_tensor_parallel.yaml"),
            "test_llms_torch");
  EXPECT_EQ(TestFunctionOfFile("tests/runner/test_config/torch/test_config_placeholders.yaml"), "");
  EXPECT_EQ(TestFunctionOfFile("tests/runner/test_config/other/x.yaml"), "");
  EXPECT_EQ(TestFunctionOfFile("tests/runner/test_config/torch/README.md"), "");
  EXPECT_EQ(TestFunctionOfFile("torch/test_config_inference_single_device.yaml"), "");
}

TEST(RecordOf, EveryFieldOfAnXfailedTestThatPassed) {
  testing::Tags tags;
  tags.specific_test_case = TorchName();
  tags.model_test_status = "ModelTestStatus.KNOWN_FAILURE_XFAIL";
  tags.guidance = {"RM_XFAIL"};
  junit::TestCase tc = Case(TorchName(), tags.Literal());
  tc.properties.insert(tc.properties.begin(),
                       {"error_message", "Known failure: see issue\n\n  second line \n3\n4th"});
  tc.outcome = junit::Outcome::kSkipped;
  tc.result_type = "pytest.xfail";
  tc.message = "Known failure: see issue";

  v1::NightlyRecord r = RecordOrDie(tc, "test-reports-n150/a.xml:12");
  EXPECT_EQ(r.test_function(), "test_all_models_torch");
  EXPECT_EQ(r.key(), kKey);
  EXPECT_EQ(r.arch(), "n150");
  EXPECT_EQ(r.outcome(), v1::NightlyRecord::XFAILED);
  EXPECT_EQ(r.error_message(), "Known failure: see issue\n  second line\n3");
  EXPECT_EQ(r.failure(), "");  // a skip's message is not a failure
  EXPECT_EQ(r.bringup_status(), "PASSED");
  EXPECT_EQ(r.model_test_status(), "KNOWN_FAILURE_XFAIL");
  EXPECT_EQ(r.parallelism(), "single_device");
  EXPECT_EQ(r.run_mode(), "inference");
  EXPECT_EQ(r.run_phase(), "default");
  EXPECT_EQ(r.model_name(), "pt_resnet_50_img_cls_hf");
  ASSERT_TRUE(r.has_pcc());
  EXPECT_DOUBLE_EQ(r.pcc(), 0.9934);
  ASSERT_TRUE(r.has_pcc_threshold());
  EXPECT_DOUBLE_EQ(r.pcc_threshold(), 0.99);
  ASSERT_TRUE(r.has_pcc_assertion_enabled());
  EXPECT_TRUE(r.pcc_assertion_enabled());
  EXPECT_THAT(r.guidance(), ElementsAre("RM_XFAIL"));
  EXPECT_EQ(r.failing_reason(), "");
  EXPECT_DOUBLE_EQ(r.duration_seconds(), 41.25);
  EXPECT_EQ(r.source(), "test-reports-n150/a.xml:12");
  EXPECT_EQ(r.crash_signal(), 0);
  EXPECT_FALSE(r.timed_out());
}

TEST(RecordOf, OutcomesFromTheDecisiveElement) {
  testing::Tags tags;
  auto outcome_of = [&](junit::Outcome o, std::string type) {
    junit::TestCase tc = Case(TorchName(), tags.Literal());
    tc.outcome = o;
    tc.result_type = std::move(type);
    return RecordOrDie(tc).outcome();
  };
  EXPECT_EQ(outcome_of(junit::Outcome::kPassed, ""), v1::NightlyRecord::PASSED);
  EXPECT_EQ(outcome_of(junit::Outcome::kFailed, ""), v1::NightlyRecord::FAILED);
  EXPECT_EQ(outcome_of(junit::Outcome::kError, ""), v1::NightlyRecord::ERROR);
  EXPECT_EQ(outcome_of(junit::Outcome::kSkipped, "pytest.skip"), v1::NightlyRecord::SKIPPED);
  EXPECT_EQ(outcome_of(junit::Outcome::kSkipped, "pytest.xfail"), v1::NightlyRecord::XFAILED);
}

TEST(RecordOf, EnumClassesGoAndStatusesAreUpperCase) {
  testing::Tags tags;
  tags.bringup_status = "BringupStatus.FAILED_RUNTIME";
  tags.model_test_status = "expected_passing";
  v1::NightlyRecord r = RecordOrDie(Case(TorchName(), tags.Literal()));
  EXPECT_EQ(r.bringup_status(), "FAILED_RUNTIME");
  EXPECT_EQ(r.model_test_status(), "EXPECTED_PASSING");

  // repr() of the enum itself, as older runners wrote it.
  tags.bringup_status = "INCORRECT_RESULT";
  std::string literal = tags.Literal();
  std::string quoted = "'INCORRECT_RESULT'";
  literal.replace(literal.find(quoted), quoted.size(),
                  "<BringupStatus.INCORRECT_RESULT: 'incorrect_result'>");
  EXPECT_EQ(RecordOrDie(Case(TorchName(), literal)).bringup_status(), "INCORRECT_RESULT");
}

TEST(RecordOf, PccNanIsKeptAndNoneLeavesItUnset) {
  testing::Tags tags;
  tags.pcc = "nan";
  tags.pcc_assertion_enabled = "False";
  v1::NightlyRecord r = RecordOrDie(Case(TorchName(), tags.Literal()));
  ASSERT_TRUE(r.has_pcc());
  EXPECT_TRUE(std::isnan(r.pcc()));
  EXPECT_FALSE(r.pcc_assertion_enabled());

  tags.pcc = "None";
  tags.pcc_threshold = "None";
  tags.pcc_assertion_enabled = "None";
  r = RecordOrDie(Case(TorchName(), tags.Literal()));
  EXPECT_FALSE(r.has_pcc());
  EXPECT_FALSE(r.has_pcc_threshold());
  EXPECT_FALSE(r.has_pcc_assertion_enabled());

  tags.pcc = "";  // the comparison never ran: no keys at all
  r = RecordOrDie(Case(TorchName(), tags.Literal()));
  EXPECT_FALSE(r.has_pcc());
  EXPECT_FALSE(r.has_pcc_threshold());

  tags.pcc = "1";  // an int
  tags.pcc_threshold = "0.97";
  r = RecordOrDie(Case(TorchName(), tags.Literal()));
  EXPECT_DOUBLE_EQ(r.pcc(), 1.0);
}

TEST(RecordOf, FailingReasonIsItsName) {
  testing::Tags tags;
  tags.failing_reason = "'UNSUPPORTED_OP'";
  EXPECT_EQ(RecordOrDie(Case(TorchName(), tags.Literal())).failing_reason(), "UNSUPPORTED_OP");
}

TEST(RecordOf, CrashSignalFromPytestForked) {
  testing::Tags tags;
  tags.reduced = true;
  tags.bringup_status = "UNKNOWN";
  junit::TestCase tc = Case(TorchName(), tags.Literal());
  tc.outcome = junit::Outcome::kError;
  tc.message =
      "failed on teardown with \"tests/runner/test_models.py:343: running the test CRASHED with "
      "signal 6\"";
  tc.text = "tests/runner/test_models.py:343: running the test CRASHED with signal 6";
  v1::NightlyRecord r = RecordOrDie(tc);
  EXPECT_EQ(r.outcome(), v1::NightlyRecord::ERROR);
  EXPECT_EQ(r.crash_signal(), 6);
  EXPECT_EQ(r.bringup_status(), "UNKNOWN");
  EXPECT_EQ(r.arch(), "n150");
  EXPECT_FALSE(r.has_pcc());
  EXPECT_TRUE(r.guidance().empty());
  EXPECT_FALSE(r.timed_out());
  EXPECT_THAT(r.failure(), HasSubstr("CRASHED with signal 6"));

  // Only in the text.
  tc.message = "worker crashed";
  tc.text = "some output\nrunning the test CRASHED with signal 11\n";
  EXPECT_EQ(RecordOrDie(tc).crash_signal(), 11);
}

TEST(RecordOf, TimeoutMarkers) {
  testing::Tags tags;
  junit::TestCase tc = Case(TorchName(), tags.Literal());
  tc.outcome = junit::Outcome::kFailed;
  tc.message = "Failed: Timeout >3600.0s";
  EXPECT_TRUE(RecordOrDie(tc).timed_out());
  tc.message = "RuntimeError: boom";
  tc.text = "+++++++++++ Timeout +++++++++++\n...\nE   Failed: Timeout (the runner's own)";
  EXPECT_TRUE(RecordOrDie(tc).timed_out());
  tc.text = "E   RuntimeError: boom";
  EXPECT_FALSE(RecordOrDie(tc).timed_out());
  // A passing test's output never makes it a timeout.
  tc.outcome = junit::Outcome::kPassed;
  tc.message = "Failed: Timeout >1s";
  EXPECT_FALSE(RecordOrDie(tc).timed_out());
}

TEST(RecordOf, FailureIsTheMessageAttributeFirstLinesCapped) {
  testing::Tags tags;
  junit::TestCase tc = Case(TorchName(), tags.Literal());
  tc.outcome = junit::Outcome::kFailed;
  tc.message = "RuntimeError: TT_FATAL @ conv2d.cpp:88\ninfo:\n\nbacktrace:\n--- 0x1234\n";
  EXPECT_EQ(RecordOrDie(tc).failure(), "RuntimeError: TT_FATAL @ conv2d.cpp:88\ninfo:\nbacktrace:");

  // One long line of multi-byte characters: cut at kMaxRecordTextBytes on a UTF-8 boundary.
  std::string line;
  while (line.size() < 3 * kMaxRecordTextBytes) line += "é";
  tc.message = "x" + line;
  std::string failure = RecordOrDie(tc).failure();
  EXPECT_LE(failure.size(), kMaxRecordTextBytes);
  EXPECT_GE(failure.size(), kMaxRecordTextBytes - 1);
  EXPECT_EQ(failure.substr(failure.size() - 2), "é");

  // Bytes that are not UTF-8 (a reader that passes them through) become U+FFFD.
  tc.message = "bad \xff byte";
  EXPECT_EQ(RecordOrDie(tc).failure(), "bad \xEF\xBF\xBD byte");
}

TEST(RecordOf, JaxAndLlmIds) {
  testing::Tags tags;
  tags.test_name = "test_all_models_jax";
  v1::NightlyRecord r = RecordOrDie(
      Case("test_all_models_jax[gpt2/causal_lm/jax-Base-single_device-inference]", tags.Literal()));
  EXPECT_EQ(r.test_function(), "test_all_models_jax");
  EXPECT_EQ(r.key(), "gpt2/causal_lm/jax-Base-single_device-inference");

  tags.test_name = "test_llms_torch";
  tags.run_phase = "llm_decode";
  r = RecordOrDie(Case(
      "test_llms_torch[qwen_2_5/causal_lm/pytorch-0.5B_Instruct-llm_decode-seq_1-batch_1-single_"
      "device-mesh_default-inference]",
      tags.Literal()));
  EXPECT_EQ(r.test_function(), "test_llms_torch");
  EXPECT_EQ(r.key(),
            "qwen_2_5/causal_lm/pytorch-0.5B_Instruct-llm_decode-seq_1-batch_1-single_device-mesh_"
            "default-inference");
  EXPECT_EQ(r.run_phase(), "llm_decode");
}

TEST(RecordOf, OtherFunctionsAreNotModelTests) {
  for (std::string name :
       {"test_placeholder_models[some_model]",
        "test_all_models_op_by_op[resnet/pytorch-50-single_device-inference]", "test_something",
        "test_all_models_torchx[a/pytorch-single_device-inference]"}) {
    absl::StatusOr<std::optional<v1::NightlyRecord>> r = RecordOf(Case(name, "[1, 2]"), "a:1");
    ASSERT_TRUE(r.ok()) << name << ": " << r.status();
    EXPECT_FALSE(r->has_value()) << name;
  }
}

TEST(RecordOf, WithoutTagsOrArchTheRecordHasNoArch) {
  v1::NightlyRecord r = RecordOrDie(Case(TorchName(), std::nullopt));
  EXPECT_EQ(r.arch(), "");
  EXPECT_EQ(r.key(), kKey);

  testing::Tags tags;
  tags.arch = "None";
  r = RecordOrDie(Case(TorchName(), tags.Literal()));
  EXPECT_EQ(r.arch(), "");
  EXPECT_EQ(r.bringup_status(), "PASSED");
}

TEST(RecordOf, KeysThatAreNotTestConfigKeysAreRejected) {
  testing::Tags tags;
  for (const std::string& key : std::vector<std::string>{
           "../../etc/passwd/pytorch-single_device-inference",
           "/abs/pytorch-single_device-inference", "a/pytorch-b..c-single_device-inference",
           "a\\b/pytorch-single_device-inference", "a/pytorch-b\x01-single_device-inference",
           "not a key", "", "a/pytorch-" + std::string(600, 'v') + "-single_device-inference"}) {
    std::string error = ErrorOf(Case(TorchName(key), tags.Literal()));
    EXPECT_THAT(error, StartsWith("run/a.xml:7: test_all_models_torch[")) << key;
    EXPECT_THAT(error, HasSubstr("not a test-config key")) << key;
  }
  EXPECT_THAT(ErrorOf(Case(TorchName("../x/pytorch-single_device-inference"), tags.Literal())),
              HasSubstr("'..'"));
  EXPECT_THAT(ErrorOf(Case(TorchName("/x/pytorch-single_device-inference"), tags.Literal())),
              HasSubstr("starts with '/'"));
}

TEST(RecordOf, KeysOfAnyGrammarAreRecords) {
  // The key grammar is the checkout's (the mapping reads it): a key of an older runner, or one
  // no runner makes, is a record as long as it is not hostile.
  testing::Tags tags;
  for (const std::string& key : std::vector<std::string>{
           "gemma/pytorch-google/gemma-2-9b-it-single_device-full-inference",
           "hrnet/pytorch-hrnetv2_w48_osmr-full-inference", "nofw-single_device-training",
           "a/pytorch-x-single_device-testing"}) {
    EXPECT_TRUE(CheckKey(key).ok()) << key << ": " << CheckKey(key);
    EXPECT_EQ(RecordOrDie(Case(TorchName(key), tags.Literal())).key(), key);
  }
}

TEST(RecordOf, TagsMustBeALiteralDict) {
  EXPECT_THAT(ErrorOf(Case(TorchName(), "['n150', 'PASSED']")),
              HasSubstr("run/a.xml:7: test_all_models_torch[resnet/pytorch-50-single_device-"
                        "inference]: the tags property is a list, not a dict"));
  EXPECT_THAT(ErrorOf(Case(TorchName(), "'n150'")), HasSubstr("is a string, not a dict"));
  EXPECT_THAT(ErrorOf(Case(TorchName(), "{\"arch\": true}")),
              HasSubstr("the tags property is not a Python literal"));
  EXPECT_THAT(ErrorOf(Case(TorchName(), "{'arch': 'n150'")),
              AllOf(StartsWith("run/a.xml:7: "), HasSubstr("not a Python literal")));
}

TEST(RecordOf, AnArchThatIsNoArchNameIsRejected) {
  testing::Tags tags;
  tags.arch = "'n150\\nstatus: EXPECTED_PASSING'";
  EXPECT_THAT(ErrorOf(Case(TorchName(), tags.Literal())),
              AllOf(StartsWith("run/a.xml:7: "), HasSubstr("is not an arch name")));
  tags.arch = "'n300-llmbox'";
  EXPECT_EQ(RecordOrDie(Case(TorchName(), tags.Literal())).arch(), "n300-llmbox");
}

TEST(RecordOf, APropertyOverTheLimitIsRejected) {
  testing::Tags tags;
  junit::TestCase tc = Case(TorchName(), tags.Literal());
  tc.properties.emplace_back("error_message", std::string(kMaxPropertyBytes + 1, 'x'));
  EXPECT_THAT(ErrorOf(tc), AllOf(StartsWith("run/a.xml:7: property 'error_message' is "),
                                 HasSubstr("over the limit")));
}

TEST(CheckKey, EveryKeyOfTtXlasTestConfigFilesPasses) {
  // The key alphabet is derived from these files: every key under `test_config:` of every
  // tests/runner/test_config/**/*.yaml (the placeholders file lists model names for
  // test_placeholder_models, which is not a model test function, under another mapping).
  TRIAGE_REQUIRE_SHARED_DATA(dir);
  const std::filesystem::path root = dir / "head/tests/runner/test_config";
  ASSERT_TRUE(std::filesystem::is_directory(root)) << root;
  int files = 0, keys = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(root)) {
    if (!f.is_regular_file() || f.path().extension() != ".yaml") continue;
    ++files;
    YAML::Node doc = YAML::LoadFile(f.path().string());
    const YAML::Node config = doc["test_config"];
    if (!config || !config.IsMap()) continue;
    for (const auto& item : config) {
      const std::string key = item.first.as<std::string>();
      ++keys;
      EXPECT_TRUE(CheckKey(key).ok()) << f.path() << ": " << key << ": " << CheckKey(key);
    }
  }
  EXPECT_GE(files, 10);
  EXPECT_GT(keys, 1900);
}

TEST(CheckKey, OnlyTheKeyAlphabet) {
  EXPECT_TRUE(CheckKey("qwen_2_5/causal_lm/pytorch-0.5B_Instruct-llm_decode-seq_1-batch_1-single_"
                       "device-mesh_default-inference")
                  .ok());
  EXPECT_TRUE(CheckKey("stable_diffusion/pytorch-v1.5+lora-single_device-inference").ok());
  // A Cyrillic 'е' (U+0435) for the Latin one; a right-to-left override (U+202E); a zero-width
  // space; a full-width slash; ASCII outside the alphabet.
  for (auto [key, why] : std::vector<std::pair<std::string, std::string>>{
           {"r\xD0\xB5snet/pytorch-50-single_device-inference",
            "character 2 is U+0435, not of tt-xla's key alphabet (ASCII letters, digits, '_', "
            "'-', '.', '/' and '+')"},
           {"resnet/pytorch-\xE2\x80\xAE"
            "05-single_device-inference",
            "character 16 is U+202E"},
           {"resnet/pytorch-\xE2\x80\x8B"
            "50-single_device-inference",
            "character 16 is U+200B"},
           {"resnet\xEF\xBC\x8Fpytorch-50-single_device-inference", "character 7 is U+FF0F"},
           {"resnet/pytorch-50:x-single_device-inference", "character 18 is U+003A ':'"},
           {"resnet/pytorch-50*-single_device-inference", "character 18 is U+002A '*'"},
           {"resnet/pytorch-$(id)-single_device-inference", "character 16 is U+0024 '$'"}}) {
    absl::Status st = CheckKey(key);
    ASSERT_FALSE(st.ok()) << key;
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(st.message()), HasSubstr(why)) << key;
    // The message shows the key without the character itself.
    EXPECT_EQ(std::string(st.message()).find("\xE2\x80"), std::string::npos) << key;
  }
  EXPECT_EQ(std::string(CheckKey("resnet/pytorch-\xE2\x80\xAE"
                                 "05-single_device-inference")
                            .message()),
            "key 'resnet/pytorch-<U+202E>05-single_device-inference' is not a test-config key: "
            "character 16 is U+202E, not of tt-xla's key alphabet (ASCII letters, digits, '_', "
            "'-', '.', '/' and '+')");
  // RecordOf refuses such a testcase, naming where it is.
  testing::Tags tags;
  EXPECT_THAT(
      ErrorOf(Case(TorchName("r\xD0\xB5snet/pytorch-50-single_device-inference"), tags.Literal())),
      AllOf(StartsWith("run/a.xml:7: test_all_models_torch[r<U+0435>snet/pytorch-50-"),
            HasSubstr("U+0435")));
}

TEST(CheckPcc, ACorrelationAndAThreshold) {
  v1::NightlyRecord r;
  EXPECT_TRUE(CheckPcc(r).ok());  // none set
  for (double pcc : {-1.0, -0.25, 0.0, 0.99, 1.0, std::numeric_limits<double>::quiet_NaN()}) {
    r.set_pcc(pcc);
    EXPECT_TRUE(CheckPcc(r).ok()) << pcc;
  }
  for (auto [pcc, text] : std::vector<std::pair<double, std::string>>{
           {1.5, "pcc 1.5 is not a correlation in [-1, 1]"},
           {std::numeric_limits<double>::infinity(), "pcc inf is not a correlation in [-1, 1]"},
           {-std::numeric_limits<double>::infinity(), "pcc -inf is not a correlation in [-1, 1]"},
           {1e308, "pcc 1e+308 is not a correlation in [-1, 1]"},
           {-1.0001, "pcc -1.0001 is not a correlation in [-1, 1]"}}) {
    r.set_pcc(pcc);
    absl::Status st = CheckPcc(r);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << pcc;
    EXPECT_EQ(st.message(), text);
  }
  r.set_pcc(0.99);
  for (double t : {0.0, 0.5, 1.0}) {
    r.set_pcc_threshold(t);
    EXPECT_TRUE(CheckPcc(r).ok()) << t;
  }
  for (double t : {-0.1, 1.5, std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::quiet_NaN()}) {
    r.set_pcc_threshold(t);
    EXPECT_THAT(std::string(CheckPcc(r).message()),
                AllOf(StartsWith("pcc_threshold "), HasSubstr("is not a threshold in [0, 1]")))
        << t;
  }
}

TEST(RecordOf, OnlyTheTagsARecordReadsAreBuilt) {
  // A huge value under a key no record reads is checked and skipped: the record is read.
  testing::Tags tags;
  std::string literal = tags.Literal();
  std::string filler = "'model_info_big': [";
  for (int i = 0; i < 30000; ++i) filler += "{'a': [1, 2.5, None, 'x']}, ";
  filler += "], ";
  literal.insert(1, filler);
  v1::NightlyRecord r = RecordOrDie(Case(TorchName(), literal));
  EXPECT_EQ(r.arch(), "n150");
  EXPECT_DOUBLE_EQ(r.pcc(), 0.9934);

  // Its syntax is still checked.
  std::string broken = literal;
  broken.replace(broken.find("'x']}"), 5, "'x']");
  EXPECT_THAT(ErrorOf(Case(TorchName(), broken)),
              AllOf(StartsWith("run/a.xml:7: "), HasSubstr("not a Python literal")));

  // A key a record reads whose value holds more than 10,000 items: refused.
  tags.guidance.assign(20000, "RM_XFAIL");
  EXPECT_THAT(ErrorOf(Case(TorchName(), tags.Literal())),
              AllOf(StartsWith("run/a.xml:7: test_all_models_torch["),
                    HasSubstr("the tags property is not a test's tags: "),
                    HasSubstr("more than 10000 items")));
}

}  // namespace
}  // namespace triage::nightly
