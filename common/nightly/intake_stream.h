#pragma once

// What intake.cc shares with intake_stream.cc, its streaming JUnit reader: the state one run's
// reading keeps, the reader of one JUnit document, and how a left-out testcase is noted.
// Internal to common/nightly (docs/nightly.md, "Intake").

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/status/status.h"
#include "common/nightly/intake.h"
#include "triage/v1/nightly.pb.h"

namespace triage::nightly::internal {

// What one run's reading shares between its files.
struct RunState {
  v1::NightlyRun* run = nullptr;
  IntakeLimits limits;
  std::uint64_t run_bytes = 0;  // uncompressed bytes read so far
  // The run's records by a hash of their bytes without `source` -> their index in run->records:
  // a record identical to one kept is counted (run->duplicate_testcases), not kept again. Memory
  // follows the distinct records.
  std::unordered_multimap<std::uint64_t, int> kept;
};

// Adds the run's records already there to state.kept (a run read on from an earlier call).
void IndexRecords(RunState& state);

// Keeps the record in the run unless one identical to it (every field but `source`) is already
// there; then counts it in duplicate_testcases. True when kept.
bool KeepRecord(RunState& state, v1::NightlyRecord& record);

// A testcase left out of the run: kept while there are fewer than kMaxProblems, then counted in
// one last line ("... and N more testcases left out").
void AddProblem(v1::NightlyRun& run, std::string problem);

// A name from inside an archive or a directory, fit for a message and a protobuf string: control
// characters as '?', bytes that are not UTF-8 as U+FFFD, at most 512 bytes.
std::string SafeName(std::string_view s);

// One JUnit document read as a stream: expat events build one junit::TestCase at a time, which
// becomes a record (or a count, or a problem line) as soon as its </testcase> is read.
class DocumentReader {
 public:
  // display: the file as messages name it (the run's path as given joined with the file inside
  // the run); in_run: the file inside the run (records' source, problem lines).
  DocumentReader(std::string display, std::string in_run, RunState& state);
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  // Hands the next bytes of the document to the parser; final on the last call (data may be
  // empty then). The first error ends the document.
  absl::Status Feed(std::string_view data, bool final);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace triage::nightly::internal
