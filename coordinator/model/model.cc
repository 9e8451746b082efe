#include "coordinator/model/model.h"

namespace triage::coord {
namespace {

constexpr std::pair<ShardState, std::string_view> kShardStates[] = {
    {ShardState::kWaiting, "waiting"},         {ShardState::kQueued, "queued"},
    {ShardState::kLeased, "leased"},           {ShardState::kRunning, "running"},
    {ShardState::kSucceeded, "succeeded"},     {ShardState::kFailed, "failed"},
    {ShardState::kQuarantined, "quarantined"}, {ShardState::kCancelled, "cancelled"},
};
constexpr std::pair<SweepState, std::string_view> kSweepStates[] = {
    {SweepState::kRunning, "running"},     {SweepState::kMerging, "merging"},
    {SweepState::kSucceeded, "succeeded"}, {SweepState::kFailed, "failed"},
    {SweepState::kCancelled, "cancelled"},
};

}  // namespace

std::string_view ShardStateName(ShardState s) {
  for (const auto& [v, n] : kShardStates) {
    if (v == s) return n;
  }
  return "?";
}

std::optional<ShardState> ParseShardState(std::string_view name) {
  for (const auto& [v, n] : kShardStates) {
    if (n == name) return v;
  }
  return std::nullopt;
}

bool IsTerminal(ShardState s) {
  return s == ShardState::kSucceeded || s == ShardState::kFailed || s == ShardState::kCancelled;
}

std::string_view SweepStateName(SweepState s) {
  for (const auto& [v, n] : kSweepStates) {
    if (v == s) return n;
  }
  return "?";
}

std::optional<SweepState> ParseSweepState(std::string_view name) {
  for (const auto& [v, n] : kSweepStates) {
    if (n == name) return v;
  }
  return std::nullopt;
}

std::string ShardLane(const ShardRecord& s) {
  return s.spec.arch().empty() ? std::string(kCpuLane) : s.spec.arch();
}

const LeaseInfo* LeaseNamed(const ShardRecord& s, std::string_view lease_id) {
  if (s.lease && s.lease->lease_id == lease_id) return &*s.lease;
  if (s.backup && s.backup->lease_id == lease_id) return &*s.backup;
  return nullptr;
}

LeaseInfo* LeaseNamed(ShardRecord& s, std::string_view lease_id) {
  return const_cast<LeaseInfo*>(LeaseNamed(static_cast<const ShardRecord&>(s), lease_id));
}

bool SameRepository(const SweepRecord& a, const SweepRecord& b) {
  if (!a.request.git_url().empty() || !b.request.git_url().empty()) {
    return a.request.git_url() == b.request.git_url();
  }
  return a.repo == b.repo;  // the checkout's absolute path
}

}  // namespace triage::coord
