#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/inventory/key.h"
#include "common/inventory/value.h"
#include "common/util/diagnostic.h"

namespace triage::inventory {

inline constexpr std::string_view kTestConfigRoot = "test_config";
inline constexpr std::string_view kPlaceholderRoot = "PLACEHOLDER_MODELS";
inline constexpr std::size_t kDefaultMaxYamlBytes = 8 * 1024 * 1024;
// Collections nested deeper than this are refused before they reach the parser's recursion
// (tt-xla's files nest fewer than 10 levels).
inline constexpr std::size_t kMaxNesting = 100;

// One test-config entry: a key under test_config (or PLACEHOLDER_MODELS) and its fields.
struct Entry {
  std::string key;
  SourcePos pos;       // the key
  int first_line = 0;  // 0-based line of the key
  int last_line = 0;   // 0-based, inclusive: the entry's last content line (no trailing
                       // blank lines or comments)
  Value value;         // the entry's mapping, fields in file order (arch_overrides nested)
  std::optional<KeyParts> parts;  // test entries whose key parses
  std::string loader;             // loader path relative to the tt-xla root ("" if unknown)

  const Value* Field(std::string_view name) const { return value.Find(name); }
  // The field's string value, "" when absent or not a string.
  std::string_view StringField(std::string_view name) const;
  // The status NAME (EXPECTED_PASSING, ...); UNSPECIFIED when absent.
  std::string_view Status() const;
  // Per-field resolution: arch_overrides.<arch>.<name> when present, else the top-level field.
  const Value* FieldForArch(std::string_view name, std::string_view arch) const;
  // The names FieldForArch resolves on arch: the top-level fields (arch_overrides aside), then
  // those only the arch's override has, in file order.
  std::vector<std::string> FieldNamesForArch(std::string_view arch) const;
  std::string_view StatusForArch(std::string_view arch) const;
  // Names of the archs with an override, in file order.
  std::vector<std::string> OverrideArchs() const;
};

// The framework of a test-config file by where it sits: the folder under test_config/ ("torch"
// for tests/runner/test_config/torch/...); "" when the path has none. Document::framework().
std::string FrameworkOfPath(std::string_view path);

struct ParseOptions {
  std::size_t max_bytes = kDefaultMaxYamlBytes;
  // The checkout's key grammar (Inventory::grammar); nullptr: DefaultKeyGrammar().
  const KeyGrammar* grammar = nullptr;
};

// One parsed and validated test-config YAML file. Parsing never throws: every problem is a
// diagnostic with file:line:col, and a document with errors must not be written back.
class Document {
 public:
  // path: as it should appear in messages and patches (relative to the tt-xla root).
  static Document Parse(std::string path, std::string bytes, const ParseOptions& options = {});

  const std::string& path() const { return path_; }
  const std::string& bytes() const { return *bytes_; }
  const std::vector<util::Diagnostic>& diagnostics() const { return diagnostics_; }
  bool ok() const { return !util::HasErrors(diagnostics_); }

  std::string_view root_key() const { return root_key_; }
  bool is_placeholders() const { return root_key_ == kPlaceholderRoot; }
  // torch, jax or torch_llm: the folder under test_config/ ("" when the path has none).
  const std::string& framework() const { return framework_; }
  // From the file name test_config_<run_mode>_<parallelism>.yaml ("" when it does not say).
  const std::string& run_mode() const { return run_mode_; }
  const std::string& parallelism() const { return parallelism_; }
  // The key grammar the keys were parsed with (ParseOptions::grammar).
  const KeyGrammar& grammar() const { return grammar_ ? *grammar_ : DefaultKeyGrammar(); }

  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* Find(std::string_view key) const;

  int line_count() const { return static_cast<int>(line_starts_.size()); }
  // Line i (0-based) without its '\n'.
  std::string_view Line(int i) const;
  // An entry's lines (first_line..last_line), each ending in '\n'.
  std::string EntryText(const Entry& e) const;
  bool ends_with_newline() const;

 private:
  void AddError(SourcePos pos, std::string message);
  void AddWarning(SourcePos pos, std::string message);
  bool PreCheck(const ParseOptions& options);
  void Build(Value root);
  void CheckEntry(Entry& entry);

  std::string path_;
  std::shared_ptr<const std::string> bytes_;
  std::vector<std::size_t> line_starts_;
  std::vector<util::Diagnostic> diagnostics_;
  std::string root_key_;
  std::string framework_;
  std::string run_mode_;
  std::string parallelism_;
  std::shared_ptr<const KeyGrammar> grammar_;  // nullptr: DefaultKeyGrammar()
  std::vector<Entry> entries_;
};

}  // namespace triage::inventory
