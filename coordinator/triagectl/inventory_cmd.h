#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace triage::inventory {
struct Inventory;
}

namespace triage::ctl {

// Exit codes shared by every triagectl command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitProblems = 1;  // validation problems, refused edits
inline constexpr int kExitUsage = 2;     // bad arguments, unreadable input

struct InventoryOptions {
  std::string repo;
  std::size_t max_file_bytes = 8 * 1024 * 1024;
  std::string rules;             // classify: a rules file ("" = built-in rules)
  std::string output = "table";  // classify: table | json
  bool matched_only = false;     // classify: only entries a playbook handles
};

// The checkout's working tree as the inventory commands read it (--repo, --max-file-bytes).
absl::StatusOr<inventory::Inventory> LoadWorkTree(const InventoryOptions& options);
// s cut to at most n bytes at a UTF-8 boundary, "..." marking the cut: a table cell.
std::string ClipCell(std::string_view s, std::size_t n);

// `triagectl inventory check`: every problem as file:line:col: message; 0 when clean.
int RunInventoryCheck(const InventoryOptions& options, std::ostream& out, std::ostream& err);
// `triagectl inventory classify`: per entry file, key, status, bringup_status, reason,
// playbook, flavor, loader.
int RunInventoryClassify(const InventoryOptions& options, std::ostream& out, std::ostream& err);
// `triagectl inventory rules`: the built-in rules as YAML, to start a custom rules file.
int RunInventoryRules(std::ostream& out);

}  // namespace triage::ctl
