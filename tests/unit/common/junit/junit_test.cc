#include <cmath>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/inventory/value.h"
#include "common/junit/junit.h"
#include "common/junit/python_literal.h"
#include "common/junit/verdict.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::junit {
namespace {

using inventory::Value;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

// ---------------------------------------------------------------------------------------------
// JUnit parsing

// pytest 7 with -o junit_family=xunit1, pretty-printed: file/line attributes, properties first.
constexpr std::string_view kXunit1 = R"(<?xml version="1.0" encoding="utf-8"?>
<testsuites>
  <testsuite name="pytest" errors="0" failures="1" skipped="2" tests="4" time="512.331" timestamp="2025-06-01T10:00:00.000000" hostname="n150-ci-07">
    <testcase classname="tests.runner.test_models" name="test_all_models_torch[mgp_str_base/pytorch-single_device-training]" file="tests/runner/test_models.py" line="160" time="41.253">
      <properties>
        <property name="tags" value="{'test_name': 'test_all_models_torch', 'bringup_status': 'PASSED', 'arch': None}" />
        <property name="owner" value="tt-xla" />
      </properties>
    </testcase>
    <testcase classname="tests.runner.test_models" name="test_all_models_torch[yolov9/pytorch-T-single_device-training]" file="tests/runner/test_models.py" line="160" time="97.5">
      <properties>
        <property name="error_message" value="tt-forge-models doesn't implement unpack_forward_output for this model." />
        <property name="tags" value="{'bringup_status': 'FAILED_FE_COMPILATION', 'pcc': nan}" />
        <property name="owner" value="tt-xla" />
        <property name="owner" value="second" />
      </properties>
      <failure message="RuntimeError: TT_FATAL @ /tt-metal/ttnn/cpp/ttnn/operations/conv/conv2d/conv2d.cpp:88: input.dtype() == DataType::BFLOAT16&#10;info:&#10;backtrace:">request = &lt;FixtureRequest for &lt;Function test_all_models_torch[yolov9/pytorch-T-single_device-training]&gt;&gt;

    def test_all_models_torch(request, record_property):
&gt;       tester.test()

tests/runner/test_models.py:160:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
E   RuntimeError: TT_FATAL @ /tt-metal/ttnn/cpp/ttnn/operations/conv/conv2d/conv2d.cpp:88: input.dtype() == DataType::BFLOAT16
E   info:
E   backtrace:

python_package/tt_torch/backend/backend.py:212: RuntimeError</failure>
      <system-err>2025-06-01 10:03:12.001 | critical |          Always | TT_FATAL @ conv2d.cpp:88</system-err>
    </testcase>
    <testcase classname="tests.runner.test_models" name="test_all_models_torch[bert/pytorch-base-single_device-training]" file="tests/runner/test_models.py" line="160" time="0.002">
      <skipped type="pytest.skip" message="Skipped: not supported on n150">tests/runner/test_models.py:118: Skipped: not supported on n150</skipped>
    </testcase>
    <testcase classname="tests.runner.test_models" name="test_all_models_torch[gpt2/pytorch-base-single_device-training]" file="tests/runner/test_models.py" line="160" time="3.1">
      <skipped type="pytest.xfail" message="known issue" />
    </testcase>
  </testsuite>
</testsuites>
)";

// pytest 7 default family xunit2, written on one line, root <testsuites>: no file attribute.
constexpr std::string_view kXunit2OneLine =
    R"(<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" failures="0" skipped="0" tests="2" time="9.1" timestamp="2025-06-02T08:00:00" hostname="p150-2"><testcase classname="tests.runner.test_models" name="test_all_models_jax[gpt2/jax-base-single_device-inference]" time="2.5"><properties><property name="triage_stage" value="TTMLIR_COMPILATION_START" /></properties></testcase><testcase classname="tests.runner.test_models" name="test_all_models_torch[resnet/pytorch-50-single_device-training]" time="0.4"><error message="failed on setup with &quot;RuntimeError: device busy&quot;">@pytest.fixture
E   RuntimeError: device busy</error><system-out>opening device</system-out></testcase></testsuite></testsuites>)";

TEST(JUnitParseTest, Xunit1PrettyPrinted) {
  absl::StatusOr<Report> r = ParseJUnit(kXunit1, "verify_training.xml");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, "verify_training.xml");
  ASSERT_EQ(r->cases.size(), 4u);

  const TestCase& pass = r->cases[0];
  EXPECT_EQ(pass.key, "mgp_str_base/pytorch-single_device-training");
  EXPECT_EQ(pass.name, "test_all_models_torch[mgp_str_base/pytorch-single_device-training]");
  EXPECT_EQ(pass.classname, "tests.runner.test_models");
  EXPECT_EQ(pass.file, "tests/runner/test_models.py");
  EXPECT_DOUBLE_EQ(pass.time_seconds, 41.253);
  EXPECT_EQ(pass.outcome, Outcome::kPassed);
  EXPECT_THAT(pass.properties, ElementsAre(Pair("tags", HasSubstr("'bringup_status': 'PASSED'")),
                                           Pair("owner", "tt-xla")));
  EXPECT_TRUE(pass.message.empty());

  const TestCase& fail = r->cases[1];
  EXPECT_EQ(fail.key, "yolov9/pytorch-T-single_device-training");
  EXPECT_EQ(fail.outcome, Outcome::kFailed);
  // &#10; in the attribute is a real newline.
  EXPECT_THAT(fail.message, HasSubstr("BFLOAT16\ninfo:\nbacktrace:"));
  EXPECT_THAT(fail.text, HasSubstr(">       tester.test()"));
  EXPECT_THAT(fail.text, HasSubstr("E   RuntimeError: TT_FATAL @"));
  EXPECT_THAT(fail.system_err, HasSubstr("| TT_FATAL @ conv2d.cpp:88"));
  ASSERT_NE(fail.Property("error_message"), nullptr);
  EXPECT_EQ(*fail.Property("error_message"),
            "tt-forge-models doesn't implement unpack_forward_output for this model.");
  ASSERT_NE(fail.Property("owner"), nullptr);
  EXPECT_EQ(*fail.Property("owner"), "tt-xla");  // the first of two
  EXPECT_EQ(fail.Property("triage_stage"), nullptr);
  EXPECT_EQ(fail.properties.size(), 4u);

  const TestCase& skip = r->cases[2];
  EXPECT_EQ(skip.outcome, Outcome::kSkipped);
  EXPECT_EQ(skip.result_type, "pytest.skip");
  EXPECT_EQ(skip.message, "Skipped: not supported on n150");
  EXPECT_FALSE(skip.IsXfail());

  const TestCase& xfail = r->cases[3];
  EXPECT_EQ(xfail.outcome, Outcome::kSkipped);
  EXPECT_EQ(xfail.result_type, "pytest.xfail");
  EXPECT_TRUE(xfail.IsXfail());
}

TEST(JUnitParseTest, Xunit2OneLine) {
  absl::StatusOr<Report> r = ParseJUnit(kXunit2OneLine, "x2.xml");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->cases.size(), 2u);
  EXPECT_EQ(r->cases[0].key, "gpt2/jax-base-single_device-inference");
  EXPECT_EQ(r->cases[0].file, "");
  EXPECT_EQ(r->cases[0].outcome, Outcome::kPassed);
  ASSERT_NE(r->cases[0].Property("triage_stage"), nullptr);
  EXPECT_EQ(*r->cases[0].Property("triage_stage"), "TTMLIR_COMPILATION_START");

  const TestCase& err = r->cases[1];
  EXPECT_EQ(err.outcome, Outcome::kError);
  EXPECT_EQ(err.message, "failed on setup with \"RuntimeError: device busy\"");
  EXPECT_THAT(err.text, HasSubstr("E   RuntimeError: device busy"));
  EXPECT_EQ(err.system_out, "opening device");
  EXPECT_DOUBLE_EQ(err.time_seconds, 0.4);
}

TEST(JUnitParseTest, RootTestsuiteAndNestedSuites) {
  absl::StatusOr<Report> r = ParseJUnit(
      R"(<testsuite name="pytest"><testcase name="test_all_models[a]"/><testsuite name="inner"><testcase name="test_all_models[b]" time="1"/></testsuite></testsuite>)",
      "root.xml");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->cases.size(), 2u);
  EXPECT_EQ(r->cases[0].key, "a");
  EXPECT_EQ(r->cases[1].key, "b");
}

TEST(JUnitParseTest, FailureWinsOverSkippedAndError) {
  absl::StatusOr<Report> r = ParseJUnit(
      R"(<testsuites><testsuite>
<testcase name="t[a]"><skipped type="pytest.skip" message="s"/><failure message="F1">tb1</failure></testcase>
<testcase name="t[b]"><error message="teardown">tb2</error><failure message="F2">tb3</failure></testcase>
<testcase name="t[c]"><skipped type="pytest.xfail" message="x"/><error message="E3"/></testcase>
</testsuite></testsuites>)",
      "mix.xml");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->cases.size(), 3u);
  EXPECT_EQ(r->cases[0].outcome, Outcome::kFailed);
  EXPECT_EQ(r->cases[0].message, "F1");
  EXPECT_EQ(r->cases[0].text, "tb1");
  EXPECT_EQ(r->cases[1].outcome, Outcome::kFailed);
  EXPECT_EQ(r->cases[1].message, "F2");
  EXPECT_EQ(r->cases[2].outcome, Outcome::kError);
  EXPECT_EQ(r->cases[2].message, "E3");
  EXPECT_FALSE(r->cases[2].IsXfail());
}

TEST(JUnitParseTest, CdataAndNonUtf8PassThrough) {
  std::string xml =
      "<testsuites><testsuite><testcase name=\"t[k]\"><failure message=\"bad \xff byte\">"
      "<![CDATA[E   ValueError: <raw>]]></failure></testcase></testsuite></testsuites>";
  absl::StatusOr<Report> r = ParseJUnit(xml, "bytes.xml");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->cases.size(), 1u);
  EXPECT_EQ(r->cases[0].message, "bad \xff byte");
  EXPECT_EQ(r->cases[0].text, "E   ValueError: <raw>");
}

TEST(JUnitParseTest, KeyOfTestName) {
  EXPECT_EQ(KeyOfTestName("test_all_models_torch[a/pytorch-b-single_device-training]"),
            "a/pytorch-b-single_device-training");
  EXPECT_EQ(KeyOfTestName("test_all_models_jax[gpt2/jax-base-single_device-inference]"),
            "gpt2/jax-base-single_device-inference");
  EXPECT_EQ(KeyOfTestName("test_all_models[x[1]-y]"), "x[1]-y");
  EXPECT_EQ(KeyOfTestName("test_plain"), "test_plain");
  EXPECT_EQ(KeyOfTestName("test_odd]x["), "test_odd]x[");
}

TEST(JUnitParseTest, TruncatedXmlNamesSourceAndLine) {
  std::string_view whole = kXunit1;
  std::string cut(whole.substr(0, whole.find("<testcase classname", 300)));
  absl::StatusOr<Report> r = ParseJUnit(cut, "/tmp/verify_unpack_training.xml");
  ASSERT_FALSE(r.ok());
  std::string msg = util::MessageOf(r.status());
  EXPECT_THAT(msg, HasSubstr("/tmp/verify_unpack_training.xml:"));
  EXPECT_THAT(msg, HasSubstr("malformed JUnit XML"));
  EXPECT_THAT(msg, HasSubstr("truncated"));
  int lines = static_cast<int>(util::SplitLines(cut).size());
  EXPECT_THAT(msg, HasSubstr(util::StrCat(":", lines, ":")));
}

TEST(JUnitParseTest, MalformedInTheMiddleIsNotCalledTruncated) {
  absl::StatusOr<Report> r = ParseJUnit(
      "<testsuites>\n<testsuite>\n<testcase name=\"a\"></testsuite>\n</testsuites>\n", "mid.xml");
  ASSERT_FALSE(r.ok());
  std::string msg = util::MessageOf(r.status());
  EXPECT_THAT(msg, HasSubstr("mid.xml:3:"));
  EXPECT_THAT(msg, ::testing::Not(HasSubstr("truncated")));
}

TEST(JUnitParseTest, NonJUnitRoot) {
  absl::StatusOr<Report> r = ParseJUnit("<html><body>502 Bad Gateway</body></html>", "page.xml");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(util::MessageOf(r.status()), HasSubstr("page.xml: not a JUnit report"));
  EXPECT_THAT(util::MessageOf(r.status()), HasSubstr("<html>"));
}

TEST(JUnitParseTest, EmptyInput) {
  for (std::string_view empty : {std::string_view(""), std::string_view(" \n\t\n")}) {
    absl::StatusOr<Report> r = ParseJUnit(empty, "empty.xml");
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(util::MessageOf(r.status()), HasSubstr("empty.xml: empty JUnit XML"));
  }
}

TEST(JUnitParseTest, ParseJUnitFile) {
  testing::TempDir dir;
  std::filesystem::path path = dir.path() / "verify.xml";
  testing::WriteFileOrDie(path, kXunit2OneLine);
  absl::StatusOr<Report> r = ParseJUnitFile(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, path.string());
  EXPECT_EQ(r->cases.size(), 2u);

  absl::StatusOr<Report> small = ParseJUnitFile(path, 100);
  EXPECT_FALSE(small.ok());

  absl::StatusOr<Report> missing = ParseJUnitFile(dir.path() / "nope.xml");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(util::MessageOf(missing.status()), HasSubstr("nope.xml"));
}

TEST(JUnitForKeysTest, OrderAndMissingKeys) {
  absl::StatusOr<Report> r = ParseJUnit(kXunit1, "v.xml");
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<std::vector<TestCase>> got = ForKeys(
      *r, {"yolov9/pytorch-T-single_device-training", "absent/pytorch-single_device-training",
           "mgp_str_base/pytorch-single_device-training"});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[0].outcome, Outcome::kFailed);
  EXPECT_EQ((*got)[0].key, "yolov9/pytorch-T-single_device-training");
  EXPECT_EQ((*got)[1].outcome, Outcome::kMissing);
  EXPECT_EQ((*got)[1].key, "absent/pytorch-single_device-training");
  EXPECT_TRUE((*got)[1].name.empty());
  EXPECT_EQ((*got)[2].outcome, Outcome::kPassed);

  absl::StatusOr<std::vector<TestCase>> none = ForKeys(*r, {});
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(*none, IsEmpty());
}

TEST(JUnitForKeysTest, DuplicateKeyRejectsTheFile) {
  absl::StatusOr<Report> r = ParseJUnit(
      R"(<testsuites><testsuite>
<testcase name="test_all_models_torch[dup/pytorch-single_device-training]"><failure message="call"/></testcase>
<testcase name="test_all_models_torch[other/pytorch-single_device-training]"/>
<testcase name="test_all_models_torch[dup/pytorch-single_device-training]"><error message="teardown"/></testcase>
</testsuite></testsuites>)",
      "shard3/junit/run1.xml");
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<std::vector<TestCase>> got = ForKeys(*r, {"other/pytorch-single_device-training"});
  ASSERT_FALSE(got.ok());
  std::string msg = util::MessageOf(got.status());
  EXPECT_THAT(msg, HasSubstr("shard3/junit/run1.xml"));
  EXPECT_THAT(msg, HasSubstr("'dup/pytorch-single_device-training'"));
}

TEST(JUnitParseTest, OutcomeNames) {
  EXPECT_EQ(OutcomeName(Outcome::kPassed), "passed");
  EXPECT_EQ(OutcomeName(Outcome::kFailed), "failed");
  EXPECT_EQ(OutcomeName(Outcome::kError), "error");
  EXPECT_EQ(OutcomeName(Outcome::kSkipped), "skipped");
  EXPECT_EQ(OutcomeName(Outcome::kMissing), "missing");
}

// ---------------------------------------------------------------------------------------------
// Python literals

Value MapOf(std::vector<std::pair<std::string, Value>> items) {
  Value v;
  v.kind = Value::Kind::kMap;
  for (auto& [k, val] : items) v.map.push_back(inventory::MapItem{k, {}, std::move(val)});
  return v;
}

struct LiteralCase {
  std::string name;
  std::string text;
  Value expected;
};

void PrintTo(const LiteralCase& c, std::ostream* os) { *os << c.name; }

class PythonLiteralTest : public ::testing::TestWithParam<LiteralCase> {};

TEST_P(PythonLiteralTest, Parses) {
  absl::StatusOr<Value> v = ParsePythonLiteral(GetParam().text);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, GetParam().expected) << "got " << v->DebugString();
}

std::vector<LiteralCase> LiteralCases() {
  using V = Value;
  return {
      {"Dict", "{'a': 1}", MapOf({{"a", V::Int(1)}})},
      {"EmptyDict", " {} ", MapOf({})},
      {"DoubleQuotedKey", R"({"a": 'b'})", MapOf({{"a", V::String("b")}})},
      {"List", "[1, 'b', None]", V::List({V::Int(1), V::String("b"), V::Null()})},
      {"TrailingCommas", "{'a': [1, 2,],}", MapOf({{"a", V::List({V::Int(1), V::Int(2)})}})},
      {"Tuple", "(1, 2)", V::List({V::Int(1), V::Int(2)})},
      {"OneTuple", "(1,)", V::List({V::Int(1)})},
      {"EmptyTuple", "()", V::List({})},
      {"Parenthesised", "(5)", V::Int(5)},
      {"Set", "{1, 2}", V::List({V::Int(1), V::Int(2)})},
      {"True", "True", V::Bool(true)},
      {"False", "False", V::Bool(false)},
      {"None", "None", V::Null()},
      {"Inf", "inf", V::Float(INFINITY)},
      {"NegInf", "-inf", V::Float(-INFINITY)},
      {"FloatCallInf", "float('-inf')", V::Float(-INFINITY)},
      {"FloatCallNumber", "float('1.5')", V::Float(1.5)},
      {"Exponent", "1e-3", V::Float(0.001)},
      {"NegativeFloat", "-0.5", V::Float(-0.5)},
      {"NegativeInt", "-7", V::Int(-7)},
      {"Hex", "0x1f", V::Int(31)},
      {"Underscores", "1_000", V::Int(1000)},
      {"HugeIntIsFloat", "99999999999999999999", V::Float(1e20)},
      {"Int64Min", "-9223372036854775808", V::Int(INT64_MIN)},
      {"EscapedSingleQuote", R"('it\'s')", V::String("it's")},
      {"DoubleQuotesInside", R"("it's \"x\"")", V::String("it's \"x\"")},
      {"Newline", R"('a\nb\tc')", V::String("a\nb\tc")},
      {"Backslash", R"('C:\\dir')", V::String("C:\\dir")},
      {"HexEscapeIsCodePoint", R"('caf\xe9')", V::String("caf\xc3\xa9")},
      {"UnicodeEscape", R"('a\u2014b')",
       V::String("a\xe2\x80\x94"
                 "b")},
      {"LongUnicodeEscape", R"('\U0001F600')", V::String("\xf0\x9f\x98\x80")},
      {"SurrogatePair", R"('\ud83d\ude00')", V::String("\xf0\x9f\x98\x80")},
      {"LoneSurrogate", R"('\ud800x')", V::String("\xef\xbf\xbdx")},
      {"OctalEscape", R"('\0\101')", V::String(std::string("\0A", 2))},
      {"UnknownEscapeKept", R"('\d+')", V::String("\\d+")},
      {"RawUtf8PassesThrough", "'na\xc3\xafve \xe2\x80\x94 ok'",
       V::String("na\xc3\xafve \xe2\x80\x94 ok")},
      {"BytesLiteral", R"(b'\xff\x00')", V::String(std::string("\xff\0", 2))},
      {"RawString", R"(r'a\d\'')", V::String("a\\d\\'")},
      {"EnumRepr", "<BringupStatus.FAILED_RUNTIME: 'failed_runtime'>",
       V::String("BringupStatus.FAILED_RUNTIME")},
      {"EnumReprIntValue", "<Parallelism.SINGLE_DEVICE: 1>",
       V::String("Parallelism.SINGLE_DEVICE")},
      {"OtherRepr", "<function f at 0x7f3a>", V::String("<function f at 0x7f3a>")},
      {"DottedName", "torch.bfloat16", V::String("torch.bfloat16")},
      {"NonStringKeys", "{1: 'x', None: 2, (1, 2): 3, True: 4}",
       MapOf({{"1", V::String("x")},
              {"None", V::Int(2)},
              {"(1, 2)", V::Int(3)},
              {"True", V::Int(4)}})},
      {"Nested", "{'a': {'b': [1, {'c': (None,)}]}}",
       MapOf({{"a", MapOf({{"b", V::List({V::Int(1), MapOf({{"c", V::List({V::Null()})}})})}})}})},
      {"RunnerTags",
       "{'test_name': 'test_all_models_torch', 'model_info': {'name': 'pytorch_YOLOv9_T', "
       "'group': <ModelGroup.GENERALITY: 'generality'>}, 'run_mode': 'TRAINING', "
       "'bringup_status': 'FAILED_RUNTIME', 'arch': None, 'pcc': -1.0, "
       "'comparison_passed': False}",
       MapOf({{"test_name", V::String("test_all_models_torch")},
              {"model_info", MapOf({{"name", V::String("pytorch_YOLOv9_T")},
                                    {"group", V::String("ModelGroup.GENERALITY")}})},
              {"run_mode", V::String("TRAINING")},
              {"bringup_status", V::String("FAILED_RUNTIME")},
              {"arch", V::Null()},
              {"pcc", V::Float(-1.0)},
              {"comparison_passed", V::Bool(false)}})},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, PythonLiteralTest, ::testing::ValuesIn(LiteralCases()),
                         [](const auto& p) { return p.param.name; });

TEST(PythonLiteralNanTest, NanForms) {
  for (std::string_view text : {"nan", "float('nan')", "-nan", "{'pcc': nan}"}) {
    absl::StatusOr<Value> v = ParsePythonLiteral(text);
    ASSERT_TRUE(v.ok()) << text << ": " << v.status();
    const Value* f = v->is_map() ? v->Find("pcc") : &*v;
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->kind, Value::Kind::kFloat) << text;
    EXPECT_TRUE(std::isnan(f->number)) << text;
  }
}

TEST(PythonLiteralTest, QuotedStringsRememberTheirQuote) {
  absl::StatusOr<Value> v = ParsePythonLiteral("\"x\"");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->quoted);
  EXPECT_EQ(v->quote, '"');
}

struct LiteralErrorCase {
  std::string name;
  std::string text;
  std::vector<std::string> message_parts;
};

void PrintTo(const LiteralErrorCase& c, std::ostream* os) { *os << c.name; }

class PythonLiteralErrorTest : public ::testing::TestWithParam<LiteralErrorCase> {};

TEST_P(PythonLiteralErrorTest, Fails) {
  absl::StatusOr<Value> v = ParsePythonLiteral(GetParam().text);
  ASSERT_FALSE(v.ok()) << "parsed as " << v->DebugString();
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  for (const std::string& part : GetParam().message_parts) {
    EXPECT_THAT(util::MessageOf(v.status()), HasSubstr(part));
  }
}

std::vector<LiteralErrorCase> LiteralErrorCases() {
  return {
      {"Empty", "  ", {"empty input", "at byte 2"}},
      {"MissingColon", "{'a' 1}", {"expected ':' after dict key", "at byte 5"}},
      {"UnterminatedString", "{'a': 'abc}", {"unterminated string", "at byte 6"}},
      {"UnterminatedList", "[1, 2", {"unterminated '['", "at byte 0"}},
      {"JsonTrue", "{\"a\": true}", {"unknown name 'true'", "at byte 6"}},
      {"JsonNull", "[null]", {"unknown name 'null'", "at byte 1"}},
      {"TruncatedHexEscape", R"('\x4')", {"truncated \\x escape", "at byte 1"}},
      {"TrailingGarbage", "1 2", {"after the value", "at byte 2"}},
      {"MissingComma", "[1 2]", {"expected ',' or ']'", "at byte 3"}},
      {"NamedEscape", R"('\N{EM DASH}')", {"\\N{name}", "at byte 1"}},
      {"Complex", "1j", {"complex"}},
      {"BadExponent", "1e", {"exponent"}},
      {"UnterminatedRepr", "<Enum.A: 1", {"unterminated '<'", "at byte 0"}},
      {"FloatOfText", "float('abc')", {"not a number"}},
      {"DeepNesting", std::string(300, '[') + std::string(300, ']'), {"nested deeper"}},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, PythonLiteralErrorTest, ::testing::ValuesIn(LiteralErrorCases()),
                         [](const auto& p) { return p.param.name; });

// ParsePythonDictKeys reads the same syntax: every case above, as the value of a kept key and of
// a skipped one, is accepted or refused as ParsePythonLiteral does, with the same message, and a
// kept value is the value ParsePythonLiteral builds.
TEST_P(PythonLiteralTest, KeptOrSkippedByParsePythonDictKeys) {
  const std::string text =
      util::StrCat("{'skipped': ", GetParam().text, ", 'kept': ", GetParam().text, "}");
  absl::StatusOr<Value> v = ParsePythonDictKeys(text, {"kept", "absent"});
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_TRUE(v->is_map());
  ASSERT_EQ(v->map.size(), 1u) << v->DebugString();
  EXPECT_EQ(v->map[0].key, "kept");
  EXPECT_EQ(v->map[0].value, GetParam().expected) << "got " << v->map[0].value.DebugString();
  // At the top level: a value of its kind.
  absl::StatusOr<Value> top = ParsePythonDictKeys(GetParam().text, {"a"});
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(top->kind, GetParam().expected.kind);
}

TEST_P(PythonLiteralErrorTest, RefusedAlikeByParsePythonDictKeys) {
  for (const std::string& text :
       {GetParam().text, util::StrCat("{'skipped': ", GetParam().text, "}"),
        util::StrCat("{'kept': ", GetParam().text, "}"),
        util::StrCat("{'a': {'skipped': [", GetParam().text, "]}}")}) {
    // Nothing inside a list is an empty list, not an error.
    if (util::TrimWhitespace(std::string_view(GetParam().text)).empty() &&
        text.find('[') != std::string::npos) {
      continue;
    }
    absl::StatusOr<Value> full = ParsePythonLiteral(text);
    ASSERT_FALSE(full.ok()) << text;
    absl::StatusOr<Value> kept = ParsePythonDictKeys(text, {"kept"});
    ASSERT_FALSE(kept.ok()) << text << " parsed as " << kept->DebugString();
    EXPECT_EQ(kept.status(), full.status()) << text;
  }
}

TEST(ParsePythonDictKeysTest, OnlyTheKeptKeysAreBuilt) {
  absl::StatusOr<Value> v = ParsePythonDictKeys(
      "{'arch': 'n150', 'model_info': {'x': [1, 2, 3]}, 'pcc': 0.5, 'arch': 'p150', 7: 'x', "
      "b'pcc': 1}",
      {"arch", "pcc"});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, MapOf({{"arch", Value::String("n150")},
                       {"pcc", Value::Float(0.5)},
                       {"arch", Value::String("p150")},
                       {"pcc", Value::Int(1)}}));
  EXPECT_EQ(v->Find("arch")->string, "n150");  // the first, as ParsePythonLiteral's map finds
  // Not a dict: its kind, empty.
  v = ParsePythonDictKeys("['arch', 'n150']", {"arch"});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, Value::List({}));
  v = ParsePythonDictKeys("{'arch', 'n150'}", {"arch"});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, Value::List({}));
}

TEST(ParsePythonDictKeysTest, KeptValuesHoldAtMostMaxItems) {
  std::string big = "[";
  for (int i = 0; i < 50; ++i) big += "'RM_XFAIL', ";
  big += "]";
  const std::string text = util::StrCat("{'skipped': ", big, ", 'guidance': ", big, "}");
  // Skipped items never count; kept ones (and the kept key itself) do.
  EXPECT_TRUE(ParsePythonDictKeys(text, {"guidance"}, 51).ok());
  absl::StatusOr<Value> v = ParsePythonDictKeys(text, {"guidance"}, 50);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(util::MessageOf(v.status()),
              AllOf(HasSubstr("more than 50 items"), HasSubstr("at byte")));
  EXPECT_TRUE(ParsePythonDictKeys(text, {"other"}, 0).ok());
}

// ---------------------------------------------------------------------------------------------
// Classify

constexpr std::string_view kUnpackReason =
    "tt-forge-models doesn't implement unpack_forward_output for this model.";

using Props = std::vector<std::pair<std::string, std::string>>;

TestCase Failed(std::string message, std::string text, Props props = {}) {
  TestCase tc;
  tc.key = "m/pytorch-v-single_device-training";
  tc.name = "test_all_models_torch[" + tc.key + "]";
  tc.outcome = Outcome::kFailed;
  tc.message = std::move(message);
  tc.text = std::move(text);
  tc.properties = std::move(props);
  return tc;
}

struct ClassifyCase {
  std::string name;
  std::optional<TestCase> tc;  // nullopt: no testcase at all
  VerifyContext ctx;
  Verdict verdict;
  std::string stage;
  std::string stage_source;
  std::string reason;
  std::string reason_source;
  int signal = 0;
  std::string review = {};  // substring of one review note; empty: no review notes expected
};

VerifyContext Ctx(bool forced_skip = false, std::string old_reason = "", std::string log = "") {
  VerifyContext ctx;
  ctx.forced_skip = forced_skip;
  ctx.old_reason = std::move(old_reason);
  ctx.log_text = std::move(log);
  return ctx;
}

std::vector<ClassifyCase> ClassifyCases() {
  std::vector<ClassifyCase> c;
  TestCase passed;
  passed.outcome = Outcome::kPassed;
  passed.properties = {{"error_message", "stale"}, {"triage_stage", "RUNTIME_EXECUTION_START"}};
  c.push_back({"Passed", passed, Ctx(), Verdict::kPass, "", "", "", ""});

  // --- incorrect result
  c.push_back({"PccInTextBeatsStageFile",
               Failed("AssertionError: PCC comparison failed. Calculated: pcc=0.12. Required: "
                      "pcc=0.99.",
                      "E   AssertionError: PCC comparison failed. Calculated: pcc=0.12. "
                      "Required: pcc=0.99.",
                      {{"triage_stage", "RUNTIME_EXECUTION_START"}}),
               Ctx(), Verdict::kIncorrectResult, "INCORRECT_RESULT", "text",
               "AssertionError: PCC comparison failed. Calculated: pcc=0.12. Required: pcc=0.99.",
               "failure_text"});
  c.push_back({"PccInTrustedErrorMessage",
               Failed("AssertionError", "E   AssertionError",
                      {{"error_message", "PCC comparison failed. Calculated: pcc=0.5."}}),
               Ctx(), Verdict::kIncorrectResult, "INCORRECT_RESULT", "text",
               "PCC comparison failed. Calculated: pcc=0.5.", "failure_text"});
  c.push_back({"PccInEchoedErrorMessageIgnored",
               Failed("ValueError: shapes differ", "E   ValueError: shapes differ",
                      {{"error_message", "PCC comparison failed. Calculated: pcc=0.5."}}),
               Ctx(/*forced_skip=*/true), Verdict::kFailure, "FAILED_FE_COMPILATION", "text",
               "ValueError: shapes differ", "failure_text"});

  // --- crashes
  c.push_back({"ForkedCrash",
               Failed("tests/runner/test_models.py:160: running the test CRASHED with signal 11",
                      "tests/runner/test_models.py:160: running the test CRASHED with signal 11",
                      {{"error_message", "Not specified"}}),
               Ctx(), Verdict::kCrash, "FAILED_RUNTIME", "signal",
               "crashed with signal 11 (SIGSEGV)", "failure_text", 11});
  c.push_back({"NoXmlFatalSegfault", std::nullopt,
               Ctx(false, "",
                   "collected 1 item\n\nFatal Python error: Segmentation fault\n\n"
                   "Thread 0x00007f (most recent call first):\n  File \"x.py\", line 3"),
               Verdict::kCrash, "FAILED_RUNTIME", "signal", "crashed with signal 11 (SIGSEGV)",
               "log", 11});
  c.push_back(
      {"NoXmlFatalAbortedLanded", std::nullopt,
       Ctx(false, "", "Fatal Python error: Aborted during torch_xla.sync after forward pass.\n"),
       Verdict::kCrash, "FAILED_RUNTIME", "signal",
       "crashed with signal 6 (SIGABRT): Fatal Python error: Aborted during torch_xla.sync after "
       "forward pass.",
       "log", 6});
  c.push_back({"NoXmlShellSegfault", std::nullopt,
               Ctx(false, "", "tests/runner/test_models.py \nSegmentation fault (core dumped)\n"),
               Verdict::kCrash, "FAILED_RUNTIME", "signal", "crashed with signal 11 (SIGSEGV)",
               "log", 11});
  c.push_back({"NoXmlShellAbort", std::nullopt,
               Ctx(false, "", "terminate called after throwing\nAborted (core dumped)\n"),
               Verdict::kCrash, "FAILED_RUNTIME", "signal",
               "crashed with signal 6 (SIGABRT): terminate called after throwing", "log", 6});
  TestCase missing;
  missing.key = "m/pytorch-single_device-training";
  missing.outcome = Outcome::kMissing;
  {
    VerifyContext killed = Ctx(false, "", "");
    killed.exit_signal = 9;
    c.push_back({"KilledWithoutAWord", missing, killed, Verdict::kCrash, "FAILED_RUNTIME", "signal",
                 "crashed with signal 9 (SIGKILL)", "log", 9});
    c.push_back({"FatalOnTheProgressLine", missing,
                 Ctx(false, "", "tests/runner/test_models.py::t[k] Fatal Python error: Aborted\n"),
                 Verdict::kCrash, "FAILED_RUNTIME", "signal", "crashed with signal 6 (SIGABRT)",
                 "log", 6});
  }
  c.push_back({"MissingTestcaseUsesLog", missing, Ctx(false, "", "Fatal Python error: Bus error\n"),
               Verdict::kCrash, "FAILED_RUNTIME", "signal", "crashed with signal 7 (SIGBUS)", "log",
               7});
  // Where the process died: the stage file the agent found after the death, else a compiler
  // abort in the log (TT-MLIR compilation); the reason names it.
  c.push_back({"NoXmlStageFileLineNamesTheStage", std::nullopt,
               Ctx(false, "",
                   "collected 1 item\nFatal Python error: Aborted\n\n[triage-agent] the bringup "
                   "stage file reads RUNTIME_EXECUTION_START\n[triage-agent] the pytest process "
                   "CRASHED with signal 6 (SIGABRT)\n"),
               Verdict::kCrash, "FAILED_RUNTIME", "stage_file",
               "crashed with signal 6 (SIGABRT) during runtime execution", "log", 6});
  c.push_back({"NoXmlCompilerUnreachable", std::nullopt,
               Ctx(false, "",
                   "collected 1 item\nUnexpected tensor memory layout for operand 0\n"
                   "UNREACHABLE executed at /opt/tt-mlir/lib/Dialect/TTNN/Transforms/"
                   "TTNNLayout.cpp:317!\nFatal Python error: Aborted\n"),
               Verdict::kCrash, "FAILED_TTMLIR_COMPILATION", "text",
               "crashed with signal 6 (SIGABRT) during TT-MLIR compilation: UNREACHABLE executed "
               "at TTNNLayout.cpp:317!",
               "log", 6});
  c.push_back({"NoXmlCompilerUnreachableWithStageFile", std::nullopt,
               Ctx(false, "",
                   "UNREACHABLE executed at /opt/tt-mlir/lib/Dialect/TTNN/Transforms/"
                   "TTNNLayout.cpp:317!\nFatal Python error: Aborted\n\n[triage-agent] the "
                   "bringup stage file reads TTMLIR_COMPILATION_START\n[triage-agent] the pytest "
                   "process CRASHED with signal 6 (SIGABRT)\n"),
               Verdict::kCrash, "FAILED_TTMLIR_COMPILATION", "stage_file",
               "crashed with signal 6 (SIGABRT) during TT-MLIR compilation: UNREACHABLE executed "
               "at TTNNLayout.cpp:317!",
               "log", 6});
  c.push_back({"NoXmlMlirAssertion", std::nullopt,
               Ctx(false, "",
                   "python3: /src/llvm-project/mlir/lib/IR/Verifier.cpp:42: void "
                   "mlir::verify(): Assertion `op' failed.\nAborted (core dumped)\n"),
               Verdict::kCrash, "FAILED_TTMLIR_COMPILATION", "text",
               "crashed with signal 6 (SIGABRT) during TT-MLIR compilation: Verifier.cpp:42: void "
               "mlir::verify(): Assertion `op' failed.",
               "log", 6});
  // A runtime assertion that is not the compiler's names no stage: the signal's default.
  c.push_back({"NoXmlRuntimeAssertion", std::nullopt,
               Ctx(false, "",
                   "python3: /tt-metal/tt_metal/impl/device.cpp:9: void f(): Assertion `d' "
                   "failed.\nAborted (core dumped)\n"),
               Verdict::kCrash, "FAILED_RUNTIME", "signal", "crashed with signal 6 (SIGABRT)",
               "log", 6});
  c.push_back({"NoXmlNoLog", std::nullopt, Ctx(), Verdict::kNoEvidence, "", "", "", "", 0,
               "no testcase and no log"});
  c.push_back({"NoXmlQuietLog", std::nullopt,
               Ctx(false, "", "collected 1 item\nE   ValueError: boom\n"), Verdict::kNoEvidence, "",
               "", "ValueError: boom", "log", 0, "neither a crash nor a timeout"});

  // --- timeouts
  c.push_back({"TimeoutMessage",
               Failed("Failed: Timeout >600.0s",
                      "E   Failed: Timeout >600.0s\n\n/venv/lib/python3.11/site-packages/"
                      "pytest_timeout.py:241: Failed",
                      {{"triage_stage", "TTMLIR_COMPILATION_START"}}),
               Ctx(), Verdict::kTimeout, "", "", "Failed: Timeout >600.0s", "failure_text"});
  c.push_back({"TimeoutOnlyInText", Failed("", "E   Failed: Timeout >1200.0s"), Ctx(),
               Verdict::kTimeout, "", "", "Failed: Timeout >1200.0s", "failure_text"});
  c.push_back({"NoXmlTimeoutInLog", std::nullopt, Ctx(false, "", "E   Failed: Timeout >900.0s\n"),
               Verdict::kTimeout, "", "", "Failed: Timeout >900.0s", "log"});

  // --- stage priority
  c.push_back({"StageFileBeatsText",
               Failed("RuntimeError: Fatal Python error: Aborted during torch_xla.sync",
                      "E   RuntimeError: Fatal Python error: Aborted during torch_xla.sync",
                      {{"triage_stage", "RUNTIME_EXECUTION_START\n"}}),
               Ctx(), Verdict::kFailure, "FAILED_RUNTIME", "stage_file",
               "Fatal Python error: Aborted during torch_xla.sync", "failure_text"});
  c.push_back({"StageFileFe",
               Failed("x", "E   RuntimeError: TT_FATAL @ a.cpp:1: y",
                      {{"triage_stage", "FE_COMPILATION_START"}}),
               Ctx(), Verdict::kFailure, "FAILED_FE_COMPILATION", "stage_file",
               "TT_FATAL @ a.cpp:1: y", "failure_text"});
  c.push_back({"StageFileTtmlir",
               Failed("x", "E   ValueError: v", {{"triage_stage", "TTMLIR_COMPILATION_START"}}),
               Ctx(), Verdict::kFailure, "FAILED_TTMLIR_COMPILATION", "stage_file", "ValueError: v",
               "failure_text"});
  c.push_back({"UnknownStageFileFallsToText",
               Failed("x", "E   ValueError: v", {{"triage_stage", "SOMETHING_NEW"}}), Ctx(),
               Verdict::kFailure, "FAILED_FE_COMPILATION", "text", "ValueError: v", "failure_text",
               0, "unknown stage 'SOMETHING_NEW'"});
  c.push_back({"StageFileBeatsTags",
               Failed("x", "E   ValueError: v",
                      {{"tags", "{'bringup_status': 'FAILED_FE_COMPILATION'}"},
                       {"triage_stage", "RUNTIME_EXECUTION_START"}}),
               Ctx(), Verdict::kFailure, "FAILED_RUNTIME", "stage_file", "ValueError: v",
               "failure_text"});
  c.push_back({"TrustedTagsBeatText",
               Failed("x", "E   ValueError: v",
                      {{"tags",
                        "{'test_name': 'test_all_models_torch', 'bringup_status': "
                        "'FAILED_TTMLIR_COMPILATION', 'arch': None, 'pcc': nan}"}}),
               Ctx(), Verdict::kFailure, "FAILED_TTMLIR_COMPILATION", "tags", "ValueError: v",
               "failure_text"});
  c.push_back({"TagsEnumSpelling",
               Failed("x", "E   ValueError: v",
                      {{"tags",
                        "{'bringup_status': <BringupStatus.FAILED_RUNTIME: "
                        "'failed_runtime'>}"}}),
               Ctx(), Verdict::kFailure, "FAILED_RUNTIME", "tags", "ValueError: v",
               "failure_text"});
  c.push_back({"TagsUnknownStatusIgnored",
               Failed("x", "E   ValueError: v", {{"tags", "{'bringup_status': 'UNKNOWN'}"}}), Ctx(),
               Verdict::kFailure, "FAILED_FE_COMPILATION", "text", "ValueError: v",
               "failure_text"});
  c.push_back({"ForcedSkipTagsIgnored",
               Failed("x", "E   ValueError: v", {{"tags", "{'bringup_status': 'FAILED_RUNTIME'}"}}),
               Ctx(/*forced_skip=*/true), Verdict::kFailure, "FAILED_FE_COMPILATION", "text",
               "ValueError: v", "failure_text"});
  c.push_back({"MalformedTagsReviewed",
               Failed("x", "E   ValueError: v", {{"tags", "{'bringup_status': FAILED"}}), Ctx(),
               Verdict::kFailure, "FAILED_FE_COMPILATION", "text", "ValueError: v", "failure_text",
               0, "tags property is not a Python literal"});

  // --- stage text rules
  // Device errors are recorded without the Python exception type in front (as tt-xla's
  // landed reasons read); frontend errors keep it.
  struct TextRule {
    std::string name, line, stage, reason;
  };
  for (const TextRule& r : std::vector<TextRule>{
           {"TextTtFatal", "RuntimeError: TT_FATAL @ matmul.cpp:12: a == b", "FAILED_RUNTIME",
            "TT_FATAL @ matmul.cpp:12: a == b"},
           {"TextTtThrow", "RuntimeError: TT_THROW @ device.cpp:9: bad core", "FAILED_RUNTIME",
            "TT_THROW @ device.cpp:9: bad core"},
           {"TextOom",
            "RuntimeError: Out of Memory: Not enough space to allocate 1024 B DRAM buffer",
            "FAILED_RUNTIME", "Out of Memory: Not enough space to allocate 1024 B DRAM buffer"},
           {"TextCircularBuffers",
            "RuntimeError: Statically allocated circular buffers on core range grow to 1 B",
            "FAILED_RUNTIME",
            "RuntimeError: Statically allocated circular buffers on core range grow to 1 B"},
           {"TextMlirError", "loc(\"conv\"): error: 'ttir.conv2d' op failed to legalize",
            "FAILED_TTMLIR_COMPILATION",
            "loc(\"conv\"): error: 'ttir.conv2d' op failed to legalize"},
           {"TextTtir", "RuntimeError: failed to legalize ttir.gather", "FAILED_TTMLIR_COMPILATION",
            "RuntimeError: failed to legalize ttir.gather"},
           {"TextTtnn", "RuntimeError: could not lower ttnn.conv2d", "FAILED_TTMLIR_COMPILATION",
            "RuntimeError: could not lower ttnn.conv2d"},
           {"TextElementsAttr", "RuntimeError: ElementsAttr does not provide iteration facilities",
            "FAILED_TTMLIR_COMPILATION", "ElementsAttr does not provide iteration facilities"},
           {"TextAborted", "RuntimeError: compiler Aborted", "FAILED_TTMLIR_COMPILATION",
            "RuntimeError: compiler Aborted"},
           {"TextCoreDumped", "RuntimeError: core dumped in pass", "FAILED_TTMLIR_COMPILATION",
            "RuntimeError: core dumped in pass"},
           {"TextPythonException", "AttributeError: 'tuple' object has no attribute 'logits'",
            "FAILED_FE_COMPILATION", "AttributeError: 'tuple' object has no attribute 'logits'"},
       }) {
    c.push_back({r.name, Failed(r.line, "E   " + r.line), Ctx(), Verdict::kFailure, r.stage, "text",
                 r.reason, "failure_text"});
  }

  // --- reason selection
  // An op that still has no kernel fails with exactly the old reason: that is the real error,
  // not an echo (only the runner's error_message property echoes).
  c.push_back(
      {"RealErrorEqualToOldReason",
       Failed("RuntimeError: \"lu_cpu\" not implemented for 'BFloat16'",
              "E   RuntimeError: \"lu_cpu\" not implemented for 'BFloat16'",
              {{"error_message", "RuntimeError: \"lu_cpu\" not implemented for 'BFloat16'"},
               {"triage_error", "RuntimeError: \"lu_cpu\" not implemented for 'BFloat16'"}}),
       Ctx(/*forced_skip=*/true, "RuntimeError: \"lu_cpu\" not implemented for 'BFloat16'"),
       Verdict::kFailure, "FAILED_FE_COMPILATION", "text",
       "RuntimeError: \"lu_cpu\" not implemented for 'BFloat16'", "triage_error"});
  c.push_back({"TriageErrorFirst",
               Failed("RuntimeError: Error code: 13", "E   ValueError: outer",
                      {{"error_message", "RuntimeError: runner's view"},
                       {"triage_error", "RuntimeError: TT_FATAL @ eltwise.cpp:5: x\ninfo: more"}}),
               Ctx(), Verdict::kFailure, "FAILED_RUNTIME", "text", "TT_FATAL @ eltwise.cpp:5: x",
               "triage_error"});
  c.push_back({"TrustedErrorMessage",
               Failed("RuntimeError: Error code: 13", "E   RuntimeError: Error code: 13",
                      {{"error_message", "error: 'ttir.scatter' op operand #0 mismatch"}}),
               Ctx(false, std::string(kUnpackReason)), Verdict::kFailure,
               "FAILED_TTMLIR_COMPILATION", "text", "error: 'ttir.scatter' op operand #0 mismatch",
               "error_message"});
  c.push_back({"ErrorMessageEqualToOldReasonIsEcho",
               Failed("KeyError: 'logits'", "E   KeyError: 'logits'",
                      {{"error_message", std::string(kUnpackReason)}}),
               Ctx(false, std::string(kUnpackReason)), Verdict::kFailure, "FAILED_FE_COMPILATION",
               "text", "KeyError: 'logits'", "failure_text"});
  c.push_back({"NotSpecifiedPlaceholderSkipped",
               Failed("KeyError: 'x'", "E   KeyError: 'x'", {{"error_message", "Not specified"}}),
               Ctx(), Verdict::kFailure, "FAILED_FE_COMPILATION", "text", "KeyError: 'x'",
               "failure_text"});
  // The stale-echo trap: a NOT_SUPPORTED_SKIP entry forced to run echoes its old reason and
  // bringup status; only the traceback tells the truth.
  c.push_back({"StaleEchoTrap",
               Failed("RuntimeError: TT_FATAL @ /tt-metal/ttnn/cpp/ttnn/operations/matmul/"
                      "matmul.cpp:120: a.dtype() == b.dtype()",
                      "    def forward(x):\n>       out = model(x)\n\n"
                      "E   RuntimeError: TT_FATAL @ /tt-metal/ttnn/cpp/ttnn/operations/matmul/"
                      "matmul.cpp:120: a.dtype() == b.dtype()\nE   info:\nE   backtrace:\n\n"
                      "python_package/tt_torch/backend/backend.py:212: RuntimeError",
                      {{"error_message", std::string(kUnpackReason)},
                       {"tags", "{'bringup_status': 'FAILED_FE_COMPILATION', 'arch': None}"}}),
               Ctx(/*forced_skip=*/true, std::string(kUnpackReason)), Verdict::kFailure,
               "FAILED_RUNTIME", "text", "TT_FATAL @ matmul.cpp:120: a.dtype() == b.dtype()",
               "failure_text"});
  c.push_back({"FirstTtFatalLineWins",
               Failed("x",
                      "E   ValueError: wrapper\nE   RuntimeError: TT_FATAL @ first.cpp:1: a\n"
                      "E   RuntimeError: TT_FATAL @ second.cpp:2: b\nE   KeyError: last"),
               Ctx(), Verdict::kFailure, "FAILED_RUNTIME", "text", "TT_FATAL @ first.cpp:1: a",
               "failure_text"});
  c.push_back({"MlirErrorLineBeatsException",
               Failed("RuntimeError: compile failed",
                      "E   RuntimeError: compile failed\nloc(\"x\"): error: 'ttir.gather' op "
                      "unsupported\nE   RuntimeError: compile failed again"),
               Ctx(), Verdict::kFailure, "FAILED_TTMLIR_COMPILATION", "text",
               "loc(\"x\"): error: 'ttir.gather' op unsupported", "failure_text"});
  // The outer exception only wraps the inner one: the reason names the root cause
  // (more chains in reason_test.cc).
  c.push_back({"WrapperNamesTheRootCause",
               Failed("ValueError: inner",
                      "E   ValueError: inner\n\nThe above exception was the direct cause of the "
                      "following exception:\n\nE   torch._dynamo.exc.BackendCompilerFailed: "
                      "backend='tt' raised: ValueError: inner\n"
                      "E     While executing %x"),
               Ctx(), Verdict::kFailure, "FAILED_FE_COMPILATION", "text", "ValueError: inner",
               "failure_text"});
  c.push_back({"SourceLinesIgnored",
               Failed("KeyError: 'logits'",
                      "    def check(err):\n        if \"TT_FATAL\" in err:\n"
                      ">           raise RuntimeError(\"error: wrapped\")\n"
                      "E   KeyError: 'logits'\n\ntests/runner/test_utils.py:12: KeyError"),
               Ctx(), Verdict::kFailure, "FAILED_FE_COMPILATION", "text", "KeyError: 'logits'",
               "failure_text"});
  c.push_back({"XFailedEchoSkipped",
               Failed("XFailed: " + std::string(kUnpackReason),
                      "E   AttributeError: 'Output' has no attribute 'loss'\n\nDuring handling of "
                      "the above exception, another exception occurred:\n\nE   XFailed: " +
                          std::string(kUnpackReason)),
               Ctx(false, std::string(kUnpackReason)), Verdict::kFailure, "FAILED_FE_COMPILATION",
               "text", "AttributeError: 'Output' has no attribute 'loss'", "failure_text"});
  c.push_back({"MessageAttributeFallback",
               Failed("NotImplementedError: op aten::foo\nsecond line", "no E lines here"), Ctx(),
               Verdict::kFailure, "FAILED_FE_COMPILATION", "text",
               "NotImplementedError: op aten::foo", "failure_text"});
  c.push_back(
      {"WarningsAreNoise",
       Failed("x", "E   UserWarning: error: deprecated thing\nE   ValueError: the real one"), Ctx(),
       Verdict::kFailure, "FAILED_FE_COMPILATION", "text", "ValueError: the real one",
       "failure_text"});
  // "Error code 13" is never a reason: keep looking, back through the traceback...
  c.push_back({"ErrorCode13SkippedInText",
               Failed("RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13",
                      "E   ValueError: the cause\n\nE   RuntimeError: Bad StatusOr access: "
                      "INTERNAL: Error code: 13"),
               Ctx(), Verdict::kFailure, "FAILED_FE_COMPILATION", "text", "ValueError: the cause",
               "failure_text"});
  // ...and into the log when the testcase holds nothing else.
  c.push_back({"ErrorCode13FallsBackToLog",
               Failed("RuntimeError: Error code 13", "E   RuntimeError: Error code 13",
                      {{"error_message", "Error code 13"}}),
               Ctx(false, "",
                   "collected 1 item\n2025-06-01 10:00:00.123 | critical |          Always | "
                   "\x1b[31mTT_FATAL @ /tt-metal/tt_metal/impl/buffers/buffer.cpp:41: size > "
                   "0\x1b[0m\nE   RuntimeError: Error code 13\n"),
               Verdict::kFailure, "FAILED_RUNTIME", "text", "TT_FATAL @ buffer.cpp:41: size > 0",
               "log"});
  {
    TestCase tc = Failed("RuntimeError: Error code: 13", "E   RuntimeError: Error code: 13");
    tc.system_err = "                 Always | FATAL    | TT_THROW @ device.cpp:77: timeout";
    c.push_back({"ErrorCode13FallsBackToSystemErr", tc, Ctx(), Verdict::kFailure, "FAILED_RUNTIME",
                 "text", "TT_THROW @ device.cpp:77: timeout", "log"});
  }
  c.push_back({"OnlyGenericEvidence",
               Failed("RuntimeError: Error code: 13", "E   RuntimeError: Error code: 13"), Ctx(),
               Verdict::kFailure, "FAILED_FE_COMPILATION", "text", "", "", 0,
               "without a usable reason"});
  // Only generic text, but the probe showed the old reason to be false: the generic text is
  // written, at the stage the run reached, and flagged.
  {
    VerifyContext stale = Ctx(false, "TypeError: forward() missing 1 required positional argument");
    stale.old_reason_stale = true;
    c.push_back(
        {"OnlyGenericEvidenceAfterAStaleReason",
         Failed("RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13",
                "E   RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13",
                {{"triage_error", "RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13"},
                 {"triage_stage", "RUNTIME_EXECUTION_START"}}),
         stale, Verdict::kFailure, "FAILED_RUNTIME", "stage_file",
         "RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13", "triage_error", 0,
         "generic reason"});
    // A usable reason anywhere still wins over the generic text.
    c.push_back({"StaleReasonStillPrefersARealOne",
                 Failed("RuntimeError: Error code: 13",
                        "E   ValueError: the cause\n\nE   RuntimeError: Error code: 13",
                        {{"triage_stage", "RUNTIME_EXECUTION_START"}}),
                 stale, Verdict::kFailure, "FAILED_RUNTIME", "stage_file", "ValueError: the cause",
                 "failure_text"});
  }
  // A shared run's log holds other tests' errors: only this test's section of it is evidence.
  {
    const std::string log =
        "collected 2 items\n\n=================================== FAILURES "
        "===================================\n"
        "____________ test_all_models_torch[other/pytorch-single_device-training] ____________\n"
        "E   AssertionError: PCC comparison failed. Calculated: pcc=0.96. Required: pcc=0.99\n"
        "____________ test_all_models_torch[m/pytorch-v-single_device-training] ____________\n"
        "E   RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13\n"
        "=========================== short test summary info ============================\n";
    TestCase tc = Failed("RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13",
                         "E   RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13",
                         {{"triage_stage", "RUNTIME_EXECUTION_START"}});
    c.push_back({"SharedLogOtherTestsErrorIsNotEvidence", tc, Ctx(false, "old", log),
                 Verdict::kFailure, "FAILED_RUNTIME", "stage_file", "", "", 0,
                 "without a usable reason"});
    VerifyContext stale = Ctx(false, "old", log);
    stale.old_reason_stale = true;
    c.push_back({"SharedLogGenericAfterAStaleReason", tc, stale, Verdict::kFailure,
                 "FAILED_RUNTIME", "stage_file",
                 "RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13", "failure_text", 0,
                 "generic reason"});
  }
  // A shared session that died in a later test never printed its summary: its log has no section
  // for this test, and the crash in it is the later test's. Only a log of this test alone is read
  // whole.
  {
    const std::string log =
        "...F.F.FFatal Python error: Aborted\n\nCurrent thread 0x00007f03 (most recent call "
        "first):\n  File \"tests/runner/test_models.py\", line 129 in _die\n"
        "[triage-agent] the pytest process CRASHED with signal 6 (SIGABRT)\n";
    TestCase tc = Failed("RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13",
                         "E   RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13",
                         {{"triage_error",
                           "RuntimeError: Bad StatusOr access: INTERNAL: Error "
                           "code: 13"},
                          {"triage_stage", "RUNTIME_EXECUTION_START"}});
    VerifyContext shared = Ctx(false, "old", log);
    shared.old_reason_stale = true;
    shared.log_shared = true;
    shared.exit_signal = 6;
    c.push_back({"SharedSessionCrashedLaterIsNotThisTests", tc, shared, Verdict::kFailure,
                 "FAILED_RUNTIME", "stage_file",
                 "RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13", "triage_error", 0,
                 "generic reason"});
  }
  {
    TestCase tc = Failed("failed on setup with \"RuntimeError: device busy\"",
                         "E   RuntimeError: device busy");
    tc.outcome = Outcome::kError;
    c.push_back({"SetupError", tc, Ctx(), Verdict::kFailure, "FAILED_FE_COMPILATION", "text",
                 "RuntimeError: device busy", "failure_text", 0, "outside the test body"});
  }

  // --- unexpected skips
  {
    TestCase tc;
    tc.outcome = Outcome::kSkipped;
    tc.result_type = "pytest.skip";
    tc.message = "Skipped: requires 2 devices";
    c.push_back({"UnexpectedSkip", tc, Ctx(/*forced_skip=*/true), Verdict::kUnexpectedSkip, "", "",
                 "", "", 0, "unexpected pytest.skip with --force-run"});
    tc.result_type = "pytest.xfail";
    tc.message = "flaky";
    c.push_back({"UnexpectedXfail", tc, Ctx(), Verdict::kUnexpectedXfail, "", "", "", "", 0,
                 "unexpected pytest.xfail"});
  }
  return c;
}

void PrintTo(const ClassifyCase& c, std::ostream* os) { *os << c.name; }

class ClassifyTest : public ::testing::TestWithParam<ClassifyCase> {};

TEST_P(ClassifyTest, Rule) {
  const ClassifyCase& c = GetParam();
  Finding f = Classify(c.tc ? &*c.tc : nullptr, c.ctx);
  EXPECT_EQ(VerdictName(f.verdict), VerdictName(c.verdict));
  EXPECT_EQ(f.stage, c.stage);
  EXPECT_EQ(f.stage_source, c.stage_source);
  EXPECT_EQ(f.reason, c.reason);
  EXPECT_EQ(f.reason_source, c.reason_source);
  EXPECT_EQ(f.signal, c.signal);
  if (c.review.empty()) {
    EXPECT_THAT(f.review, IsEmpty());
  } else {
    EXPECT_THAT(f.review, ::testing::Contains(HasSubstr(c.review)));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ClassifyTest, ::testing::ValuesIn(ClassifyCases()),
                         [](const auto& p) { return p.param.name; });

TEST(ClassifyReasonTest, LongReasonCutAtUtf8Boundary) {
  // 18 ASCII bytes, then an em dash (3 bytes) that straddles the 20-byte limit.
  std::string line = "ValueError: abcdef\xe2\x80\x94tail";
  TestCase tc = Failed(line, "E   " + line);
  VerifyContext ctx;
  ctx.max_reason_bytes = 20;
  Finding f = Classify(&tc, ctx);
  EXPECT_EQ(f.reason, "ValueError: abcdef");
  EXPECT_EQ(util::FirstInvalidUtf8(f.reason), std::nullopt);

  ctx.max_reason_bytes = 300;
  EXPECT_EQ(Classify(&tc, ctx).reason, line);  // short reasons are untouched
}

TEST(ClassifyReasonTest, ColourCodesEscapedByPytestAreStripped) {
  TestCase tc = Failed("x", "E   RuntimeError: #x1B[31mTT_FATAL @ a.cpp:1: b#x1B[0m");
  EXPECT_EQ(Classify(&tc, VerifyContext{}).reason, "TT_FATAL @ a.cpp:1: b");
}

TEST(ClassifyReasonTest, EndToEndFromXml) {
  absl::StatusOr<Report> r = ParseJUnit(kXunit1, "v.xml");
  ASSERT_TRUE(r.ok()) << r.status();
  VerifyContext ctx;
  ctx.forced_skip = true;
  ctx.old_reason = std::string(kUnpackReason);
  Finding f = Classify(&r->cases[1], ctx);
  EXPECT_EQ(f.verdict, Verdict::kFailure);
  EXPECT_EQ(f.stage, "FAILED_RUNTIME");
  // The absolute path is cut to the file's basename (docs/junit.md, "Form of a reason").
  EXPECT_EQ(f.reason, "TT_FATAL @ conv2d.cpp:88: input.dtype() == DataType::BFLOAT16");
  Decision d = Decide(f);
  EXPECT_TRUE(d.change);
  EXPECT_EQ(d.status, "KNOWN_FAILURE_XFAIL");
  EXPECT_EQ(d.bringup_status, "FAILED_RUNTIME");
  EXPECT_EQ(d.reason, f.reason);

  EXPECT_EQ(Classify(&r->cases[0], ctx).verdict, Verdict::kPass);
  EXPECT_EQ(Classify(&r->cases[2], ctx).verdict, Verdict::kUnexpectedSkip);
  EXPECT_EQ(Classify(&r->cases[3], ctx).verdict, Verdict::kUnexpectedXfail);
}

// ---------------------------------------------------------------------------------------------
// Decide

Finding MakeFinding(Verdict v, std::string stage, std::string reason, int signal = 0) {
  Finding f;
  f.verdict = v;
  f.stage = std::move(stage);
  f.reason = std::move(reason);
  f.signal = signal;
  return f;
}

struct DecideCase {
  std::string name;
  Finding finding;
  bool change;
  std::string status;
  std::optional<std::string> bringup_status, reason;
  std::optional<bool> assert_pcc;
  std::vector<std::string> add_markers;
};

void PrintTo(const DecideCase& c, std::ostream* os) { *os << c.name; }

class DecideTest : public ::testing::TestWithParam<DecideCase> {};

TEST_P(DecideTest, Table) {
  const DecideCase& c = GetParam();
  Decision d = Decide(c.finding);
  EXPECT_EQ(d.change, c.change);
  EXPECT_EQ(d.status, c.status);
  EXPECT_EQ(d.bringup_status, c.bringup_status);
  EXPECT_EQ(d.reason, c.reason);
  EXPECT_EQ(d.assert_pcc, c.assert_pcc);
  EXPECT_EQ(d.add_markers, c.add_markers);
}

std::vector<DecideCase> DecideCases() {
  return {
      {"Pass",
       MakeFinding(Verdict::kPass, "", ""),
       true,
       "EXPECTED_PASSING",
       std::nullopt,
       std::nullopt,
       std::nullopt,
       {}},
      {"IncorrectResult",
       MakeFinding(Verdict::kIncorrectResult, "INCORRECT_RESULT", "PCC comparison failed"),
       true,
       "EXPECTED_PASSING",
       std::nullopt,
       std::nullopt,
       false,
       {}},
      {"Failure",
       MakeFinding(Verdict::kFailure, "FAILED_TTMLIR_COMPILATION", "error: x"),
       true,
       "KNOWN_FAILURE_XFAIL",
       "FAILED_TTMLIR_COMPILATION",
       "error: x",
       std::nullopt,
       {}},
      {"FailureWithoutReasonNeedsReview",
       MakeFinding(Verdict::kFailure, "FAILED_FE_COMPILATION", ""),
       false,
       "",
       std::nullopt,
       std::nullopt,
       std::nullopt,
       {}},
      {"Crash",
       MakeFinding(Verdict::kCrash, "FAILED_RUNTIME", "crashed with signal 6 (SIGABRT)", 6),
       true,
       "NOT_SUPPORTED_SKIP",
       "FAILED_RUNTIME",
       "crashed with signal 6 (SIGABRT)",
       std::nullopt,
       {}},
      {"CrashInCompilationKeepsItsStage",
       MakeFinding(Verdict::kCrash, "FAILED_TTMLIR_COMPILATION",
                   "crashed with signal 6 (SIGABRT) during TT-MLIR compilation", 6),
       true,
       "NOT_SUPPORTED_SKIP",
       "FAILED_TTMLIR_COMPILATION",
       "crashed with signal 6 (SIGABRT) during TT-MLIR compilation",
       std::nullopt,
       {}},
      {"CrashWithoutReasonNamesSignal",
       MakeFinding(Verdict::kCrash, "FAILED_RUNTIME", "", 11),
       true,
       "NOT_SUPPORTED_SKIP",
       "FAILED_RUNTIME",
       "crashed with signal 11 (SIGSEGV)",
       std::nullopt,
       {}},
      {"Timeout",
       MakeFinding(Verdict::kTimeout, "", "Failed: Timeout >600.0s"),
       true,
       "KNOWN_FAILURE_XFAIL",
       std::nullopt,
       "Failed: Timeout >600.0s",
       std::nullopt,
       {"notimeout"}},
      {"UnexpectedSkip",
       MakeFinding(Verdict::kUnexpectedSkip, "", ""),
       false,
       "",
       std::nullopt,
       std::nullopt,
       std::nullopt,
       {}},
      {"UnexpectedXfail",
       MakeFinding(Verdict::kUnexpectedXfail, "", ""),
       false,
       "",
       std::nullopt,
       std::nullopt,
       std::nullopt,
       {}},
      {"NoEvidence",
       MakeFinding(Verdict::kNoEvidence, "", "ValueError: x"),
       false,
       "",
       std::nullopt,
       std::nullopt,
       std::nullopt,
       {}},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, DecideTest, ::testing::ValuesIn(DecideCases()),
                         [](const auto& p) { return p.param.name; });

TEST(VerdictNameTest, AllNamesDistinct) {
  std::vector<std::string_view> names;
  for (Verdict v : {Verdict::kPass, Verdict::kIncorrectResult, Verdict::kFailure, Verdict::kCrash,
                    Verdict::kTimeout, Verdict::kUnexpectedSkip, Verdict::kUnexpectedXfail,
                    Verdict::kNoEvidence}) {
    names.push_back(VerdictName(v));
  }
  EXPECT_THAT(names, ElementsAre("pass", "incorrect_result", "failure", "crash", "timeout",
                                 "unexpected_skip", "unexpected_xfail", "no_evidence"));
}

}  // namespace
}  // namespace triage::junit
