#pragma once

// The sweep verbs that start and follow a sweep: start, list, status (get), cancel, watch.

#include <ostream>

#include "coordinator/triagectl/farm_common.h"

namespace triage::ctl::farm {

// `sweep start`: the sweep as started; with --watch, then followed like `sweep watch`.
int RunSweepStart(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// `sweep list`: one row per sweep.
int RunSweepList(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// `sweep status ID`: the sweep, its counts, notes and problems.
int RunSweepStatus(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// `sweep cancel ID --reason R`: the cancelled sweep, as `sweep status` shows it.
int RunSweepCancel(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
int RunSweepResume(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);
// `sweep watch ID`: progress until the sweep ends; 0 if it succeeded, 1 if not.
int RunSweepWatch(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);

}  // namespace triage::ctl::farm
