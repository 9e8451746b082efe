#pragma once

#include <string>
#include <vector>

namespace triage::util {

enum class Severity { kError, kWarning };

// One problem found in an input file. Lines and columns are 1-based, as editors and compilers
// print them; 0 means "whole file" (line) or "whole line" (column).
struct Diagnostic {
  std::string file;
  int line = 0;
  int col = 0;
  Severity severity = Severity::kError;
  std::string message;
  // The test-config entry an error is confined to ("": the whole file). Such an error keeps
  // that entry out of a sweep and leaves the file's other entries to it.
  std::string key = {};

  // "file:line:col: message" (warnings: "file:line:col: warning: message").
  std::string ToString() const;
};

bool HasErrors(const std::vector<Diagnostic>& diagnostics);
int CountErrors(const std::vector<Diagnostic>& diagnostics);

// Sorts by file, line, column (stable for equal positions) so output is deterministic.
void SortDiagnostics(std::vector<Diagnostic>& diagnostics);

}  // namespace triage::util
