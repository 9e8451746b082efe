#pragma once

// The selection flags (`--failing`, `--keys`, `--status`, `--file`, `--reason-regex`,
// `--cluster`, `--limit`) shared by `triagectl sweep start` and `triagectl inventory select`,
// and the offline preview of what a sweep with them would take (docs/remediation.md).

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "triage/v1/control.pb.h"

namespace CLI {
class App;
}

namespace triage::ctl {

struct SelectFlags {
  bool failing = false;
  std::vector<std::string> keys;  // each: a file of keys, else a comma-separated list
  std::vector<std::string> statuses;
  std::vector<std::string> files;
  std::string reason_regex;
  std::vector<std::string> clusters;
  int limit = 0;
  // sweep start --failing only (AddRemediationFlags): the shared scope and the fan-out.
  std::vector<std::string> shared_paths;
  bool no_fan_out = false;
};

void AddSelectFlags(CLI::App* cmd, SelectFlags& flags);
// --shared-path and --no-fan-out (docs/remediation.md), for `sweep start`.
void AddRemediationFlags(CLI::App* cmd, SelectFlags& flags);

// The flags as a v1::Selection. A --keys value that names a readable file is read as keys, one
// per line (blank lines and lines starting with '#' skipped; a pytest node id such as
// `tests/runner/test_models.py::test_all_models_torch[KEY]` counts as KEY); otherwise it is a
// comma-separated list. Statuses are taken in either case. InvalidArgument names the flag.
absl::StatusOr<v1::Selection> BuildSelection(const SelectFlags& flags);

struct SelectPreviewOptions {
  std::vector<std::string> archs;      // default n150
  std::vector<std::string> playbooks;  // without --failing: the playbooks (default all)
  bool clusters_only = false;          // print the clusters, not the entries
};

// `triagectl inventory select`: the entries (or clusters) a sweep with these flags would take
// from the checkout's working tree, and a summary on err. 0, or 2 for a bad flag or checkout.
int RunInventorySelect(const InventoryOptions& inventory, const SelectFlags& flags,
                       const SelectPreviewOptions& options, std::ostream& out, std::ostream& err);

}  // namespace triage::ctl
