#pragma once

// pytest JUnit XML (--junitxml, families xunit1 and xunit2) as the verification step reads it:
// one TestCase per <testcase>, keyed by the pytest id inside the brackets of its name.

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace triage::junit {

enum class Outcome { kPassed, kFailed, kError, kSkipped, kMissing };

// "passed", "failed", "error", "skipped", "missing".
std::string_view OutcomeName(Outcome outcome);

struct TestCase {
  // Entry key: the text between the first '[' and the last ']' of the name
  // (test_all_models_torch[<key>]); the whole name when it has no brackets.
  std::string key;
  std::string name, classname, file;
  double time_seconds = 0;
  Outcome outcome = Outcome::kPassed;
  // From the element that decided the outcome (<failure>, <error> or <skipped>): its type
  // attribute ("pytest.xfail", "pytest.skip", ...), message attribute and text (the traceback).
  std::string result_type;
  std::string message;
  std::string text;
  // <properties><property name= value=/> in document order; repeated names are kept.
  std::vector<std::pair<std::string, std::string>> properties;
  std::string system_out, system_err;

  // The first property with that name, or nullptr.
  const std::string* Property(std::string_view property_name) const;
  // Skipped by pytest.xfail (with --runxfail this means an xfail path other than the YAML's).
  bool IsXfail() const;
};

struct Report {
  std::string source;  // file name (or label) used in every error about this report
  std::vector<TestCase> cases;
};

inline constexpr std::size_t kDefaultMaxJUnitBytes = 64 * 1024 * 1024;

// The key a testcase name answers: "test_all_models_torch[a/pytorch-b-single_device-training]"
// -> "a/pytorch-b-single_device-training".
std::string KeyOfTestName(std::string_view name);

// Parses a report. The root must be <testsuites> or <testsuite>; testcases may sit in nested
// suites. Errors are InvalidArgument and start with source_name: empty input, malformed or
// truncated XML (with line:col), or a root that is not JUnit. Bytes that are not UTF-8 are passed
// through unchanged.
absl::StatusOr<Report> ParseJUnit(std::string_view xml, std::string source_name);

// Reads (at most max_bytes) and parses a file; the path is the report's source.
absl::StatusOr<Report> ParseJUnitFile(const std::filesystem::path& path,
                                      std::size_t max_bytes = kDefaultMaxJUnitBytes);

// One TestCase per asked key, in the order asked; keys the report lacks come back with
// Outcome::kMissing (key set, everything else empty). A report holding two testcases with one key
// is rejected as a whole (the key and the file are named): replay cannot tell which one answers.
absl::StatusOr<std::vector<TestCase>> ForKeys(const Report& report,
                                              const std::vector<std::string>& keys);

}  // namespace triage::junit
