#pragma once

// The text of a sweep's pull requests and commits (docs/landing.md, "PR text"), built from its
// report.json alone: a summary with the sweep's commits (and a nightly sweep's run labels), the
// changes grouped by kind with the reason for each line, the entries already at target, flaky
// and unconfirmed ones, what needs a person, what the landing left out, and where the evidence is.
// A pure function: `triagectl sweep pr-body` prints it and `sweep apply --commit` commits with it.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace triage::merge {

enum class PrRepo { kTtXla, kForge };

struct PrOptions {
  // Entries the landing left out, by key -> why (excluded for review, changed upstream, ...).
  std::map<std::string, std::string> left_out;
  // The commits the branches were made on, when they differ from the sweep's ("" = the sweep's).
  std::string ttxla_base;
  std::string forge_base;
  // The tt-forge-models commit tt-xla's gitlink moves to ("" = not known yet).
  std::string forge_commit;
  // Prefix of the evidence links ("" = paths as `sweep report --out DIR` writes them).
  std::string evidence_url;
};

struct PrText {
  std::string title;  // one line, no trailing newline
  std::string body;   // markdown
  // title, a blank line and the body: a commit message.
  std::string CommitMessage() const { return title + "\n\n" + body; }
};

// Errors: report is not a sweep's report.json (missing sweep, commits or entries).
absl::StatusOr<PrText> BuildPrText(const nlohmann::json& report, PrRepo repo,
                                   const PrOptions& options = {});

}  // namespace triage::merge
