// triage-agent: leases shards from the coordinator and runs them in its own tt-xla workspace.

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>

#include "CLI/CLI.hpp"
#include "agent/client/grpc_client.h"
#include "agent/core/agent.h"
#include "agent/core/runner_check.h"
#include "agent/executor/command_executor.h"
#include "agent/executor/native_executor.h"
#include "agent/executor/replay_tools.h"
#include "agent/metrics/prometheus_agent_metrics.h"
#include "agent/workspace/workspace.h"
#include "common/command/command_params.h"
#include "common/config/config.h"
#include "common/daemon/daemon.h"
#include "common/inventory/schema.h"
#include "common/metrics/metrics_server.h"
#include "common/rpc/rpc.h"
#include "common/util/dir_lock.h"
#include "common/util/file.h"
#include "common/util/log.h"
#include "common/util/net.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "prometheus/registry.h"

namespace {

std::string Hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// Every setting of the agent, documented once next to its default.
struct AgentConfig {
  std::string coordinator = "127.0.0.1:7601";
  std::string token;
  std::string token_file;
  bool insecure = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string agent_id = Hostname();
  std::string arch = "n150";
  std::int64_t device_count = 1;
  std::string device_path = "/dev/tenstorrent";
  std::string pool = "default";
  bool cpu_only = false;
  std::vector<std::string> playbooks;
  std::vector<std::string> executors = {"native", "command"};
  std::string workspace;
  std::string data_dir = "triage-agent-data";
  std::string python = "/usr/bin/python3";
  std::string scripts_dir;
  std::string replay_dir;
  std::int64_t probe_timeout_seconds = 600;
  std::int64_t pytest_timeout_seconds = 3600;
  std::int64_t probe_nice = 10;
  std::int64_t command_timeout_seconds = 0;
  std::vector<std::string> command_env_allow;
  std::int64_t lease_wait_seconds = 20;
  std::string metrics_address;
  bool exit_when_drained = false;
  std::int64_t max_shards = 0;
  std::int64_t verify_batch = 8;
  std::int64_t runner_check_timeout_seconds = 300;
  std::int64_t runner_recheck_seconds = 300;
  std::string log_level = "info";

  void Register(triage::config::Schema& s) {
    using triage::config::kMaxSeconds;
    using triage::config::Range;
    s.Add("coordinator", &coordinator, "host:port of the coordinator's agent listener",
          [](std::string_view v) -> std::string {
            // gRPC target URIs (dns:///host:port, unix:/path, ...) pass as they are.
            if (v.find(":/") != std::string_view::npos) return "";
            return triage::config::HostPort(false)(v);
          });
    s.Add("token", &token, "bearer token (role agent); prefer token_file");
    s.Add("token_file", &token_file, "file holding the bearer token");
    s.Add("insecure", &insecure, "plaintext gRPC (only on a trusted network)");
    s.Add("tls_ca", &tls_ca, "PEM CA of the coordinator's certificate (\"\" = system roots)");
    s.Add("tls_cert", &tls_cert, "PEM client certificate for mutual TLS");
    s.Add("tls_key", &tls_key, "PEM client key for mutual TLS");
    s.Add("agent_id", &agent_id, "stable id of this agent (default: the hostname)",
          triage::config::NonEmpty());
    s.Add("arch", &arch, "n150, p150, n300-llmbox, ...");
    s.Add("device_count", &device_count, "Tenstorrent devices on this machine", Range{1, 1024});
    s.Add("device_path", &device_path,
          "where a device agent's devices are: the self-check wants device_count entries there "
          "(\"\" = no device check, for emulated devices)");
    s.Add("pool", &pool, "pool name (for operators)");
    s.Add("cpu_only", &cpu_only, "no device: run probe phases only");
    s.Add("playbooks", &playbooks, "playbooks this agent runs (empty: all)");
    s.Add("executors", &executors, "executors this agent offers (command, native, replay)");
    s.Add("workspace", &workspace, "this agent's tt-xla checkout (with the submodule)");
    s.Add("data_dir", &data_dir, "shard directories and results not yet acknowledged",
          triage::config::NonEmpty());
    s.Add("python", &python, "the workspace's Python (probe, pytest)");
    s.Add("scripts_dir", &scripts_dir,
          "directory of triage_probe.py and triage_pytest_plugin.py (default: found next to "
          "the binary or in the source tree)");
    s.Add("replay_dir", &replay_dir,
          "evidence to answer the replay executor from (docs/evidence.md)");
    s.Add("probe_timeout_seconds", &probe_timeout_seconds, "kill a probe after this long",
          Range{1, kMaxSeconds});
    s.Add("pytest_timeout_seconds", &pytest_timeout_seconds, "kill a pytest run after this long",
          Range{1, kMaxSeconds});
    s.Add("probe_nice", &probe_nice,
          "niceness added to probe processes, which hold no device (0: as the agent's)",
          Range{0, 19});
    s.Add("command_timeout_seconds", &command_timeout_seconds,
          "kill a command-executor run after this long (0: the shard's timeout)",
          Range{0, kMaxSeconds});
    s.Add("command_env_allow", &command_env_allow,
          "environment variables a command-executor run may see besides the built-in allow-list "
          "(names only; docs/farm.md, \"Executors\")");
    s.Add("lease_wait_seconds", &lease_wait_seconds, "long-poll wait per Lease call",
          Range{1, 3600});
    s.Add("metrics_address", &metrics_address, "host:port of /metrics (\"\" = off)",
          triage::config::HostPort(true));
    s.Add("exit_when_drained", &exit_when_drained, "exit once the coordinator drains this agent");
    s.Add("max_shards", &max_shards, "exit after this many shards (0 = never)",
          Range{0, 1'000'000'000});
    s.Add("verify_batch", &verify_batch,
          "verify-phase shards to run in one pytest session (1: one shard per lease)",
          Range{1, 64});
    s.Add("runner_check_timeout_seconds", &runner_check_timeout_seconds,
          "kill a subprocess of the runner self-check (import, collection) after this long",
          Range{1, kMaxSeconds});
    s.Add("runner_recheck_seconds", &runner_recheck_seconds,
          "while the runner self-check finds a problem, check again this often",
          Range{1, kMaxSeconds});
    s.Add("log_level", &log_level, "trace, debug, info, warn, error",
          triage::config::OneOf({"trace", "debug", "info", "warn", "error"}));
  }
};

// agent/scripts: next to an installed binary, or in the source tree of a build.
std::string FindScripts(const char* argv0) {
  std::error_code ec;
  auto exe = std::filesystem::canonical("/proc/self/exe", ec);
  if (ec) exe = std::filesystem::absolute(argv0, ec);
  for (const auto& candidate : {exe.parent_path() / "scripts",
                                exe.parent_path().parent_path() / "share/triage-farm/scripts",
                                std::filesystem::path(TRIAGE_SOURCE_DIR) / "agent/scripts"}) {
    if (std::filesystem::exists(candidate / "triage_probe.py", ec)) return candidate.string();
  }
  return (std::filesystem::path(TRIAGE_SOURCE_DIR) / "agent/scripts").string();
}

int Fail(const std::string& message) {
  std::cerr << "triage-agent: " << message << "\n";
  return 2;
}

// The replay executor's evidence (docs/evidence.md), read once at start the way a shard reads
// it: replay_dir itself and each shard directory below it. A malformed probe document or JUnit
// file would fail every shard that reaches it; it is named now instead.
absl::Status CheckReplayEvidence(const std::filesystem::path& replay_dir) {
  std::vector<std::filesystem::path> dirs = {replay_dir};
  std::error_code ec, ignored;
  for (const auto& e : std::filesystem::directory_iterator(replay_dir, ec)) {
    if (e.is_directory(ignored) && (std::filesystem::is_directory(e.path() / "probes", ignored) ||
                                    std::filesystem::is_directory(e.path() / "junit", ignored))) {
      dirs.push_back(e.path());
    }
  }
  if (ec)
    return absl::InvalidArgumentError(
        triage::util::StrCat(replay_dir.string(), ": ", ec.message()));
  for (const auto& dir : dirs) {
    auto tools = triage::agent::ReplayTools::Load(dir, {});
    if (!tools.ok()) return tools.status();
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace triage;
  const daemon::StopSignals signals = daemon::Start();

  AgentConfig cfg;
  config::Schema schema(config::kAgentEnvPrefix);
  cfg.Register(schema);
  CLI::App app{"triage-agent: runs triage shards leased from the coordinator"};
  if (auto exit_code = config::ParseCommandLine(schema, app, argc, argv, "triage-agent"))
    return *exit_code;
  daemon::SetUpLogging(cfg.log_level, util::StrCat("agent ", cfg.agent_id));
  rpc::RouteGrpcLogs();

  if (!cfg.token_file.empty()) {
    auto t = util::ReadFile(cfg.token_file, 4096);
    if (!t.ok()) return Fail(util::StrCat("--token_file: ", util::MessageOf(t.status())));
    cfg.token = std::string(util::TrimWhitespace(*t));
  }
  if (cfg.token.empty() && !cfg.insecure) {
    return Fail("no token: give token_file (role agent), or insecure for a trusted network");
  }
  if (cfg.insecure) spdlog::warn("insecure mode: plaintext gRPC to {}", cfg.coordinator);

  agent::GrpcClientOptions client_options;
  client_options.address = cfg.coordinator;
  client_options.tls = {cfg.tls_ca, cfg.tls_cert, cfg.tls_key, cfg.insecure};
  client_options.token = cfg.token;
  auto client = agent::GrpcCoordinatorClient::Create(client_options);
  if (!client.ok()) return Fail(util::MessageOf(client.status()));

  // Settings that would only fail later, on the first shard, are refused now, naming the flag.
  if (!cfg.cpu_only && !inventory::IsKnownArch(cfg.arch)) {
    return Fail(util::StrCat("--arch: unknown arch '", cfg.arch,
                             "' (known: ", util::StrJoin(inventory::kArchNames, ", "), ")"));
  }
  std::error_code ec;
  if (std::filesystem::exists(cfg.data_dir, ec) &&
      !std::filesystem::is_directory(cfg.data_dir, ec)) {
    return Fail(util::StrCat("--data_dir: ", cfg.data_dir, " exists and is not a directory"));
  }
  if (!cfg.replay_dir.empty() && !std::filesystem::is_directory(cfg.replay_dir, ec)) {
    return Fail(util::StrCat("--replay_dir: ", cfg.replay_dir, " is not a directory"));
  }
  if (!cfg.workspace.empty() && !std::filesystem::is_directory(cfg.workspace, ec)) {
    return Fail(util::StrCat("--workspace: ", cfg.workspace, " is not a directory"));
  }
  for (const auto& name : cfg.executors) {
    if (name != "command" && name != "native" && name != "replay") {
      return Fail(
          util::StrCat("--executors: unknown executor '", name, "' (native, command, replay)"));
    }
    if (name == "replay" && cfg.replay_dir.empty()) {
      return Fail("--executors replay needs --replay_dir (recorded evidence to answer from)");
    }
    if (name == "replay") {
      if (auto st = CheckReplayEvidence(cfg.replay_dir); !st.ok()) {
        return Fail(util::StrCat("--replay_dir: ", util::MessageOf(st)));
      }
    }
  }
  for (const auto& name : cfg.command_env_allow) {
    if (!command::ValidEnvName(name)) {
      return Fail(util::StrCat("command_env_allow: '", name,
                               "' is not an environment variable name (letters, digits, _)"));
    }
  }
  if (!cfg.executors.empty() && cfg.workspace.empty()) {
    return Fail("--executors " + util::StrJoin(cfg.executors, ",") +
                " need a --workspace (the agent's tt-xla checkout)");
  }
  // Subprocesses run in their own directories: every path handed to them is absolute.
  cfg.data_dir = std::filesystem::absolute(cfg.data_dir, ec).lexically_normal().string();
  if (!cfg.workspace.empty()) {
    cfg.workspace = std::filesystem::absolute(cfg.workspace, ec).lexically_normal().string();
  }
  if (!cfg.scripts_dir.empty()) {
    cfg.scripts_dir = std::filesystem::absolute(cfg.scripts_dir, ec).lexically_normal().string();
  }
  // A taken metrics port stops the start-up before data_dir or a lock file is created.
  if (const std::string problem = util::ListenProblem({{"--metrics_address", cfg.metrics_address}});
      !problem.empty()) {
    return Fail(problem);
  }
  // One agent per data directory (its spool) and per workspace, for the whole life of the process:
  // two agents would send each other's spooled results and reset each other's checkout mid-shard.
  std::filesystem::create_directories(cfg.data_dir, ec);
  if (ec) return Fail(util::StrCat("cannot create data_dir ", cfg.data_dir, ": ", ec.message()));
  auto data_lock = util::DirLock::Acquire(std::filesystem::path(cfg.data_dir) / "agent.lock",
                                          "data_dir", cfg.data_dir);
  if (!data_lock.ok()) return Fail(util::MessageOf(data_lock.status()));
  std::optional<util::DirLock> workspace_lock;
  std::unique_ptr<workspace::Workspace> ws;
  if (!cfg.workspace.empty()) {
    if (!std::filesystem::is_directory(cfg.workspace)) {
      return Fail(util::StrCat("workspace ", cfg.workspace, " is not a directory"));
    }
    auto lock = util::DirLock::Acquire(workspace::Workspace::LockFile(cfg.workspace), "workspace",
                                       cfg.workspace);
    if (!lock.ok()) return Fail(util::MessageOf(lock.status()));
    workspace_lock = std::move(*lock);
    ws = std::make_unique<workspace::Workspace>(cfg.workspace,
                                                std::filesystem::path(cfg.data_dir) / "shards");
  }

  auto registry = std::make_shared<prometheus::Registry>();
  agent::PrometheusAgentMetrics metrics(registry, TRIAGE_VERSION, cfg.cpu_only ? "cpu" : cfg.arch);
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  if (!cfg.metrics_address.empty()) {
    auto m = metrics::MetricsServer::Start(cfg.metrics_address, registry);
    if (!m.ok()) return Fail(util::MessageOf(m.status()));
    metrics_server = std::move(*m);
    (void)util::WriteFileAtomic(std::filesystem::path(cfg.data_dir) / "metrics_port",
                                util::StrCat(metrics_server->port(), "\n"));
    spdlog::info("metrics on port {}", metrics_server->port());
  }

  if (cfg.scripts_dir.empty()) cfg.scripts_dir = FindScripts(argv[0]);
  agent::CommandExecutor command(cfg.scripts_dir);
  agent::NativeExecutor native(cfg.scripts_dir);
  agent::NativeExecutor replay(cfg.scripts_dir, cfg.replay_dir);
  std::map<std::string, agent::Executor*> executors;
  for (const auto& name : cfg.executors) {
    if (name == "command") {
      executors[name] = &command;
    } else if (name == "native") {
      if (!std::filesystem::exists(std::filesystem::path(cfg.scripts_dir) / "triage_probe.py")) {
        return Fail(util::StrCat("no triage_probe.py in scripts_dir '", cfg.scripts_dir, "'"));
      }
      executors[name] = &native;
    } else if (name == "replay") {
      if (cfg.replay_dir.empty()) {
        return Fail("--executors replay needs --replay_dir (recorded evidence to answer from)");
      }
      executors[name] = &replay;
    } else {
      return Fail(util::StrCat("unknown executor '", name, "' (native, command, replay)"));
    }
  }
  if (!executors.empty() && ws == nullptr) {
    return Fail("executors need a workspace (the agent's tt-xla checkout)");
  }

  agent::AgentOptions options;
  auto* d = &options.dimensions;
  d->set_agent_id(cfg.agent_id);
  d->set_arch(cfg.cpu_only ? "cpu" : cfg.arch);
  d->set_device_count(static_cast<int>(cfg.device_count));
  d->set_pool(cfg.pool);
  d->set_cpu_only(cfg.cpu_only);
  for (const auto& p : cfg.playbooks) d->add_playbooks(p);
  d->set_version(TRIAGE_VERSION);
  d->set_hostname(Hostname());
  options.data_dir = cfg.data_dir;
  options.lease_wait = std::chrono::seconds(cfg.lease_wait_seconds);
  options.exec.python = cfg.python;
  options.exec.probe_script = std::filesystem::path(cfg.scripts_dir) / "triage_probe.py";
  options.exec.probe_timeout = std::chrono::seconds(cfg.probe_timeout_seconds);
  options.exec.pytest_timeout = std::chrono::seconds(cfg.pytest_timeout_seconds);
  options.exec.probe_nice = static_cast<int>(cfg.probe_nice);
  options.exec.command_timeout = std::chrono::seconds(cfg.command_timeout_seconds);
  options.exec.command_env_allow = cfg.command_env_allow;
  options.exec.playbooks = cfg.playbooks;
  options.exit_when_drained = cfg.exit_when_drained;
  options.max_shards = static_cast<int>(cfg.max_shards);
  options.max_batch = static_cast<int>(cfg.verify_batch);

  // The self-check (docs/farm.md, "Only a working agent is a witness"): only the native
  // executor runs tt-xla's runner.
  if (executors.count("native") > 0) {
    agent::RunnerCheckOptions check;
    check.python = cfg.python;
    check.workspace = cfg.workspace;
    check.cpu_only = cfg.cpu_only;
    check.device_path = cfg.device_path;
    check.device_count = static_cast<int>(cfg.device_count);
    check.timeout = std::chrono::seconds(cfg.runner_check_timeout_seconds);
    options.runner_check = [check](const std::function<bool()>& stopping) {
      agent::RunnerCheckOptions o = check;
      o.cancelled = stopping;
      return agent::CheckRunner(o);
    };
    options.runner_recheck = std::chrono::seconds(cfg.runner_recheck_seconds);
  }

  agent::Agent a(options, client->get(), ws.get(), executors, &metrics);
  // SIGINT/SIGTERM stop the agent while Run lasts; Run may also end on its own (a fatal error,
  // drained, max_shards), and the watcher then ends without a signal.
  absl::Status st;
  {
    daemon::SignalWatcher watcher(signals, [&a](int sig) {
      spdlog::info("signal {}: stopping", sig);
      a.Stop();
    });
    st = a.Run();
  }
  if (!st.ok()) return Fail(util::MessageOf(st));
  spdlog::info("stopped after {} shard(s)", a.shards_done());
  return 0;
}
