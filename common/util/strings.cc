#include "common/util/strings.h"

namespace triage::util {
namespace internal {

void AppendPiece(std::string& out, double v) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, res.ptr);
}

}  // namespace internal

std::string Hex(unsigned long long value, int width) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof(buf), value, 16);
  std::string digits(buf, res.ptr);
  if (static_cast<int>(digits.size()) < width) {
    digits.insert(0, static_cast<std::size_t>(width) - digits.size(), '0');
  }
  return digits;
}

}  // namespace triage::util
