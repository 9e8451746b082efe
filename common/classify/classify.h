#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/inventory/document.h"

namespace re2 {
class RE2;
}

namespace triage::classify {

// Which playbook (and flavor of it) handles an entry, decided from its YAML reason.
struct Match {
  std::string playbook;
  std::string flavor;
  std::string arch;  // "" when the top-level reason matched, else the arch_overrides arch
  std::string reason;
  std::vector<std::string> captures;  // RE2 groups of the flavor pattern (e.g. the class name)
};

struct Classification {
  std::optional<Match> match;
  std::string reason;   // the entry's reason (top level, else the first override's), kept
  std::string why_not;  // when no playbook matched: why ("no reason", "status ...", ...)
};

// Rules loaded from YAML (see docs/classify.md; the built-in rules are the playbook
// catalog's, playbooks::DefaultClassifier() in agent/playbooks/catalog.h):
//   playbooks:
//     - name: dtype_bfloat16
//       run_modes: [training]                          # optional, default any
//       statuses: [NOT_SUPPORTED_SKIP, KNOWN_FAILURE_XFAIL]   # optional, default these two
//       require: ["BFloat16"]                          # optional: every pattern must match
//       flavors:
//         - name: op_not_implemented
//           any: ["not implemented for 'BFloat16'"]    # RE2; one must match
// Playbooks are tried in file order, flavors in order; the first match wins.
class Classifier {
 public:
  ~Classifier();
  Classifier(Classifier&&) noexcept;
  Classifier& operator=(Classifier&&) noexcept;

  // source names the rules in error messages ("rules.yaml:12:9: ...").
  static absl::StatusOr<Classifier> FromYaml(std::string_view yaml, std::string source);
  static absl::StatusOr<Classifier> FromFile(const std::filesystem::path& path);

  Classification Classify(const inventory::Entry& entry) const;
  // One reason with the entry's status (canonical NAME) and run mode ("" = unknown).
  std::optional<Match> ClassifyReason(std::string_view reason, std::string_view status,
                                      std::string_view run_mode) const;

  std::vector<std::string> Playbooks() const;
  std::vector<std::string> Flavors(std::string_view playbook) const;

 private:
  struct Flavor {
    std::string name;
    std::vector<std::unique_ptr<re2::RE2>> any;
  };
  struct Rule {
    std::string playbook;
    std::vector<std::string> run_modes;
    std::vector<std::string> statuses;
    std::vector<std::unique_ptr<re2::RE2>> require;
    std::vector<Flavor> flavors;
  };
  Classifier() = default;
  std::vector<Rule> rules_;
};

}  // namespace triage::classify
