#pragma once

// Pieces of the in-place editor (editor.h) in files of their own: reading a field's value and
// comment off its line, and checking an edit before any text is touched. Internal to
// ApplyEdits.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/inventory/document.h"
#include "common/inventory/editor.h"
#include "common/inventory/value.h"

namespace triage::inventory::edit_internal {

// entry_lines.cc: a field's line.

// New fields go where tt-xla's landed sweeps put them: right after `status`, as one block in
// this order (so rewritten entries read `status, bringup_status, reason` or
// `status, assert_pcc`); a new reason follows an existing bringup_status; other fields go last.
inline constexpr std::string_view kInsertOrder[] = {"status", "bringup_status", "reason",
                                                    "assert_pcc", "markers"};
// A field's place in kInsertOrder; the others after it.
int InsertRank(std::string_view name);
// End (exclusive) of the value starting at line[i], or npos when it does not end on the line.
std::size_t ValueEnd(std::string_view line, std::size_t i);
// The same for the value of `name:` at key_col.
std::size_t ValueEndOnKeyLine(std::string_view line, int key_col, std::string_view name);
// The " # comment" after a single-line value, or "".
std::string InlineComment(std::string_view line, int key_col, std::string_view name);
// The trailer a comment text is written as: " # text", the text's surrounding spaces trimmed.
std::string CommentTrailer(std::string_view text);
// A trailer that replaces old_comment (an InlineComment), with the links (http:// and https://
// words: a tracking issue a person wrote there) of the old comment that it does not carry
// appended, so a rewritten comment never loses one.
std::string WithKeptLinks(std::string_view trailer, std::string_view old_comment);
// Whether got is trailer, or trailer followed by links only (WithKeptLinks's result).
bool IsTrailerWithLinks(std::string_view got, std::string_view trailer);
const std::string* FindComment(const std::vector<std::pair<std::string, std::string>>& comments,
                               std::string_view name);
// Whether a string can be written as a plain scalar and read back as the same string.
bool PlainSafe(std::string_view s);

// edit_check.cc: an edit against the document, before any text changes.

// Content equality of two values where mappings compare as sets of keys.
bool SameContent(const Value& a, const Value& b);
// The edit applied to the entry's parsed value (what the rewritten text must parse back to).
void ApplyLogically(Value& entry, const EntryEdit& edit);
// The key of an entry to create: one line of UTF-8, of this file's grammar.
absl::Status CheckNewKey(const Document& doc, const std::string& key);
// Whether the edit may be applied to doc: known fields, types, archs, keys. created: the edit
// gives an arch's override of an entry its batch creates.
absl::Status CheckEdit(const Document& doc, const EntryEdit& edit, bool created = false);

}  // namespace triage::inventory::edit_internal
