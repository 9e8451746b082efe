#include "common/junit/reason.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>

#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::junit {
namespace {

constexpr std::string_view kAddressPlaceholder = "0x…";
constexpr std::string_view kIdPlaceholder = "…";
// An address has more hex digits than a 32-bit value: "0x7f3a2b1c4740", faulthandler's
// "0x00007f3a2b1c4740". Shorter hex numbers (a device address, 0xFFFFFFFF) describe the op.
constexpr std::size_t kMinAddressDigits = 9;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAlnum(char c) { return IsDigit(c) || IsAlpha(c); }
bool IsWordChar(char c) { return IsAlnum(c) || c == '_'; }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsSpace(char c) { return c == ' ' || c == '\t'; }
char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

template <util::TemporaryString S>  // a view into it
std::string_view SkipSpaces(S&& s) = delete;
std::string_view SkipSpaces(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

// Colour codes: raw ESC sequences in logs, and "#x1B[..m" where pytest's XML writer replaced the
// ESC byte it may not write.
std::string StripColour(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::size_t skip = 0;
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      skip = 2;
    } else if (s.substr(i).starts_with("#x1B[")) {
      skip = 5;
    }
    if (skip != 0) {
      std::size_t j = i + skip;
      while (j < s.size() && (IsDigit(s[j]) || s[j] == ';')) ++j;
      if (j < s.size() && IsAlpha(s[j])) {
        i = j + 1;
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

template <util::TemporaryString S>  // a view into it
std::string_view FirstNonBlankLine(S&& text) = delete;
std::string_view FirstNonBlankLine(std::string_view text) {
  for (std::string_view line : util::SplitLines(text)) {
    std::string_view t = util::TrimWhitespace(line);
    if (!t.empty()) return t;
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Logger headers

bool Digits(std::string_view s, std::size_t at, std::size_t n) {
  if (at + n > s.size()) return false;
  for (std::size_t i = at; i < at + n; ++i) {
    if (!IsDigit(s[i])) return false;
  }
  return true;
}

// "2025-06-01 10:00:00.123", "2025-06-01T10:00:00Z", "[10:00:00.123]" at the start, with the
// separator after it (" | ", " - " or spaces). Returns false and leaves s alone otherwise.
bool ConsumeTimestamp(std::string_view& s) {
  std::string_view t = s;
  bool bracket = t.starts_with('[');
  if (bracket) t.remove_prefix(1);
  bool date = Digits(t, 0, 4) && t.size() > 4 && t[4] == '-' && Digits(t, 5, 2) && t.size() > 7 &&
              t[7] == '-' && Digits(t, 8, 2);
  bool time = Digits(t, 0, 2) && t.size() > 2 && t[2] == ':' && Digits(t, 3, 2) && t.size() > 5 &&
              t[5] == ':' && Digits(t, 6, 2);
  if (!date && !time) return false;
  std::size_t i = 0;
  while (i < t.size()) {
    char c = t[i];
    if (IsDigit(c) || c == '-' || c == ':' || c == '.' || c == ',' || c == 'T' || c == 'Z' ||
        c == '+') {
      ++i;
    } else if (c == ' ' && i + 1 < t.size() && IsDigit(t[i + 1])) {
      ++i;  // between the date and the time
    } else {
      break;
    }
  }
  t.remove_prefix(i);
  if (bracket) {
    if (!t.starts_with(']')) return false;
    t.remove_prefix(1);
  }
  t = SkipSpaces(t);
  if (t.starts_with("| ") || t.starts_with("- ")) t = SkipSpaces(t.substr(2));
  s = t;
  return true;
}

bool IsLogLevel(std::string_view token) {
  std::string lower;
  for (char c : token) lower.push_back(Lower(c));
  for (std::string_view level :
       {"trace", "debug", "info", "warn", "warning", "error", "err", "critical", "fatal"}) {
    if (lower == level) return true;
  }
  return false;
}

// One column: "critical |", "   Always | ", "[Metal] ". The token is a single word.
bool ConsumeColumn(std::string_view& s, bool* level) {
  std::string_view t = SkipSpaces(s);
  bool bracket = t.starts_with('[');
  if (bracket) t.remove_prefix(1);
  std::size_t n = 0;
  while (n < t.size() && (IsWordChar(t[n]) || t[n] == '.' || t[n] == '-')) ++n;
  if (n == 0) return false;
  std::string_view token = t.substr(0, n);
  t.remove_prefix(n);
  if (bracket) {
    if (!t.starts_with("] ")) return false;
    t.remove_prefix(2);
  } else {
    t = SkipSpaces(t);
    if (!t.starts_with("| ")) return false;
    t.remove_prefix(1);
  }
  *level = *level || IsLogLevel(token);
  s = SkipSpaces(t);
  return true;
}

// loguru's "tt_torch.backend:compile:120 - ".
bool ConsumeLoguruLocation(std::string_view& s) {
  std::size_t dash = s.find(" - ");
  if (dash == std::string_view::npos) return false;
  std::string_view where = s.substr(0, dash);
  std::size_t last_colon = where.rfind(':');
  if (last_colon == std::string_view::npos || last_colon + 1 == where.size()) return false;
  for (std::size_t i = last_colon + 1; i < where.size(); ++i) {
    if (!IsDigit(where[i])) return false;
  }
  for (char c : where.substr(0, last_colon)) {
    if (!(IsWordChar(c) || c == '.' || c == ':' || c == '<' || c == '>')) return false;
  }
  s = SkipSpaces(s.substr(dash + 3));
  return true;
}

// glog / absl: "F0601 10:00:00.123456  4242 debug_macros.h:20] " or
// "E0000 00:00:1720000000.123456   12345 pjrt_client.cc:2809] ".
bool ConsumeGlogHeader(std::string_view& s) {
  if (s.size() < 6 || std::string_view("IWEF").find(s[0]) == std::string_view::npos ||
      !Digits(s, 1, 4) || s[5] != ' ') {
    return false;
  }
  std::size_t i = 6;
  std::size_t start = i;
  while (i < s.size() && (IsDigit(s[i]) || s[i] == ':' || s[i] == '.')) ++i;
  if (i == start || i >= s.size() || !IsSpace(s[i])) return false;
  while (i < s.size() && IsSpace(s[i])) ++i;
  start = i;
  while (i < s.size() && IsDigit(s[i])) ++i;  // thread id
  if (i == start || i >= s.size() || s[i] != ' ') return false;
  std::size_t close = s.find("] ", i);
  if (close == std::string_view::npos) return false;
  std::string_view where = s.substr(i + 1, close - i - 1);
  std::size_t colon = where.rfind(':');
  if (colon == std::string_view::npos || where.find(' ') != std::string_view::npos) return false;
  s = SkipSpaces(s.substr(close + 2));
  return true;
}

template <util::TemporaryString S>  // a view into it
std::string_view DropLoggerHeader(S&& line) = delete;
std::string_view DropLoggerHeader(std::string_view line) {
  std::string_view s = line;
  if (ConsumeGlogHeader(s)) return s;
  bool stamped = ConsumeTimestamp(s);
  std::string_view after_stamp = s;
  bool level = false;
  int columns = 0;
  while (columns < 4 && ConsumeColumn(s, &level)) ++columns;
  if (columns == 0 || !(stamped || level)) return stamped ? after_stamp : line;
  ConsumeLoguruLocation(s);
  return s;
}

// ---------------------------------------------------------------------------------------------
// The innermost error on a line

// "torch._dynamo.exc.BackendCompilerFailed" at the start of s: its length, and its last
// component in *last.
std::size_t DottedName(std::string_view s, std::string_view* last) {
  std::size_t n = 0;
  while (n < s.size() && (IsWordChar(s[n]) || s[n] == '.')) ++n;
  if (n == 0 || !(IsAlpha(s[0]) || s[0] == '_')) return 0;
  std::string_view name = s.substr(0, n);
  std::size_t dot = name.rfind('.');
  *last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  return n;
}

// A Python exception type that can wrap another: RuntimeError, torch._dynamo.exc.
// BackendCompilerFailed, jax.errors.JaxRuntimeError. nested: a bare "Error" does not count.
bool IsWrapperTypeName(std::string_view last, bool nested) {
  if (last.empty() || !(last[0] >= 'A' && last[0] <= 'Z')) return false;
  for (std::string_view suffix : {"Error", "Exception", "Failed"}) {
    if (last.ends_with(suffix) && (!nested || last.size() > suffix.size())) return true;
  }
  return false;
}

// Length of "Type: " when s starts with a wrapper exception type and ": ", else 0.
std::size_t WrapperPrefix(std::string_view s, bool nested) {
  std::string_view last;
  std::size_t n = DottedName(s, &last);
  if (n == 0 || !IsWrapperTypeName(last, nested) || !s.substr(n).starts_with(": ")) return 0;
  return n + 2;
}

// Device errors keep the compiler's or runtime's own words, with no Python type in front.
constexpr std::array<std::string_view, 6> kDeviceStarts = {
    "TT_FATAL", "TT_THROW", "Fatal Python error:", "error: ", "Out of Memory", "ElementsAttr"};
// Device errors recognised in the middle of a wrapper's message, after ": ".
constexpr std::array<std::string_view, 3> kDeviceInner = {"TT_FATAL", "TT_THROW",
                                                          "Fatal Python error:"};

template <util::TemporaryString S>  // a view into it
std::string_view InnermostError(S&& line) = delete;
std::string_view InnermostError(std::string_view line) {
  for (int depth = 0; depth < 16; ++depth) {
    std::size_t prefix = WrapperPrefix(line, /*nested=*/depth > 0);
    if (prefix == 0) return line;
    std::string_view rest = line.substr(prefix);
    if (std::any_of(kDeviceStarts.begin(), kDeviceStarts.end(),
                    [&](std::string_view m) { return rest.starts_with(m); })) {
      return rest;
    }
    if (WrapperPrefix(rest, /*nested=*/true) != 0) {
      line = rest;
      continue;
    }
    // The first ": " after which a device error or another exception starts.
    std::size_t next = std::string_view::npos;
    for (std::size_t at = rest.find(": "); at != std::string_view::npos;
         at = rest.find(": ", at + 1)) {
      std::string_view after = rest.substr(at + 2);
      if (std::any_of(kDeviceInner.begin(), kDeviceInner.end(),
                      [&](std::string_view m) { return after.starts_with(m); }) ||
          WrapperPrefix(after, /*nested=*/true) != 0) {
        next = at + 2;
        break;
      }
    }
    if (next == std::string_view::npos) return line;
    line = rest.substr(next);
  }
  return line;
}

// ---------------------------------------------------------------------------------------------
// What differs between machines and runs

bool IsPathChar(char c) {
  return IsAlnum(c) || c == '.' || c == '_' || c == '-' || c == '+' || c == '/' || c == '~';
}

bool IsPathBoundary(std::string_view s, std::size_t i) {
  if (i == 0) return true;
  char p = s[i - 1];
  return IsSpace(p) || std::string_view("([{\"'`=,<:;").find(p) != std::string_view::npos;
}

// At s[i] (a path boundary): the length of an absolute ("/a/b") or home-relative ("~/a") path
// that names a file or directory below the root, or 0.
std::size_t PathAt(std::string_view s, std::size_t i) {
  bool home = s.substr(i).starts_with("~/");
  if (!home && !(s[i] == '/' && i + 1 < s.size() && s[i + 1] != '/' && IsPathChar(s[i + 1]))) {
    return 0;
  }
  std::size_t j = i;
  while (j < s.size() && IsPathChar(s[j])) ++j;
  std::string_view token = s.substr(i, j - i);
  while (!token.empty() && (token.back() == '.' || token.back() == '/')) token.remove_suffix(1);
  std::size_t slashes = std::count(token.begin(), token.end(), '/');
  if (slashes < (home ? 1u : 2u)) return 0;
  return token.size();
}

std::string ShortPath(std::string_view path) {
  for (std::string_view home_root : {"/home/", "/Users/"}) {
    if (path.starts_with(home_root) && path.find('/', home_root.size()) == std::string_view::npos) {
      return "~";
    }
  }
  return std::string(path.substr(path.rfind('/') + 1));
}

// "pid 4242", "pid=4242", "(pid(s) 4242, 4243)", "tid: 17": the length of the number list.
std::size_t IdNumbersAt(std::string_view s, std::size_t i, std::size_t* numbers_at) {
  if (i > 0 && IsWordChar(s[i - 1])) return 0;
  if (i + 3 > s.size()) return 0;
  std::string word = {Lower(s[i]), Lower(s[i + 1]), Lower(s[i + 2])};
  if (word != "pid" && word != "tid") return 0;
  std::size_t j = i + 3;
  if (s.substr(j).starts_with("(s)")) j += 3;
  if (j < s.size() && IsWordChar(s[j])) return 0;
  while (j < s.size() && (IsSpace(s[j]) || s[j] == ':' || s[j] == '=' || s[j] == '#')) ++j;
  if (j >= s.size() || !IsDigit(s[j])) return 0;
  *numbers_at = j;
  std::size_t end = j;
  while (true) {
    while (end < s.size() && IsDigit(s[end])) ++end;
    std::size_t next = end;
    if (next < s.size() && s[next] == ',') ++next;
    while (next < s.size() && IsSpace(s[next])) ++next;
    if (next == end || next >= s.size() || !IsDigit(s[next])) break;
    end = next;
  }
  return end - j;
}

std::string ReplaceVolatile(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if ((s[i] == '/' || s[i] == '~') && IsPathBoundary(s, i)) {
      if (std::size_t n = PathAt(s, i); n > 0) {
        out += ShortPath(s.substr(i, n));
        i += n;
        continue;
      }
    }
    if (s[i] == '0' && i + 1 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X') &&
        (i == 0 || (!IsWordChar(s[i - 1]) && s[i - 1] != '"'))) {
      std::size_t j = i + 2;
      while (j < s.size() && IsHexDigit(s[j])) ++j;
      if (j - i - 2 >= kMinAddressDigits) {
        out += kAddressPlaceholder;
        i = j;
        continue;
      }
    }
    if (std::size_t at = 0, n = IdNumbersAt(s, i, &at); n > 0) {
      out.append(s.substr(i, at - i));
      out += kIdPlaceholder;
      i = at + n;
      continue;
    }
    out.push_back(s[i++]);
  }
  return out;
}

}  // namespace

std::string NormalizeReason(std::string_view line, std::size_t max_bytes) {
  // Each step may uncover what another one removes ("/ws/x/RuntimeError: TT_FATAL ..."): repeat
  // until nothing changes, so that a reason is a fixed point.
  const std::string coloured = StripColour(line);
  std::string out(util::TrimWhitespace(FirstNonBlankLine(coloured)));
  for (int round = 0; round < 8; ++round) {
    std::string plain = StripColour(out);
    const std::string stable =
        ReplaceVolatile(InnermostError(DropLoggerHeader(util::TrimWhitespace(plain))));
    std::string next(util::TrimWhitespace(stable));
    if (next == out) break;
    out = std::move(next);
  }
  std::string_view cut = out;
  if (max_bytes > 0) cut = util::TrimWhitespace(util::TruncateUtf8(cut, max_bytes));
  return std::string(cut);
}

// A source path in a reason reads as its file name, absolute or not ("tt_metal/impl/x.cpp:88"
// and "/home/u/tt-metal/tt_metal/impl/x.cpp:88" both read "x.cpp:88").
std::string FileNamesOnly(std::string_view s) {
  auto path_char = [](char c) {
    return IsAlnum(c) || c == '_' || c == '.' || c == '-' || c == '/';
  };
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (!path_char(s[i])) {
      out += s[i++];
      continue;
    }
    std::size_t j = i;
    while (j < s.size() && path_char(s[j])) ++j;
    std::string_view token = s.substr(i, j - i);
    const std::size_t slash = token.rfind('/');
    if (slash != std::string_view::npos && slash + 1 < token.size() &&
        token.substr(slash + 1).find('.') != std::string_view::npos) {
      token.remove_prefix(slash + 1);
    }
    out += token;
    i = j;
  }
  return out;
}

std::string ReasonSignature(std::string_view reason) {
  const std::string normal = FileNamesOnly(NormalizeReason(reason, 0));
  std::string out;
  out.reserve(normal.size());
  for (std::size_t i = 0; i < normal.size();) {
    // A hex number ("0x1f", not the address placeholder) is one number; "0xN" already is one.
    if (normal.compare(i, 3, "0xN") == 0 && (i == 0 || !IsWordChar(normal[i - 1]))) {
      out += "0xN";
      i += 3;
      continue;
    }
    if (normal.compare(i, 2, "0x") == 0 && i + 2 < normal.size() && IsHexDigit(normal[i + 2]) &&
        (i == 0 || !IsWordChar(normal[i - 1]))) {
      std::size_t j = i + 2;
      while (j < normal.size() && IsHexDigit(normal[j])) ++j;
      out += "0xN";
      i = j;
      continue;
    }
    if (IsDigit(normal[i])) {
      std::size_t j = i;
      while (j < normal.size() && IsDigit(normal[j])) ++j;
      // Digits that are part of a name stay: conv2d, float32, sm_80.
      const bool in_name = i > 0 && (IsAlpha(normal[i - 1]) || normal[i - 1] == '_');
      out += in_name ? normal.substr(i, j - i) : "N";
      i = j;
      continue;
    }
    out += normal[i++];
  }
  return out;
}

std::string_view SignalName(int signal) {
  switch (signal) {
    case 1:
      return "SIGHUP";
    case 2:
      return "SIGINT";
    case 3:
      return "SIGQUIT";
    case 4:
      return "SIGILL";
    case 5:
      return "SIGTRAP";
    case 6:
      return "SIGABRT";
    case 7:
      return "SIGBUS";
    case 8:
      return "SIGFPE";
    case 9:
      return "SIGKILL";
    case 10:
      return "SIGUSR1";
    case 11:
      return "SIGSEGV";
    case 12:
      return "SIGUSR2";
    case 13:
      return "SIGPIPE";
    case 14:
      return "SIGALRM";
    case 15:
      return "SIGTERM";
    case 24:
      return "SIGXCPU";
    case 25:
      return "SIGXFSZ";
    case 31:
      return "SIGSYS";
    default:
      return {};
  }
}

std::string CrashReason(int signal, std::string_view where, std::string_view message,
                        std::size_t max_bytes) {
  std::string out = "crashed";
  if (signal > 0) {
    util::StrAppend(&out, " with signal ", signal);
    if (std::string_view name = SignalName(signal); !name.empty()) {
      util::StrAppend(&out, " (", name, ")");
    }
  }
  if (!where.empty()) util::StrAppend(&out, " during ", where);
  if (std::string m = NormalizeReason(message, 0); !m.empty()) util::StrAppend(&out, ": ", m);
  if (max_bytes > 0) out = std::string(util::TrimWhitespace(util::TruncateUtf8(out, max_bytes)));
  return out;
}

std::string CrashReason(int signal, std::string_view message, std::size_t max_bytes) {
  return CrashReason(signal, {}, message, max_bytes);
}

std::string_view CrashWhere(std::string_view stage) {
  if (stage == "FAILED_FE_COMPILATION") return "FE compilation";
  if (stage == "FAILED_TTMLIR_COMPILATION") return "TT-MLIR compilation";
  if (stage == "FAILED_RUNTIME") return "runtime execution";
  return {};
}

std::string ClusterId(std::string_view signature) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : signature) {
    h ^= c;
    h *= 16777619u;
  }
  char buf[16];
  std::snprintf(buf, sizeof(buf), "c-%08x", h);
  return buf;
}

std::string ClusterIdOfReason(std::string_view reason) {
  return ClusterId(reason.empty() ? std::string("(no reason)") : ReasonSignature(reason));
}

}  // namespace triage::junit
