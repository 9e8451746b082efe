#include "common/diff/apply_diff.h"

#include <charconv>

#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::diff {
namespace {

std::string StripAB(std::string_view p) {
  if (auto tab = p.find('\t'); tab != std::string_view::npos) p = p.substr(0, tab);
  if (p == "/dev/null") return "";
  if (p.starts_with("a/") || p.starts_with("b/")) p.remove_prefix(2);
  return std::string(p);
}

bool ParseRange(std::string_view s, int* start, int* count) {
  // "12,3" or "12"
  auto comma = s.find(',');
  std::string_view a = s.substr(0, comma);
  if (std::from_chars(a.data(), a.data() + a.size(), *start).ec != std::errc()) return false;
  *count = 1;
  if (comma != std::string_view::npos) {
    std::string_view b = s.substr(comma + 1);
    if (std::from_chars(b.data(), b.data() + b.size(), *count).ec != std::errc()) return false;
  }
  return true;
}

struct Line {
  std::string text;
  bool newline = true;
};

std::vector<Line> ToLines(std::string_view s) {
  std::vector<Line> out;
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) {
      out.push_back({std::string(s.substr(start)), false});
      break;
    }
    out.push_back({std::string(s.substr(start, nl - start)), true});
    start = nl + 1;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<FileDiff>> SplitDiff(std::string_view diff) {
  std::vector<FileDiff> out;
  FileDiff* cur = nullptr;
  bool saw_git_header = false;
  for (auto line : util::SplitLines(diff)) {
    std::string_view l = line;
    if (l.starts_with("diff --git ")) {
      out.emplace_back();
      cur = &out.back();
      saw_git_header = true;
      std::string_view rest = l.substr(11);
      if (auto sp = rest.find(" b/"); sp != std::string_view::npos) {
        cur->old_path = StripAB(rest.substr(0, sp));
        cur->new_path = StripAB(rest.substr(sp + 1));
      }
    } else if (l.starts_with("--- ") &&
               (cur == nullptr || (!saw_git_header && !cur->text.empty() &&
                                   cur->text.find("\n@@") != std::string::npos))) {
      out.emplace_back();
      cur = &out.back();
    }
    if (cur == nullptr) {
      if (util::TrimWhitespace(l).empty()) continue;
      return absl::InvalidArgumentError(
          util::StrCat("diff: text before the first file header: '", l, "'"));
    }
    if (l.starts_with("--- ")) cur->old_path = StripAB(l.substr(4));
    if (l.starts_with("+++ ")) cur->new_path = StripAB(l.substr(4));
    cur->text.append(l);
    cur->text.push_back('\n');
  }
  return out;
}

std::string Hunk::Text() const {
  std::string out = header;
  out.push_back('\n');
  for (const auto& l : lines) {
    out += l;
    out.push_back('\n');
  }
  return out;
}

absl::StatusOr<std::vector<Hunk>> ParseHunks(const FileDiff& d) {
  std::vector<std::string_view> lines;
  for (auto l : util::SplitLines(d.text)) lines.push_back(l);
  const std::string where = d.path();
  std::vector<Hunk> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    if (!l.starts_with("@@ ")) continue;
    // @@ -a,b +c,d @@
    Hunk h;
    std::size_t minus = l.find('-'), plus = l.find(" +"), end = l.find(" @@", 3);
    if (minus == std::string_view::npos || plus == std::string_view::npos ||
        end == std::string_view::npos ||
        !ParseRange(l.substr(minus + 1, plus - minus - 1), &h.old_start, &h.old_count) ||
        !ParseRange(l.substr(plus + 2, end - plus - 2), &h.new_start, &h.new_count)) {
      return absl::InvalidArgumentError(util::StrCat(where, ": bad hunk header '", l, "'"));
    }
    h.header = std::string(l);
    int seen_old = 0, seen_new = 0;
    for (++i; i < lines.size() && (seen_old < h.old_count || seen_new < h.new_count); ++i) {
      std::string_view line = lines[i];
      const char tag = line.empty() ? ' ' : line[0];
      if (tag == ' ' || tag == '-') {
        ++seen_old;
        if (tag == ' ') ++seen_new;
      } else if (tag == '+') {
        ++seen_new;
      } else {
        return absl::InvalidArgumentError(
            util::StrCat(where, ": unexpected line in hunk '", line, "'"));
      }
      h.lines.emplace_back(line);
      if (i + 1 < lines.size() && lines[i + 1].starts_with("\\ No newline")) {
        h.lines.emplace_back(lines[++i]);
      }
    }
    --i;
    out.push_back(std::move(h));
  }
  return out;
}

absl::StatusOr<std::string> ApplyFileDiff(std::string_view original, const FileDiff& d) {
  auto hunks = ParseHunks(d);
  if (!hunks.ok()) return hunks.status();
  const std::vector<Line> old_lines = ToLines(original);
  std::vector<Line> out;
  std::size_t next_old = 0;  // index into old_lines not yet copied
  const std::string where = d.path();
  for (const Hunk& h : *hunks) {
    // An empty old range names the line before the insertion.
    std::size_t at = h.old_count == 0 ? static_cast<std::size_t>(h.old_start)
                                      : static_cast<std::size_t>(h.old_start - 1);
    if (at < next_old || at > old_lines.size()) {
      return absl::FailedPreconditionError(
          util::StrCat(where, ": hunk '", h.header, "' does not fit the file"));
    }
    while (next_old < at) out.push_back(old_lines[next_old++]);
    for (std::size_t i = 0; i < h.lines.size(); ++i) {
      std::string_view line = h.lines[i];
      const bool no_newline = i + 1 < h.lines.size() && h.lines[i + 1].starts_with("\\ No newline");
      const char tag = line.empty() ? ' ' : line[0];
      std::string_view body = line.empty() ? line : line.substr(1);
      if (tag == ' ' || tag == '-') {
        if (next_old >= old_lines.size() || old_lines[next_old].text != body) {
          return absl::FailedPreconditionError(util::StrCat(
              where, ": hunk '", h.header, "' does not apply at line ", next_old + 1,
              ": expected '", body, "', found '",
              next_old < old_lines.size() ? old_lines[next_old].text : "<end of file>", "'"));
        }
        if (tag == ' ') out.push_back({std::string(body), !no_newline});
        ++next_old;
      } else {
        out.push_back({std::string(body), !no_newline});
      }
      if (no_newline) ++i;
    }
  }
  while (next_old < old_lines.size()) out.push_back(old_lines[next_old++]);
  std::string result;
  for (std::size_t k = 0; k < out.size(); ++k) {
    result += out[k].text;
    if (out[k].newline || k + 1 < out.size()) result.push_back('\n');
  }
  return result;
}

namespace {

// A hunk's lines split into what it needs (preimage) and what it leaves (postimage).
struct Images {
  std::vector<Line> pre;
  std::vector<Line> post;
  int leading = 0;   // context lines before the first change
  int trailing = 0;  // context lines after the last change
};

Images SplitImages(const Hunk& h) {
  Images im;
  bool changed = false;
  for (std::size_t i = 0; i < h.lines.size(); ++i) {
    std::string_view line = h.lines[i];
    const bool no_newline = i + 1 < h.lines.size() && h.lines[i + 1].starts_with("\\ No newline");
    const char tag = line.empty() ? ' ' : line[0];
    Line l{std::string(line.empty() ? line : line.substr(1)), !no_newline};
    if (tag == ' ') {
      im.pre.push_back(l);
      im.post.push_back(l);
      if (changed) {
        ++im.trailing;
      } else {
        ++im.leading;
      }
    } else {
      changed = true;
      im.trailing = 0;
      if (tag == '-') im.pre.push_back(std::move(l));
      if (tag == '+') im.post.push_back(std::move(l));
    }
    if (no_newline) ++i;
  }
  return im;
}

bool MatchesAt(const std::vector<Line>& text, const std::vector<Line>& pre, int at) {
  if (at < 0 || at + static_cast<int>(pre.size()) > static_cast<int>(text.size())) return false;
  for (std::size_t k = 0; k < pre.size(); ++k) {
    if (text[at + k].text != pre[k].text) return false;
  }
  return true;
}

}  // namespace

PartialApply ApplyHunksNear(std::string_view original, const std::vector<Hunk>& hunks,
                            const std::vector<LineWindow>& windows) {
  PartialApply result;
  std::vector<Line> text = ToLines(original);
  int floor = 0;  // lines above this belong to an applied hunk (or precede it)
  int shift = 0;  // lines the applied hunks added (removed: negative)
  for (std::size_t i = 0; i < hunks.size(); ++i) {
    const Hunk& h = hunks[i];
    Images im = SplitImages(h);
    const int n = static_cast<int>(text.size());
    const int expected = (h.old_count == 0 ? h.old_start : h.old_start - 1) + shift;
    // As git apply: a hunk that starts the file stays at the top, one without trailing context
    // stays at the end.
    const bool at_top = h.old_start <= 1;
    const LineWindow window = i < windows.size() ? windows[i] : LineWindow{};
    // The nearest start in [lo, hi] where pre matches (and ends at end_at, when >= 0); -1: none.
    const auto find = [&](const std::vector<Line>& pre, bool at_end, int end_at) {
      const int size = static_cast<int>(pre.size());
      const int lo = std::max(floor, window.begin + shift);
      const int hi = std::min(n, window.end + shift) - size;
      for (int d = 0; expected - d >= lo || expected + d <= hi; ++d) {
        for (int at : {expected - d, expected + d}) {
          if (at < lo || at > hi || (at_top && at != 0) || (at_end && at + size != n) ||
              (end_at >= 0 && at + size != end_at)) {
            continue;
          }
          if (MatchesAt(text, pre, at)) return at;
        }
      }
      return -1;
    };
    int found = find(im.pre, im.trailing == 0, -1);
    const int change_end = h.old_start - 1 + static_cast<int>(im.pre.size()) - im.trailing;
    if (found < 0 && i < windows.size() && im.trailing > 0 && window.old_end == change_end) {
      // The trailing context lies past the window (the change reached the end of its entry,
      // and the next line is another entry's): without it the hunk must end where the window
      // does.
      std::vector<Line> pre(im.pre.begin(), im.pre.end() - im.trailing);
      const int end_at = window.end + shift;
      if (end_at <= n) {
        found = find(pre, false, end_at);
        if (found >= 0) {
          im.pre = std::move(pre);
          im.post.resize(im.post.size() - im.trailing);
        }
      }
    }
    const int size = static_cast<int>(im.pre.size());
    HunkPlacement placed;
    if (found < 0) {
      placed.why = util::StrCat("hunk '", h.header, "': its ", size,
                                " lines of context and removals are not in the file",
                                i < windows.size() ? " where its entry is" : "");
      result.hunks.push_back(std::move(placed));
      continue;
    }
    text.erase(text.begin() + found, text.begin() + found + size);
    text.insert(text.begin() + found, im.post.begin(), im.post.end());
    placed.applied = true;
    placed.line = found + 1;
    result.hunks.push_back(std::move(placed));
    const int delta = static_cast<int>(im.post.size()) - size;
    shift += delta;
    floor = found + static_cast<int>(im.post.size());
  }
  for (std::size_t k = 0; k < text.size(); ++k) {
    result.text += text[k].text;
    if (text[k].newline || k + 1 < text.size()) result.text.push_back('\n');
  }
  return result;
}

}  // namespace triage::diff
