#pragma once

// Which work the fleet can take. The coordinator counts its queued and waiting shards per sweep
// and requirement (executor, playbook, archs, cpu_ok, min_devices) as they change state; Evaluate
// compares those few groups with the agents and names, per sweep, the work no live, undrained
// agent can take and why (docs/farm.md, "A blocked sweep looks blocked").

#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "coordinator/model/model.h"

namespace triage::coord {

// What an agent must offer to take a shard.
struct Requirement {
  std::string executor;
  std::string playbook;
  std::vector<std::string> archs;  // device agents need one of these
  bool cpu_ok = false;             // cpu_only agents may take it
  // A device agent of one of archs needs at least this many devices (ShardSpec.min_devices:
  // data- and tensor-parallel tests; docs/nightly.md, section 3). 1 for any other work.
  int min_devices = 1;

  static Requirement Of(const ShardRecord& s);
  auto Tie() const { return std::tie(executor, playbook, archs, cpu_ok, min_devices); }
  bool operator<(const Requirement& o) const { return Tie() < o.Tie(); }
  bool operator==(const Requirement& o) const { return Tie() == o.Tie(); }
};

// Whether an agent with these dimensions may take such a shard (ignoring its state, capacity
// and backoffs): the one matching rule of the scheduler. cpu_ok work (probe phases) goes to
// cpu_only agents and, with device_probes, to device agents too: they take it only when nothing
// of their arch is queued (LeaseTable::FindMatch), so idle devices shorten the probe lane instead
// of waiting on it (docs/farm.md, "Leases, fencing and retries"). Work of an arch needs the
// requirement's min_devices on the agent. An agent whose self-check found a runner problem
// (AgentDimensions.runner_problem) takes no native work: replay and command work still go to it
// (docs/farm.md, "Only a working agent is a witness").
bool AgentOffers(const v1::AgentDimensions& dims, const Requirement& r, bool device_probes);
// The same for one shard's requirement (Requirement::Of), without copying it.
bool AgentOffers(const v1::AgentDimensions& dims, const ShardRecord& s, bool device_probes);

// One group of queued shards no live, undrained agent can take.
struct Unservable {
  std::string sweep_id;
  Requirement requirement;
  int shards = 0;  // queued and waiting
  int queued = 0;  // of which queued (waiting ones also wait for another shard)
  // Why, as a metric label: "arch" (no agent has it), "executor", "playbook", "devices" (agents
  // of the arch lack it, or have fewer devices than it needs), "runner" (their self-check found
  // they cannot run tt-xla's runner), "drained" / "offline" (the agents that could take it are).
  std::string reason;
  std::string arch;     // the first required arch ("cpu" for cpu-only work)
  std::string message;  // "4 shards need arch p150 with executor native: ..."
};

class Demand {
 public:
  explicit Demand(bool device_probes = true) : device_probes_(device_probes) {}
  // Shards of sweep_id with requirement r entering (+1) or leaving (-1) the queued or the
  // waiting state.
  void Add(const std::string& sweep_id, const Requirement& r, bool waiting, int delta);
  void Clear() { open_.clear(); }

  std::vector<Unservable> Evaluate(const std::vector<const AgentRecord*>& agents) const;

 private:
  struct Count {
    int queued = 0;
    int waiting = 0;
  };
  bool device_probes_;
  std::map<std::pair<std::string, Requirement>, Count> open_;
};

// The sweep's ETA in seconds from what this sweep measured, or -1 (unknown). Shards run in
// lanes (an arch, or "cpu" for probes) that progress in parallel; a lane's rate is the results
// it delivered over the time since its first result's shard started. Unknown while any lane
// with work left has fewer than min_results results, or cannot be served at all.
struct LaneProgress {
  int open = 0;     // shards not yet ended
  int results = 0;  // accepted results
  TimePoint first_start{};
  bool unservable = false;
};
std::int64_t EstimateEta(const std::map<std::string, LaneProgress>& lanes, TimePoint now,
                         int min_results = 3);

}  // namespace triage::coord
