#include "common/util/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "common/util/strings.h"

namespace triage::util {
namespace {

absl::Status ErrnoError(std::string_view what, const std::filesystem::path& path) {
  return absl::InternalError(StrCat(what, " ", path.string(), ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path, std::size_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    return absl::NotFoundError(StrCat("cannot read ", path.string(), ": ", ec.message()));
  }
  if (size > max_bytes) {
    return absl::ResourceExhaustedError(StrCat(path.string(), ": file is ", size,
                                               " bytes, over the limit of ", max_bytes, " bytes"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError("cannot open", path);
  std::string data(size, '\0');
  in.read(data.data(), static_cast<std::streamsize>(size));
  if (static_cast<std::size_t>(in.gcount()) != size) {
    return absl::DataLossError(StrCat("short read of ", path.string()));
  }
  return data;
}

absl::Status WriteFileAtomic(const std::filesystem::path& requested, std::string_view contents) {
  // Never change what a path is: through a symbolic link, the file it points to is replaced
  // (atomically, beside itself), and the link stays a link.
  std::filesystem::path path = requested;
  std::error_code ec;
  if (std::filesystem::is_symlink(requested, ec)) {
    path = std::filesystem::canonical(requested, ec);
    if (ec) {
      return absl::FailedPreconditionError(StrCat(requested.string(),
                                                  " is a symbolic link to a missing file (",
                                                  ec.message(), "); not replacing the link"));
    }
  }
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  std::random_device rd;
  const std::filesystem::path tmp =
      dir / StrCat(".", path.filename().string(), ".tmp.", getpid(), ".", rd());
  mode_t mode = 0644;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) mode = st.st_mode & 07777;

  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  std::size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      auto status = ErrnoError("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return status;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0) {
    auto status = ErrnoError("cannot sync", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return status;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto status = ErrnoError("cannot rename into", path);
    ::unlink(tmp.c_str());
    return status;
  }
  // Make the rename itself durable.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

}  // namespace triage::util
