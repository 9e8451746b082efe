#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace triage::util {

// One owner per directory: an exclusive flock(2) on a lock file, held for as long as the
// DirLock lives (the kernel drops it when the process ends, however it ends). After locking, the
// owner's pid is written into the lock file so that the next process can say who holds it. The
// descriptor is close-on-exec: subprocesses (git, pytest, probes) never inherit the lock, so it
// cannot outlive its owner.
class DirLock {
 public:
  // Locks lock_file (created when missing; its directory must exist). what and dir only name the
  // owned thing in the error: "data_dir /var/lib/triage is in use by pid 1234" (FailedPrecondition)
  // when another process holds the lock.
  static absl::StatusOr<DirLock> Acquire(const std::filesystem::path& lock_file,
                                         std::string_view what, const std::filesystem::path& dir);

  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&& other) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();

  const std::filesystem::path& path() const { return path_; }

 private:
  DirLock(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::filesystem::path path_;
};

}  // namespace triage::util
