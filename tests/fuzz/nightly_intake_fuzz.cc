// The nightly intake's streaming reader over any bytes (ReadJUnitBytes): OK or InvalidArgument
// naming the file, with the default limits and with small ones (nesting, property size, file
// size). What it accepts keeps the record invariants: every record is of a model test function,
// has an arch and a test-config key, names its file as its source, and keeps at most three lines
// of each message within kMaxRecordTextBytes; every string is UTF-8 (the run serializes and reads
// back equal); the counts add up.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/nightly/intake.h"
#include "common/nightly/record.h"
#include "common/util/strings.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using triage::nightly::IntakeLimits;

void CheckText(const std::string& text, const char* what) {
  FUZZ_CHECK(text.size() <= triage::nightly::kMaxRecordTextBytes, "%s of %zu bytes", what,
             text.size());
  int lines = 1;
  for (char c : text) lines += c == '\n';
  FUZZ_CHECK(lines <= 3, "%s of %d lines", what, lines);
}

void Run(std::string_view bytes, const IntakeLimits& limits) {
  const std::string name = "run/test-reports-n150/a.xml";
  triage::v1::NightlyRun run;
  absl::Status status = triage::nightly::ReadJUnitBytes(bytes, name, run, limits);
  if (!status.ok()) {
    FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument, "unexpected status: %s",
               status.ToString().c_str());
    FUZZ_CHECK(triage::util::MessageOf(status).starts_with(name), "error without the file: %s",
               status.ToString().c_str());
    return;
  }
  FUZZ_CHECK(run.files_size() == 1 && run.files(0) == name, "files: %d", run.files_size());
  FUZZ_CHECK(run.testcases() >= run.records_size() + run.not_model_tests(),
             "%d testcases < %d records + %d others", run.testcases(), run.records_size(),
             run.not_model_tests());
  FUZZ_CHECK(run.problems_size() <= 101, "%d problem lines", run.problems_size());
  FUZZ_CHECK(run.started_unix_ms() >= 0, "started %lld",
             static_cast<long long>(run.started_unix_ms()));
  for (const triage::v1::NightlyRecord& r : run.records()) {
    FUZZ_CHECK(triage::nightly::IsModelTestFunction(r.test_function()), "function '%s'",
               r.test_function().c_str());
    FUZZ_CHECK(!r.arch().empty(), "a record without an arch: %s", r.key().c_str());
    FUZZ_CHECK(!r.key().empty() && r.key().find("..") == std::string::npos && r.key()[0] != '/',
               "key '%s'", r.key().c_str());
    FUZZ_CHECK(std::string_view(r.source()).starts_with(name + ":"), "source '%s'",
               r.source().c_str());
    FUZZ_CHECK(r.outcome() != triage::v1::NightlyRecord::OUTCOME_UNSPECIFIED, "no outcome");
    CheckText(r.error_message(), "error_message");
    CheckText(r.failure(), "failure");
    FUZZ_CHECK(r.crash_signal() >= 0 && r.crash_signal() < 128, "signal %d", r.crash_signal());
    FUZZ_CHECK(r.duration_seconds() >= 0, "duration %f", r.duration_seconds());
  }
  std::string wire;
  FUZZ_CHECK(run.SerializeToString(&wire), "the run does not serialize");
  triage::v1::NightlyRun back;
  FUZZ_CHECK(back.ParseFromString(wire), "the run does not read back (a string not UTF-8?)");
  FUZZ_CHECK(back.records_size() == run.records_size(), "records lost on the wire");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Run(bytes, IntakeLimits{});
  IntakeLimits small;
  small.max_depth = 6;
  small.max_property_bytes = 200;
  small.max_file_bytes = 2048;
  small.max_run_bytes = 3000;
  Run(bytes, small);
  // The timestamp reader on any text.
  (void)triage::nightly::ParseTimestampMs(bytes.substr(0, 64));
  return 0;
}
