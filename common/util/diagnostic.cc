#include "common/util/diagnostic.h"

#include <algorithm>
#include <tuple>

#include "common/util/strings.h"

namespace triage::util {

std::string Diagnostic::ToString() const {
  std::string out = file;
  if (line > 0) {
    StrAppend(&out, ":", line);
    if (col > 0) StrAppend(&out, ":", col);
  }
  StrAppend(&out, ": ", severity == Severity::kWarning ? "warning: " : "", message);
  return out;
}

bool HasErrors(const std::vector<Diagnostic>& diagnostics) { return CountErrors(diagnostics) > 0; }

int CountErrors(const std::vector<Diagnostic>& diagnostics) {
  return static_cast<int>(std::count_if(diagnostics.begin(), diagnostics.end(), [](const auto& d) {
    return d.severity == Severity::kError;
  }));
}

void SortDiagnostics(std::vector<Diagnostic>& diagnostics) {
  std::stable_sort(diagnostics.begin(), diagnostics.end(), [](const auto& a, const auto& b) {
    return std::tie(a.file, a.line, a.col) < std::tie(b.file, b.line, b.col);
  });
}

}  // namespace triage::util
