#pragma once

// The layout of a pull-request body within GitHub's size limit (coordinator/merge/pr_text.cc):
// groups of lines under headings, each shown by its first lines and then folded, as much of
// the rest as the budget holds. Internal to triage_pr_text.

#include <cstddef>
#include <string>
#include <vector>

namespace triage::merge::pr_layout {

struct Group {
  std::string title;
  std::vector<std::string> lines;
};

// A list of groups under one heading, as much of it as the body's budget holds.
struct Part {
  std::string heading;  // "\n## ...\n" ("" = none)
  std::string intro;    // text after the heading
  std::vector<Group> groups;
};

// GitHub refuses a pull-request body over 65,536 characters: the body stays under this, with
// room for what a person adds.
inline constexpr std::size_t kBodyBudget = 60'000;

// The groups of every part, each as its first lines and then, folded in <details> where GitHub
// renders it collapsed, as many of the rest as the budget holds; what does not fit is counted
// and left to report.md. Parts and groups keep their order; lines are never cut.
std::string RenderParts(const std::vector<Part>& parts, std::size_t fixed,
                        const std::string& report_hint);

}  // namespace triage::merge::pr_layout
