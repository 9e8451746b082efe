// The test-config YAML document and its in-place editor.
//
// Input: a YAML document, optionally followed by a NUL byte and the bytes that choose a batch of
// edits (entries, archs, fields, values, then trailing comments and created entries). Every
// document must parse without crashing. When it parses cleanly, the edits are applied and, when
// the editor accepts them:
//   - every line outside the edited and created entries (and the blank line before a created
//     one) is unchanged, in order, with the same final newline (a missing one is added when an
//     edited entry ends the file, or entries are added after its last line);
//   - the result parses cleanly, with the same entries in the same order, then the created ones
//     in the batch's order;
//   - each field set reads back with the value set, each field deleted is absent, and entries
//     that were not edited read back equal;
//   - each comment asked for (and not deleted later with its field) ends its field's line;
//   - applying the same batch again (creates as plain edits) changes nothing.
// The editor re-parses its own output and answers InternalError when that check fails: a bug
// here, as well.

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "common/inventory/document.h"
#include "common/inventory/editor.h"
#include "common/inventory/schema.h"
#include "common/util/text.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using triage::inventory::Document;
using triage::inventory::Entry;
using triage::inventory::EntryEdit;
using triage::inventory::FieldSpec;
using triage::inventory::FieldType;
using triage::inventory::Value;

template <std::size_t N>
std::string Pick(FuzzedDataProvider& p, const std::string_view (&names)[N]) {
  std::string s(names[p.ConsumeIntegralInRange<std::size_t>(0, N - 1)]);
  if (p.ConsumeIntegralInRange(0, 3) == 0) {
    for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  return s;
}

std::string SomeString(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange(0, 5)) {
    case 0:
      return "";
    case 1:
      return "yes";
    case 2:
      return "flaky: \"timeout\" # not a comment\n  next: line";
    default: {
      // The editor's callers pass valid UTF-8 (JSON, protobuf strings); other bytes as ASCII.
      std::string s = p.ConsumeRandomLengthString(48);
      for (char& c : s) {
        if (static_cast<unsigned char>(c) >= 0x80) c = '?';
      }
      return s;
    }
  }
}

Value Scalar(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange(0, 4)) {
    case 0:
      return Value::Int(p.ConsumeIntegral<std::int64_t>());
    case 1:
      return Value::Float(p.ConsumeFloatingPoint<double>());
    case 2:
      return Value::Bool(p.ConsumeBool());
    default:
      return Value::String(SomeString(p));
  }
}

Value MakeValue(FuzzedDataProvider& p, FieldType type) {
  using T = FieldType;
  if (p.ConsumeIntegralInRange(0, 7) == 0) {
    type = static_cast<T>(p.ConsumeIntegralInRange(0, static_cast<int>(T::kArchOverrides)));
  }
  switch (type) {
    case T::kNumber:
      if (p.ConsumeBool()) return Value::Int(p.ConsumeIntegralInRange<std::int64_t>(-5, 1000));
      return Value::Float(p.ConsumeProbability<double>() * (p.ConsumeBool() ? 1 : 1e6));
    case T::kBool:
      return Value::Bool(p.ConsumeBool());
    case T::kString:
      return Value::String(SomeString(p));
    case T::kStatus:
      return Value::String(Pick(p, triage::inventory::kStatusNames));
    case T::kBringupStatus:
      return Value::String(Pick(p, triage::inventory::kBringupStatusNames));
    case T::kExecutionPass:
      return Value::String(Pick(p, triage::inventory::kExecutionPassNames));
    case T::kStringList:
    case T::kArchList: {
      std::vector<Value> items;
      const int n = p.ConsumeIntegralInRange(0, 3);
      for (int i = 0; i < n; ++i) {
        items.push_back(type == T::kArchList ? Value::String(Pick(p, triage::inventory::kArchNames))
                                             : Scalar(p));
      }
      return Value::List(std::move(items));
    }
    case T::kPositiveInt:
      return Value::Int(p.ConsumeIntegralInRange<std::int64_t>(-1, 64));
    case T::kOptimizationLevel:
      return Value::Int(p.ConsumeIntegralInRange<std::int64_t>(-1, 3));
    case T::kArchOverrides:
      return Scalar(p);
  }
  return Value::Null();
}

std::string FieldName(FuzzedDataProvider& p) {
  const auto fields = triage::inventory::AllFields();
  if (p.ConsumeIntegralInRange(0, 15) == 0) return p.ConsumeRandomLengthString(12);
  return std::string(fields[p.ConsumeIntegralInRange<std::size_t>(0, fields.size() - 1)].name);
}

std::string SomeComment(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange(0, 5)) {
    case 0:
      return "pcc 0.9734 on n150";
    case 1:
      return "  see \"#3860\": a # b, 'c'  ";
    case 2:
      return "";
    case 3:
      return "caf\xC3\xA9 \xE2\x80\x94 https://github.com/tenstorrent/tt-xla/issues/3860";
    default:
      return SomeString(p);  // may hold a newline or other control characters: refused
  }
}

// A key for a created entry: mostly new and of this file's kind, sometimes one that exists, of
// another run mode, or anything.
std::string NewKey(FuzzedDataProvider& p, const Document& doc, int n) {
  const auto& entries = doc.entries();
  switch (p.ConsumeIntegralInRange(0, 7)) {
    case 0:
      if (!entries.empty()) {
        return entries[p.ConsumeIntegralInRange<std::size_t>(0, entries.size() - 1)].key;
      }
      return "a/pytorch-X-single_device-inference";
    case 1:
      return "zz" + std::to_string(n) + "/pytorch-X-single_device-training";
    case 2:
      return p.ConsumeRandomLengthString(24);
    default:
      return "zz" + std::to_string(n) + "/new_model/pytorch-" + std::to_string(n) +
             "_B-single_device-inference";
  }
}

// Comments on some of the fields each edit sets, and created entries, drawn after the edits
// (an input written before they existed still makes the same edits; when its bytes run out,
// every draw below is 0: no comment, no create).
void AddCommentsAndCreates(FuzzedDataProvider& p, const Document& doc,
                           std::vector<EntryEdit>& edits) {
  for (EntryEdit& e : edits) {
    const int comments = p.ConsumeIntegralInRange(0, 3) == 1 ? p.ConsumeIntegralInRange(1, 2) : 0;
    for (int k = 0; k < comments; ++k) {
      // Mostly a field this edit sets; sometimes one it does not (refused).
      std::string name =
          !e.set.empty() && p.ConsumeIntegralInRange(0, 7) != 0
              ? e.set[p.ConsumeIntegralInRange<std::size_t>(0, e.set.size() - 1)].first
              : FieldName(p);
      e.comments.emplace_back(std::move(name), SomeComment(p));
    }
  }
  const int creates = p.ConsumeIntegralInRange(0, 2);
  for (int i = 0; i < creates; ++i) {
    EntryEdit c;
    c.create = true;
    c.key = NewKey(p, doc, i);
    const int sets = p.ConsumeIntegralInRange(0, 3);
    for (int k = 0; k < sets; ++k) {
      std::string name = k == 0 ? "status" : FieldName(p);
      const FieldSpec* spec = triage::inventory::FindField(name);
      Value v = MakeValue(p, spec != nullptr ? spec->type : FieldType::kString);
      c.set.emplace_back(std::move(name), std::move(v));
    }
    if (!c.set.empty() && p.ConsumeBool()) {
      c.comments.emplace_back(c.set.back().first, SomeComment(p));
    }
    if (p.ConsumeIntegralInRange(0, 15) == 0) c.arch = Pick(p, triage::inventory::kArchNames);
    if (p.ConsumeIntegralInRange(0, 15) == 0) c.del.push_back(FieldName(p));
    const auto at = p.ConsumeIntegralInRange<std::size_t>(0, edits.size());
    edits.insert(edits.begin() + static_cast<std::ptrdiff_t>(at), std::move(c));
  }
}

std::vector<EntryEdit> MakeEdits(FuzzedDataProvider& p, const Document& doc) {
  std::vector<EntryEdit> edits;
  const auto& entries = doc.entries();
  const int n = 1 + p.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < n; ++i) {
    EntryEdit e;
    if (p.ConsumeIntegralInRange(0, 31) == 0 || entries.empty()) {
      e.key = p.ConsumeRandomLengthString(16);
    } else {
      e.key = entries[p.ConsumeIntegralInRange<std::size_t>(0, entries.size() - 1)].key;
    }
    if (p.ConsumeIntegralInRange(0, 3) == 0) e.arch = Pick(p, triage::inventory::kArchNames);
    const int sets = p.ConsumeIntegralInRange(0, 3);
    for (int k = 0; k < sets; ++k) {
      std::string name = k == 0 && i == 0 ? "status" : FieldName(p);
      const FieldSpec* spec = triage::inventory::FindField(name);
      Value v = MakeValue(p, spec != nullptr ? spec->type : FieldType::kString);
      e.set.emplace_back(std::move(name), std::move(v));
    }
    const int dels = p.ConsumeIntegralInRange(0, 2);
    for (int k = 0; k < dels; ++k) e.del.push_back(FieldName(p));
    edits.push_back(std::move(e));
  }
  AddCommentsAndCreates(p, doc, edits);
  return edits;
}

const Value* ReadBack(const Entry& entry, const std::optional<std::string>& arch,
                      const std::string& name) {
  const Value* map = &entry.value;
  if (arch) {
    map = entry.Field("arch_overrides");
    if (map != nullptr) map = map->Find(*arch);
    if (map == nullptr) return nullptr;
  }
  return map->Find(name);
}

// Lines of doc outside the given entries, in order, as (line) runs. created: entries the batch
// added, whose blank line before them (in files that separate entries by one) is theirs too.
std::vector<std::string_view> LinesOutside(const Document& doc, const std::set<std::string>& keys,
                                           const std::set<std::string>& created = {}) {
  std::vector<bool> inside(doc.line_count(), false);
  for (const Entry& e : doc.entries()) {
    if (keys.count(e.key) == 0) continue;
    for (int l = e.first_line; l <= e.last_line && l < doc.line_count(); ++l) inside[l] = true;
    if (created.count(e.key) > 0 && e.first_line > 0 &&
        triage::util::TrimWhitespace(doc.Line(e.first_line - 1)).empty()) {
      inside[e.first_line - 1] = true;
    }
  }
  std::vector<std::string_view> out;
  for (int l = 0; l < doc.line_count(); ++l) {
    if (!inside[l]) out.push_back(doc.Line(l));
  }
  return out;
}

// The batch, for the report of a violated property.
std::string Describe(const std::vector<EntryEdit>& edits) {
  std::string out;
  for (const EntryEdit& e : edits) {
    out += "\n    " + std::string(e.create ? "create " : "") + e.key +
           (e.arch ? " [" + *e.arch + "]" : std::string()) + ":";
    for (const auto& [name, value] : e.set) out += " " + name + "=" + value.DebugString();
    for (const auto& name : e.del) out += " -" + name;
    for (const auto& [name, text] : e.comments) out += " " + name + "#" + text;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(data, 0, size);
  const std::size_t yaml_size =
      nul != nullptr ? static_cast<const std::uint8_t*>(nul) - data : size;
  const std::size_t rest = nul != nullptr ? size - yaml_size - 1 : 0;

  Document doc =
      Document::Parse("tests/runner/test_config/torch/test_config_inference_single_device.yaml",
                      std::string(text, yaml_size));
  if (!doc.ok()) return 0;

  FuzzedDataProvider p(data + size - rest, rest);
  const std::vector<EntryEdit> edits = MakeEdits(p, doc);
  auto edited = triage::inventory::ApplyEdits(doc, edits);
  if (!edited.ok()) {
    // The editor's last guard, its re-parse of what it would write, may refuse an edit next to
    // lines YAML reads differently once their neighbours change (e.g. a '%' directive at column
    // 0 inside an entry): refused, nothing written, which is the promise. Any other internal
    // error is a bug.
    const std::string message(edited.status().message());
    FUZZ_CHECK(edited.status().code() != absl::StatusCode::kInternal ||
                   message.find("the edited file does not re-parse") != std::string::npos,
               "editor: %s%s", message.c_str(), Describe(edits).c_str());
    return 0;
  }

  Document after = Document::Parse(doc.path(), *edited);
  FUZZ_CHECK(after.ok(), "the edited file does not parse: %s",
             after.diagnostics().front().ToString().c_str());
  std::vector<std::string> created;
  for (const EntryEdit& e : edits) {
    if (e.create) created.push_back(e.key);
  }
  FUZZ_CHECK(after.entries().size() == doc.entries().size() + created.size(),
             "entry count changed: %zu + %zu created, %zu after", doc.entries().size(),
             created.size(), after.entries().size());
  for (std::size_t k = 0; k < created.size(); ++k) {
    FUZZ_CHECK(after.entries()[doc.entries().size() + k].key == created[k],
               "created entry %zu is '%s', not '%s'", k,
               after.entries()[doc.entries().size() + k].key.c_str(), created[k].c_str());
  }
  // The one byte that may appear: the final newline, when the file lacked one and an edited
  // entry ends on its last line (every replaced line is written with its newline), or entries
  // are added after it.
  bool last_line_edited = !created.empty();
  for (const EntryEdit& e : edits) {
    const Entry* entry = doc.Find(e.key);
    if (entry != nullptr && entry->last_line == doc.line_count() - 1) last_line_edited = true;
  }
  FUZZ_CHECK(after.ends_with_newline() == doc.ends_with_newline() ||
                 (last_line_edited && after.ends_with_newline()) || *edited == doc.bytes(),
             "final newline changed");

  // What each edited field should read back as (nullopt: absent), the edits applied in order.
  std::map<std::tuple<std::string, std::optional<std::string>, std::string>, std::optional<Value>>
      want;
  std::set<std::string> edited_keys;
  for (const EntryEdit& e : edits) {
    edited_keys.insert(e.key);
    // An arch edit after a deletion of the whole arch_overrides map makes it again: what it
    // then holds is checked field by field, not as "absent".
    if (e.arch) want.erase({e.key, std::nullopt, "arch_overrides"});
    for (const auto& [name, value] : e.set) want[{e.key, e.arch, name}] = value;
    for (const auto& name : e.del) {
      want[{e.key, e.arch, name}] = std::nullopt;
      if (!e.arch && name == "arch_overrides") {
        for (auto& [k, v] : want) {
          if (std::get<0>(k) == e.key && std::get<1>(k)) v = std::nullopt;
        }
      }
    }
  }
  for (const auto& [k, v] : want) {
    const auto& [key, arch, name] = k;
    const Entry* entry = after.Find(key);
    FUZZ_CHECK(entry != nullptr, "entry '%s' lost", key.c_str());
    const Value* got = ReadBack(*entry, arch, name);
    if (!v) {
      FUZZ_CHECK(got == nullptr, "'%s' %s: deleted, reads back %s%s", key.c_str(), name.c_str(),
                 got->DebugString().c_str(), Describe(edits).c_str());
    } else {
      FUZZ_CHECK(got != nullptr && *got == *v, "'%s' %s: set %s, reads back %s", key.c_str(),
                 name.c_str(), v->DebugString().c_str(),
                 got != nullptr ? got->DebugString().c_str() : "nothing");
    }
  }
  for (std::size_t i = 0; i < doc.entries().size(); ++i) {
    const Entry& a = doc.entries()[i];
    const Entry& b = after.entries()[i];
    FUZZ_CHECK(a.key == b.key, "entry %zu: key '%s' became '%s'", i, a.key.c_str(), b.key.c_str());
    if (edited_keys.count(a.key) == 0) {
      FUZZ_CHECK(a.value == b.value, "unedited entry '%s' changed", a.key.c_str());
    }
  }
  const auto outside_before = LinesOutside(doc, edited_keys);
  const auto outside_after =
      LinesOutside(after, edited_keys, std::set<std::string>(created.begin(), created.end()));
  FUZZ_CHECK(outside_before == outside_after,
             "lines outside the edited entries changed (%zu -> %zu)%s", outside_before.size(),
             outside_after.size(), Describe(edits).c_str());

  // Each comment asked for ends its field's line: a later set without a comment keeps it, a
  // later delete of the field (or of arch_overrides) takes it away.
  std::map<std::tuple<std::string, std::optional<std::string>, std::string>, std::string> comments;
  for (const EntryEdit& e : edits) {
    for (const auto& [name, comment] : e.comments) {
      std::string_view t = comment;
      while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
      while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
      comments[{e.key, e.arch, name}] = " # " + std::string(t);
    }
    for (const auto& name : e.del) {
      comments.erase({e.key, e.arch, name});
      if (!e.arch && name == "arch_overrides") {
        std::erase_if(comments, [&](const auto& kv) {
          return std::get<0>(kv.first) == e.key && std::get<1>(kv.first).has_value();
        });
      }
    }
  }
  for (const auto& [k, trailer] : comments) {
    const auto& [key, arch, name] = k;
    const Entry* entry = after.Find(key);
    FUZZ_CHECK(entry != nullptr, "entry '%s' lost", key.c_str());
    const Value* map = &entry->value;
    if (arch) {
      map = entry->Field("arch_overrides");
      if (map != nullptr) map = map->Find(*arch);
    }
    FUZZ_CHECK(map != nullptr && map->is_map(), "'%s' %s: the commented field's map is gone",
               key.c_str(), name.c_str());
    for (const auto& item : map->map) {
      if (item.key != name) continue;
      const std::string_view line = after.Line(item.key_pos.line);
      FUZZ_CHECK(line.ends_with(trailer), "'%s' %s: the comment '%s' is not on its line: %s",
                 key.c_str(), name.c_str(), trailer.c_str(), std::string(line).c_str());
    }
  }

  // Again, the created entries now existing: their creates become plain edits.
  std::vector<EntryEdit> repeat = edits;
  for (EntryEdit& e : repeat) e.create = false;
  auto again = triage::inventory::ApplyEdits(after, repeat);
  FUZZ_CHECK(again.ok(), "the same edits fail on the result: %s",
             std::string(again.status().message()).c_str());
  // Byte for byte, unless a field is deleted and set again by a later edit: a deleted field's
  // line is gone, so setting it again appends it to its block, and on the second pass the
  // same happens to the line the first pass appended: the values agree, the order may not.
  std::set<std::tuple<std::string, std::optional<std::string>, std::string>> deleted;
  bool reordered = false;
  // The same holds for a whole arch_overrides map deleted and then made again by an arch edit:
  // its arch blocks may come back in another order.
  for (const EntryEdit& e : edits) {
    for (const auto& [name, value] : e.set) reordered |= deleted.count({e.key, e.arch, name}) > 0;
    if (e.arch) reordered |= deleted.count({e.key, std::nullopt, "arch_overrides"}) > 0;
    for (const auto& name : e.del) deleted.insert({e.key, e.arch, name});
  }
  if (!reordered) {
    FUZZ_CHECK(*again == *edited,
               "the same edits change the result again:%s\n--- once:\n%s--- twice:\n%s",
               Describe(edits).c_str(), edited->c_str(), again->c_str());
  }
  return 0;
}
