#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/inventory/document.h"
#include "common/util/diagnostic.h"

namespace triage::inventory {

inline constexpr std::string_view kTestConfigDir = "tests/runner/test_config";

// What a source lists below a folder: the files to read, and what it refuses to read there.
struct Listing {
  std::vector<std::string> files;  // relative to the root, sorted
  // Each refused path (relative to the root) with the reason: a symbolic link that leaves the
  // repository or points nowhere, a FIFO, socket or device named like a file to read, ...
  std::vector<std::pair<std::string, std::string>> refused;
};

// Reads the files of a tt-xla tree. The working tree is one source; a git commit is another
// (so a sweep reads what was committed, not what the checkout holds later).
class FileSource {
 public:
  virtual ~FileSource() = default;
  // The regular files below dir whose name ends in suffix. Symbolic links are followed only
  // while they stay inside the repository.
  virtual absl::StatusOr<Listing> List(std::string_view dir, std::string_view suffix) const = 0;
  // NotFound when nothing is at path; FailedPrecondition when path is not a regular file inside
  // the repository (any more).
  virtual absl::StatusOr<std::string> Read(std::string_view path, std::size_t max_bytes) const = 0;
  // For messages: "/path/to/tt-xla" or "/path/to/tt-xla@<sha>".
  virtual std::string Describe() const = 0;
};

class WorkTreeSource : public FileSource {
 public:
  explicit WorkTreeSource(std::filesystem::path root) : root_(std::move(root)) {}
  absl::StatusOr<Listing> List(std::string_view dir, std::string_view suffix) const override;
  absl::StatusOr<std::string> Read(std::string_view path, std::size_t max_bytes) const override;
  std::string Describe() const override { return root_.string(); }

 private:
  std::filesystem::path root_;
};

struct LoadOptions {
  std::size_t max_file_bytes = kDefaultMaxYamlBytes;
};

// Every test-config YAML of a checkout, parsed and validated, plus the checks that span files
// (a key defined in two files of one framework: tt-xla silently keeps the later one).
struct Inventory {
  std::vector<Document> documents;  // sorted by path
  std::vector<util::Diagnostic> diagnostics;
  // The checkout's key grammar, read from its runner (kRunnerPath); every document's keys were
  // parsed with it.
  KeyGrammar grammar = DefaultKeyGrammar();

  bool ok() const { return !util::HasErrors(diagnostics); }

  struct EntryRef {
    const Document* document;
    const Entry* entry;
  };
  // Test entries of every file (placeholders excluded), in path then file order.
  std::vector<EntryRef> TestEntries() const;
  const Document* FindDocument(std::string_view path) const;
};

// Fails only when the tree has no test-config directory or a file cannot be read; validation
// problems are diagnostics in the result. The key grammar is the runner's (kRunnerPath, read
// through the same source) when it has one; DefaultKeyGrammar() when there is no runner, and
// also, with a warning naming the runner's line, when its grammar cannot be read.
absl::StatusOr<Inventory> LoadInventory(const FileSource& source, const LoadOptions& options = {});

}  // namespace triage::inventory
