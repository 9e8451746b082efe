#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace triage::util {

// Default cap for files read from a checkout (test-config YAML, JUnit XML, loaders).
inline constexpr std::size_t kDefaultMaxFileBytes = 16 * 1024 * 1024;

// Reads a whole file. Fails with a message naming the path when it cannot be read or is larger
// than max_bytes (checked before reading, so a huge file is never loaded).
absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path,
                                     std::size_t max_bytes = kDefaultMaxFileBytes);

// Writes contents to path atomically: a temporary file in the same directory, fsync, rename.
// Readers see the old or the new contents, never a mix; on failure the old file is untouched.
// The new file keeps the permission bits of the file it replaces. Through a symbolic link the
// link's target is replaced and the link stays; a link to a missing file is refused.
absl::Status WriteFileAtomic(const std::filesystem::path& path, std::string_view contents);

}  // namespace triage::util
