#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace triage::config {

// Each program reads the environment variables of its own prefix only, so that one shell or pod
// can configure several programs without one reading another's setting.
inline constexpr char kCoordinatorEnvPrefix[] = "TRIAGE_COORDINATOR_";  // triage-coordinator
inline constexpr char kAgentEnvPrefix[] = "TRIAGE_AGENT_";              // triage-agent
// The variables of before: TRIAGE_<NAME> for every program. No longer read; a set one is
// reported (see Schema::warnings) so that a forgotten one does not go unnoticed.
inline constexpr char kLegacyEnvPrefix[] = "TRIAGE_";

// One typed config struct per binary registers its fields here, each with its doc next to its
// default. Values come, in increasing precedence, from the defaults, a YAML file (--config),
// <env_prefix><NAME> environment variables and command-line flags (--name). A bad value is one
// clear line naming where it came from. --help shows each flag's type and default.
// The values an integer setting accepts, declared where the setting is added: a value outside
// is refused with the setting's name and where the value came from.
struct Range {
  std::int64_t min;
  std::int64_t max;
};
// Seconds settings are capped at ten years, so that converting them to milliseconds or adding
// them to a clock cannot overflow.
inline constexpr std::int64_t kMaxSeconds = 10LL * 365 * 24 * 3600;
// Checks a text setting: "" when the value is acceptable, else what is wrong with it.
using TextCheck = std::function<std::string(std::string_view value)>;
// "host:port" with a port in 0..65535 ("[v6]:port" and ":port" too); allow_empty: "" = off.
TextCheck HostPort(bool allow_empty);
// One of the given words.
TextCheck OneOf(std::vector<std::string> words);
// Any text but "".
TextCheck NonEmpty();

class Schema {
 public:
  // env_prefix: kCoordinatorEnvPrefix, kAgentEnvPrefix.
  explicit Schema(std::string env_prefix) : env_prefix_(std::move(env_prefix)) {}

  void Add(std::string name, std::string* field, std::string doc, TextCheck check = {});
  void Add(std::string name, std::int64_t* field, std::string doc,
           std::optional<Range> range = std::nullopt);
  void Add(std::string name, double* field, std::string doc);
  void Add(std::string name, bool* field, std::string doc);
  void Add(std::string name, std::vector<std::string>* field, std::string doc);

  // Adds --config FILE and a flag per field to app; Apply() must be called after app.parse().
  void AddFlags(CLI::App& app);
  // Loads the config file named by --config (if any), then the environment, then the flags.
  absl::Status Apply(const std::map<std::string, std::string>& environment);
  absl::Status Apply();  // with the process environment

  // Individual sources (tests, and Apply's parts).
  absl::Status LoadYaml(std::string_view text, const std::string& source);
  absl::Status LoadEnvironment(const std::map<std::string, std::string>& environment);
  absl::Status Set(std::string_view name, std::string_view value, const std::string& source);

  // "name: default  # doc" lines: the reference printed by --print-config.
  std::string Describe() const;

  // Notes from the last LoadEnvironment, one line each: an old-style TRIAGE_<NAME> variable of
  // one of this program's settings is set and its new name is not ("TRIAGE_DATA_DIR is set but
  // no longer read (ignored): use TRIAGE_COORDINATOR_DATA_DIR"). ParseCommandLine prints them.
  const std::vector<std::string>& warnings() const { return warnings_; }
  const std::string& env_prefix() const { return env_prefix_; }

 private:
  struct Field {
    std::string name;
    std::variant<std::string*, std::int64_t*, double*, bool*, std::vector<std::string>*> target;
    std::string doc;
    std::optional<Range> range;            // integers
    TextCheck check;                       // text
    std::string flag_value;                // what the flag parser stored (single values)
    std::vector<std::string> flag_values;  // the same for lists
    CLI::Option* option = nullptr;
  };
  Field* Find(std::string_view name);
  // The field's doc with its accepted range, as --help and --print-config show it.
  static std::string DocOf(const Field& f);
  // "INT [120]", "BOOL [false]", "TEXT ... [n150]": the field's type and current value.
  static std::string FlagText(const Field& f);
  std::string env_prefix_;
  std::vector<Field> fields_;
  std::vector<std::string> warnings_;
  std::string config_path_;
  bool print_config_ = false;

 public:
  bool print_requested() const { return print_config_; }
};

// A daemon's command line in one call: flags from schema on app, parse, then Apply (file,
// environment, flags). Returns the exit code when main should stop now: after --help or
// --version or --print-config (0), or on a bad flag or value (2, message on stderr prefixed with
// program). nullopt: go on.
std::optional<int> ParseCommandLine(Schema& schema, CLI::App& app, int argc, char** argv,
                                    std::string_view program);

// The project's version ("0.1.0"), as --version prints it and the build-info metrics carry it.
std::string_view ProjectVersion();

// The one warning line about an old-style variable that is set but no longer read.
std::string LegacyEnvWarning(std::string_view old_name, std::string_view new_name);

// EnvName(kCoordinatorEnvPrefix, "lease_ttl_seconds") = "TRIAGE_COORDINATOR_LEASE_TTL_SECONDS".
std::string EnvName(std::string_view prefix, std::string_view field);

}  // namespace triage::config
