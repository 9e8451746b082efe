// LeaseTable's matching (docs/farm.md, "Leases, fencing and retries", "Batched verification"):
// the queued shard an agent takes (FindMatch), the fair share and learned seconds that bound a
// batch, a verify phase passed over or held back to gather company, and the batch that runs
// with a verify phase (BatchFor).

#include <algorithm>
#include <set>
#include <tuple>

#include "common/registry/registry_union.h"
#include "common/util/strings.h"
#include "coordinator/scheduling/lease_table.h"

namespace triage::coord {

bool LeaseTable::Matches(const AgentRecord& agent, const ShardRecord& shard, TimePoint now) const {
  if (shard.state != ShardState::kQueued || shard.eligible_at > now) return false;
  if (!held_sweeps_.empty() && held_sweeps_.count(shard.sweep_id)) return false;
  return AgentOffers(agent.dims, shard, options_.device_probes);
}

// Per requirement group the agent offers, the first shard it may take now (a group's head, past
// shards in backoff or of held sweeps); the best of those by queue order, its own arch's first.
// A lease costs the number of groups (playbooks x archs x executors), not the queue's length.
const ShardRecord* LeaseTable::FindMatch(const AgentRecord& agent, TimePoint now,
                                         int max_batch) const {
  if (agent.offline || agent.draining) return nullptr;
  struct Best {
    const QueueKey* key = nullptr;
    const ShardRecord* shard = nullptr;
  } own, probe;  // probe: a device agent's fallback, probe-phase work
  for (const auto& [req, keys] : queue_) {
    if (!AgentOffers(agent.dims, req, options_.device_probes)) continue;
    const bool mine = agent.dims.cpu_only() || std::find(req.archs.begin(), req.archs.end(),
                                                         agent.dims.arch()) != req.archs.end();
    Best& best = mine ? own : probe;
    for (const auto& key : keys) {
      if (best.key != nullptr && !(key < *best.key)) break;  // cannot beat what was found
      const ShardRecord& s = shards_.at(std::get<4>(key));
      if (!Matches(agent, s, now)) continue;
      best = {&key, &s};
      break;
    }
  }
  if (own.shard != nullptr && probe.shard != nullptr &&
      Gathers(agent, *own.shard, *probe.shard, max_batch, now)) {
    return probe.shard;
  }
  // No queued probe to gather with, but a running one releases company soon: the agent waits
  // for it (its Lease long-polls; the probe's result serves it), or probes meanwhile.
  if (own.shard != nullptr && Holds(agent, *own.shard, max_batch, now)) return probe.shard;
  return own.shard != nullptr ? own.shard : probe.shard;
}

double LeaseTable::FairShare(const Requirement& lane, double extra) const {
  double work = extra;
  for (const auto& [req, seconds] : queued_seconds_) {
    if (req.executor == lane.executor && req.archs == lane.archs && req.cpu_ok == lane.cpu_ok) {
      work += seconds;
    }
  }
  // Every agent known to serve the lane counts, offline and drained ones too: they are
  // expected back, and a batch sized while one is away would leave it nothing on its return.
  int serving = 0;
  for (const auto& [id, a] : agents_) {
    if (AgentOffers(a.dims, lane, false)) ++serving;
  }
  return work / std::max(1, serving);
}

void LeaseTable::SetLearnedSeconds(const std::string& sweep_id, double seconds) {
  learned_[sweep_id] = seconds;
}

double LeaseTable::CappedSeconds(const ShardRecord& s) const {
  const double planned = std::max(0.0, s.expected_seconds);
  auto learned = learned_.find(s.sweep_id);
  if (learned == learned_.end()) return planned;
  double seconds = 0;
  for (const auto& e : s.spec.entries()) {
    if (!e.estimated() && e.expected_seconds() <= 0) return planned;  // planned before per-entry
    seconds += e.estimated() ? learned->second : e.expected_seconds();
  }
  return seconds;
}

bool LeaseTable::RunsAlone(const ShardRecord& s) const {
  if (options_.verify_batch_shard_max <= Duration::zero()) return false;
  const bool learned = learned_.count(s.sweep_id) > 0;
  for (const auto& e : s.spec.entries()) {
    // An estimate the sweep has not measured yet, or a plan that did not say per entry.
    if (e.estimated() ? !learned : e.expected_seconds() <= 0) return false;
  }
  return CappedSeconds(s) > ToSeconds(options_.verify_batch_shard_max);
}

// Gathering (docs/farm.md, "Batched verification"). A device agent whose verify phase would run
// in a batch short of max_batch for want of queued company, while a probe of the same wave that
// it may take would release a verification of its arch, takes the probe: the probe lane's work
// is done either way, and a later lease finds more verifications together. Only while the batch
// with that company would fit the agent's fair share (on a fleet with an agent free for every
// shard it never holds a verification back) and for at most verify_gather after the verify
// phase was queued (what it can cost the wave's end).
bool LeaseTable::Gathers(const AgentRecord& agent, const ShardRecord& verify,
                         const ShardRecord& probe, int max_batch, TimePoint now) const {
  if (!MayGather(agent, verify, max_batch, now) || probe.spec.phase() != v1::PHASE_PROBE ||
      probe.sweep_id != verify.sweep_id || probe.spec.wave() != verify.spec.wave()) {
    return false;
  }
  const ShardRecord* company = CompanyFrom(probe, verify);
  return company != nullptr && RoomFor(agent, verify, *company, max_batch, now);
}

// Holding: the same, for a probe of the wave that is already running (no probe is queued at the
// wave's tail), expected to end within the verify phase's gather window. The agent gets no
// lease meanwhile (or a probe, FindMatch): its verification waits for the company the probe
// releases instead of starting a session of its own, and the wait ends with the window.
bool LeaseTable::Holds(const AgentRecord& agent, const ShardRecord& verify, int max_batch,
                       TimePoint now) const {
  if (!MayGather(agent, verify, max_batch, now)) return false;
  const TimePoint window_end = verify.enqueued_at + options_.verify_gather;
  for (const auto& [lease_id, id] : lease_to_shard_) {
    const ShardRecord& probe = shards_.at(id);
    if (!probe.lease || probe.spec.phase() != v1::PHASE_PROBE ||
        probe.sweep_id != verify.sweep_id || probe.spec.wave() != verify.spec.wave()) {
      continue;
    }
    const TimePoint expected_end =
        probe.lease->granted_at +
        std::chrono::duration_cast<Duration>(
            std::chrono::duration<double>(std::max(0.0, probe.expected_seconds)));
    if (expected_end > window_end) continue;
    const ShardRecord* company = CompanyFrom(probe, verify);
    if (company != nullptr && RoomFor(agent, verify, *company, max_batch, now)) return true;
  }
  return false;
}

bool LeaseTable::MayGather(const AgentRecord& agent, const ShardRecord& verify, int max_batch,
                           TimePoint now) const {
  return max_batch > 1 && !agent.dims.cpu_only() && options_.verify_gather > Duration::zero() &&
         options_.verify_batch_max > Duration::zero() && verify.spec.phase() == v1::PHASE_VERIFY &&
         now - verify.enqueued_at < options_.verify_gather && !RunsAlone(verify);
}

const ShardRecord* LeaseTable::CompanyFrom(const ShardRecord& probe,
                                           const ShardRecord& verify) const {
  for (const auto& id : Dependents(probe.id)) {
    const ShardRecord& d = shards_.at(id);
    if (d.state == ShardState::kWaiting && d.spec.phase() == v1::PHASE_VERIFY &&
        d.spec.arch() == verify.spec.arch() && d.spec.executor() == verify.spec.executor() &&
        d.archs == verify.archs) {
      return &d;
    }
  }
  return nullptr;
}

bool LeaseTable::RoomFor(const AgentRecord& agent, const ShardRecord& verify,
                         const ShardRecord& company, int max_batch, TimePoint now) const {
  if (RunsAlone(company)) return false;
  const std::vector<const ShardRecord*> batch = BatchFor(agent, verify, max_batch, now);
  if (static_cast<int>(batch.size()) + 2 > max_batch) return false;
  const double more = std::max(0.0, company.expected_seconds);
  double seconds = std::max(0.0, verify.expected_seconds) + more;
  double capped = CappedSeconds(verify) + CappedSeconds(company);
  for (const ShardRecord* s : batch) {
    seconds += std::max(0.0, s->expected_seconds);
    capped += CappedSeconds(*s);
  }
  return seconds <= FairShare(Requirement::Of(verify), more) &&
         capped <= ToSeconds(options_.verify_batch_max);
}

// A batch (docs/farm.md, "Batched verification"): verify-phase shards of the head's sweep, wave,
// arch and executor, whose workspaces are the same but for disjoint pre-applied files and for
// registry lines none of the others depends on (registry::RegistryUnion), so one workspace and
// one pytest session serve them all. The batch takes the shortest such shards
// (a session's start weighs most on them) while its expected seconds stay within the agent's
// fair share of the queued work of that arch and executor (that work over the agents that can
// take it) and within verify_batch_max (what an agent's death can lose at once). With few
// agents for a deep queue a batch is large; on a fleet with an agent free for every shard it is
// the head alone, so batching never holds back work another agent would start.
std::vector<const ShardRecord*> LeaseTable::BatchFor(const AgentRecord& agent,
                                                     const ShardRecord& head, int max_batch,
                                                     TimePoint now) const {
  std::vector<const ShardRecord*> batch;
  if (max_batch <= 1 || agent.dims.cpu_only() || head.spec.phase() != v1::PHASE_VERIFY ||
      options_.verify_batch_max <= Duration::zero() || RunsAlone(head)) {
    return batch;
  }
  const Requirement own = Requirement::Of(head);
  auto same_lane = [&](const Requirement& r) {
    return r.executor == own.executor && r.archs == own.archs && r.cpu_ok == own.cpu_ok;
  };
  std::set<std::string> files;  // what the batch's pre-applied edits touch
  auto touched = [](const ShardRecord& s) {
    std::vector<std::string> out;
    for (const auto& e : s.spec.pre_apply()) out.push_back(util::StrCat(e.repo(), "/", e.path()));
    return out;
  };
  for (auto& f : touched(head)) files.insert(std::move(f));
  registry::RegistryUnion lines;  // what the batch's training_utils.py gets
  lines.Add(head.spec);
  // Candidates: a bounded look at each group's tail, where its shortest shards are.
  const std::size_t look = static_cast<std::size_t>(max_batch) * 8;
  std::vector<const ShardRecord*> candidates;
  for (const auto& [req, keys] : queue_) {
    if (!same_lane(req)) continue;
    std::size_t seen = 0;
    for (auto k = keys.rbegin(); k != keys.rend() && seen < look; ++k, ++seen) {
      const ShardRecord& s = shards_.at(std::get<4>(*k));
      if (s.id == head.id || s.sweep_id != head.sweep_id || s.spec.wave() != head.spec.wave() ||
          s.spec.phase() != v1::PHASE_VERIFY || s.spec.arch() != head.spec.arch() ||
          !Matches(agent, s, now)) {
        continue;
      }
      candidates.push_back(&s);
    }
  }
  if (candidates.empty()) return batch;
  // Two bounds: the agent's fair share of the queued work, in planned seconds as the queue
  // counts it, and verify_batch_max, in the best estimate of what the batch will run (what an
  // agent's death can lose: CappedSeconds).
  const double share = FairShare(own, 0);
  const double cap = ToSeconds(options_.verify_batch_max);
  double seconds = std::max(0.0, head.expected_seconds);
  double capped = CappedSeconds(head);
  std::stable_sort(
      candidates.begin(), candidates.end(), [](const ShardRecord* a, const ShardRecord* b) {
        return std::tie(a->expected_seconds, a->seq) < std::tie(b->expected_seconds, b->seq);
      });
  for (const ShardRecord* s : candidates) {
    if (static_cast<int>(batch.size()) + 1 >= max_batch) break;
    if (seconds + std::max(0.0, s->expected_seconds) > share) break;
    if (capped + CappedSeconds(*s) > cap || RunsAlone(*s)) continue;
    std::vector<std::string> mine = touched(*s);
    if (std::any_of(mine.begin(), mine.end(), [&](const auto& f) { return files.count(f) > 0; })) {
      continue;
    }
    if (!lines.Add(s->spec)) continue;
    for (auto& f : mine) files.insert(std::move(f));
    seconds += std::max(0.0, s->expected_seconds);
    capped += CappedSeconds(*s);
    batch.push_back(s);
  }
  return batch;
}

}  // namespace triage::coord
