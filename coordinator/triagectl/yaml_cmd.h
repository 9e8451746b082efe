#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/inventory/editor.h"

namespace triage::ctl {

struct YamlEditOptions {
  std::string file;
  std::string edits;  // path of EDITS.json ("-" = standard input)
  bool diff = false;  // print the unified diff, write nothing
};

// `triagectl yaml edit FILE --edits EDITS.json [--diff]`. EDITS.json is an array of
//   {"key": str, "arch": str|null, "set": {field: value}, "delete": [field],
//    "comments": {field: text}, "create": bool}
// (comments, create: EntryEdit's; both optional). All edits apply or none do; the file is
// replaced atomically.
// Reads EDITS.json's text (the format above); source names it in messages. Checks the shape and
// the value types only: which keys, fields and archs exist is ApplyEdits' business.
absl::StatusOr<std::vector<inventory::EntryEdit>> ParseEdits(const std::string& text,
                                                             const std::string& source);

int RunYamlEdit(const YamlEditOptions& options, std::istream& in, std::ostream& out,
                std::ostream& err);

}  // namespace triage::ctl
