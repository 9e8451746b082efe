// fleet_sim: a weekly sweep's makespan on a simulated fleet. The real coordinator (planning,
// waves, scheduling, leases, heartbeats, expiry, backoff) runs in this process with a fake clock
// and an in-memory SQLite store; simulated agents register, lease, heartbeat and complete through
// its API, with no gRPC and no sleeping, so a week of device time runs in seconds.
//
// The work is the real training YAML with the real .test_durations (docs/bench-farm.md, "The
// fleet simulator", says how entries, durations and outcomes are modelled). Each fleet runs the
// same work under three policies: the farm's, FIFO, and longest-first without phases. The figures
// are printed against a lower bound: the larger of each lane's work over its agents and the
// longest chain the phases and waves force.
//
// Run: build/bench/fleet_sim [--fleet 2n150+2p150+1cpu ...] [--scale 500,5000,50000]
//      build/bench/fleet_sim --workload remediation [--fleet 16n150+16p150+4n300] (coding agents
//      remediating the public run's tests, one per test on one host against the farm's fix once,
//      verify many: bench/remediation_sim.h)

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "agent/playbooks/catalog.h"
#include "bench/remediation_sim.h"
#include "common/classify/classify.h"
#include "common/clock/clock.h"
#include "common/inventory/inventory.h"
#include "common/registry/registry_union.h"
#include "common/util/file.h"
#include "common/util/log.h"
#include "common/util/strings.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/persistence/sqlite_store.h"
#include "coordinator/planning/planner.h"
#include "nlohmann/json.hpp"

namespace triage::fleetsim {
namespace {

using namespace std::chrono_literals;

constexpr char kTrainingFile[] =
    "tests/runner/test_config/torch/test_config_training_single_device.yaml";
constexpr double kBoundTarget = 1.05;
// The arch whose measured durations plan the second week where it measured the entry
// (`triagectl sweep durations`' default: the sweep's first arch).
constexpr std::string_view kMeasuredArch = "n150";

// ---------------------------------------------------------------------------------------------
// Options

struct Rates {
  double stop = 0.15;        // a probe stops the entry (not reproduced, needs review): no verify
  double registry = 0.10;    // an unpack_forward_output probe proposes a registry line
  int classes = 100;         // output classes the entries' models return (uniform)
  double pass = 0.60;        // verify outcomes on a device; fail takes the rest
  double crash = 0.04;       //   the pytest process crashed on the entry (restart costs)
  double timeout = 0.03;     //   the entry hung until its timeout
  double shard_fail = 0.03;  // an attempt fails for the infrastructure (retried with backoff)
};

struct Options {
  std::filesystem::path yaml;
  std::filesystem::path durations;
  std::vector<std::string> fleets;
  std::vector<std::string> policies = {"farm", "one-per-lease", "cpu-probes", "fifo", "lpt"};
  int verify_batch = 8;            // LeaseRequest.max_batch of the agents (the agent's default)
  double verify_batch_max = 7200;  // the coordinator's verify_batch_max_seconds
  double verify_batch_shard_max = 600;  // the coordinator's verify_batch_shard_max_seconds
  bool report_at_end = false;           // a batch's shards are reported when it ends, not as passed
  double verify_gather = 300;           // the coordinator's verify_gather_seconds
  double backup_after = coord::BackupPolicy{}.after;  // the coordinator's backup_after
  double backup_slack =                               // its backup_slack_seconds
      ToSeconds(coord::BackupPolicy{}.slack);
  bool backup_yield = true;  // a backup gives its agent to queued work (the coordinator's rule)
  int learn_estimates_after = 5;  // the coordinator's learn_estimates_after
  bool wave_barrier = false;      // a registry wave waits for every shard of the one before
  bool second_week = false;       // each fleet again, planned with what the farm's sweep measured
  std::string scope = "failing";
  std::uint64_t seed = 1;
  Rates rates;
  int deaths = 1;
  int drains = 1;
  double down_minutes = 30;
  double step_seconds = 30;  // heartbeats and ticks
  int entries = 0;           // 0: the entries in scope; more: repeated under renamed loaders
  std::vector<int> scale;    // entry counts for the scale section
  std::string scale_fleet = "64n150+64p150+8cpu";
  bool plan_only = false;  // scale: plan the sweep, do not run it
  int seeds = 1;           // > 1: also the seeds section, seeds seed .. seed + seeds - 1
  bool verbose = false;
  bool trace = false;  // each attempt's start and end on stderr
};

// ---------------------------------------------------------------------------------------------
// Deterministic draws: the same entry gets the same duration and outcomes under every policy.

std::uint64_t Mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t HashOf(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// A uniform draw in [0, 1) for (seed, what, n).
double Draw(std::uint64_t seed, std::string_view what, std::uint64_t n = 0) {
  const std::uint64_t x = Mix(Mix(seed ^ HashOf(what)) + n);
  return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0);
}

// A log-normal factor with median 1.
double Noise(std::uint64_t seed, std::string_view what, double sigma) {
  const double u1 = std::max(Draw(seed, what, 1), 1e-12);
  const double u2 = Draw(seed, what, 2);
  const double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  return std::exp(sigma * z);
}

// ---------------------------------------------------------------------------------------------
// The work

// Canonical reasons the built-in rules give each playbook (docs/classify.md).
const std::map<std::string, std::string>& PlaybookReasons() {
  static const std::map<std::string, std::string> kReasons = {
      {"unpack_forward_output",
       "tt-forge-models doesn't implement unpack_forward_output for this model."},
      {"dtype_bfloat16", "RuntimeError: 'lu_cpu' not implemented for 'BFloat16'"},
      {"missing_inputs",
       "ValueError: You have to specify either decoder_input_ids or "
       "decoder_inputs_embeds"},
  };
  return kReasons;
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

struct EntryTruth {
  std::string playbook;
  double device_seconds = 0;  // per verify, per arch
  double probe_seconds = 0;   // on a CPU
  int output_class = 0;
};

struct Workload {
  std::string yaml;  // the test-config file the sweep reads
  std::string durations_json;
  std::map<std::string, EntryTruth> truth;  // by key
  int entries = 0;                          // entries in scope
  int trusted = 0;                          // with a trusted recorded duration
  std::string description;
};

// Probe seconds per entry on a CPU agent, by playbook (loading the model and a forward pass).
double ProbeSeconds(const std::string& playbook) {
  if (playbook == "unpack_forward_output") return 60;
  if (playbook == "dtype_bfloat16") return 90;
  return 120;
}

// Builds the work from the real file. Scope "failing": every NOT_SUPPORTED_SKIP or
// KNOWN_FAILURE_XFAIL entry is in scope; the built-in rules keep the playbook of those they
// match, the others get the reason of a playbook chosen by their key (the farm with full playbook
// coverage). Scope "matched": the file as it is. entries > 0: the in-scope entries are repeated
// under renamed loaders ("<model>_r2/...") up to that many.
absl::StatusOr<Workload> BuildWorkload(const Options& o, int entries) {
  auto text = util::ReadFile(o.yaml);
  if (!text.ok()) return text.status();
  auto durations_text = util::ReadFile(o.durations);
  if (!durations_text.ok()) return durations_text.status();
  nlohmann::json durations = nlohmann::json::parse(*durations_text, nullptr, false);
  if (durations.is_discarded() || !durations.is_object()) {
    return absl::InvalidArgumentError(util::StrCat(o.durations.string(), ": not a JSON object"));
  }
  inventory::Document doc = inventory::Document::Parse(kTrainingFile, *text);
  const classify::Classifier& rules = playbooks::DefaultClassifier();
  std::vector<double> trusted;
  for (const auto& [k, v] : durations.items()) {
    if (v.is_number() && v.get<double>() >= 5) trusted.push_back(v.get<double>());
  }
  std::sort(trusted.begin(), trusted.end());

  struct Base {
    const inventory::Entry* entry;
    std::string playbook;
    std::string reason;
  };
  std::vector<Base> base;
  std::vector<std::string> names;
  for (const auto& [name, reason] : PlaybookReasons()) names.push_back(name);
  for (const auto& e : doc.entries()) {
    if (!e.parts) continue;
    const std::string status(e.Status());
    const bool failing = status == "NOT_SUPPORTED_SKIP" || status == "KNOWN_FAILURE_XFAIL";
    auto c = rules.Classify(e);
    if (c.match) {
      base.push_back({&e, c.match->playbook, std::string(e.StringField("reason"))});
    } else if (failing && o.scope == "failing") {
      const std::string& pb = names[HashOf(e.key) % names.size()];
      base.push_back({&e, pb, PlaybookReasons().at(pb)});
    }
  }
  if (base.empty()) return absl::InvalidArgumentError("no entry in scope");

  Workload w;
  w.yaml = "test_config:\n";
  nlohmann::json out_durations = nlohmann::json::object();
  const int target = entries > 0 ? entries : static_cast<int>(base.size());
  for (int i = 0; i < target; ++i) {
    const Base& b = base[i % base.size()];
    const int copy = i / static_cast<int>(base.size());
    std::string key = b.entry->key;
    if (copy > 0) key.insert(key.find('/'), util::StrCat("_r", copy + 1));
    const std::string status(b.entry->Status());
    util::StrAppend(&w.yaml, "  ", key, ":\n    status: ", status, "\n");
    if (auto bs = b.entry->StringField("bringup_status"); !bs.empty()) {
      util::StrAppend(&w.yaml, "    bringup_status: ", bs, "\n");
    }
    util::StrAppend(&w.yaml, "    reason: ", Quote(b.reason), "\n");

    EntryTruth t;
    t.playbook = b.playbook;
    const std::string node = coord::NodeId(kTrainingFile, b.entry->key);
    auto d = durations.find(node);
    if (d != durations.end() && d->is_number() && d->get<double>() >= 5) {
      // Recorded: what the planner knows; the truth varies around it.
      out_durations[coord::NodeId(kTrainingFile, key)] = d->get<double>();
      t.device_seconds = d->get<double>() * Noise(o.seed, "dev" + key, 0.2);
      ++w.trusted;
    } else {
      // Never measured (skipped tests record ~0 s): the planner uses the playbook's estimate;
      // the truth is a recorded duration of another test, drawn per entry.
      const double u = Draw(o.seed, "pick" + key);
      t.device_seconds =
          trusted.empty() ? 600 : trusted[static_cast<std::size_t>(u * trusted.size())];
    }
    t.probe_seconds = ProbeSeconds(b.playbook) * Noise(o.seed, "probe" + key, 0.3);
    t.output_class = static_cast<int>(Draw(o.seed, "class" + key) * o.rates.classes);
    w.truth[key] = t;
  }
  w.entries = target;
  w.durations_json = out_durations.dump();
  std::map<std::string, int> per_playbook;
  for (const auto& [k, t] : w.truth) ++per_playbook[t.playbook];
  w.description = util::StrCat(w.entries, " entries (", w.trusted, " with a recorded duration)");
  for (const auto& [pb, n] : per_playbook) util::StrAppend(&w.description, ", ", pb, " ", n);
  return w;
}

// ---------------------------------------------------------------------------------------------
// Fleets

struct Fleet {
  std::string name;
  std::map<std::string, int> agents;  // arch ("cpu" for cpu-only agents) -> count
  int devices() const {
    int n = 0;
    for (const auto& [a, c] : agents) n += a == "cpu" ? 0 : c;
    return n;
  }
};

absl::StatusOr<Fleet> ParseFleet(const std::string& spec) {
  Fleet f;
  f.name = spec;
  for (absl::string_view piece : absl::StrSplit(spec, '+')) {
    const std::string part(piece);
    std::size_t i = 0;
    while (i < part.size() && std::isdigit(static_cast<unsigned char>(part[i]))) ++i;
    const std::string arch = part.substr(i);
    if (i == 0 || (arch != "cpu" && arch != "n150" && arch != "p150" && arch != "n300-llmbox")) {
      return absl::InvalidArgumentError(
          util::StrCat("--fleet '", spec,
                       "': each part is a count and an arch (n150, p150, n300-llmbox, cpu), "
                       "e.g. 2n150+2p150+1cpu"));
    }
    f.agents[arch] += std::stoi(part.substr(0, i));
  }
  if (f.devices() == 0) {
    return absl::InvalidArgumentError(util::StrCat("--fleet '", spec, "': no device agent"));
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// One run: a fleet, a policy, the work.

struct LaneStats {
  double work = 0;  // seconds of the lane's shards' reported attempts (results, failures)
  double lost = 0;  // seconds of the lane's shards' attempts lost with a dead agent
  double busy = 0;  // seconds the lane's agents ran shards (of any lane)
  int agents = 0;
  double bound = 0;  // the lane's work over its available agent time
  std::vector<double> waits;
};

struct RunResult {
  std::string policy;
  bool finished = false;
  std::string state;
  double makespan = 0;
  double bound = 0;
  double chain = 0;
  std::string bound_by;  // the lane or "chain"
  std::map<std::string, LaneStats> lanes;
  int shards = 0;
  int waves = 0;
  int attempts = 0;
  int failed_attempts = 0;
  int expired = 0;
  int entries = 0;
  int device_sessions = 0;    // pytest sessions on devices (a batch's is one)
  int backups = 0;            // backup leases granted
  int backups_won = 0;        // of those, the ones whose result was accepted first
  int backups_yielded = 0;    // and those that gave their agent to queued work
  double backup_seconds = 0;  // device time the backup attempts ran
  double wall_seconds = 0;
  double plan_seconds = 0;
  long rss_kib = 0;
  std::uintmax_t db_bytes = 0;
  // --second-week: node id -> seconds the accepted results measured, on kMeasuredArch where it
  // measured the entry and on another arch where only that one did (what `triagectl sweep
  // durations --arch p150`, then `--arch n150 --merge` over it, write for the next sweep).
  std::map<std::string, double> measured;
};

std::string Hours(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f h", s / 3600);
  return buf;
}

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

class QueueWaits : public coord::CoordinatorMetrics {
 public:
  void ShardQueueWait(std::string_view arch, std::string_view, double seconds) override {
    waits[std::string(arch)].push_back(seconds);
  }
  void LeaseExpired(std::string_view, std::string_view) override { ++expired; }
  void BackupLease(std::string_view, std::string_view outcome) override {
    if (outcome == "granted") ++backups;
    if (outcome == "won") ++backups_won;
    if (outcome == "yielded") ++backups_yielded;
  }
  void BackupSeconds(std::string_view, double seconds) override { backup_seconds += seconds; }
  std::map<std::string, std::vector<double>> waits;
  int expired = 0;
  int backups = 0;
  int backups_won = 0;
  int backups_yielded = 0;
  double backup_seconds = 0;
};

long RssKib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(field)) return std::atol(line.c_str() + std::strlen(field));
  }
  return 0;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(std::min<double>(v.size() - 1, p * (v.size() - 1) + 0.5))];
}

class Simulation {
 public:
  // db: a SQLite file (empty: in memory). plan_only: start the sweep, do not run it.
  Simulation(const Options& o, const Workload& w, const Fleet& f, std::string policy,
             std::filesystem::path db = {}, bool plan_only = false)
      : o_(o),
        w_(w),
        fleet_(f),
        policy_(std::move(policy)),
        db_(std::move(db)),
        plan_only_(plan_only) {}

  absl::StatusOr<RunResult> Run() {
    const auto wall_start = std::chrono::steady_clock::now();
    auto store = coord::SqliteStore::Open(db_.empty() ? std::filesystem::path(":memory:") : db_);
    if (!store.ok()) return store.status();
    coord::CoordinatorOptions copts;
    copts.heartbeat_interval = 30s;
    copts.lease_ttl = 300s;
    copts.agent_dead_after = 120s;
    copts.lease_wait_limit = 0s;
    if (policy_ == "fifo") copts.queue_order = coord::QueueOrder::kFifo;
    copts.device_probes = policy_ != "cpu-probes";
    copts.verify_batch_max =
        std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o_.verify_batch_max));
    copts.verify_batch_shard_max = std::chrono::duration_cast<Duration>(
        std::chrono::duration<double>(o_.verify_batch_shard_max));
    copts.verify_gather =
        std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o_.verify_gather));
    copts.learn_estimates_after = o_.learn_estimates_after;
    copts.early_waves = !o_.wave_barrier;
    copts.backups.after = o_.backup_after;
    copts.backups.slack =
        std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o_.backup_slack));
    copts.backups.yield = o_.backup_yield;
    start_ = clock_.Now();
    coord::Coordinator coord(
        copts, store->get(), &clock_,
        [this](const v1::StartSweepRequest&) -> absl::StatusOr<coord::SweepInput> {
          coord::SweepInput in;
          in.repo = "/sim/tt-xla";
          in.ttxla_commit = std::string(40, 'a');
          in.forge_commit = std::string(40, 'b');
          in.agent_repo_url = "file:///sim/tt-xla";
          // One file holds every entry here (tt-xla spreads them over several): no size cap.
          in.inventory.documents.push_back(inventory::Document::Parse(
              kTrainingFile, w_.yaml, inventory::ParseOptions{.max_bytes = w_.yaml.size() + 1}));
          for (const auto& d : in.inventory.documents.back().diagnostics()) {
            in.inventory.diagnostics.push_back(d);
          }
          return in;
        },
        &metrics_);
    coord_ = &coord;
    // The sweep's state is read when its last shard ended (a view counts every entry: reading it
    // after every event would cost more than the coordinator's own work), and now and then.
    coord.SetFinishHook([this](const std::string&) {
      last_shard_ended_ = true;
      return absl::OkStatus();
    });
    MakeAgents();
    // "lpt": longest first without phases: no CPU agent is registered, so each group runs whole
    // on its first arch and is verified on the others.
    for (auto& a : agents_) {
      if (policy_ == "lpt" && a.cpu) continue;
      if (auto st = Register(a); !st.ok()) return st;
    }
    v1::StartSweepRequest req;
    req.set_repo_path("/sim/tt-xla");
    for (const auto& [arch, n] : fleet_.agents) {
      if (arch == "n150" || arch == "p150") req.add_archs(arch);
    }
    if (req.archs_size() == 0) req.add_archs("n150");
    req.set_durations_json(w_.durations_json);
    req.set_reason("fleet_sim");
    const long rss_before = RssKib("VmRSS:");
    const auto plan_start = std::chrono::steady_clock::now();
    auto sweep = coord.StartSweep(req, coord::Caller{"sim", "operator"});
    if (!sweep.ok()) return sweep.status();
    RunResult r;
    r.plan_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - plan_start).count();
    r.rss_kib = RssKib("VmRSS:") - rss_before;
    sweep_id_ = sweep->id();
    if (sweep->entries().total() != w_.entries) {
      return absl::InternalError(util::StrCat("the sweep selected ", sweep->entries().total(),
                                              " entries of the ", w_.entries, " in scope"));
    }
    ScheduleFaults();

    r.policy = policy_;
    std::string state = "running";
    if (plan_only_) state = "planned";
    double last_step = 0;
    std::uint64_t since_read = 0;
    while (state == "running") {
      PollIdle();
      double next = last_step + o_.step_seconds;
      if (!events_.empty()) next = std::min(next, events_.top().at);
      if (next > 30 * 86400.0) break;  // a month: something is stuck
      clock_.Set(start_ +
                 std::chrono::duration_cast<Duration>(std::chrono::duration<double>(next)));
      while (!events_.empty() && events_.top().at <= next) {
        Event e = events_.top();
        events_.pop();
        Handle(e);
      }
      if (next >= last_step + o_.step_seconds) {
        last_step = next;
        Beat();
        coord.Tick();
      }
      if (last_shard_ended_ || ++since_read % 1000 == 0) {
        auto s = coord.GetSweep(sweep_id_);
        if (!s.ok()) return s.status();
        state = s->state();
      }
    }
    r.state = state;
    r.finished = state == "succeeded";
    if (o_.second_week) {
      auto results = coord.Results(sweep_id_);
      if (!results.ok()) return results.status();
      std::map<std::string, double> elsewhere;
      for (const auto& accepted : *results) {
        for (const auto& e : accepted.result.entries()) {
          if (e.duration_seconds() <= 0) continue;  // not measured (a crash, a probe)
          // The latest on each side.
          (e.arch() == kMeasuredArch ? r.measured : elsewhere)[coord::NodeId(e.file(), e.key())] =
              e.duration_seconds();
        }
      }
      r.measured.merge(elsewhere);  // keeps kMeasuredArch's where both measured
    }
    r.makespan = Now();
    auto shards = coord.Shards(sweep_id_);
    if (!shards.ok()) return shards.status();
    r.shards = static_cast<int>(shards->size());
    Bound(*shards, r);
    // A schedule that beats its lower bound shows the bound wrong, not the schedule good.
    if (r.bound > r.makespan + 1) {
      return absl::InternalError(util::StrCat(
          "the bound (", Hours(r.bound), ", by ", r.bound_by, ") is above the makespan (",
          Hours(r.makespan), ") of policy ", policy_, ": it is not a lower bound"));
    }
    for (auto& [lane, waits] : metrics_.waits) r.lanes[lane].waits = waits;
    r.attempts = attempts_;
    r.failed_attempts = failed_attempts_;
    r.entries = w_.entries;
    r.device_sessions = device_sessions_;
    r.expired = metrics_.expired;
    r.backups = metrics_.backups;
    r.backups_won = metrics_.backups_won;
    r.backups_yielded = metrics_.backups_yielded;
    r.backup_seconds = metrics_.backup_seconds;
    coord_ = nullptr;
    r.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    if (!db_.empty()) {
      std::error_code ec;
      for (const char* suffix : {"", "-wal", "-shm"}) {
        auto sz = std::filesystem::file_size(db_.string() + suffix, ec);
        if (!ec) r.db_bytes += sz;
      }
    }
    return r;
  }

 private:
  struct Agent {
    std::string id;
    std::string arch;  // "cpu" for cpu-only
    bool cpu = false;
    bool registered = false;
    std::string session;
    bool busy = false;
    bool dead = false;
    bool draining = false;
    std::vector<v1::LeaseResponse> leases;  // the head and its batch, until each is completed
    double started = 0;
    // Availability for the bound: [from, to) intervals lost.
    std::vector<std::pair<double, double>> away;
  };
  enum class Kind { kFinish, kDie, kRevive, kDrain, kUndrain };
  struct Event {
    double at;
    std::uint64_t seq;
    Kind kind;
    std::size_t agent;
    std::string lease_id;
    v1::ShardResult result;
    double seconds = 0;
    std::string lane;  // the shard's: its arch, or "cpu" for a probe phase
    bool operator>(const Event& o) const { return std::tie(at, seq) > std::tie(o.at, o.seq); }
  };

  double Now() const { return ToSeconds(clock_.Now() - start_); }

  void MakeAgents() {
    for (const auto& [arch, n] : fleet_.agents) {
      for (int i = 0; i < n; ++i) {
        Agent a;
        a.id = util::StrCat(arch, "-", i);
        a.arch = arch;
        a.cpu = arch == "cpu";
        agents_.push_back(a);
      }
    }
  }

  absl::Status Register(Agent& a) {
    v1::RegisterRequest req;
    auto* d = req.mutable_dimensions();
    d->set_agent_id(a.id);
    d->set_arch(a.arch);
    d->set_cpu_only(a.cpu);
    auto resp = coord_->Register(req);
    if (!resp.ok()) return resp.status();
    a.session = resp->session_id();
    a.registered = true;
    return absl::OkStatus();
  }

  // Deaths and drains of device agents at seeded times within the sweep's first half (as the
  // fleet would take it at the bound's pace); the same under every policy.
  void ScheduleFaults() {
    double work = 0;
    for (const auto& [k, t] : w_.truth) work += t.device_seconds;
    int per_arch = 1 << 30;
    for (const auto& [arch, n] : fleet_.agents) {
      if (arch != "cpu") per_arch = std::min(per_arch, n);
    }
    const double horizon = work / std::max(1, per_arch);
    std::vector<std::size_t> devices;
    for (std::size_t i = 0; i < agents_.size(); ++i) {
      if (!agents_[i].cpu) devices.push_back(i);
    }
    std::set<std::size_t> used;
    auto pick = [&](std::string_view what, int n) {
      for (std::uint64_t k = 0; used.size() < devices.size(); ++k) {
        std::size_t i =
            devices[static_cast<std::size_t>(Draw(o_.seed, what, n * 1000 + k) * devices.size())];
        if (used.insert(i).second) return i;
      }
      return devices.front();
    };
    for (int n = 0; n < o_.deaths && used.size() < devices.size(); ++n) {
      const std::size_t i = pick("death", n);
      const double at = (0.05 + 0.45 * Draw(o_.seed, "death-at", n)) * horizon;
      Push(at, Kind::kDie, i);
      Push(at + o_.down_minutes * 60, Kind::kRevive, i);
      agents_[i].away.push_back({at, at + o_.down_minutes * 60});
    }
    for (int n = 0; n < o_.drains && used.size() < devices.size(); ++n) {
      const std::size_t i = pick("drain", n);
      const double at = (0.05 + 0.45 * Draw(o_.seed, "drain-at", n)) * horizon;
      Push(at, Kind::kDrain, i);
      Push(at + o_.down_minutes * 60, Kind::kUndrain, i);
    }
  }

  void Push(double at, Kind kind, std::size_t agent, std::string lease_id = {},
            v1::ShardResult result = {}, double seconds = 0, std::string lane = {}) {
    events_.push(Event{at, next_event_++, kind, agent, std::move(lease_id), std::move(result),
                       seconds, std::move(lane)});
  }

  void Handle(const Event& e) {
    Agent& a = agents_[e.agent];
    switch (e.kind) {
      case Kind::kFinish: {
        auto held = std::find_if(a.leases.begin(), a.leases.end(),
                                 [&](const auto& l) { return l.lease_id() == e.lease_id; });
        if (a.dead || !a.busy || held == a.leases.end()) return;
        v1::CompleteRequest req;
        req.set_agent_id(a.id);
        req.set_session_id(a.session);
        req.set_lease_id(held->lease_id());
        req.set_fencing_token(held->fencing_token());
        *req.mutable_result() = e.result;
        auto resp = coord_->Complete(req);
        busy_[a.arch] += e.seconds;
        const std::string shard_id = held->shard().shard_id();
        // A failure reported while another attempt of the shard runs (a backup) overlapped it:
        // the shard's chain goes on with that attempt.
        const bool overlapped =
            e.result.status() != v1::ShardResult::SUCCEEDED && in_flight_[shard_id] > 1;
        --in_flight_[shard_id];
        if (o_.trace) {
          std::cerr << Fixed(Now() / 3600, 3) << " end " << a.id << " " << shard_id << " "
                    << Fixed(e.seconds, 0) << " s "
                    << (resp.ok() && resp->accepted() ? "accepted" : "refused") << "\n";
        }
        if (resp.ok() && resp->accepted() && !overlapped) {
          // A shard's reported attempts run one after the other under any policy.
          ran_[shard_id] += e.seconds;
          done_work_[e.lane] += e.seconds;
          if (e.result.status() == v1::ShardResult::SUCCEEDED) {
            for (const auto& op : e.result.registry_ops()) proposed_[shard_id].insert(op.cls());
          }
        } else {
          lost_work_[e.lane] += e.seconds;
        }
        a.leases.erase(held);
        if (!a.leases.empty()) {
          // A batch reports its shards one by one: a death from now on loses what is after.
          a.started = Now();
          return;
        }
        a.busy = false;
        if (a.draining) a.away.push_back({Now(), 1e18});  // it stops once its shard is done
        return;
      }
      case Kind::kDie:
        Abandon(a);
        a.dead = true;
        return;
      case Kind::kRevive:
        a.dead = false;
        if (a.registered) (void)Register(a);
        return;
      case Kind::kDrain:
        a.draining = true;
        if (!a.busy) a.away.push_back({Now(), 1e18});
        (void)coord_->SetDraining(a.id, true, "fleet_sim drain", coord::Caller{"sim", "operator"});
        return;
      case Kind::kUndrain:
        a.draining = false;
        // Back: the drain's away interval ends now (or it never started: the shard ran on).
        if (!a.away.empty() && a.away.back().second > 1e17) {
          a.away.back().second = std::max(a.away.back().first, Now());
        }
        (void)coord_->SetDraining(a.id, false, "fleet_sim undrain",
                                  coord::Caller{"sim", "operator"});
        return;
    }
  }

  void Beat() {
    for (auto& a : agents_) {
      if (a.dead || !a.registered) continue;
      v1::HeartbeatRequest req;
      req.set_agent_id(a.id);
      req.set_session_id(a.session);
      for (const auto& l : a.leases) req.add_lease_ids(l.lease_id());
      auto resp = coord_->Heartbeat(req);
      if (!resp.ok() || !a.busy) continue;
      for (const auto& id : resp->revoked_lease_ids()) {
        const bool held = std::any_of(a.leases.begin(), a.leases.end(),
                                      [&](const auto& l) { return l.lease_id() == id; });
        if (held) {
          Stop(a);  // as the agent does: the lease's batch stops whole
          break;
        }
      }
    }
  }

  // What the agent runs is lost (it died, or stopped for a revoked lease): the time since its
  // last report is lost work, and its finish events find nothing to report.
  void Abandon(Agent& a) {
    for (const auto& l : a.leases) --in_flight_[l.shard().shard_id()];
    if (a.busy && !a.leases.empty()) {
      const v1::ShardSpec& spec = a.leases.front().shard();
      lost_work_[spec.phase() == v1::PHASE_PROBE ? "cpu" : spec.arch()] += Now() - a.started;
      busy_[a.arch] += Now() - a.started;
    }
    a.busy = false;
    a.leases.clear();
  }

  // The agent stops what it runs (a revoked lease), as the agent does.
  void Stop(Agent& a) {
    if (o_.trace && !a.leases.empty()) {
      std::cerr << Fixed(Now() / 3600, 3) << " stop " << a.id << " "
                << a.leases.front().shard().shard_id() << " (revoked)\n";
    }
    Abandon(a);
    if (a.draining) a.away.push_back({Now(), 1e18});  // it stops once its shard is done
  }

  // Idle agents ask for work (a Lease without waiting, answered at once).
  void PollIdle() {
    for (std::size_t i = 0; i < agents_.size(); ++i) {
      Agent& a = agents_[i];
      if (a.dead || a.busy || a.draining || !a.registered) continue;
      v1::LeaseRequest req;
      req.set_agent_id(a.id);
      req.set_session_id(a.session);
      // Only the farm batches verifications; the yardsticks lease one shard at a time.
      req.set_max_batch(policy_ == "farm" ? o_.verify_batch : 1);
      absl::StatusOr<v1::LeaseResponse> got = absl::UnknownError("not answered");
      coord_->Lease(req, [&](absl::StatusOr<v1::LeaseResponse> r) { got = std::move(r); });
      if (!got.ok() || !got->granted()) continue;
      a.leases.assign(1, *got);
      a.leases.front().clear_batch();
      for (const auto& g : got->batch()) {
        v1::LeaseResponse one;
        one.set_granted(true);
        one.set_lease_id(g.lease_id());
        one.set_fencing_token(g.fencing_token());
        *one.mutable_shard() = g.shard();
        a.leases.push_back(std::move(one));
      }
      a.busy = true;
      a.started = Now();
      Start(i);
    }
  }

  // Runs what the agent leased, from the entries' draws: a shard, or a batch of verify phases
  // (docs/farm.md, "Batched verification") in one session, which pays one workspace and process
  // start. A crash kills the session: the shards before it keep their outcomes (the agent
  // plugin's partial JUnit file), the crashed shard runs again in a session of its own, and
  // those after it resume in a new session of the batch (shard by shard once a resumed session
  // dies in its first shard). The agent reports each shard as the session passes it; the
  // crashed shard and those run shard by shard are decided after the sessions, in order
  // (`--report-at-end`: every shard when the batch ends, as agents did before).
  void Start(std::size_t i) {
    Agent& a = agents_[i];
    std::vector<ShardRun> runs;
    for (const auto& lease : a.leases) {
      runs.push_back(RunShard(lease.shard()));
      ++in_flight_[lease.shard().shard_id()];
    }
    if (a.leases.front().shard().phase() != v1::PHASE_PROBE) ++device_sessions_;
    std::vector<double> done_at(runs.size(), runs.front().seconds);  // seconds after the start
    if (runs.size() > 1) {
      std::size_t session_start = 0;  // the first shard of the current session
      bool alone = false;             // two deaths in a row: the rest run shard by shard
      double t = 0;
      std::vector<std::size_t> later;            // decided after the sessions: a session of its own
      std::vector<double> part(runs.size(), 0);  // a crashed shard's part of the session
      for (std::size_t k = 0; k < runs.size(); ++k) {
        if (alone) {
          ++device_sessions_;  // a session of its own, at its own seconds
          later.push_back(k);
          continue;
        }
        const bool first = k == session_start;
        if (first && k > 0) ++device_sessions_;  // a resumed session
        // Its part of the shared session: after the session's first, without the start.
        const double in_session = runs[k].seconds - (first ? 0 : kVerifyStart);
        t += in_session;
        if (!runs[k].crashed) {
          runs[k].seconds = in_session;
          done_at[k] = t;
          continue;
        }
        ++device_sessions_;  // the crashed shard's own session, after the batch's sessions
        part[k] = in_session;
        later.push_back(k);
        alone = first && k > 0;
        session_start = k + 1;
      }
      for (std::size_t k : later) {
        t += runs[k].seconds;
        runs[k].seconds += part[k];  // a crashed shard: its part of the session and its own
        done_at[k] = t;
      }
      if (o_.report_at_end) std::fill(done_at.begin(), done_at.end(), t);
    }
    for (std::size_t k = 0; k < a.leases.size(); ++k) {
      const v1::ShardSpec& spec = a.leases[k].shard();
      if (o_.trace) {
        std::cerr << Fixed(Now() / 3600, 3) << " start " << a.id << " " << spec.shard_id() << " ["
                  << k << "/" << a.leases.size() << "] " << spec.entries_size()
                  << " entries, ends +" << Fixed(done_at[k], 0) << " s\n";
      }
      runs[k].result.set_duration_seconds(runs[k].seconds);
      Push(Now() + done_at[k], Kind::kFinish, i, a.leases[k].lease_id(), std::move(runs[k].result),
           runs[k].seconds, spec.phase() == v1::PHASE_PROBE ? "cpu" : spec.arch());
    }
  }

  static constexpr double kVerifyStart = 30;      // a device phase's workspace and process start
  static constexpr double kPytestTimeout = 3600;  // the agent's pytest_timeout_seconds default

  // One shard's attempt: its result, its seconds, whether an entry crashed the process.
  struct ShardRun {
    v1::ShardResult result;
    double seconds = 0;
    bool crashed = false;
  };
  ShardRun RunShard(const v1::ShardSpec& spec) {
    bool crashed = false;
    const int attempt = ++attempt_of_[spec.shard_id()];
    ++attempts_;
    v1::ShardResult result;
    result.set_status(v1::ShardResult::SUCCEEDED);
    const bool probe = spec.phase() == v1::PHASE_PROBE;
    const bool full = spec.phase() == v1::PHASE_FULL;
    double seconds = probe ? 20 : kVerifyStart;  // workspace preparation, process start
    std::set<std::string> proposed;
    const std::string tag = util::StrCat(spec.wave(), "/", spec.arch());
    for (const auto& e : spec.entries()) {
      const EntryTruth& t = w_.truth.at(e.key());
      auto* out = result.add_entries();
      out->set_key(e.key());
      out->set_file(e.file());
      out->set_arch(spec.arch());
      out->set_output_class(util::StrCat("Output", t.output_class));
      bool stopped = false;
      if (probe || full) {
        seconds += t.probe_seconds;
        stopped = Draw(o_.seed, "stop" + e.key()) < o_.rates.stop;
        if (!stopped && t.playbook == "unpack_forward_output" && spec.wave() == 1 &&
            Draw(o_.seed, "registry" + e.key()) < o_.rates.registry) {
          proposed.insert(out->output_class());
        }
      }
      if (stopped) {
        out->set_verdict("not_reproduced");
        out->set_disposition(v1::EntryOutcome::NEEDS_REVIEW);
        continue;
      }
      if (probe) {
        out->set_verdict("ready");
        out->set_disposition(v1::EntryOutcome::VERIFY);
        continue;
      }
      // On the device.
      const double u = Draw(o_.seed, "verify" + e.key() + tag);
      out->set_disposition(v1::EntryOutcome::DONE);
      // The testcase's time, as the agent reports it (none after a crash).
      if (u < o_.rates.pass) {
        seconds += t.device_seconds;
        out->set_duration_seconds(t.device_seconds);
        out->set_verdict("pass");
        out->set_changed(true);
        auto* edit = out->mutable_edit();
        edit->set_file(e.file());
        edit->set_key(e.key());
        auto* f = edit->add_set();
        f->set_name("status");
        f->mutable_value()->set_string_value("EXPECTED_PASSING");
      } else if (u < o_.rates.pass + o_.rates.crash) {
        seconds += t.device_seconds * Draw(o_.seed, "crash-at" + e.key() + tag) + 20;
        out->set_verdict("crash");
        crashed = true;
      } else if (u < o_.rates.pass + o_.rates.crash + o_.rates.timeout) {
        // Until the agent kills the run (pytest_timeout_seconds, 3600 by default).
        const double hang = std::min(kPytestTimeout, std::max(60.0, 3 * t.device_seconds));
        seconds += hang;
        out->set_duration_seconds(hang);
        out->set_verdict("timeout");
      } else {
        seconds += t.device_seconds;
        out->set_duration_seconds(t.device_seconds);
        out->set_verdict("fail");
      }
    }
    for (const auto& cls : proposed) *result.add_registry_ops() = registry::AddOp(cls, "logits");
    // A flaky infrastructure failure partway through; never on a last attempt. Drawn per the
    // shard's work (wave, phase, arch, entries), not its id: a policy that numbers shards
    // otherwise (a split shifts every later number) faces the same failures on the same work.
    std::string work =
        util::StrCat(spec.wave(), "/", static_cast<int>(spec.phase()), "/", spec.arch());
    for (const auto& e : spec.entries()) util::StrAppend(&work, "/", e.key());
    if (attempt < 3 && Draw(o_.seed, "fail" + work, attempt) < o_.rates.shard_fail) {
      seconds *= Draw(o_.seed, "fail-at" + work, attempt);
      result = v1::ShardResult();
      result.set_status(v1::ShardResult::FAILED);
      result.set_error("simulated infrastructure failure");
      ++failed_attempts_;
    }
    return ShardRun{std::move(result), seconds, crashed};
  }

  // Time to do `work` seconds with the agents of `lane` ("" for every agent), given when each
  // was away.
  double LaneBound(const std::string& lane, double work, int* agents) const {
    std::vector<const Agent*> in;
    for (const auto& a : agents_) {
      if ((lane.empty() || a.arch == lane) && a.registered) in.push_back(&a);
    }
    *agents = static_cast<int>(in.size());
    if (in.empty() || work <= 0) return 0;
    // Capacity is piecewise linear; bisect on T.
    auto capacity = [&](double t) {
      double c = 0;
      for (const Agent* a : in) {
        double away = 0;
        for (const auto& [from, to] : a->away) away += std::max(0.0, std::min(t, to) - from);
        c += t - std::min(t, away);
      }
      return c;
    };
    double lo = 0, hi = 1;
    while (capacity(hi) < work && hi < 1e12) hi *= 2;
    for (int k = 0; k < 100; ++k) {
      const double mid = (lo + hi) / 2;
      (capacity(mid) < work ? lo : hi) = mid;
    }
    return hi;
  }

  // The bound: each device arch's verify work over its agents; the probe work over the CPU
  // agents, or, when device agents take probes too, all work over all agents; and the longest
  // chain the phases and waves force (per wave: a first phase and its longest dependent; waves
  // one after the other). Work is what the attempts that reported took (results and reported
  // failures): any policy runs those; time lost with a dead agent is the policy's cost.
  void Bound(const std::vector<coord::ShardRecord>& shards, RunResult& r) {
    std::set<std::string> lanes;
    for (const auto& a : agents_) lanes.insert(a.arch);
    double all_work = 0;
    for (const auto& lane : lanes) {
      LaneStats& l = r.lanes[lane];
      l.work = done_work_[lane];
      l.lost = lost_work_[lane];
      l.busy = busy_[lane];
      all_work += l.work;
      double bound = LaneBound(lane, l.work, &l.agents);
      if (lane == "cpu" && policy_ != "cpu-probes") bound = 0;  // pooled below
      if (bound > r.bound) {
        r.bound = bound;
        r.bound_by = lane;
      }
    }
    if (policy_ != "cpu-probes") {
      int n = 0;
      const double pooled = LaneBound("", all_work, &n);
      if (pooled > r.bound) {
        r.bound = pooled;
        r.bound_by = "all agents";
      }
    }
    // The chain: a first phase and its longest dependent, one after the other. A later wave's
    // first phase re-verifies entries with registry lines of their output classes: it starts at
    // the earliest when the first probe that proposed each such line has ended (the coordinator
    // plans a loader with lines ahead of the rest of its wave), or, behind the barrier, when
    // every shard of the wave before has ended.
    std::map<std::string, double> longest_dependent;
    for (const auto& s : shards) {
      if (s.depends_on.empty()) continue;
      auto it = ran_.find(s.id);
      if (it != ran_.end()) {
        longest_dependent[s.depends_on] = std::max(longest_dependent[s.depends_on], it->second);
      }
    }
    std::map<int, std::vector<const coord::ShardRecord*>> firsts;  // wave -> its first phases
    for (const auto& s : shards) {
      r.waves = std::max(r.waves, s.spec.wave());
      if (s.depends_on.empty() && ran_.count(s.id)) firsts[s.spec.wave()].push_back(&s);
    }
    std::map<std::string, double> line_known;  // class -> when its first proposer ended
    double wave_over = 0;  // behind the barrier: when the waves so far ended at the earliest
    for (const auto& [wave, list] : firsts) {
      std::map<std::string, double> proposed;  // this wave's lines, for the next waves
      double wave_end = 0;
      for (const coord::ShardRecord* s : list) {
        double start = 0;
        if (o_.wave_barrier) {
          start = wave_over;
        } else if (wave > 1) {
          for (const auto& e : s->spec.entries()) {
            auto known = line_known.find(e.output_class());
            if (known != line_known.end()) start = std::max(start, known->second);
          }
        }
        const double end = start + ran_.at(s->id);
        const double chain = end + longest_dependent[s->id];
        r.chain = std::max(r.chain, chain);
        wave_end = std::max(wave_end, chain);
        if (auto p = proposed_.find(s->id); p != proposed_.end()) {
          for (const auto& cls : p->second) {
            auto [it, fresh] = proposed.try_emplace(cls, end);
            if (!fresh) it->second = std::min(it->second, end);
          }
        }
      }
      for (const auto& [cls, at] : proposed) line_known.try_emplace(cls, at);
      wave_over = wave_end;
    }
    if (r.chain > r.bound) {
      r.bound = r.chain;
      r.bound_by = "chain";
    }
  }

  const Options& o_;
  const Workload& w_;
  const Fleet& fleet_;
  const std::string policy_;
  const std::filesystem::path db_;
  const bool plan_only_;
  FakeClock clock_;
  TimePoint start_;
  QueueWaits metrics_;
  coord::Coordinator* coord_ = nullptr;
  std::string sweep_id_;
  bool last_shard_ended_ = false;
  std::vector<Agent> agents_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::uint64_t next_event_ = 0;
  std::map<std::string, int> attempt_of_;
  std::map<std::string, double> ran_;  // shard id -> seconds of its reported attempts
  // shard id -> the classes whose registry lines its accepted result proposed
  std::map<std::string, std::set<std::string>> proposed_;
  std::map<std::string, int> in_flight_;  // shard id -> its attempts running (a backup: 2)
  std::map<std::string, double> done_work_, lost_work_;
  std::map<std::string, double> busy_;  // agent arch -> seconds running shards
  int attempts_ = 0;
  int failed_attempts_ = 0;
  int device_sessions_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Output

void PrintFleet(const Fleet& f, const std::vector<RunResult>& runs) {
  std::vector<std::string> lanes;
  for (const auto& [lane, stats] : runs.front().lanes) lanes.push_back(lane);
  std::cout << "\n## fleet " << f.name << "\n";
  std::cout << "| policy | makespan | bound (by) | makespan/bound | ";
  for (const auto& l : lanes) std::cout << "util " << l << " | ";
  std::cout << "device s / entry | device sessions | wait p50 / p99 (device) | shards | waves | "
               "attempts (failed, expired) | backups (won, yielded) | backup device h | wall |\n";
  std::cout << "|---|---|---|---|";
  for (std::size_t i = 0; i < lanes.size(); ++i) std::cout << "---|";
  std::cout << "---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : runs) {
    std::cout << "| " << r.policy << (r.finished ? "" : " (" + r.state + ")") << " | "
              << Hours(r.makespan) << " | " << Hours(r.bound) << " (" << r.bound_by << ") | "
              << Fixed(r.makespan / std::max(1.0, r.bound), 3) << " | ";
    std::vector<double> device_waits;
    double device_work = 0;
    for (const auto& l : lanes) {
      const LaneStats& s = r.lanes.at(l);
      const double util = s.agents > 0 ? s.busy / (s.agents * std::max(1.0, r.makespan)) : 0;
      std::cout << (s.agents > 0 ? Fixed(100 * util, 1) + " %" : "-") << " | ";
      if (l != "cpu") {
        device_waits.insert(device_waits.end(), s.waits.begin(), s.waits.end());
        device_work += s.work + s.lost;
      }
    }
    std::cout << Fixed(device_work / std::max(1, r.entries), 0) << " | " << r.device_sessions
              << " | ";
    std::cout << Fixed(Percentile(device_waits, 0.5) / 60, 1) << " / "
              << Fixed(Percentile(device_waits, 0.99) / 60, 1) << " min | " << r.shards << " | "
              << r.waves << " | " << r.attempts << " (" << r.failed_attempts << ", " << r.expired
              << ") | " << r.backups << " (" << r.backups_won << ", " << r.backups_yielded << ") | "
              << Fixed(r.backup_seconds / 3600, 2) << " | " << Fixed(r.wall_seconds, 1) << " s |\n";
  }
}

// Every policy of o on one fleet and workload, in o.policies' order.
absl::StatusOr<std::vector<RunResult>> RunPolicies(const Options& o, const Workload& w,
                                                   const Fleet& fleet) {
  std::vector<RunResult> runs;
  for (const auto& policy : o.policies) {
    auto r = Simulation(o, w, fleet, policy).Run();
    if (!r.ok()) {
      return absl::Status(r.status().code(), util::StrCat("seed ", o.seed, " ", fleet.name, " ",
                                                          policy, ": ", r.status().message()));
    }
    runs.push_back(*std::move(r));
  }
  return runs;
}

// The next week's sweep of the same work (--second-week): planned with the durations file the
// farm's sweep (one of first_week) measured, laid over the one it was planned with, as
// `triagectl sweep durations --merge` writes it. The truth and the draws are the same.
struct SecondWeek {
  std::vector<RunResult> runs;
  int measured = 0;  // durations the farm's first sweep measured
  int added = 0;     // of them, for entries the first week's file did not have
};
absl::StatusOr<SecondWeek> RunSecondWeek(const Options& o, const Workload& w, const Fleet& fleet,
                                         const std::vector<RunResult>& first_week) {
  auto farm = std::find_if(first_week.begin(), first_week.end(),
                           [](const RunResult& r) { return r.policy == "farm"; });
  if (farm == first_week.end()) return absl::InvalidArgumentError("--second-week needs farm");
  SecondWeek week;
  Workload next = w;
  nlohmann::json durations = nlohmann::json::parse(w.durations_json);
  week.measured = static_cast<int>(farm->measured.size());
  for (const auto& [node, seconds] : farm->measured) {
    if (!durations.contains(node)) ++week.added;
    durations[node] = seconds;
  }
  next.durations_json = durations.dump();
  auto runs = RunPolicies(o, next, fleet);
  if (!runs.ok()) return runs.status();
  week.runs = *std::move(runs);
  return week;
}

// Says an error on stderr; true when there was one.
bool Failed(const absl::Status& status) {
  if (!status.ok()) std::cerr << "fleet_sim: " << status.message() << "\n";
  return !status.ok();
}

// A fleet's second-week heading and key in the seeds section.
Fleet SecondWeekOf(Fleet f) {
  f.name += " (second week)";
  return f;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The same fleets and policies at o.seeds seeds from o.seed on: one draw of outcomes and
// durations says little about a policy, the spread over many does (docs/bench-farm.md, "Other
// seeds"). Per fleet and policy: mean and median makespan, mean and worst makespan/bound, and
// at how many seeds it was faster than the farm. *worst_farm rises to the farm policy's worst
// makespan/bound over every seed and fleet (first weeks and second weeks).
int SeedsSection(Options o, const std::vector<Fleet>& fleets, bool* all_finished,
                 double* worst_farm) {
  const std::uint64_t first = o.seed;
  struct Figures {
    std::vector<double> makespan, ratio;
    double backup_seconds = 0;
    int backups = 0;
    int faster_than_farm = 0;
  };
  std::map<std::string, std::map<std::string, Figures>> by_fleet;  // fleet -> policy -> figures
  for (int k = 0; k < o.seeds; ++k) {
    o.seed = first + static_cast<std::uint64_t>(k);
    auto work = BuildWorkload(o, o.entries);
    if (Failed(work.status())) return 2;
    for (const auto& fleet : fleets) {
      const std::string& spec = fleet.name;
      auto runs = RunPolicies(o, *work, fleet);
      if (Failed(runs.status())) return 1;
      auto add = [&](const std::string& key, const std::vector<RunResult>& week) {
        std::map<std::string, double> makespan;
        for (const auto& r : week) {
          *all_finished = *all_finished && r.finished;
          Figures& f = by_fleet[key][r.policy];
          f.makespan.push_back(r.makespan);
          f.ratio.push_back(r.makespan / std::max(1.0, r.bound));
          f.backup_seconds += r.backup_seconds;
          f.backups += r.backups;
          if (r.policy == "farm") *worst_farm = std::max(*worst_farm, f.ratio.back());
          makespan[r.policy] = r.makespan;
        }
        if (auto farm = makespan.find("farm"); farm != makespan.end()) {
          for (const auto& [policy, m] : makespan) {
            if (m < farm->second) ++by_fleet[key][policy].faster_than_farm;
          }
        }
      };
      add(spec, *runs);
      if (o.second_week) {
        auto next = RunSecondWeek(o, *work, fleet, *runs);
        if (Failed(next.status())) return 1;
        add(SecondWeekOf(fleet).name, next->runs);
      }
    }
  }
  std::vector<std::string> keys;
  for (const auto& fleet : fleets) {
    keys.push_back(fleet.name);
    if (o.second_week) keys.push_back(SecondWeekOf(fleet).name);
  }
  for (const auto& spec : keys) {
    std::cout << "\n## seeds " << first << "-" << first + static_cast<std::uint64_t>(o.seeds) - 1
              << ": fleet " << spec << "\n";
    std::cout << "| policy | mean makespan | median makespan | mean makespan/bound | worst "
                 "makespan/bound | seeds above "
              << kBoundTarget
              << " | seeds faster than farm | backups per seed | backup device h per seed |\n";
    std::cout << "|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& policy : o.policies) {
      const Figures& f = by_fleet[spec][policy];
      auto mean = [](const std::vector<double>& v) {
        double t = 0;
        for (double x : v) t += x;
        return v.empty() ? 0.0 : t / static_cast<double>(v.size());
      };
      const double worst = *std::max_element(f.ratio.begin(), f.ratio.end());
      const auto above =
          std::count_if(f.ratio.begin(), f.ratio.end(), [](double x) { return x > kBoundTarget; });
      std::cout << "| " << policy << " | " << Hours(mean(f.makespan)) << " | "
                << Hours(Median(f.makespan)) << " | " << Fixed(mean(f.ratio), 3) << " | "
                << Fixed(worst, 3) << " | " << above << " of " << o.seeds << " | "
                << (policy == "farm" ? std::string("-")
                                     : util::StrCat(f.faster_than_farm, " of ", o.seeds))
                << " | " << Fixed(f.backups / static_cast<double>(o.seeds), 1) << " | "
                << Fixed(f.backup_seconds / 3600 / o.seeds, 2) << " |\n";
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  Options o;
  const std::filesystem::path shared(TRIAGE_SHARED_DIR);
  o.yaml = shared / "data/tt-xla/head" / kTrainingFile;
  o.durations = shared / "data/tt-xla/head/.test_durations";
  CLI::App app("fleet_sim: a sweep's makespan on a simulated fleet against its lower bound");
  app.add_option("--yaml", o.yaml, "Test-config YAML the sweep reads")->check(CLI::ExistingFile);
  app.add_option("--durations", o.durations, "pytest-split .test_durations (JSON)")
      ->check(CLI::ExistingFile);
  app.add_option("--fleet", o.fleets,
                 "Fleet, e.g. 2n150+2p150+1cpu (repeatable; default: three fleets)");
  app.add_option("--policy", o.policies,
                 "Policies to run: farm; one-per-lease (the farm without batched verification); "
                 "cpu-probes (one-per-lease with probes on CPU agents only); fifo (creation "
                 "order); lpt (longest first, no CPU phase)")
      ->check(CLI::IsMember({"farm", "one-per-lease", "cpu-probes", "fifo", "lpt"}));
  app.add_option("--verify-batch", o.verify_batch,
                 "The farm's agents' verify_batch: verify shards per pytest session")
      ->check(CLI::Range(1, 64));
  app.add_option("--verify-batch-max", o.verify_batch_max,
                 "The coordinator's verify_batch_max_seconds: longest expected batch")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--verify-batch-shard-max", o.verify_batch_shard_max,
                 "The coordinator's verify_batch_shard_max_seconds: a verify shard known to run "
                 "longer runs alone (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--report-at-end", o.report_at_end,
               "Agents report a batch's shards when the batch ends, not each as its session "
               "passes it (the agent before streaming)");
  app.add_option("--learn-estimates-after", o.learn_estimates_after,
                 "The coordinator's learn_estimates_after: measured verifications of estimated "
                 "entries before their mean stands in for the estimate in the batch cap (0: never)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--wave-barrier", o.wave_barrier,
               "The coordinator plans a registry wave when every shard of the wave before has "
               "ended, not its first phases (as it did before)");
  app.add_option("--backup-after", o.backup_after,
                 "The coordinator's backup_after: a leased shard that ran this many times its "
                 "expected seconds, plus the slack, may get a backup lease on an idle agent (0: "
                 "no backups)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--backup-slack", o.backup_slack,
                 "The coordinator's backup_slack_seconds: and this long more")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-backup-yield{false}", o.backup_yield,
               "Backups run on when work is queued for their agents (before they yielded it)");
  app.add_option("--verify-gather", o.verify_gather,
                 "The coordinator's verify_gather_seconds: how long a device agent may probe "
                 "instead of verifying alone")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--scope", o.scope,
                 "failing: every failing entry, with full playbook coverage; matched: the file "
                 "as the built-in rules see it")
      ->check(CLI::IsMember({"failing", "matched"}));
  app.add_option("--seed", o.seed, "Seed of every draw");
  app.add_option("--seeds", o.seeds,
                 "Also run the fleets at this many seeds from --seed on and print each "
                 "policy's mean and median makespan, its worst makespan/bound and how often it "
                 "was faster than the farm")
      ->check(CLI::Range(1, 1000));
  app.add_flag(
      "--second-week", o.second_week,
      "Run each fleet again, planned with the durations the farm's sweep measured (n150's, "
      "else p150's), as `triagectl sweep durations` writes them for the next sweep; "
      "its figures are printed apart and leave the worst makespan/bound as it is");
  app.add_option("--entries", o.entries,
                 "Entries of the fleets' sweep (default: those in scope; more are repeated "
                 "under renamed loaders)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--p-stop", o.rates.stop, "Probe stops the entry");
  app.add_option("--p-registry", o.rates.registry, "unpack probe proposes a registry line");
  app.add_option("--classes", o.rates.classes, "Output classes")->check(CLI::PositiveNumber);
  app.add_option("--p-pass", o.rates.pass, "Verify passes");
  app.add_option("--p-crash", o.rates.crash, "Verify crashes");
  app.add_option("--p-timeout", o.rates.timeout, "Verify times out");
  app.add_option("--p-shard-fail", o.rates.shard_fail, "Attempt fails (infrastructure)");
  app.add_option("--deaths", o.deaths, "Device agents that die (and come back) per fleet");
  app.add_option("--drains", o.drains, "Device agents drained (for --down-minutes) per fleet");
  app.add_option("--down-minutes", o.down_minutes, "How long a dead or drained agent stays away");
  app.add_option("--step", o.step_seconds, "Heartbeat and tick period, simulated seconds")
      ->check(CLI::PositiveNumber);
  app.add_option("--scale", o.scale,
                 "Entry counts for the scale section (e.g. 500,5000,50000); without --fleet, "
                 "only that section runs")
      ->delimiter(',');
  app.add_option("--scale-fleet", o.scale_fleet, "Fleet of the scale section");
  app.add_flag(
      "--plan-only", o.plan_only,
      "Scale section: plan each sweep (planning time, memory, database) without running it");
  app.add_flag("-v,--verbose", o.verbose, "Coordinator logs");
  app.add_flag("--trace", o.trace,
               "Each attempt's start and end on stderr (simulated hours, agent, shard, seconds)");
  std::string workload = "sweep";
  app.add_option("--workload", workload,
                 "sweep: a weekly sweep of the training YAML (the default); remediation: coding "
                 "agents remediating the public run's 1,221 tests, one per test on one host "
                 "against the farm (docs/bench-farm.md, \"The remediation workload\")")
      ->check(CLI::IsMember({"sweep", "remediation"}));
  remediation::Options rem;
  app.add_option("--host-agents", rem.host_agents, "remediation: coding agents on the one host")
      ->check(CLI::Range(1, 1000));
  app.add_option("--host-devices", rem.host_devices,
                 "remediation: devices of the one host, shared by its agents")
      ->check(CLI::Range(1, 1000));
  app.set_version_flag("--version", "fleet_sim " TRIAGE_VERSION);
  CLI11_PARSE(app, argc, argv);
  if (workload == "remediation") {
    if (o.fleets.size() > 1) {
      std::cerr << "fleet_sim: --workload remediation runs one fleet\n";
      return 2;
    }
    if (!o.fleets.empty()) rem.fleet = o.fleets.front();
    rem.seed = o.seed;
    rem.trace = o.trace;
    std::string error;
    const remediation::Result r = remediation::Run(rem, &error);
    if (!error.empty()) {
      std::cerr << "fleet_sim: " << error << "\n";
      return 2;
    }
    std::cout << r.table;
    return 0;
  }
  const Rates& rates = o.rates;
  for (double p :
       {rates.stop, rates.registry, rates.pass, rates.crash, rates.timeout, rates.shard_fail}) {
    if (p < 0 || p > 1) {
      std::cerr << "fleet_sim: every --p-* rate is between 0 and 1\n";
      return 2;
    }
  }
  if (rates.pass + rates.crash + rates.timeout > 1) {
    std::cerr << "fleet_sim: --p-pass + --p-crash + --p-timeout is more than 1\n";
    return 2;
  }
  if (o.second_week &&
      std::find(o.policies.begin(), o.policies.end(), "farm") == o.policies.end()) {
    std::cerr << "fleet_sim: --second-week plans with what the farm measured: add --policy farm\n";
    return 2;
  }
  spdlog::set_level(o.verbose ? spdlog::level::info : spdlog::level::err);
  // With --scale alone only the scale section runs; otherwise the fleets (by default three).
  const bool run_fleets = o.scale.empty() || !o.fleets.empty();
  if (o.fleets.empty() && run_fleets) {
    o.fleets = {"2n150+2p150+1cpu", "16n150+16p150+4cpu", "64n150+64p150+8cpu"};
  }

  auto work = BuildWorkload(o, o.entries);
  if (Failed(work.status())) return 2;
  std::cout << "# fleet_sim: " << o.yaml.filename().string() << ", scope " << o.scope << ": "
            << work->description << "; seed " << o.seed << "; " << o.deaths << " death(s) and "
            << o.drains << " drain(s) per fleet\n";
  double worst = 0;
  bool all_finished = true;
  bool fifo_beaten = false;
  std::vector<Fleet> fleets;
  for (const auto& spec : o.fleets) {
    auto fleet = ParseFleet(spec);
    if (Failed(fleet.status())) return 2;
    fleets.push_back(*std::move(fleet));
  }
  for (const auto& fleet : fleets) {
    auto runs = RunPolicies(o, *work, fleet);
    if (Failed(runs.status())) return 1;
    PrintFleet(fleet, *runs);
    if (o.second_week) {
      auto next = RunSecondWeek(o, *work, fleet, *runs);
      if (Failed(next.status())) return 1;
      for (const auto& r : next->runs) all_finished = all_finished && r.finished;
      PrintFleet(SecondWeekOf(fleet), next->runs);
      std::cout << "second week: planned with " << next->measured
                << " durations the farm's sweep measured, " << next->added
                << " of them for entries the first week planned at an estimate\n";
    }
    double farm = 0, fifo = 0;
    for (const auto& r : *runs) {
      all_finished = all_finished && r.finished;
      if (r.policy == "farm") {
        farm = r.makespan;
        worst = std::max(worst, r.makespan / std::max(1.0, r.bound));
      }
      if (r.policy == "fifo") fifo = r.makespan;
    }
    if (farm > 0 && fifo > 0 && farm > fifo) fifo_beaten = true;
  }

  if (run_fleets && o.seeds > 1) {
    if (int rc = SeedsSection(o, fleets, &all_finished, &worst); rc != 0) return rc;
  }

  if (!o.scale.empty()) {
    auto fleet = ParseFleet(o.scale_fleet);
    if (Failed(fleet.status())) return 2;
    std::cout << "\n## scale: one coordinator, fleet " << fleet->name << ", SQLite file store\n";
    std::cout << "| entries | shards | planning (StartSweep) | RSS growth at start | peak RSS | "
                 "database at the end | makespan/bound | simulation wall |\n";
    std::cout << "|---|---|---|---|---|---|---|---|\n";
    const auto dir =
        std::filesystem::temp_directory_path() / util::StrCat("fleet_sim_scale.", getpid());
    std::filesystem::create_directories(dir);
    for (int n : o.scale) {
      auto w = BuildWorkload(o, n);
      if (Failed(w.status())) return 2;
      const auto db = dir / util::StrCat("scale-", n, ".db");
      for (const char* suffix : {"", "-wal", "-shm"}) {
        std::filesystem::remove(db.string() + suffix);
      }
      auto r = Simulation(o, *w, *fleet, "farm", db, o.plan_only).Run();
      if (!r.ok()) {
        std::cerr << "fleet_sim: scale " << n << ": " << r.status().message() << "\n";
        return 1;
      }
      all_finished = all_finished && (o.plan_only || r->finished);
      std::cout << "| " << n << " | " << r->shards << " | " << Fixed(r->plan_seconds * 1000, 0)
                << " ms | " << Fixed(r->rss_kib / 1024.0, 1) << " MiB | "
                << Fixed(RssKib("VmHWM:") / 1024.0, 0) << " MiB | "
                << Fixed(r->db_bytes / 1048576.0, 1) << " MiB | "
                << (o.plan_only ? std::string("not run")
                                : Fixed(r->makespan / std::max(1.0, r->bound), 3))
                << " | " << Fixed(r->wall_seconds, 1) << " s |\n";
    }
    std::filesystem::remove_all(dir);
  }

  std::cout << "\n";
  if (!all_finished) std::cout << "NOTE: a run did not finish (see its state above)\n";
  if (fifo_beaten) std::cout << "NOTE: the farm's policy was slower than FIFO on a fleet\n";
  if (run_fleets && worst > kBoundTarget) {
    std::cout << "NOTE: above the goal of " << kBoundTarget << " x the bound\n";
  }
  // Over everything this run measured: every fleet at --seed, and every seed of --seeds.
  if (run_fleets) {
    std::cout << "worst makespan/bound: " << Fixed(worst, 3) << " (the farm's, over every fleet"
              << (o.seeds > 1 ? util::StrCat(" and seeds ", o.seed, "-",
                                             o.seed + static_cast<std::uint64_t>(o.seeds) - 1)
                              : util::StrCat(" at seed ", o.seed))
              << ")\n";
  }
  return 0;
}

}  // namespace
}  // namespace triage::fleetsim

int main(int argc, char** argv) { return triage::fleetsim::Main(argc, argv); }
