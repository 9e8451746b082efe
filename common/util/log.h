#pragma once

// spdlog for triage-farm code: include this instead of spdlog/spdlog.h. It teaches fmt the
// absl::string_view that absl::Status::message() returns (Debian's abseil does not alias it
// to std::string_view).

#include "absl/strings/string_view.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view s, FormatContext& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};
