#include "common/inventory/editor.h"

#include <string>

#include "common/diff/apply_diff.h"
#include "common/diff/unified_diff.h"
#include "common/util/strings.h"
#include "common/util/text.h"
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

// --- Trailing comments ------------------------------------------------------------------------

constexpr char kInferencePath[] =
    "tests/runner/test_config/torch/test_config_inference_single_device.yaml";

// An inference-style file: a blank line after each entry, inline comments after values, a
// comment line inside an entry, a commented-out entry and a comment at the end.
constexpr char kInference[] =
    "# SPDX-License-Identifier: Apache-2.0\n"
    "test_config:\n"
    "  densenet/pytorch-161-single_device-inference:\n"
    "    status: EXPECTED_PASSING\n"
    "    required_pcc: 0.98 # https://github.com/tenstorrent/tt-xla/issues/3860\n"
    "\n"
    "  gpt_neo/causal_lm/pytorch-125M-single_device-inference:\n"
    "    status: EXPECTED_PASSING\n"
    "    arch_overrides:\n"
    "      n150:\n"
    "        required_pcc: 0.97   # measured 0.975\n"
    "\n"
    "  xtts_v2/pytorch-hifigan_decoder-single_device-inference:\n"
    "    status: EXPECTED_PASSING\n"
    "    # Has never met 0.98 since bring-up (#5376); measures 0.9797.\n"
    "    required_pcc: 0.970\n"
    "    markers: # slow ones\n"
    "      - nightly\n"
    "      - large\n"
    "\n"
    "  # old/pytorch-Gone-single_device-inference:\n"
    "  #   status: EXPECTED_PASSING\n";

Document ParseAt(const char* path, std::string_view text) {
  Document doc = Document::Parse(path, std::string(text));
  EXPECT_TRUE(doc.ok()) << (doc.diagnostics().empty() ? "" : doc.diagnostics()[0].ToString());
  return doc;
}

absl::StatusOr<std::string> ApplyAt(const char* path, std::string_view text,
                                    std::vector<EntryEdit> edits, EditDetail* detail = nullptr) {
  Document doc = ParseAt(path, text);
  return ApplyEdits(doc, edits, detail);
}

EntryEdit Commented(std::string key, std::vector<std::pair<std::string, Value>> set,
                    std::vector<std::pair<std::string, std::string>> comments,
                    std::optional<std::string> arch = {}) {
  EntryEdit e = Set(std::move(key), std::move(set), {}, std::move(arch));
  e.comments = std::move(comments);
  return e;
}

EntryEdit Create(std::string key, std::vector<std::pair<std::string, Value>> set,
                 std::vector<std::pair<std::string, std::string>> comments = {}) {
  EntryEdit e = Set(std::move(key), std::move(set));
  e.comments = std::move(comments);
  e.create = true;
  return e;
}

// The text with line `line` (0-based) replaced by `with` (no line when empty).
std::string ReplaceLine(std::string_view text, int line, std::string_view with) {
  auto lines = util::SplitLines(text);
  std::string out;
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    if (i == line) {
      if (!with.empty()) util::StrAppend(&out, with, "\n");
    } else {
      util::StrAppend(&out, lines[i], "\n");
    }
  }
  return out;
}

// The comment asked for replaces the line's, but a link a person wrote there (a tracking issue)
// stays after it; a link the new comment carries already is not repeated.
TEST(EditorComments, ACommentReplacesTheInlineCommentOfTheLineButKeepsItsLinks) {
  auto out = ApplyAt(kInferencePath, kInference,
                     {Commented("densenet/pytorch-161-single_device-inference",
                                {{"required_pcc", Value::Float(0.97)}},
                                {{"required_pcc", "pcc 0.9734 on n150"}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, ReplaceLine(kInference, 4,
                              "    required_pcc: 0.97 # pcc 0.9734 on n150 "
                              "https://github.com/tenstorrent/tt-xla/issues/3860"));
  auto again = ApplyAt(kInferencePath, *out,
                       {Commented("densenet/pytorch-161-single_device-inference",
                                  {{"required_pcc", Value::Float(0.96)}},
                                  {{"required_pcc",
                                    "pcc 0.9650 on p150 "
                                    "https://github.com/tenstorrent/tt-xla/"
                                    "issues/3860"}})});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, ReplaceLine(kInference, 4,
                                "    required_pcc: 0.96 # pcc 0.9650 on p150 "
                                "https://github.com/tenstorrent/tt-xla/issues/3860"));
}

TEST(EditorComments, AFieldSetWithoutACommentKeepsItsOwn) {
  auto out = ApplyAt(kInferencePath, kInference,
                     {Set("densenet/pytorch-161-single_device-inference",
                          {{"required_pcc", Value::Float(0.97)}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(
      *out,
      ReplaceLine(kInference, 4,
                  "    required_pcc: 0.97 # https://github.com/tenstorrent/tt-xla/issues/3860"));
}

TEST(EditorComments, ANewFieldCanCarryAComment) {
  auto out = ApplyAt(
      kInferencePath, kInference,
      {Commented("gpt_neo/causal_lm/pytorch-125M-single_device-inference",
                 {{"assert_pcc", Value::Bool(false)}}, {{"assert_pcc", "pcc 0.41 on p150"}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(out->find("    status: EXPECTED_PASSING\n"
                      "    assert_pcc: false # pcc 0.41 on p150\n"
                      "    arch_overrides:\n"),
            std::string::npos)
      << *out;
}

// The same value with another comment: only the comment changes; the value keeps its text
// (0.970 stays 0.970). The same value with the same comment changes nothing.
TEST(EditorComments, SameValueNewCommentKeepsTheValueText) {
  const std::string key = "xtts_v2/pytorch-hifigan_decoder-single_device-inference";
  auto out = ApplyAt(kInferencePath, kInference,
                     {Commented(key, {{"required_pcc", Value::Float(0.97)}},
                                {{"required_pcc", "pcc 0.9797 on n150"}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, ReplaceLine(kInference, 15, "    required_pcc: 0.970 # pcc 0.9797 on n150"));
  auto again = ApplyAt(kInferencePath, *out,
                       {Commented(key, {{"required_pcc", Value::Float(0.97)}},
                                  {{"required_pcc", "  pcc 0.9797 on n150 "}})});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *out);
}

TEST(EditorComments, ABlockListKeepsItsItemsAndTakesTheCommentOnItsKeyLine) {
  const std::string key = "xtts_v2/pytorch-hifigan_decoder-single_device-inference";
  auto out = ApplyAt(
      kInferencePath, kInference,
      {Commented(key,
                 {{"markers", Value::List({Value::String("nightly"), Value::String("large")})}},
                 {{"markers", "runs 2 h"}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, ReplaceLine(kInference, 16, "    markers: # runs 2 h"));
  // A changed block list keeps the comment it is given too.
  out = ApplyAt(kInferencePath, kInference,
                {Commented(key, {{"markers", Value::List({Value::String("nightly")})}},
                           {{"markers", "large dropped"}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(out->find("    markers: # large dropped\n      - nightly\n\n"), std::string::npos)
      << *out;
}

TEST(EditorComments, AFieldInArchOverridesCanCarryAComment) {
  const std::string key = "gpt_neo/causal_lm/pytorch-125M-single_device-inference";
  auto out = ApplyAt(kInferencePath, kInference,
                     {Commented(key, {{"required_pcc", Value::Float(0.96)}},
                                {{"required_pcc", "pcc 0.9688 on n150"}}, "n150"),
                      Commented(key, {{"assert_pcc", Value::Bool(false)}},
                                {{"assert_pcc", "pcc nan on p150"}}, "p150")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(out->find("    arch_overrides:\n"
                      "      n150:\n"
                      "        required_pcc: 0.96 # pcc 0.9688 on n150\n"
                      "      p150:\n"
                      "        assert_pcc: false # pcc nan on p150\n"
                      "\n"),
            std::string::npos)
      << *out;
}

// A value over several lines cannot keep its text with a new comment after it: it is written
// again on one line, with the comment.
TEST(EditorComments, AValueOverSeveralLinesIsWrittenOnOneWithTheComment) {
  const std::string text =
      "test_config:\n"
      "  a/pytorch-X-single_device-inference:\n"
      "    status: EXPECTED_PASSING\n"
      "    supported_archs: [n150,\n"
      "      p150]\n";
  auto out = ApplyAt(
      kInferencePath, text,
      {Commented("a/pytorch-X-single_device-inference",
                 {{"supported_archs", Value::List({Value::String("n150"), Value::String("p150")})}},
                 {{"supported_archs", "both"}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "test_config:\n"
            "  a/pytorch-X-single_device-inference:\n"
            "    status: EXPECTED_PASSING\n"
            "    supported_archs: [n150, p150] # both\n");
}

// A removed field takes its trailing comment with its line; the comment line above a field is
// not the field's and stays.
TEST(EditorComments, DeletingAFieldRemovesItsTrailingComment) {
  auto out = ApplyAt(
      kInferencePath, kInference,
      {Set("densenet/pytorch-161-single_device-inference", {}, {"required_pcc"}),
       Set("gpt_neo/causal_lm/pytorch-125M-single_device-inference", {}, {"required_pcc"}, "n150"),
       Set("xtts_v2/pytorch-hifigan_decoder-single_device-inference", {}, {"required_pcc"})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->find("3860"), std::string::npos) << *out;
  EXPECT_EQ(out->find("measured 0.975"), std::string::npos) << *out;
  EXPECT_EQ(*out,
            "# SPDX-License-Identifier: Apache-2.0\n"
            "test_config:\n"
            "  densenet/pytorch-161-single_device-inference:\n"
            "    status: EXPECTED_PASSING\n"
            "\n"
            "  gpt_neo/causal_lm/pytorch-125M-single_device-inference:\n"
            "    status: EXPECTED_PASSING\n"
            "\n"
            "  xtts_v2/pytorch-hifigan_decoder-single_device-inference:\n"
            "    status: EXPECTED_PASSING\n"
            "    # Has never met 0.98 since bring-up (#5376); measures 0.9797.\n"
            "    markers: # slow ones\n"
            "      - nightly\n"
            "      - large\n"
            "\n"
            "  # old/pytorch-Gone-single_device-inference:\n"
            "  #   status: EXPECTED_PASSING\n");
}

// What YAML would read otherwise stays text of the comment: quotes, '#', ':' and UTF-8.
TEST(EditorComments, TheTextIsWrittenAsIsAfterTheValue) {
  const std::string key = "densenet/pytorch-161-single_device-inference";
  const std::string text = "see \"#3860\": caf\xC3\xA9 'x' # y";
  auto out = ApplyAt(kInferencePath, kInference,
                     {Commented(key,
                                {{"reason", Value::String("a # b")},
                                 {"status", Value::String("KNOWN_FAILURE_XFAIL")}},
                                {{"reason", text}, {"status", "was passing"}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(out->find("    status: KNOWN_FAILURE_XFAIL # was passing\n"
                      "    reason: \"a # b\" # " +
                      text + "\n"),
            std::string::npos)
      << *out;
  Document doc = ParseAt(kInferencePath, *out);
  EXPECT_EQ(doc.Find(key)->StringField("reason"), "a # b");
}

TEST(EditorComments, BadCommentsFailTheBatchNamingKeyAndField) {
  const std::string key = "densenet/pytorch-161-single_device-inference";
  struct Case {
    std::string name;
    EntryEdit edit;
    std::string want;
  };
  const Value pcc = Value::Float(0.97);
  const Case cases[] = {
      {"newline", Commented(key, {{"required_pcc", pcc}}, {{"required_pcc", "a\nb"}}),
       "entry '" + key +
           "': comment on field 'required_pcc': the text must be one line without control "
           "characters, got \"a\\nb\""},
      {"tab", Commented(key, {{"required_pcc", pcc}}, {{"required_pcc", "a\tb"}}),
       "comment on field 'required_pcc': the text must be one line"},
      {"carriage return", Commented(key, {{"required_pcc", pcc}}, {{"required_pcc", "a\rb"}}),
       "comment on field 'required_pcc': the text must be one line"},
      {"empty", Commented(key, {{"required_pcc", pcc}}, {{"required_pcc", "   "}}),
       "entry '" + key + "': comment on field 'required_pcc': the text is empty"},
      {"not utf-8", Commented(key, {{"required_pcc", pcc}}, {{"required_pcc", "caf\xE9"}}),
       "comment on field 'required_pcc': the text is not valid UTF-8"},
      {"field not set", Commented(key, {{"required_pcc", pcc}}, {{"status", "x"}}),
       "entry '" + key + "': comment on field 'status': the edit does not set that field"},
      {"deleted field",
       [&] {
         EntryEdit e = Set(key, {}, {"required_pcc"});
         e.comments = {{"required_pcc", "x"}};
         return e;
       }(),
       "comment on field 'required_pcc': the edit does not set that field"},
      {"twice",
       Commented(key, {{"required_pcc", pcc}}, {{"required_pcc", "x"}, {"required_pcc", "y"}}),
       "comment on field 'required_pcc': given twice"},
  };
  Document doc = ParseAt(kInferencePath, kInference);
  for (const auto& c : cases) {
    std::vector<EntryEdit> edits = {Set("xtts_v2/pytorch-hifigan_decoder-single_device-inference",
                                        {{"status", Value::String("KNOWN_FAILURE_XFAIL")}}),
                                    c.edit};
    auto out = ApplyEdits(doc, edits);
    ASSERT_FALSE(out.ok()) << c.name;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(std::string(out.status().message()).find(c.want), std::string::npos)
        << c.name << ": " << out.status();
  }
}

// --- New entries -----------------------------------------------------------------------------

TEST(EditorCreate, InferenceFilesGetABlankLineBeforeTheNewEntry) {
  auto out = ApplyAt(
      kInferencePath, kInference,
      {Create("resnet/pytorch-50-single_device-inference",
              {{"status", Value::String("EXPECTED_PASSING")}, {"required_pcc", Value::Float(0.98)}},
              {{"required_pcc", "pcc 0.9834 on n150"}})});
  ASSERT_TRUE(out.ok()) << out.status();
  // After the last entry, before the commented-out entry that ends the file.
  EXPECT_EQ(*out, ReplaceLine(kInference, 18,
                              "      - large\n"
                              "\n"
                              "  resnet/pytorch-50-single_device-inference:\n"
                              "    status: EXPECTED_PASSING\n"
                              "    required_pcc: 0.98 # pcc 0.9834 on n150"));
}

TEST(EditorCreate, TrainingFilesGetNoBlankLineAndTrailingCommentsStayLast) {
  const std::string text = std::string(kTraining) +
                           "  # gone/pytorch-X-single_device-training:\n"
                           "  #   status: NOT_SUPPORTED_SKIP\n"
                           "# end of file\n";
  auto out = Apply(text, {Create("new/pytorch-Base-single_device-training",
                                 {{"status", Value::String("KNOWN_FAILURE_XFAIL")},
                                  {"bringup_status", Value::String("FAILED_RUNTIME")},
                                  {"reason", Value::String("TT_FATAL: boom")}})});
  // Four of five entries put their fields at column 4 (vit uses 6): the new one does too.
  EXPECT_EQ(out, std::string(kTraining) +
                     "  new/pytorch-Base-single_device-training:\n"
                     "    status: KNOWN_FAILURE_XFAIL\n"
                     "    bringup_status: FAILED_RUNTIME\n"
                     "    reason: \"TT_FATAL: boom\"\n"
                     "  # gone/pytorch-X-single_device-training:\n"
                     "  #   status: NOT_SUPPORTED_SKIP\n"
                     "# end of file\n");
}

// The last entry's own commented-out fields (indented deeper than its key) stay with it.
TEST(EditorCreate, TheLastEntrysCommentedFieldsStayWithIt) {
  const std::string text =
      "test_config:\n"
      "  a/pytorch-X-tensor_parallel-training:\n"
      "    status: KNOWN_FAILURE_XFAIL\n"
      "    # reason: \"PCC NaN\"\n"
      "\n"
      "  # b/pytorch-Y-tensor_parallel-training:\n";
  auto out =
      ApplyAt("tests/runner/test_config/torch/test_config_training_tensor_parallel.yaml", text,
              {Create("c/pytorch-Z-tensor_parallel-training",
                      {{"status", Value::String("EXPECTED_PASSING")}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "test_config:\n"
            "  a/pytorch-X-tensor_parallel-training:\n"
            "    status: KNOWN_FAILURE_XFAIL\n"
            "    # reason: \"PCC NaN\"\n"
            "  c/pytorch-Z-tensor_parallel-training:\n"
            "    status: EXPECTED_PASSING\n"
            "\n"
            "  # b/pytorch-Y-tensor_parallel-training:\n");
}

TEST(EditorCreate, SeveralCreatesKeepTheirOrderAndTheFilesIndentation) {
  const std::string text =
      "test_config:\n"
      "    a/jax-X-single_device-inference:\n"
      "        status: EXPECTED_PASSING\n"
      "\n"
      "    b/jax-Y-single_device-inference:\n"
      "        status: EXPECTED_PASSING\n";
  auto out = ApplyAt("tests/runner/test_config/jax/test_config_inference_single_device.yaml", text,
                     {Create("z/jax-Last-single_device-inference",
                             {{"supported_archs", Value::List({Value::String("n150")})},
                              {"status", Value::String("EXPECTED_PASSING")}}),
                      Create("m/jax-Middle-single_device-inference",
                             {{"status", Value::String("NOT_SUPPORTED_SKIP")},
                              {"reason", Value::String("Out of Memory")}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, text +
                      "\n"
                      "    z/jax-Last-single_device-inference:\n"
                      "        supported_archs: [n150]\n"
                      "        status: EXPECTED_PASSING\n"
                      "\n"
                      "    m/jax-Middle-single_device-inference:\n"
                      "        status: NOT_SUPPORTED_SKIP\n"
                      "        reason: \"Out of Memory\"\n");
  Document doc = ParseAt(kInferencePath, *out);
  ASSERT_EQ(doc.entries().size(), 4u);
  EXPECT_EQ(doc.entries()[2].key, "z/jax-Last-single_device-inference");
  EXPECT_EQ(doc.entries()[3].key, "m/jax-Middle-single_device-inference");
}

// Most neighbours decide; a tie goes by the last two entries; one entry by the run mode.
TEST(EditorCreate, TheBlankLineStyleIsDetectedFromTheEntries) {
  const std::string mixed =
      "test_config:\n"
      "  a/pytorch-A-single_device-inference:\n"
      "    status: EXPECTED_PASSING\n"
      "\n"
      "  b/pytorch-B-single_device-inference:\n"
      "    status: EXPECTED_PASSING\n"
      "  c/pytorch-C-single_device-inference:\n"
      "    status: EXPECTED_PASSING\n"
      "  d/pytorch-D-single_device-inference:\n"
      "    status: EXPECTED_PASSING\n";
  const std::vector<EntryEdit> create = {Create("e/pytorch-E-single_device-inference",
                                                {{"status", Value::String("EXPECTED_PASSING")}})};
  const std::string added =
      "  e/pytorch-E-single_device-inference:\n"
      "    status: EXPECTED_PASSING\n";
  auto out = ApplyAt(kInferencePath, mixed, create);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, mixed + added);  // one pair of three has a blank line
  const std::string tie =
      "test_config:\n"
      "  a/pytorch-A-single_device-inference:\n"
      "    status: EXPECTED_PASSING\n"
      "  b/pytorch-B-single_device-inference:\n"
      "    status: EXPECTED_PASSING\n"
      "\n"
      "  c/pytorch-C-single_device-inference:\n"
      "    status: EXPECTED_PASSING\n";
  out = ApplyAt(kInferencePath, tie, create);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, tie + "\n" + added);
  const std::string one =
      "test_config:\n"
      "  a/pytorch-A-single_device-inference:\n"
      "    status: EXPECTED_PASSING\n";
  out = ApplyAt(kInferencePath, one, create);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, one + "\n" + added);
}

// A new entry whose archs want different states: the top level and one block per arch, a
// level deeper each by the file's own step, in one batch.
TEST(EditorCreate, ACreatedEntryGetsItsArchOverridesInTheSameBatch) {
  const std::string text =
      "test_config:\n"
      "  a/pytorch-A-single_device-inference:\n"
      "    status: EXPECTED_PASSING\n";
  const std::string key = "e/pytorch-E-single_device-inference";
  auto out = ApplyAt(kInferencePath, text,
                     {Create(key, {{"status", Value::String("EXPECTED_PASSING")}}),
                      Set(key,
                          {{"status", Value::String("KNOWN_FAILURE_XFAIL")},
                           {"reason", Value::String("Out of Memory: Not enough space")}},
                          {}, "n150"),
                      Set(key, {{"required_pcc", Value::Float(0.97)}}, {}, "p150")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, text +
                      "\n"
                      "  e/pytorch-E-single_device-inference:\n"
                      "    status: EXPECTED_PASSING\n"
                      "    arch_overrides:\n"
                      "      n150:\n"
                      "        status: KNOWN_FAILURE_XFAIL\n"
                      "        reason: \"Out of Memory: Not enough space\"\n"
                      "      p150:\n"
                      "        required_pcc: 0.97\n");
  Document doc = ParseAt(kInferencePath, *out);
  ASSERT_TRUE(doc.ok());
  const Entry* e = doc.Find(key);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->OverrideArchs(), (std::vector<std::string>{"n150", "p150"}));
}

TEST(EditorCreate, AFileWithoutEntriesGetsItsFirst) {
  const std::string text = "# header\ntest_config:\n# nothing yet\n";
  auto out = ApplyAt(kInferencePath, text,
                     {Create("a/pytorch-A-single_device-inference",
                             {{"status", Value::String("EXPECTED_PASSING")}}),
                      Create("b/pytorch-B-single_device-inference",
                             {{"status", Value::String("EXPECTED_PASSING")}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "# header\n"
            "test_config:\n"
            "  a/pytorch-A-single_device-inference:\n"
            "    status: EXPECTED_PASSING\n"
            "\n"
            "  b/pytorch-B-single_device-inference:\n"
            "    status: EXPECTED_PASSING\n"
            "# nothing yet\n");
  // `test_config: null` has no place for entries: refused, not a broken file.
  auto refused = ApplyAt(kInferencePath, "test_config: null\n",
                         {Create("a/pytorch-A-single_device-inference",
                                 {{"status", Value::String("EXPECTED_PASSING")}})});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.status().message()).find("is not alone on its line"),
            std::string::npos)
      << refused.status();
}

// Keys are plain when YAML reads them back as the same string, else double-quoted.
TEST(EditorCreate, KeysArePlainWhenSafeElseDoubleQuoted) {
  const char* path = "tests/runner/test_config/torch/test_config_placeholders.yaml";
  const std::string text =
      "PLACEHOLDER_MODELS:\n"
      "  Qwen/Qwen-Image:\n"
      "    bringup_status: NOT_STARTED\n";
  auto out =
      ApplyAt(path, text,
              {Create("Gaussian Splatting: v2", {{"bringup_status", Value::String("NOT_STARTED")}}),
               Create("yes", {{"bringup_status", Value::String("NOT_STARTED")}}),
               Create("Meta/Llama-3.1+x_1.0", {{"bringup_status", Value::String("NOT_STARTED")}})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, text +
                      "  \"Gaussian Splatting: v2\":\n"
                      "    bringup_status: NOT_STARTED\n"
                      "  \"yes\":\n"
                      "    bringup_status: NOT_STARTED\n"
                      "  Meta/Llama-3.1+x_1.0:\n"
                      "    bringup_status: NOT_STARTED\n");
}

TEST(EditorCreate, RefusedCreatesFailTheWholeBatch) {
  Document doc = ParseAt(kInferencePath, kInference);
  const std::string existing = "densenet/pytorch-161-single_device-inference";
  const std::string fresh = "resnet/pytorch-50-single_device-inference";
  const std::vector<std::pair<std::string, Value>> status = {
      {"status", Value::String("EXPECTED_PASSING")}};
  struct Case {
    std::string name;
    std::vector<EntryEdit> edits;
    std::string want;
    absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  };
  EntryEdit with_arch = Create(fresh, status);
  with_arch.arch = "n150";
  EntryEdit with_delete = Create(fresh, status);
  with_delete.del = {"reason"};
  const Case cases[] = {
      {"exists",
       {Create(existing, status)},
       "entry '" + existing + "' already exists",
       absl::StatusCode::kAlreadyExists},
      {"twice", {Create(fresh, status), Create(fresh, status)}, "is created twice in this batch"},
      {"edited too",
       {Create(fresh, status), Set(fresh, {{"required_pcc", Value::Float(0.9)}})},
       "entry '" + fresh + "' is created by this batch"},
      {"override deletes",
       {Create(fresh, status), Set(fresh, {}, {"reason"}, "n150")},
       "entry '" + fresh + "' is created by this batch"},
      {"edited before", {Set(fresh, status), Create(fresh, status)}, "is created by this batch"},
      {"arch", {with_arch}, "a created entry cannot have arch_overrides"},
      {"delete", {with_delete}, "a created entry has no fields to delete"},
      {"no fields", {Create(fresh, {})}, "a created entry needs at least one field"},
      {"bad field", {Create(fresh, {{"statsu", Value::String("X")}})}, "unknown field 'statsu'"},
      {"bad value",
       {Create(fresh, {{"status", Value::String("PASSING")}})},
       "invalid value 'PASSING'"},
      {"bad key", {Create("resnet-50", status)}, "cannot create entry 'resnet-50': "},
      {"outside the repository",
       {Create("../x/pytorch-A-single_device-inference", status)},
       "outside the repository"},
      {"run mode",
       {Create("resnet/pytorch-50-single_device-training", status)},
       "its run mode 'training' is not this file's (inference)"},
      {"parallelism",
       {Create("resnet/pytorch-50-data_parallel-inference", status)},
       "its parallelism 'data_parallel' is not this file's (single_device)"},
      {"newline in key",
       {Create("resnet/pytorch-50\n-single_device-inference", status)},
       "a key is one line without control characters"},
      {"empty key", {Create("", status)}, "cannot create an entry with an empty key"},
  };
  for (const auto& c : cases) {
    // A valid edit and a valid create first: neither may take effect.
    std::vector<EntryEdit> edits = {Set("xtts_v2/pytorch-hifigan_decoder-single_device-inference",
                                        {{"status", Value::String("KNOWN_FAILURE_XFAIL")}}),
                                    Create("other/pytorch-1-single_device-inference", status)};
    edits.insert(edits.end(), c.edits.begin(), c.edits.end());
    auto out = ApplyEdits(doc, edits);
    ASSERT_FALSE(out.ok()) << c.name;
    EXPECT_EQ(out.status().code(), c.code) << c.name << ": " << out.status();
    EXPECT_NE(std::string(out.status().message()).find(c.want), std::string::npos)
        << c.name << ": " << out.status();
  }
}

// The merge builds tt-xla.patch from EditDetail's blocks (diff::UnifiedDiffOfRegions): with
// created entries the blocks must still describe the change, and the patch must apply.
void ExpectBlocksMakeAPatchThatApplies(const char* path, const std::string& before,
                                       const std::string& after, const EditDetail& detail) {
  std::vector<diff::Region> regions;
  for (const auto& b : detail.blocks) {
    regions.push_back({b.old_first, b.old_end, b.new_first, b.new_end});
  }
  const std::string patch = diff::UnifiedDiffOfRegions(path, before, after, regions);
  // The blocks are exact: every line outside them is unchanged (with its newline) and in step,
  // and a pure insertion's lines are all added.
  auto lines = [](std::string_view text) {
    std::vector<std::string_view> out;
    while (!text.empty()) {
      const std::size_t nl = text.find('\n');
      const std::size_t len = nl == std::string_view::npos ? text.size() : nl + 1;
      out.push_back(text.substr(0, len));
      text.remove_prefix(len);
    }
    return out;
  };
  const auto old_lines = lines(before);
  const auto new_lines = lines(after);
  int i = 0, j = 0;
  auto same_until = [&](int old_end, int new_end) {
    EXPECT_EQ(old_end - i, new_end - j) << "blocks out of step";
    for (; i < old_end && j < new_end; ++i, ++j) EXPECT_EQ(old_lines[i], new_lines[j]) << i;
  };
  for (const auto& b : detail.blocks) {
    ASSERT_LE(i, b.old_first);
    ASSERT_LE(b.old_first, b.old_end);
    ASSERT_LE(b.new_first, b.new_end);
    same_until(b.old_first, b.new_first);
    i = b.old_end;
    j = b.new_end;
    if (b.old_first == b.old_end) {
      std::string added;
      for (int k = b.new_first; k < b.new_end; ++k) util::StrAppend(&added, "+", new_lines[k]);
      EXPECT_NE(patch.find(added), std::string::npos) << patch;
    }
  }
  same_until(static_cast<int>(old_lines.size()), static_cast<int>(new_lines.size()));
  auto files = diff::SplitDiff(patch);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 1u);
  auto applied = diff::ApplyFileDiff(before, files->front());
  ASSERT_TRUE(applied.ok()) << applied.status() << "\n" << patch;
  EXPECT_EQ(*applied, after);
  testing::TempDir tmp;
  std::string log;
  ASSERT_EQ(testing::RunCommand({"git", "init", "-q", "."}, tmp.path(), &log), 0) << log;
  testing::WriteFileOrDie(tmp.path() / path, before);
  testing::WriteFileOrDie(tmp.path() / "p.patch", patch);
  ASSERT_EQ(testing::RunCommand({"git", "apply", "--check", "p.patch"}, tmp.path(), &log), 0)
      << log << "\n"
      << patch;
  ASSERT_EQ(testing::RunCommand({"git", "apply", "p.patch"}, tmp.path(), &log), 0) << log;
  EXPECT_EQ(testing::ReadFileOrDie(tmp.path() / path), after);
}

TEST(EditorCreate, TheBlocksDescribeAPureInsertionAndThePatchApplies) {
  EditDetail detail;
  const std::vector<EntryEdit> edits = {Create("resnet/pytorch-50-single_device-inference",
                                               {{"status", Value::String("EXPECTED_PASSING")}})};
  auto out = ApplyAt(kInferencePath, kInference, edits, &detail);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(detail.blocks.size(), 1u);
  const auto& b = detail.blocks[0];
  EXPECT_EQ(b.old_first, 19);  // before the blank line after the last entry
  EXPECT_EQ(b.old_end, 19);
  EXPECT_EQ(b.new_first, 19);
  EXPECT_EQ(b.new_end, 22);  // blank, key, status
  ASSERT_TRUE(detail.after.has_value());
  EXPECT_EQ(detail.after->entries().size(), 4u);
  ExpectBlocksMakeAPatchThatApplies(kInferencePath, kInference, *out, detail);
}

// An edit of the last entry and a create: two adjacent blocks, and a commented field.
TEST(EditorCreate, EditAndCreateTogetherMakeAPatchThatApplies) {
  EditDetail detail;
  const std::vector<EntryEdit> edits = {
      Commented("xtts_v2/pytorch-hifigan_decoder-single_device-inference",
                {{"required_pcc", Value::Float(0.96)}}, {{"required_pcc", "pcc 0.9688 on n150"}}),
      Create("resnet/pytorch-50-single_device-inference",
             {{"status", Value::String("EXPECTED_PASSING")}}),
      Set("densenet/pytorch-161-single_device-inference", {}, {"required_pcc"})};
  auto out = ApplyAt(kInferencePath, kInference, edits, &detail);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(detail.blocks.size(), 3u);
  EXPECT_EQ(detail.blocks[2].old_first, detail.blocks[2].old_end);
  ExpectBlocksMakeAPatchThatApplies(kInferencePath, kInference, *out, detail);
}

// A file without its final newline: the last line gains it as part of the insertion's block,
// and the result ends with exactly one newline.
TEST(EditorCreate, AFileWithoutAFinalNewlineEndsWithOne) {
  const std::string text =
      "test_config:\n"
      "  a/pytorch-X-single_device-training:\n"
      "    status: EXPECTED_PASSING";
  const std::vector<EntryEdit> create = {Create("b/pytorch-Y-single_device-training",
                                                {{"status", Value::String("EXPECTED_PASSING")}})};
  EditDetail detail;
  auto out = ApplyAt(kPath, text, create, &detail);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, text + "\n  b/pytorch-Y-single_device-training:\n    status: EXPECTED_PASSING\n");
  ASSERT_EQ(detail.blocks.size(), 1u);
  EXPECT_EQ(detail.blocks[0].old_first, 2);
  EXPECT_EQ(detail.blocks[0].old_end, 3);
  EXPECT_EQ(detail.blocks[0].new_first, 2);
  EXPECT_EQ(detail.blocks[0].new_end, 5);
  ExpectBlocksMakeAPatchThatApplies(kPath, text, *out, detail);
  // With the last entry edited too: its block adds the newline, the insertion follows it.
  std::vector<EntryEdit> both = create;
  both.push_back(Set("a/pytorch-X-single_device-training",
                     {{"status", Value::String("KNOWN_FAILURE_XFAIL")}}));
  out = ApplyAt(kPath, text, both, &detail);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "test_config:\n"
            "  a/pytorch-X-single_device-training:\n"
            "    status: KNOWN_FAILURE_XFAIL\n"
            "  b/pytorch-Y-single_device-training:\n"
            "    status: EXPECTED_PASSING\n");
  ASSERT_EQ(detail.blocks.size(), 2u);
  EXPECT_EQ(detail.blocks[1].old_first, 3);
  EXPECT_EQ(detail.blocks[1].old_end, 3);
  ExpectBlocksMakeAPatchThatApplies(kPath, text, *out, detail);
}

}  // namespace
}  // namespace triage::inventory
