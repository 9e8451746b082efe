#pragma once

// String building that works with std::string_view. (Debian's abseil is built with its own
// absl::string_view, so absl::StrCat does not accept std::string_view.)

#include <charconv>
#include <concepts>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

namespace triage::util {
namespace internal {

inline void AppendPiece(std::string& out, std::string_view s) { out.append(s); }
inline void AppendPiece(std::string& out, const std::string& s) { out.append(s); }
inline void AppendPiece(std::string& out, const char* s) { out.append(s); }
inline void AppendPiece(std::string& out, absl::string_view s) { out.append(s.data(), s.size()); }
inline void AppendPiece(std::string& out, char c) { out.push_back(c); }
template <std::integral T>
requires(!std::same_as<T, char> && !std::same_as<T, bool>) void AppendPiece(std::string& out, T v) {
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, res.ptr);
}
// Shortest text that reads back as the same double.
void AppendPiece(std::string& out, double v);

}  // namespace internal

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (internal::AppendPiece(out, args), ...);
  return out;
}

template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  (internal::AppendPiece(*out, args), ...);
}

// Joins the elements of a range; fn(std::string* out, const T& element) appends one element.
template <typename Range, typename Fn>
std::string StrJoin(const Range& range, std::string_view sep, Fn fn) {
  std::string out;
  bool first = true;
  for (const auto& element : range) {
    if (!first) out.append(sep);
    first = false;
    fn(&out, element);
  }
  return out;
}

template <typename Range>
std::string StrJoin(const Range& range, std::string_view sep) {
  return StrJoin(range, sep, [](std::string* out, const auto& element) {
    internal::AppendPiece(*out, element);
  });
}

// Lower-case hex, zero-padded to width digits.
std::string Hex(unsigned long long value, int width = 0);

// The message of an absl::Status (or anything with message()) as a std::string.
template <typename S>
std::string MessageOf(const S& status) {
  auto m = status.message();
  return std::string(m.data(), m.size());
}

}  // namespace triage::util
