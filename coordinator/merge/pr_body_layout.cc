#include "coordinator/merge/pr_body_layout.h"

#include <algorithm>

#include "common/util/strings.h"

namespace triage::merge::pr_layout {

// The groups of every part, each as its first lines and then, folded in <details> where GitHub
// renders it collapsed, as many of the rest as the budget holds; what does not fit is counted
// and left to report.md. Parts and groups keep their order; lines are never cut.
std::string RenderParts(const std::vector<Part>& parts, std::size_t fixed,
                        const std::string& report_hint) {
  const auto heading = [](const Group& g) -> std::string {
    if (g.title.empty()) return "\n";
    return util::StrCat("\n### ", g.title, " (", g.lines.size(), ")\n\n");
  };
  const auto more = [&](std::size_t n) {
    return util::StrCat("\n", n, " more in report.md (", report_hint, ").\n");
  };
  std::size_t lines = 0;
  for (const auto& p : parts) {
    for (const auto& g : p.groups) lines += g.lines.size();
  }
  // The first lines of each group: 10, fewer when even those would take half the budget.
  std::size_t first = 10;
  for (; first > 1; first = first > 5 ? 5 : first > 3 ? 3 : 1) {
    std::size_t size = fixed;
    for (const auto& p : parts) {
      size += p.heading.size() + p.intro.size();
      for (const auto& g : p.groups) {
        size += heading(g).size() + 64;
        for (std::size_t i = 0; i < std::min(first, g.lines.size()); ++i) size += g.lines[i].size();
      }
    }
    if (size <= kBodyBudget / 2) break;
  }
  // What the first lines take, with room for a "more" line under every group that has more;
  // the budget left holds the folded rest (shared below).
  std::size_t used = fixed;
  for (const auto& p : parts) {
    if (p.groups.empty()) continue;
    used += p.heading.size() + p.intro.size();
    for (const auto& g : p.groups) {
      used += heading(g).size();
      for (std::size_t i = 0; i < std::min(first, g.lines.size()); ++i) used += g.lines[i].size();
      if (g.lines.size() > first) used += more(lines).size();
    }
  }
  // The budget left is shared fairly among the groups with more lines (each gets an equal
  // share, a group that needs less leaves the rest to the others), so every kind shows some of
  // its rest, not the first kinds all of theirs.
  const std::string close = "\n</details>\n";
  std::vector<std::size_t> want;  // per group with more: bytes of its whole folded rest
  for (const auto& p : parts) {
    for (const auto& g : p.groups) {
      if (g.lines.size() <= first) continue;
      std::size_t bytes =
          util::StrCat("\n<details><summary>", g.lines.size(), " more</summary>\n\n").size() +
          close.size();
      for (std::size_t i = first; i < g.lines.size(); ++i) bytes += g.lines[i].size();
      want.push_back(bytes);
    }
  }
  std::vector<std::size_t> share(want.size(), 0);
  std::size_t left = used < kBodyBudget ? kBodyBudget - used : 0;
  std::vector<bool> settled(want.size(), false);
  for (std::size_t open = want.size(); open > 0 && left > 0;) {
    const std::size_t each = left / open;
    bool any = false;
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (settled[i] || want[i] > each) continue;
      share[i] = want[i];
      left -= want[i];
      settled[i] = true;
      --open;
      any = true;
    }
    if (!any) {
      for (std::size_t i = 0; i < want.size(); ++i) {
        if (!settled[i]) share[i] = each;
      }
      break;
    }
  }
  std::string out;
  std::size_t next = 0;  // the group's index in want/share
  for (const auto& p : parts) {
    if (p.groups.empty()) continue;
    // Rebuilt group by group, the folded rest after each group's first lines.
    std::string md = p.heading + p.intro;
    for (const auto& g : p.groups) {
      md += heading(g);
      const std::size_t shown = std::min(first, g.lines.size());
      for (std::size_t i = 0; i < shown; ++i) md += g.lines[i];
      if (shown == g.lines.size()) continue;
      const std::size_t allowed = share[next++];
      const std::string open =
          util::StrCat("\n<details><summary>", g.lines.size(), " more</summary>\n\n");
      std::size_t i = shown, folded_bytes = open.size() + close.size();
      for (; i < g.lines.size() && folded_bytes + g.lines[i].size() <= allowed; ++i) {
        folded_bytes += g.lines[i].size();
      }
      if (i > shown) {
        md += util::StrCat("\n<details><summary>", i - shown, " more</summary>\n\n");
        for (std::size_t k = shown; k < i; ++k) md += g.lines[k];
        md += close;
      }
      if (i < g.lines.size()) md += more(g.lines.size() - i);  // its room is in `used`
    }
    out += md;
  }
  return out;
}

}  // namespace triage::merge::pr_layout
