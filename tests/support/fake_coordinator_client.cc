#include "tests/support/fake_coordinator_client.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace triage::testing {

FakeCoordinatorClient::FakeCoordinatorClient(std::string session_prefix)
    : session_prefix_(std::move(session_prefix)) {}

template <typename T>
absl::StatusOr<T> FakeCoordinatorClient::Next(std::deque<absl::StatusOr<T>>& queue,
                                              const std::string& call, T fallback) {
  if (!queue.empty()) {
    absl::StatusOr<T> answer = std::move(queue.front());
    queue.pop_front();
    return answer;
  }
  auto failure = failures_.find(call);
  if (failure != failures_.end()) return failure->second;
  return fallback;
}

absl::StatusOr<v1::RegisterResponse> FakeCoordinatorClient::Register(
    const v1::RegisterRequest& req) {
  std::lock_guard lock(mu_);
  calls_.push_back(kRegister);
  registers_.push_back(req);
  v1::RegisterResponse fallback;
  const bool resume = !session_.empty() && req.resume_session_id() == session_;
  fallback.set_resumed(resume);
  fallback.set_session_id(resume ? session_ : session_prefix_ + std::to_string(sessions_ + 1));
  fallback.set_heartbeat_interval_ms(heartbeat_interval_ms_);
  auto answer = Next(register_answers_, kRegister, std::move(fallback));
  if (answer.ok() && answer->session_id() != session_) {
    session_ = answer->session_id();
    ++sessions_;
  }
  return answer;
}

absl::StatusOr<v1::HeartbeatResponse> FakeCoordinatorClient::Heartbeat(
    const v1::HeartbeatRequest& req) {
  std::lock_guard lock(mu_);
  calls_.push_back(kHeartbeat);
  heartbeats_.push_back(req);
  return Next(heartbeat_answers_, kHeartbeat, v1::HeartbeatResponse{});
}

absl::StatusOr<v1::LeaseResponse> FakeCoordinatorClient::Lease(const v1::LeaseRequest& req) {
  std::unique_lock lock(mu_);
  calls_.push_back(kLease);
  leases_.push_back(req);
  lease_cv_.wait_for(lock, std::chrono::milliseconds(req.wait_ms()),
                     [this] { return cancelled_ || !lease_answers_.empty(); });
  if (cancelled_) return absl::CancelledError("the agent is stopping");
  return Next(lease_answers_, kLease, v1::LeaseResponse{});
}

absl::StatusOr<v1::ProgressResponse> FakeCoordinatorClient::ReportProgress(
    const v1::ProgressRequest& req) {
  std::lock_guard lock(mu_);
  calls_.push_back(kProgress);
  progress_.push_back(req);
  return Next(progress_answers_, kProgress, v1::ProgressResponse{});
}

absl::StatusOr<v1::CompleteResponse> FakeCoordinatorClient::Complete(
    const v1::CompleteRequest& req) {
  std::function<void(const v1::CompleteRequest&)> hook;
  {
    std::lock_guard lock(mu_);
    calls_.push_back(kComplete);
    completes_.push_back(req);
    hook = on_complete_;
  }
  if (hook) hook(req);
  std::lock_guard lock(mu_);
  v1::CompleteResponse fallback;
  fallback.set_accepted(true);
  return Next(complete_answers_, kComplete, std::move(fallback));
}

void FakeCoordinatorClient::CancelWaits() {
  std::lock_guard lock(mu_);
  ++cancel_waits_;
  cancelled_ = true;
  lease_cv_.notify_all();
}

void FakeCoordinatorClient::PushRegister(absl::StatusOr<v1::RegisterResponse> answer) {
  std::lock_guard lock(mu_);
  register_answers_.push_back(std::move(answer));
}

void FakeCoordinatorClient::PushHeartbeat(absl::StatusOr<v1::HeartbeatResponse> answer) {
  std::lock_guard lock(mu_);
  heartbeat_answers_.push_back(std::move(answer));
}

void FakeCoordinatorClient::PushLease(absl::StatusOr<v1::LeaseResponse> answer) {
  std::lock_guard lock(mu_);
  lease_answers_.push_back(std::move(answer));
  lease_cv_.notify_all();
}

void FakeCoordinatorClient::PushProgress(absl::StatusOr<v1::ProgressResponse> answer) {
  std::lock_guard lock(mu_);
  progress_answers_.push_back(std::move(answer));
}

void FakeCoordinatorClient::PushComplete(absl::StatusOr<v1::CompleteResponse> answer) {
  std::lock_guard lock(mu_);
  complete_answers_.push_back(std::move(answer));
}

v1::LeaseResponse FakeCoordinatorClient::GrantShard(const v1::ShardSpec& spec, std::int64_t token) {
  v1::LeaseResponse lease;
  lease.set_granted(true);
  lease.set_lease_id(spec.shard_id() + "-l" + std::to_string(token));
  lease.set_fencing_token(token);
  *lease.mutable_shard() = spec;
  PushLease(lease);
  return lease;
}

void FakeCoordinatorClient::RevokeOnNextHeartbeat(const std::string& lease_id) {
  v1::HeartbeatResponse resp;
  resp.add_revoked_lease_ids(lease_id);
  PushHeartbeat(resp);
}

void FakeCoordinatorClient::Fail(const std::string& call, absl::Status status) {
  std::lock_guard lock(mu_);
  if (status.ok()) {
    failures_.erase(call);
  } else {
    failures_[call] = std::move(status);
  }
}

void FakeCoordinatorClient::set_heartbeat_interval_ms(std::int64_t ms) {
  std::lock_guard lock(mu_);
  heartbeat_interval_ms_ = ms;
}

void FakeCoordinatorClient::OnComplete(std::function<void(const v1::CompleteRequest&)> hook) {
  std::lock_guard lock(mu_);
  on_complete_ = std::move(hook);
}

std::vector<std::string> FakeCoordinatorClient::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

int FakeCoordinatorClient::Count(const std::string& call) const {
  std::lock_guard lock(mu_);
  return static_cast<int>(std::count(calls_.begin(), calls_.end(), call));
}

std::vector<v1::RegisterRequest> FakeCoordinatorClient::registers() const {
  std::lock_guard lock(mu_);
  return registers_;
}

std::vector<v1::HeartbeatRequest> FakeCoordinatorClient::heartbeats() const {
  std::lock_guard lock(mu_);
  return heartbeats_;
}

std::vector<v1::LeaseRequest> FakeCoordinatorClient::leases() const {
  std::lock_guard lock(mu_);
  return leases_;
}

std::vector<v1::ProgressRequest> FakeCoordinatorClient::progress() const {
  std::lock_guard lock(mu_);
  return progress_;
}

std::vector<v1::CompleteRequest> FakeCoordinatorClient::completes() const {
  std::lock_guard lock(mu_);
  return completes_;
}

int FakeCoordinatorClient::cancel_waits() const {
  std::lock_guard lock(mu_);
  return cancel_waits_;
}

std::string FakeCoordinatorClient::session() const {
  std::lock_guard lock(mu_);
  return session_;
}

bool FakeCoordinatorClient::WaitUntil(const std::function<bool()>& cond,
                                      std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

bool FakeCoordinatorClient::WaitForCount(const std::string& call, int n,
                                         std::chrono::milliseconds timeout) const {
  return WaitUntil([&] { return Count(call) >= n; }, timeout);
}

FakeExecutor::FakeExecutor(std::string name) : name_(std::move(name)) {}

v1::ShardResult FakeExecutor::Passing(const v1::ShardSpec& spec) {
  v1::ShardResult r;
  r.set_status(v1::ShardResult::SUCCEEDED);
  for (const auto& e : spec.entries()) {
    auto* o = r.add_entries();
    o->set_key(e.key());
    o->set_file(e.file());
    o->set_verdict("pass");
  }
  return r;
}

absl::StatusOr<v1::ShardResult> FakeExecutor::Run(agent::ExecContext& ctx) {
  Behaviour behaviour;
  {
    std::unique_lock lock(mu_);
    runs_.push_back(ctx.spec->shard_id());
    cv_.notify_all();
    while (hold_) {
      if (ctx.cancelled && ctx.cancelled()) {
        ++cancelled_;
        v1::ShardResult stopped;
        stopped.set_status(v1::ShardResult::FAILED);
        stopped.set_error("cancelled");
        return stopped;
      }
      cv_.wait_for(lock, std::chrono::milliseconds(1));
    }
    behaviour = behaviour_;
  }
  if (behaviour) return behaviour(ctx);
  if (ctx.progress && ctx.spec->entries_size() > 0) {
    ctx.progress("run", ctx.spec->entries(0).key(), {"running"});
  }
  return Passing(*ctx.spec);
}

void FakeExecutor::SetBehaviour(Behaviour behaviour) {
  std::lock_guard lock(mu_);
  behaviour_ = std::move(behaviour);
}

void FakeExecutor::Hold(bool hold) {
  std::lock_guard lock(mu_);
  hold_ = hold;
  cv_.notify_all();
}

bool FakeExecutor::WaitRunning(int n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return static_cast<int>(runs_.size()) >= n; });
}

std::vector<std::string> FakeExecutor::runs() const {
  std::lock_guard lock(mu_);
  return runs_;
}

int FakeExecutor::cancelled_runs() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

}  // namespace triage::testing
