#pragma once

// What git.cc and pin.cc share of git's argument checks; not for use outside common/git.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace triage::git::internal {

// A 40- or 64-digit lowercase hex object id.
bool IsHexSha(std::string_view s);
// Revisions are passed as arguments: one starting with '-', or holding a NUL or newline, is
// refused (InvalidArgument naming `what`).
absl::Status CheckRev(std::string_view what, std::string_view rev);
// "a/b/" and "./a/b" -> "a/b"; "." and "" -> "".
std::string NormalizeDir(std::string_view dir);
// FNV-1a 64-bit of s (cache directory names).
std::uint64_t Fnv1a(std::string_view s);

// What git itself said of a failed call, for messages a person reads: its stderr up to the first
// "fatal:" line (an ssh or http line before it says why), lines joined with "; ", at most 300
// bytes, then "(git exit 128)" (or the signal). A failure that is not git's (it did not start, it
// timed out) gives its whole message.
std::string GitSaid(const absl::Status& failure);

}  // namespace triage::git::internal
