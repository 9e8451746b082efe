// Checking an edit against the document before any text changes (edit_internal.h).

#include <algorithm>
#include <map>
#include <set>

#include "common/inventory/edit_internal.h"
#include "common/inventory/schema.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::inventory::edit_internal {

// Content equality of two values where mappings compare as sets of keys.
bool SameContent(const Value& a, const Value& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == Value::Kind::kList) {
    if (a.list.size() != b.list.size()) return false;
    for (std::size_t i = 0; i < a.list.size(); ++i) {
      if (!SameContent(a.list[i], b.list[i])) return false;
    }
    return true;
  }
  if (a.kind == Value::Kind::kMap) {
    if (a.map.size() != b.map.size()) return false;
    for (const MapItem& item : a.map) {
      const Value* other = b.Find(item.key);
      if (other == nullptr || !SameContent(item.value, *other)) return false;
    }
    return true;
  }
  return a == b;
}

Value* FindMut(Value& map, std::string_view key) {
  for (MapItem& item : map.map) {
    if (item.key == key) return &item.value;
  }
  return nullptr;
}

void EraseKey(Value& map, std::string_view key) {
  map.map.erase(std::remove_if(map.map.begin(), map.map.end(),
                               [&](const MapItem& i) { return i.key == key; }),
                map.map.end());
}

// The logical effect of an edit on an entry's value, to check the rendered text against.
void ApplyLogically(Value& entry, const EntryEdit& edit) {
  Value* target = &entry;
  if (edit.arch) {
    Value* overrides = FindMut(entry, "arch_overrides");
    if (overrides == nullptr) {
      Value m;
      m.kind = Value::Kind::kMap;
      entry.map.push_back({"arch_overrides", {}, m});
      overrides = &entry.map.back().value;
    }
    Value* arch = FindMut(*overrides, *edit.arch);
    if (arch == nullptr) {
      Value m;
      m.kind = Value::Kind::kMap;
      overrides->map.push_back({*edit.arch, {}, m});
      arch = &overrides->map.back().value;
    }
    target = arch;
  }
  for (const auto& [name, value] : edit.set) {
    if (Value* v = FindMut(*target, name)) {
      *v = value;
    } else {
      target->map.push_back({name, {}, value});
    }
  }
  for (const auto& name : edit.del) EraseKey(*target, name);
  if (edit.arch) {
    Value* overrides = FindMut(entry, "arch_overrides");
    if (FindMut(*overrides, *edit.arch)->map.empty()) EraseKey(*overrides, *edit.arch);
    if (overrides->map.empty()) EraseKey(entry, "arch_overrides");
  }
}

// The key of an entry to create: one line of UTF-8, and in a test-config file a key of the
// grammar with this file's run mode and parallelism (the validator only warns about a misfiled
// key; a new entry is never written misfiled).
absl::Status CheckNewKey(const Document& doc, const std::string& key) {
  if (key.empty()) {
    return absl::InvalidArgumentError(
        util::StrCat(doc.path(), ": cannot create an entry with an empty key"));
  }
  if (std::any_of(key.begin(), key.end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f;
      })) {
    return absl::InvalidArgumentError(
        util::StrCat(doc.path(), ": cannot create entry ", DoubleQuote(key),
                     ": a key is one line without control characters"));
  }
  const std::string where = util::StrCat(doc.path(), ": cannot create entry '", key, "'");
  if (util::FirstInvalidUtf8(key)) {
    return absl::InvalidArgumentError(util::StrCat(where, ": the key is not valid UTF-8"));
  }
  if (doc.Find(key) != nullptr) {
    return absl::AlreadyExistsError(
        util::StrCat(doc.path(), ": entry '", key, "' already exists (create adds new entries)"));
  }
  if (doc.root_key().empty()) {
    return absl::FailedPreconditionError(
        util::StrCat(where, ": the file has no '", kTestConfigRoot, "' mapping to add it to"));
  }
  if (doc.is_placeholders()) return absl::OkStatus();
  auto parts = ParseKey(key, doc.grammar());
  if (!parts.ok())
    return absl::InvalidArgumentError(util::StrCat(where, ": ", parts.status().message()));
  if (!doc.run_mode().empty() && parts->run_mode != doc.run_mode()) {
    return absl::InvalidArgumentError(util::StrCat(where, ": its run mode '", parts->run_mode,
                                                   "' is not this file's (", doc.run_mode(), ")"));
  }
  if (!doc.parallelism().empty() && !parts->parallelism.empty() &&
      parts->parallelism != doc.parallelism()) {
    return absl::InvalidArgumentError(util::StrCat(where, ": its parallelism '", parts->parallelism,
                                                   "' is not this file's (", doc.parallelism(),
                                                   ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckEdit(const Document& doc, const EntryEdit& edit, bool created) {
  const std::string where = util::StrCat(doc.path(), ": entry '", edit.key, "'");
  if (edit.create) {
    if (auto status = CheckNewKey(doc, edit.key); !status.ok()) return status;
    if (edit.arch) {
      return absl::InvalidArgumentError(util::StrCat(
          where,
          ": a created entry cannot have arch_overrides in the same batch (create it, then "
          "edit arch '",
          *edit.arch, "' in another batch)"));
    }
    if (!edit.del.empty()) {
      return absl::InvalidArgumentError(
          util::StrCat(where, ": a created entry has no fields to delete"));
    }
    if (edit.set.empty()) {
      return absl::InvalidArgumentError(
          util::StrCat(where, ": a created entry needs at least one field to set"));
    }
  } else if (created) {
    if (!edit.arch || !edit.del.empty() || edit.set.empty()) {
      return absl::InvalidArgumentError(util::StrCat(
          where,
          " is created by this batch: give its top-level fields in its create edit, and only "
          "fields to set in an arch's edit (its arch_overrides)"));
    }
  } else if (doc.Find(edit.key) == nullptr) {
    return absl::NotFoundError(util::StrCat(doc.path(), ": no entry '", edit.key, "'"));
  }
  if (edit.arch && !IsKnownArch(*edit.arch)) {
    return absl::InvalidArgumentError(util::StrCat(where, ": unknown arch '", *edit.arch, "'"));
  }
  std::map<std::string, int> seen;
  for (const auto& [name, value] : edit.set) {
    if (FindField(name) == nullptr) {
      return absl::InvalidArgumentError(util::StrCat(where, ": unknown field '", name, "'"));
    }
    if (name == "arch_overrides") {
      return absl::InvalidArgumentError(util::StrCat(
          where, ": set fields inside arch_overrides with \"arch\", not arch_overrides itself"));
    }
    if (++seen[name] > 1) {
      return absl::InvalidArgumentError(util::StrCat(where, ": field '", name, "' set twice"));
    }
    std::vector<ValueProblem> problems;
    CheckField(name, value, edit.arch.has_value(), problems);
    if (!problems.empty()) {
      return absl::InvalidArgumentError(util::StrCat(where, ": ", problems.front().message));
    }
  }
  for (const auto& name : edit.del) {
    if (FindField(name) == nullptr) {
      return absl::InvalidArgumentError(util::StrCat(where, ": unknown field '", name, "'"));
    }
    if (seen.count(name) > 0) {
      return absl::InvalidArgumentError(
          util::StrCat(where, ": field '", name, "' is both set and deleted"));
    }
  }
  std::set<std::string, std::less<>> commented;
  for (const auto& [name, text] : edit.comments) {
    const std::string field = util::StrCat(where, ": comment on field '", name, "'");
    if (seen.count(name) == 0) {
      return absl::InvalidArgumentError(
          util::StrCat(field, ": the edit does not set that field (a comment goes with a value)"));
    }
    if (!commented.insert(name).second) {
      return absl::InvalidArgumentError(util::StrCat(field, ": given twice"));
    }
    if (std::any_of(text.begin(), text.end(), [](char c) {
          return static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f;
        })) {
      return absl::InvalidArgumentError(
          util::StrCat(field, ": the text must be one line without control characters, got ",
                       DoubleQuote(text)));
    }
    if (util::FirstInvalidUtf8(text)) {
      return absl::InvalidArgumentError(util::StrCat(field, ": the text is not valid UTF-8"));
    }
    if (util::TrimWhitespace(text).empty()) {
      return absl::InvalidArgumentError(util::StrCat(field, ": the text is empty"));
    }
  }
  return absl::OkStatus();
}

}  // namespace triage::inventory::edit_internal
