#pragma once

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/inventory/document.h"
#include "common/inventory/value.h"

namespace triage::inventory {

// One entry's field changes. arch set: the fields of arch_overrides.<arch> (created when
// missing, removed when left empty) instead of the top-level fields.
struct EntryEdit {
  std::string key;
  std::optional<std::string> arch;
  std::vector<std::pair<std::string, Value>> set;
  std::vector<std::string> del;
  // Trailing comments, field name -> text without the '#', each for a field in `set` of this
  // edit: the field's line is written `name: value # text` (one space, '#', one space, the text
  // with its surrounding spaces trimmed), replacing the inline comment the line had. A field set
  // without a comment keeps its inline comment. The text is one line of UTF-8 without control
  // characters, and not empty.
  std::vector<std::pair<std::string, std::string>> comments = {};
  // Adds the entry, which the file must not have yet, with the fields of `set` in that order
  // (no `arch`, no `del`). New entries are appended after the last entry of the root mapping, in
  // the file's style (see docs/inventory.md, "New entries"), in the order of the batch. Other
  // edits of a created key in the same batch give its arch_overrides: each names an arch and
  // only sets fields; they are written under the top-level fields, one block per arch.
  bool create = false;
};

// Applies a batch of edits to a document and returns the new file contents. Only the lines of
// the edited entries change; everything else (comments, blank lines, quoting, order, flow vs
// block lists) is byte-identical. Existing fields are rewritten in place (an inline comment
// after a single-line value is kept); new fields go where tt-xla's landed sweeps put them:
// right after `status`, so rewritten entries read `status, bringup_status, reason` or
// `status, assert_pcc`. Reasons are always written double-quoted and escaped.
//
// All or nothing: an invalid edit (unknown key, field or arch, a value of the wrong type, a
// field both set and deleted, a comment on a field the edit does not set, a created key that
// exists, a document with errors) fails the whole batch. The result is re-parsed and checked
// against the intended changes (fields, created entries, comments) before it is returned.
absl::StatusOr<std::string> ApplyEdits(const Document& doc, std::span<const EntryEdit> edits);

// What ApplyEdits knows besides the new text, for callers that need it (the merge): the
// re-parsed new document, and the replaced line ranges (old [old_first, old_end) became new
// [new_first, new_end), 0-based, in file order). Created entries are one pure insertion
// (old_first == old_end), unless the file lacked its final newline and they follow its last
// line: then that line is part of the block (it gains the newline).
struct EditDetail {
  struct Block {
    int old_first = 0;
    int old_end = 0;
    int new_first = 0;
    int new_end = 0;
  };
  std::optional<Document> after;
  std::vector<Block> blocks;
};
absl::StatusOr<std::string> ApplyEdits(const Document& doc, std::span<const EntryEdit> edits,
                                       EditDetail* detail);

// Renders a string as a YAML double-quoted scalar: ", \ and control characters escaped, UTF-8
// kept as is.
std::string DoubleQuote(std::string_view s);

}  // namespace triage::inventory
