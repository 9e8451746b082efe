// The Helm chart's weekly-sweep CronJob runs its command against a real coordinator: the chart is
// rendered by helm's own template engine (the offline helm-template of the shared tools), and the
// CronJob's container is run the way the kubelet would run it, with real triage-coordinator,
// triage-agent and triagectl processes on loopback:
//  - the Secret's items are written where the pod mounts them, env comes from the downward API
//    (the job-name label) and the Secret, $(VAR) in args is expanded as the kubelet does;
//  - the coordinator reads the rendered Secret too (TLS, client CA, tokens.yaml), so the job's
//    token, certificate and role are the ones the chart wires up;
//  - only --coordinator (the Service's name) and the mount paths are pointed at this machine.
// A run killed while --wait follows its sweep and run again with the same Job name returns the
// same sweep; with an agent the sweep ends and --wait exits 0; the next week's Job name starts a
// new sweep.

#include <signal.h>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_support.h"
#include "yaml-cpp/yaml.h"

namespace triage {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kHelmTemplate = TRIAGE_HELM_TEMPLATE;
const std::string kChart = TRIAGE_SOURCE_DIR "/charts/triage-farm";
// <cronjob name>-<scheduled time in minutes since the epoch>, as the CronJob controller names Jobs.
constexpr char kJobName[] = "rel-triage-farm-weekly-sweep-29412345";
constexpr char kNextWeekJobName[] = "rel-triage-farm-weekly-sweep-29422425";
const std::string kAgentToken = "agent-token-0123456789abcdef";
const std::string kSweepToken = "weekly-sweep-token-0123456789";

// A Secret's data, decoded.
using SecretData = std::map<std::string, std::string>;

// The CronJob's container as the kubelet would start it on this machine.
struct PodCommand {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
};

// The kubelet's expansion of $(VAR) in args: a defined VAR is replaced, $$ is a literal $, and
// anything else is left as it is.
std::string ExpandKubelet(const std::string& arg, const std::map<std::string, std::string>& env) {
  std::string out;
  for (size_t i = 0; i < arg.size();) {
    if (arg.compare(i, 2, "$$") == 0) {
      out += '$';
      i += 2;
      continue;
    }
    if (arg.compare(i, 2, "$(") == 0) {
      const size_t close = arg.find(')', i + 2);
      if (close != std::string::npos) {
        auto it = env.find(arg.substr(i + 2, close - i - 2));
        if (it != env.end()) {
          out += it->second;
          i = close + 1;
          continue;
        }
      }
    }
    out += arg[i++];
  }
  return out;
}

// One document of the rendered chart by kind; a null node when there is none, a failure when
// there are several.
YAML::Node OneOfKind(const std::vector<YAML::Node>& docs, const std::string& kind) {
  YAML::Node found;
  int n = 0;
  for (const auto& d : docs) {
    if (d.IsMap() && d["kind"] && d["kind"].as<std::string>() == kind) {
      found = d;
      ++n;
    }
  }
  EXPECT_LE(n, 1) << n << " objects of kind " << kind;
  return found;
}

class WeeklySweepCronJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::is_regular_file(kHelmTemplate))
        << kHelmTemplate
        << " is missing: this test renders the chart with it (the offline helm template of the "
           "shared tools, beside the checkout)";
    repo_ = testing::MakeUnpackRepo(tmp_.path(), 2);
    tool_ = tmp_.path() / "triage-tool.sh";
    testing::WriteLoaderTool(tool_);
    MakePki();
    agent_port_ = testing::FreePort();
    control_port_ = testing::FreePort();
  }

  void TearDown() override {
    if (agent_) agent_->Signal(SIGTERM);
    if (coordinator_) coordinator_->Signal(SIGTERM);
  }

  void Ssl(std::vector<std::string> args) {
    args.insert(args.begin(), "openssl");
    std::string out;
    ASSERT_EQ(testing::RunCommand(args, pki_, &out), 0) << out;
  }

  // A CA; a server certificate for the coordinator Service's name and 127.0.0.1; a client
  // certificate (the agents', which the job presents too under mutual TLS).
  void MakePki() {
    pki_ = tmp_.path() / "pki";
    fs::create_directories(pki_);
    Ssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
         "-keyout", "ca.key", "-out", "ca.pem"});
    testing::WriteFileOrDie(pki_ / "san.ext",
                            "subjectAltName=DNS:rel-triage-farm-coordinator,IP:127.0.0.1\n");
    for (const std::string name : {"server", "client"}) {
      Ssl({"req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + name, "-keyout", name + ".key",
           "-out", name + ".csr"});
      std::vector<std::string> sign = {"x509",   "-req",   "-in",        name + ".csr",     "-CA",
                                       "ca.pem", "-CAkey", "ca.key",     "-CAcreateserial", "-days",
                                       "2",      "-out",   name + ".pem"};
      if (name == "server") sign.insert(sign.end(), {"-extfile", "san.ext"});
      Ssl(sign);
    }
  }

  // The chart's values for this farm: mutual TLS, tokens, the weekly sweep of the fixture
  // repository with the command executor (through extraArgs, so the shards finish at once).
  // With generated_: no certificate, key or agent token given, so the chart generates them (its
  // default install); the coordinator's certificate also names 127.0.0.1, where it listens here.
  fs::path WriteValues() {
    YAML::Node v;
    v["tls"]["enabled"] = true;
    v["tls"]["mutual"] = true;
    if (generated_) {
      v["tls"]["extraIpAddresses"].push_back("127.0.0.1");
    } else {
      v["tls"]["cert"] = testing::ReadFileOrDie(pki_ / "server.pem");
      v["tls"]["key"] = testing::ReadFileOrDie(pki_ / "server.key");
      v["tls"]["ca"] = testing::ReadFileOrDie(pki_ / "ca.pem");
      v["tls"]["agentCert"] = testing::ReadFileOrDie(pki_ / "client.pem");
      v["tls"]["agentKey"] = testing::ReadFileOrDie(pki_ / "client.key");
      v["auth"]["agentToken"] = kAgentToken;
    }
    YAML::Node w = v["weeklySweep"];
    w["enabled"] = true;
    w["gitUrl"] = "file://" + repo_.string();
    w["ref"] = "main";
    w["archs"].push_back("n150");
    w["playbooks"].push_back("unpack_forward_output");
    w["maxFailedShards"] = 5;
    w["operatorToken"] = kSweepToken;
    for (const std::string& a :
         {std::string("--executor"), std::string("command"), std::string("--command"),
          "[\"" + tool_.string() + "\", \"{workspace}/{loader_dir}\", \"{key}\"]",
          std::string("--per"), std::string("shard"), std::string("--param"),
          std::string("verify=false")}) {
      w["extraArgs"].push_back(a);
    }
    const fs::path path = tmp_.path() / "values.yaml";
    testing::WriteFileOrDie(path, YAML::Dump(v) + "\n");
    return path;
  }

  // `helm-template rel CHART -f values`: the CronJob and the Secret it uses.
  void Render() {
    std::string out;
    ASSERT_EQ(testing::RunCommand({kHelmTemplate, "rel", kChart, "-f", WriteValues().string()},
                                  tmp_.path(), &out),
              0)
        << out;
    std::vector<YAML::Node> docs = YAML::LoadAll(out);
    cronjob_ = OneOfKind(docs, "CronJob");
    ASSERT_TRUE(cronjob_.IsMap()) << "no CronJob rendered:\n" << out;
    YAML::Node secret = OneOfKind(docs, "Secret");
    ASSERT_TRUE(secret.IsMap()) << "no Secret rendered:\n" << out;
    secret_name_ = secret["metadata"]["name"].as<std::string>();
    for (const auto& kv : secret["data"]) {
      std::string decoded;
      ASSERT_TRUE(absl::Base64Unescape(kv.second.as<std::string>(), &decoded))
          << kv.first.as<std::string>();
      secret_[kv.first.as<std::string>()] = decoded;
    }
  }

  // The rendered Secret's key, written to dir/key (what a pod mounting it would see).
  fs::path SecretFile(const fs::path& dir, const std::string& key) {
    fs::create_directories(dir);
    EXPECT_TRUE(secret_.count(key)) << "the rendered Secret has no key " << key;
    testing::WriteFileOrDie(dir / key, secret_[key]);
    return dir / key;
  }

  // The coordinator as the chart sets it up: TLS, client CA and tokens from the rendered Secret.
  void StartCoordinator() {
    const fs::path s = tmp_.path() / "coordinator-secret";
    coordinator_ = std::make_unique<testing::ChildProcess>();
    ASSERT_TRUE(coordinator_->Start({testing::kCoordinatorBinary,
                                     "--data_dir",
                                     (tmp_.path() / "cdata").string(),
                                     "--agent_address",
                                     "127.0.0.1:" + std::to_string(agent_port_),
                                     "--control_address",
                                     "127.0.0.1:" + std::to_string(control_port_),
                                     "--metrics_address",
                                     "",
                                     "--tick_ms",
                                     "100",
                                     "--heartbeat_interval_seconds",
                                     "1",
                                     "--lease_wait_seconds",
                                     "1",
                                     "--tls_cert",
                                     SecretFile(s, "tls.crt").string(),
                                     "--tls_key",
                                     SecretFile(s, "tls.key").string(),
                                     "--tls_client_ca",
                                     SecretFile(s, "ca.crt").string(),
                                     "--tokens_file",
                                     SecretFile(s, "tokens.yaml").string()},
                                    tmp_.path(), tmp_.path() / "coordinator.log",
                                    testing::GitTestEnv()));
    ASSERT_TRUE(
        testing::WaitFor([&] { return fs::exists(tmp_.path() / "cdata" / "ports.json"); }, 15s))
        << testing::ReadFileOrDie(tmp_.path() / "coordinator.log");
  }

  // An agent as the chart's DaemonSet sets it up (its token and certificate from the Secret),
  // with the command executor.
  void StartAgent() {
    const fs::path s = tmp_.path() / "agent-secret";
    auto ws = testing::CloneWorkspace(repo_, tmp_.path() / "ws");
    agent_ = std::make_unique<testing::ChildProcess>();
    ASSERT_TRUE(agent_->Start({testing::kAgentBinary,
                               "--coordinator",
                               "127.0.0.1:" + std::to_string(agent_port_),
                               "--agent_id",
                               "agent-0",
                               "--arch",
                               "n150",
                               "--workspace",
                               ws.string(),
                               "--data_dir",
                               (tmp_.path() / "adata").string(),
                               "--lease_wait_seconds",
                               "1",
                               "--executors",
                               "command",
                               "--metrics_address",
                               "",
                               "--token_file",
                               SecretFile(s, "agent-token").string(),
                               "--tls_ca",
                               SecretFile(s, "ca.crt").string(),
                               "--tls_cert",
                               SecretFile(s, "agent.crt").string(),
                               "--tls_key",
                               SecretFile(s, "agent.key").string()},
                              tmp_.path(), tmp_.path() / "agent.log", testing::GitTestEnv()));
  }

  // The CronJob's container for the Job named job_name, as the kubelet would start it: the
  // Secret volume's items under pod/<volume>, env from the job-name label and the Secret, $(VAR)
  // expanded; the Service address and the mount paths pointed at this machine.
  PodCommand Pod(const std::string& job_name) {
    PodCommand cmd;
    const YAML::Node pod = cronjob_["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    const YAML::Node c = pod["containers"][0];
    EXPECT_EQ(pod["containers"].size(), 1u);
    const fs::path root = tmp_.path() / ("pod-" + job_name);

    std::map<std::string, fs::path> mounts;  // mountPath -> directory here
    for (const auto& m : c["volumeMounts"]) {
      const std::string name = m["name"].as<std::string>();
      const fs::path dir = root / name;
      fs::create_directories(dir);
      for (const auto& v : pod["volumes"]) {
        if (v["name"].as<std::string>() != name || !v["secret"]) continue;
        EXPECT_EQ(v["secret"]["secretName"].as<std::string>(), secret_name_);
        for (const auto& item : v["secret"]["items"]) {
          const std::string key = item["key"].as<std::string>();
          EXPECT_TRUE(secret_.count(key)) << "mounted item " << key << " is not in the Secret";
          testing::WriteFileOrDie(dir / item["path"].as<std::string>(), secret_[key]);
        }
      }
      mounts[m["mountPath"].as<std::string>()] = dir;
    }

    std::map<std::string, std::string> env;
    for (const auto& e : c["env"]) {
      const std::string name = e["name"].as<std::string>();
      if (e["value"]) {
        env[name] = e["value"].as<std::string>();
      } else if (e["valueFrom"]["fieldRef"]) {
        EXPECT_EQ(e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(),
                  "metadata.labels['job-name']")
            << name;
        env[name] = job_name;
      } else if (e["valueFrom"]["secretKeyRef"]) {
        const YAML::Node ref = e["valueFrom"]["secretKeyRef"];
        EXPECT_EQ(ref["name"].as<std::string>(), secret_name_) << name;
        const std::string key = ref["key"].as<std::string>();
        EXPECT_TRUE(secret_.count(key)) << name << ": the Secret has no key " << key;
        env[name] = secret_[key];
      } else {
        ADD_FAILURE() << "env " << name << ": a source this test does not know";
      }
      cmd.env.emplace_back(name, env[name]);
    }

    const auto command = c["command"].as<std::vector<std::string>>();
    EXPECT_EQ(command, std::vector<std::string>{"triagectl"});
    cmd.argv.push_back(testing::kCtlBinary);
    auto args = c["args"].as<std::vector<std::string>>();
    for (size_t i = 0; i < args.size(); ++i) {
      std::string arg = ExpandKubelet(args[i], env);
      if (i > 0 && args[i - 1] == "--coordinator") {
        EXPECT_EQ(arg, "rel-triage-farm-coordinator:7602");
        arg = "127.0.0.1:" + std::to_string(control_port_);
      }
      for (const auto& [path, dir] : mounts) {
        if (arg.starts_with(path + "/")) {
          arg = (dir / arg.substr(path.size() + 1)).string();
          break;
        }
      }
      cmd.argv.push_back(arg);
    }
    return cmd;
  }

  // triagectl with the job's own connection (its certificate and token): `sweep list`.
  nlohmann::json Sweeps(const PodCommand& job) {
    std::vector<std::string> argv = {testing::kCtlBinary, "sweep", "list", "-o", "json"};
    for (const std::string flag : {"--coordinator", "--tls-ca", "--tls-cert", "--tls-key"}) {
      auto it = std::find(job.argv.begin(), job.argv.end(), flag);
      if (it != job.argv.end() && it + 1 != job.argv.end())
        argv.insert(argv.end(), {flag, *(it + 1)});
    }
    std::vector<std::pair<std::string, std::optional<std::string>>> env;
    for (const auto& [k, v] : job.env) env.emplace_back(k, v);
    std::string out;
    if (testing::RunCommand(argv, tmp_.path(), &out, env) != 0) {
      ADD_FAILURE() << "sweep list: " << out;
      return nlohmann::json::array();
    }
    return nlohmann::json::parse(out, nullptr, false).value("sweeps", nlohmann::json::array());
  }

  // Starts the job's command in the background, output to <name>.log.
  std::unique_ptr<testing::ChildProcess> Run(const PodCommand& job, const std::string& name) {
    auto p = std::make_unique<testing::ChildProcess>();
    EXPECT_TRUE(p->Start(job.argv, tmp_.path(), tmp_.path() / (name + ".log"), job.env));
    return p;
  }

  std::string Log(const std::string& name) {
    return fs::exists(tmp_.path() / name) ? testing::ReadFileOrDie(tmp_.path() / name) : "";
  }

  testing::TempDir tmp_;
  bool generated_ = false;
  fs::path repo_;
  fs::path tool_;
  fs::path pki_;
  int agent_port_ = 0;
  int control_port_ = 0;
  YAML::Node cronjob_;
  std::string secret_name_;
  SecretData secret_;
  std::unique_ptr<testing::ChildProcess> coordinator_;
  std::unique_ptr<testing::ChildProcess> agent_;
};

TEST_F(WeeklySweepCronJobTest, ARetriedRunReattachesAndWaitEndsWithTheSweep) {
  ASSERT_NO_FATAL_FAILURE(Render());
  ASSERT_NO_FATAL_FAILURE(StartCoordinator());
  const PodCommand job = Pod(kJobName);
  ASSERT_FALSE(HasFailure());
  EXPECT_THAT(job.argv, ::testing::Contains(kJobName)) << "--request-id is not the Job's name";

  // First pod: no agent yet, so --wait keeps following the sweep; the pod is lost (its node
  // went away) while it waits.
  auto first = Run(job, "run1");
  std::string id;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto sweeps = Sweeps(job);
        if (sweeps.size() != 1) return false;
        id = sweeps[0].value("id", "");
        return true;
      },
      30s))
      << Log("run1.log") << Log("coordinator.log");
  ASSERT_FALSE(id.empty());
  const std::string named = "sweep " + id + " ";  // how `sweep start` names it
  EXPECT_TRUE(
      testing::WaitFor([&] { return Log("run1.log").find(named) != std::string::npos; }, 10s))
      << Log("run1.log");
  EXPECT_EQ(first->Wait(1s), -1) << "--wait returned before the sweep ended:\n" << Log("run1.log");
  first->Signal(SIGKILL);
  first->Wait(10s);

  // The Job's retry: the same Job name, so the same request id and the same sweep.
  auto retry = Run(job, "run2");
  ASSERT_TRUE(
      testing::WaitFor([&] { return Log("run2.log").find(named) != std::string::npos; }, 30s))
      << Log("run2.log");
  auto sweeps = Sweeps(job);
  ASSERT_EQ(sweeps.size(), 1u) << sweeps.dump(2);
  EXPECT_EQ(sweeps[0].value("id", ""), id);

  // An agent runs the sweep to its end: --wait exits 0.
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  EXPECT_EQ(retry->Wait(120s), 0) << Log("run2.log") << Log("agent.log");
  sweeps = Sweeps(job);
  ASSERT_EQ(sweeps.size(), 1u) << sweeps.dump(2);
  EXPECT_EQ(sweeps[0].value("id", ""), id);
  EXPECT_EQ(sweeps[0].value("state", ""), "succeeded") << sweeps.dump(2);

  // Once more after the end (a retry that comes late): the same sweep, exit 0 at once.
  std::string out;
  std::vector<std::pair<std::string, std::optional<std::string>>> env(job.env.begin(),
                                                                      job.env.end());
  EXPECT_EQ(testing::RunCommand(job.argv, tmp_.path(), &out, env), 0) << out;
  EXPECT_NE(out.find(named), std::string::npos) << out;
  EXPECT_EQ(Sweeps(job).size(), 1u);

  // The next week's Job: another name, another request id, a new sweep, also run to its end.
  const PodCommand next = Pod(kNextWeekJobName);
  std::vector<std::pair<std::string, std::optional<std::string>>> next_env(next.env.begin(),
                                                                           next.env.end());
  EXPECT_EQ(testing::RunCommand(next.argv, tmp_.path(), &out, next_env), 0) << out;
  sweeps = Sweeps(job);
  ASSERT_EQ(sweeps.size(), 2u) << sweeps.dump(2);
  EXPECT_NE(sweeps[0].value("id", ""), sweeps[1].value("id", ""));
  EXPECT_EQ(out.find(named), std::string::npos) << out;
}

// The chart's default install: no certificate, key or agent token in the values. What the chart
// generates serves for real: the coordinator serves its certificate, the agent and the job
// verify it with the generated CA and present the generated client certificate, and the agent's
// generated token is in the coordinator's tokens file.
TEST_F(WeeklySweepCronJobTest, TheDefaultInstallsGeneratedSecretServesTheFarm) {
  generated_ = true;
  ASSERT_NO_FATAL_FAILURE(Render());
  for (const char* key :
       {"tls.crt", "tls.key", "ca.crt", "agent.crt", "agent.key", "agent-token"}) {
    ASSERT_TRUE(secret_.count(key) && !secret_[key].empty()) << "generated Secret lacks " << key;
  }
  EXPECT_GE(secret_["agent-token"].size(), 40u);
  EXPECT_NE(secret_["tokens.yaml"].find(secret_["agent-token"]), std::string::npos)
      << secret_["tokens.yaml"];
  ASSERT_NO_FATAL_FAILURE(StartCoordinator());
  const PodCommand job = Pod("rel-triage-farm-weekly-sweep-29000000");
  ASSERT_FALSE(HasFailure());
  auto run = Run(job, "run-default");
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  EXPECT_EQ(run->Wait(120s), 0) << Log("run-default.log") << Log("agent.log")
                                << Log("coordinator.log");
  auto sweeps = Sweeps(job);
  ASSERT_EQ(sweeps.size(), 1u) << sweeps.dump(2);
  EXPECT_EQ(sweeps[0].value("state", ""), "succeeded") << sweeps.dump(2);
}

}  // namespace
}  // namespace triage
