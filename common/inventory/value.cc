#include "common/inventory/value.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "common/util/strings.h"

namespace triage::inventory {

Value Value::Null() { return Value{}; }

Value Value::Bool(bool b) {
  Value v;
  v.kind = Kind::kBool;
  v.boolean = b;
  v.string = b ? "true" : "false";
  return v;
}

Value Value::Int(std::int64_t i) {
  Value v;
  v.kind = Kind::kInt;
  v.integer = i;
  v.string = util::StrCat(i);
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind = Kind::kFloat;
  v.number = d;
  if (std::isnan(d)) {
    v.string = ".nan";
  } else if (std::isinf(d)) {
    v.string = d > 0 ? ".inf" : "-.inf";
  } else {
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), d);
    v.string.assign(buf, res.ptr);
    // Keep it a float for a YAML 1.1 reader: it needs a '.'.
    if (v.string.find_first_of(".e") == std::string::npos) v.string += ".0";
    if (v.string.find('.') == std::string::npos) {
      // 1e+20 -> 1.0e+20
      auto e = v.string.find('e');
      v.string.insert(e, ".0");
    }
  }
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind = Kind::kString;
  v.string = std::move(s);
  return v;
}

Value Value::List(std::vector<Value> items) {
  Value v;
  v.kind = Kind::kList;
  v.list = std::move(items);
  return v;
}

const Value* Value::Find(std::string_view key) const {
  if (kind != Kind::kMap) return nullptr;
  for (const auto& item : map) {
    if (item.key == key) return &item.value;
  }
  return nullptr;
}

bool Value::operator==(const Value& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::kNull:
      return true;
    case Kind::kBool:
      return boolean == o.boolean;
    case Kind::kInt:
      return integer == o.integer;
    case Kind::kFloat:
      return number == o.number || (std::isnan(number) && std::isnan(o.number));
    case Kind::kString:
      return string == o.string;
    case Kind::kList:
      return list == o.list;
    case Kind::kMap:
      if (map.size() != o.map.size()) return false;
      for (std::size_t i = 0; i < map.size(); ++i) {
        if (map[i].key != o.map[i].key || !(map[i].value == o.map[i].value)) return false;
      }
      return true;
  }
  return false;
}

std::string Value::DebugString() const {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return boolean ? "true" : "false";
    case Kind::kInt:
    case Kind::kFloat:
    case Kind::kString:
      return string;
    case Kind::kList:
      return util::StrCat(
          "[",
          util::StrJoin(list, ", ",
                        [](std::string* out, const Value& v) { out->append(v.DebugString()); }),
          "]");
    case Kind::kMap:
      return util::StrCat("{",
                          util::StrJoin(map, ", ",
                                        [](std::string* out, const MapItem& item) {
                                          util::StrAppend(out, item.key, ": ",
                                                          item.value.DebugString());
                                        }),
                          "}");
  }
  return "";
}

std::string_view Value::KindName() const {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kList:
      return "list";
    case Kind::kMap:
      return "mapping";
  }
  return "?";
}

namespace {

bool AllOf(std::string_view s, std::string_view allowed) {
  if (s.empty()) return false;
  for (char c : s) {
    if (allowed.find(c) == std::string_view::npos) return false;
  }
  return true;
}

std::string WithoutUnderscores(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c != '_') out.push_back(c);
  }
  return out;
}

bool ParseInt(std::string_view text, std::int64_t* out) {
  std::string_view s = text;
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return false;
  int base = 10;
  std::string digits;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    if (!AllOf(s.substr(2), "0123456789abcdefABCDEF_")) return false;
    base = 16;
    digits = WithoutUnderscores(s.substr(2));
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
    if (!AllOf(s.substr(2), "01_")) return false;
    base = 2;
    digits = WithoutUnderscores(s.substr(2));
  } else if (s.size() > 1 && s[0] == '0') {
    if (!AllOf(s.substr(1), "01234567_")) return false;
    base = 8;
    digits = WithoutUnderscores(s.substr(1));
  } else {
    if (!(s[0] >= '1' && s[0] <= '9') && s != "0") return false;
    if (!AllOf(s, "0123456789_")) return false;
    digits = WithoutUnderscores(s);
  }
  if (digits.empty()) return false;
  std::uint64_t u = 0;
  auto res = std::from_chars(digits.data(), digits.data() + digits.size(), u, base);
  if (res.ec != std::errc() || res.ptr != digits.data() + digits.size()) return false;
  if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
  *out = neg ? -static_cast<std::int64_t>(u) : static_cast<std::int64_t>(u);
  return true;
}

bool ParseFloat(std::string_view text, double* out) {
  std::string_view s = text;
  std::string_view sign;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    sign = s.substr(0, 1);
    s.remove_prefix(1);
  }
  if (s == ".inf" || s == ".Inf" || s == ".INF") {
    *out = sign == "-" ? -std::numeric_limits<double>::infinity()
                       : std::numeric_limits<double>::infinity();
    return true;
  }
  if (sign.empty() && (s == ".nan" || s == ".NaN" || s == ".NAN")) {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  // [0-9][0-9_]*\.[0-9_]*([eE][-+][0-9]+)?  or  \.[0-9_]+([eE][-+][0-9]+)?
  std::size_t dot = s.find('.');
  if (dot == std::string_view::npos) return false;
  std::string_view mantissa_int = s.substr(0, dot);
  std::string_view rest = s.substr(dot + 1);
  std::string_view frac = rest, exp;
  std::size_t e = rest.find_first_of("eE");
  if (e != std::string_view::npos) {
    frac = rest.substr(0, e);
    exp = rest.substr(e + 1);
    if (exp.size() < 2 || (exp[0] != '-' && exp[0] != '+') || !AllOf(exp.substr(1), "0123456789"))
      return false;
  }
  if (mantissa_int.empty()) {
    if (frac.empty() || !AllOf(frac, "0123456789_")) return false;
  } else {
    if (!(mantissa_int[0] >= '0' && mantissa_int[0] <= '9')) return false;
    if (!AllOf(mantissa_int, "0123456789_")) return false;
    if (!frac.empty() && !AllOf(frac, "0123456789_")) return false;
  }
  std::string clean =
      util::StrCat(sign, WithoutUnderscores(mantissa_int), ".", WithoutUnderscores(frac));
  if (clean.back() == '.') clean += "0";
  if (!exp.empty()) util::StrAppend(&clean, "e", exp);
  if (clean[sign.size()] == '.') clean.insert(sign.size(), "0");
  double d = 0;
  auto res = std::from_chars(clean.data() + (sign == "+" ? 1 : 0), clean.data() + clean.size(), d);
  if (res.ec != std::errc() || res.ptr != clean.data() + clean.size()) return false;
  *out = d;
  return true;
}

}  // namespace

Value ResolvePlainScalar(std::string_view text) {
  static constexpr std::string_view kNulls[] = {"", "~", "null", "Null", "NULL"};
  static constexpr std::string_view kTrue[] = {"yes",  "Yes", "YES", "true", "True",
                                               "TRUE", "on",  "On",  "ON"};
  static constexpr std::string_view kFalse[] = {"no",    "No",  "NO",  "false", "False",
                                                "FALSE", "off", "Off", "OFF"};
  Value v;
  for (auto n : kNulls) {
    if (text == n) {
      v.string = std::string(text);
      return v;
    }
  }
  for (auto t : kTrue) {
    if (text == t) {
      v = Value::Bool(true);
      v.string = std::string(text);
      return v;
    }
  }
  for (auto f : kFalse) {
    if (text == f) {
      v = Value::Bool(false);
      v.string = std::string(text);
      return v;
    }
  }
  std::int64_t i = 0;
  if (ParseInt(text, &i)) {
    v = Value::Int(i);
    v.string = std::string(text);
    return v;
  }
  double d = 0;
  if (ParseFloat(text, &d)) {
    v = Value::Float(d);
    v.string = std::string(text);
    return v;
  }
  return Value::String(std::string(text));
}

}  // namespace triage::inventory
