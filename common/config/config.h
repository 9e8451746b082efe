#pragma once

#include <cstdint>
#include <filesystem>
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

// One typed config struct per binary registers its fields here, each with its doc next to its
// default. Values come, in increasing precedence, from the defaults, a YAML file (--config),
// TRIAGE_<NAME> environment variables and command-line flags (--name). A bad value is one
// clear line naming where it came from.
class Schema {
 public:
  void Add(std::string name, std::string* field, std::string doc);
  void Add(std::string name, std::int64_t* field, std::string doc);
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

 private:
  struct Field {
    std::string name;
    std::variant<std::string*, std::int64_t*, double*, bool*, std::vector<std::string>*> target;
    std::string doc;
    std::string flag_value;  // what the flag parser stored
    CLI::Option* option = nullptr;
  };
  Field* Find(std::string_view name);
  std::vector<Field> fields_;
  std::string config_path_;
  bool print_config_ = false;

 public:
  bool print_requested() const { return print_config_; }
};

// A daemon's command line in one call: flags from schema on app, parse, then Apply (file,
// environment, flags). Returns the exit code when main should stop now: after --help or
// --print-config (0), or on a bad flag or value (2, message on stderr prefixed with program).
// nullopt: go on.
std::optional<int> ParseCommandLine(Schema& schema, CLI::App& app, int argc, char** argv,
                                    std::string_view program);

// TRIAGE_LEASE_TTL_SECONDS for "lease_ttl_seconds".
std::string EnvName(std::string_view field);

}  // namespace triage::config
