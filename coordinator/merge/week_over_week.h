#pragma once

// The report's week-over-week section (docs/report.md, "The report's week_over_week"): the sweep
// compared with the latest earlier sweep of the same repository (coordinator/merge/sweep_diff.h).
// Kept apart from report.cc, which only calls AddWeekOverWeek.

#include <optional>
#include <string>

#include "nlohmann/json_fwd.hpp"

namespace triage::merge {

// The sweep a report is compared with: the latest sweep created before it, of the same
// repository, that succeeded and has a report.json (SweepOutputs finds it).
struct PreviousReport {
  std::string sweep_id;
  std::string json;  // its report.json as written
};

// Sets report["week_over_week"] (report: the report.json being built, its "entries" and
// "clusters" set) and returns report.md's section for it: "## Since sweep <id>", or one line
// saying there is nothing to compare with.
std::string AddWeekOverWeek(const std::optional<PreviousReport>& previous, nlohmann::json& report);

}  // namespace triage::merge
