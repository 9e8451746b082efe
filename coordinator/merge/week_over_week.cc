#include "coordinator/merge/week_over_week.h"

#include "common/util/strings.h"
#include "coordinator/merge/sweep_diff.h"
#include "nlohmann/json.hpp"

namespace triage::merge {
namespace {

using nlohmann::json;

// A table cell's text, escaped as report.md escapes every cell.
std::string Cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|' || c == '`' || c == '*' || c == '_' || c == '<') out.push_back('\\');
    out.push_back(c == '\n' ? ' ' : c);
  }
  return out;
}

json EmptySection(const json& previous) {
  return {{"previous", previous},
          {"counts", json::object()},
          {"entries", json::array()},
          {"clusters", json::array()}};
}

// "fixed 1 · regressed 2 · still_failing 10": the categories with entries.
std::string CountsLine(const SweepDiff& diff) {
  std::string line;
  for (const auto& [c, n] : diff.Counts()) {
    if (n > 0) util::StrAppend(&line, line.empty() ? "" : " · ", DiffCategoryName(c), " ", n);
  }
  return line.empty() ? "no entries in either sweep" : line;
}

std::string EntriesMd(const SweepDiff& diff) {
  std::string rows;
  for (const auto& e : diff.entries) {
    if (IsTrivial(e.category)) continue;
    util::StrAppend(&rows, "| ", Cell(e.key), " | ", e.arch, " | ", DiffCategoryName(e.category),
                    e.carried_from.empty() ? "" : util::StrCat(" (from ", e.carried_from, ")"),
                    " | ", Cell(StateText(e.before)), " | ", Cell(StateText(e.after)), " |\n");
  }
  if (rows.empty())
    return "No entry changed: every one still passes or still fails the same way.\n";
  return util::StrCat("| entry | arch | change | before | after |\n|---|---|---|---|---|\n", rows);
}

// The clusters whose size changed; "" when none did.
std::string ClustersMd(const SweepDiff& diff) {
  std::string rows;
  for (const auto& c : diff.clusters) {
    if (c.delta() == 0) continue;
    util::StrAppend(&rows, "| ", c.before, " | ", c.after, " | ", c.delta() > 0 ? "+" : "",
                    c.delta(), " | ", Cell(c.signature), " |\n");
  }
  if (rows.empty()) return "";
  return util::StrCat("\nFailure clusters that changed (entries):\n\n",
                      "| before | after | delta | signature |\n|---|---|---|---|\n", rows);
}

}  // namespace

std::string AddWeekOverWeek(const std::optional<PreviousReport>& previous, json& report) {
  if (!previous) {
    report["week_over_week"] = EmptySection(nullptr);
    return "\n## Since the previous sweep\n\nNo earlier sweep of this repository has a report to "
           "compare with.\n";
  }
  const std::string heading = util::StrCat("\n## Since sweep ", previous->sweep_id, "\n\n");
  const json before = json::parse(previous->json, nullptr, false);
  auto diff =
      before.is_discarded()
          ? absl::StatusOr<SweepDiff>(absl::InvalidArgumentError("its report.json is not JSON"))
          : DiffSweeps(before, report);
  if (!diff.ok()) {
    json section = EmptySection(previous->sweep_id);
    section["error"] = util::MessageOf(diff.status());
    report["week_over_week"] = std::move(section);
    return util::StrCat(heading, "Cannot compare with sweep ", previous->sweep_id, ": ",
                        Cell(util::MessageOf(diff.status())), "\n");
  }
  const json all = DiffJson(*diff, /*all=*/false);
  report["week_over_week"] = {{"previous", previous->sweep_id},
                              {"counts", all["counts"]},
                              {"entries", all["entries"]},
                              {"clusters", all["clusters"]}};
  return util::StrCat(heading, "Compared with sweep ", previous->sweep_id,
                      ", the latest earlier sweep of this repository: ", CountsLine(*diff), ".\n\n",
                      EntriesMd(*diff), ClustersMd(*diff));
}

}  // namespace triage::merge
