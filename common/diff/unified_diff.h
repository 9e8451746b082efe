#pragma once

#include <span>
#include <string>
#include <string_view>

namespace triage::diff {

struct DiffOptions {
  int context = 3;
  // Above this many differing lines the middle of the file is emitted as one replace hunk
  // instead of a minimal edit script (still correct, just not minimal), bounding memory.
  int max_edit_distance = 20000;
  // An `index <old blob>..<new blob>` line after "diff --git": `git apply --3way` finds the
  // preimage by it when the file moved on since.
  bool index_line = false;
  // UnifiedDiffOfRegions only: one hunk per region that changed, whose leading context (at most
  // `context` lines) stays inside its region and whose trailing context is `trailing_context`
  // lines; hunks never share a line. With a region per YAML entry, an upstream edit of one entry
  // breaks only its own hunk (docs/report.md, "The patches").
  bool hunk_per_region = false;
  int trailing_context = 1;
};

// A git-style unified diff of one file ("diff --git a/P b/P", "--- a/P", "+++ b/P", hunks) that
// `git apply` accepts against old_text. Empty when the texts are equal. old_text empty with
// old_exists=false renders a new file (--- /dev/null); new_exists=false a deleted file.
std::string UnifiedDiff(std::string_view path, std::string_view old_text, std::string_view new_text,
                        const DiffOptions& options = {}, bool old_exists = true,
                        bool new_exists = true);

// Where two texts differ, when the caller knows it: old lines [old_begin, old_end) became new
// lines [new_begin, new_end) (0-based line indexes).
struct Region {
  int old_begin = 0;
  int old_end = 0;
  int new_begin = 0;
  int new_end = 0;
};

// UnifiedDiff when the changed regions are known (sorted, disjoint): only the regions are
// compared line by line, so scattered small changes in a long file cost their own size rather
// than the file's. The lines outside the regions are checked to be equal and in step; when they
// are not, this falls back to UnifiedDiff. git apply accepts the result against old_text.
std::string UnifiedDiffOfRegions(std::string_view path, std::string_view old_text,
                                 std::string_view new_text, std::span<const Region> regions,
                                 const DiffOptions& options = {});

}  // namespace triage::diff
