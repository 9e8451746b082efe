#pragma once

// Reads one nightly CI run's downloaded test reports (docs/nightly.md, "Intake"): a directory
// (JUnit *.xml found recursively, and .zip/.tar.gz/.tgz/.tar archives in it) or one archive,
// parsed as a stream (expat; archives through libarchive, never unpacked to disk) into
// v1::NightlyRecords. Hostile input fails the whole run with an error naming the file.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "triage/v1/nightly.pb.h"

namespace triage::nightly {

struct IntakeLimits {
  std::uint64_t max_file_bytes = std::uint64_t{1} << 30;   // one JUnit file, uncompressed
  std::uint64_t max_run_bytes = std::uint64_t{8} << 30;    // everything of one run
  std::size_t max_property_bytes = std::size_t{1} << 20;   // kMaxPropertyBytes
  std::size_t max_depth = 64;                              // element nesting
};

struct IntakeOptions {
  IntakeLimits limits;
  // Called after each file with the files and testcases read so far (progress on long runs).
  std::function<void(int files, std::int64_t testcases)> progress;
};

// One run: path is a directory or an archive. The label is the path's last component. Errors are
// InvalidArgument (hostile or unreadable input: "<path>/<file>:<line>:<col>: ...") or NotFound.
absl::StatusOr<v1::NightlyRun> ReadNightlyRun(const std::filesystem::path& path,
                                              const IntakeOptions& options = {});

// The same over bytes already in memory (one JUnit document), for tests and fuzzing; `name` is
// used in errors and as the record's source file. Appends to `run`.
absl::Status ReadJUnitBytes(std::string_view xml, const std::string& name, v1::NightlyRun& run,
                            const IntakeLimits& limits = {});

}  // namespace triage::nightly
