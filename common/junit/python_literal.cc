#include "common/junit/python_literal.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::junit {
namespace {

using inventory::MapItem;
using inventory::Value;

// repr() output never nests deeply; the limit only keeps hostile input from exhausting the stack.
constexpr int kMaxDepth = 200;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }
int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

Value MakeMap(std::vector<MapItem> items) {
  Value v;
  v.kind = Value::Kind::kMap;
  v.map = std::move(items);
  v.flow = true;
  return v;
}

Value MakeList(std::vector<Value> items) {
  Value v = Value::List(std::move(items));
  v.flow = true;
  return v;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<Value> ParseAll() { return ParseTop(nullptr); }

  // The whole text as ParseAll reads it, building only the values of the top-level dict's keys
  // in `keep` (at most max_items items of containers in all).
  absl::StatusOr<Value> ParseKeeping(const std::vector<std::string_view>& keep,
                                     std::size_t max_items) {
    max_built_ = max_items;
    counting_ = true;
    return ParseTop(&keep);
  }

 private:
  absl::StatusOr<Value> ParseTop(const std::vector<std::string_view>* keep) {
    SkipSpace();
    if (AtEnd()) return Error(pos_, "empty input, expected a Python literal");
    absl::StatusOr<Value> v;
    if (keep == nullptr) {
      v = ParseValue(0);
    } else if (Peek() == '{') {
      v = ParseDictOrSet(0, keep);
    } else {
      skip_ = true;
      v = ParseValue(0);
    }
    if (!v.ok()) return v;
    SkipSpace();
    if (!AtEnd())
      return Error(pos_, util::StrCat("unexpected ", Describe(pos_), " after the value"));
    return v;
  }

  // One more item into a built container: refused past max_built_.
  absl::Status Built() {
    if (!counting_ || ++built_ <= max_built_) return absl::OkStatus();
    return absl::ResourceExhaustedError(util::StrCat(
        "python literal: the values kept hold more than ", static_cast<std::uint64_t>(max_built_),
        " items at byte ", static_cast<std::uint64_t>(pos_)));
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(std::size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void SkipSpace() {
    while (!AtEnd() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                        text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  std::string Describe(std::size_t at) const {
    if (at >= text_.size()) return "end of input";
    unsigned char c = static_cast<unsigned char>(text_[at]);
    if (c >= 0x20 && c < 0x7F) return util::StrCat("'", static_cast<char>(c), "'");
    return util::StrCat("byte 0x", util::Hex(c, 2));
  }

  absl::Status Error(std::size_t at, std::string_view what) const {
    return absl::InvalidArgumentError(
        util::StrCat("python literal: ", what, " at byte ", static_cast<std::uint64_t>(at)));
  }

  absl::StatusOr<Value> ParseValue(int depth) {
    if (depth > kMaxDepth) {
      return Error(pos_, util::StrCat("nested deeper than ", kMaxDepth, " levels"));
    }
    SkipSpace();
    char c = Peek();
    if (AtEnd()) return Error(pos_, "unexpected end of input, expected a value");
    if (c == '{') return ParseDictOrSet(depth);
    if (c == '[') return ParseSequence(']', depth);
    if (c == '(') return ParseSequence(')', depth);
    if (c == '\'' || c == '"') return ParseString(/*raw=*/false, /*bytes=*/false);
    if (c == '<') return ParseAngleRepr();
    if (IsDigit(c) || c == '-' || c == '+' || c == '.') return ParseNumber();
    if (IsNameStart(c)) {
      if (std::optional<absl::StatusOr<Value>> s = TryPrefixedString()) return *std::move(s);
      return ParseName(depth);
    }
    return Error(pos_, util::StrCat("unexpected ", Describe(pos_), ", expected a value"));
  }

  // keep (the top-level dict of ParseKeeping only): the keys whose values are built; every other
  // value is skipped. Without keep, values are built unless skip_.
  absl::StatusOr<Value> ParseDictOrSet(int depth,
                                       const std::vector<std::string_view>* keep = nullptr) {
    std::size_t open = pos_++;
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
      return MakeMap({});
    }
    const bool ambient_skip = skip_;
    std::vector<MapItem> items;
    std::vector<Value> set_items;
    bool is_set = false;
    for (bool first = true;; first = false) {
      SkipSpace();
      if (AtEnd()) return Error(open, "unterminated '{'");
      std::size_t key_start = pos_;
      if (keep != nullptr) {
        // A key that could name a kept value is read; a container (never such a key) skipped.
        skip_ = is_set || Peek() == '{' || Peek() == '[' || Peek() == '(';
      }
      absl::StatusOr<Value> key = ParseValue(depth + 1);
      skip_ = ambient_skip;
      if (!key.ok()) return key;
      std::size_t key_end = pos_;
      SkipSpace();
      if (first && (Peek() == ',' || Peek() == '}')) is_set = true;
      if (is_set) {
        if (!skip_ && keep == nullptr) {
          if (absl::Status st = Built(); !st.ok()) return st;
          set_items.push_back(*std::move(key));
        }
      } else {
        if (Peek() != ':') {
          return Error(pos_, util::StrCat("expected ':' after dict key, found ", Describe(pos_)));
        }
        ++pos_;
        bool kept = !skip_;
        if (keep != nullptr) {
          kept =
              key->is_string() && std::find(keep->begin(), keep->end(), key->string) != keep->end();
          skip_ = !kept;
        }
        absl::StatusOr<Value> value = ParseValue(depth + 1);
        skip_ = ambient_skip;
        if (!value.ok()) return value;
        if (kept) {
          if (absl::Status st = Built(); !st.ok()) return st;
          std::string key_text =
              key->is_string()
                  ? key->string
                  : std::string(util::TrimWhitespace(text_.substr(key_start, key_end - key_start)));
          items.push_back(MapItem{std::move(key_text), {}, *std::move(value)});
        }
      }
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        SkipSpace();
        if (Peek() == '}') {
          ++pos_;
          break;
        }
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        break;
      }
      if (AtEnd()) return Error(open, "unterminated '{'");
      return Error(pos_, util::StrCat("expected ',' or '}' in ", is_set ? "set" : "dict",
                                      ", found ", Describe(pos_)));
    }
    return is_set ? MakeList(std::move(set_items)) : MakeMap(std::move(items));
  }

  absl::StatusOr<Value> ParseSequence(char close, int depth) {
    std::size_t open = pos_++;
    std::vector<Value> items;
    std::size_t count = 0;
    bool trailing_comma = false;
    for (;;) {
      SkipSpace();
      if (AtEnd()) return Error(open, util::StrCat("unterminated '", text_[open], "'"));
      if (Peek() == close) {
        ++pos_;
        break;
      }
      absl::StatusOr<Value> item = ParseValue(depth + 1);
      if (!item.ok()) return item;
      ++count;
      if (!skip_) {
        if (absl::Status st = Built(); !st.ok()) return st;
        items.push_back(*std::move(item));
      } else if (count == 1) {
        items.push_back(*std::move(item));  // "(x)" is x: its kind
      }
      trailing_comma = false;
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        trailing_comma = true;
        continue;
      }
      if (Peek() == close) {
        ++pos_;
        break;
      }
      if (AtEnd()) return Error(open, util::StrCat("unterminated '", text_[open], "'"));
      return Error(pos_, util::StrCat("expected ',' or '", close, "', found ", Describe(pos_)));
    }
    // "(x)" is a parenthesised value in Python, only "(x,)" is a one-element tuple.
    if (close == ')' && count == 1 && !trailing_comma) return std::move(items[0]);
    if (skip_) items.clear();
    return MakeList(std::move(items));
  }

  // b'..', r'..', rb'..' and friends; nullopt when the name is not a string prefix.
  std::optional<absl::StatusOr<Value>> TryPrefixedString() {
    std::size_t n = 0;
    bool raw = false, bytes = false, other = false;
    while (n < 2 && IsNameStart(Peek(n))) {
      char c = static_cast<char>(Peek(n) | 0x20);
      if (c == 'r' && !raw) {
        raw = true;
      } else if (c == 'b' && !bytes && !other) {
        bytes = true;
      } else if (c == 'u' && n == 0) {
        other = true;
      } else {
        return std::nullopt;
      }
      ++n;
    }
    if (Peek(n) != '\'' && Peek(n) != '"') return std::nullopt;
    pos_ += n;
    return ParseString(raw, bytes);
  }

  absl::StatusOr<std::uint32_t> ReadHex(std::size_t digits, std::size_t escape_at) {
    std::uint32_t cp = 0;
    for (std::size_t k = 0; k < digits; ++k) {
      int d = HexDigit(Peek());
      if (d < 0) {
        return Error(escape_at,
                     util::StrCat("truncated \\", text_[escape_at + 1], " escape: expected ",
                                  static_cast<std::uint64_t>(digits), " hex digits"));
      }
      cp = cp * 16 + static_cast<std::uint32_t>(d);
      ++pos_;
    }
    return cp;
  }

  absl::StatusOr<Value> ParseString(bool raw, bool bytes) {
    const std::size_t open = pos_;
    const char quote = text_[pos_++];
    std::string out;
    for (;;) {
      if (AtEnd() || Peek() == '\n') {
        return Error(open, util::StrCat("unterminated string (opening ", quote, " has no match)"));
      }
      char c = text_[pos_];
      if (c == quote) {
        ++pos_;
        break;
      }
      if (c != '\\') {
        if (!skip_) out.push_back(c);
        ++pos_;
        continue;
      }
      const std::size_t escape_at = pos_;
      ++pos_;
      if (AtEnd()) return Error(open, "unterminated string (ends in a backslash)");
      char e = text_[pos_];
      if (raw) {
        // A raw string keeps the backslash; it still stops the next quote from ending the string.
        out.push_back('\\');
        out.push_back(e);
        ++pos_;
        continue;
      }
      ++pos_;
      switch (e) {
        case '\n':
          break;
        case '\\':
        case '\'':
        case '"':
          out.push_back(e);
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x': {
          absl::StatusOr<std::uint32_t> v = ReadHex(2, escape_at);
          if (!v.ok()) return v.status();
          if (bytes) {
            out.push_back(static_cast<char>(*v));
          } else {
            AppendUtf8(out, *v);
          }
          break;
        }
        case 'u':
        case 'U': {
          if (bytes) {  // no \u escapes in bytes literals: Python keeps them as written
            out.push_back('\\');
            out.push_back(e);
            break;
          }
          absl::StatusOr<std::uint32_t> v = ReadHex(e == 'u' ? 4 : 8, escape_at);
          if (!v.ok()) return v.status();
          std::uint32_t cp = *v;
          if (cp > 0x10FFFF) {
            return Error(escape_at, util::StrCat("\\U escape beyond U+10FFFF"));
          }
          if (cp >= 0xD800 && cp <= 0xDBFF && Peek() == '\\' && Peek(1) == 'u') {
            // repr() of text that came from UTF-16 can hold a surrogate pair as two escapes.
            std::size_t save = pos_;
            pos_ += 2;
            absl::StatusOr<std::uint32_t> low = ReadHex(4, save);
            if (low.ok() && *low >= 0xDC00 && *low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (*low - 0xDC00);
            } else {
              pos_ = save;
            }
          }
          // A lone surrogate has no UTF-8 form; the replacement character keeps the text valid.
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
          AppendUtf8(out, cp);
          break;
        }
        case 'N':
          if (!bytes) return Error(escape_at, "\\N{name} escapes are not supported");
          out.push_back('\\');
          out.push_back(e);
          break;
        default:
          if (e >= '0' && e <= '7') {
            std::uint32_t v = static_cast<std::uint32_t>(e - '0');
            for (int k = 0; k < 2 && Peek() >= '0' && Peek() <= '7'; ++k) {
              v = v * 8 + static_cast<std::uint32_t>(text_[pos_++] - '0');
            }
            if (bytes) {
              out.push_back(static_cast<char>(v & 0xFF));
            } else {
              AppendUtf8(out, v);
            }
          } else {
            // Python keeps unknown escapes as written ("\d" is backslash, d).
            out.push_back('\\');
            out.push_back(e);
          }
      }
      if (skip_) out.clear();  // checked, not kept
    }
    Value v = Value::String(std::move(out));
    v.quoted = true;
    v.quote = quote;
    return v;
  }

  // <Enum.NAME: value> -> "Enum.NAME"; any other <...> repr -> its whole text.
  absl::StatusOr<Value> ParseAngleRepr() {
    const std::size_t open = pos_;
    int nesting = 0;
    char in_quote = 0;
    for (; pos_ < text_.size(); ++pos_) {
      char c = text_[pos_];
      if (in_quote) {
        if (c == '\\') {
          ++pos_;
        } else if (c == in_quote) {
          in_quote = 0;
        }
      } else if (c == '\'' || c == '"') {
        in_quote = c;
      } else if (c == '<') {
        ++nesting;
      } else if (c == '>' && --nesting == 0) {
        break;
      }
    }
    if (pos_ >= text_.size()) return Error(open, "unterminated '<' repr");
    ++pos_;
    if (skip_) return Value::String({});
    std::string_view inner = text_.substr(open + 1, pos_ - open - 2);
    std::size_t n = 0;
    while (n < inner.size() && (IsNameChar(inner[n]) || inner[n] == '.')) ++n;
    std::string_view name = inner.substr(0, n);
    if (n > 0 && IsNameStart(inner[0]) && name.find('.') != std::string_view::npos &&
        n < inner.size() && inner[n] == ':') {
      return Value::String(std::string(name));
    }
    return Value::String(std::string(text_.substr(open, pos_ - open)));
  }

  absl::StatusOr<Value> ParseName(int depth) {
    const std::size_t start = pos_;
    while (!AtEnd() && (IsNameChar(Peek()) || Peek() == '.')) ++pos_;
    std::string_view name = text_.substr(start, pos_ - start);
    if (name == "True") return Value::Bool(true);
    if (name == "False") return Value::Bool(false);
    if (name == "None") return Value::Null();
    if (name == "nan") return Value::Float(std::numeric_limits<double>::quiet_NaN());
    if (name == "inf") return Value::Float(std::numeric_limits<double>::infinity());
    if (name == "float") return ParseFloatCall(start, depth);
    if (name.find('.') != std::string_view::npos && name.back() != '.') {
      return Value::String(std::string(name));
    }
    return Error(start, util::StrCat("unknown name '", name,
                                     "' (Python literals spell True, False, None, nan, inf)"));
  }

  // float('nan'), float('-inf'), float(1): what repr() of some containers writes.
  absl::StatusOr<Value> ParseFloatCall(std::size_t start, int depth) {
    SkipSpace();
    if (Peek() != '(') return Error(pos_, "expected '(' after float");
    ++pos_;
    // The argument is skipped first: a number keeps its value, a container is an error whatever
    // it holds; text (maybe in parentheses) is read again to be converted.
    const bool ambient_skip = skip_;
    SkipSpace();
    const std::size_t arg_start = pos_;
    skip_ = true;
    absl::StatusOr<Value> arg = ParseValue(depth + 1);
    if (arg.ok() && arg->is_string()) {
      const bool ambient_counting = counting_;
      pos_ = arg_start;
      skip_ = false;
      counting_ = false;
      arg = ParseValue(depth + 1);
      counting_ = ambient_counting;
    }
    skip_ = ambient_skip;
    if (!arg.ok()) return arg;
    SkipSpace();
    if (Peek() != ')') {
      return Error(pos_, util::StrCat("expected ')' to close float(, found ", Describe(pos_)));
    }
    ++pos_;
    if (arg->is_number()) {
      return Value::Float(arg->kind == Value::Kind::kInt ? static_cast<double>(arg->integer)
                                                         : arg->number);
    }
    if (!arg->is_string())
      return Error(start, "float() of a value that is neither text nor a number");
    std::string s(util::TrimWhitespace(arg->string));
    for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    bool negative = !s.empty() && s[0] == '-';
    std::string_view body = s;
    if (!body.empty() && (body[0] == '-' || body[0] == '+')) body.remove_prefix(1);
    if (body == "nan") return Value::Float(std::numeric_limits<double>::quiet_NaN());
    if (body == "inf" || body == "infinity") {
      return Value::Float(negative ? -std::numeric_limits<double>::infinity()
                                   : std::numeric_limits<double>::infinity());
    }
    Parser inner(arg->string);
    absl::StatusOr<Value> number = inner.ParseAll();
    if (!number.ok() || !number->is_number()) {
      return Error(start,
                   util::StrCat("float() of text that is not a number: '", arg->string, "'"));
    }
    return Value::Float(number->kind == Value::Kind::kInt ? static_cast<double>(number->integer)
                                                          : number->number);
  }

  absl::StatusOr<Value> ParseNumber() {
    const std::size_t start = pos_;
    bool negative = false;
    if (Peek() == '-' || Peek() == '+') {
      negative = Peek() == '-';
      ++pos_;
      SkipSpace();  // repr never writes "- 1", but Python accepts it
    }
    if (IsNameStart(Peek())) {
      std::size_t name_start = pos_;
      while (!AtEnd() && IsNameChar(Peek())) ++pos_;
      std::string_view name = text_.substr(name_start, pos_ - name_start);
      if (name == "inf") {
        return Value::Float(negative ? -std::numeric_limits<double>::infinity()
                                     : std::numeric_limits<double>::infinity());
      }
      if (name == "nan") return Value::Float(std::numeric_limits<double>::quiet_NaN());
      return Error(start, util::StrCat("expected a number after the sign, found '", name, "'"));
    }
    const std::size_t digits_start = pos_;
    int base = 10;
    if (Peek() == '0' && (Peek(1) == 'x' || Peek(1) == 'X' || Peek(1) == 'o' || Peek(1) == 'O' ||
                          Peek(1) == 'b' || Peek(1) == 'B')) {
      char p = static_cast<char>(Peek(1) | 0x20);
      base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
      pos_ += 2;
    }
    std::string digits;
    bool is_float = false;
    auto take_digits = [&] {
      while (!AtEnd() &&
             (Peek() == '_' || (base == 16 ? HexDigit(Peek()) >= 0 : IsDigit(Peek())))) {
        if (Peek() != '_') digits.push_back(Peek());
        ++pos_;
      }
    };
    take_digits();
    if (base == 10) {
      if (Peek() == '.') {
        is_float = true;
        digits.push_back('.');
        ++pos_;
        take_digits();
      }
      if (Peek() == 'e' || Peek() == 'E') {
        is_float = true;
        digits.push_back('e');
        ++pos_;
        if (Peek() == '-' || Peek() == '+') digits.push_back(text_[pos_++]);
        std::size_t before = digits.size();
        take_digits();
        if (digits.size() == before) return Error(pos_, "expected digits in the exponent");
      }
    }
    if (digits.empty() || digits == ".") {
      return Error(digits_start, util::StrCat("expected a number, found ", Describe(digits_start)));
    }
    if (Peek() == 'j' || Peek() == 'J') return Error(start, "complex numbers are not supported");
    if (IsNameChar(Peek())) {
      return Error(pos_, util::StrCat("unexpected ", Describe(pos_), " in a number"));
    }
    if (!is_float) {
      std::uint64_t magnitude = 0;
      auto [end, ec] =
          std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
      bool fits =
          ec == std::errc() && end == digits.data() + digits.size() &&
          magnitude <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) +
                           (negative ? 1 : 0);
      if (fits) {
        std::int64_t value = negative ? static_cast<std::int64_t>(0 - magnitude)
                                      : static_cast<std::int64_t>(magnitude);
        return Value::Int(value);
      }
      if (base != 10) return Error(start, "malformed or too large integer literal");
    }
    double value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (end != digits.data() + digits.size() ||
        (ec != std::errc() && ec != std::errc::result_out_of_range)) {
      return Error(start,
                   util::StrCat("malformed number '", text_.substr(start, pos_ - start), "'"));
    }
    if (ec == std::errc::result_out_of_range) {
      value = std::strtod(digits.c_str(), nullptr);  // overflow to inf, underflow to 0, as Python
    }
    return Value::Float(negative ? -value : value);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  // Skipping: values are checked as when built, but nothing is built (strings stay empty,
  // containers without items); the kind of each value is still right.
  bool skip_ = false;
  // Items put into built containers so far, and how many may be (ParsePythonDictKeys).
  bool counting_ = false;
  std::size_t built_ = 0;
  std::size_t max_built_ = std::numeric_limits<std::size_t>::max();
};

}  // namespace

absl::StatusOr<inventory::Value> ParsePythonLiteral(std::string_view text) {
  return Parser(text).ParseAll();
}

absl::StatusOr<inventory::Value> ParsePythonDictKeys(std::string_view text,
                                                     const std::vector<std::string_view>& keep,
                                                     std::size_t max_items) {
  return Parser(text).ParseKeeping(keep, max_items);
}

}  // namespace triage::junit
