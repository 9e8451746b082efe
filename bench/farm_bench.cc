// farm_bench: how many lease+complete cycles per second the coordinator sustains, and how long a
// Lease round trip takes, with N simulated agents (default 1,000) on loopback gRPC, next to a
// bare gRPC unary echo measured in the same run with the same client machinery. The ratio
// lease_p50 / echo_p50 is the figure. See docs/bench-farm.md.
//
// One process: the coordinator (real SQLite file in WAL mode under /tmp, default options, as in
// production) behind its CoordinatorServer, a second grpc::Server with the echo service, and the
// simulated agents. The agents are state machines on the async CompletionQueue API, driven by a
// few client threads (--client-threads), each with its own channel (TCP connection) by default,
// like real agents.
//
// Run: build/bench/farm_bench [--agents 1000] [--seconds 10 | --cycles N] [--json]

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "common/clock/clock.h"
#include "common/inventory/inventory.h"
#include "common/util/allocator.h"
#include "common/util/log.h"
#include "common/util/strings.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/persistence/sqlite_store.h"
#include "coordinator/server/auth.h"
#include "coordinator/server/server.h"
#include "echo.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "triage/v1/agent.grpc.pb.h"

namespace triage::farmbench {
namespace {

using SteadyClock = std::chrono::steady_clock;
using bench::EchoMessage;

constexpr char kYamlPath[] =
    "tests/runner/test_config/torch/test_config_training_single_device.yaml";
constexpr char kUnpack[] =
    "tt-forge-models doesn't implement unpack_forward_output for this model.";
constexpr double kTargetCyclesPerSecond = 5000;
constexpr double kTargetLatencyRatio = 2.0;

struct Options {
  int agents = 1000;
  double seconds = 10;
  std::int64_t cycles = 0;  // > 0: a fixed number of cycles instead of a duration
  double warmup = 1;        // seconds left out of the figures (duration mode)
  std::int64_t shards = 0;  // shards in the sweep (0: --cycles, or 100,000 + agents, per pair)
  int client_threads = 2;
  int channels = 0;  // 0: one per agent
  bool json = false;
  bool keep_db = false;
  bool deadlock_detection = false;  // absl::Mutex deadlock detection on (see the docs)
  int repeat = 1;                   // (lease+complete, echo) pairs, one after the other
};

// ---------------------------------------------------------------------------------------------
// The echo service: same server style as the coordinator's (callback API, handler inline).

class EchoService final : public bench::Echo::CallbackService {
 public:
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const EchoMessage* req,
                                 EchoMessage* resp) override {
    *resp = *req;
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// ---------------------------------------------------------------------------------------------
// The sweep input: one unpack_forward_output entry per loader directory, so one shard each.

std::string GenerateYaml(std::int64_t shards) {
  std::string out = "test_config:\n";
  out.reserve(static_cast<std::size_t>(shards) * 200 + 32);
  for (std::int64_t i = 0; i < shards; ++i) {
    char key[64];
    std::snprintf(key, sizeof(key), "m%06lld/pytorch-V-single_device-training",
                  static_cast<long long>(i));
    util::StrAppend(&out, "  ", key,
                    ":\n    status: NOT_SUPPORTED_SKIP\n    bringup_status: FAILED_FE_COMPILATION\n"
                    "    reason: \"",
                    kUnpack, "\"\n");
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Simulated agents.

struct ThreadStats {
  std::vector<std::int64_t> lease_ns, complete_ns, echo_ns;  // in the measured window
  std::int64_t lease_calls = 0, complete_calls = 0, echo_calls = 0;
  std::int64_t cycles_total = 0, cycles_window = 0;
  std::int64_t warm_calls = 0;  // farm calls that ended before the measured window
  std::int64_t rejected = 0, duplicates = 0, rpc_errors = 0, refused = 0, out_of_work = 0;
  std::string first_error;
  SteadyClock::time_point last_done{};
  SteadyClock::time_point first_out_of_work = SteadyClock::time_point::max();
  std::size_t lease_request_bytes = 0, lease_response_bytes = 0, complete_request_bytes = 0;

  void Error(std::int64_t& counter, std::string what) {
    ++counter;
    if (first_error.empty()) first_error = std::move(what);
  }
};

struct PhaseControl {
  // Farm phase: calls that end in [window_start, deadline) are measured; no Lease starts at or
  // after the deadline (in-flight cycles drain unmeasured).
  SteadyClock::time_point window_start{};
  SteadyClock::time_point deadline = SteadyClock::time_point::max();
  std::atomic<std::int64_t> lease_budget{std::numeric_limits<std::int64_t>::max()};
  // Echo phase: a budget of calls; by end order, calls [warm, warm + measured) are measured.
  std::atomic<std::int64_t> echo_budget{0};
  std::atomic<std::int64_t> echo_ended{0};
  std::int64_t echo_warm = 0;
  std::int64_t echo_measured = 0;
  std::atomic<std::int64_t> echo_window_start_ns{0};  // steady ns: end of the last warm call
  std::atomic<std::int64_t> echo_window_end_ns{0};    // steady ns: end of the last measured call
};

struct SimAgent {
  enum class Op { kLease, kComplete, kEcho };

  std::string id;
  std::string session;
  v1::AgentService::Stub* stub = nullptr;
  bench::Echo::Stub* echo = nullptr;
  grpc::CompletionQueue* cq = nullptr;
  ThreadStats* stats = nullptr;
  PhaseControl* ctl = nullptr;

  Op op = Op::kLease;
  std::int64_t seq = 0;
  SteadyClock::time_point started;
  std::unique_ptr<grpc::ClientContext> ctx;
  grpc::Status status;
  v1::LeaseRequest lease_req;
  v1::LeaseResponse lease_resp;
  v1::CompleteRequest complete_req;
  v1::CompleteResponse complete_resp;
  EchoMessage echo_req, echo_resp;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::LeaseResponse>> lease_rpc;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::CompleteResponse>> complete_rpc;
  std::unique_ptr<grpc::ClientAsyncResponseReader<EchoMessage>> echo_rpc;

  void NewContext() {
    ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  }

  // Takes one cycle from the budget (--cycles); false when it is spent.
  bool StartLease() {
    if (ctl->lease_budget.fetch_sub(1, std::memory_order_relaxed) <= 0) return false;
    op = Op::kLease;
    NewContext();
    lease_req.set_agent_id(id);
    lease_req.set_session_id(session);
    lease_req.set_wait_ms(0);
    lease_req.set_request_id(util::StrCat(id, "-r", ++seq));
    lease_resp.Clear();
    started = SteadyClock::now();
    lease_rpc = stub->AsyncLease(ctx.get(), lease_req, cq);
    lease_rpc->Finish(&lease_resp, &status, this);
    return true;
  }

  void StartComplete() {
    op = Op::kComplete;
    NewContext();
    complete_req.Clear();
    complete_req.set_agent_id(id);
    complete_req.set_session_id(session);
    complete_req.set_lease_id(lease_resp.lease_id());
    complete_req.set_fencing_token(lease_resp.fencing_token());
    v1::ShardResult* result = complete_req.mutable_result();
    result->set_status(v1::ShardResult::SUCCEEDED);
    for (const auto& e : lease_resp.shard().entries()) {
      v1::EntryOutcome* o = result->add_entries();
      o->set_key(e.key());
      o->set_file(e.file());
      o->set_arch(lease_resp.shard().arch());
      o->set_verdict("pass");
      o->set_changed(false);
    }
    complete_resp.Clear();
    started = SteadyClock::now();
    complete_rpc = stub->AsyncComplete(ctx.get(), complete_req, cq);
    complete_rpc->Finish(&complete_resp, &status, this);
  }

  // Takes one call from the budget; false when it is spent.
  bool StartEcho() {
    if (ctl->echo_budget.fetch_sub(1, std::memory_order_relaxed) <= 0) return false;
    op = Op::kEcho;
    NewContext();
    echo_req.set_agent_id(id);
    echo_req.set_session_id(session);
    echo_req.set_wait_ms(0);
    echo_req.set_request_id(util::StrCat(id, "-r", ++seq));
    echo_resp.Clear();
    started = SteadyClock::now();
    echo_rpc = echo->AsyncCall(ctx.get(), echo_req, cq);
    echo_rpc->Finish(&echo_resp, &status, this);
    return true;
  }

  // A call ended. Returns false when this agent has nothing more to do in the phase.
  bool OnDone(bool ok) {
    const auto now = SteadyClock::now();
    const std::int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - started).count();
    stats->last_done = std::max(stats->last_done, now);
    const bool in_window = now >= ctl->window_start && now < ctl->deadline;
    if (op != Op::kEcho && now < ctl->window_start) ++stats->warm_calls;
    if (!ok || !status.ok()) {
      stats->Error(stats->rpc_errors,
                   util::StrCat(id, ": ", OpName(), " failed: ", status.error_message()));
      return false;
    }
    switch (op) {
      case Op::kLease:
        ++stats->lease_calls;
        if (lease_resp.reregister() || lease_resp.draining()) {
          stats->Error(
              stats->refused,
              util::StrCat(id, ": Lease refused (reregister=", lease_resp.reregister() ? 1 : 0,
                           ", draining=", lease_resp.draining() ? 1 : 0, ")"));
          return false;
        }
        if (!lease_resp.granted()) {  // the sweep ran out of shards: not a measured cycle
          if (stats->out_of_work++ == 0) stats->first_out_of_work = now;
          return false;
        }
        if (in_window) stats->lease_ns.push_back(ns);
        if (stats->lease_response_bytes == 0) {
          stats->lease_request_bytes = lease_req.ByteSizeLong();
          stats->lease_response_bytes = lease_resp.ByteSizeLong();
        }
        StartComplete();
        if (stats->complete_request_bytes == 0) {
          stats->complete_request_bytes = complete_req.ByteSizeLong();
        }
        return true;
      case Op::kComplete:
        ++stats->complete_calls;
        if (!complete_resp.accepted()) {
          stats->Error(stats->rejected,
                       util::StrCat(id, ": Complete of ", complete_req.lease_id(),
                                    " rejected: ", complete_resp.rejected_reason()));
        } else if (complete_resp.duplicate()) {
          stats->Error(
              stats->duplicates,
              util::StrCat(id, ": Complete of ", complete_req.lease_id(), " was a duplicate"));
        } else {
          ++stats->cycles_total;
          if (in_window) {
            stats->complete_ns.push_back(ns);
            ++stats->cycles_window;
          }
        }
        if (now >= ctl->deadline) return false;
        return StartLease();
      case Op::kEcho: {
        ++stats->echo_calls;
        const std::int64_t n = ctl->echo_ended.fetch_add(1, std::memory_order_relaxed);
        const std::int64_t t = now.time_since_epoch().count();
        if (n >= ctl->echo_warm && n < ctl->echo_warm + ctl->echo_measured) {
          stats->echo_ns.push_back(ns);
        }
        if (n == ctl->echo_warm - 1) ctl->echo_window_start_ns.store(t);
        if (n == ctl->echo_warm + ctl->echo_measured - 1) ctl->echo_window_end_ns.store(t);
        return StartEcho();
      }
    }
    return false;
  }

  const char* OpName() const {
    switch (op) {
      case Op::kLease:
        return "Lease";
      case Op::kComplete:
        return "Complete";
      case Op::kEcho:
        return "Echo";
    }
    return "?";
  }
};

// Runs one phase: client thread t drives agents t, t + T, t + 2T, ... on its own completion
// queue until every one of them is done.
void RunPhase(std::vector<SimAgent>& agents, int threads, bool echo, PhaseControl* ctl,
              std::vector<ThreadStats>* stats) {
  stats->assign(static_cast<std::size_t>(threads), ThreadStats{});
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ThreadStats& st = (*stats)[static_cast<std::size_t>(t)];
      grpc::CompletionQueue cq;
      int active = 0;
      for (std::size_t i = static_cast<std::size_t>(t); i < agents.size();
           i += static_cast<std::size_t>(threads)) {
        SimAgent& a = agents[i];
        a.cq = &cq;
        a.stats = &st;
        a.ctl = ctl;
        if (echo) {
          if (a.StartEcho()) ++active;
        } else {
          if (a.StartLease()) ++active;
        }
      }
      void* tag;
      bool ok;
      while (active > 0 && cq.Next(&tag, &ok)) {
        if (!static_cast<SimAgent*>(tag)->OnDone(ok)) --active;
      }
      cq.Shutdown();
      while (cq.Next(&tag, &ok)) {
      }
    });
  }
  for (auto& th : pool) th.join();
}

// ---------------------------------------------------------------------------------------------
// Figures.

struct Latency {
  std::size_t n = 0;
  double p50_us = 0, p99_us = 0, mean_us = 0, max_us = 0;
};

Latency Summarize(std::vector<std::int64_t> v) {
  Latency l;
  l.n = v.size();
  if (v.empty()) return l;
  auto at = [&](double q) {
    auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
    k = std::min(k, v.size() - 1);
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return static_cast<double>(v[k]) / 1e3;
  };
  l.p50_us = at(0.50);
  l.p99_us = at(0.99);
  double sum = 0;
  std::int64_t mx = 0;
  for (auto x : v) {
    sum += static_cast<double>(x);
    mx = std::max(mx, x);
  }
  l.mean_us = sum / static_cast<double>(v.size()) / 1e3;
  l.max_us = static_cast<double>(mx) / 1e3;
  return l;
}

std::vector<std::int64_t> Merge(const std::vector<ThreadStats>& stats,
                                std::vector<std::int64_t> ThreadStats::*field) {
  std::vector<std::int64_t> out;
  for (const auto& s : stats) out.insert(out.end(), (s.*field).begin(), (s.*field).end());
  return out;
}

std::int64_t Sum(const std::vector<ThreadStats>& stats, std::int64_t ThreadStats::*field) {
  std::int64_t n = 0;
  for (const auto& s : stats) n += s.*field;
  return n;
}

SteadyClock::time_point LastDone(const std::vector<ThreadStats>& stats) {
  SteadyClock::time_point t{};
  for (const auto& s : stats) t = std::max(t, s.last_done);
  return t;
}

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

nlohmann::json ToJson(const Latency& l) {
  return {{"n", l.n},
          {"p50_us", l.p50_us},
          {"p99_us", l.p99_us},
          {"mean_us", l.mean_us},
          {"max_us", l.max_us}};
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

// Removes the temporary directory however main returns.
struct TempDir {
  std::filesystem::path path;
  bool keep = false;
  ~TempDir() {
    if (path.empty() || keep) return;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// CPU time (user + system) of the whole process so far.
double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

// Busy and total jiffies of the whole machine (/proc/stat), to tell other work on the machine
// from this process's own use.
struct MachineCpu {
  double busy = 0, total = 0;
};
MachineCpu ReadMachineCpu() {
  MachineCpu m;
  if (FILE* f = std::fopen("/proc/stat", "r")) {
    unsigned long long v[10] = {};
    if (std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                    &v[4], &v[5], &v[6], &v[7]) == 8) {
      m.busy = static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
      m.total = m.busy + static_cast<double>(v[3] + v[4]);
    }
    std::fclose(f);
  }
  return m;
}
// Busy cores of the whole machine between two readings.
double BusyCores(const MachineCpu& a, const MachineCpu& b) {
  const double total = b.total - a.total;
  return total > 0 ? (b.busy - a.busy) / total * std::thread::hardware_concurrency() : 0;
}

// The 1-minute load average when the run starts (other work on the machine skews the figures).
double LoadAverage() {
  double load = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

void RaiseFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// The figures of one (lease+complete, echo) pair.
struct Pair {
  double cycles_per_s = 0, farm_rpcs_per_s = 0, farm_window_s = 0;
  std::int64_t cycles_window = 0, cycles_total = 0;
  std::int64_t rejected = 0, duplicates = 0, farm_rpc_errors = 0, refused = 0, out_of_work = 0;
  bool ran_dry = false;
  Latency lease, complete, echo;
  double echo_per_s = 0, echo_window_s = 0;
  std::int64_t echo_rpc_errors = 0;
  double ratio_p50 = 0, ratio_p99 = 0;
  double farm_cores = 0, echo_cores = 0, farm_machine_cores = 0, echo_machine_cores = 0;
  double farm_us_per_call = 0, echo_us_per_call = 0;
  std::int64_t commits = 0, committed = 0;
  double group_size = 0;
};

// Each column's median over the pairs (a column's median may come from a different pair than
// another's).
struct Medians {
  double cycles_per_s = 0, lease_p50_us = 0, lease_p99_us = 0, echo_per_s = 0, echo_p50_us = 0,
         echo_p99_us = 0, ratio_p50 = 0, ratio_p99 = 0, farm_us_per_call = 0, echo_us_per_call = 0,
         group_size = 0;
};

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Medians MediansOf(const std::vector<Pair>& pairs) {
  auto col = [&](auto get) {
    std::vector<double> v;
    for (const auto& p : pairs) v.push_back(get(p));
    return MedianOf(std::move(v));
  };
  Medians m;
  m.cycles_per_s = col([](const Pair& p) { return p.cycles_per_s; });
  m.lease_p50_us = col([](const Pair& p) { return p.lease.p50_us; });
  m.lease_p99_us = col([](const Pair& p) { return p.lease.p99_us; });
  m.echo_per_s = col([](const Pair& p) { return p.echo_per_s; });
  m.echo_p50_us = col([](const Pair& p) { return p.echo.p50_us; });
  m.echo_p99_us = col([](const Pair& p) { return p.echo.p99_us; });
  m.ratio_p50 = col([](const Pair& p) { return p.ratio_p50; });
  m.ratio_p99 = col([](const Pair& p) { return p.ratio_p99; });
  m.farm_us_per_call = col([](const Pair& p) { return p.farm_us_per_call; });
  m.echo_us_per_call = col([](const Pair& p) { return p.echo_us_per_call; });
  m.group_size = col([](const Pair& p) { return p.group_size; });
  return m;
}

nlohmann::json ToJson(const Medians& m) {
  return {{"cycles_per_s", m.cycles_per_s},
          {"lease_p50_us", m.lease_p50_us},
          {"lease_p99_us", m.lease_p99_us},
          {"echo_calls_per_s", m.echo_per_s},
          {"echo_p50_us", m.echo_p50_us},
          {"echo_p99_us", m.echo_p99_us},
          {"ratio_p50", m.ratio_p50},
          {"ratio_p99", m.ratio_p99},
          {"farm_us_per_call", m.farm_us_per_call},
          {"echo_us_per_call", m.echo_us_per_call},
          {"mean_group_size", m.group_size}};
}

nlohmann::json Summary(const Pair& p) {
  Medians one = MediansOf({p});
  nlohmann::json j = ToJson(one);
  j["ran_out_of_work"] = p.ran_dry;
  return j;
}

// The full table of one pair.
std::string DetailTable(const Pair& p, double warmup) {
  auto row = [](const std::string& name, double rate, const Latency& l) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "  %-24s %12.0f %10.0f %10.0f %10.0f %10zu\n", name.c_str(),
                  rate, l.p50_us, l.p99_us, l.mean_us, l.n);
    return std::string(buf);
  };
  std::string out;
  util::StrAppend(&out, "  lease+complete: ", p.cycles_window, " cycles in ",
                  Fixed(p.farm_window_s, 2), " s",
                  warmup > 0 ? util::StrCat(" (after ", Fixed(warmup, 1), " s warm-up)") : "",
                  "; echo: ", p.echo.n, " calls in ", Fixed(p.echo_window_s, 2), " s\n\n");
  char buf[160];
  std::snprintf(buf, sizeof(buf), "  %-24s %12s %10s %10s %10s %10s\n", "", "per second", "p50 us",
                "p99 us", "mean us", "samples");
  out += buf;
  std::snprintf(buf, sizeof(buf), "  %-24s %12.0f %10s %10s %10s %10lld\n", "lease+complete cycles",
                p.cycles_per_s, "-", "-", "-", static_cast<long long>(p.cycles_window));
  out += buf;
  out += row("  Lease", p.lease.n / std::max(p.farm_window_s, 1e-9), p.lease);
  out += row("  Complete", p.complete.n / std::max(p.farm_window_s, 1e-9), p.complete);
  out += row("bare echo", p.echo_per_s, p.echo);
  util::StrAppend(&out, "  (lease+complete: ", Fixed(p.farm_rpcs_per_s, 0),
                  " RPCs/s, the rate to set against the echo's calls/s)\n");
  util::StrAppend(&out, "\n  ratio Lease/echo: p50 ", Fixed(p.ratio_p50, 2), "x, p99 ",
                  Fixed(p.ratio_p99, 2), "x\n");
  util::StrAppend(&out, "  process CPU: lease+complete ", Fixed(p.farm_cores, 2), " cores, ",
                  Fixed(p.farm_us_per_call, 0), " us per RPC; echo ", Fixed(p.echo_cores, 2),
                  " cores, ", Fixed(p.echo_us_per_call, 0),
                  " us per RPC (clients and servers together)\n");
  util::StrAppend(&out, "  machine CPU (all processes): ", Fixed(p.farm_machine_cores, 2),
                  " busy cores during lease+complete, ", Fixed(p.echo_machine_cores, 2),
                  " during echo\n");
  util::StrAppend(&out, "  group commit (whole phase): ", p.committed, " mutations in ", p.commits,
                  " commits, ", Fixed(p.group_size, 1), " per commit\n");
  return out;
}

// One line per pair, then the medians.
std::string RepetitionTable(const std::vector<Pair>& pairs, const Medians& med) {
  std::string out = "\n";
  char buf[200];
  const char* fmt = "  %-8s %9s %9s %9s %9s %9s %9s %8s %8s %9s %6s\n";
  std::snprintf(buf, sizeof(buf), fmt, "", "cycles/s", "Lease p50", "p99 ms", "echo/s", "echo p50",
                "p99 ms", "p50 x", "p99 x", "us/RPC", "group");
  out += buf;
  auto line = [&](const std::string& name, const Medians& m) {
    std::snprintf(buf, sizeof(buf),
                  "  %-8s %9.0f %9.1f %9.1f %9.0f %9.1f %9.1f %8.2f %8.2f %4.0f/%-4.0f %6.1f\n",
                  name.c_str(), m.cycles_per_s, m.lease_p50_us / 1000, m.lease_p99_us / 1000,
                  m.echo_per_s, m.echo_p50_us / 1000, m.echo_p99_us / 1000, m.ratio_p50,
                  m.ratio_p99, m.farm_us_per_call, m.echo_us_per_call, m.group_size);
    out += buf;
  };
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    line(util::StrCat("run ", i + 1), MediansOf({pairs[i]}));
  }
  line("median", med);
  out +=
      "  (latencies in ms; us/RPC: process CPU per RPC, lease+complete/echo; group: "
      "mutations per commit)\n";
  return out;
}

int Run(const Options& opt) {
  using coord::Coordinator;
  using coord::CoordinatorServer;
  const bool fixed_cycles = opt.cycles > 0;
  const std::int64_t shards =
      opt.shards > 0 ? opt.shards
                     : (fixed_cycles ? opt.cycles : 100000LL + opt.agents) * opt.repeat;
  const int channels = opt.channels > 0 ? std::min(opt.channels, opt.agents) : opt.agents;
  const int threads = std::max(1, opt.client_threads);
  auto say = [&](const std::string& s) { std::cerr << "farm_bench: " << s << std::endl; };
  if (fixed_cycles && shards < opt.cycles * opt.repeat) {
    say(util::StrCat("--shards ", shards, " is fewer than --cycles x --repeat"));
    return 1;
  }
  RaiseFileLimit();
  const double load_at_start = LoadAverage();

  // The coordinator: a real SQLite file (WAL, default options) in a fresh directory.
  TempDir tmp;
  {
    std::string templ = (std::filesystem::temp_directory_path() / "farm_bench.XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) {
      say("cannot create a temporary directory");
      return 1;
    }
    tmp.path = templ;
    tmp.keep = opt.keep_db;
  }
  const auto db_path = tmp.path / "coordinator.db";
  auto store = coord::SqliteStore::Open(db_path);
  if (!store.ok()) {
    say(util::StrCat("cannot open the store: ", util::MessageOf(store.status())));
    return 1;
  }
  say(util::StrCat("generating a sweep of ", shards, " shards"));
  const std::string yaml = GenerateYaml(shards);
  coord::SweepReader reader =
      [&yaml](const v1::StartSweepRequest&) -> absl::StatusOr<coord::SweepInput> {
    coord::SweepInput in;
    in.repo = "/bench/tt-xla";
    in.ttxla_commit = std::string(40, 'a');
    in.forge_commit = std::string(40, 'b');
    // The generated file is larger than the production cap (8 MiB) for big sweeps: lift it.
    inventory::ParseOptions parse;
    parse.max_bytes = std::max(parse.max_bytes, yaml.size() + 1);
    in.inventory.documents.push_back(inventory::Document::Parse(kYamlPath, yaml, parse));
    for (const auto& d : in.inventory.documents.back().diagnostics()) {
      in.inventory.diagnostics.push_back(d);
    }
    return in;
  };
  Coordinator coordinator(coord::CoordinatorOptions{}, store->get(), SystemClock::Get(), reader);

  coord::ServerConfig config;
  config.agent_address = "127.0.0.1:0";
  config.control_address = "127.0.0.1:0";
  config.insecure = true;
  auto server =
      CoordinatorServer::Start(config, &coordinator, coord::Authenticator::Disabled(), nullptr);
  if (!server.ok()) {
    say(util::StrCat("cannot start the coordinator: ", util::MessageOf(server.status())));
    return 1;
  }

  // The echo server: same process, same server options as the agent port.
  EchoService echo_service;
  int echo_port = 0;
  grpc::ServerBuilder echo_builder;
  echo_builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &echo_port);
  echo_builder.RegisterService(&echo_service);
  echo_builder.SetMaxReceiveMessageSize(64 << 20);
  echo_builder.SetMaxSendMessageSize(64 << 20);
  std::unique_ptr<grpc::Server> echo_server = echo_builder.BuildAndStart();
  if (echo_server == nullptr || echo_port == 0) {
    say("cannot start the echo server");
    return 1;
  }

  // Channels: one TCP connection each (a local subchannel pool, else equal channels share one).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::vector<std::unique_ptr<v1::AgentService::Stub>> agent_stubs;
  std::vector<std::unique_ptr<bench::Echo::Stub>> echo_stubs;
  const auto connect_by = std::chrono::system_clock::now() + std::chrono::seconds(30);
  for (int i = 0; i < channels; ++i) {
    auto ch = grpc::CreateCustomChannel(util::StrCat("127.0.0.1:", (*server)->agent_port()),
                                        grpc::InsecureChannelCredentials(), args);
    auto ech = grpc::CreateCustomChannel(util::StrCat("127.0.0.1:", echo_port),
                                         grpc::InsecureChannelCredentials(), args);
    if (!ch->WaitForConnected(connect_by) || !ech->WaitForConnected(connect_by)) {
      say(util::StrCat("channel ", i, " did not connect"));
      return 1;
    }
    agent_stubs.push_back(v1::AgentService::NewStub(ch));
    echo_stubs.push_back(bench::Echo::NewStub(ech));
  }

  // Register the agents over gRPC.
  std::vector<SimAgent> agents(static_cast<std::size_t>(opt.agents));
  for (int i = 0; i < opt.agents; ++i) {
    SimAgent& a = agents[static_cast<std::size_t>(i)];
    char id[32];
    std::snprintf(id, sizeof(id), "bench-agent-%04d", i);
    a.id = id;
    a.stub = agent_stubs[static_cast<std::size_t>(i % channels)].get();
    a.echo = echo_stubs[static_cast<std::size_t>(i % channels)].get();
    v1::RegisterRequest req;
    auto* d = req.mutable_dimensions();
    d->set_agent_id(a.id);
    d->set_arch("n150");
    d->set_device_count(1);
    d->set_hostname("farm-bench");
    v1::RegisterResponse resp;
    grpc::ClientContext ctx;
    grpc::Status st = a.stub->Register(&ctx, req, &resp);
    if (!st.ok()) {
      say(util::StrCat("Register ", a.id, ": ", st.error_message()));
      return 1;
    }
    a.session = resp.session_id();
  }

  // The sweep (through the core API: what is measured is the agents' traffic).
  const auto plan_start = SteadyClock::now();
  v1::StartSweepRequest sweep_req;
  sweep_req.set_repo_path("/bench/tt-xla");
  sweep_req.set_reason("farm_bench");
  auto sweep = coordinator.StartSweep(sweep_req, coord::Caller{"farm_bench", "operator"});
  if (!sweep.ok()) {
    say(util::StrCat("StartSweep: ", util::MessageOf(sweep.status())));
    return 1;
  }
  const std::int64_t planned =
      (*sweep).shards_by_state().count("queued") ? (*sweep).shards_by_state().at("queued") : 0;
  say(util::StrCat("sweep ", sweep->id(), ": ", planned, " shards queued (StartSweep took ",
                   Fixed(Seconds(SteadyClock::now() - plan_start), 2), " s); ", opt.agents,
                   " agents on ", channels, " channels, ", threads, " client threads"));
  if (planned != shards) {
    say(util::StrCat("expected ", shards, " queued shards, got ", planned));
    for (const auto& p : sweep->problems()) say(util::StrCat("  sweep problem: ", p));
    return 1;
  }

  // The measurement: --repeat pairs of (lease+complete phase, echo phase), one after the other.
  const double warmup = fixed_cycles ? 0.0 : opt.warmup;
  std::vector<Pair> pairs;
  std::int64_t cycles_total = 0;
  std::vector<std::string> errors;
  auto first_error = [](const std::vector<ThreadStats>& stats) {
    for (const auto& s : stats) {
      if (!s.first_error.empty()) return s.first_error;
    }
    return std::string();
  };
  std::size_t lease_req_bytes = 0, lease_resp_bytes = 0, complete_req_bytes = 0;
  for (int rep = 0; rep < opt.repeat; ++rep) {
    Pair p;
    const std::string tag = opt.repeat > 1 ? util::StrCat(" [", rep + 1, "/", opt.repeat, "]") : "";
    // Phase 1: lease+complete cycles.
    PhaseControl farm_ctl;
    const auto farm_start = SteadyClock::now();
    farm_ctl.window_start = farm_start + std::chrono::duration_cast<SteadyClock::duration>(
                                             std::chrono::duration<double>(warmup));
    if (!fixed_cycles) {
      farm_ctl.deadline = farm_ctl.window_start + std::chrono::duration_cast<SteadyClock::duration>(
                                                      std::chrono::duration<double>(opt.seconds));
    }
    say(fixed_cycles ? util::StrCat("lease+complete", tag, ": ", opt.cycles, " cycles")
                     : util::StrCat("lease+complete", tag, ": ", Fixed(warmup, 1), " s warm-up + ",
                                    Fixed(opt.seconds, 1), " s"));
    if (fixed_cycles) farm_ctl.lease_budget = opt.cycles;
    std::vector<ThreadStats> farm;
    const double farm_cpu0 = ProcessCpuSeconds();
    const MachineCpu farm_machine0 = ReadMachineCpu();
    const auto commits0 = coordinator.commit_stats();
    RunPhase(agents, threads, /*echo=*/false, &farm_ctl, &farm);
    const auto commits1 = coordinator.commit_stats();
    p.commits = static_cast<std::int64_t>(commits1.flushes - commits0.flushes);
    p.committed = static_cast<std::int64_t>(commits1.committed - commits0.committed);
    p.group_size =
        p.commits > 0 ? static_cast<double>(p.committed) / static_cast<double>(p.commits) : 0;
    const double farm_cpu_s = ProcessCpuSeconds() - farm_cpu0;
    p.farm_machine_cores = BusyCores(farm_machine0, ReadMachineCpu());
    const double farm_wall_s = Seconds(SteadyClock::now() - farm_start);
    p.farm_cores = farm_wall_s > 0 ? farm_cpu_s / farm_wall_s : 0;
    // Duration mode: the window is [warm-up end, deadline), or to the first Lease that found no
    // work when the sweep ran dry; fixed cycles: the whole phase.
    auto farm_end = fixed_cycles ? LastDone(farm) : std::min(LastDone(farm), farm_ctl.deadline);
    for (const auto& s : farm) farm_end = std::min(farm_end, s.first_out_of_work);
    p.farm_window_s = Seconds(farm_end - farm_ctl.window_start);
    p.cycles_window = Sum(farm, &ThreadStats::cycles_window);
    p.cycles_total = Sum(farm, &ThreadStats::cycles_total);
    cycles_total += p.cycles_total;
    const std::int64_t warm_calls = Sum(farm, &ThreadStats::warm_calls);
    p.rejected = Sum(farm, &ThreadStats::rejected);
    p.duplicates = Sum(farm, &ThreadStats::duplicates);
    p.farm_rpc_errors = Sum(farm, &ThreadStats::rpc_errors);
    p.refused = Sum(farm, &ThreadStats::refused);
    p.out_of_work = Sum(farm, &ThreadStats::out_of_work);
    p.lease = Summarize(Merge(farm, &ThreadStats::lease_ns));
    p.complete = Summarize(Merge(farm, &ThreadStats::complete_ns));
    p.cycles_per_s = p.farm_window_s > 0 ? p.cycles_window / p.farm_window_s : 0;
    const auto farm_measured = static_cast<std::int64_t>(p.lease.n + p.complete.n);
    p.farm_rpcs_per_s = p.farm_window_s > 0 ? farm_measured / p.farm_window_s : 0;
    // Out of work before the deadline: the sweep was too small for the duration.
    p.ran_dry = !fixed_cycles && p.out_of_work > 0;
    if (!farm.empty() && farm[0].lease_response_bytes > 0) {
      lease_req_bytes = farm[0].lease_request_bytes;
      lease_resp_bytes = farm[0].lease_response_bytes;
      complete_req_bytes = farm[0].complete_request_bytes;
    }

    // Phase 2: the bare echo, as many measured calls as phase 1 measured (Lease + Complete; at
    // least 10 per agent so that a slow phase 1 still gives a steady echo figure), after as many
    // warm-up calls, and (duration mode) one unmeasured drain call per agent.
    PhaseControl echo_ctl;
    echo_ctl.echo_warm = fixed_cycles ? 0 : std::max<std::int64_t>(warm_calls, opt.agents);
    echo_ctl.echo_measured = std::max<std::int64_t>(farm_measured, 10LL * opt.agents);
    echo_ctl.echo_budget =
        echo_ctl.echo_warm + echo_ctl.echo_measured + (fixed_cycles ? 0 : opt.agents);
    say(util::StrCat("echo", tag, ": ", echo_ctl.echo_warm, " warm-up + ", echo_ctl.echo_measured,
                     " measured calls"));
    std::vector<ThreadStats> echo;
    const auto echo_start = SteadyClock::now();
    const double echo_cpu0 = ProcessCpuSeconds();
    const MachineCpu echo_machine0 = ReadMachineCpu();
    RunPhase(agents, threads, /*echo=*/true, &echo_ctl, &echo);
    const double echo_cpu_s = ProcessCpuSeconds() - echo_cpu0;
    p.echo_machine_cores = BusyCores(echo_machine0, ReadMachineCpu());
    const double echo_wall_s = Seconds(SteadyClock::now() - echo_start);
    p.echo_cores = echo_wall_s > 0 ? echo_cpu_s / echo_wall_s : 0;
    const std::int64_t echo_calls = Sum(echo, &ThreadStats::echo_calls);
    const std::int64_t farm_calls =
        Sum(farm, &ThreadStats::lease_calls) + Sum(farm, &ThreadStats::complete_calls);
    // Process CPU (clients and servers together) per call, over the whole phase.
    p.farm_us_per_call = farm_calls > 0 ? farm_cpu_s / farm_calls * 1e6 : 0;
    p.echo_us_per_call = echo_calls > 0 ? echo_cpu_s / echo_calls * 1e6 : 0;
    auto at = [](std::int64_t ns, SteadyClock::time_point otherwise) {
      return ns != 0 ? SteadyClock::time_point(SteadyClock::duration(ns)) : otherwise;
    };
    const auto echo_window_start = at(echo_ctl.echo_window_start_ns.load(), echo_start);
    const auto echo_window_end = at(echo_ctl.echo_window_end_ns.load(), LastDone(echo));
    p.echo = Summarize(Merge(echo, &ThreadStats::echo_ns));
    p.echo_window_s = Seconds(echo_window_end - echo_window_start);
    p.echo_per_s = p.echo_window_s > 0 ? p.echo.n / p.echo_window_s : 0;
    p.echo_rpc_errors = Sum(echo, &ThreadStats::rpc_errors);
    p.ratio_p50 = p.echo.p50_us > 0 ? p.lease.p50_us / p.echo.p50_us : 0;
    p.ratio_p99 = p.echo.p99_us > 0 ? p.lease.p99_us / p.echo.p99_us : 0;

    if (p.rejected + p.duplicates + p.farm_rpc_errors + p.refused > 0) {
      errors.push_back(util::StrCat(
          "lease+complete", tag, ": ", p.rejected, " rejected, ", p.duplicates, " duplicate, ",
          p.refused, " refused, ", p.farm_rpc_errors, " failed calls; first: ", first_error(farm)));
    }
    if (p.echo_rpc_errors > 0) {
      errors.push_back(util::StrCat("echo", tag, ": ", p.echo_rpc_errors,
                                    " failed calls; first: ", first_error(echo)));
    }
    if (fixed_cycles && p.cycles_total != opt.cycles) {
      errors.push_back(util::StrCat(p.cycles_total, " cycles done of ", opt.cycles, tag));
    }
    pairs.push_back(p);
    if (p.ran_dry) break;  // no shards left for another pair
  }

  // What the coordinator says: every accepted result recorded, one shard succeeded per cycle.
  std::int64_t succeeded = 0;
  std::size_t results = 0;
  if (auto view = coordinator.GetSweep(sweep->id()); view.ok()) {
    auto it = view->shards_by_state().find("succeeded");
    if (it != view->shards_by_state().end()) succeeded = it->second;
  }
  if (auto r = coordinator.Results(sweep->id()); r.ok()) results = r->size();
  if (succeeded != cycles_total || static_cast<std::int64_t>(results) != cycles_total) {
    errors.push_back(util::StrCat("the coordinator has ", succeeded, " succeeded shards and ",
                                  results, " results for ", cycles_total, " accepted completes"));
  }

  (*server)->Shutdown();
  echo_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));

  // The figures judged against the targets: the one pair, or the medians of the pairs.
  const Medians med = MediansOf(pairs);
  const bool cycles_ok = med.cycles_per_s >= kTargetCyclesPerSecond;
  const bool ratio_ok = med.ratio_p50 > 0 && med.ratio_p50 <= kTargetLatencyRatio;
  const std::size_t echo_bytes = agents.empty() ? 0 : agents[0].echo_req.ByteSizeLong();
  const Pair& one = pairs.front();
  const bool ran_dry = pairs.back().ran_dry;
  const std::int64_t out_of_work = pairs.back().out_of_work;
  std::int64_t rejected = 0, duplicates = 0, rpc_errors = 0;
  for (const auto& p : pairs) {
    rejected += p.rejected;
    duplicates += p.duplicates;
    rpc_errors += p.farm_rpc_errors + p.echo_rpc_errors;
  }

  if (opt.json) {
    nlohmann::json j;
    j["config"] = {{"agents", opt.agents},
                   {"channels", channels},
                   {"client_threads", threads},
                   {"mode", fixed_cycles ? "cycles" : "seconds"},
                   {"seconds", fixed_cycles ? 0.0 : opt.seconds},
                   {"warmup_s", warmup},
                   {"cycles", opt.cycles},
                   {"repeat", opt.repeat},
                   {"shards", shards},
                   {"hardware_threads", std::thread::hardware_concurrency()},
                   {"load_average_at_start", load_at_start},
                   {"deadlock_detection", opt.deadlock_detection},
                   {"allocator", util::AllocatorName()}};
    // The first pair in the detailed layout (the only one without --repeat).
    j["cpu"] = {{"farm_cores", one.farm_cores},
                {"farm_us_per_call", one.farm_us_per_call},
                {"echo_cores", one.echo_cores},
                {"echo_us_per_call", one.echo_us_per_call},
                {"machine_busy_cores_farm", one.farm_machine_cores},
                {"machine_busy_cores_echo", one.echo_machine_cores}};
    j["lease_complete"] = {
        {"cycles_per_s", one.cycles_per_s},  {"rpcs_per_s", one.farm_rpcs_per_s},
        {"window_s", one.farm_window_s},     {"cycles_measured", one.cycles_window},
        {"cycles_total", one.cycles_total},  {"lease", ToJson(one.lease)},
        {"complete", ToJson(one.complete)},  {"rejected", one.rejected},
        {"duplicates", one.duplicates},      {"refused", one.refused},
        {"rpc_errors", one.farm_rpc_errors}, {"ran_out_of_work", one.ran_dry}};
    j["echo"] = {{"calls_per_s", one.echo_per_s},
                 {"window_s", one.echo_window_s},
                 {"latency", ToJson(one.echo)},
                 {"rpc_errors", one.echo_rpc_errors}};
    j["ratio"] = {{"lease_p50_over_echo_p50", one.ratio_p50},
                  {"lease_p99_over_echo_p99", one.ratio_p99}};
    nlohmann::json reps = nlohmann::json::array();
    for (const auto& p : pairs) reps.push_back(Summary(p));
    j["repetitions"] = reps;
    j["median"] = ToJson(med);
    j["message_bytes"] = {{"lease_request", lease_req_bytes},
                          {"lease_response", lease_resp_bytes},
                          {"complete_request", complete_req_bytes},
                          {"echo", echo_bytes}};
    j["targets"] = {{"judged_on", pairs.size() > 1 ? "median" : "the one pair"},
                    {"cycles_per_s", kTargetCyclesPerSecond},
                    {"cycles_per_s_met", cycles_ok},
                    {"lease_echo_ratio", kTargetLatencyRatio},
                    {"lease_echo_ratio_met", ratio_ok}};
    j["coordinator"] = {{"succeeded_shards", succeeded},
                        {"results", results},
                        {"commits", one.commits},
                        {"mutations_committed", one.committed},
                        {"mean_group_size", one.group_size}};
    j["errors"] = errors;
    std::cout << j.dump(2) << std::endl;
  } else {
    std::string out;
    util::StrAppend(&out, "farm_bench: ", opt.agents, " agents, ", channels, " channels, ", threads,
                    " client threads, ", std::thread::hardware_concurrency(),
                    " hardware threads (load average ", Fixed(load_at_start, 2),
                    " at start); coordinator, echo server and agents in one process; ",
                    util::AllocatorName(), "\n");
    util::StrAppend(&out, "  sweep of ", shards, " shards, SQLite WAL at ", db_path.string(), "\n");
    util::StrAppend(&out, "  messages: LeaseRequest ", lease_req_bytes, " B, LeaseResponse ",
                    lease_resp_bytes, " B, CompleteRequest ", complete_req_bytes, " B, echo ",
                    echo_bytes, " B each way\n");
    if (pairs.size() == 1) {
      out += DetailTable(one, warmup);
    } else {
      out += RepetitionTable(pairs, med);
    }
    const std::string judged = pairs.size() > 1 ? " (median)" : "";
    util::StrAppend(&out, "  target cycles/s >= ", Fixed(kTargetCyclesPerSecond, 0), judged, ": ",
                    Fixed(med.cycles_per_s, 0), "  ", cycles_ok ? "PASS" : "MISS", "\n");
    util::StrAppend(&out, "  target Lease p50 <= ", Fixed(kTargetLatencyRatio, 1), "x echo p50",
                    judged, ": ", Fixed(med.ratio_p50, 2), "x  ", ratio_ok ? "PASS" : "MISS", "\n");
    util::StrAppend(&out, "  completes rejected: ", rejected, ", duplicate: ", duplicates,
                    ", failed calls: ", rpc_errors, "; coordinator: ", succeeded,
                    " shards succeeded, ", results, " results\n");
    if (ran_dry) {
      util::StrAppend(&out, "  note: the sweep ran out of shards before the deadline (",
                      out_of_work, " agents found no work); raise --shards\n");
    }
    for (const auto& e : errors) util::StrAppend(&out, "  ERROR: ", e, "\n");
    std::cout << out << std::flush;
  }
  return errors.empty() ? 0 : 1;
}

}  // namespace
}  // namespace triage::farmbench

int main(int argc, char** argv) {
  triage::farmbench::Options opt;
  CLI::App app{
      "farm_bench: lease+complete cycles/s and Lease latency with simulated agents on loopback "
      "gRPC, next to a bare unary echo measured in the same run"};
  app.add_option("--agents", opt.agents, "simulated agents (each registered, distinct id)")
      ->check(CLI::Range(1, 100000));
  auto* seconds = app.add_option("--seconds", opt.seconds, "measured duration (after warm-up)")
                      ->check(CLI::PositiveNumber);
  auto* cycles =
      app.add_option("--cycles", opt.cycles, "a fixed number of cycles instead of a duration")
          ->check(CLI::PositiveNumber);
  seconds->excludes(cycles);
  app.add_option("--warmup", opt.warmup, "seconds left out of the figures (duration mode)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--shards", opt.shards,
                 "shards in the sweep (default: --cycles, or 100000 + agents, times --repeat)")
      ->check(CLI::PositiveNumber);
  app.add_option("--client-threads", opt.client_threads, "threads driving the agents' calls")
      ->check(CLI::Range(1, 64));
  app.add_option("--channels", opt.channels, "client channels/connections (default: one per agent)")
      ->check(CLI::PositiveNumber);
  app.add_option("--repeat", opt.repeat,
                 "measure N (lease+complete, echo) pairs one after the other and judge the "
                 "targets on their medians")
      ->check(CLI::Range(1, 20));
  app.add_flag("--json", opt.json, "machine-readable output on stdout");
  app.add_flag("--keep-db", opt.keep_db, "keep the SQLite directory under /tmp");
  app.add_flag("--deadlock-detection", opt.deadlock_detection,
               "keep absl::Mutex deadlock detection on (Debian's abseil build turns it on for "
               "every absl::Mutex, which gRPC's locks use); default off, as the coordinator and "
               "agent binaries run");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::err);  // the insecure-mode warnings are expected here
  if (!opt.deadlock_detection) absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return triage::farmbench::Run(opt);
}
