// The streaming intake (common/nightly/intake.h): a run's JUnit files, directories and
// archives as tt-xla's nightly CI leaves them, and every kind of hostile input.

#include "common/nightly/intake.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/util/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/pytest_xml.h"
#include "tests/support/test_support.h"

namespace triage::nightly {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using testing::Case;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::OutcomeXml;
using testing::Report;
using ::testing::SizeIs;
using ::testing::StartsWith;
using testing::Tags;

// 1-based line of the first occurrence of needle.
int LineOf(std::string_view text, std::string_view needle) {
  std::size_t at = text.find(needle);
  EXPECT_NE(at, std::string_view::npos) << needle;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
}

std::string TorchName(std::string_view key) {
  return util::StrCat("test_all_models_torch[", key, "]");
}

// A model testcase that passed on arch, with the runner's tags.
Case Passed(std::string_view key, std::string_view arch = "n150") {
  Tags tags;
  tags.specific_test_case = TorchName(key);
  tags.arch = util::StrCat("'", arch, "'");
  Case c;
  c.name = TorchName(key);
  c.tags = tags.Literal();
  return c;
}

v1::NightlyRun ReadBytesOrDie(std::string_view xml, const std::string& name = "a.xml") {
  v1::NightlyRun run;
  absl::Status status = ReadJUnitBytes(xml, name, run);
  EXPECT_TRUE(status.ok()) << status;
  return run;
}

std::string BytesError(std::string_view xml, const IntakeLimits& limits = {},
                       const std::string& name = "nightly/2026-11-27/test-reports-n150/a.xml") {
  v1::NightlyRun run;
  absl::Status status = ReadJUnitBytes(xml, name, run, limits);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

std::string RunError(const fs::path& path, const IntakeOptions& options = {}) {
  absl::StatusOr<v1::NightlyRun> run = ReadNightlyRun(path, options);
  EXPECT_FALSE(run.ok());
  if (run.ok()) return "";
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument) << run.status();
  return std::string(run.status().message());
}

enum class Kind { kZip, kTarGz, kTar, kTarBz2, kTarXz, kTarZst, kGz, kBz2, kXz };

// An archive made with libarchive's writer: members (name, contents), all regular files. kGz,
// kBz2 and kXz: one compressed file (the first member's contents).
void WriteArchive(const fs::path& path, Kind kind,
                  const std::vector<std::pair<std::string, std::string>>& members) {
  fs::create_directories(path.parent_path());
  struct archive* a = archive_write_new();
  ASSERT_NE(a, nullptr);
  const bool raw = kind == Kind::kGz || kind == Kind::kBz2 || kind == Kind::kXz;
  if (kind == Kind::kZip) {
    ASSERT_EQ(archive_write_set_format_zip(a), ARCHIVE_OK);
    archive_write_zip_set_compression_deflate(a);
  } else if (raw) {
    ASSERT_EQ(archive_write_set_format_raw(a), ARCHIVE_OK);
  } else {
    ASSERT_EQ(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
  }
  switch (kind) {
    case Kind::kTarGz:
    case Kind::kGz:
      ASSERT_EQ(archive_write_add_filter_gzip(a), ARCHIVE_OK);
      break;
    case Kind::kTarBz2:
    case Kind::kBz2:
      ASSERT_EQ(archive_write_add_filter_bzip2(a), ARCHIVE_OK);
      break;
    case Kind::kTarXz:
    case Kind::kXz:
      ASSERT_EQ(archive_write_add_filter_xz(a), ARCHIVE_OK);
      break;
    case Kind::kTarZst:
      ASSERT_EQ(archive_write_add_filter_zstd(a), ARCHIVE_OK);
      break;
    default:
      break;
  }
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK) << archive_error_string(a);
  for (const auto& [name, contents] : members) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(contents.size()));
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK) << archive_error_string(a);
    ASSERT_EQ(archive_write_data(a, contents.data(), contents.size()),
              static_cast<la_ssize_t>(contents.size()));
    archive_entry_free(e);
    if (raw) break;
  }
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

// The bytes of such an archive (to put inside another one).
std::string ArchiveBytes(const fs::path& scratch, Kind kind,
                         const std::vector<std::pair<std::string, std::string>>& members) {
  WriteArchive(scratch, kind, members);
  std::string bytes = triage::testing::ReadFileOrDie(scratch);
  fs::remove(scratch);
  return bytes;
}

const v1::NightlyRecord* Find(const v1::NightlyRun& run, std::string_view key) {
  for (const v1::NightlyRecord& r : run.records()) {
    if (r.key() == key) return &r;
  }
  ADD_FAILURE() << "no record for " << key;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// One report in the runner's format

constexpr std::string_view kPassedKey = "resnet/pytorch-50-single_device-inference";
constexpr std::string_view kXfailKey = "vit/pytorch-base-single_device-inference";
constexpr std::string_view kFailedKey = "yolov9/pytorch-T-single_device-inference";
constexpr std::string_view kSkippedKey = "whisper/pytorch-large-single_device-inference";
constexpr std::string_view kCrashKey = "mamba/pytorch-370m-single_device-inference";
constexpr std::string_view kTimeoutKey = "flux/pytorch-schnell-single_device-inference";
constexpr std::string_view kJaxKey = "gpt2/causal_lm/jax-Base-single_device-inference";
constexpr std::string_view kLlmKey =
    "qwen_2_5/causal_lm/pytorch-0.5B_Instruct-llm_decode-seq_1-batch_1-single_device-mesh_"
    "default-inference";
constexpr std::string_view kNoTagsKey = "bert/pytorch-base-single_device-inference";

std::string RunnerReport() {
  std::vector<Case> cases;

  Case passed = Passed(kPassedKey);
  passed.time = "12.5";
  cases.push_back(passed);

  {  // KNOWN_FAILURE_XFAIL that ran end to end: xfailed, tags say it passed.
    Tags tags;
    tags.specific_test_case = TorchName(kXfailKey);
    tags.model_test_status = "ModelTestStatus.KNOWN_FAILURE_XFAIL";
    tags.guidance = {"RM_XFAIL"};
    Case c;
    c.name = TorchName(kXfailKey);
    c.error_message = "Out of Memory: Not enough space to allocate 2097152 B DRAM buffer";
    c.tags = tags.Literal();
    c.outcome = OutcomeXml("skipped", "pytest.xfail", *c.error_message, "");
    cases.push_back(c);
  }
  {  // A failure with a traceback and captured output.
    Tags tags;
    tags.specific_test_case = TorchName(kFailedKey);
    tags.bringup_status = "FAILED_RUNTIME";
    tags.pcc = "";
    tags.failing_reason = "'UNSUPPORTED_DTYPE'";
    Case c;
    c.name = TorchName(kFailedKey);
    c.time = "97.5";
    c.error_message =
        "RuntimeError: TT_FATAL @ conv2d.cpp:88: input.dtype() == DataType::BFLOAT16\ninfo:\n"
        "backtrace:\n --- 0x7f";
    c.tags = tags.Literal();
    c.outcome = OutcomeXml("failure", "",
                           "RuntimeError: TT_FATAL @ /tt-metal/ttnn/conv2d.cpp:88: "
                           "input.dtype() == DataType::BFLOAT16\ninfo:\nbacktrace:",
                           "request = <FixtureRequest>\n\n    def test_all_models_torch(...):\n"
                           ">       tester.test()\n\nE   RuntimeError: TT_FATAL\n"
                           "python_package/tt_torch/backend/backend.py:212: RuntimeError");
    c.system_out = "2026-11-27 02:14:01.001 | info | Compiling\n";
    c.system_err = "2026-11-27 02:14:03.001 | critical | Always | TT_FATAL @ conv2d.cpp:88\n";
    cases.push_back(c);
  }
  {  // NOT_SUPPORTED_SKIP.
    Tags tags;
    tags.specific_test_case = TorchName(kSkippedKey);
    tags.bringup_status = "BringupStatus.FAILED_TTMLIR_COMPILATION";
    tags.model_test_status = "ModelTestStatus.NOT_SUPPORTED_SKIP";
    tags.failing_reason = "'NOT_SUPPORTED_SKIP'";
    tags.pcc = "";
    Case c;
    c.name = TorchName(kSkippedKey);
    c.time = "0.01";
    c.error_message = "Hang - https://github.com/tenstorrent/tt-xla/issues/1234";
    c.tags = tags.Literal();
    c.outcome = OutcomeXml("skipped", "pytest.skip", *c.error_message,
                           "tests/runner/test_models.py:343: " + *c.error_message);
    cases.push_back(c);
  }
  {  // The forked process died: pytest-forked's crash report, the conftest's reduced tags,
     // written as a teardown error.
    Tags tags;
    tags.specific_test_case = TorchName(kCrashKey);
    tags.reduced = true;
    tags.bringup_status = "UNKNOWN";
    tags.arch = "'p150'";
    Case c;
    c.name = TorchName(kCrashKey);
    c.time = "301.0";
    c.tags = tags.Literal();
    std::string crash = "tests/runner/test_models.py:343: running the test CRASHED with signal 6";
    c.outcome =
        OutcomeXml("error", "", util::StrCat("failed on teardown with \"", crash, "\""), crash);
    cases.push_back(c);
  }
  {  // pytest-timeout.
    Tags tags;
    tags.specific_test_case = TorchName(kTimeoutKey);
    tags.bringup_status = "UNKNOWN";
    tags.pcc = "";
    Case c;
    c.name = TorchName(kTimeoutKey);
    c.time = "3600.2";
    c.tags = tags.Literal();
    c.outcome = OutcomeXml("failure", "", "Failed: Timeout >3600.0s",
                           "+++++++++++++++++++ Timeout +++++++++++++++++++\n"
                           "~~~~ Stack of MainThread ~~~~\nE   Failed: Timeout >3600.0s");
    cases.push_back(c);
  }
  {  // jax.
    Tags tags;
    tags.test_name = "test_all_models_jax";
    tags.specific_test_case = util::StrCat("test_all_models_jax[", kJaxKey, "]");
    tags.model_name = "jax_gpt2_base_clm_hf";
    tags.pcc = "nan";
    tags.pcc_assertion_enabled = "False";
    tags.bringup_status = "INCORRECT_RESULT";
    Case c;
    c.name = util::StrCat("test_all_models_jax[", kJaxKey, "]");
    c.tags = tags.Literal();
    c.error_message = "PCC comparison failed. Calculated: pcc=nan. Required: pcc=0.99.";
    cases.push_back(c);
  }
  {  // An LLM decode test.
    Tags tags;
    tags.test_name = "test_llms_torch";
    tags.specific_test_case = util::StrCat("test_llms_torch[", kLlmKey, "]");
    tags.model_name = "pt_qwen_2_5_0_5b_instruct_clm_hf";
    tags.run_phase = "llm_decode";
    tags.pcc = "0.9987";
    tags.model_test_status = "ModelTestStatus.UNSPECIFIED";
    tags.guidance = {"ADD_CONFIG"};
    Case c;
    c.name = util::StrCat("test_llms_torch[", kLlmKey, "]");
    c.tags = tags.Literal();
    cases.push_back(c);
  }
  {  // Other functions: counted, never recorded (their tags are not even read).
    Case c;
    c.name = "test_placeholder_models[llama_3_405b]";
    c.tags = "{'bringup_status': 'NOT_STARTED'}";
    c.outcome = OutcomeXml("skipped", "pytest.skip", "NOT_STARTED", "");
    cases.push_back(c);
    c.name = "test_all_models_op_by_op[resnet/pytorch-50-single_device-inference]";
    c.tags = "not a literal";
    c.outcome = "";
    cases.push_back(c);
  }
  {  // A model testcase without tags (the runner never reached record_model_test_properties).
    Case c;
    c.name = TorchName(kNoTagsKey);
    c.outcome =
        OutcomeXml("error", "", "failed on setup with \"ImportError: x\"", "E   ImportError");
    cases.push_back(c);
  }
  return Report(cases);
}

TEST(IntakeBytes, EveryRecordOfTheRunnersReport) {
  const std::string xml = RunnerReport();
  v1::NightlyRun run = ReadBytesOrDie(xml, "test-reports-n150/a.xml");
  EXPECT_EQ(run.testcases(), 11);
  EXPECT_EQ(run.not_model_tests(), 2);
  ASSERT_EQ(run.records_size(), 8);
  EXPECT_EQ(run.started_unix_ms(), 1795745624123);
  EXPECT_THAT(run.files(), ElementsAre("test-reports-n150/a.xml"));
  ASSERT_THAT(run.problems(), SizeIs(1));
  EXPECT_EQ(run.problems(0),
            util::StrCat("test-reports-n150/a.xml:", LineOf(xml, TorchName(kNoTagsKey)),
                         ": test_all_models_torch[", kNoTagsKey, "]: no tags property: left out"));

  const v1::NightlyRecord* r = Find(run, kPassedKey);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->test_function(), "test_all_models_torch");
  EXPECT_EQ(r->outcome(), v1::NightlyRecord::PASSED);
  EXPECT_EQ(r->arch(), "n150");
  EXPECT_EQ(r->bringup_status(), "PASSED");
  EXPECT_EQ(r->model_test_status(), "EXPECTED_PASSING");
  EXPECT_DOUBLE_EQ(r->pcc(), 0.9934);
  EXPECT_DOUBLE_EQ(r->pcc_threshold(), 0.99);
  EXPECT_TRUE(r->pcc_assertion_enabled());
  EXPECT_EQ(r->error_message(), "");
  EXPECT_DOUBLE_EQ(r->duration_seconds(), 12.5);
  EXPECT_EQ(r->source(),
            util::StrCat("test-reports-n150/a.xml:", LineOf(xml, TorchName(kPassedKey))));

  r = Find(run, kXfailKey);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->outcome(), v1::NightlyRecord::XFAILED);
  EXPECT_EQ(r->model_test_status(), "KNOWN_FAILURE_XFAIL");
  EXPECT_EQ(r->bringup_status(), "PASSED");
  EXPECT_THAT(r->guidance(), ElementsAre("RM_XFAIL"));
  EXPECT_EQ(r->error_message(),
            "Out of Memory: Not enough space to allocate 2097152 B DRAM buffer");

  r = Find(run, kFailedKey);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->outcome(), v1::NightlyRecord::FAILED);
  EXPECT_EQ(r->bringup_status(), "FAILED_RUNTIME");
  EXPECT_EQ(r->failing_reason(), "UNSUPPORTED_DTYPE");
  EXPECT_EQ(r->error_message(),
            "RuntimeError: TT_FATAL @ conv2d.cpp:88: input.dtype() == DataType::BFLOAT16\ninfo:\n"
            "backtrace:");
  EXPECT_EQ(r->failure(),
            "RuntimeError: TT_FATAL @ /tt-metal/ttnn/conv2d.cpp:88: input.dtype() == "
            "DataType::BFLOAT16\ninfo:\nbacktrace:");
  EXPECT_FALSE(r->has_pcc());
  EXPECT_EQ(r->crash_signal(), 0);
  EXPECT_FALSE(r->timed_out());
  EXPECT_DOUBLE_EQ(r->duration_seconds(), 97.5);

  r = Find(run, kSkippedKey);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->outcome(), v1::NightlyRecord::SKIPPED);
  EXPECT_EQ(r->bringup_status(), "FAILED_TTMLIR_COMPILATION");
  EXPECT_EQ(r->model_test_status(), "NOT_SUPPORTED_SKIP");
  EXPECT_EQ(r->error_message(), "Hang - https://github.com/tenstorrent/tt-xla/issues/1234");

  r = Find(run, kCrashKey);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->outcome(), v1::NightlyRecord::ERROR);
  EXPECT_EQ(r->crash_signal(), 6);
  EXPECT_EQ(r->arch(), "p150");
  EXPECT_EQ(r->bringup_status(), "UNKNOWN");
  EXPECT_TRUE(r->guidance().empty());
  EXPECT_FALSE(r->has_pcc());

  r = Find(run, kTimeoutKey);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->outcome(), v1::NightlyRecord::FAILED);
  EXPECT_TRUE(r->timed_out());
  EXPECT_EQ(r->failure(), "Failed: Timeout >3600.0s");

  r = Find(run, kJaxKey);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->test_function(), "test_all_models_jax");
  EXPECT_EQ(r->model_name(), "jax_gpt2_base_clm_hf");
  ASSERT_TRUE(r->has_pcc());
  EXPECT_TRUE(std::isnan(r->pcc()));
  EXPECT_FALSE(r->pcc_assertion_enabled());
  EXPECT_EQ(r->bringup_status(), "INCORRECT_RESULT");

  r = Find(run, kLlmKey);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->test_function(), "test_llms_torch");
  EXPECT_EQ(r->run_phase(), "llm_decode");
  EXPECT_EQ(r->model_test_status(), "UNSPECIFIED");
  EXPECT_THAT(r->guidance(), ElementsAre("ADD_CONFIG"));
}

TEST(IntakeBytes, XunitTwoAndASingleSuiteRoot) {
  // xunit2: no file attribute, suite-level properties; the root may be the suite itself.
  std::string xml = util::StrCat(
      "<testsuite name=\"pytest\" timestamp=\"2025-06-01T10:00:00.000000\">"
      "<properties><property name=\"tags\" value=\"[1]\"/></properties>"
      "<testcase classname=\"tests.runner.test_models\" name=\"",
      TorchName(kPassedKey), "\" time=\"1\"><properties><property name=\"tags\" value=\"",
      testing::XmlAttr(*Passed(kPassedKey).tags), "\"/></properties></testcase></testsuite>");
  v1::NightlyRun run = ReadBytesOrDie(xml);
  ASSERT_EQ(run.records_size(), 1);
  EXPECT_EQ(run.records(0).source(), "a.xml:1");
  EXPECT_EQ(run.started_unix_ms(), 1748772000000);
}

TEST(IntakeBytes, PropertyValueInTheElementText) {
  std::string xml = util::StrCat("<testsuites><testsuite><testcase name=\"", TorchName(kPassedKey),
                                 "\"><properties><property name=\"tags\">",
                                 testing::XmlText(*Passed(kPassedKey).tags),
                                 "</property></properties></testcase></testsuite></testsuites>");
  v1::NightlyRun run = ReadBytesOrDie(xml);
  ASSERT_EQ(run.records_size(), 1);
  EXPECT_EQ(run.records(0).arch(), "n150");
}

TEST(IntakeBytes, FailureBeatsErrorBeatsSkipped) {
  Case c = Passed(kPassedKey);
  c.outcome = OutcomeXml("skipped", "pytest.xfail", "x", "") +
              OutcomeXml("error", "", "teardown", "") +
              OutcomeXml("failure", "", "AssertionError: real", "");
  v1::NightlyRun run = ReadBytesOrDie(Report({c}));
  ASSERT_EQ(run.records_size(), 1);
  EXPECT_EQ(run.records(0).outcome(), v1::NightlyRecord::FAILED);
  EXPECT_EQ(run.records(0).failure(), "AssertionError: real");
}

TEST(IntakeBytes, ALongTracebackKeepsItsLastLines) {
  Case c = Passed(kCrashKey);
  std::string traceback;
  while (traceback.size() < 200 * 1024) traceback += "  File \"model.py\", line 12, in forward\n";
  traceback += "tests/runner/test_models.py:343: running the test CRASHED with signal 11\n";
  c.outcome = OutcomeXml("failure", "", "worker died", traceback);
  v1::NightlyRun run = ReadBytesOrDie(Report({c}));
  ASSERT_EQ(run.records_size(), 1);
  EXPECT_EQ(run.records(0).crash_signal(), 11);
}

TEST(IntakeBytes, CapturedOutputIsStreamedNotBuffered) {
  // 3 MiB of system-out with a token bound of about 1.1 MiB: text is handed over in pieces.
  Case c = Passed(kPassedKey);
  c.system_out = std::string(3 << 20, 'o');
  IntakeLimits limits;
  limits.max_property_bytes = 16 * 1024;
  v1::NightlyRun run;
  absl::Status status = ReadJUnitBytes(Report({c}), "a.xml", run, limits);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(run.records_size(), 1);
}

TEST(IntakeBytes, ProblemLinesAreCappedAndCounted) {
  std::vector<Case> cases;
  for (int i = 0; i < 150; ++i) {
    Case c;
    c.name = TorchName(util::StrCat("m", i, "/pytorch-single_device-inference"));
    cases.push_back(c);
  }
  Tags no_arch;
  no_arch.arch = "None";
  Case c = Passed("n/pytorch-single_device-inference");
  c.tags = no_arch.Literal();
  cases.push_back(c);
  v1::NightlyRun run = ReadBytesOrDie(Report(cases));
  EXPECT_EQ(run.testcases(), 151);
  EXPECT_EQ(run.records_size(), 0);
  ASSERT_EQ(run.problems_size(), 101);
  EXPECT_THAT(run.problems(0), HasSubstr("m0/pytorch-single_device-inference]: no tags property"));
  EXPECT_EQ(run.problems(100), "... and 51 more testcases left out");

  // A second document of the same run goes on counting.
  absl::Status status = ReadJUnitBytes(Report({cases[0]}), "b.xml", run);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(run.problems(100), "... and 52 more testcases left out");

  v1::NightlyRun one = ReadBytesOrDie(Report({c}));
  EXPECT_THAT(one.problems(), ElementsAre(HasSubstr("its tags have no arch")));
}

TEST(IntakeBytes, TheEarliestSuiteTimestamp) {
  std::string xml =
      "<testsuites><testsuite timestamp=\"2026-11-27T03:00:00\"/>"
      "<testsuite timestamp=\"2026-11-27T07:43:44.5+05:30\"/>"
      "<testsuite timestamp=\"yesterday\"/></testsuites>";
  EXPECT_EQ(ReadBytesOrDie(xml).started_unix_ms(), 1795745624500);
  EXPECT_EQ(ReadBytesOrDie("<testsuites/>").started_unix_ms(), 0);
}

TEST(ParseTimestampMs, PytestsForms) {
  EXPECT_EQ(ParseTimestampMs("2026-11-27T02:13:44.123456+00:00"), 1795745624123);
  EXPECT_EQ(ParseTimestampMs("2025-06-01T10:00:00.000000"), 1748772000000);
  EXPECT_EQ(ParseTimestampMs("2025-06-01T10:00:00"), 1748772000000);
  EXPECT_EQ(ParseTimestampMs("2025-06-01T10:00:00Z"), 1748772000000);
  EXPECT_EQ(ParseTimestampMs("2025-06-01T12:00:00+0200"), 1748772000000);
  EXPECT_EQ(ParseTimestampMs("2025-06-01T05:00:00.9-05:00"), 1748772000900);
  EXPECT_EQ(ParseTimestampMs("1970-01-01T00:00:00"), 0);
  EXPECT_EQ(ParseTimestampMs("2024-02-29T00:00:00"), 1709164800000);
  for (std::string_view bad :
       {"", "2025-06-01", "2025-13-01T00:00:00", "2025-06-01T25:00:00", "2025-06-01T10:00:00+",
        "2025-06-01T10:00:00.", "2025-06-01T10:00:00 junk", "20250601T100000"}) {
    EXPECT_EQ(ParseTimestampMs(bad), std::nullopt) << bad;
  }
}

// ---------------------------------------------------------------------------------------------
// Hostile documents: each fails the whole run, naming the file

constexpr std::string_view kName = "nightly/2026-11-27/test-reports-n150/a.xml";

TEST(IntakeHostile, Truncated) {
  std::string xml = RunnerReport();
  xml.resize(xml.size() / 2);
  EXPECT_THAT(BytesError(xml), AllOf(StartsWith(util::StrCat(kName, ":")),
                                     HasSubstr("malformed JUnit XML"), HasSubstr("truncated?")));
  EXPECT_THAT(BytesError(""),
              AllOf(StartsWith(util::StrCat(kName, ":1:1: ")), HasSubstr("no element found")));
}

TEST(IntakeHostile, MalformedWithLineAndColumn) {
  EXPECT_EQ(BytesError("<testsuites>\n  <testsuite>\n  </testsuites>\n"),
            util::StrCat(kName, ":3:5: malformed JUnit XML: mismatched tag"));
  EXPECT_THAT(BytesError("<testsuites><testcase name=\"a\" name=\"b\"/></testsuites>"),
              StartsWith(util::StrCat(kName, ":1:")));
}

TEST(IntakeHostile, NotJUnit) {
  EXPECT_THAT(BytesError("<html><body/></html>"),
              AllOf(StartsWith(util::StrCat(kName, ":1:1: ")),
                    HasSubstr("not a JUnit report: the root element is <html>")));
}

TEST(IntakeHostile, DoctypeWithEntityExpansion) {
  std::string xml = "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n <!ENTITY lol \"lol\">\n";
  std::string prev = "lol";
  for (int i = 1; i <= 9; ++i) {
    util::StrAppend(&xml, " <!ENTITY lol", i, " \"");
    for (int k = 0; k < 10; ++k) util::StrAppend(&xml, "&", prev, ";");
    xml += "\">\n";
    prev = util::StrCat("lol", i);
  }
  xml += "]>\n<testsuites><testsuite name=\"&lol9;\"/></testsuites>\n";
  EXPECT_THAT(BytesError(xml), AllOf(StartsWith(util::StrCat(kName, ":2:")),
                                     HasSubstr("<!DOCTYPE>"), HasSubstr("never expanded")));
}

TEST(IntakeHostile, ExternalEntity) {
  std::string xml =
      "<?xml version=\"1.0\"?>\n<!DOCTYPE t [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>\n"
      "<testsuites><testsuite name=\"&x;\"/></testsuites>";
  EXPECT_THAT(BytesError(xml),
              AllOf(StartsWith(util::StrCat(kName, ":2:")), HasSubstr("<!DOCTYPE>")));
  // Without a DOCTYPE an entity reference is undefined.
  EXPECT_THAT(BytesError("<testsuites name=\"&x;\"/>"),
              AllOf(StartsWith(util::StrCat(kName, ":1:")), HasSubstr("undefined entity")));
}

TEST(IntakeHostile, NulByte) {
  std::string xml = RunnerReport();
  xml.insert(xml.find("<testsuite ") + 3, 1, '\0');
  EXPECT_THAT(BytesError(xml),
              AllOf(StartsWith(util::StrCat(kName, ":3:6: ")), HasSubstr("a NUL byte")));
  // Also far into the file (another block).
  xml = RunnerReport();
  std::string big(200 * 1024, ' ');
  big += '\0';
  xml.insert(xml.find("</testsuites>"), big);
  EXPECT_THAT(BytesError(xml),
              AllOf(StartsWith(util::StrCat(kName, ":")), HasSubstr("a NUL byte")));
}

TEST(IntakeHostile, InvalidUtf8) {
  Case c = Passed(kPassedKey);
  c.error_message = "bad \xC3\x28 byte";
  EXPECT_THAT(BytesError(Report({c})),
              AllOf(StartsWith(util::StrCat(kName, ":")), HasSubstr("not well-formed")));
  // Latin-1 declared: the same bytes are text.
  std::string latin1 = Report({c});
  latin1.replace(latin1.find("utf-8"), 5, "ISO-8859-1");
  v1::NightlyRun run;
  EXPECT_TRUE(ReadJUnitBytes(latin1, "a.xml", run).ok());
}

TEST(IntakeHostile, UnknownEncoding) {
  std::string xml = Report({Passed(kPassedKey)});
  xml.replace(xml.find("utf-8"), 5, "KOI8-R");
  EXPECT_THAT(BytesError(xml),
              AllOf(StartsWith(util::StrCat(kName, ":1:")), HasSubstr("unknown encoding")));
}

TEST(IntakeHostile, APropertyOverOneMebibyte) {
  Case c = Passed(kPassedKey);
  c.error_message = std::string(2 << 20, 'x');
  std::string xml = Report({c});
  EXPECT_THAT(BytesError(xml),
              AllOf(StartsWith(util::StrCat(kName, ":", LineOf(xml, "error_message"), ":")),
                    HasSubstr("property 'error_message' is 2097152 bytes, over the limit of "
                              "1048576 bytes")));
  // The same in the element's text.
  xml = util::StrCat("<testsuites><testcase name=\"x\"><properties><property name=\"p\">",
                     std::string(2 << 20, 'y'), "</property></properties></testcase></testsuites>");
  EXPECT_THAT(BytesError(xml),
              AllOf(StartsWith(util::StrCat(kName, ":1:")), HasSubstr("property 'p' is")));
}

TEST(IntakeHostile, AHugeToken) {
  IntakeLimits limits;
  limits.max_property_bytes = 64 * 1024;
  std::string xml = util::StrCat("<testsuites><!--", std::string(3 << 20, 'c'), "--></testsuites>");
  EXPECT_THAT(BytesError(xml, limits),
              AllOf(StartsWith(util::StrCat(kName, ": an XML token")), HasSubstr("over")));
}

TEST(IntakeHostile, TagsThatAreNotALiteralDict) {
  Case c = Passed(kPassedKey);
  c.tags = "['n150', 'PASSED']";
  std::string xml = Report({c});
  EXPECT_EQ(BytesError(xml),
            util::StrCat(kName, ":", LineOf(xml, "<testcase"), ": test_all_models_torch[",
                         kPassedKey, "]: the tags property is a list, not a dict"));
  c.tags = "{'arch': 'n150', 'pcc': 0.9";
  EXPECT_THAT(BytesError(Report({c})),
              AllOf(StartsWith(util::StrCat(kName, ":")), HasSubstr("not a Python literal")));
}

TEST(IntakeHostile, KeysThatAreNotTestConfigKeys) {
  for (std::string key :
       {"../../../etc/pytorch-single_device-inference",
        "/etc/passwd/pytorch-single_device-inference", "a/pytorch-x..y-single_device-inference"}) {
    Case c = Passed(key);
    EXPECT_THAT(BytesError(Report({c})),
                AllOf(StartsWith(util::StrCat(kName, ":4: test_all_models_torch[")),
                      HasSubstr("not a test-config key")))
        << key;
  }
}

TEST(IntakeHostile, DeepNesting) {
  std::string xml = "<testsuites><testsuite><testcase name=\"x\">";
  for (int i = 0; i < 100; ++i) xml += "<a>";
  for (int i = 0; i < 100; ++i) xml += "</a>";
  xml += "</testcase></testsuite></testsuites>";
  EXPECT_THAT(BytesError(xml),
              AllOf(StartsWith(util::StrCat(kName, ":1:")), HasSubstr("nested deeper than 64")));
  IntakeLimits limits;
  limits.max_depth = 4;
  EXPECT_THAT(BytesError(RunnerReport(), limits), HasSubstr("nested deeper than 4"));
}

TEST(IntakeHostile, AFileOverTheLimit) {
  IntakeLimits limits;
  limits.max_file_bytes = 1000;
  EXPECT_THAT(BytesError(RunnerReport(), limits),
              AllOf(StartsWith(util::StrCat(kName, ": over 1000 bytes uncompressed"))));
}

// ---------------------------------------------------------------------------------------------
// Runs on disk: directories and archives

class IntakeRun : public ::testing::Test {
 protected:
  fs::path Write(const fs::path& rel, std::string_view contents) {
    fs::path p = dir_.path() / rel;
    fs::create_directories(p.parent_path());
    triage::testing::WriteFileOrDie(p, contents);
    return p;
  }
  triage::testing::TempDir dir_;
};

TEST_F(IntakeRun, ADirectoryWithNestedFoldersAndArchives) {
  const fs::path run_dir = dir_.path() / "2026-11-27";
  const std::string b =
      Report({Passed("b/pytorch-single_device-inference")}, "2026-11-27T04:00:00.000000+00:00");
  Write("2026-11-27/test-reports-n150/a.xml", RunnerReport());
  Write("2026-11-27/test-reports-n150/sub/b.xml", b);
  Write("2026-11-27/test-reports-p150/c.xml",
        Report({Passed("c/pytorch-single_device-inference", "p150")}));
  Write("2026-11-27/notes.txt", "not a report");
  Write("2026-11-27/test-reports-p150/log.xml.txt", "<not read/>");
  WriteArchive(run_dir / "x.zip", Kind::kZip,
               {{"inner/d.xml", Report({Passed("d/pytorch-single_device-inference")})},
                {"inner/readme.md", "# not read"}});
  WriteArchive(run_dir / "nested/y.tar.gz", Kind::kTarGz,
               {{"e.xml", Report({Passed("e/pytorch-single_device-inference", "n300-llmbox")},
                                 "2026-11-26T23:59:59+00:00")}});

  std::vector<std::pair<int, std::int64_t>> progress;
  IntakeOptions options;
  options.progress = [&](int files, std::int64_t testcases) {
    progress.emplace_back(files, testcases);
  };
  absl::StatusOr<v1::NightlyRun> run = ReadNightlyRun(run_dir, options);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->label(), "2026-11-27");
  EXPECT_EQ(run->source(), run_dir.string());
  EXPECT_THAT(run->files(), ElementsAre("nested/y.tar.gz!e.xml", "test-reports-n150/a.xml",
                                        "test-reports-n150/sub/b.xml", "test-reports-p150/c.xml",
                                        "x.zip!inner/d.xml"));
  EXPECT_EQ(run->testcases(), 15);
  EXPECT_EQ(run->records_size(), 12);
  EXPECT_EQ(run->started_unix_ms(), *ParseTimestampMs("2026-11-26T23:59:59+00:00"));
  EXPECT_THAT(progress,
              ElementsAre(std::make_pair(1, 1), std::make_pair(2, 12), std::make_pair(3, 13),
                          std::make_pair(4, 14), std::make_pair(5, 15)));
  const v1::NightlyRecord* e = Find(*run, "e/pytorch-single_device-inference");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->arch(), "n300-llmbox");
  EXPECT_EQ(e->source(), "nested/y.tar.gz!e.xml:4");
  const v1::NightlyRecord* d = Find(*run, "d/pytorch-single_device-inference");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->source(), "x.zip!inner/d.xml:4");
  const v1::NightlyRecord* c = Find(*run, "c/pytorch-single_device-inference");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->source(), "test-reports-p150/c.xml:4");
  EXPECT_EQ(c->arch(), "p150");

  // The same with a trailing slash: the label is the folder's name.
  absl::StatusOr<v1::NightlyRun> again = ReadNightlyRun(run_dir.string() + "/");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->label(), "2026-11-27");
  EXPECT_EQ(again->records_size(), 12);
}

TEST_F(IntakeRun, AnArchiveIsARun) {
  const std::string a = Report({Passed("a/pytorch-single_device-inference")});
  const std::string b = Report({Passed("b/pytorch-single_device-inference", "p150")});
  for (auto [name, kind] : std::vector<std::pair<std::string, Kind>>{{"run.zip", Kind::kZip},
                                                                     {"run.tar.gz", Kind::kTarGz},
                                                                     {"run.tgz", Kind::kTarGz},
                                                                     {"run.tar", Kind::kTar}}) {
    fs::path path = dir_.path() / name;
    WriteArchive(path, kind, {{"test-reports-n150/a.xml", a}, {"test-reports-p150/b.xml", b}});
    absl::StatusOr<v1::NightlyRun> run = ReadNightlyRun(path);
    ASSERT_TRUE(run.ok()) << name << ": " << run.status();
    EXPECT_EQ(run->label(), name);
    EXPECT_THAT(run->files(), ElementsAre("test-reports-n150/a.xml", "test-reports-p150/b.xml"));
    ASSERT_EQ(run->records_size(), 2) << name;
    EXPECT_EQ(run->records(1).source(), "test-reports-p150/b.xml:4");
    EXPECT_EQ(run->records(1).arch(), "p150");
  }
}

TEST_F(IntakeRun, ASingleReportIsARun) {
  fs::path p = Write("one.xml", RunnerReport());
  absl::StatusOr<v1::NightlyRun> run = ReadNightlyRun(p);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->label(), "one.xml");
  EXPECT_THAT(run->files(), ElementsAre("one.xml"));
  EXPECT_EQ(run->records_size(), 8);
}

TEST_F(IntakeRun, ErrorsNameThePathAsGivenAndTheFileInsideTheRun) {
  Write("2026-11-27/test-reports-n150/a.xml", "<testsuites>\n  <testsuite>\n</testsuites>\n");
  const fs::path given = dir_.path() / "2026-11-27";
  EXPECT_EQ(RunError(given), util::StrCat(given.string(),
                                          "/test-reports-n150/a.xml:3:3: malformed JUnit XML: "
                                          "mismatched tag"));

  // A hostile testcase: RecordOf's message, named from the path as given.
  Case c = Passed("../x/pytorch-single_device-inference");
  Write("2026-11-28/b.xml", Report({c}));
  EXPECT_THAT(RunError(dir_.path() / "2026-11-28"),
              StartsWith(util::StrCat((dir_.path() / "2026-11-28").string(),
                                      "/b.xml:4: test_all_models_torch[")));
}

TEST_F(IntakeRun, AZipBomb) {
  IntakeOptions options;
  options.limits.max_file_bytes = 1 << 20;
  std::string big = "<testsuites>";
  big += std::string(8 << 20, ' ');
  big += "</testsuites>";
  fs::path run_dir = dir_.path() / "run";
  fs::create_directories(run_dir);
  WriteArchive(run_dir / "reports.zip", Kind::kZip, {{"big.xml", big}});
  ASSERT_LT(fs::file_size(run_dir / "reports.zip"), 100 * 1024u);
  EXPECT_EQ(RunError(run_dir, options),
            util::StrCat(run_dir.string(),
                         "/reports.zip!big.xml: over 1048576 bytes uncompressed: "
                         "larger than any JUnit file a run writes"));
  // The same bomb in a .tar.gz given as the run.
  WriteArchive(dir_.path() / "bomb.tar.gz", Kind::kTarGz, {{"big.xml", big}});
  EXPECT_THAT(RunError(dir_.path() / "bomb.tar.gz", options),
              StartsWith(util::StrCat((dir_.path() / "bomb.tar.gz").string(), "!big.xml: over")));
}

TEST_F(IntakeRun, TheRunLimit) {
  IntakeOptions options;
  options.limits.max_run_bytes = 5000;
  for (int i = 0; i < 5; ++i) {
    Write(util::StrCat("run/r", i, ".xml"),
          Report({Passed(util::StrCat("m", i, "/pytorch-single_device-inference"))}));
  }
  EXPECT_THAT(RunError(dir_.path() / "run", options),
              AllOf(StartsWith((dir_.path() / "run/r").string()),
                    HasSubstr(": the run is over 5000 bytes uncompressed")));
  // Members a compressed tar skips count too.
  WriteArchive(dir_.path() / "run2/a.tar.gz", Kind::kTarGz,
               {{"log.txt", std::string(10000, 'l')}, {"a.xml", RunnerReport()}});
  EXPECT_THAT(RunError(dir_.path() / "run2", options),
              AllOf(HasSubstr("a.tar.gz!log.txt"), HasSubstr("the run is over 5000 bytes")));
}

TEST_F(IntakeRun, AFileOverTheLimitOnDisk) {
  IntakeOptions options;
  options.limits.max_file_bytes = 100;
  Write("run/a.xml", RunnerReport());
  EXPECT_THAT(RunError(dir_.path() / "run", options),
              AllOf(StartsWith((dir_.path() / "run/a.xml").string() + ": "),
                    HasSubstr("over the limit of 100 bytes")));
}

TEST_F(IntakeRun, FifosAndDevicesAreRefused) {
  fs::create_directories(dir_.path() / "run");
  fs::path fifo = dir_.path() / "run/a.xml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(RunError(dir_.path() / "run"),
            fifo.string() + ": not a regular file (a FIFO, socket or device): refused");
  EXPECT_EQ(RunError(fifo),
            fifo.string() + ": not a regular file (a FIFO, socket or device): refused");
  Write("run2/a.xml", Report({Passed(kPassedKey)}));
  fs::create_symlink("/dev/zero", dir_.path() / "run2/zero.xml");
  absl::StatusOr<v1::NightlyRun> run = ReadNightlyRun(dir_.path() / "run2");
  ASSERT_TRUE(run.ok()) << run.status();  // out of the run: not followed
  EXPECT_THAT(run->problems(), ElementsAre("zero.xml: a symbolic link out of the run's directory: "
                                           "not read"));
}

TEST_F(IntakeRun, SymbolicLinks) {
  Write("outside/secret.xml", Report({Passed("s/pytorch-single_device-inference")}));
  Write("run/real/a.xml", Report({Passed("a/pytorch-single_device-inference")}));
  fs::create_symlink(dir_.path() / "outside/secret.xml", dir_.path() / "run/secret.xml");
  fs::create_symlink(dir_.path() / "outside", dir_.path() / "run/outside-dir");
  fs::create_symlink(dir_.path() / "run/real/a.xml", dir_.path() / "run/link.xml");
  fs::create_symlink(dir_.path() / "nowhere.xml", dir_.path() / "run/dangling.xml");
  absl::StatusOr<v1::NightlyRun> run = ReadNightlyRun(dir_.path() / "run");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(run->files(), ElementsAre("link.xml", "real/a.xml"));
  EXPECT_THAT(run->problems(),
              ElementsAre("dangling.xml: a symbolic link to nothing: not read",
                          "secret.xml: a symbolic link out of the run's directory: not read"));
}

TEST_F(IntakeRun, MissingAndUnreadablePaths) {
  absl::StatusOr<v1::NightlyRun> run = ReadNightlyRun(dir_.path() / "missing");
  EXPECT_EQ(run.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(run.status().message()), StartsWith((dir_.path() / "missing").string()));
  fs::path notes = Write("notes.txt", "x");
  EXPECT_THAT(RunError(notes), HasSubstr("not a directory, a JUnit .xml file or a"));
  fs::path corrupt = Write("run/broken.tar.gz", "this is not gzip data at all");
  EXPECT_THAT(RunError(dir_.path() / "run"),
              StartsWith(corrupt.string() + ": not a readable archive"));
  // An empty directory is no run (ARunWithoutAModelTestIsAnError).
  fs::create_directories(dir_.path() / "empty");
  EXPECT_THAT(RunError(dir_.path() / "empty"), HasSubstr("no model test testcase"));
}

TEST_F(IntakeRun, HostileMembersOfAnArchive) {
  std::string doctype = "<?xml version=\"1.0\"?>\n<!DOCTYPE t [<!ENTITY x \"y\">]>\n<testsuites/>";
  WriteArchive(dir_.path() / "run.zip", Kind::kZip,
               {{"ok.xml", Report({Passed(kPassedKey)})}, {"sub/evil.xml", doctype}});
  EXPECT_THAT(RunError(dir_.path() / "run.zip"),
              AllOf(StartsWith((dir_.path() / "run.zip").string() + "!sub/evil.xml:2:"),
                    HasSubstr("<!DOCTYPE>")));
}

// ---------------------------------------------------------------------------------------------
// Formats: compressions, suffixes in any case, archives inside archives

constexpr std::string_view kKeyA = "a/pytorch-single_device-inference";
constexpr std::string_view kKeyB = "b/pytorch-single_device-inference";
constexpr std::string_view kKeyC = "c/pytorch-single_device-inference";

TEST_F(IntakeRun, EveryCompressionOfATarAndSuffixesInAnyCase) {
  const std::string a = Report({Passed(kKeyA)});
  for (auto [name, kind] : std::vector<std::pair<std::string, Kind>>{{"run.tar.xz", Kind::kTarXz},
                                                                     {"run.txz", Kind::kTarXz},
                                                                     {"run.tar.bz2", Kind::kTarBz2},
                                                                     {"run.tbz2", Kind::kTarBz2},
                                                                     {"run.tar.zst", Kind::kTarZst},
                                                                     {"run.tzst", Kind::kTarZst},
                                                                     {"RUN.TAR.GZ", Kind::kTarGz},
                                                                     {"Run.Tgz", Kind::kTarGz},
                                                                     {"run.ZIP", Kind::kZip},
                                                                     {"run.TAR", Kind::kTar}}) {
    fs::path path = dir_.path() / name;
    WriteArchive(path, kind, {{"test-reports-n150/A.XML", a}});
    absl::StatusOr<v1::NightlyRun> run = ReadNightlyRun(path);
    ASSERT_TRUE(run.ok()) << name << ": " << run.status();
    EXPECT_THAT(run->files(), ElementsAre("test-reports-n150/A.XML")) << name;
    ASSERT_EQ(run->records_size(), 1) << name;
    EXPECT_EQ(run->records(0).source(), "test-reports-n150/A.XML:4") << name;
  }
}

TEST_F(IntakeRun, CompressedReports) {
  // One compressed report is a run; so is a report named in upper case.
  WriteArchive(dir_.path() / "report.xml.gz", Kind::kGz, {{"", Report({Passed(kKeyA)})}});
  absl::StatusOr<v1::NightlyRun> run = ReadNightlyRun(dir_.path() / "report.xml.gz");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->label(), "report.xml.gz");
  EXPECT_THAT(run->files(), ElementsAre("report.xml.gz"));
  ASSERT_EQ(run->records_size(), 1);
  EXPECT_EQ(run->records(0).source(), "report.xml.gz:4");
  Write("REPORT.XML", Report({Passed(kKeyA)}));
  run = ReadNightlyRun(dir_.path() / "REPORT.XML");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->records_size(), 1);

  // In a directory, and inside an archive.
  const fs::path night = dir_.path() / "night";
  WriteArchive(night / "n150/report.xml.gz", Kind::kGz, {{"", Report({Passed(kKeyA)})}});
  WriteArchive(night / "p150/report.XML.BZ2", Kind::kBz2, {{"", Report({Passed(kKeyB, "p150")})}});
  WriteArchive(night / "x.tar", Kind::kTar,
               {{"n300/report.xml.xz", ArchiveBytes(dir_.path() / "scratch.xz", Kind::kXz,
                                                    {{"", Report({Passed(kKeyC, "n300")})}})}});
  run = ReadNightlyRun(night);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(run->files(),
              ElementsAre("n150/report.xml.gz", "p150/report.XML.BZ2", "x.tar!n300/report.xml.xz"));
  ASSERT_EQ(run->records_size(), 3);
  EXPECT_EQ(run->records(2).source(), "x.tar!n300/report.xml.xz:4");
  EXPECT_THAT(run->problems(), IsEmpty());

  // A compressed report that is not compressed so: named, with the path.
  Write("plain/report.xml.gz", Report({Passed(kKeyA)}));
  EXPECT_EQ(RunError(dir_.path() / "plain"),
            (dir_.path() / "plain/report.xml.gz").string() + ": not gzip data");
}

TEST_F(IntakeRun, ArchivesInsideArchivesAreReadAsStreamsToThreeLevels) {
  const fs::path scratch = dir_.path() / "scratch";
  // outer.zip > mid.tar.gz > inner.tar.xz > c.xml: three levels of archives, read.
  const std::string inner =
      ArchiveBytes(scratch, Kind::kTarXz, {{"c.xml", Report({Passed(kKeyC)})}});
  const std::string mid = ArchiveBytes(
      scratch, Kind::kTarGz, {{"b.xml", Report({Passed(kKeyB)})}, {"deep/inner.tar.xz", inner}});
  WriteArchive(dir_.path() / "run/outer.zip", Kind::kZip,
               {{"a.xml", Report({Passed(kKeyA)})}, {"mid.tar.gz", mid}});
  absl::StatusOr<v1::NightlyRun> run = ReadNightlyRun(dir_.path() / "run");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(run->files(), ElementsAre("outer.zip!a.xml", "outer.zip!mid.tar.gz!b.xml",
                                        "outer.zip!mid.tar.gz!deep/inner.tar.xz!c.xml"));
  ASSERT_EQ(run->records_size(), 3);
  EXPECT_EQ(run->records(2).source(), "outer.zip!mid.tar.gz!deep/inner.tar.xz!c.xml:4");
  EXPECT_THAT(run->problems(), IsEmpty());

  // A fourth level is named, not read.
  const std::string fourth =
      ArchiveBytes(scratch, Kind::kZip, {{"d.xml", Report({Passed(kKeyA)})}});
  const std::string third = ArchiveBytes(scratch, Kind::kTar, {{"d.zip", fourth}});
  const std::string second = ArchiveBytes(scratch, Kind::kTarGz, {{"third.tar", third}});
  WriteArchive(dir_.path() / "run2/first.zip", Kind::kZip,
               {{"a.xml", Report({Passed(kKeyA)})}, {"second.tgz", second}});
  run = ReadNightlyRun(dir_.path() / "run2");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(run->files(), ElementsAre("first.zip!a.xml"));
  EXPECT_THAT(run->problems(),
              ElementsAre("first.zip!second.tgz!third.tar!d.zip: an archive inside 3 archives, "
                          "nested deeper than 3 levels: not read"));

  // An error deep inside names every level.
  const std::string bad = ArchiveBytes(
      scratch, Kind::kTarBz2, {{"bad.xml", "<testsuites>\n  <testsuite>\n</testsuites>\n"}});
  WriteArchive(dir_.path() / "run3/outer.tar", Kind::kTar, {{"in.tbz2", bad}});
  EXPECT_EQ(RunError(dir_.path() / "run3"),
            (dir_.path() / "run3").string() +
                "/outer.tar!in.tbz2!bad.xml:3:3: malformed JUnit XML: mismatched tag");
}

TEST_F(IntakeRun, TheByteLimitsHoldInsideNestedArchives) {
  const fs::path scratch = dir_.path() / "scratch";
  std::string big = "<testsuites>";
  big += std::string(8 << 20, ' ');
  big += "</testsuites>";
  const std::string bomb = ArchiveBytes(scratch, Kind::kTarGz, {{"big.xml", big}});
  WriteArchive(dir_.path() / "run/outer.zip", Kind::kZip, {{"inner.tar.gz", bomb}});
  ASSERT_LT(fs::file_size(dir_.path() / "run/outer.zip"), 100 * 1024u);
  IntakeOptions options;
  options.limits.max_file_bytes = 1 << 20;
  EXPECT_EQ(RunError(dir_.path() / "run", options),
            (dir_.path() / "run").string() +
                "/outer.zip!inner.tar.gz!big.xml: over 1048576 bytes uncompressed: larger than "
                "any JUnit file a run writes");
  // The run's limit counts what a nested archive pulls from its parent.
  const std::string logs =
      ArchiveBytes(scratch, Kind::kTarGz, {{"log.txt", std::string(4 << 20, 'l')}});
  WriteArchive(dir_.path() / "run2/outer.zip", Kind::kZip,
               {{"logs.tar.gz", logs}, {"a.xml", Report({Passed(kKeyA)})}});
  options = {};
  options.limits.max_run_bytes = 1 << 20;
  EXPECT_THAT(RunError(dir_.path() / "run2", options),
              AllOf(StartsWith((dir_.path() / "run2/outer.zip!logs.tar.gz").string()),
                    HasSubstr("the run is over 1048576 bytes uncompressed")));
}

TEST_F(IntakeRun, WhatIsNamedLikeAReportButNotReadIsNamed) {
  Write("run/a.xml", Report({Passed(kKeyA)}));
  Write("run/reports.7z", "7z\xBC\xAF\x27\x1C");
  Write("run/more/x.RAR", "Rar!");
  Write("run/old.tar.lz4", "lz4");
  Write("run/notes.txt", "not a report: passed over");
  WriteArchive(dir_.path() / "run/b.zip", Kind::kZip,
               {{"inner.7z", "7z"}, {"b.xml", Report({Passed(kKeyB)})}});
  absl::StatusOr<v1::NightlyRun> run = ReadNightlyRun(dir_.path() / "run");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->records_size(), 2);
  ASSERT_EQ(run->problems_size(), 4);
  EXPECT_THAT(run->problems(0), AllOf(StartsWith("b.zip!inner.7z: a 7-Zip archive, not a format "
                                                 "the intake reads (.xml; .xml.gz"),
                                      HasSubstr(".tar.zst/.tzst): not read")));
  EXPECT_THAT(run->problems(1), StartsWith("more/x.RAR: a RAR archive, not a format"));
  EXPECT_THAT(run->problems(2), StartsWith("old.tar.lz4: a tar compressed with lz4, not a format"));
  EXPECT_THAT(run->problems(3), StartsWith("reports.7z: a 7-Zip archive, not a format"));
  // Given as the run itself: an error.
  EXPECT_THAT(RunError(dir_.path() / "run/reports.7z"),
              AllOf(StartsWith((dir_.path() / "run/reports.7z").string() + ": a 7-Zip archive"),
                    HasSubstr(": not read")));
}

TEST_F(IntakeRun, ARunWithoutAModelTestIsAnError) {
  fs::create_directories(dir_.path() / "runs/emptynight");
  EXPECT_EQ(RunError(dir_.path() / "runs/emptynight"),
            (dir_.path() / "runs/emptynight").string() +
                ": no model test testcase (0 files, 0 testcases): not a nightly run's reports");

  // Only files the intake does not read: each named, with why.
  Write("runs/unread-only/report.xml.7z", "7z");
  Write("runs/unread-only/logs.txt", "x");
  EXPECT_EQ(RunError(dir_.path() / "runs/unread-only"),
            util::StrCat((dir_.path() / "runs/unread-only").string(),
                         ": no model test testcase (0 files, 0 testcases): not a nightly run's "
                         "reports; report.xml.7z: a 7-Zip archive, not a format the intake reads "
                         "(.xml; .xml.gz, .xml.bz2, .xml.xz, .xml.zst; .zip; .tar, .tar.gz/.tgz, "
                         ".tar.bz2/.tbz2, .tar.xz/.txz, .tar.zst/.tzst): not read"));

  // Reports of other tests only.
  Case other;
  other.name = "test_all_models_op_by_op[resnet/pytorch-50-single_device-inference]";
  Case placeholder;
  placeholder.name = "test_placeholder_models[llama]";
  Write("runs/other/a.xml", Report({other, placeholder}));
  EXPECT_EQ(RunError(dir_.path() / "runs/other"),
            (dir_.path() / "runs/other").string() +
                ": no model test testcase (1 file, 2 testcases, 2 not model tests): not a "
                "nightly run's reports");

  // Model testcases all left out: the problem lines say why.
  Case no_tags;
  no_tags.name = TorchName(kKeyA);
  Write("runs/left-out/a.xml", Report({no_tags}));
  EXPECT_EQ(RunError(dir_.path() / "runs/left-out/a.xml"),
            util::StrCat((dir_.path() / "runs/left-out/a.xml").string(),
                         ": no model test testcase (1 file, 1 testcase): not a nightly run's "
                         "reports; a.xml:4: test_all_models_torch[",
                         kKeyA, "]: no tags property: left out"));

  // An archive holding no report at all.
  WriteArchive(dir_.path() / "runs/logs.tar.gz", Kind::kTarGz, {{"log.txt", "x"}});
  EXPECT_THAT(RunError(dir_.path() / "runs/logs.tar.gz"),
              StartsWith((dir_.path() / "runs/logs.tar.gz").string() +
                         ": no model test testcase (0 files, 0 testcases)"));
}

// ---------------------------------------------------------------------------------------------
// Keys, PCC figures and duplicates

TEST(IntakeHostile, KeysOutsideTheKeyAlphabetNameTheCodePoint) {
  // A Cyrillic 'е' (U+0435) for the Latin 'e', and a right-to-left override (U+202E).
  for (auto [key, code] : std::vector<std::pair<std::string, std::string>>{
           {"r\xD0\xB5snet/pytorch-50-single_device-inference", "character 2 is U+0435"},
           {"resnet/pytorch-\xE2\x80\xAE"
            "05-single_device-inference",
            "character 16 is U+202E"},
           {"resnet/pytorch-50 x-single_device-inference", "character 18 is U+0020"}}) {
    std::string xml = Report({Passed(key)});
    std::string error = BytesError(xml);
    EXPECT_THAT(error, AllOf(StartsWith(util::StrCat(kName, ":4: test_all_models_torch[")),
                             HasSubstr("not a test-config key: "), HasSubstr(code),
                             HasSubstr("not of tt-xla's key alphabet")))
        << key;
    // The key itself is shown without the character.
    EXPECT_EQ(error.find("\xE2\x80\xAE"), std::string::npos);
    EXPECT_EQ(error.find("\xD0\xB5"), std::string::npos);
  }
  EXPECT_THAT(BytesError(Report({Passed("resnet/pytorch-\xE2\x80\xAE"
                                        "05-single_device-inference")})),
              HasSubstr("[resnet/pytorch-<U+202E>05-single_device-inference]"));
}

TEST(IntakeBytes, APccOutOfRangeLeavesTheRecordOut) {
  std::vector<Case> cases;
  for (std::string_view pcc : {"1.5", "inf", "1e308", "-inf", "-1.0001", "float('inf')"}) {
    Tags tags;
    tags.pcc = pcc;
    Case c = Passed(util::StrCat("m", cases.size(), "/pytorch-single_device-inference"));
    c.tags = tags.Literal();
    cases.push_back(c);
  }
  Tags threshold;
  threshold.pcc_threshold = "1.5";
  Case t = Passed("t/pytorch-single_device-inference");
  t.tags = threshold.Literal();
  cases.push_back(t);
  for (std::string_view pcc : {"nan", "1", "-1", "0.5"}) {  // kept
    Tags tags;
    tags.pcc = pcc;
    Case c = Passed(util::StrCat("k", cases.size(), "/pytorch-single_device-inference"));
    c.tags = tags.Literal();
    cases.push_back(c);
  }
  const std::string xml = Report(cases);
  v1::NightlyRun run = ReadBytesOrDie(xml, "n/a.xml");
  EXPECT_EQ(run.testcases(), 11);
  EXPECT_EQ(run.records_size(), 4);
  ASSERT_EQ(run.problems_size(), 7);
  EXPECT_EQ(run.problems(0),
            util::StrCat("n/a.xml:", LineOf(xml, "m0/"),
                         ": test_all_models_torch[m0/pytorch-single_device-inference]: pcc 1.5 is "
                         "not a correlation in [-1, 1]: left out"));
  EXPECT_THAT(run.problems(1), HasSubstr("]: pcc inf is not a correlation in [-1, 1]: left out"));
  EXPECT_THAT(run.problems(2), HasSubstr("]: pcc 1e+308 is not a correlation"));
  EXPECT_THAT(run.problems(3), HasSubstr("]: pcc -inf is not a correlation"));
  EXPECT_THAT(run.problems(5), HasSubstr("m5/pytorch-single_device-inference]: pcc inf is not"));
  EXPECT_THAT(run.problems(6), HasSubstr("]: pcc_threshold 1.5 is not a threshold in [0, 1]"));
}

TEST(IntakeBytes, IdenticalTestcasesAreKeptOnceAndCounted) {
  Case a = Passed(kKeyA);
  Case b = Passed(kKeyB);
  Case slower = Passed(kKeyA);
  slower.time = "99";
  std::vector<Case> cases = {a, a, b, a, slower, b};
  v1::NightlyRun run = ReadBytesOrDie(Report(cases), "x.xml");
  EXPECT_EQ(run.testcases(), 6);
  ASSERT_EQ(run.records_size(), 3);  // a, b, and a with another duration
  EXPECT_EQ(run.duplicate_testcases(), 3);
  EXPECT_EQ(run.records(0).source(), "x.xml:4");  // the first one kept
  EXPECT_EQ(run.records(2).duration_seconds(), 99);
  // A second document of the same run: its copies of the first's records are duplicates too.
  ASSERT_TRUE(ReadJUnitBytes(Report({b, Passed(kKeyC)}), "y.xml", run).ok());
  EXPECT_EQ(run.records_size(), 4);
  EXPECT_EQ(run.duplicate_testcases(), 4);
}

TEST_F(IntakeRun, DuplicatesAcrossTheFilesOfARun) {
  Write("run/n150-1/a.xml", Report({Passed(kKeyA), Passed(kKeyB)}));
  Write("run/n150-2/a.xml", Report({Passed(kKeyA), Passed(kKeyB, "p150")}));
  absl::StatusOr<v1::NightlyRun> run = ReadNightlyRun(dir_.path() / "run");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->testcases(), 4);
  EXPECT_EQ(run->records_size(), 3);
  EXPECT_EQ(run->duplicate_testcases(), 1);
}

}  // namespace
}  // namespace triage::nightly
