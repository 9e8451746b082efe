#pragma once

// `triagectl nightly policy`: the nightly policy a checkout's own maintenance history teaches
// (docs/nightly.md, "Learned from the checkout"), each knob with where it came from.

#include <ostream>
#include <string>

namespace triage::ctl {

struct NightlyPolicyOptions {
  std::string repo;             // a tt-xla checkout (git)
  std::string rev = "HEAD";     // the commit whose history is read
  std::string since;            // YYYY-MM-DD: no older commit
  int commits = 60;             // the newest commits that changed test-config files
  std::string policy;           // a policy file read over the learned policy ("" = none)
  std::string output = "yaml";  // yaml | json
};

// Prints the policy (as a policy file, each knob's source in a comment; or JSON with every
// knob's evidence). 0, or 2 for a repository, revision or policy file that cannot be read.
int RunNightlyPolicy(const NightlyPolicyOptions& options, std::ostream& out, std::ostream& err);

}  // namespace triage::ctl
