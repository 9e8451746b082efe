#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace triage::diff {

// One file's part of a (possibly multi-file) git-style unified diff.
struct FileDiff {
  std::string old_path;  // without a/ ("" for /dev/null: a new file)
  std::string new_path;  // without b/ ("" for /dev/null: a deleted file)
  std::string text;      // this file's headers and hunks
  std::string path() const { return new_path.empty() ? old_path : new_path; }
};

// Splits a diff at its "diff --git" / "--- " file headers.
absl::StatusOr<std::vector<FileDiff>> SplitDiff(std::string_view diff);

// One hunk of a file's diff.
struct Hunk {
  int old_start = 0;
  int old_count = 0;
  int new_start = 0;
  int new_count = 0;
  std::string header;              // "@@ -a,b +c,d @@ ..." as written
  std::vector<std::string> lines;  // ' ', '-', '+' lines and "\ No newline" markers, as written
  std::string Text() const;        // the header and the lines, each ending in '\n'
};

// The hunks of one file's diff, in order (the file headers before the first hunk are skipped).
// A hunk ends when its line counts are reached. Errors: a malformed header, a line that is not
// context, removal or addition inside a hunk.
absl::StatusOr<std::vector<Hunk>> ParseHunks(const FileDiff& diff);

// Applies one file's unified diff to its original text, strictly: every hunk's context and
// removed lines must match where the hunk says (after earlier hunks' shifts), like `git apply`
// without fuzz. An error names the hunk and the line that did not match.
absl::StatusOr<std::string> ApplyFileDiff(std::string_view original, const FileDiff& diff);

// A window of lines [begin, end) (0-based, in the text as it was before any hunk was applied)
// where a hunk's preimage must lie entirely; the default is the whole file.
struct LineWindow {
  int begin = 0;
  int end = 1 << 30;
  // The window's end in the text the diff was made from, or -1. When a hunk's changes end there
  // (its trailing context is the next window's first line), the hunk may match without its
  // trailing context, ending where this window ends: a line added after the window does not
  // break it.
  int old_end = -1;
};

// Where each hunk of ApplyHunksNear went.
struct HunkPlacement {
  bool applied = false;
  int line = 0;     // 1-based line of the text where its preimage started (applied)
  std::string why;  // not applied: what did not match
};

struct PartialApply {
  std::string text;
  std::vector<HunkPlacement> hunks;  // one per hunk, in order
};

// Applies hunks (of one file, in file order) to a text that may have moved on since the diff was
// made, each where its preimage (context and removed lines, exactly) matches nearest to where
// the diff says, shifted by the hunks applied before it, and below the previous applied hunk, as
// `git apply` places hunks without fuzz: a hunk that starts at line 1 must match at the top, one
// without trailing context at the end. A hunk that matches nowhere
// (or nowhere inside its window, when windows has one per hunk) is left out and the others are
// still applied: the caller decides whether a partial result is usable.
PartialApply ApplyHunksNear(std::string_view text, const std::vector<Hunk>& hunks,
                            const std::vector<LineWindow>& windows = {});

}  // namespace triage::diff
