#include "common/inventory/editor.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "common/inventory/edit_internal.h"
#include "common/inventory/schema.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::inventory {
namespace {

using namespace edit_internal;  // this file's own parts

// A piece of an entry's text: a mapping item (with its value lines, or with child chunks when
// its value is a block mapping), or a run of blank/comment lines kept exactly as they are.
struct Chunk {
  bool gap = false;
  std::string name;
  std::vector<std::string> lines;  // gap: all; leaf: all; map item: its key line
  std::vector<Chunk> children;     // map item: items and gaps of its value
  bool is_map = false;
  int indent = 0;
  Value value;  // the item's value as parsed (leaf items), for no-op detection and styles
};

class EntryText {
 public:
  EntryText(const Document& doc, const Entry& entry) : doc_(doc) {
    root_.is_map = true;
    root_.name = entry.key;
    root_.indent = entry.pos.col;
    root_.lines.emplace_back(doc.Line(entry.first_line));
    root_.children = Build(entry.value, entry.first_line + 1, entry.last_line);
    field_indent_ = FirstItemIndent(root_.children, entry.pos.col + 2);
    unit_ = std::max(1, field_indent_ - entry.pos.col);
  }

  // Sets the fields of one edit (top level, or arch_overrides.<arch>).
  // comments: trailing comments for some of the fields (their text, without '#').
  absl::Status Set(const std::optional<std::string>& arch,
                   const std::vector<std::pair<std::string, Value>>& fields,
                   const std::vector<std::pair<std::string, std::string>>& comments) {
    // Nothing to set: an arch's override must not be created empty (an edit that only deletes).
    if (fields.empty()) return absl::OkStatus();
    std::vector<Chunk>* items = &root_.children;
    int indent = field_indent_;
    if (arch) {
      Chunk* overrides = FindOrCreateMap(root_.children, "arch_overrides", field_indent_);
      int arch_indent = FirstItemIndent(overrides->children, field_indent_ + unit_);
      Chunk* arch_chunk = FindOrCreateMap(overrides->children, *arch, arch_indent);
      items = &arch_chunk->children;
      indent = FirstItemIndent(arch_chunk->children, arch_indent + unit_);
    }
    std::vector<const std::pair<std::string, Value>*> ordered;
    for (const auto& f : fields) ordered.push_back(&f);
    std::stable_sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) {
      return InsertRank(a->first) < InsertRank(b->first);
    });
    std::string last_inserted;
    for (const auto* f : ordered) {
      const std::string* text = FindComment(comments, f->first);
      const std::optional<std::string> trailer =
          text != nullptr ? std::optional<std::string>(CommentTrailer(*text)) : std::nullopt;
      auto status = SetIn(*items, indent, f->first, f->second, trailer, last_inserted);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }

  absl::Status Delete(const std::optional<std::string>& arch, const std::string& name) {
    if (!arch) {
      auto it = FindItem(root_.children, name);
      if (it == root_.children.end()) return absl::OkStatus();
      root_.children.erase(it);
      if (CountItems(root_.children) == 0) {
        return absl::InvalidArgumentError(
            util::StrCat("deleting '", name, "' would leave entry '", root_.name, "' empty"));
      }
      return absl::OkStatus();
    }
    auto overrides = FindItem(root_.children, "arch_overrides");
    if (overrides == root_.children.end()) return absl::OkStatus();
    auto arch_it = FindItem(overrides->children, *arch);
    if (arch_it == overrides->children.end()) return absl::OkStatus();
    auto field = FindItem(arch_it->children, name);
    if (field == arch_it->children.end()) return absl::OkStatus();
    arch_it->children.erase(field);
    if (CountItems(arch_it->children) == 0) overrides->children.erase(arch_it);
    if (CountItems(overrides->children) == 0) {
      root_.children.erase(overrides);
      if (CountItems(root_.children) == 0) {
        return absl::InvalidArgumentError(
            util::StrCat("deleting arch_overrides would leave entry '", root_.name, "' empty"));
      }
    }
    return absl::OkStatus();
  }

  void Render(std::vector<std::string>& out) const { RenderChunk(root_, out); }

  // Writes chunk.lines for `name: value`, keeping the style of the old chunk where it has one.
  // trailer: the inline comment to write (" # text"); nullopt keeps the old chunk's.
  static void RenderField(Chunk& chunk, const std::string& name, const Value& value,
                          const Chunk* old, const std::optional<std::string>& trailer_override) {
    const std::string pad(chunk.indent, ' ');
    std::string trailer;  // an inline comment after the old value
    if (trailer_override) {
      trailer = *trailer_override;
    } else if (old != nullptr) {
      trailer = InlineComment(old->lines.front(), old->indent, name);
    }
    const bool old_block_list =
        old != nullptr && old->value.is_list() && !old->value.flow && old->lines.size() > 1;
    const bool quote_items = old != nullptr && old->value.is_list() && !old->value.list.empty() &&
                             std::all_of(old->value.list.begin(), old->value.list.end(),
                                         [](const Value& v) { return v.quote == '"'; });
    chunk.lines.clear();
    if (value.is_list() && old_block_list && !value.list.empty()) {
      int item_indent = util::IndentOf(old->lines[1]);
      for (const auto& l : old->lines) {
        std::string_view t = util::TrimWhitespace(l);
        if (!t.empty() && t[0] == '-') {
          item_indent = util::IndentOf(l);
          break;
        }
      }
      chunk.lines.push_back(util::StrCat(pad, name, ":", trailer));
      for (const Value& item : value.list) {
        chunk.lines.push_back(
            util::StrCat(std::string(item_indent, ' '), "- ", RenderScalar(item, quote_items)));
      }
      return;
    }
    chunk.lines.push_back(
        util::StrCat(pad, name, ": ", RenderValue(name, value, quote_items), trailer));
  }

 private:
  static void RenderChunk(const Chunk& c, std::vector<std::string>& out) {
    out.insert(out.end(), c.lines.begin(), c.lines.end());
    for (const Chunk& child : c.children) RenderChunk(child, out);
  }

  static int CountItems(const std::vector<Chunk>& chunks) {
    return static_cast<int>(
        std::count_if(chunks.begin(), chunks.end(), [](const Chunk& c) { return !c.gap; }));
  }

  static int FirstItemIndent(const std::vector<Chunk>& chunks, int fallback) {
    for (const Chunk& c : chunks) {
      if (!c.gap) return c.indent;
    }
    return fallback;
  }

  static std::vector<Chunk>::iterator FindItem(std::vector<Chunk>& chunks, std::string_view name) {
    return std::find_if(chunks.begin(), chunks.end(),
                        [&](const Chunk& c) { return !c.gap && c.name == name; });
  }

  // Splits lines [begin, end] (0-based, inclusive) into the chunks of a block mapping.
  std::vector<Chunk> Build(const Value& map, int begin, int end) {
    std::vector<Chunk> out;
    auto gap = [&](int from, int to) {
      if (from > to) return;
      Chunk g;
      g.gap = true;
      for (int i = from; i <= to; ++i) g.lines.emplace_back(doc_.Line(i));
      out.push_back(std::move(g));
    };
    if (!map.is_map() || map.map.empty()) {
      gap(begin, end);
      return out;
    }
    gap(begin, map.map.front().key_pos.line - 1);
    for (std::size_t i = 0; i < map.map.size(); ++i) {
      const MapItem& item = map.map[i];
      const int start = item.key_pos.line;
      const int bound = i + 1 < map.map.size() ? map.map[i + 1].key_pos.line - 1 : end;
      int last = bound;
      while (last > start && util::IsBlankOrComment(doc_.Line(last))) --last;
      Chunk c;
      c.name = item.key;
      c.indent = item.key_pos.col;
      c.value = item.value;
      const bool block_map = item.value.is_map() && !item.value.flow && !item.value.map.empty() &&
                             item.value.map.front().key_pos.line > start;
      if (block_map) {
        c.is_map = true;
        c.lines.emplace_back(doc_.Line(start));
        c.children = Build(item.value, start + 1, last);
      } else {
        for (int l = start; l <= last; ++l) c.lines.emplace_back(doc_.Line(l));
      }
      out.push_back(std::move(c));
      gap(last + 1, bound);
    }
    return out;
  }

  Chunk* FindOrCreateMap(std::vector<Chunk>& items, const std::string& name, int indent) {
    auto it = FindItem(items, name);
    if (it != items.end()) return &*it;
    Chunk c;
    c.name = name;
    c.is_map = true;
    c.indent = indent;
    c.value.kind = Value::Kind::kMap;
    c.lines.push_back(util::StrCat(std::string(indent, ' '), name, ":"));
    return &*items.insert(InsertPosition(items, name, ""), std::move(c));
  }

  static std::vector<Chunk>::iterator InsertPosition(std::vector<Chunk>& items,
                                                     std::string_view name,
                                                     std::string_view last_inserted) {
    auto after = [&](std::string_view anchor) {
      auto it = FindItem(items, anchor);
      return it == items.end() ? it : it + 1;
    };
    auto first_item =
        std::find_if(items.begin(), items.end(), [](const Chunk& c) { return !c.gap; });
    const int rank = InsertRank(name);
    if (name == "status") return first_item;
    if (rank < static_cast<int>(std::size(kInsertOrder))) {
      if (name == "reason" && FindItem(items, "bringup_status") != items.end()) {
        return after("bringup_status");
      }
      if (!last_inserted.empty() && FindItem(items, last_inserted) != items.end()) {
        return after(last_inserted);
      }
      if (FindItem(items, "status") != items.end()) return after("status");
      return first_item;
    }
    // After the last item (before trailing comments).
    auto pos = items.end();
    for (auto it = items.begin(); it != items.end(); ++it) {
      if (!it->gap) pos = it + 1;
    }
    return pos;
  }

  // trailer: the inline comment the field's line gets (" # text"); nullopt keeps its own.
  absl::Status SetIn(std::vector<Chunk>& items, int indent, const std::string& name,
                     const Value& value, const std::optional<std::string>& asked,
                     std::string& last_inserted) {
    auto it = FindItem(items, name);
    std::optional<std::string> trailer = asked;
    if (trailer && it != items.end() && !it->is_map) {
      // A link a person wrote in the comment being replaced stays on the line.
      trailer = WithKeptLinks(*trailer, InlineComment(it->lines.front(), it->indent, name));
    }
    if (it == items.end()) {
      Chunk c;
      c.name = name;
      c.indent = indent;
      c.value = value;
      RenderField(c, name, value, nullptr, trailer);
      items.insert(InsertPosition(items, name, last_inserted), std::move(c));
      if (name != "status") last_inserted = name;
      return absl::OkStatus();
    }
    if (it->is_map) {
      return absl::InvalidArgumentError(
          util::StrCat("field '", name, "' is a mapping and cannot be set to a value"));
    }
    if (it->value == value && it->value.kind == value.kind) {
      if (!trailer || InlineComment(it->lines.front(), it->indent, name) == *trailer) {
        return absl::OkStatus();
      }
      // The same value with another comment: only the comment changes, the value's text stays.
      if (ReplaceTrailer(*it, *trailer)) return absl::OkStatus();
    }
    Chunk old = *it;
    it->value = value;
    RenderField(*it, name, value, &old, trailer);
    return absl::OkStatus();
  }

  // Writes the trailer after the value on the chunk's key line (dropping the comment there).
  // False when the value does not end on that line (a flow list over several lines, a plain
  // scalar continued on the next line): the caller re-renders the field.
  static bool ReplaceTrailer(Chunk& chunk, const std::string& trailer) {
    const bool block_list = chunk.value.is_list() && !chunk.value.flow;
    if (chunk.lines.size() > 1 && !block_list) return false;
    std::string& line = chunk.lines.front();
    const std::size_t end = ValueEndOnKeyLine(line, chunk.indent, chunk.name);
    if (end == std::string::npos) return false;
    if (block_list && line[end - 1] != ':') return false;
    line = util::StrCat(std::string_view(line).substr(0, end), trailer);
    return true;
  }

  static std::string RenderValue(std::string_view name, const Value& v, bool quote_items) {
    if (v.is_list()) {
      std::string out = "[";
      for (std::size_t i = 0; i < v.list.size(); ++i) {
        if (i > 0) out += ", ";
        out += RenderScalar(v.list[i], quote_items);
      }
      return out + "]";
    }
    if (v.is_string() && name == "reason") return DoubleQuote(v.string);
    return RenderScalar(v, false);
  }

  static std::string RenderScalar(const Value& v, bool force_quote) {
    switch (v.kind) {
      case Value::Kind::kNull:
        return "null";
      case Value::Kind::kBool:
        return v.boolean ? "true" : "false";
      case Value::Kind::kInt:
        return util::StrCat(v.integer);
      case Value::Kind::kFloat:
        return Value::Float(v.number).string;
      case Value::Kind::kString:
        return !force_quote && PlainSafe(v.string) ? v.string : DoubleQuote(v.string);
      case Value::Kind::kList:
      case Value::Kind::kMap:
        return v.DebugString();
    }
    return "";
  }

  const Document& doc_;
  Chunk root_;
  int field_indent_ = 4;
  int unit_ = 2;
};

// Where and how new entries are written: before line `at` (0-based; line_count() = at the end),
// keys at key_col, fields at field_col, a blank line before each when the file separates its
// entries by one (none before the first entry of a file without entries).
struct NewEntryPlace {
  int at = 0;
  int key_col = 2;
  int field_col = 4;
  bool blank_between = false;
  bool file_has_entries = false;
};

absl::StatusOr<NewEntryPlace> FindNewEntryPlace(const Document& doc) {
  NewEntryPlace place;
  const auto& entries = doc.entries();
  if (entries.empty()) {
    // `test_config:` alone on its line (or with a comment): the entries go right after it.
    for (int i = 0; i < doc.line_count(); ++i) {
      std::string_view line = doc.Line(i);
      if (!line.starts_with(doc.root_key())) continue;
      std::string_view rest = line.substr(doc.root_key().size());
      if (rest.empty() || rest[0] != ':') continue;
      rest = util::TrimWhitespace(rest.substr(1));
      if (!rest.empty() && rest[0] != '#') break;
      place.at = i + 1;
      place.blank_between = doc.run_mode() == "inference";
      return place;
    }
    return absl::FailedPreconditionError(
        util::StrCat(doc.path(), ": cannot add entries: '", doc.root_key(),
                     ":' is not alone on its line (the entries would not belong to it)"));
  }
  place.file_has_entries = true;
  const Entry& last = entries.back();
  place.key_col = last.pos.col;
  // After the last entry, with the comment lines right below it that are indented deeper than
  // its key (its own commented-out fields); comments at the key's column or less (commented-out
  // entries) and blank lines stay after the new entries.
  int at = last.last_line + 1;
  while (at < doc.line_count()) {
    std::string_view line = doc.Line(at);
    std::string_view t = util::TrimWhitespace(line);
    if (t.empty() || t[0] != '#' || util::IndentOf(line) <= last.pos.col) break;
    ++at;
  }
  place.at = at;
  // The fields' column most entries use (ties: the smaller).
  std::map<int, int> cols;
  for (const Entry& e : entries) {
    if (e.value.is_map() && !e.value.map.empty()) cols[e.value.map.front().key_pos.col]++;
  }
  place.field_col = place.key_col + 2;
  int best = 0;
  for (const auto& [col, count] : cols) {
    if (count > best) {
      best = count;
      place.field_col = col;
    }
  }
  // A blank line between entries when most neighbours have one; on a tie, as the last two
  // entries are; a single entry: as tt-xla writes (inference files have blank lines).
  int blank = 0, none = 0;
  bool last_blank = false;
  for (std::size_t i = 0; i + 1 < entries.size(); ++i) {
    last_blank = false;
    for (int l = entries[i].last_line + 1; l < entries[i + 1].first_line; ++l) {
      if (util::TrimWhitespace(doc.Line(l)).empty()) last_blank = true;
    }
    (last_blank ? blank : none)++;
  }
  if (blank + none == 0) {
    place.blank_between = doc.run_mode() == "inference";
  } else {
    place.blank_between = blank != none ? blank > none : last_blank;
  }
  return place;
}

// The lines of a created entry (without the blank line before it): its top-level fields, then
// its arch_overrides (one block per arch, in the order the batch first names them, each a
// level deeper by the file's own indent step).
std::vector<std::string> RenderNewEntry(const EntryEdit& edit,
                                        std::span<const EntryEdit* const> overrides,
                                        const NewEntryPlace& place) {
  std::vector<std::string> lines;
  lines.push_back(util::StrCat(std::string(place.key_col, ' '),
                               PlainSafe(edit.key) ? edit.key : DoubleQuote(edit.key), ":"));
  auto fields = [&](const EntryEdit& e, int indent) {
    for (const auto& [name, value] : e.set) {
      Chunk c;
      c.name = name;
      c.indent = indent;
      const std::string* text = FindComment(e.comments, name);
      EntryText::RenderField(
          c, name, value, nullptr,
          text != nullptr ? std::optional<std::string>(CommentTrailer(*text)) : std::nullopt);
      lines.insert(lines.end(), c.lines.begin(), c.lines.end());
    }
  };
  fields(edit, place.field_col);
  if (overrides.empty()) return lines;
  const int step = std::max(2, place.field_col - place.key_col);
  lines.push_back(util::StrCat(std::string(place.field_col, ' '), "arch_overrides:"));
  std::set<std::string> done;  // archs in the order the batch first names them
  for (const EntryEdit* first : overrides) {
    if (!done.insert(*first->arch).second) continue;
    lines.push_back(util::StrCat(std::string(place.field_col + step, ' '), *first->arch, ":"));
    for (const EntryEdit* o : overrides) {
      if (*o->arch == *first->arch) fields(*o, place.field_col + 2 * step);
    }
  }
  return lines;
}

// The comments a batch asks for, as the result must show them: (key, arch, field) -> trailer.
// A later set of the field without a comment keeps it; a later delete removes it.
using CommentKey = std::tuple<std::string, std::optional<std::string>, std::string>;
std::map<CommentKey, std::string> ExpectedComments(std::span<const EntryEdit> edits) {
  std::map<CommentKey, std::string> out;
  for (const EntryEdit& e : edits) {
    for (const auto& [name, text] : e.comments) out[{e.key, e.arch, name}] = CommentTrailer(text);
    for (const auto& name : e.del) {
      out.erase({e.key, e.arch, name});
      if (!e.arch && name == "arch_overrides") {
        std::erase_if(out, [&](const auto& kv) {
          return std::get<0>(kv.first) == e.key && std::get<1>(kv.first).has_value();
        });
      }
    }
  }
  return out;
}

}  // namespace

std::string DoubleQuote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          util::StrAppend(&out, "\\x", util::Hex(c, 2));
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out += "\"";
  return out;
}

absl::StatusOr<std::string> ApplyEdits(const Document& doc, std::span<const EntryEdit> edits) {
  return ApplyEdits(doc, edits, nullptr);
}

absl::StatusOr<std::string> ApplyEdits(const Document& doc, std::span<const EntryEdit> edits,
                                       EditDetail* detail) {
  if (detail != nullptr) *detail = EditDetail{};
  if (!doc.ok()) {
    return absl::FailedPreconditionError(util::StrCat(
        doc.path(), ": the file has validation errors and is never written (",
        util::CountErrors(doc.diagnostics()), " error(s); run `triagectl inventory check`)"));
  }
  // A created entry is written whole by its create edit: created once, edited by no other edit
  // of the batch.
  std::set<std::string, std::less<>> created;
  for (const EntryEdit& edit : edits) {
    if (edit.create && !created.insert(edit.key).second) {
      return absl::InvalidArgumentError(
          util::StrCat(doc.path(), ": entry '", edit.key, "' is created twice in this batch"));
    }
  }
  for (const EntryEdit& edit : edits) {
    if (auto status = CheckEdit(doc, edit, !edit.create && created.count(edit.key) > 0);
        !status.ok()) {
      return status;
    }
  }

  // Edit each touched entry's text, in file order.
  std::map<int, const Entry*> touched;  // first_line -> entry
  std::map<std::string, std::vector<const EntryEdit*>, std::less<>> by_key;
  std::vector<const EntryEdit*> creates;
  // A created entry's arch_overrides: its arch edits, in batch order.
  std::map<std::string, std::vector<const EntryEdit*>, std::less<>> created_archs;
  for (const EntryEdit& edit : edits) {
    if (edit.create) {
      creates.push_back(&edit);
      continue;
    }
    if (created.count(edit.key) > 0) {
      created_archs[edit.key].push_back(&edit);
      continue;
    }
    const Entry* entry = doc.Find(edit.key);
    touched[entry->first_line] = entry;
    by_key[edit.key].push_back(&edit);
  }
  std::map<int, std::vector<std::string>> replacement;  // first_line -> new lines
  std::map<std::string, Value, std::less<>> expected;
  for (const auto& [line, entry] : touched) {
    EntryText text(doc, *entry);
    Value logical = entry->value;
    for (const EntryEdit* edit : by_key[entry->key]) {
      if (auto s = text.Set(edit->arch, edit->set, edit->comments); !s.ok()) {
        return absl::InvalidArgumentError(
            util::StrCat(doc.path(), ": entry '", entry->key, "': ", s.message()));
      }
      for (const auto& name : edit->del) {
        if (auto s = text.Delete(edit->arch, name); !s.ok()) {
          return absl::InvalidArgumentError(util::StrCat(doc.path(), ": ", s.message()));
        }
      }
      ApplyLogically(logical, *edit);
    }
    text.Render(replacement[line]);
    expected[entry->key] = std::move(logical);
  }

  // The created entries, in batch order, as one run of lines inserted before line place.at.
  NewEntryPlace place;
  std::vector<std::string> inserted;
  std::vector<Value> created_values;
  if (!creates.empty()) {
    auto found = FindNewEntryPlace(doc);
    if (!found.ok()) return found.status();
    place = *found;
    bool first = !place.file_has_entries;
    for (const EntryEdit* edit : creates) {
      if (place.blank_between && !first) inserted.emplace_back();
      first = false;
      std::span<const EntryEdit* const> overrides;
      if (auto a = created_archs.find(edit->key); a != created_archs.end()) overrides = a->second;
      std::vector<std::string> lines = RenderNewEntry(*edit, overrides, place);
      inserted.insert(inserted.end(), lines.begin(), lines.end());
      Value value;
      value.kind = Value::Kind::kMap;
      for (const auto& [name, v] : edit->set) value.map.push_back({name, {}, v});
      for (const EntryEdit* o : overrides) ApplyLogically(value, *o);
      created_values.push_back(std::move(value));
    }
  }

  std::string out;
  out.reserve(doc.bytes().size() + 256);
  const int n = doc.line_count();
  std::vector<EditDetail::Block> blocks;
  int new_line = 0;
  auto insert_new_entries = [&] {
    int old_first = place.at;
    int new_first = new_line;
    if (!out.empty() && out.back() != '\n') {
      // The file's last line had no newline: it gets one, so it is part of the block.
      out += '\n';
      --old_first;
      --new_first;
    }
    for (const std::string& l : inserted) {
      out += l;
      out += '\n';
    }
    new_line += static_cast<int>(inserted.size());
    blocks.push_back({old_first, place.at, new_first, new_line});
  };
  for (int i = 0; i < n;) {
    if (!inserted.empty() && i == place.at) insert_new_entries();
    auto it = replacement.find(i);
    if (it != replacement.end()) {
      for (const std::string& l : it->second) {
        out += l;
        out += '\n';
      }
      const int end = touched[i]->last_line + 1;
      const int added = static_cast<int>(it->second.size());
      blocks.push_back({i, end, new_line, new_line + added});
      new_line += added;
      i = end;
      continue;
    }
    out += doc.Line(i);
    if (i + 1 < n || doc.ends_with_newline()) out += '\n';
    ++i;
    ++new_line;
  }
  if (!inserted.empty() && place.at >= n) insert_new_entries();

  // Re-read what we wrote: it must parse cleanly, keep every entry in place, and differ from
  // the original exactly by the intended field changes and the created entries after them.
  ParseOptions reparse;
  reparse.grammar = &doc.grammar();
  Document check = Document::Parse(doc.path(), out, reparse);
  if (!check.ok()) {
    const auto error = std::find_if(
        check.diagnostics().begin(), check.diagnostics().end(),
        [](const util::Diagnostic& d) { return d.severity == util::Severity::kError; });
    return absl::InternalError(
        util::StrCat(doc.path(), ": the edited file does not re-parse: ", error->ToString()));
  }
  if (check.entries().size() != doc.entries().size() + creates.size()) {
    return absl::InternalError(util::StrCat(doc.path(), ": the edit changed the entry count (",
                                            doc.entries().size(), " + ", creates.size(),
                                            " created, re-read ", check.entries().size(), ")"));
  }
  for (std::size_t i = 0; i < doc.entries().size(); ++i) {
    const Entry& before = doc.entries()[i];
    const Entry& after = check.entries()[i];
    auto exp = expected.find(before.key);
    const Value& want = exp != expected.end() ? exp->second : before.value;
    if (after.key != before.key || !SameContent(after.value, want)) {
      return absl::InternalError(util::StrCat(
          doc.path(), ": entry '", before.key, "' did not re-parse to the intended fields (got ",
          after.value.DebugString(), ", want ", want.DebugString(), ")"));
    }
  }
  for (std::size_t k = 0; k < creates.size(); ++k) {
    const Entry& after = check.entries()[doc.entries().size() + k];
    if (after.key != creates[k]->key || !SameContent(after.value, created_values[k])) {
      return absl::InternalError(util::StrCat(
          doc.path(), ": created entry '", creates[k]->key, "' re-parsed as '", after.key, "' ",
          after.value.DebugString(), " (want ", created_values[k].DebugString(), ")"));
    }
  }
  // Every comment asked for ends its field's line.
  for (const auto& [where, trailer] : ExpectedComments(edits)) {
    const auto& [key, arch, name] = where;
    const Entry* entry = check.Find(key);
    const Value* map = entry != nullptr ? &entry->value : nullptr;
    if (map != nullptr && arch) {
      map = map->Find("arch_overrides");
      if (map != nullptr) map = map->Find(*arch);
    }
    if (map == nullptr || !map->is_map()) continue;  // gone: the field check above decides
    for (const MapItem& item : map->map) {
      if (item.key != name) continue;
      if (!IsTrailerWithLinks(InlineComment(check.Line(item.key_pos.line), item.key_pos.col, name),
                              trailer)) {
        return absl::InternalError(util::StrCat(doc.path(), ": entry '", key, "': the comment on '",
                                                name, "' did not land on its line (",
                                                check.Line(item.key_pos.line), ")"));
      }
    }
  }
  if (detail != nullptr) {
    detail->after.emplace(std::move(check));
    detail->blocks = std::move(blocks);
  }
  return out;
}

}  // namespace triage::inventory
