// triage-coordinator: plans sweeps, leases shards to agents over gRPC, stores every state change
// in SQLite before acknowledging it, and serves /metrics.

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <random>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/clock/clock.h"
#include "common/config/config.h"
#include "common/daemon/daemon.h"
#include "common/inventory/schema.h"
#include "common/metrics/metrics_server.h"
#include "common/rpc/rpc.h"
#include "common/util/allocator.h"
#include "common/util/dir_lock.h"
#include "common/util/file.h"
#include "common/util/log.h"
#include "common/util/net.h"
#include "common/util/strings.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/sweep_outputs.h"
#include "coordinator/metrics/prometheus_metrics.h"
#include "coordinator/persistence/sqlite_store.h"
#include "coordinator/planning/sweep_reader.h"
#include "coordinator/server/auth.h"
#include "coordinator/server/server.h"
#include "prometheus/registry.h"

namespace {

// Every setting of the coordinator, documented once next to its default.
struct CoordinatorConfig {
  std::string agent_address = "127.0.0.1:7601";
  std::string control_address = "127.0.0.1:7602";
  std::string metrics_address = "127.0.0.1:9601";
  std::string health_address;
  std::string data_dir = "triage-data";
  bool init = false;
  bool insecure = false;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::string tokens_file;
  std::int64_t lease_ttl_seconds = 120;
  std::int64_t heartbeat_interval_seconds = 5;
  std::int64_t agent_dead_after_seconds = 60;
  std::int64_t offline_agent_retention_seconds = 24 * 3600;
  std::int64_t lease_wait_seconds = 20;
  std::int64_t backoff_base_seconds = 10;
  std::int64_t backoff_max_seconds = 600;
  std::int64_t max_attempts = 3;
  std::int64_t max_infra_losses = 10;
  std::vector<std::string> default_archs = {"n150"};
  std::int64_t tick_ms = 500;
  bool sqlite_synchronous_full = false;
  bool device_agents_probe = true;
  std::int64_t verify_batch_max_seconds = 7200;
  std::int64_t verify_batch_shard_max_seconds = 600;
  std::int64_t verify_gather_seconds = 300;
  std::int64_t learn_estimates_after = 5;
  double backup_after = triage::coord::BackupPolicy{}.after;
  std::int64_t backup_slack_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(triage::coord::BackupPolicy{}.slack).count();
  std::int64_t min_trusted_seconds = 5;
  std::string log_level = "info";

  void Register(triage::config::Schema& s) {
    using triage::config::HostPort;
    using triage::config::kMaxSeconds;
    using triage::config::Range;
    s.Add("agent_address", &agent_address, "host:port of the AgentService listener (port 0: any)",
          HostPort(false));
    s.Add("control_address", &control_address,
          "host:port of the ControlService listener (triagectl)", HostPort(false));
    s.Add("metrics_address", &metrics_address, "host:port of /metrics (\"\" = off)",
          HostPort(true));
    s.Add("health_address", &health_address,
          "host:port of a plaintext listener with only grpc.health.v1, for probes that cannot "
          "speak TLS (\"\" = off)",
          HostPort(true));
    s.Add("data_dir", &data_dir, "SQLite database, git cache and ports file live here",
          triage::config::NonEmpty());
    s.Add("init", &init,
          "create a new database although data_dir shows an earlier one (its coordinator.id "
          "marker or WAL files) and coordinator.db is missing");
    s.Add("insecure", &insecure, "allow plaintext gRPC and no bearer tokens (warns)");
    s.Add("tls_cert", &tls_cert, "PEM server certificate (both ports)");
    s.Add("tls_key", &tls_key, "PEM server key");
    s.Add("tls_client_ca", &tls_client_ca, "PEM CA for client certificates: mutual TLS");
    s.Add("tokens_file", &tokens_file, "YAML bearer tokens with roles agent/operator/viewer");
    s.Add("lease_ttl_seconds", &lease_ttl_seconds, "a lease lives this long without heartbeats",
          Range{1, kMaxSeconds});
    s.Add("heartbeat_interval_seconds", &heartbeat_interval_seconds, "told to agents",
          Range{1, 3600});
    s.Add("agent_dead_after_seconds", &agent_dead_after_seconds,
          "silence after which an agent is offline and its leases expire", Range{1, kMaxSeconds});
    s.Add("offline_agent_retention_seconds", &offline_agent_retention_seconds,
          "an offline agent stays listed (as offline) this long, then is forgotten",
          Range{0, kMaxSeconds});
    s.Add("lease_wait_seconds", &lease_wait_seconds, "server cap on a Lease long-poll",
          Range{1, 3600});
    s.Add("backoff_base_seconds", &backoff_base_seconds, "requeue delay after a failed attempt",
          Range{0, kMaxSeconds});
    s.Add("backoff_max_seconds", &backoff_max_seconds, "cap of the doubling requeue delay",
          Range{0, kMaxSeconds});
    s.Add("max_attempts", &max_attempts,
          "failed attempts (the work failed) before a shard is quarantined", Range{1, 1000});
    s.Add("max_infra_losses", &max_infra_losses,
          "leases a shard may lose to agents or the coordinator going away before it is "
          "quarantined (they do not count as attempts)",
          Range{1, 1000});
    s.Add("default_archs", &default_archs, "target archs of sweeps that name none");
    s.Add("device_agents_probe", &device_agents_probe,
          "device agents take probe-phase shards when nothing of their arch is queued");
    s.Add("verify_batch_max_seconds", &verify_batch_max_seconds,
          "longest expected run of a batch of verify shards in one pytest session (0: no batches)",
          Range{0, kMaxSeconds});
    s.Add("verify_batch_shard_max_seconds", &verify_batch_shard_max_seconds,
          "a verify shard known to run longer than this (recorded durations, or the sweep's "
          "learned seconds) runs in a session of its own, not in a batch (0: no limit)",
          Range{0, kMaxSeconds});
    s.Add("verify_gather_seconds", &verify_gather_seconds,
          "how long a device agent may probe its wave, or wait for a running probe of it, "
          "instead of running a verify shard alone, so that verifications gather into a batch "
          "(0: never)",
          Range{0, kMaxSeconds});
    s.Add("backup_after", &backup_after,
          "an idle agent with nothing queued for it runs a backup attempt of a leased shard once "
          "the lease has run this many times its expected seconds plus backup_slack_seconds; the "
          "first accepted result decides the shard (0: no backups; docs/farm.md, \"Backup "
          "leases\")");
    s.Add("backup_slack_seconds", &backup_slack_seconds,
          "added to backup_after times a lease's expected seconds", Range{0, kMaxSeconds});
    s.Add("learn_estimates_after", &learn_estimates_after,
          "after a sweep measured this many verifications of entries planned at an estimate, their "
          "mean stands in for such estimates in verify_batch_max_seconds (0: never)",
          Range{0, 1'000'000});
    s.Add("min_trusted_seconds", &min_trusted_seconds,
          "a recorded test duration (.test_durations) shorter than this is not trusted as the "
          "test's time (tt-xla records near-zero times for skipped tests); the playbook's "
          "estimate stands in",
          Range{0, 3600});
    s.Add("tick_ms", &tick_ms, "how often leases and agents are checked", Range{10, 60'000});
    s.Add("sqlite_synchronous_full", &sqlite_synchronous_full,
          "fsync every commit (survives power loss; slower)");
    s.Add("log_level", &log_level, "trace, debug, info, warn, error",
          triage::config::OneOf({"trace", "debug", "info", "warn", "error"}));
  }
};

int Fail(const std::string& message) {
  std::cerr << "triage-coordinator: " << message << "\n";
  return 2;
}

// data_dir/coordinator.id: a random id written when the database is first created. It tells a
// data directory whose database was deleted from a fresh one.
constexpr char kMarkerName[] = "coordinator.id";
constexpr char kDatabaseName[] = "coordinator.db";

// Refuses to create a database in a data directory that held one before: the marker or the
// database's WAL/SHM files are there but coordinator.db is not (deleted or moved). A fresh,
// empty data directory passes; so does any directory with `init` (the leftover WAL/SHM files
// are then moved aside, so that SQLite does not replay them into the new database).
absl::Status CheckDatabaseNotLost(const std::filesystem::path& dir, bool init) {
  std::error_code ec;
  const auto db = dir / kDatabaseName;
  if (std::filesystem::exists(db, ec)) {
    // An empty file is what SQLite would silently turn into a new database.
    if (!init && std::filesystem::is_regular_file(db, ec) &&
        std::filesystem::file_size(db, ec) == 0 && std::filesystem::exists(dir / kMarkerName, ec)) {
      return absl::FailedPreconditionError(triage::util::StrCat(
          db.string(),
          ": empty (0 bytes), but an earlier database lived here (coordinator.id): not a SQLite "
          "database (corrupt or truncated); restore it from a backup or move it away, or start "
          "with --init to create a new, empty database"));
    }
    return absl::OkStatus();
  }
  std::vector<std::string> traces;
  for (const char* name : {kMarkerName, "coordinator.db-wal", "coordinator.db-shm"}) {
    if (std::filesystem::exists(dir / name, ec)) traces.push_back(name);
  }
  if (traces.empty()) return absl::OkStatus();
  if (!init) {
    return absl::FailedPreconditionError(triage::util::StrCat(
        db.string(), ": missing, but ", dir.string(), " holds ",
        triage::util::StrJoin(traces, ", "),
        " of an earlier database (deleted or moved?): restore coordinator.db, or start with "
        "--init to create a new, empty database"));
  }
  for (const char* name : {"coordinator.db-wal", "coordinator.db-shm"}) {
    if (!std::filesystem::exists(dir / name, ec)) continue;
    std::filesystem::rename(dir / name, dir / (std::string(name) + ".orphan"), ec);
    if (ec) {
      return absl::FailedPreconditionError(triage::util::StrCat(
          "--init: cannot move ", (dir / name).string(), " aside: ", ec.message()));
    }
    spdlog::warn("--init: moved {} of a missing database aside to {}.orphan", name, name);
  }
  return absl::OkStatus();
}

// Writes a new marker for a database created now (created: coordinator.db did not exist before
// the store opened it), or the marker a database made by a version without it lacks.
absl::Status WriteMarker(const std::filesystem::path& dir, bool created) {
  std::error_code ec;
  if (!created && std::filesystem::exists(dir / kMarkerName, ec)) return absl::OkStatus();
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) id += absl::StrCat(absl::Hex(rd(), absl::kZeroPad8));
  return triage::util::WriteFileAtomic(dir / kMarkerName, id + "\n");
}

// What the schema cannot check setting by setting: tokens or insecure, the backup factor, the
// backoff bounds against each other, the default archs against the known ones.
absl::Status CheckSettings(const CoordinatorConfig& cfg) {
  using triage::util::StrCat;
  if (!cfg.insecure && cfg.tokens_file.empty()) {
    return absl::InvalidArgumentError(
        "no tokens_file: give bearer tokens, or set insecure for a trusted network");
  }
  if (!(cfg.backup_after >= 0 && cfg.backup_after <= 1000)) {
    return absl::InvalidArgumentError(
        StrCat("backup_after (", cfg.backup_after, ") is not a factor in 0 .. 1000"));
  }
  if (cfg.backoff_max_seconds < cfg.backoff_base_seconds) {
    return absl::InvalidArgumentError(StrCat("backoff_max_seconds (", cfg.backoff_max_seconds,
                                             ") is less than backoff_base_seconds (",
                                             cfg.backoff_base_seconds, ")"));
  }
  for (const auto& arch : cfg.default_archs) {
    if (!triage::inventory::IsKnownArch(arch)) {
      return absl::InvalidArgumentError(
          StrCat("default_archs: unknown arch '", arch,
                 "' (known: ", triage::util::StrJoin(triage::inventory::kArchNames, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

// The bearer tokens of tokens_file; without one, authentication is off (insecure).
absl::StatusOr<triage::coord::Authenticator> LoadAuthenticator(const CoordinatorConfig& cfg) {
  if (cfg.tokens_file.empty()) return triage::coord::Authenticator::Disabled();
  auto auth = triage::coord::Authenticator::FromFile(cfg.tokens_file);
  if (!auth.ok()) {
    return absl::Status(
        auth.status().code(),
        triage::util::StrCat("tokens_file: ", triage::util::MessageOf(auth.status())));
  }
  return auth;
}

// data_dir, created when missing and locked for the whole life of the process: one coordinator
// per data directory (a second one would share the database and overwrite ports.json).
absl::StatusOr<triage::util::DirLock> LockDataDir(const std::string& data_dir) {
  using triage::util::StrCat;
  std::error_code ec;
  if (std::filesystem::exists(data_dir, ec) && !std::filesystem::is_directory(data_dir, ec)) {
    return absl::FailedPreconditionError(
        StrCat("data_dir: ", data_dir, " exists and is not a directory"));
  }
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        StrCat("cannot create data_dir ", data_dir, ": ", ec.message()));
  }
  return triage::util::DirLock::Acquire(std::filesystem::path(data_dir) / "coordinator.lock",
                                        "data_dir", data_dir);
}

// The database of data_dir, opened (created when there is none, unless an earlier one was lost)
// and marked with coordinator.id.
absl::StatusOr<std::unique_ptr<triage::coord::SqliteStore>> OpenStore(
    const CoordinatorConfig& cfg) {
  if (auto st = CheckDatabaseNotLost(cfg.data_dir, cfg.init); !st.ok()) return st;
  std::error_code ec;
  const auto db = std::filesystem::path(cfg.data_dir) / kDatabaseName;
  const bool creating = !std::filesystem::exists(db, ec);
  triage::coord::SqliteOptions sqlite;
  sqlite.synchronous_full = cfg.sqlite_synchronous_full;
  auto store = triage::coord::SqliteStore::Open(db, sqlite);
  if (!store.ok()) return store.status();
  if (auto st = WriteMarker(cfg.data_dir, creating); !st.ok()) return st;
  return store;
}

triage::coord::CoordinatorOptions CoordinatorOptionsFrom(const CoordinatorConfig& cfg) {
  triage::coord::CoordinatorOptions options;
  options.lease_ttl = std::chrono::seconds(cfg.lease_ttl_seconds);
  options.heartbeat_interval = std::chrono::seconds(cfg.heartbeat_interval_seconds);
  options.agent_dead_after = std::chrono::seconds(cfg.agent_dead_after_seconds);
  options.offline_retention = std::chrono::seconds(cfg.offline_agent_retention_seconds);
  options.lease_wait_limit = std::chrono::seconds(cfg.lease_wait_seconds);
  options.backoff_base = std::chrono::seconds(cfg.backoff_base_seconds);
  options.backoff_max = std::chrono::seconds(cfg.backoff_max_seconds);
  options.default_max_attempts = static_cast<int>(cfg.max_attempts);
  options.max_infra_losses = static_cast<int>(cfg.max_infra_losses);
  options.default_archs = cfg.default_archs;
  options.device_probes = cfg.device_agents_probe;
  options.verify_batch_max = std::chrono::seconds(cfg.verify_batch_max_seconds);
  options.verify_batch_shard_max = std::chrono::seconds(cfg.verify_batch_shard_max_seconds);
  options.verify_gather = std::chrono::seconds(cfg.verify_gather_seconds);
  options.learn_estimates_after = static_cast<int>(cfg.learn_estimates_after);
  options.backups.after = cfg.backup_after;
  options.backups.slack = std::chrono::seconds(cfg.backup_slack_seconds);
  options.min_trusted_seconds = static_cast<double>(cfg.min_trusted_seconds);
  return options;
}

triage::coord::ServerConfig ServerConfigFrom(const CoordinatorConfig& cfg,
                                             const triage::rpc::TlsServerConfig& tls) {
  triage::coord::ServerConfig server_config;
  server_config.agent_address = cfg.agent_address;
  server_config.control_address = cfg.control_address;
  server_config.health_address = cfg.health_address;
  server_config.tls = tls;
  server_config.insecure = cfg.insecure;
  server_config.tick = std::chrono::milliseconds(cfg.tick_ms);
  return server_config;
}

// data_dir/ports.json: the ports actually listened on (port 0 picks any) and the pid.
absl::Status WritePortsFile(const std::string& data_dir,
                            const triage::coord::CoordinatorServer& server, int metrics_port) {
  const std::string ports = triage::util::StrCat(
      "{\"agent_port\": ", server.agent_port(), ", \"control_port\": ", server.control_port(),
      ", \"metrics_port\": ", metrics_port, ", \"health_port\": ", server.health_port(),
      ", \"pid\": ", getpid(), "}\n");
  return triage::util::WriteFileAtomic(std::filesystem::path(data_dir) / "ports.json", ports);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace triage;
  // SIGINT/SIGTERM are taken by this thread at the end: blocked before any thread starts.
  const daemon::StopSignals signals = daemon::Start();

  CoordinatorConfig cfg;
  config::Schema schema(config::kCoordinatorEnvPrefix);
  cfg.Register(schema);
  CLI::App app{"triage-coordinator: plans sweeps and leases shards to agents"};
  if (auto exit_code = config::ParseCommandLine(schema, app, argc, argv, "triage-coordinator"))
    return *exit_code;
  daemon::SetUpLogging(cfg.log_level, "coordinator");
  rpc::RouteGrpcLogs();

  if (auto st = CheckSettings(cfg); !st.ok()) return Fail(util::MessageOf(st));

  // Files named by settings are read and checked before anything is created or listened on.
  auto auth = LoadAuthenticator(cfg);
  if (!auth.ok()) return Fail(util::MessageOf(auth.status()));
  const rpc::TlsServerConfig tls{cfg.tls_cert, cfg.tls_key, cfg.tls_client_ca};
  if (auto creds = rpc::ServerCredentials(tls, cfg.insecure); !creds.ok()) {
    return Fail(util::MessageOf(creds.status()));
  }
  // A listener that cannot bind (a port another process holds) stops the start-up here, before
  // data_dir is created or its database opened: nothing is left behind.
  if (const std::string problem = util::ListenProblem({{"--agent_address", cfg.agent_address},
                                                       {"--control_address", cfg.control_address},
                                                       {"--health_address", cfg.health_address},
                                                       {"--metrics_address", cfg.metrics_address}});
      !problem.empty()) {
    return Fail(problem);
  }
  auto data_lock = LockDataDir(cfg.data_dir);
  if (!data_lock.ok()) return Fail(util::MessageOf(data_lock.status()));
  auto store = OpenStore(cfg);
  if (!store.ok()) return Fail(util::MessageOf(store.status()));

  auto registry = std::make_shared<prometheus::Registry>();
  coord::PrometheusMetrics metrics(registry, config::ProjectVersion());
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  if (!cfg.metrics_address.empty()) {
    auto m = metrics::MetricsServer::Start(cfg.metrics_address, registry);
    if (!m.ok()) return Fail(util::MessageOf(m.status()));
    metrics_server = std::move(*m);
  }

  coord::Coordinator coordinator(
      CoordinatorOptionsFrom(cfg), store->get(), SystemClock::Get(),
      coord::MakeGitSweepReader(std::filesystem::path(cfg.data_dir) / "cache"), &metrics);
  if (auto st = coordinator.Recover(); !st.ok()) {
    return Fail(util::StrCat("cannot recover from ",
                             (std::filesystem::path(cfg.data_dir) / kDatabaseName).string(), ": ",
                             util::MessageOf(st)));
  }

  merge::SweepOutputs outputs(&coordinator, &metrics, cfg.data_dir);
  coordinator.SetFinishHook([&outputs](const std::string& id) { return outputs.Build(id); });

  auto server = coord::CoordinatorServer::Start(ServerConfigFrom(cfg, tls), &coordinator,
                                                std::move(*auth), &metrics, outputs.Providers());
  if (!server.ok()) return Fail(util::MessageOf(server.status()));
  const int metrics_port = metrics_server ? metrics_server->port() : 0;
  if (auto st = WritePortsFile(cfg.data_dir, **server, metrics_port); !st.ok()) {
    return Fail(util::MessageOf(st));
  }
  spdlog::info("serving agents on port {}, control on port {}, metrics on port {} (data {}; {})",
               (*server)->agent_port(), (*server)->control_port(), metrics_port, cfg.data_dir,
               util::AllocatorName());

  const int sig = signals.Wait();
  spdlog::info("signal {}: shutting down", sig);
  (*server)->Shutdown();
  return 0;
}
