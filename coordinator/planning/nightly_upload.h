#pragma once

// The nightly runs the coordinator holds between UploadNightly and the StartSweep that names
// them (docs/nightly.md, "How the runs reach the coordinator"). Chunks (nightly_chunks.h) are
// checked and appended as they arrive; a finished upload waits for its sweep, bounded in count,
// bytes and time.

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock/clock.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "triage/v1/control.pb.h"

namespace triage::coord {

struct NightlyUploadLimits {
  int max_uploads = 4;  // held at once: being received, or finished and waiting for a sweep
  // Every upload held, together: the records' bytes as received plus kRecordOverheadBytes each
  // (what the coordinator's memory holds them in, roughly).
  std::size_t max_bytes = std::size_t{512} << 20;
  std::size_t max_records = 2'000'000;  // one upload (the most one sweep takes)
  // An upload is dropped this long after its first chunk unless a sweep took it.
  std::chrono::milliseconds keep = std::chrono::hours(1);
};

inline constexpr std::size_t kRecordOverheadBytes = 256;

class NightlyUploads {
 public:
  explicit NightlyUploads(Clock* clock, NightlyUploadLimits limits = {});

  // A new upload of caller (a token's name): its id. RESOURCE_EXHAUSTED when max_uploads are
  // held.
  absl::StatusOr<std::string> Begin(const std::string& caller);
  // Appends a chunk (its parts are moved out). A refusal (a record that does not check, a run
  // whose record count is not the announced one, a limit passed) names the run and what was
  // passed; the upload is dropped then.
  absl::Status Add(const std::string& id, v1::NightlyChunk& chunk);
  // The stream ended: when the last chunk came and every count agrees, the upload waits for a
  // sweep; its summary. Else it is dropped (an error).
  absl::StatusOr<v1::NightlyUpload> Finish(const std::string& id);
  // Forgets an upload (the client went away). Unknown ids are ignored.
  void Drop(const std::string& id);
  // The runs of caller's finished upload, which is forgotten: NOT_FOUND when there is none of
  // that id (never made, taken, dropped, expired, or another caller's).
  absl::StatusOr<google::protobuf::RepeatedPtrField<v1::NightlyRun>> Take(
      const std::string& id, const std::string& caller);
  // Drops the uploads older than the limits' keep.
  void Expire();

  int held() const;
  std::size_t held_bytes() const;
  const NightlyUploadLimits& limits() const { return limits_; }

 private:
  struct Upload {
    std::string caller;
    TimePoint began;
    google::protobuf::RepeatedPtrField<v1::NightlyRun> runs;
    std::int64_t announced = -1;  // the current run's run_records
    std::size_t records = 0;
    std::size_t bytes = 0;    // as received
    std::size_t charged = 0;  // bytes + kRecordOverheadBytes per record
    bool finished = false;    // the last chunk came
    bool complete = false;    // Finish accepted it: waiting for a sweep
  };
  absl::Status AddLocked(Upload& up, v1::NightlyChunk& chunk);
  absl::Status CloseRunLocked(const Upload& up) const;
  void DropLocked(std::map<std::string, Upload>::iterator it);

  Clock* const clock_;
  const NightlyUploadLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, Upload> uploads_;
  std::size_t charged_ = 0;  // over every upload held
};

}  // namespace triage::coord
