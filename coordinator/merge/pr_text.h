#pragma once

// The text of a sweep's pull requests and commits (docs/landing.md, "PR text"), built from its
// report.json alone: a summary with the sweep's commits (and a nightly sweep's run labels) and a
// table of entries per kind; the changes grouped by kind, one line per entry with the reason
// (a nightly sweep's --no-confirm changes in a part of their own); the entries already at
// target, flaky and unconfirmed ones; what needs a person, what the landing left out, and where
// the evidence is. Each group shows its first lines, then the rest folded in <details>, as much
// as keeps the body under 60,000 characters (shared fairly among the groups); the rest is counted
// and left to report.md. A pure function: `triagectl sweep pr-body` prints it and `sweep apply
// --commit` commits with it.

#include <map>
#include <optional>
#include <set>
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
  // One part of a sweep split into several pull requests (`--split-by`): only these entries
  // are this text's (the others are in the other parts, not "left out"), and `part` names it
  // in the title ("tests/runner/test_config/torch/test_config_inference_single_device.yaml",
  // "promoted").
  std::optional<std::set<std::string>> only;
  std::string part;
};

// The parts of `--split-by file` (each entry's test-config file) or `--split-by kind` (each
// entry's label: a nightly sweep's section, a triage sweep's new status): part -> its keys,
// only entries with a change. InvalidArgument for another `by`.
absl::StatusOr<std::map<std::string, std::set<std::string>>> SplitParts(
    const nlohmann::json& report, const std::string& by);

struct PrText {
  std::string title;  // one line, no trailing newline
  std::string body;   // markdown, at most 60,000 characters (GitHub's cap is 65,536)
  // Entries per kind of the tt-xla text: a nightly sweep's by section (report.json's
  // nightly.sections: each entry once, under its label), a triage sweep's changed entries by
  // status. Empty for tt-forge-models.
  std::map<std::string, std::size_t> counts;
  // title, a blank line and the body: a commit message.
  std::string CommitMessage() const { return title + "\n\n" + body; }
};

// Errors: report is not a sweep's report.json (missing sweep, commits or entries).
absl::StatusOr<PrText> BuildPrText(const nlohmann::json& report, PrRepo repo,
                                   const PrOptions& options = {});

}  // namespace triage::merge
