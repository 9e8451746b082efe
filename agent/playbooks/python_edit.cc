#include "agent/playbooks/python_edit.h"

#include <algorithm>

#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::playbooks {

std::vector<std::string> PythonLines(const std::string& text) {
  std::vector<std::string> out;
  for (auto l : util::SplitLines(text)) out.emplace_back(l);
  return out;
}

std::string JoinPythonLines(const std::vector<std::string>& lines, bool final_newline) {
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    out += lines[i];
    if (i + 1 < lines.size() || final_newline) out += '\n';
  }
  return out;
}

namespace {

std::vector<std::string> Lines(const std::string& text) { return PythonLines(text); }
std::string Join(const std::vector<std::string>& lines, bool final_newline) {
  return JoinPythonLines(lines, final_newline);
}

bool IsBlank(const std::string& l) { return util::TrimWhitespace(l).empty(); }

// [first, last] line indices of a block opened at `start` (its header line): every following
// line that is blank or indented deeper than the header.
std::pair<int, int> BlockOf(const std::vector<std::string>& lines, int start) {
  const int indent = util::IndentOf(lines[start]);
  int last = start;
  for (int i = start + 1; i < static_cast<int>(lines.size()); ++i) {
    if (IsBlank(lines[i])) continue;
    if (util::IndentOf(lines[i]) <= indent) break;
    last = i;
  }
  return {start, last};
}

// Walks a line of Python from `from`, skipping string literals and stopping at a comment; calls
// on_bracket(+1 or -1, index) for each bracket and stops when it returns true. Returns the index
// it stopped at, or npos when it reached the end of the line or a comment.
template <typename F>
std::size_t ScanBrackets(std::string_view line, std::size_t from, F on_bracket) {
  char quote = 0;
  for (std::size_t k = from; k < line.size(); ++k) {
    const char c = line[k];
    if (quote != 0) {
      if (c == '\\') {
        ++k;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '(' || c == '[' || c == '{') {
      if (on_bracket(+1, k)) return k;
    } else if (c == ')' || c == ']' || c == '}') {
      if (on_bracket(-1, k)) return k;
    } else if (c == '#') {
      return std::string::npos;
    }
  }
  return std::string::npos;
}

// End (exclusive) of the call whose '(' is at open, or npos when it does not close on the line.
std::size_t CallEnd(const std::string& line, std::size_t open) {
  int depth = 0;
  const std::size_t close =
      ScanBrackets(line, open, [&](int delta, std::size_t) { return (depth += delta) == 0; });
  return close == std::string::npos ? close : close + 1;
}

int TopLevelModelLoader(const std::vector<std::string>& lines) {
  int cls = -1;
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    const std::string& l = lines[i];
    if (l.starts_with("class ModelLoader(") || l.starts_with("class ModelLoader:")) cls = i;
  }
  return cls;
}

// The first line after a docstring that starts at line b (b itself when none starts there).
int SkipDocstring(const std::vector<std::string>& lines, int b, int last) {
  std::string_view t = util::TrimWhitespace(lines[b]);
  for (std::string_view q : {"\"\"\"", "'''", "r\"\"\"", "r'''"}) {
    if (!t.starts_with(q)) continue;
    const std::string_view quote = q.substr(q.size() - 3);
    std::size_t close = t.find(quote, q.size());
    int d = b;
    while (close == std::string_view::npos && d < last) {
      ++d;
      close = lines[d].find(quote);
    }
    b = d + 1;
    while (b <= last && IsBlank(lines[b])) ++b;
    break;
  }
  return b;
}

}  // namespace

int BracketDelta(std::string_view line) {
  int depth = 0;
  ScanBrackets(line, 0, [&](int delta, std::size_t) {
    depth += delta;
    return false;
  });
  return depth;
}

std::optional<MethodSpan> FindModelLoaderMethod(const std::vector<std::string>& lines,
                                                std::string_view name, bool skip_doc) {
  const int cls = TopLevelModelLoader(lines);
  if (cls < 0) return std::nullopt;
  auto [first, last] = BlockOf(lines, cls);
  int body_indent = -1;
  for (int i = first + 1; i <= last; ++i) {
    if (IsBlank(lines[i])) continue;
    const int indent = util::IndentOf(lines[i]);
    if (body_indent < 0) body_indent = indent;
    if (indent != body_indent) continue;
    std::string_view t = util::TrimWhitespace(lines[i]);
    if (!t.starts_with(util::StrCat("def ", name, "("))) continue;
    MethodSpan m;
    m.def_line = i;
    m.indent = indent;
    // The signature may span lines: it ends where its brackets close.
    int depth = 0;
    int h = i;
    for (; h <= last; ++h) {
      depth += BracketDelta(lines[h]);
      if (depth <= 0) break;
    }
    if (h > last) return std::nullopt;
    m.header_end = h;
    // The body: the lines after the signature indented deeper than the def (a signature's
    // closing `):` may sit at the def's own indentation).
    m.last = h;
    for (int k = h + 1; k < static_cast<int>(lines.size()); ++k) {
      if (IsBlank(lines[k])) continue;
      if (util::IndentOf(lines[k]) <= indent) break;
      m.last = k;
    }
    if (m.last <= h) return std::nullopt;  // a one-line method: no body to edit
    int b = h + 1;
    while (b <= m.last && IsBlank(lines[b])) ++b;
    m.body_indent = util::IndentOf(lines[b]);
    m.body_first = skip_doc ? SkipDocstring(lines, b, m.last) : b;
    return m;
  }
  return std::nullopt;
}

absl::StatusOr<std::string> AddMethodToModelLoader(const std::string& text,
                                                   const std::string& method_name,
                                                   const std::string& method) {
  std::vector<std::string> lines = Lines(text);
  const int cls = TopLevelModelLoader(lines);
  if (cls < 0) return absl::NotFoundError("no top-level `class ModelLoader` in the loader");
  auto [first, last] = BlockOf(lines, cls);
  for (int i = first; i <= last; ++i) {
    std::string_view t = util::TrimWhitespace(lines[i]);
    if (t.starts_with(util::StrCat("def ", method_name, "("))) {
      return absl::AlreadyExistsError(
          util::StrCat("ModelLoader already defines ", method_name, " (line ", i + 1, ")"));
    }
  }
  std::vector<std::string> insert = {""};
  for (auto l : util::SplitLines(method)) insert.emplace_back(l);
  lines.insert(lines.begin() + last + 1, insert.begin(), insert.end());
  return Join(lines, text.empty() || text.back() == '\n');
}

absl::StatusOr<std::string> RemoveMethodFromModelLoader(const std::string& text,
                                                        std::string_view method_name) {
  std::vector<std::string> lines = Lines(text);
  const auto span = FindModelLoaderMethod(lines, method_name);
  if (!span) {
    return absl::NotFoundError(util::StrCat("ModelLoader defines no ", method_name));
  }
  int first = span->def_line;
  while (first > 0 && util::TrimWhitespace(lines[first - 1]).starts_with("@") &&
         util::IndentOf(lines[first - 1]) == span->indent) {
    --first;
  }
  while (first > 0 && IsBlank(lines[first - 1])) --first;
  lines.erase(lines.begin() + first, lines.begin() + span->last + 1);
  return Join(lines, text.empty() || text.back() == '\n');
}

std::string EnsureImportTorch(const std::string& text) {
  std::vector<std::string> lines = Lines(text);
  int last_import = -1;
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    const std::string& l = lines[i];
    if (l == "import torch" || l.starts_with("import torch ") || l.starts_with("import torch,")) {
      return text;
    }
    if (l.starts_with("import ") || l.starts_with("from ")) last_import = i;
    if (!l.empty() && !l.starts_with("import ") && !l.starts_with("from ") && !l.starts_with("#") &&
        !l.starts_with("\"\"\"") && last_import >= 0) {
      break;
    }
  }
  lines.insert(lines.begin() + last_import + 1, "import torch");
  return Join(lines, text.empty() || text.back() == '\n');
}

std::optional<DtypeFix> FindDtypeFix(const std::string& text,
                                     const std::vector<std::string>& offending) {
  static constexpr std::string_view kCtors[] = {"zeros", "ones",   "full", "empty",   "randn",
                                                "rand",  "tensor", "eye",  "linspace"};
  std::vector<std::string> lines = Lines(text);
  struct Site {
    int line;
    std::string var;
    std::size_t insert_at;  // where ", dtype=dtype_override" goes (before the closing paren)
    bool empty_args;
    bool constructor;
  };
  std::vector<Site> sites;
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    std::string_view t = util::TrimWhitespace(lines[i]);
    if (!(t.starts_with("def load_inputs(") || t.starts_with("def load_model("))) continue;
    auto [first, last] = BlockOf(lines, i);
    for (int j = first + 1; j <= last; ++j) {
      const std::string& l = lines[j];
      // `<name> = <call>(...)`
      std::size_t eq = l.find(" = ");
      if (eq == std::string::npos) continue;
      std::string var(util::TrimWhitespace(std::string_view(l).substr(0, eq)));
      if (var.empty() || var.find_first_of(" ,[(.") != std::string::npos) continue;
      std::string_view rhs = std::string_view(l).substr(eq + 3);
      bool torch_ctor = false;
      for (auto ctor : kCtors) {
        std::string call = util::StrCat("torch.", ctor, "(");
        std::size_t at = l.find(call, eq);
        if (at == std::string::npos) continue;
        torch_ctor = true;
        std::size_t open = at + call.size() - 1;
        std::size_t end = CallEnd(l, open);
        if (end == std::string::npos) break;
        std::string_view args = std::string_view(l).substr(open + 1, end - open - 2);
        if (args.find("dtype=") != std::string_view::npos) break;  // already explicit
        sites.push_back({j, var, end - 1, util::TrimWhitespace(args).empty(), true});
        break;
      }
      if (torch_ctor) continue;
      // A tensor from another call (a processor, a file): cast it after the assignment.
      if (std::find(offending.begin(), offending.end(), var) != offending.end() &&
          rhs.find('(') != std::string_view::npos) {
        sites.push_back({j, var, 0, false, false});
      }
    }
  }
  const Site* chosen = nullptr;
  for (const auto& s : sites) {
    if (s.constructor && std::find(offending.begin(), offending.end(), s.var) != offending.end()) {
      chosen = &s;
      break;
    }
  }
  if (chosen == nullptr) {
    for (const auto& s : sites) {
      if (!s.constructor) {
        chosen = &s;
        break;
      }
    }
  }
  if (chosen == nullptr) {
    int constructors = 0;
    for (const auto& s : sites) constructors += s.constructor ? 1 : 0;
    if (constructors == 1 && offending.size() == 1) {
      for (const auto& s : sites) {
        if (s.constructor) chosen = &s;
      }
    }
  }
  if (chosen == nullptr) return std::nullopt;
  DtypeFix fix;
  fix.line = chosen->line + 1;
  fix.variable = chosen->var;
  if (chosen->constructor) {
    std::string& l = lines[chosen->line];
    l.insert(chosen->insert_at,
             chosen->empty_args ? "dtype=dtype_override" : ", dtype=dtype_override");
    fix.description = util::StrCat("loader.py:", fix.line, ": `", util::TrimWhitespace(l),
                                   "` (added dtype=dtype_override)");
  } else {
    const std::string pad(util::IndentOf(lines[chosen->line]), ' ');
    std::string cast =
        util::StrCat(pad, chosen->var, " = ", chosen->var,
                     ".to(dtype_override) if dtype_override is not None else ", chosen->var);
    lines.insert(lines.begin() + chosen->line + 1, cast);
    fix.line = chosen->line + 2;
    fix.description = util::StrCat("loader.py:", fix.line, ": `", util::TrimWhitespace(cast),
                                   "` (one .to(dtype_override) cast)");
  }
  fix.text = Join(lines, text.empty() || text.back() == '\n');
  return fix;
}

}  // namespace triage::playbooks
