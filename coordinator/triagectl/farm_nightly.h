#pragma once

// What `sweep start --nightly` and `sweep patch/report --issue-links` read on the operator's
// machine (docs/nightly.md): the CI runs' test reports, read as streams into records one run at
// a time and uploaded to the coordinator in bounded chunks, and the tracking-issue links.

#include <map>
#include <optional>
#include <ostream>
#include <string>

#include "coordinator/triagectl/farm_cmd.h"
#include "triage/v1/control.pb.h"

namespace triage::ctl::farm {

class Client;

// Checks the nightly flags and adds the nightly options to req (its runs come with
// UploadNightlyRuns). The exit code when the flags do not combine (said on err); nullopt when
// req is ready.
std::optional<int> AddNightlyOptions(const FarmOptions& o, v1::StartSweepRequest& req,
                                     std::ostream& err);

// Reads the --nightly runs one at a time and sends each to the coordinator as it is read
// (UploadNightly, in chunks of at most kNightlyChunkBytes); sets req.nightly_upload to the
// upload's id. A hostile or unreadable run stops the command with an error naming the file, and
// the coordinator drops what was sent; so does a refusal. The exit code then (said on err);
// nullopt when req names the upload. Progress goes to err, a line per run.
std::optional<int> UploadNightlyRuns(Client& client, const FarmOptions& o,
                                     v1::StartSweepRequest& req, std::ostream& err);

// `sweep start --failing --nightly DIR …` (docs/remediation.md, "Selecting entries"): the runs
// are read here, and the sweep takes the failing entries whose test failed in them (a record
// FAILED, ERROR or XFAILED on one of the sweep's archs, or without an arch): their keys become the
// selection's keys (intersected with --keys when given). No nightly sweep is started and no run
// is uploaded. The exit code when a run cannot be read or nothing failed (said on err); nullopt
// when req.selection holds the keys. Progress goes to err.
std::optional<int> SelectFailedInNight(const FarmOptions& o, v1::StartSweepRequest& req,
                                       std::ostream& err);

// Reads an --issue-links file: a YAML or JSON mapping of a failure cluster's id or an entry's key
// to a URL. The exit code on a bad file (said on err, naming the file and the line).
std::optional<int> ReadIssueLinks(const std::string& path,
                                  std::map<std::string, std::string>& links, std::ostream& err);

}  // namespace triage::ctl::farm
