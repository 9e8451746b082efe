#include "common/inventory/document.h"

#include <string>
#include <vector>

#include "common/inventory/editor.h"

#include "gtest/gtest.h"

namespace triage::inventory {
namespace {

constexpr char kPath[] = "tests/runner/test_config/torch/test_config_training_single_device.yaml";

constexpr char kGood[] =
    "# SPDX header\n"
    "test_config:\n"
    "  a/pytorch-X-single_device-training:\n"
    "    status: NOT_SUPPORTED_SKIP\n"
    "    bringup_status: FAILED_FE_COMPILATION\n"
    "    reason: \"tt-forge-models doesn't implement unpack_forward_output (#8931) x\" # why\n"
    "  # old/pytorch-Y-single_device-training:\n"
    "  #   status: NOT_SUPPORTED_SKIP\n"
    "  b/c/pytorch-single_device-training:\n"
    "    status: expected_passing\n"
    "    markers: [push, \"nightly\"]\n"
    "    required_pcc: 0.98\n"
    "    arch_overrides:\n"
    "      p150:\n"
    "        status: KNOWN_FAILURE_XFAIL\n"
    "        supported_archs:\n"
    "          - p150 # inline\n"
    "\n";

TEST(Document, ParsesEntriesSpansAndFields) {
  Document doc = Document::Parse(kPath, kGood);
  ASSERT_TRUE(doc.ok()) << doc.diagnostics().front().ToString();
  EXPECT_EQ(doc.framework(), "torch");
  EXPECT_EQ(doc.run_mode(), "training");
  EXPECT_EQ(doc.parallelism(), "single_device");
  ASSERT_EQ(doc.entries().size(), 2u);
  const Entry& a = doc.entries()[0];
  EXPECT_EQ(a.key, "a/pytorch-X-single_device-training");
  EXPECT_EQ(a.first_line, 2);
  EXPECT_EQ(a.last_line, 5) << "comments after an entry are not part of it";
  EXPECT_EQ(a.Status(), "NOT_SUPPORTED_SKIP");
  EXPECT_EQ(a.StringField("reason"),
            "tt-forge-models doesn't implement unpack_forward_output (#8931) x");
  EXPECT_EQ(a.loader, "third_party/tt_forge_models/a/pytorch/loader.py");
  const Entry& b = doc.entries()[1];
  EXPECT_EQ(b.first_line, 8);
  EXPECT_EQ(b.last_line, 16);
  EXPECT_EQ(b.Status(), "EXPECTED_PASSING") << "lower-case values are accepted";
  EXPECT_EQ(b.StatusForArch("p150"), "KNOWN_FAILURE_XFAIL");
  EXPECT_EQ(b.StatusForArch("n150"), "EXPECTED_PASSING");
  EXPECT_EQ(b.OverrideArchs(), std::vector<std::string>{"p150"});
  EXPECT_EQ(b.FieldNamesForArch("n150"),
            (std::vector<std::string>{"status", "markers", "required_pcc"}));
  EXPECT_EQ(b.FieldNamesForArch("p150"),
            (std::vector<std::string>{"status", "markers", "required_pcc", "supported_archs"}));
  EXPECT_EQ(b.Field("required_pcc")->kind, Value::Kind::kFloat);
  EXPECT_TRUE(b.Field("markers")->flow);
  EXPECT_EQ(b.parts->model_path, "b/c");
  EXPECT_EQ(doc.Find("old/pytorch-Y-single_device-training"), nullptr)
      << "commented-out entries are not entries";
}

struct BadCase {
  std::string name;
  std::string text;
  std::string want;  // expected "line:col: message" fragment of the first error
};

std::string FirstError(const Document& doc) {
  for (const auto& d : doc.diagnostics()) {
    if (d.severity == util::Severity::kError) return d.ToString();
  }
  return "";
}

TEST(Document, ReportsEveryProblemWithFileLineColumn) {
  const std::string head = "test_config:\n  a/pytorch-X-single_device-training:\n";
  const BadCase cases[] = {
      {"tab indentation", head + "\tstatus: EXPECTED_PASSING\n",
       ":3:1: tab character in indentation"},
      {"unclosed quote at end", head + "    status: NOT_SUPPORTED_SKIP\n    reason: \"abc\n",
       ":4:13: unclosed double-quoted string"},
      {"unclosed quote mid-file",
       head + "    reason: \"abc\n    status: NOT_SUPPORTED_SKIP\n  b/pytorch-Y-single_device-" +
           "training:\n    status: \"EXPECTED_PASSING\"\n",
       ":3:13: unclosed double-quoted string"},
      {"conflict marker", head + "<<<<<<< HEAD\n    status: EXPECTED_PASSING\n=======\n",
       ":3:1: merge conflict marker '<<<<<<<'"},
      {"non-UTF-8", head + "    reason: \"caf\xE9\"\n", ":3:17: invalid UTF-8 byte 0xe9"},
      {"CRLF", head + "    status: EXPECTED_PASSING\r\n",
       ":3:29: uses CRLF line endings (first at line 3, 1 line(s) in all); test-config files use "
       "LF only"},
      {"lone CR", head + "    status: EXPECTED_PASSING\r    reason: \"x\"\n",
       ":3:29: contains carriage return characters (first at line 3, 1 in all)"},
      {"NUL byte", head + "    reason: \"a" + '\0' + "b\"\n", ":3:15: contains a NUL byte"},
      {"NUL byte in a comment", head + "    status: EXPECTED_PASSING # " + '\0' + "\n",
       ":3:32: contains a NUL byte"},
      {"duplicate key",
       head + "    status: EXPECTED_PASSING\n  a/pytorch-X-single_device-training:\n" +
           "    status: EXPECTED_PASSING\n",
       ":4:3: duplicate entry key 'a/pytorch-X-single_device-training' (first at line 2)"},
      {"duplicate field", head + "    status: EXPECTED_PASSING\n    status: KNOWN_FAILURE_XFAIL\n",
       ":4:5: duplicate field 'status' (first at line 3)"},
      {"unknown field", head + "    status: EXPECTED_PASSING\n    statsu: X\n",
       ":4:5: unknown field 'statsu'"},
      {"unknown field in override",
       head + "    arch_overrides:\n      n150:\n        reasn: \"x\"\n",
       ":5:9: unknown field 'reasn' in arch_overrides.n150"},
      {"invalid status", head + "    status: PASSING\n", ":3:13: status: invalid value 'PASSING'"},
      {"invalid bringup status", head + "    bringup_status: Failed_Runtime\n",
       ":3:21: bringup_status: invalid value 'Failed_Runtime'"},
      {"unknown arch in overrides",
       head + "    arch_overrides:\n      n151:\n        status: " + "EXPECTED_PASSING\n",
       ":4:7: arch_overrides: unknown arch 'n151'"},
      {"unknown arch in supported_archs", head + "    supported_archs: [n150, blackhole]\n",
       ":3:29: supported_archs: unknown arch 'blackhole'"},
      {"wrong type bool", head + "    assert_pcc: maybe\n",
       ":3:17: assert_pcc: expected true or false, got string maybe"},
      {"wrong type number", head + "    required_pcc: \"0.98\"\n",
       ":3:19: required_pcc: expected a number, got string 0.98"},
      {"pcc below 0", head + "    required_pcc: -7\n",
       ":3:19: required_pcc: -7 is out of range (expected a number from 0 to 1)"},
      {"pcc above 1", head + "    required_pcc: 1.01\n",
       ":3:19: required_pcc: 1.01 is out of range (expected a number from 0 to 1)"},
      {"pcc not a number", head + "    required_pcc: .nan\n",
       ":3:19: required_pcc: .nan is out of range (expected a number from 0 to 1)"},
      {"negative atol", head + "    required_atol: -0.5\n",
       ":3:20: required_atol: -0.5 is out of range (expected a number >= 0)"},
      {"infinite rtol", head + "    allclose_rtol: .inf\n",
       ":3:20: allclose_rtol: .inf is out of range (expected a number >= 0)"},
      {"pcc out of range in an override",
       head + "    arch_overrides:\n      p150:\n        required_pcc: 2\n",
       ":5:23: arch_overrides.p150.required_pcc: 2 is out of range"},
      {"negative batch size", head + "    batch_size: -4\n",
       ":3:17: batch_size: expected a positive integer, got integer -4"},
      {"quoted boolean", head + "    assert_pcc: \"false\"\n",
       ":3:17: assert_pcc: expected true or false, got string false"},
      {"wrong type list", head + "    markers: push\n",
       ":3:14: markers: expected a list, got string push"},
      {"optimization level", head + "    optimization_level: 3\n",
       ":3:25: optimization_level: expected 0, 1 or 2"},
      {"override nests overrides",
       head + "    arch_overrides:\n      n150:\n        arch_overrides:\n          p150:\n" +
           "            status: EXPECTED_PASSING\n",
       ":6:11: arch_overrides.n150.arch_overrides: not allowed inside arch_overrides"},
      {"alias",
       head + "    status: &s EXPECTED_PASSING\n  b/pytorch-Y-single_device-training:\n" +
           "    status: *s\n",
       ":3:13: anchors (&name) are not supported"},
      {"bad key grammar",
       "test_config:\n  a-single_device-training:\n    status: EXPECTED_PASSING\n",
       ":2:3: key 'a-single_device-training' does not match"},
      {"key leaves the repository",
       "test_config:\n  ../../etc/x/pytorch-V-single_device-training:\n    status: "
       "EXPECTED_PASSING\n",
       ":2:3: key '../../etc/x/pytorch-V-single_device-training' names a model path outside the "
       "repository (a '..' component)"},
      {"absolute model path",
       "test_config:\n  /etc/x/pytorch-single_device-training:\n    status: EXPECTED_PASSING\n",
       ":2:3: key '/etc/x/pytorch-single_device-training' names a model path outside the "
       "repository (an absolute path)"},
      {"wrong top-level key",
       "tests_config:\n  a/pytorch-X-single_device-training:\n" +
           std::string("    status: EXPECTED_PASSING\n"),
       ":1:1: unknown top-level key 'tests_config' (expected 'test_config')"},
      {"entry without fields", head + "  b/pytorch-Y-single_device-training:\n    status: X\n",
       ":2:3: entry 'a/pytorch-X-single_device-training' has no fields"},
      {"yaml syntax", head + "    status: [a, b\n", ":"},
      {"two documents", head + "    status: EXPECTED_PASSING\n---\ntest_config: {}\n",
       "more than one YAML document"},
      // yaml-cpp starts a new document for ever here; the second one ends the read
      // (tests/fuzz/regressions/inventory).
      {"stray comma", "# c\n,\n" + head, "more than one YAML document"},
  };
  for (const auto& c : cases) {
    Document doc = Document::Parse(kPath, c.text);
    EXPECT_FALSE(doc.ok()) << c.name;
    std::string first = FirstError(doc);
    EXPECT_NE(first.find(c.want), std::string::npos)
        << c.name << "\n  got:  " << first << "\n  want: " << c.want;
    EXPECT_EQ(first.rfind(kPath, 0), 0u) << c.name << ": every message starts with the file";
  }
}

TEST(Document, CrlfFileIsOneError) {
  std::string text = std::string(kGood);
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  Document doc = Document::Parse(kPath, crlf);
  ASSERT_EQ(doc.diagnostics().size(), 1u) << FirstError(doc);
  EXPECT_EQ(doc.diagnostics()[0].ToString(),
            std::string(kPath) +
                ":1:14: uses CRLF line endings (first at line 1, 18 line(s) in all); test-config "
                "files use LF only");
  EXPECT_TRUE(doc.entries().empty());
}

TEST(Document, DeepNestingIsAnErrorNotACrash) {
  const std::string head = "test_config:\n  a/pytorch-X-single_device-training:\n    markers: ";
  struct Case {
    std::string name, text;
  };
  std::string compact = head + "\n      ";
  for (int i = 0; i < 10000; ++i) compact += "- ";
  compact += "x\n";
  std::string maps = "a: ";
  for (int i = 0; i < 10000; ++i) maps += "{a: ";
  const Case cases[] = {
      {"flow lists", head + std::string(10000, '[') + "\n"},
      {"flow lists, closed", head + std::string(10000, '[') + std::string(10000, ']') + "\n"},
      {"flow maps", maps + "\n"},
      {"compact block lists", compact},
  };
  for (const auto& c : cases) {
    Document doc = Document::Parse(kPath, c.text);
    ASSERT_FALSE(doc.ok()) << c.name;
    const std::string first = FirstError(doc);
    EXPECT_NE(first.find("nested deeper than 100 levels"), std::string::npos)
        << c.name << ": " << first;
    EXPECT_EQ(first.rfind(kPath, 0), 0u) << c.name;
  }
  // At the limit itself (the file's mapping, test_config's mapping, the entry's mapping and 97
  // lists): parsed, no nesting error.
  Document at_limit =
      Document::Parse(kPath, head + std::string(97, '[') + std::string(97, ']') + "\n");
  for (const auto& d : at_limit.diagnostics()) {
    EXPECT_EQ(d.message.find("nested deeper"), std::string::npos) << d.ToString();
  }
  Document over = Document::Parse(kPath, head + std::string(98, '[') + std::string(98, ']') + "\n");
  EXPECT_NE(FirstError(over).find(":3:111: nested deeper than 100 levels"), std::string::npos)
      << FirstError(over);
}

TEST(Document, SizeLimitIsConfigurable) {
  ParseOptions options;
  options.max_bytes = 16;
  Document doc = Document::Parse(kPath, kGood, options);
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(FirstError(doc).find("over the limit of 16 bytes"), std::string::npos);
}

TEST(Document, KeyInTheWrongFileIsAWarning) {
  Document doc = Document::Parse(
      "tests/runner/test_config/torch/test_config_inference_data_parallel.yaml",
      "test_config:\n  a/pytorch-X-single_device-inference:\n    status: EXPECTED_PASSING\n");
  EXPECT_TRUE(doc.ok());
  ASSERT_EQ(doc.diagnostics().size(), 1u);
  EXPECT_NE(doc.diagnostics()[0].ToString().find(
                ":2:3: warning: key 'a/pytorch-X-single_device-inference' has parallelism "
                "'single_device' but this file holds data_parallel entries"),
            std::string::npos)
      << doc.diagnostics()[0].ToString();
}

// December 2025's runner: an op-by-op segment between parallelism and run mode.
KeyGrammar OpByOpGrammar(bool with_parallelism) {
  KeyGrammar g;
  if (with_parallelism) g.segments.push_back({"parallelism", {"single_device", "data_parallel"}});
  g.segments.push_back({"op_by_op", {"full", "op_by_op_torch"}});
  g.segments.push_back({"run_mode", {"inference", "training"}});
  g.source = "tests/runner/test_models.py:301";
  return g;
}

TEST(Document, KeysOfTheCheckoutsGrammar) {
  const std::string path =
      "tests/runner/test_config/torch/test_config_inference_single_device.yaml";
  const std::string text =
      "test_config:\n"
      "  gemma/pytorch-google/gemma-2-9b-it-single_device-full-inference:\n"
      "    status: EXPECTED_PASSING\n"
      "  bert/question_answering/pytorch-Base-single_device-op_by_op_torch-inference:\n"
      "    status: KNOWN_FAILURE_XFAIL\n";
  // With today's grammar every key is an error.
  Document today = Document::Parse(path, text);
  EXPECT_EQ(util::CountErrors(today.diagnostics()), 2);
  EXPECT_NE(FirstError(today).find(
                ":2:3: key 'gemma/pytorch-google/gemma-2-9b-it-single_device-full-inference' does "
                "not match <model_path>/<framework>[-<variant>]-<parallelism>-<run_mode>: no "
                "single_device/data_parallel/tensor_parallel segment"),
            std::string::npos)
      << FirstError(today);

  const KeyGrammar grammar = OpByOpGrammar(/*with_parallelism=*/true);
  ParseOptions options;
  options.grammar = &grammar;
  Document doc = Document::Parse(path, text, options);
  EXPECT_TRUE(doc.diagnostics().empty()) << doc.diagnostics().front().ToString();
  EXPECT_EQ(doc.grammar().source, grammar.source);
  ASSERT_EQ(doc.entries().size(), 2u);
  const Entry& gemma = doc.entries()[0];
  EXPECT_EQ(gemma.loader, "third_party/tt_forge_models/gemma/pytorch/loader.py");
  ASSERT_TRUE(gemma.parts.has_value());
  EXPECT_EQ(gemma.parts->variant, "google/gemma-2-9b-it");
  EXPECT_EQ(gemma.parts->parallelism, "single_device");
  EXPECT_EQ(gemma.parts->segments,
            (std::vector<std::pair<std::string, std::string>>{{"op_by_op", "full"}}));
  EXPECT_EQ(doc.entries()[1].loader,
            "third_party/tt_forge_models/bert/question_answering/pytorch/loader.py");

  // Edits re-read the file with its grammar, and a created key must be of it.
  EntryEdit edit;
  edit.key = gemma.key;
  edit.set.emplace_back("status", Value::String("KNOWN_FAILURE_XFAIL"));
  EntryEdit create;
  create.key = "m/pytorch-single_device-full-inference";
  create.create = true;
  create.set.emplace_back("status", Value::String("EXPECTED_PASSING"));
  auto edited = ApplyEdits(doc, std::vector<EntryEdit>{edit, create});
  ASSERT_TRUE(edited.ok()) << edited.status();
  EXPECT_TRUE(Document::Parse(path, *edited, options).ok());
  create.key = "m/pytorch-single_device-inference";
  auto refused = ApplyEdits(doc, std::vector<EntryEdit>{create});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("no full/op_by_op_torch segment (key grammar of "
                                             "tests/runner/test_models.py:301)"),
            std::string::npos)
      << refused.status();
}

TEST(Document, WithoutAParallelismSegmentTheFileNameIsNotChecked) {
  const KeyGrammar grammar = OpByOpGrammar(/*with_parallelism=*/false);
  ParseOptions options;
  options.grammar = &grammar;
  Document doc =
      Document::Parse("tests/runner/test_config/torch/test_config_inference_data_parallel.yaml",
                      "test_config:\n  hrnet/pytorch-hrnetv2_w48_osmr-full-inference:\n    status: "
                      "EXPECTED_PASSING\n",
                      options);
  EXPECT_TRUE(doc.diagnostics().empty()) << doc.diagnostics().front().ToString();
  ASSERT_EQ(doc.entries().size(), 1u);
  EXPECT_EQ(doc.entries()[0].parts->parallelism, "");
  EXPECT_EQ(doc.entries()[0].parts->variant, "hrnetv2_w48_osmr");
  EXPECT_EQ(doc.entries()[0].loader, "third_party/tt_forge_models/hrnet/pytorch/loader.py");
}

TEST(Document, PlaceholdersHaveFreeFormKeys) {
  Document doc = Document::Parse(
      "tests/runner/test_config/torch/test_config_placeholders.yaml",
      "PLACEHOLDER_MODELS:\n  meta-llama/Llama-3.2-90B-Vision:\n    bringup_status: NOT_STARTED\n"
      "  KLA K-SegNet:\n    bringup_status: NOT_STARTED\n");
  ASSERT_TRUE(doc.ok()) << FirstError(doc);
  EXPECT_TRUE(doc.is_placeholders());
  EXPECT_EQ(doc.entries().size(), 2u);
  EXPECT_FALSE(doc.entries()[1].parts.has_value());
}

TEST(Document, EmptyAndMissingNewlineAreNotErrors) {
  EXPECT_TRUE(Document::Parse(kPath, "").ok());
  Document doc = Document::Parse(kPath,
                                 "test_config:\n  a/pytorch-X-single_device-training:\n"
                                 "    status: EXPECTED_PASSING");
  EXPECT_TRUE(doc.ok());
  EXPECT_EQ(doc.entries().size(), 1u);
  EXPECT_FALSE(doc.diagnostics().empty()) << "a warning about the missing final newline";
}

}  // namespace
}  // namespace triage::inventory
