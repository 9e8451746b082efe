#pragma once

// The remediation workload of fleet_sim (`--workload remediation`): a seeded discrete-event model
// of coding agents remediating about 1,200 failing tt-xla model tests two ways. "One host" is the
// shape of the largest public run: every test gets its own full agent session, 25 agents on one
// host share a few devices. "Farm" is this project's: one agent per machine of the fleet, the fix
// of a failure fingerprint found once by its lead and confirmed on the followers, plus a wave of
// pytest runs on other tests. The workload and the model's parameters are documented at the top of
// bench/remediation_sim.cc and in docs/bench-farm.md, "The remediation workload".
//
// Standard library only: the figures depend on the seed and nothing else.

#include <cstdint>
#include <string>

namespace triage::fleetsim::remediation {

struct Options {
  std::string fleet = "16n150+16p150+4n300";  // the farm's fleet: counts of n150, p150, n300
                                              // machines (+ optional Ncpu)
  int host_agents = 25;                       // baseline: coding-agent processes on one host
  int host_devices = 4;  // baseline: devices on that host, shared by its agents (one pytest at a
                         // time per device)
  uint64_t seed = 1;
  bool trace = false;  // per-event lines on stderr
};

struct Figures {
  double agent_hours = 0;
  double makespan_hours = 0;
  double device_hours = 0;
  int sessions = 0;
  int tests = 0;
};

struct Result {
  Figures one_host;
  Figures farm;
  std::string table;  // the printed text, ending with the final line + '\n'
};

// Builds the workload from the seed, runs both, and returns the figures and the text to print.
// An invalid fleet spec returns an error message in `error` and empty Result.
Result Run(const Options& o, std::string* error);

}  // namespace triage::fleetsim::remediation
