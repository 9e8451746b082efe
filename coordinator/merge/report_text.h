#pragma once

// Small helpers of the texts built from a sweep's report.json alone (the pull requests,
// pr_text.h, and the issue drafts, issue_drafts.h).

#include <cstddef>
#include <string>

#include "nlohmann/json_fwd.hpp"

namespace triage::merge::report_text {

// j[key] when it is a string, else "".
std::string Str(const nlohmann::json& j, const char* key);
// One line (newlines become spaces), cut to n characters with "..." after.
std::string Short(std::string s, std::size_t n = 160);
// Inline code: backticks inside become quotes, so the span cannot end early.
std::string Code(std::string s);
// " ([evidence](<url>/<path>))" or " (evidence: `<path>`)" for an entry's first evidence file (a
// JUnit file when it has one); "" when it has none.
std::string EvidenceLink(const nlohmann::json& entry, const std::string& evidence_url);

}  // namespace triage::merge::report_text
