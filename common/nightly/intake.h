#pragma once

// Reads one nightly CI run's downloaded test reports (docs/nightly.md, "Intake"): a directory
// (JUnit *.xml found recursively, compressed ones, and zip/tar archives in it) or one archive,
// parsed as a stream (expat; archives through libarchive, never unpacked to disk) into
// v1::NightlyRecords. Hostile input fails the whole run with an error naming the file; so does a
// run that holds no model test testcase.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "triage/v1/nightly.pb.h"

namespace triage::nightly {

struct IntakeLimits {
  std::uint64_t max_file_bytes = std::uint64_t{1} << 30;  // one JUnit file, uncompressed
  std::uint64_t max_run_bytes = std::uint64_t{8} << 30;   // everything of one run
  std::size_t max_property_bytes = std::size_t{1} << 20;  // kMaxPropertyBytes
  std::size_t max_depth = 64;                             // element nesting
};

struct IntakeOptions {
  IntakeLimits limits;
  // Called after each file with the files and testcases read so far (progress on long runs).
  std::function<void(int files, std::int64_t testcases)> progress;
};

// One run: path is a directory or an archive (or a single JUnit .xml file, maybe compressed).
// The label is the path's last component. Names are matched by suffix in any case: reports
// *.xml, and *.xml.gz/.bz2/.xz/.zst (one compressed report); archives .zip, .tar, .tar.gz/.tgz,
// .tar.bz2/.tbz2, .tar.xz/.txz, .tar.zst/.tzst. A directory's reports and archives are found
// recursively and read in the byte order of their paths relative to it; directory symlinks are
// not followed, a file symlink only when its target is inside the directory; a FIFO, socket or
// device named like a report is refused. Inside an archive its regular reports are read in
// archive order, and an archive inside it is read as a stream from it, down to 3 levels of
// archives; run.files names them "<archive>!<member>[!<member>]". What is named like a report or
// an archive but not read (nested deeper, a 7z/RAR archive or another compression, a link, a
// symlink out of the directory) is a problem line of the run, with why. Identical records (all
// but the source) are kept once and counted in duplicate_testcases. Errors are InvalidArgument
// (hostile or unreadable input: "<path>/<file>:<line>:<col>: ...", "<path>/<a.zip>!<member>:...";
// a run without any model test record: "<path>: no model test testcase (N files, M testcases,
// ...): not a nightly run's reports; <problem lines>") or NotFound (no such path).
absl::StatusOr<v1::NightlyRun> ReadNightlyRun(const std::filesystem::path& path,
                                              const IntakeOptions& options = {});

// The same over bytes already in memory (one JUnit document), for tests and fuzzing; `name` is
// used in errors and as the record's source file. Appends to `run`.
absl::Status ReadJUnitBytes(std::string_view xml, const std::string& name, v1::NightlyRun& run,
                            const IntakeLimits& limits = {});

// The Unix time in milliseconds of an ISO 8601 timestamp as pytest writes a <testsuite>'s
// (datetime.isoformat(): "2026-11-27T02:13:44.123456+00:00"; without a zone it is UTC; "Z" and
// "+0530" are read too). nullopt when the text is not such a timestamp.
std::optional<std::int64_t> ParseTimestampMs(std::string_view timestamp);

}  // namespace triage::nightly
