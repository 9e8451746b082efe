// ParseTimestampMs (common/nightly/intake.h): a testsuite's ISO 8601 timestamp as pytest writes
// it, to order runs oldest first.

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/nightly/intake.h"

namespace triage::nightly {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date.
std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

}  // namespace

std::optional<std::int64_t> ParseTimestampMs(std::string_view s) {
  std::size_t i = 0;
  auto number = [&](std::size_t digits, int& out) {
    if (i + digits > s.size()) return false;
    out = 0;
    for (std::size_t k = 0; k < digits; ++k, ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      out = out * 10 + (s[i] - '0');
    }
    return true;
  };
  auto expect = [&](char c) {
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  };
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!number(4, year) || !expect('-') || !number(2, month) || !expect('-') || !number(2, day)) {
    return std::nullopt;
  }
  if (!expect('T') && !expect(' ')) return std::nullopt;
  if (!number(2, hour) || !expect(':') || !number(2, minute) || !expect(':') ||
      !number(2, second)) {
    return std::nullopt;
  }
  int millis = 0;
  if (expect('.') || expect(',')) {
    std::size_t digits = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
      if (digits < 3) millis = millis * 10 + (s[i] - '0');
    }
    if (digits == 0) return std::nullopt;
    for (std::size_t k = digits; k < 3; ++k) millis *= 10;
  }
  int offset_minutes = 0;
  if (i < s.size()) {
    if (expect('Z')) {
    } else if (s[i] == '+' || s[i] == '-') {
      const int sign = s[i] == '-' ? -1 : 1;
      ++i;
      int oh = 0, om = 0;
      if (!number(2, oh)) return std::nullopt;
      expect(':');
      if (!number(2, om) || oh > 23 || om > 59) return std::nullopt;
      offset_minutes = sign * (oh * 60 + om);
    } else {
      return std::nullopt;
    }
  }
  if (i != s.size()) return std::nullopt;
  static constexpr int kDaysIn[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1 || day > kDaysIn[month - 1] || hour > 23 || minute > 59 ||
      second > 60) {
    return std::nullopt;
  }
  const std::int64_t days =
      DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const std::int64_t seconds =
      days * 86400 + hour * 3600 + minute * 60 + second - std::int64_t{offset_minutes} * 60;
  return seconds * 1000 + millis;
}

}  // namespace triage::nightly
