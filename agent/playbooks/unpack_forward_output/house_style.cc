#include "agent/playbooks/unpack_forward_output/house_style.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "agent/playbooks/python_edit.h"
#include "common/util/strings.h"
#include "common/util/text.h"

namespace triage::playbooks {
namespace {

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t i = 0;
  for (;;) {
    const std::size_t at = s.find(sep, i);
    out.emplace_back(s.substr(i, at == std::string_view::npos ? std::string_view::npos : at - i));
    if (at == std::string_view::npos) break;
    i = at + 1;
  }
  return out;
}

bool IdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Every occurrence of the name `word` in line (not part of a longer name or an attribute)
// replaced by with.
std::string ReplaceWord(std::string_view line, std::string_view word, std::string_view with) {
  std::string out;
  std::size_t i = 0;
  while (i < line.size()) {
    const std::size_t at = line.find(word, i);
    if (at == std::string_view::npos) break;
    const bool starts = at == 0 || (!IdentChar(line[at - 1]) && line[at - 1] != '.');
    const std::size_t end = at + word.size();
    const bool ends = end >= line.size() || !IdentChar(line[end]);
    util::StrAppend(&out, line.substr(i, at - i), starts && ends ? with : word);
    i = end;
  }
  util::StrAppend(&out, line.substr(std::min(i, line.size())));
  return out;
}

bool HasWord(std::string_view line, std::string_view word) {
  return ReplaceWord(line, word, "\x01") != line;
}

// The directories of a loader path relative to the tt-forge-models root (a/b/pytorch/loader.py
// -> a, b, pytorch).
std::vector<std::string> DirsOf(std::string_view loader) {
  std::vector<std::string> dirs = Split(loader, '/');
  if (!dirs.empty()) dirs.pop_back();
  std::erase_if(dirs, [](const std::string& d) { return d.empty(); });
  return dirs;
}

// The names a statement `from X import a, b as c` / `import x.y as z` binds.
std::vector<std::string> ImportedNames(std::string_view stmt) {
  std::vector<std::string> out;
  std::string_view names;
  if (stmt.starts_with("from ")) {
    const std::size_t at = stmt.find(" import ");
    if (at == std::string_view::npos) return out;
    names = stmt.substr(at + 8);
  } else if (stmt.starts_with("import ")) {
    names = stmt.substr(7);
  } else {
    return out;
  }
  for (const std::string& part : Split(names, ',')) {
    std::string_view p = util::TrimWhitespace(part);
    while (!p.empty() && (p.front() == '(')) p.remove_prefix(1);
    while (!p.empty() && (p.back() == ')')) p.remove_suffix(1);
    p = util::TrimWhitespace(p);
    if (const std::size_t as = p.find(" as "); as != std::string_view::npos) {
      p = util::TrimWhitespace(p.substr(as + 4));
    } else if (const std::size_t dot = p.find('.'); dot != std::string_view::npos) {
      p = p.substr(0, dot);  // `import a.b` binds a
    }
    if (!p.empty()) out.emplace_back(p);
  }
  return out;
}

// The method's second parameter (after self), or "" when it has not exactly one.
std::string ParamOf(const std::vector<std::string>& lines, int def_line, int header_end) {
  std::string header;
  for (int i = def_line; i <= header_end; ++i) util::StrAppend(&header, lines[i], " ");
  const std::size_t open = header.find('(');
  const std::size_t close = header.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  std::vector<std::string> params;
  const std::string inside = header.substr(open + 1, close - open - 1);
  for (const std::string& p : Split(inside, ',')) {
    std::string_view t = util::TrimWhitespace(p);
    if (t.empty()) continue;
    t = t.substr(0, std::min(t.find(':'), t.find('=')));
    params.emplace_back(util::TrimWhitespace(t));
  }
  if (params.size() != 2 || params[0] != "self") return "";
  const std::string& name = params[1];
  if (name.empty() || !std::all_of(name.begin(), name.end(), IdentChar) ||
      std::isdigit(static_cast<unsigned char>(name[0]))) {
    return "";
  }
  return name;
}

// The key two house overrides share when they are the same form.
std::string FormKey(const HouseOverride& h) {
  std::string key;
  for (const auto& l : h.body) {
    std::string line = ReplaceWord(l, h.param, "P");
    std::string_view t = util::TrimWhitespace(line);
    if (t.starts_with("from .")) {
      const std::size_t dots = t.find_first_not_of('.', 5);
      line = util::StrCat("from .", t.substr(dots == std::string_view::npos ? t.size() : dots));
    }
    util::StrAppend(&key, line, "\n");
  }
  return key;
}

}  // namespace

std::string HouseOverride::Citation() const {
  return util::StrCat(loader, ":", line, "'s override");
}

std::optional<HouseOverride> ParseHouseOverride(std::string_view loader, std::string_view text) {
  if (text.find("def unpack_forward_output") == std::string_view::npos) return std::nullopt;
  const std::vector<std::string> lines = PythonLines(std::string(text));
  const auto span = FindModelLoaderMethod(lines, "unpack_forward_output", /*skip_doc=*/true);
  if (!span) return std::nullopt;
  HouseOverride h;
  h.loader = std::string(loader);
  h.line = span->def_line + 1;
  h.param = ParamOf(lines, span->def_line, span->header_end);
  if (h.param.empty()) return std::nullopt;
  for (int i = span->body_first; i <= span->last; ++i) {
    std::string_view t = util::TrimWhitespace(lines[i]);
    if (t.empty() || t.starts_with("#")) continue;
    const int extra = std::max(0, util::IndentOf(lines[i]) - span->body_indent);
    h.body.push_back(util::StrCat(std::string(extra, ' '), t));
  }
  bool concatenates = false;
  std::vector<std::string> imported;
  for (const auto& l : h.body) {
    std::string_view t = util::TrimWhitespace(l);
    if (HasWord(t, "self")) return std::nullopt;  // model-specific
    concatenates |= t.find("torch.cat(") != std::string_view::npos;
    for (auto& n : ImportedNames(t)) imported.push_back(std::move(n));
  }
  if (!concatenates) return std::nullopt;
  // The helper: an imported name called with the whole parameter as its first argument.
  for (const auto& name : imported) {
    if (name == "torch") continue;
    for (const auto& l : h.body) {
      for (std::string_view close : {")", ","}) {
        if (l.find(util::StrCat(name, "(", h.param, close)) != std::string::npos) {
          h.helper = name;
        }
      }
    }
    if (!h.helper.empty()) break;
  }
  if (h.helper.empty()) return std::nullopt;
  return h;
}

std::optional<HouseOverride> ChooseHouseOverride(std::vector<HouseOverride> found) {
  if (found.empty()) return std::nullopt;
  std::sort(found.begin(), found.end(),
            [](const HouseOverride& a, const HouseOverride& b) { return a.loader < b.loader; });
  std::map<std::string, int> count;
  for (const auto& h : found) ++count[FormKey(h)];
  const HouseOverride* best = &found.front();
  for (const auto& h : found) {
    if (count[FormKey(h)] > count[FormKey(*best)]) best = &h;
  }
  return *best;
}

std::optional<std::vector<std::string>> HouseStatementsFor(const HouseOverride& house,
                                                           std::string_view target,
                                                           std::string_view expr) {
  const std::vector<std::string> from = DirsOf(house.loader);
  const std::vector<std::string> to = DirsOf(target);
  std::vector<std::string> out;
  for (const auto& l : house.body) {
    std::string line = ReplaceWord(l, house.param, expr);
    const std::size_t indent = line.find_first_not_of(' ');
    std::string_view t = std::string_view(line).substr(indent == std::string::npos ? 0 : indent);
    if (t.starts_with("from .")) {
      const std::size_t end = t.find_first_not_of('.', 5);
      const std::size_t dots = (end == std::string_view::npos ? t.size() : end) - 5;
      // `dots` dots from a loader in `from` name the package from[0 : size - (dots - 1)].
      if (dots - 1 > from.size()) return std::nullopt;
      const std::size_t keep = from.size() - (dots - 1);
      if (keep > to.size() || !std::equal(from.begin(), from.begin() + keep, to.begin())) {
        return std::nullopt;
      }
      const std::size_t new_dots = to.size() - keep + 1;
      line = util::StrCat(line.substr(0, indent), "from ", std::string(new_dots, '.'),
                          t.substr(5 + dots));
    }
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace triage::playbooks
