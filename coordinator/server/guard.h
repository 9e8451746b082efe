#pragma once

// Authentication, authorization and the latency metric around every handler of the
// coordinator's services (coordinator/server/server.cc).

#include <chrono>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/rpc/rpc.h"
#include "coordinator/metrics/prometheus_metrics.h"
#include "coordinator/server/auth.h"
#include "coordinator/server/worker_pool.h"
#include "grpcpp/grpcpp.h"

namespace triage::coord {

class Guard {
 public:
  using Clock = std::chrono::steady_clock;

  Guard(const Authenticator* auth, PrometheusMetrics* metrics) : auth_(auth), metrics_(metrics) {}

  // The caller of ctx, authenticated by its bearer token and authorized for permission.
  absl::StatusOr<Caller> Check(grpc::CallbackServerContext* ctx, Permission permission,
                               std::string_view method) const;

  // The call's latency and status code, in triage_rpc_seconds (when there are metrics).
  void Observe(std::string_view method, const absl::Status& status, Clock::time_point start) const;

  // Runs a unary handler: fn(caller) -> absl::Status.
  template <typename Fn>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* ctx, std::string_view method,
                                  Permission permission, Fn fn) const {
    auto* reactor = ctx->DefaultReactor();
    const auto start = Clock::now();
    auto caller = Check(ctx, permission, method);
    absl::Status st = caller.ok() ? fn(*caller) : caller.status();
    Observe(method, st, start);
    reactor->Finish(rpc::ToGrpc(st));
    return reactor;
  }

  // Runs a unary handler that may block (reads a checkout, builds a report) on pool, so that
  // gRPC's own threads stay free to answer connections. The caller is checked here; fn(caller)
  // then runs after this returns: it must hold its request and response by pointer, not refer
  // to the handler's locals. method must outlive the call (a string literal).
  template <typename Fn>
  grpc::ServerUnaryReactor* Offloaded(WorkerPool& pool, grpc::CallbackServerContext* ctx,
                                      std::string_view method, Permission permission, Fn fn) const {
    auto* reactor = ctx->DefaultReactor();
    const auto start = Clock::now();
    auto caller = Check(ctx, permission, method);
    if (!caller.ok()) {
      Observe(method, caller.status(), start);
      reactor->Finish(rpc::ToGrpc(caller.status()));
      return reactor;
    }
    pool.Post([this, reactor, start, method, who = std::move(*caller), fn = std::move(fn)] {
      absl::Status st = fn(who);
      Observe(method, st, start);
      reactor->Finish(rpc::ToGrpc(st));
    });
    return reactor;
  }

 private:
  const Authenticator* auth_;
  PrometheusMetrics* metrics_;
};

}  // namespace triage::coord
