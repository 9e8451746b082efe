#pragma once

#include <ostream>
#include <string>

namespace triage::ctl {

struct YamlEditOptions {
  std::string file;
  std::string edits;  // path of EDITS.json ("-" = standard input)
  bool diff = false;  // print the unified diff, write nothing
};

// `triagectl yaml edit FILE --edits EDITS.json [--diff]`. EDITS.json is an array of
//   {"key": str, "arch": str|null, "set": {field: value}, "delete": [field]}
// All edits apply or none do; the file is replaced atomically.
int RunYamlEdit(const YamlEditOptions& options, std::istream& in, std::ostream& out,
                std::ostream& err);

}  // namespace triage::ctl
