#include "common/util/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/util/strings.h"

namespace triage::util {
namespace {

// The pid written by the holder, "" when the file holds none (yet).
std::string HolderPid(int fd) {
  char buf[32] = {};
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "";
  std::string pid;
  for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i) pid.push_back(buf[i]);
  return pid;
}

}  // namespace

absl::StatusOr<DirLock> DirLock::Acquire(const std::filesystem::path& lock_file,
                                         std::string_view what, const std::filesystem::path& dir) {
  int fd = ::open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(StrCat("cannot open the lock file ", lock_file.string(),
                                                " of ", what, " ", dir.string(), ": ",
                                                std::strerror(errno)));
  }
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    std::string holder = err == EWOULDBLOCK ? HolderPid(fd) : "";
    ::close(fd);
    if (err != EWOULDBLOCK) {
      return absl::FailedPreconditionError(StrCat("cannot lock ", lock_file.string(), " of ", what,
                                                  " ", dir.string(), ": ", std::strerror(err)));
    }
    return absl::FailedPreconditionError(
        StrCat(what, " ", dir.string(), " is in use by ",
               holder.empty() ? std::string("another process") : StrCat("pid ", holder),
               " (it holds ", lock_file.string(), ")"));
  }
  const std::string pid = StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int err = errno;
    ::close(fd);
    return absl::FailedPreconditionError(
        StrCat("cannot write ", lock_file.string(), ": ", std::strerror(err)));
  }
  return DirLock(fd, lock_file);
}

DirLock::DirLock(DirLock&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

DirLock& DirLock::operator=(DirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

// Closing the descriptor releases the lock. The file stays: removing it would let a process
// that opened the old file and one that creates a new one both "hold" a lock.
DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace triage::util
