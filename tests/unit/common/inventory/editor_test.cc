#include "common/inventory/editor.h"

#include <string>

#include "common/diff/unified_diff.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::inventory {
namespace {

constexpr char kPath[] = "tests/runner/test_config/torch/test_config_training_single_device.yaml";

// A training-style file: no blank lines, comments of every kind, a commented-out entry.
constexpr char kTraining[] =
    "# SPDX-FileCopyrightText: (c) 2025\n"
    "test_config:\n"
    "  mnist/pytorch-Cnn-single_device-training:\n"
    "    status: NOT_SUPPORTED_SKIP\n"
    "    bringup_status: FAILED_FE_COMPILATION\n"
    "    markers: [push, nightly, notimeout]\n"
    "    reason: \"tt-forge-models doesn't implement unpack_forward_output for this model.\"\n"
    "  # old/pytorch-X-single_device-training:\n"
    "  #   status: NOT_SUPPORTED_SKIP\n"
    "  qwen/causal_lm/pytorch-0.5B-single_device-training:\n"
    "    status: EXPECTED_PASSING # was flaky (#8931)\n"
    "    markers: [\"extended\"]\n"
    "  maptr/pytorch-Tiny-single_device-training:\n"
    "    status: NOT_SUPPORTED_SKIP\n"
    "    bringup_status: FAILED_FE_COMPILATION\n"
    "    reason: \"No handler for class X exists in `unpack_forward_output`\"\n"
    "  yolos/pytorch-Small-single_device-training:\n"
    "    arch_overrides:\n"
    "      n150:\n"
    "        status: NOT_SUPPORTED_SKIP\n"
    "        reason: \"Out of Memory: Not enough space\"\n"
    "      p150:\n"
    "        status: EXPECTED_PASSING\n"
    "        assert_pcc: false\n"
    "  vit/pytorch-Base-single_device-training:\n"
    "      status: EXPECTED_PASSING\n"
    "      filechecks:\n"
    "        - a.ttnn.mlir\n"
    "        - b.ttnn.mlir # keep\n";

Document Parse(std::string_view text) {
  Document doc = Document::Parse(kPath, std::string(text));
  EXPECT_TRUE(doc.ok()) << (doc.diagnostics().empty() ? "" : doc.diagnostics()[0].ToString());
  return doc;
}

std::string Apply(std::string_view text, std::vector<EntryEdit> edits) {
  Document doc = Parse(text);
  auto out = ApplyEdits(doc, edits);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

EntryEdit Set(std::string key, std::vector<std::pair<std::string, Value>> set,
              std::vector<std::string> del = {}, std::optional<std::string> arch = {}) {
  return EntryEdit{std::move(key), std::move(arch), std::move(set), std::move(del)};
}

// The text with the lines [first, last] of the named entry cut out, to compare "everything
// else" byte for byte.
std::string Without(const std::string& text, const std::string& key) {
  Document doc = Document::Parse(kPath, text);
  const Entry* e = doc.Find(key);
  EXPECT_NE(e, nullptr) << key;
  std::string out;
  for (int i = 0; i < doc.line_count(); ++i) {
    if (e != nullptr && i >= e->first_line && i <= e->last_line) continue;
    out += std::string(doc.Line(i)) + "\n";
  }
  return out;
}

std::string EntryText(const std::string& text, const std::string& key) {
  Document doc = Document::Parse(kPath, text);
  const Entry* e = doc.Find(key);
  std::string out;
  for (int i = e->first_line; i <= e->last_line; ++i) out += std::string(doc.Line(i)) + "\n";
  return out;
}

// An arch edit that only deletes fields the entry does not have on that arch changes nothing: no
// empty arch_overrides.<arch> is left behind (tests/fuzz/regressions/inventory).
TEST(ApplyEdits, DeleteOnlyArchEditOfAMissingOverrideIsANoOp) {
  EXPECT_EQ(Apply(kTraining, {Set("mnist/pytorch-Cnn-single_device-training", {},
                                  {"bringup_status", "reason"}, "galaxy-wh-6u")}),
            kTraining);
  EXPECT_EQ(
      Apply(kTraining, {Set("yolos/pytorch-Small-single_device-training", {}, {"reason"}, "p150")}),
      kTraining);
  EXPECT_EQ(Apply(kTraining, {Set("mnist/pytorch-Cnn-single_device-training", {}, {}, "n150")}),
            kTraining);
}

TEST(Editor, NoEditsIsTheIdentity) { EXPECT_EQ(Apply(kTraining, {}), kTraining); }

TEST(Editor, RewriteToKnownFailureReplacesInPlace) {
  const std::string key = "mnist/pytorch-Cnn-single_device-training";
  std::string out = Apply(kTraining, {Set(key, {{"status", Value::String("KNOWN_FAILURE_XFAIL")},
                                                {"bringup_status", Value::String("FAILED_RUNTIME")},
                                                {"reason", Value::String("TT_FATAL: boom")}})});
  EXPECT_EQ(EntryText(out, key),
            "  mnist/pytorch-Cnn-single_device-training:\n"
            "    status: KNOWN_FAILURE_XFAIL\n"
            "    bringup_status: FAILED_RUNTIME\n"
            "    markers: [push, nightly, notimeout]\n"
            "    reason: \"TT_FATAL: boom\"\n");
  EXPECT_EQ(Without(out, key), Without(kTraining, key));
}

TEST(Editor, PassingWithPccOffReadsStatusAssertPcc) {
  const std::string key = "maptr/pytorch-Tiny-single_device-training";
  std::string out = Apply(
      kTraining,
      {Set(key, {{"status", Value::String("EXPECTED_PASSING")}, {"assert_pcc", Value::Bool(false)}},
           {"bringup_status", "reason"})});
  EXPECT_EQ(EntryText(out, key),
            "  maptr/pytorch-Tiny-single_device-training:\n"
            "    status: EXPECTED_PASSING\n"
            "    assert_pcc: false\n");
  EXPECT_EQ(Without(out, key), Without(kTraining, key));
}

TEST(Editor, NewFieldsGoRightAfterStatus) {
  const std::string key = "maptr/pytorch-Tiny-single_device-training";
  // The landed timeout sweep: status, markers, reason.
  std::string out =
      Apply(kTraining, {Set(key,
                            {{"status", Value::String("KNOWN_FAILURE_XFAIL")},
                             {"markers", Value::List({Value::String("notimeout")})},
                             {"reason", Value::String("Test exceeds default pytest timeout")}},
                            {"bringup_status"})});
  EXPECT_EQ(EntryText(out, key),
            "  maptr/pytorch-Tiny-single_device-training:\n"
            "    status: KNOWN_FAILURE_XFAIL\n"
            "    markers: [notimeout]\n"
            "    reason: \"Test exceeds default pytest timeout\"\n");
  // A passing entry that gains bringup_status and reason: status, bringup_status, reason.
  const std::string qwen = "qwen/causal_lm/pytorch-0.5B-single_device-training";
  out = Apply(kTraining, {Set(qwen, {{"status", Value::String("KNOWN_FAILURE_XFAIL")},
                                     {"reason", Value::String("r")},
                                     {"bringup_status", Value::String("FAILED_RUNTIME")}})});
  EXPECT_EQ(EntryText(out, qwen),
            "  qwen/causal_lm/pytorch-0.5B-single_device-training:\n"
            "    status: KNOWN_FAILURE_XFAIL # was flaky (#8931)\n"
            "    bringup_status: FAILED_RUNTIME\n"
            "    reason: \"r\"\n"
            "    markers: [\"extended\"]\n");
}

TEST(Editor, FieldsOutsideTheInsertOrderGoLast) {
  const std::string key = "maptr/pytorch-Tiny-single_device-training";
  std::string out = Apply(kTraining, {Set(key, {{"required_pcc", Value::Float(0.97)}})});
  EXPECT_EQ(EntryText(out, key),
            "  maptr/pytorch-Tiny-single_device-training:\n"
            "    status: NOT_SUPPORTED_SKIP\n"
            "    bringup_status: FAILED_FE_COMPILATION\n"
            "    reason: \"No handler for class X exists in `unpack_forward_output`\"\n"
            "    required_pcc: 0.97\n");
}

TEST(Editor, ReasonsAreDoubleQuotedAndEscaped) {
  const std::string key = "mnist/pytorch-Cnn-single_device-training";
  const std::string nasty =
      "He said \"no\": C:\\path # not a comment, key: value, caf\xC3\xA9 \xE2\x80\x94 `x` (#1)";
  std::string out = Apply(kTraining, {Set(key, {{"reason", Value::String(nasty)}})});
  Document doc = Parse(out);
  EXPECT_EQ(doc.Find(key)->StringField("reason"), nasty);
  EXPECT_NE(out.find("    reason: \"He said \\\"no\\\": C:\\\\path # not a comment, key: value, "
                     "caf\xC3\xA9 \xE2\x80\x94 `x` (#1)\"\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(DoubleQuote("tab\there\x01"), "\"tab\\there\\x01\"");
}

TEST(Editor, KeepsInlineCommentsFlowStyleAndQuoting) {
  const std::string key = "qwen/causal_lm/pytorch-0.5B-single_device-training";
  std::string out = Apply(
      kTraining,
      {Set(key,
           {{"status", Value::String("KNOWN_FAILURE_XFAIL")},
            {"markers", Value::List({Value::String("extended"), Value::String("nightly")})}})});
  EXPECT_EQ(EntryText(out, key),
            "  qwen/causal_lm/pytorch-0.5B-single_device-training:\n"
            "    status: KNOWN_FAILURE_XFAIL # was flaky (#8931)\n"
            "    markers: [\"extended\", \"nightly\"]\n");
}

TEST(Editor, BlockListsStayBlockListsWithTheirIndentation) {
  const std::string key = "vit/pytorch-Base-single_device-training";
  std::string out =
      Apply(kTraining, {Set(key, {{"filechecks", Value::List({Value::String("c.ttnn.mlir")})},
                                  {"status", Value::String("KNOWN_FAILURE_XFAIL")}})});
  EXPECT_EQ(EntryText(out, key),
            "  vit/pytorch-Base-single_device-training:\n"
            "      status: KNOWN_FAILURE_XFAIL\n"
            "      filechecks:\n"
            "        - c.ttnn.mlir\n");
}

TEST(Editor, ArchOverridesAreCreatedEditedAndRemoved) {
  const std::string yolos = "yolos/pytorch-Small-single_device-training";
  std::string out =
      Apply(kTraining,
            {Set(yolos, {{"status", Value::String("KNOWN_FAILURE_XFAIL")}}, {"reason"}, "n150")});
  EXPECT_EQ(EntryText(out, yolos),
            "  yolos/pytorch-Small-single_device-training:\n"
            "    arch_overrides:\n"
            "      n150:\n"
            "        status: KNOWN_FAILURE_XFAIL\n"
            "      p150:\n"
            "        status: EXPECTED_PASSING\n"
            "        assert_pcc: false\n");
  // Deleting the last fields of an arch removes the arch; the last arch removes the mapping.
  out = Apply(kTraining, {Set(yolos, {{"status", Value::String("EXPECTED_PASSING")}}),
                          Set(yolos, {}, {"status", "reason"}, "n150"),
                          Set(yolos, {}, {"status", "assert_pcc"}, "p150")});
  EXPECT_EQ(EntryText(out, yolos),
            "  yolos/pytorch-Small-single_device-training:\n"
            "    status: EXPECTED_PASSING\n");
  // A per-arch split on an entry without overrides.
  const std::string mnist = "mnist/pytorch-Cnn-single_device-training";
  out = Apply(kTraining, {Set(mnist, {{"status", Value::String("EXPECTED_PASSING")}}, {}, "p150"),
                          Set(mnist,
                              {{"status", Value::String("KNOWN_FAILURE_XFAIL")},
                               {"bringup_status", Value::String("FAILED_RUNTIME")},
                               {"reason", Value::String("OOM")}},
                              {}, "n150")});
  EXPECT_EQ(EntryText(out, mnist),
            "  mnist/pytorch-Cnn-single_device-training:\n"
            "    status: NOT_SUPPORTED_SKIP\n"
            "    bringup_status: FAILED_FE_COMPILATION\n"
            "    markers: [push, nightly, notimeout]\n"
            "    reason: \"tt-forge-models doesn't implement unpack_forward_output for this "
            "model.\"\n"
            "    arch_overrides:\n"
            "      p150:\n"
            "        status: EXPECTED_PASSING\n"
            "      n150:\n"
            "        status: KNOWN_FAILURE_XFAIL\n"
            "        bringup_status: FAILED_RUNTIME\n"
            "        reason: \"OOM\"\n");
}

TEST(Editor, InferenceFilesKeepTheirBlankLines) {
  const std::string text =
      "test_config:\n"
      "  a/pytorch-X-single_device-inference:\n"
      "    status: EXPECTED_PASSING\n"
      "\n"
      "  b/pytorch-Y-single_device-inference:\n"
      "    status: NOT_SUPPORTED_SKIP\n"
      "    reason: \"x\" # note\n"
      "\n"
      "  # trailing comment\n";
  Document doc = Document::Parse(
      "tests/runner/test_config/torch/test_config_inference_single_device.yaml", text);
  ASSERT_TRUE(doc.ok());
  std::vector<EntryEdit> edits = {Set("b/pytorch-Y-single_device-inference",
                                      {{"status", Value::String("EXPECTED_PASSING")}}, {"reason"})};
  auto out = ApplyEdits(doc, edits);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "test_config:\n"
            "  a/pytorch-X-single_device-inference:\n"
            "    status: EXPECTED_PASSING\n"
            "\n"
            "  b/pytorch-Y-single_device-inference:\n"
            "    status: EXPECTED_PASSING\n"
            "\n"
            "  # trailing comment\n");
}

TEST(Editor, SettingTheSameValueChangesNothing) {
  const std::string key = "qwen/causal_lm/pytorch-0.5B-single_device-training";
  EXPECT_EQ(Apply(kTraining, {Set(key, {{"status", Value::String("EXPECTED_PASSING")},
                                        {"markers", Value::List({Value::String("extended")})}})}),
            kTraining);
}

TEST(Editor, InvalidEditsFailTheWholeBatch) {
  Document doc = Parse(kTraining);
  const std::string key = "mnist/pytorch-Cnn-single_device-training";
  struct Case {
    std::string name;
    std::vector<EntryEdit> edits;
    std::string want;
  };
  const Case cases[] = {
      {"unknown key", {Set("nope/pytorch-single_device-training", {})}, "no entry 'nope/"},
      {"unknown field", {Set(key, {{"statsu", Value::String("X")}})}, "unknown field 'statsu'"},
      {"bad enum", {Set(key, {{"status", Value::String("PASSING")}})}, "invalid value 'PASSING'"},
      {"wrong type", {Set(key, {{"assert_pcc", Value::String("no")}})}, "expected true or false"},
      {"pcc out of range",
       {Set(key, {{"required_pcc", Value::Float(1.5)}})},
       "required_pcc: 1.5 is out of range (expected a number from 0 to 1)"},
      {"negative tolerance",
       {Set(key, {{"allclose_atol", Value::Int(-1)}}, {}, "p150")},
       "allclose_atol: -1 is out of range (expected a number >= 0)"},
      {"unknown arch",
       {Set(key, {{"status", Value::String("EXPECTED_PASSING")}}, {}, "n999")},
       "unknown arch 'n999'"},
      {"set and delete",
       {Set(key, {{"reason", Value::String("x")}}, {"reason"})},
       "both set and deleted"},
      {"arch_overrides directly",
       {Set(key, {{"arch_overrides", Value::Null()}})},
       "not arch_overrides itself"},
      {"empties the entry",
       {Set("qwen/causal_lm/pytorch-0.5B-single_device-training", {}, {"status", "markers"})},
       "would leave entry"},
  };
  for (const auto& c : cases) {
    // A valid edit first: it must not take effect either.
    std::vector<EntryEdit> edits = {Set(key, {{"status", Value::String("EXPECTED_PASSING")}})};
    edits.insert(edits.end(), c.edits.begin(), c.edits.end());
    auto out = ApplyEdits(doc, edits);
    ASSERT_FALSE(out.ok()) << c.name;
    EXPECT_NE(std::string(out.status().message()).find(c.want), std::string::npos)
        << c.name << ": " << out.status();
  }
}

TEST(Editor, RefusesDocumentsWithErrors) {
  Document doc = Document::Parse(kPath, std::string(kTraining) +
                                            "  x/pytorch-single_device-"
                                            "training:\n    statsu: X\n");
  ASSERT_FALSE(doc.ok());
  auto out = ApplyEdits(doc, std::vector<EntryEdit>{});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("never written"), std::string::npos);
}

TEST(Editor, DiffAppliesWithGit) {
  const std::string key = "maptr/pytorch-Tiny-single_device-training";
  std::string out = Apply(
      kTraining,
      {Set(key, {{"status", Value::String("EXPECTED_PASSING")}, {"assert_pcc", Value::Bool(false)}},
           {"bringup_status", "reason"})});
  testing::TempDir tmp;
  testing::WriteFileOrDie(tmp.path() / kPath, kTraining);
  testing::WriteFileOrDie(tmp.path() / "p.patch", diff::UnifiedDiff(kPath, kTraining, out));
  std::string log;
  ASSERT_EQ(testing::RunCommand({"git", "apply", "p.patch"}, tmp.path(), &log), 0) << log;
  EXPECT_EQ(testing::ReadFileOrDie(tmp.path() / kPath), out);
}

TEST(Editor, LastEntryWithoutFinalNewline) {
  std::string text = "test_config:\n  a/pytorch-X-single_device-training:\n    status: X_Y";
  text = "test_config:\n  a/pytorch-X-single_device-training:\n    status: EXPECTED_PASSING";
  std::string out = Apply(text, {Set("a/pytorch-X-single_device-training",
                                     {{"status", Value::String("KNOWN_FAILURE_XFAIL")}})});
  EXPECT_EQ(out,
            "test_config:\n  a/pytorch-X-single_device-training:\n"
            "    status: KNOWN_FAILURE_XFAIL\n");
}

}  // namespace
}  // namespace triage::inventory
