#pragma once

// Which of a sweep's changes land where (docs/landing.md): both patches split into units — a
// YAML entry's hunk, a registry line, a loader file — each owned by the entries it serves, then
// applied unit by unit to the texts of the branch's base, which may be later than the sweep's
// commits. An entry is left out, with every unit that serves only it, when it is excluded, when
// its YAML hunk no longer applies (its entry changed upstream since the sweep), or when a unit it
// needs no longer applies; the rest still lands. A pure function over the texts it is given.

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace triage::ctl::land {

// Reads a file of one repository ("" and NotFound when it does not exist there).
using ReadFile = std::function<absl::StatusOr<std::string>(const std::string& path)>;

struct PlanInput {
  std::string ttxla_patch;
  std::string forge_patch;
  const nlohmann::json* report = nullptr;       // the sweep's report.json
  ReadFile ttxla_at_sweep;                      // tt-xla at the sweep's commit (the patch's base)
  ReadFile ttxla_target;                        // tt-xla where the changes land
  ReadFile forge_target;                        // tt-forge-models where the changes land
  std::map<std::string, std::string> excluded;  // key -> why (--exclude, --exclude-review)
};

// A file with the units that landed in it.
struct FileChange {
  std::string path;  // relative to its repository's root
  std::string text;  // the new content
};

struct Plan {
  std::vector<FileChange> ttxla;
  std::vector<FileChange> forge;
  std::set<std::string> landed;                 // entries with a change that landed
  std::map<std::string, std::string> left_out;  // entry key -> why
  // Units that serve no entry of the report and did not apply (a helper file, say): named.
  std::vector<std::string> problems;
};

// Errors: a patch that does not parse, a file that cannot be read.
absl::StatusOr<Plan> PlanLanding(const PlanInput& in);

}  // namespace triage::ctl::land
