#include "common/config/config.h"

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "gtest/gtest.h"

namespace triage::config {
namespace {

// A config struct of each field type, as the daemons register theirs.
struct Settings {
  std::string data_dir = "triage-data";
  std::string health_address;
  std::int64_t lease_ttl_seconds = 120;
  double ratio = 0.5;
  bool insecure = false;
  std::vector<std::string> default_archs = {"n150"};
  std::vector<std::string> playbooks;

  void Register(Schema& s) {
    s.Add("data_dir", &data_dir, "where data lives");
    s.Add("health_address", &health_address, "health listener");
    s.Add("lease_ttl_seconds", &lease_ttl_seconds, "lease lifetime");
    s.Add("ratio", &ratio, "a fraction");
    s.Add("insecure", &insecure, "plaintext");
    s.Add("default_archs", &default_archs, "archs");
    s.Add("playbooks", &playbooks, "playbooks");
  }
};

// Parses argv against the schema's flags, then applies env (not the process environment).
absl::Status Parse(Schema& schema, CLI::App& app, std::vector<std::string> args,
                   const std::map<std::string, std::string>& env = {}) {
  schema.AddFlags(app);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  app.parse(args);
  return schema.Apply(env);
}

TEST(ConfigHelp, ShowsEachFlagsTypeAndDefault) {
  Settings cfg;
  Schema schema(kCoordinatorEnvPrefix);
  cfg.Register(schema);
  CLI::App app{"test"};
  schema.AddFlags(app);
  const std::string help = app.help();
  for (const char* want :
       {"--data_dir TEXT [triage-data]", "--health_address TEXT [\"\"]",
        "--lease_ttl_seconds INT [120]", "--ratio FLOAT [0.5]", "--insecure BOOL [false]",
        "--default_archs TEXT ... [n150]", "--playbooks TEXT ... []",
        "[env TRIAGE_COORDINATOR_LEASE_TTL_SECONDS]"}) {
    EXPECT_NE(help.find(want), std::string::npos) << want << " not in:\n" << help;
  }
}

TEST(ConfigFlags, ParseEveryType) {
  Settings cfg;
  Schema schema(kAgentEnvPrefix);
  cfg.Register(schema);
  CLI::App app{"test"};
  ASSERT_TRUE(Parse(schema, app,
                    {"--lease_ttl_seconds", "30", "--insecure", "--default_archs", "n150,p150",
                     "--playbooks", "a", "b", "--ratio", "0.25"})
                  .ok());
  EXPECT_EQ(cfg.lease_ttl_seconds, 30);
  EXPECT_TRUE(cfg.insecure);
  EXPECT_EQ(cfg.default_archs, (std::vector<std::string>{"n150", "p150"}));
  EXPECT_EQ(cfg.playbooks, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(cfg.ratio, 0.25);
}

TEST(ConfigFlags, ABoolFlagTakesAnExplicitValue) {
  Settings cfg;
  cfg.insecure = true;
  Schema schema(kAgentEnvPrefix);
  cfg.Register(schema);
  CLI::App app{"test"};
  ASSERT_TRUE(Parse(schema, app, {"--insecure=false"}).ok());
  EXPECT_FALSE(cfg.insecure);
}

TEST(ConfigEnv, EachProgramHasItsOwnPrefix) {
  EXPECT_EQ(EnvName(kCoordinatorEnvPrefix, "data_dir"), "TRIAGE_COORDINATOR_DATA_DIR");
  EXPECT_EQ(EnvName(kAgentEnvPrefix, "coordinator"), "TRIAGE_AGENT_COORDINATOR");

  Settings coordinator, agent;
  Schema cs(kCoordinatorEnvPrefix), as(kAgentEnvPrefix);
  coordinator.Register(cs);
  agent.Register(as);
  const std::map<std::string, std::string> env = {{"TRIAGE_COORDINATOR_DATA_DIR", "/c"},
                                                  {"TRIAGE_AGENT_DATA_DIR", "/a"}};
  ASSERT_TRUE(cs.LoadEnvironment(env).ok());
  ASSERT_TRUE(as.LoadEnvironment(env).ok());
  EXPECT_EQ(coordinator.data_dir, "/c");
  EXPECT_EQ(agent.data_dir, "/a");
  EXPECT_TRUE(cs.warnings().empty());
  EXPECT_TRUE(as.warnings().empty());
}

TEST(ConfigEnv, AnOldStyleVariableIsNotReadButReported) {
  Settings cfg;
  Schema schema(kAgentEnvPrefix);
  cfg.Register(schema);
  ASSERT_TRUE(schema.LoadEnvironment({{"TRIAGE_DATA_DIR", "/old"}}).ok());
  EXPECT_EQ(cfg.data_dir, "triage-data") << "the old name must not be used";
  ASSERT_EQ(schema.warnings().size(), 1u);
  EXPECT_EQ(schema.warnings()[0],
            "TRIAGE_DATA_DIR is set but no longer read (ignored): use TRIAGE_AGENT_DATA_DIR");

  // With the new name set as well, the new one is used and nothing is reported.
  ASSERT_TRUE(
      schema.LoadEnvironment({{"TRIAGE_DATA_DIR", "/old"}, {"TRIAGE_AGENT_DATA_DIR", "/new"}})
          .ok());
  EXPECT_EQ(cfg.data_dir, "/new");
  EXPECT_TRUE(schema.warnings().empty());
}

TEST(ConfigEnv, FlagsOverrideTheEnvironment) {
  Settings cfg;
  Schema schema(kCoordinatorEnvPrefix);
  cfg.Register(schema);
  CLI::App app{"test"};
  ASSERT_TRUE(Parse(schema, app, {"--lease_ttl_seconds", "7"},
                    {{"TRIAGE_COORDINATOR_LEASE_TTL_SECONDS", "9"},
                     {"TRIAGE_COORDINATOR_INSECURE", "true"}})
                  .ok());
  EXPECT_EQ(cfg.lease_ttl_seconds, 7);
  EXPECT_TRUE(cfg.insecure);
}

TEST(ConfigEnv, ABadValueNamesTheVariable) {
  Settings cfg;
  Schema schema(kCoordinatorEnvPrefix);
  cfg.Register(schema);
  auto st = schema.LoadEnvironment({{"TRIAGE_COORDINATOR_LEASE_TTL_SECONDS", "soon"}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("environment TRIAGE_COORDINATOR_LEASE_TTL_SECONDS"),
            std::string::npos)
      << st.message();
}

// Each field declares its range next to its doc; a value outside is refused naming the setting
// and the source, whichever source it came from.
struct Ranged {
  std::int64_t attempts = 3;
  std::string address = "127.0.0.1:7601";
  std::string level = "info";
  std::string data_dir = "data";
  void Register(Schema& s) {
    s.Add("max_attempts", &attempts, "attempts", Range{1, 1000});
    s.Add("agent_address", &address, "listener", HostPort(false));
    s.Add("log_level", &level, "level", OneOf({"info", "warn"}));
    s.Add("data_dir", &data_dir, "data", NonEmpty());
  }
};

TEST(ConfigRange, NonEmptyRefusesTheEmptyText) {
  Ranged cfg;
  Schema schema(kCoordinatorEnvPrefix);
  cfg.Register(schema);
  auto st = schema.Set("data_dir", "", "flag --data_dir");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("must not be empty"), std::string::npos) << st.message();
  EXPECT_EQ(cfg.data_dir, "data");
  EXPECT_TRUE(schema.Set("data_dir", "elsewhere", "flag --data_dir").ok());
}

TEST(ConfigRange, RefusesOutOfRangeValuesNamingTheSource) {
  {
    Ranged cfg;
    Schema schema(kCoordinatorEnvPrefix);
    cfg.Register(schema);
    CLI::App app{"test"};
    auto st = Parse(schema, app, {"--max_attempts", "-1"});
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.message(),
              "flag --max_attempts: max_attempts: out of range: must be between 1 and 1000, got "
              "-1");
    EXPECT_EQ(cfg.attempts, 3) << "the field keeps its value";
  }
  {
    Ranged cfg;
    Schema schema(kCoordinatorEnvPrefix);
    cfg.Register(schema);
    auto st = schema.LoadEnvironment({{"TRIAGE_COORDINATOR_MAX_ATTEMPTS", "0"}});
    ASSERT_FALSE(st.ok());
    EXPECT_NE(std::string(st.message())
                  .find("environment TRIAGE_COORDINATOR_MAX_ATTEMPTS: "
                        "max_attempts: out of range"),
              std::string::npos)
        << st.message();
  }
  {
    Ranged cfg;
    Schema schema(kCoordinatorEnvPrefix);
    cfg.Register(schema);
    auto st = schema.LoadYaml("log_level: info\nmax_attempts: 1001\n", "c.yaml");
    ASSERT_FALSE(st.ok());
    EXPECT_NE(std::string(st.message()).find("c.yaml:2:1: max_attempts: out of range"),
              std::string::npos)
        << st.message();
  }
  Ranged cfg;
  Schema schema(kCoordinatorEnvPrefix);
  cfg.Register(schema);
  EXPECT_TRUE(schema.Set("max_attempts", "1000", "test").ok());
  EXPECT_EQ(cfg.attempts, 1000);
  EXPECT_NE(schema.Describe().find("max_attempts: 1000  # attempts (1..1000)"), std::string::npos)
      << schema.Describe();
}

TEST(ConfigRange, AddressesAndWords) {
  Ranged cfg;
  Schema schema(kCoordinatorEnvPrefix);
  cfg.Register(schema);
  for (const char* ok : {"127.0.0.1:0", "[::1]:7601", ":7601", "host.example:65535"}) {
    EXPECT_TRUE(schema.Set("agent_address", ok, "test").ok()) << ok;
  }
  for (const char* bad :
       {"", "localhost", "127.0.0.1:65536", "127.0.0.1:-1", "::1:7601", "host:http", "a b:1"}) {
    auto st = schema.Set("agent_address", bad, "flag --agent_address");
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_TRUE(std::string(st.message()).starts_with("flag --agent_address: agent_address: "))
        << st.message();
  }
  EXPECT_FALSE(schema.Set("log_level", "loud", "test").ok());
  EXPECT_TRUE(schema.Set("log_level", "warn", "test").ok());
}

}  // namespace
}  // namespace triage::config
