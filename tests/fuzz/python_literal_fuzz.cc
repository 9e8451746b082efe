// The Python-literal parser (recorded pytest properties such as tags): any text is read without
// crashing; an error is InvalidArgument. A value it accepts renders (DebugString), and a string
// value re-parses from its Python repr (single quotes, escapes) to the same string.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/junit/python_literal.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// repr() of a str the way Python writes one with single quotes, every byte escaped except
// printable ASCII.
std::string Repr(const std::string& s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "b'";
  for (unsigned char c : s) {
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + "'";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto v = triage::junit::ParsePythonLiteral(text);
  if (!v.ok()) {
    FUZZ_CHECK(v.status().code() == absl::StatusCode::kInvalidArgument, "unexpected status: %s",
               v.status().ToString().c_str());
    return 0;
  }
  (void)v->DebugString();
  if (v->is_string()) {
    // A bytes literal keeps its bytes as they are.
    auto again = triage::junit::ParsePythonLiteral(Repr(v->string));
    FUZZ_CHECK(again.ok(), "repr of a parsed string does not parse: %s",
               again.status().ToString().c_str());
    FUZZ_CHECK(again->is_string() && again->string == v->string, "repr round trip changed '%s'",
               v->string.c_str());
  }
  return 0;
}
