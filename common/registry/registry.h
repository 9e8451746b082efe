#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace triage::registry {

// tt-forge-models keeps a class-name registry in training_utils.py:
//   _register_attr("CausalLMOutputWithPast", "logits")
// A line is global: it changes unpack_forward_output for every model returning that class.
inline constexpr std::string_view kTrainingUtilsPath =
    "third_party/tt_forge_models/training_utils.py";

struct Registration {
  std::string cls;
  std::string attr;  // "" for a _register_handler(...) line (a custom handler function)
  int line = 0;      // 0-based
};

// A Python identifier ([A-Za-z_][A-Za-z0-9_]*): class and attribute names from probes and
// results go into Python source only when they pass this.
bool IsIdentifier(std::string_view s);

class RegistryFile {
 public:
  static absl::StatusOr<RegistryFile> Parse(std::string path, std::string text);

  const std::string& path() const { return path_; }
  const std::vector<Registration>& registrations() const { return registrations_; }
  const Registration* Find(std::string_view cls) const;

  // Adds `_register_attr("cls", "attr")` at the sorted position the file uses (its existing
  // lines are sorted case-insensitively in tt-forge-models). Adding the same line again is a
  // no-op; a different handler for a registered class is refused (AlreadyExists), as the
  // registry itself raises "Handler for X already exists".
  absl::Status Add(std::string_view cls, std::string_view attr);
  // Removes the registration of cls (NotFound when there is none).
  absl::Status Remove(std::string_view cls);

  std::string Text() const;
  // Unified diff from the parsed text to the current one ("" when unchanged).
  std::string Diff() const;

 private:
  void Reindex();

  std::string path_;
  std::string original_;
  std::vector<std::string> lines_;
  bool final_newline_ = true;
  std::vector<Registration> registrations_;
};

// 1-based line of a `def unpack_forward_output(` method in a loader, if it has one.
std::optional<int> FindUnpackOverride(std::string_view loader_text);

}  // namespace triage::registry
