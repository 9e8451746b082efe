#pragma once

// What `sweep start --nightly` and `sweep patch/report --issue-links` read on the operator's
// machine (docs/nightly.md): the CI runs' test reports, read as streams into records before
// anything is sent, and the tracking-issue links.

#include <map>
#include <optional>
#include <ostream>
#include <string>

#include "coordinator/triagectl/farm_cmd.h"
#include "triage/v1/control.pb.h"

namespace triage::ctl::farm {

// Adds the --nightly runs and the nightly options to req. A hostile or unreadable run stops the
// command with an error naming the file (the exit code; nothing was sent); nullopt when req is
// ready. Progress goes to err.
std::optional<int> AddNightly(const FarmOptions& o, v1::StartSweepRequest& req, std::ostream& err);

// Reads an --issue-links file: a YAML or JSON mapping of a failure cluster's id or an entry's key
// to a URL. The exit code on a bad file (said on err, naming the file and the line).
std::optional<int> ReadIssueLinks(const std::string& path,
                                  std::map<std::string, std::string>& links, std::ostream& err);

}  // namespace triage::ctl::farm
