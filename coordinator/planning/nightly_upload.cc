#include "coordinator/planning/nightly_upload.h"

#include <random>
#include <utility>

#include "common/util/strings.h"
#include "coordinator/planning/start_request.h"

namespace triage::coord {
namespace {

std::string NewUploadId() {
  static std::mutex mu;
  static std::random_device rd;
  std::lock_guard lock(mu);
  std::string id = "up-";
  for (int i = 0; i < 4; ++i) id += util::Hex(rd(), 8);
  return id;
}

std::string MiB(std::size_t bytes) { return util::StrCat((bytes + (1 << 19)) >> 20, " MiB"); }

std::int64_t UnixMs(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

NightlyUploads::NightlyUploads(Clock* clock, NightlyUploadLimits limits)
    : clock_(clock), limits_(limits) {}

absl::StatusOr<std::string> NightlyUploads::Begin(const std::string& caller) {
  std::lock_guard lock(mu_);
  if (static_cast<int>(uploads_.size()) >= limits_.max_uploads) {
    return absl::ResourceExhaustedError(util::StrCat(
        "the coordinator holds ", uploads_.size(), " nightly uploads already (the most at once): ",
        "try again once their sweeps have taken them (an upload waits at most ",
        std::chrono::duration_cast<std::chrono::minutes>(limits_.keep).count(), " minutes)"));
  }
  std::string id = NewUploadId();
  Upload& up = uploads_[id];
  up.caller = caller;
  up.began = clock_->Now();
  return id;
}

absl::Status NightlyUploads::Add(const std::string& id, v1::NightlyChunk& chunk) {
  std::lock_guard lock(mu_);
  auto it = uploads_.find(id);
  if (it == uploads_.end()) {
    return absl::NotFoundError(util::StrCat(
        "nightly upload ", id, " is no longer held (older than ",
        std::chrono::duration_cast<std::chrono::minutes>(limits_.keep).count(), " minutes)"));
  }
  absl::Status st = AddLocked(it->second, chunk);
  if (!st.ok()) DropLocked(it);
  return st;
}

absl::Status NightlyUploads::CloseRunLocked(const Upload& up) const {
  const int index = up.runs.size() - 1;
  const v1::NightlyRun& run = up.runs.Get(index);
  if (run.records_size() != up.announced) {
    return absl::InvalidArgumentError(util::StrCat(NightlyRunName(index, run), ": ", up.announced,
                                                   " records announced, ", run.records_size(),
                                                   " came"));
  }
  return absl::OkStatus();
}

absl::Status NightlyUploads::AddLocked(Upload& up, v1::NightlyChunk& chunk) {
  if (up.finished) return absl::InvalidArgumentError("a chunk after the upload's last chunk");
  if (chunk.begin_run()) {
    if (!up.runs.empty()) {
      if (auto st = CloseRunLocked(up); !st.ok()) return st;
    }
    if (chunk.run_records() < 0) {
      return absl::InvalidArgumentError("run_records must not be negative");
    }
    up.runs.Add();
    up.announced = chunk.run_records();
  } else if (up.runs.empty() && chunk.has_run()) {
    return absl::InvalidArgumentError("a chunk of a run before the run began (begin_run)");
  }
  if (chunk.has_run()) {
    const int index = up.runs.size() - 1;
    v1::NightlyRun& run = *up.runs.Mutable(index);
    v1::NightlyRun& part = *chunk.mutable_run();
    const std::string where = NightlyRunName(index, chunk.begin_run() ? part : run);
    const std::size_t bytes = chunk.ByteSizeLong();
    const std::size_t records = part.records_size();
    if (up.records + records > limits_.max_records) {
      return absl::ResourceExhaustedError(
          util::StrCat(where, ": the upload holds more than ", limits_.max_records,
                       " records with it (the most one sweep takes): give fewer runs at a time"));
    }
    const std::size_t charge = bytes + records * kRecordOverheadBytes;
    if (up.charged + charge > limits_.max_bytes) {
      return absl::ResourceExhaustedError(util::StrCat(
          where, ": the upload comes to more than ", MiB(limits_.max_bytes),
          " with it (records as received plus ", kRecordOverheadBytes,
          " bytes each to hold them; the most the coordinator holds): give fewer runs at a time"));
    }
    if (charged_ + charge > limits_.max_bytes) {
      return absl::ResourceExhaustedError(util::StrCat(
          where, ": with the other uploads the coordinator holds (", uploads_.size() - 1, ", ",
          MiB(charged_ - up.charged), ") the uploads come to more than ", MiB(limits_.max_bytes),
          " (the most it holds): try again once their sweeps have taken them"));
    }
    for (const auto& r : part.records()) {
      if (auto st = CheckNightlyRecord(r, where); !st.ok()) return st;
    }
    if (chunk.begin_run()) {
      run.Swap(&part);
    } else {
      // The records moved, the rest (files, problems) merged: appended in order.
      google::protobuf::RepeatedPtrField<v1::NightlyRecord> moved;
      moved.Swap(part.mutable_records());
      run.MergeFrom(part);
      for (auto& r : moved) *run.add_records() = std::move(r);
    }
    up.records += records;
    up.bytes += bytes;
    up.charged += charge;
    charged_ += charge;
  }
  if (chunk.last()) {
    if (up.runs.empty()) return absl::InvalidArgumentError("the upload holds no run");
    if (auto st = CloseRunLocked(up); !st.ok()) return st;
    if (chunk.runs() != up.runs.size()) {
      return absl::InvalidArgumentError(
          util::StrCat("the last chunk counts ", chunk.runs(), " runs, ", up.runs.size(), " came"));
    }
    up.finished = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::NightlyUpload> NightlyUploads::Finish(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = uploads_.find(id);
  if (it == uploads_.end()) {
    return absl::NotFoundError(util::StrCat("nightly upload ", id, " is no longer held"));
  }
  Upload& up = it->second;
  if (!up.finished) {
    DropLocked(it);
    return absl::InvalidArgumentError(
        "the upload ended before its last chunk (last): nothing is kept");
  }
  up.complete = true;
  v1::NightlyUpload out;
  out.set_upload_id(id);
  out.set_runs(up.runs.size());
  out.set_records(static_cast<std::int64_t>(up.records));
  out.set_bytes(static_cast<std::int64_t>(up.bytes));
  out.set_nightly_digest(NightlyDigest(up.runs));
  out.set_expires_unix_ms(UnixMs(up.began + limits_.keep));
  return out;
}

void NightlyUploads::Drop(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = uploads_.find(id);
  if (it != uploads_.end()) DropLocked(it);
}

void NightlyUploads::DropLocked(std::map<std::string, Upload>::iterator it) {
  charged_ -= it->second.charged;
  uploads_.erase(it);
}

absl::StatusOr<google::protobuf::RepeatedPtrField<v1::NightlyRun>> NightlyUploads::Take(
    const std::string& id, const std::string& caller) {
  std::lock_guard lock(mu_);
  auto it = uploads_.find(id);
  if (it == uploads_.end() || !it->second.complete || it->second.caller != caller) {
    return absl::NotFoundError(util::StrCat(
        "nightly_upload ", id, ": no finished upload of that id (taken by a sweep already, ",
        "dropped ", std::chrono::duration_cast<std::chrono::minutes>(limits_.keep).count(),
        " minutes after it began, or another caller's): upload the runs again"));
  }
  google::protobuf::RepeatedPtrField<v1::NightlyRun> runs;
  runs.Swap(&it->second.runs);
  DropLocked(it);
  return runs;
}

void NightlyUploads::Expire() {
  std::lock_guard lock(mu_);
  const TimePoint now = clock_->Now();
  for (auto it = uploads_.begin(); it != uploads_.end();) {
    auto next = std::next(it);
    if (now - it->second.began >= limits_.keep) DropLocked(it);
    it = next;
  }
}

int NightlyUploads::held() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(uploads_.size());
}

std::size_t NightlyUploads::held_bytes() const {
  std::lock_guard lock(mu_);
  return charged_;
}

}  // namespace triage::coord
