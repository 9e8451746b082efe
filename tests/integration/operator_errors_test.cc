// What an operator reads when a daemon or triagectl is set up wrong, with real processes on
// loopback: a wrong port, TLS on one side only, environment variables (each program its own
// prefix; the old names are reported, not used), and --help with types and defaults.

#include <signal.h>

#include "common/util/strings.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage {
namespace {

using namespace std::chrono_literals;

constexpr char kTlsHint[] =
    "TLS handshake failed or plaintext peer: is --insecure set on one side "
    "only?";

std::string Addr(int port) { return "127.0.0.1:" + std::to_string(port); }

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// No variable of the old or the new scheme leaks in from the test's own environment.
std::vector<std::pair<std::string, std::optional<std::string>>> CleanEnv(
    std::vector<std::pair<std::string, std::optional<std::string>>> set = {}) {
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
  for (const char* name :
       {"TRIAGE_COORDINATOR", "TRIAGE_TOKEN", "TRIAGE_TOKEN_FILE", "TRIAGE_INSECURE",
        "TRIAGE_TLS_CA", "TRIAGE_TLS_CERT", "TRIAGE_TLS_KEY", "TRIAGECTL_SERVER", "TRIAGECTL_TOKEN",
        "TRIAGECTL_TOKEN_FILE", "TRIAGECTL_INSECURE", "TRIAGECTL_TLS_CA", "TRIAGECTL_TLS_CERT",
        "TRIAGECTL_TLS_KEY"}) {
    env.emplace_back(name, std::nullopt);
  }
  env.insert(env.end(), set.begin(), set.end());
  return env;
}

class OperatorErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agent_port_ = testing::FreePort();
    control_port_ = testing::FreePort();
  }

  // extra: flags after the listener and data flags (--insecure, or TLS files).
  void StartCoordinator(std::vector<std::string> extra,
                        std::vector<std::pair<std::string, std::string>> env = {}) {
    std::vector<std::string> argv = {
        testing::kCoordinatorBinary, "--data_dir",        (tmp_.path() / "cdata").string(),
        "--agent_address",           Addr(agent_port_),   "--control_address",
        Addr(control_port_),         "--metrics_address", ""};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto git = testing::GitTestEnv();
    env.insert(env.end(), git.begin(), git.end());
    coordinator_ = std::make_unique<testing::ChildProcess>();
    ASSERT_TRUE(coordinator_->Start(argv, tmp_.path(), tmp_.path() / "coordinator.log", env));
    ASSERT_TRUE(testing::WaitFor(
        [&] { return std::filesystem::exists(tmp_.path() / "cdata" / "ports.json"); }, 15s))
        << Log("coordinator.log");
  }

  std::unique_ptr<testing::ChildProcess> StartAgent(
      const std::string& id, std::vector<std::string> extra,
      std::vector<std::pair<std::string, std::string>> env = {}) {
    std::vector<std::string> argv = {testing::kAgentBinary,
                                     "--agent_id",
                                     id,
                                     "--data_dir",
                                     (tmp_.path() / ("data-" + id)).string(),
                                     "--executors",
                                     "",
                                     "--lease_wait_seconds",
                                     "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto a = std::make_unique<testing::ChildProcess>();
    EXPECT_TRUE(a->Start(argv, tmp_.path(), tmp_.path() / (id + ".log"), env));
    return a;
  }

  // The log of a process ("" until it has one).
  std::string Log(const std::string& name) {
    std::error_code ec;
    if (!std::filesystem::exists(tmp_.path() / name, ec)) return "";
    return testing::ReadFileOrDie(tmp_.path() / name);
  }

  int Ctl(std::vector<std::string> args, std::string* out,
          std::vector<std::pair<std::string, std::optional<std::string>>> env = {}) {
    args.insert(args.begin(), testing::kCtlBinary);
    return testing::RunCommand(args, tmp_.path(), out, CleanEnv(std::move(env)));
  }

  // A CA, and a server certificate for 127.0.0.1 and localhost, made by openssl.
  void MakePki() {
    pki_ = tmp_.path() / "pki";
    std::filesystem::create_directories(pki_);
    auto ssl = [&](std::vector<std::string> args) {
      args.insert(args.begin(), "openssl");
      std::string out;
      ASSERT_EQ(testing::RunCommand(args, pki_, &out), 0) << out;
    };
    ssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
         "-keyout", "ca.key", "-out", "ca.pem"});
    testing::WriteFileOrDie(pki_ / "san.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
    ssl({"req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=server", "-keyout", "server.key",
         "-out", "server.csr"});
    ssl({"x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.pem"});
    testing::WriteFileOrDie(tmp_.path() / "tokens.yaml",
                            "tokens:\n  - {name: a, token: agent-secret-0123456789, role: agent}\n"
                            "  - {name: v, token: viewer-secret-0123456789, role: viewer}\n");
  }

  testing::TempDir tmp_;
  std::filesystem::path pki_;
  int agent_port_ = 0;
  int control_port_ = 0;
  std::unique_ptr<testing::ChildProcess> coordinator_;
};

// The agent pointed at the control port: a clear error naming the address and the fix, exit
// non-zero, and no "signal" line (nobody sent one).
// A first start writes coordinator.id beside the new database. With the database gone the
// coordinator refuses to start (exit 2, naming it) rather than create an empty one; --init
// creates it, moves the leftover WAL aside and writes a new id.
TEST_F(OperatorErrorsTest, ADeletedDatabaseIsReplacedOnlyWithInit) {
  const auto data = tmp_.path() / "cdata";
  StartCoordinator({"--insecure"});
  const std::string first_id = testing::ReadFileOrDie(data / "coordinator.id");
  EXPECT_EQ(first_id.size(), 33u) << first_id;
  coordinator_->Signal(SIGTERM);
  ASSERT_EQ(coordinator_->Wait(10s), 0) << Log("coordinator.log");
  coordinator_.reset();
  std::filesystem::remove(data / "coordinator.db");
  testing::WriteFileOrDie(data / "coordinator.db-wal", "stale");
  std::filesystem::remove(data / "ports.json");

  std::string out;
  const std::vector<std::string> argv = {testing::kCoordinatorBinary,
                                         "--insecure",
                                         "--data_dir",
                                         data.string(),
                                         "--agent_address",
                                         Addr(agent_port_),
                                         "--control_address",
                                         Addr(control_port_),
                                         "--metrics_address",
                                         ""};
  EXPECT_EQ(testing::RunCommand(argv, tmp_.path(), &out, CleanEnv()), 2) << out;
  EXPECT_TRUE(Contains(out, (data / "coordinator.db").string() + ": missing, but " + data.string() +
                                " holds coordinator.id, coordinator.db-wal"))
      << out;
  EXPECT_FALSE(std::filesystem::exists(data / "coordinator.db"));

  StartCoordinator({"--insecure", "--init"});
  EXPECT_TRUE(std::filesystem::exists(data / "coordinator.db"));
  EXPECT_EQ(testing::ReadFileOrDie(data / "coordinator.db-wal.orphan"), "stale");
  EXPECT_NE(testing::ReadFileOrDie(data / "coordinator.id"), first_id)
      << "a new database, a new id";
  EXPECT_TRUE(testing::WaitForCoordinator(control_port_, tmp_.path(), 10s));
}

TEST_F(OperatorErrorsTest, AgentOnTheControlPortSaysSoAndExits) {
  StartCoordinator({"--insecure"});
  auto agent = StartAgent("wrong-port", {"--insecure", "--coordinator", Addr(control_port_)});
  const int rc = agent->Wait(20s);
  const std::string log = Log("wrong-port.log");
  ASSERT_NE(rc, -1) << "still running:\n" << log;
  EXPECT_NE(rc, 0) << log;
  EXPECT_TRUE(Contains(log, Addr(control_port_) +
                                " does not serve the AgentService (UNIMPLEMENTED): is it the "
                                "coordinator's control port? agents use the agent port"))
      << log;
  EXPECT_FALSE(Contains(log, "signal")) << log;
}

// Settings that would fail only on the first shard are refused at startup, naming the flag.
TEST_F(OperatorErrorsTest, AgentRefusesBadSettingsAtStartup) {
  testing::WriteFileOrDie(tmp_.path() / "a-file", "x\n");
  const struct {
    std::string id;
    std::vector<std::string> flags;
    std::string says;
  } cases[] = {
      {"arch", {"--arch", "n151"}, "--arch: unknown arch 'n151'"},
      {"replay", {"--replay_dir", (tmp_.path() / "missing").string()}, "--replay_dir: "},
      {"replay-needed", {"--executors", "replay"}, "--executors replay needs --replay_dir"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> flags = {"--insecure", "--coordinator", "127.0.0.1:1"};
    flags.insert(flags.end(), c.flags.begin(), c.flags.end());
    auto agent = StartAgent(c.id, flags);
    const int rc = agent->Wait(20s);
    const std::string log = Log(c.id + ".log");
    EXPECT_EQ(rc, 2) << c.id << ":\n" << log;
    EXPECT_TRUE(Contains(log, c.says)) << c.id << ":\n" << log;
  }
  // --data_dir naming a file.
  testing::ChildProcess agent;
  ASSERT_TRUE(agent.Start({testing::kAgentBinary, "--insecure", "--coordinator", "127.0.0.1:1",
                           "--data_dir", (tmp_.path() / "a-file").string(), "--executors", ""},
                          tmp_.path(), tmp_.path() / "file.log"));
  EXPECT_EQ(agent.Wait(20s), 2) << Log("file.log");
  EXPECT_TRUE(Contains(Log("file.log"), "exists and is not a directory")) << Log("file.log");
  EXPECT_EQ(testing::ReadFileOrDie(tmp_.path() / "a-file"), "x\n");
}

// The agent stopped by a real signal still says so.
TEST_F(OperatorErrorsTest, AgentStoppedBySigtermLogsTheSignal) {
  StartCoordinator({"--insecure"});
  auto agent = StartAgent("stopped", {"--insecure", "--coordinator", Addr(agent_port_)});
  ASSERT_TRUE(testing::WaitFor([&] { return Contains(Log("stopped.log"), "registered as"); }, 15s))
      << Log("stopped.log");
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(15s), 0) << Log("stopped.log");
  EXPECT_TRUE(Contains(Log("stopped.log"), "signal 15: stopping")) << Log("stopped.log");
}

TEST_F(OperatorErrorsTest, TriagectlOnTheAgentPortSaysSo) {
  StartCoordinator({"--insecure"});
  std::string out;
  EXPECT_EQ(Ctl({"agents", "list", "--insecure", "--coordinator", Addr(agent_port_)}, &out), 2)
      << out;
  EXPECT_TRUE(Contains(out, "triagectl: " + Addr(agent_port_) +
                                " does not serve the ControlService (UNIMPLEMENTED): is it the "
                                "coordinator's agent port? triagectl uses the control port"))
      << out;
}

// TLS coordinator, plaintext clients.
TEST_F(OperatorErrorsTest, PlaintextClientsOfATlsCoordinatorNameTheLikelyCause) {
  MakePki();
  StartCoordinator({"--tls_cert", (pki_ / "server.pem").string(), "--tls_key",
                    (pki_ / "server.key").string(), "--tokens_file",
                    (tmp_.path() / "tokens.yaml").string()});
  std::string out;
  EXPECT_EQ(Ctl({"agents", "list", "--insecure", "--coordinator", Addr(control_port_)}, &out), 2)
      << out;
  EXPECT_TRUE(
      Contains(out, "cannot reach the coordinator at " + Addr(control_port_) + ": " + kTlsHint))
      << out;

  auto agent = StartAgent("plain", {"--insecure", "--coordinator", Addr(agent_port_)});
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return Contains(Log("plain.log"),
                        "cannot reach the coordinator at " + Addr(agent_port_) + ": " + kTlsHint);
      },
      20s))
      << Log("plain.log");
}

// Plaintext coordinator, TLS clients.
TEST_F(OperatorErrorsTest, TlsClientsOfAPlaintextCoordinatorNameTheLikelyCause) {
  MakePki();
  StartCoordinator({"--insecure"});
  std::string out;
  EXPECT_EQ(Ctl({"agents", "list", "--tls-ca", (pki_ / "ca.pem").string(), "--token",
                 "viewer-secret-0123456789", "--coordinator", Addr(control_port_)},
                &out),
            2)
      << out;
  EXPECT_TRUE(
      Contains(out, "cannot reach the coordinator at " + Addr(control_port_) + ": " + kTlsHint))
      << out;

  auto agent = StartAgent("tls", {"--tls_ca", (pki_ / "ca.pem").string(), "--token",
                                  "agent-secret-0123456789", "--coordinator", Addr(agent_port_)});
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return Contains(Log("tls.log"),
                        "cannot reach the coordinator at " + Addr(agent_port_) + ": " + kTlsHint);
      },
      20s))
      << Log("tls.log");
}

// triagectl reads TRIAGECTL_*; an old TRIAGE_* variable is reported and not used.
TEST_F(OperatorErrorsTest, TriagectlReadsItsOwnEnvironmentAndReportsTheOldNames) {
  StartCoordinator({"--insecure"});
  std::string out;
  EXPECT_EQ(Ctl({"agents", "list"}, &out,
                {{"TRIAGECTL_SERVER", Addr(control_port_)}, {"TRIAGECTL_INSECURE", "1"}}),
            0)
      << out;
  EXPECT_TRUE(Contains(out, "AGENT")) << out;
  EXPECT_FALSE(Contains(out, "warning")) << out;

  // The old names alone: one warning each, and the default address/TLS are used instead, so
  // the call cannot reach this coordinator.
  EXPECT_NE(Ctl({"agents", "list"}, &out,
                {{"TRIAGE_COORDINATOR", Addr(control_port_)}, {"TRIAGE_INSECURE", "1"}}),
            0)
      << out;
  EXPECT_TRUE(Contains(out,
                       "triagectl: warning: TRIAGE_COORDINATOR is set but no longer read "
                       "(ignored): use TRIAGECTL_SERVER\n"))
      << out;
  EXPECT_TRUE(Contains(out,
                       "triagectl: warning: TRIAGE_INSECURE is set but no longer read "
                       "(ignored): use TRIAGECTL_INSECURE\n"))
      << out;
  EXPECT_FALSE(Contains(out, "AGENT")) << out;
}

// The daemons read TRIAGE_COORDINATOR_* and TRIAGE_AGENT_*; an old TRIAGE_<NAME> of one of their
// settings is reported and not used, unless the new name is set too.
TEST_F(OperatorErrorsTest, DaemonsReadTheirOwnPrefixAndReportTheOldNames) {
  StartCoordinator({}, {{"TRIAGE_COORDINATOR_INSECURE", "true"}, {"TRIAGE_LOG_LEVEL", "debug"}});
  EXPECT_TRUE(Contains(Log("coordinator.log"),
                       "triage-coordinator: warning: TRIAGE_LOG_LEVEL is set but no longer read "
                       "(ignored): use TRIAGE_COORDINATOR_LOG_LEVEL\n"))
      << Log("coordinator.log");
  EXPECT_FALSE(Contains(Log("coordinator.log"), "debug [coordinator]")) << Log("coordinator.log");

  // TRIAGE_COORDINATOR was the agent's address and triagectl's control address at once: with
  // TRIAGE_AGENT_COORDINATOR set, the agent uses that and says nothing about the old one.
  auto agent = StartAgent("env", {},
                          {{"TRIAGE_AGENT_COORDINATOR", Addr(agent_port_)},
                           {"TRIAGE_AGENT_INSECURE", "1"},
                           {"TRIAGE_COORDINATOR", Addr(control_port_)},
                           {"TRIAGE_CPU_ONLY", "true"}});
  ASSERT_TRUE(testing::WaitFor([&] { return Contains(Log("env.log"), "registered as env"); }, 15s))
      << Log("env.log");
  const std::string log = Log("env.log");
  EXPECT_TRUE(Contains(log, "registered as env (n150)")) << "TRIAGE_CPU_ONLY is not read\n" << log;
  EXPECT_TRUE(Contains(log,
                       "triage-agent: warning: TRIAGE_CPU_ONLY is set but no longer read "
                       "(ignored): use TRIAGE_AGENT_CPU_ONLY\n"))
      << log;
  EXPECT_FALSE(Contains(log, "TRIAGE_COORDINATOR is set")) << log;
  std::string out;
  EXPECT_EQ(Ctl({"agents", "list", "--insecure", "--coordinator", Addr(control_port_)}, &out), 0)
      << out;
  EXPECT_TRUE(Contains(out, "\nenv ")) << out;
}

TEST_F(OperatorErrorsTest, HelpShowsTypesAndDefaults) {
  std::string out;
  ASSERT_EQ(testing::RunCommand({testing::kCoordinatorBinary, "--help"}, tmp_.path(), &out), 0)
      << out;
  for (const char* want :
       {"--lease_ttl_seconds INT [120]", "--insecure BOOL [false]",
        "--default_archs TEXT ... [n150]", "--control_address TEXT [127.0.0.1:7602]",
        "[env TRIAGE_COORDINATOR_DATA_DIR]"}) {
    EXPECT_TRUE(Contains(out, want)) << want << " not in:\n" << out;
  }
  ASSERT_EQ(testing::RunCommand({testing::kAgentBinary, "--help"}, tmp_.path(), &out), 0) << out;
  for (const char* want : {"--coordinator TEXT [127.0.0.1:7601]", "--cpu_only BOOL [false]",
                           "--executors TEXT ... [native,command]", "--max_shards INT [0]",
                           "[env TRIAGE_AGENT_COORDINATOR]"}) {
    EXPECT_TRUE(Contains(out, want)) << want << " not in:\n" << out;
  }
}

TEST_F(OperatorErrorsTest, EveryProgramAnswersVersion) {
  // The image test checks these lines in the container; here they are checked on the build.
  for (const auto& [binary, name] : {std::pair{testing::kCoordinatorBinary, "triage-coordinator"},
                                     std::pair{testing::kAgentBinary, "triage-agent"},
                                     std::pair{testing::kCtlBinary, "triagectl"}}) {
    std::string out;
    ASSERT_EQ(testing::RunCommand({binary, "--version"}, tmp_.path(), &out), 0) << out;
    EXPECT_EQ(out, util::StrCat(name, " ", TRIAGE_VERSION, "\n")) << binary;
  }
}

}  // namespace
}  // namespace triage
