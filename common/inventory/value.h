#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace triage::inventory {

// 0-based position in a file; line == -1 for values that did not come from a file.
struct SourcePos {
  int line = -1;
  int col = -1;
  bool known() const { return line >= 0; }
};

struct MapItem;

// A YAML value as tt-xla's loader (PyYAML safe_load, YAML 1.1 resolution) sees it: plain
// scalars resolve to null/bool/int/float/string, quoted scalars are always strings.
struct Value {
  enum class Kind { kNull, kBool, kInt, kFloat, kString, kList, kMap };

  Kind kind = Kind::kNull;
  bool boolean = false;
  std::int64_t integer = 0;
  double number = 0;
  std::string string;  // kString: the value; other scalars: the text as written
  std::vector<Value> list;
  std::vector<MapItem> map;

  SourcePos pos;        // where the value starts
  bool quoted = false;  // scalar written in quotes
  char quote = 0;       // '"' or '\'' when quoted
  bool flow = false;    // list/map written in flow style ([..] / {..})

  static Value Null();
  static Value Bool(bool b);
  static Value Int(std::int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value List(std::vector<Value> items);

  bool is_null() const { return kind == Kind::kNull; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_map() const { return kind == Kind::kMap; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }

  // Map lookup (first item with that key); nullptr when absent or not a map.
  const Value* Find(std::string_view key) const;

  // Logical equality: kind and content; positions and quoting style are ignored.
  bool operator==(const Value& other) const;

  // A compact YAML-flow rendering for messages and tables: EXPECTED_PASSING, false, 0.98,
  // [push, nightly], {n150: {status: ...}}.
  std::string DebugString() const;

  std::string_view KindName() const;
};

struct MapItem {
  std::string key;
  SourcePos key_pos;
  Value value;
};

// Resolves a plain (unquoted) scalar the way PyYAML's SafeLoader does (YAML 1.1 core types:
// ~/null, yes/no/on/off/true/false, decimal/hex/octal ints with '_', floats with a '.',
// .inf/.nan). Anything else is a string.
Value ResolvePlainScalar(std::string_view text);

}  // namespace triage::inventory
