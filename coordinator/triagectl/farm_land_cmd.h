#pragma once

// Landing a sweep (docs/landing.md): `sweep apply` puts a sweep's changes on a checkout — at the
// sweep's commits or, entry by entry, onto later ones — optionally as the two branches and
// commits of its pull requests, pushed; `sweep pr-body` prints those pull requests' text.

#include <ostream>

#include "coordinator/triagectl/farm_common.h"

namespace triage::ctl::farm {

// `sweep apply ID --repo CHECKOUT [--branch NAME [--commit [--push REMOTE]] [--force]]
//  [--onto REF] [--forge-onto REF] [--exclude KEYS] [--exclude-review] [--author A]
//  [--committer C] [--evidence-url URL]`.
int RunSweepApply(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);

// `sweep pr-body ID [--repo tt-xla|forge] [--evidence-url URL] [--exclude KEYS]
//  [--exclude-review]`.
int RunSweepPrBody(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);

}  // namespace triage::ctl::farm
