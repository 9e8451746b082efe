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
};

// Applies a batch of edits to a document and returns the new file contents. Only the lines of
// the edited entries change; everything else (comments, blank lines, quoting, order, flow vs
// block lists) is byte-identical. Existing fields are rewritten in place (an inline comment
// after a single-line value is kept); new fields go where tt-xla's landed sweeps put them:
// right after `status`, so rewritten entries read `status, bringup_status, reason` or
// `status, assert_pcc`. Reasons are always written double-quoted and escaped.
//
// All or nothing: an invalid edit (unknown key, field or arch, a value of the wrong type, a
// field both set and deleted, a document with errors) fails the whole batch. The result is
// re-parsed and checked against the intended changes before it is returned.
absl::StatusOr<std::string> ApplyEdits(const Document& doc, std::span<const EntryEdit> edits);

// What ApplyEdits knows besides the new text, for callers that need it (the merge): the
// re-parsed new document, and the replaced line ranges (old [old_first, old_end) became new
// [new_first, new_end), 0-based, in file order).
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
