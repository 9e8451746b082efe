#include "common/diff/unified_diff.h"

#include <algorithm>
#include <vector>

#include "common/diff/blob_id.h"
#include "common/util/strings.h"

namespace triage::diff {
namespace {

// A line with its terminator state: the last line of a file may lack '\n', and such a line is
// different from the same text followed by '\n'.
struct Line {
  std::string_view text;
  bool newline = true;
  bool operator==(const Line& o) const { return newline == o.newline && text == o.text; }
};

std::vector<Line> Split(std::string_view s) {
  std::vector<Line> out;
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) {
      out.push_back({s.substr(start), false});
      break;
    }
    out.push_back({s.substr(start, nl - start), true});
    start = nl + 1;
  }
  return out;
}

enum class Op { kEqual, kDelete, kInsert };
struct Edit {
  Op op;
  int a;  // index into old (kEqual, kDelete)
  int b;  // index into new (kEqual, kInsert)
};

// Myers' O((N+M)D) greedy algorithm on [a0,a1) x [b0,b1); appends the edit script.
// Returns false when the edit distance exceeds max_d.
bool Myers(const std::vector<Line>& a, int a0, int a1, const std::vector<Line>& b, int b0, int b1,
           int max_d, std::vector<Edit>& out) {
  const int n = a1 - a0, m = b1 - b0;
  const int max = n + m;
  const int limit = std::min(max, max_d);
  const int offset = max + 1;
  std::vector<int> v(2 * max + 3, 0);
  std::vector<std::vector<int>> trace;
  int found_d = -1;
  for (int d = 0; d <= limit; ++d) {
    trace.emplace_back(v.begin() + offset - d - 1, v.begin() + offset + d + 2);
    for (int k = -d; k <= d; k += 2) {
      int x;
      if (k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1])) {
        x = v[offset + k + 1];
      } else {
        x = v[offset + k - 1] + 1;
      }
      int y = x - k;
      while (x < n && y < m && a[a0 + x] == b[b0 + y]) {
        ++x;
        ++y;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        found_d = d;
        break;
      }
    }
    if (found_d >= 0) break;
  }
  if (found_d < 0) return false;

  // Backtrack through the saved V arrays. trace[d] holds V before step d, for k in [-d-1, d+1].
  std::vector<Edit> rev;
  int x = n, y = m;
  for (int d = found_d; d > 0; --d) {
    const std::vector<int>& pv = trace[d];
    auto at = [&](int k) { return pv[k + d + 1]; };
    int k = x - y;
    int prev_k;
    if (k == -d || (k != d && at(k - 1) < at(k + 1))) {
      prev_k = k + 1;
    } else {
      prev_k = k - 1;
    }
    int prev_x = at(prev_k);
    int prev_y = prev_x - prev_k;
    while (x > prev_x && y > prev_y) {
      --x;
      --y;
      rev.push_back({Op::kEqual, a0 + x, b0 + y});
    }
    if (x == prev_x) {
      --y;
      rev.push_back({Op::kInsert, a0 + x, b0 + y});
    } else {
      --x;
      rev.push_back({Op::kDelete, a0 + x, b0 + y});
    }
  }
  while (x > 0 && y > 0) {
    --x;
    --y;
    rev.push_back({Op::kEqual, a0 + x, b0 + y});
  }
  out.insert(out.end(), rev.rbegin(), rev.rend());
  return true;
}

void AppendLine(std::string& out, char tag, const Line& line) {
  out.push_back(tag);
  out.append(line.text);
  out.push_back('\n');
  if (!line.newline) out.append("\\ No newline at end of file\n");
}

std::string Range(int start, int count) {
  // Unified diff convention: an empty range is written as the line before it.
  if (count == 0) return util::StrCat(start, ",0");
  if (count == 1) return util::StrCat(start + 1);
  return util::StrCat(start + 1, ",", count);
}

// Hunks as [begin, end) ranges of edit indexes, context included.
struct Span {
  int begin = 0;
  int end = 0;
};

// The usual hunks: context lines around each change, and changes within 2*context equal lines of
// each other in one hunk.
std::vector<Span> ContextSpans(const std::vector<Edit>& edits, int ctx) {
  std::vector<Span> spans;
  const int total = static_cast<int>(edits.size());
  int i = 0;
  while (i < total) {
    while (i < total && edits[i].op == Op::kEqual) ++i;
    if (i >= total) break;
    int start = std::max(0, i - ctx);
    int end = i;
    while (true) {
      while (end < total && edits[end].op != Op::kEqual) ++end;
      int run = 0;
      while (end + run < total && edits[end + run].op == Op::kEqual) ++run;
      if (end + run >= total || run > 2 * ctx) {
        end = std::min(total, end + std::min(run, ctx));
        break;
      }
      end += run;
    }
    spans.push_back({start, end});
    i = end;
  }
  return spans;
}

// One hunk per region with a change (regions: [begin, end) edit ranges, in order). Leading
// context stays inside the region, at most ctx lines; trailing context is `trailing` lines after
// the last change (fewer at the end of the file). No two hunks share a line: the earlier hunk's
// trailing context comes first. A hunk that would have no context at all takes the line before
// it when that line is free (git apply anchors a context-free hunk only at the file's ends).
std::vector<Span> RegionSpans(const std::vector<Edit>& edits, const std::vector<Span>& regions,
                              int ctx, int trailing) {
  struct Change {
    int region_begin, first, last;
  };
  std::vector<Change> changes;
  for (const Span& r : regions) {
    int first = -1, last = -1;
    for (int k = r.begin; k < r.end; ++k) {
      if (edits[k].op == Op::kEqual) continue;
      if (first < 0) first = k;
      last = k;
    }
    if (first < 0) continue;
    // A change right after the previous one could not have trailing context: one hunk.
    if (!changes.empty() && changes.back().last + 1 == first) {
      changes.back().last = last;
    } else {
      changes.push_back({r.begin, first, last});
    }
  }
  std::vector<Span> spans;
  const int total = static_cast<int>(edits.size());
  int used = 0;  // edits before this index belong to an earlier hunk
  for (std::size_t h = 0; h < changes.size(); ++h) {
    const Change& c = changes[h];
    const int next_first = h + 1 < changes.size() ? changes[h + 1].first : total;
    int begin = std::max({c.first - ctx, c.region_begin, used});
    int end = std::min(c.last + 1 + trailing, next_first);
    if (begin == c.first && end == c.last + 1 && c.first > used) --begin;
    spans.push_back({begin, end});
    used = end;
  }
  return spans;
}

// The git-style header (with an index line naming both blobs when asked) and the given hunks of
// an edit script over a and b.
std::string Render(std::string_view path, std::string_view old_text, std::string_view new_text,
                   const std::vector<Line>& a, const std::vector<Line>& b,
                   const std::vector<Edit>& edits, const std::vector<Span>& spans,
                   const DiffOptions& options, bool old_exists, bool new_exists) {
  std::string out;
  util::StrAppend(&out, "diff --git a/", path, " b/", path, "\n");
  if (!old_exists) util::StrAppend(&out, "new file mode 100644\n");
  if (!new_exists) util::StrAppend(&out, "deleted file mode 100644\n");
  if (options.index_line) {
    util::StrAppend(&out, "index ", old_exists ? GitBlobId(old_text) : std::string(kNullBlobId),
                    "..", new_exists ? GitBlobId(new_text) : std::string(kNullBlobId), "\n");
  }
  util::StrAppend(&out, "--- ", old_exists ? util::StrCat("a/", path) : "/dev/null", "\n");
  util::StrAppend(&out, "+++ ", new_exists ? util::StrCat("b/", path) : "/dev/null", "\n");

  for (const Span& span : spans) {
    const int start = span.begin, end = span.end;
    int old_start = -1, new_start = -1, old_count = 0, new_count = 0;
    for (int k = start; k < end; ++k) {
      const Edit& e = edits[k];
      if (e.op != Op::kInsert) {
        if (old_start < 0) old_start = e.a;
        ++old_count;
      }
      if (e.op != Op::kDelete) {
        if (new_start < 0) new_start = e.b;
        ++new_count;
      }
    }
    if (old_start < 0) old_start = edits[start].a;
    if (new_start < 0) new_start = edits[start].b;
    util::StrAppend(&out, "@@ -", Range(old_start, old_count), " +", Range(new_start, new_count),
                    " @@\n");
    for (int k = start; k < end; ++k) {
      const Edit& e = edits[k];
      switch (e.op) {
        case Op::kEqual:
          AppendLine(out, ' ', a[e.a]);
          break;
        case Op::kDelete:
          AppendLine(out, '-', a[e.a]);
          break;
        case Op::kInsert:
          AppendLine(out, '+', b[e.b]);
          break;
      }
    }
  }
  return out;
}

}  // namespace

std::string UnifiedDiff(std::string_view path, std::string_view old_text, std::string_view new_text,
                        const DiffOptions& options, bool old_exists, bool new_exists) {
  if (old_text == new_text && old_exists == new_exists) return "";
  const std::vector<Line> a = Split(old_text);
  const std::vector<Line> b = Split(new_text);
  const int n = static_cast<int>(a.size()), m = static_cast<int>(b.size());

  int prefix = 0;
  while (prefix < n && prefix < m && a[prefix] == b[prefix]) ++prefix;
  int suffix = 0;
  while (suffix < n - prefix && suffix < m - prefix && a[n - 1 - suffix] == b[m - 1 - suffix]) {
    ++suffix;
  }

  std::vector<Edit> edits;
  edits.reserve(static_cast<std::size_t>(n + m));
  for (int i = 0; i < prefix; ++i) edits.push_back({Op::kEqual, i, i});
  if (!Myers(a, prefix, n - suffix, b, prefix, m - suffix, options.max_edit_distance, edits)) {
    for (int i = prefix; i < n - suffix; ++i) edits.push_back({Op::kDelete, i, prefix});
    for (int j = prefix; j < m - suffix; ++j) edits.push_back({Op::kInsert, n - suffix, j});
  }
  for (int i = 0; i < suffix; ++i) edits.push_back({Op::kEqual, n - suffix + i, m - suffix + i});

  return Render(path, old_text, new_text, a, b, edits,
                ContextSpans(edits, std::max(0, options.context)), options, old_exists, new_exists);
}

std::string UnifiedDiffOfRegions(std::string_view path, std::string_view old_text,
                                 std::string_view new_text, std::span<const Region> regions,
                                 const DiffOptions& options) {
  if (old_text == new_text) return "";
  const std::vector<Line> a = Split(old_text);
  const std::vector<Line> b = Split(new_text);
  const int n = static_cast<int>(a.size()), m = static_cast<int>(b.size());
  std::vector<Edit> edits;
  edits.reserve(static_cast<std::size_t>(n + m));
  int i = 0, j = 0;
  bool in_step = true;
  std::vector<Span> region_edits;
  for (const Region& r : regions) {
    if (r.old_begin < i || r.new_begin < j || r.old_end < r.old_begin || r.new_end < r.new_begin ||
        r.old_end > n || r.new_end > m || r.old_begin - i != r.new_begin - j) {
      in_step = false;
      break;
    }
    for (; i < r.old_begin; ++i, ++j) {
      if (!(a[i] == b[j])) break;
      edits.push_back({Op::kEqual, i, j});
    }
    if (i != r.old_begin) {
      in_step = false;
      break;
    }
    const int region_begin = static_cast<int>(edits.size());
    if (!Myers(a, r.old_begin, r.old_end, b, r.new_begin, r.new_end, options.max_edit_distance,
               edits)) {
      for (int k = r.old_begin; k < r.old_end; ++k) edits.push_back({Op::kDelete, k, r.new_begin});
      for (int k = r.new_begin; k < r.new_end; ++k) edits.push_back({Op::kInsert, r.old_end, k});
    }
    region_edits.push_back({region_begin, static_cast<int>(edits.size())});
    i = r.old_end;
    j = r.new_end;
  }
  if (in_step && n - i == m - j) {
    for (; i < n; ++i, ++j) {
      if (!(a[i] == b[j])) break;
      edits.push_back({Op::kEqual, i, j});
    }
  }
  if (!in_step || i != n || j != m) return UnifiedDiff(path, old_text, new_text, options);
  const int ctx = std::max(0, options.context);
  return Render(path, old_text, new_text, a, b, edits,
                options.hunk_per_region
                    ? RegionSpans(edits, region_edits, ctx, std::max(0, options.trailing_context))
                    : ContextSpans(edits, ctx),
                options, true, true);
}

}  // namespace triage::diff
