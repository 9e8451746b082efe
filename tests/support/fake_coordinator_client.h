#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/client/coordinator_client.h"
#include "agent/executor/executor.h"

namespace triage::testing {

// An in-memory coordinator for agent tests, without gRPC. Every call is recorded. Each answer is
// the next one the test queued for that call (Push*), else the call's failure if one is set
// (Fail), else a default:
//   Register: a new session <session_prefix>1, 2, ... (or the same one, resumed, when the
//             request names the current session), with heartbeat_interval_ms;
//   Heartbeat: nothing to report;
//   Lease: waits (real time) up to the request's wait_ms for a queued answer, then not granted;
//          after CancelWaits, CANCELLED at once;
//   ReportProgress: not revoked;
//   Complete: accepted.
class FakeCoordinatorClient : public agent::CoordinatorClient {
 public:
  // Names of the calls, as calls() lists them.
  static constexpr char kRegister[] = "Register";
  static constexpr char kHeartbeat[] = "Heartbeat";
  static constexpr char kLease[] = "Lease";
  static constexpr char kProgress[] = "ReportProgress";
  static constexpr char kComplete[] = "Complete";

  explicit FakeCoordinatorClient(std::string session_prefix = "s");

  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& req) override;
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& req) override;
  absl::StatusOr<v1::LeaseResponse> Lease(const v1::LeaseRequest& req) override;
  absl::StatusOr<v1::ProgressResponse> ReportProgress(const v1::ProgressRequest& req) override;
  absl::StatusOr<v1::CompleteResponse> Complete(const v1::CompleteRequest& req) override;
  void CancelWaits() override;

  // Scripting: the next answers of each call, in order.
  void PushRegister(absl::StatusOr<v1::RegisterResponse> answer);
  void PushHeartbeat(absl::StatusOr<v1::HeartbeatResponse> answer);
  void PushLease(absl::StatusOr<v1::LeaseResponse> answer);
  void PushProgress(absl::StatusOr<v1::ProgressResponse> answer);
  void PushComplete(absl::StatusOr<v1::CompleteResponse> answer);
  // Queues a granted lease of spec (lease id "<shard id>-l<token>") and returns it.
  v1::LeaseResponse GrantShard(const v1::ShardSpec& spec, std::int64_t token = 1);
  // The next heartbeat answers that lease_id is revoked.
  void RevokeOnNextHeartbeat(const std::string& lease_id);
  // Every call named `call` (kRegister, ...) without a queued answer fails with status, until
  // Fail(call, OkStatus()). E.g. an outage: Fail(kComplete, absl::UnavailableError("down")).
  void Fail(const std::string& call, absl::Status status);
  void set_heartbeat_interval_ms(std::int64_t ms);
  // Runs with every Complete before it is answered (the agent's state at that moment).
  void OnComplete(std::function<void(const v1::CompleteRequest&)> hook);

  // What was called, in order, and the requests of each call.
  std::vector<std::string> calls() const;
  int Count(const std::string& call) const;
  std::vector<v1::RegisterRequest> registers() const;
  std::vector<v1::HeartbeatRequest> heartbeats() const;
  std::vector<v1::LeaseRequest> leases() const;
  std::vector<v1::ProgressRequest> progress() const;
  std::vector<v1::CompleteRequest> completes() const;
  int cancel_waits() const;
  std::string session() const;  // the current session ("" before the first registration)

  // Polls cond (which may read this client) until it holds or timeout passes (real time).
  static bool WaitUntil(const std::function<bool()>& cond,
                        std::chrono::milliseconds timeout = std::chrono::seconds(10));
  bool WaitForCount(const std::string& call, int n,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

 private:
  template <typename T>
  absl::StatusOr<T> Next(std::deque<absl::StatusOr<T>>& queue, const std::string& call, T fallback);

  const std::string session_prefix_;
  mutable std::mutex mu_;
  std::condition_variable lease_cv_;
  std::vector<std::string> calls_;
  std::vector<v1::RegisterRequest> registers_;
  std::vector<v1::HeartbeatRequest> heartbeats_;
  std::vector<v1::LeaseRequest> leases_;
  std::vector<v1::ProgressRequest> progress_;
  std::vector<v1::CompleteRequest> completes_;
  std::deque<absl::StatusOr<v1::RegisterResponse>> register_answers_;
  std::deque<absl::StatusOr<v1::HeartbeatResponse>> heartbeat_answers_;
  std::deque<absl::StatusOr<v1::LeaseResponse>> lease_answers_;
  std::deque<absl::StatusOr<v1::ProgressResponse>> progress_answers_;
  std::deque<absl::StatusOr<v1::CompleteResponse>> complete_answers_;
  std::map<std::string, absl::Status> failures_;
  std::function<void(const v1::CompleteRequest&)> on_complete_;
  std::int64_t heartbeat_interval_ms_ = 1'000;
  std::string session_;
  int sessions_ = 0;
  int cancel_waits_ = 0;
  bool cancelled_ = false;
};

// An executor for agent tests. By default a run reports one progress step ("run", the first
// entry) and returns a SUCCEEDED result with a "pass" outcome per entry; SetBehaviour replaces
// that. While held (Hold(true)) a run waits, before its behaviour, until released or cancelled;
// a cancelled held run returns a FAILED result without running the behaviour.
class FakeExecutor : public agent::Executor {
 public:
  using Behaviour = std::function<absl::StatusOr<v1::ShardResult>(agent::ExecContext&)>;

  explicit FakeExecutor(std::string name = "native");
  std::string name() const override { return name_; }
  absl::StatusOr<v1::ShardResult> Run(agent::ExecContext& ctx) override;

  void SetBehaviour(Behaviour behaviour);
  void Hold(bool hold);
  // Waits (real time) until n runs have started.
  bool WaitRunning(int n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  std::vector<std::string> runs() const;  // shard ids, in the order the runs started
  int cancelled_runs() const;             // held runs that ended on ctx.cancelled()
  // The default result of spec: SUCCEEDED, "pass" for every entry.
  static v1::ShardResult Passing(const v1::ShardSpec& spec);

 private:
  const std::string name_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Behaviour behaviour_;
  bool hold_ = false;
  std::vector<std::string> runs_;
  int cancelled_ = 0;
};

}  // namespace triage::testing
