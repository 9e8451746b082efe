#pragma once

#include <string>
#include <string_view>

namespace triage::diff {

struct DiffOptions {
  int context = 3;
  // Above this many differing lines the middle of the file is emitted as one replace hunk
  // instead of a minimal edit script (still correct, just not minimal), bounding memory.
  int max_edit_distance = 20000;
};

// A git-style unified diff of one file ("diff --git a/P b/P", "--- a/P", "+++ b/P", hunks) that
// `git apply` accepts against old_text. Empty when the texts are equal. old_text empty with
// old_exists=false renders a new file (--- /dev/null); new_exists=false a deleted file.
std::string UnifiedDiff(std::string_view path, std::string_view old_text, std::string_view new_text,
                        const DiffOptions& options = {}, bool old_exists = true,
                        bool new_exists = true);

}  // namespace triage::diff
