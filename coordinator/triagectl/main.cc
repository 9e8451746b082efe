// triagectl: the command-line front end of triage-farm.

#include <iostream>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "coordinator/triagectl/farm_cmd.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "coordinator/triagectl/nightly_policy_cmd.h"
#include "coordinator/triagectl/select_cmd.h"
#include "coordinator/triagectl/yaml_cmd.h"

namespace {

// When the words before the first option name a command that does not exist, or stop at a group
// that needs one ("triagectl sweep"), the message that lists the ones that do. CLI11 alone says
// only "The following arguments were not expected" or "A subcommand is required".
std::optional<std::string> SubcommandProblem(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  auto names = [](CLI::App* group) {
    std::string out;
    for (auto* c : group->get_subcommands([](CLI::App*) { return true; })) {
      out += (out.empty() ? "" : ", ") + c->get_name();
    }
    return out;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.starts_with("-")) return std::nullopt;  // options (and --help) are CLI11's
    auto subs = at->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) return std::nullopt;  // a command's own arguments
    CLI::App* next = nullptr;
    for (auto* c : subs) {
      if (c->check_name(word)) next = c;
    }
    if (next == nullptr) {
      if (at == &app) return "unknown command '" + word + "'; expected one of: " + names(at);
      return "unknown subcommand '" + word + "' of '" + at->get_name() +
             "'; expected one of: " + names(at);
    }
    at = next;
  }
  if (at == &app) return "a command is required; expected one of: " + names(at);
  if (!at->get_subcommands([](CLI::App*) { return true; }).empty()) {
    return "'" + at->get_name() + "' needs a subcommand; expected one of: " + names(at);
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace triage::ctl;
  CLI::App app{"triagectl: triage tt-xla model tests in bulk"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("triagectl ") + TRIAGE_VERSION);

  // inventory
  auto* inventory = app.add_subcommand("inventory", "Read, validate and classify test-config YAML");
  inventory->require_subcommand(1);
  InventoryOptions inv;
  auto add_repo = [&](CLI::App* cmd) {
    cmd->add_option("--repo", inv.repo, "tt-xla checkout (its working tree is read)")
        ->required()
        ->check(CLI::ExistingDirectory);
    cmd->add_option("--max-file-bytes", inv.max_file_bytes, "Refuse YAML files larger than this")
        ->capture_default_str();
  };
  auto* check = inventory->add_subcommand(
      "check", "Validate every tests/runner/test_config/**/*.yaml; print file:line:col: message");
  add_repo(check);
  auto* classify = inventory->add_subcommand("classify", "Which playbook handles each entry");
  add_repo(classify);
  classify->add_option("-o,--output", inv.output, "table or json")->capture_default_str();
  classify->add_option("--rules", inv.rules, "Classification rules YAML (default: built-in)")
      ->check(CLI::ExistingFile);
  classify->add_flag("--matched", inv.matched_only, "Only entries a playbook handles");
  auto* rules = inventory->add_subcommand("rules", "Print the built-in classification rules");
  auto* select = inventory->add_subcommand(
      "select", "The entries (or failure clusters) a sweep with these selection flags would take");
  add_repo(select);
  SelectFlags select_flags;
  SelectPreviewOptions select_preview;
  AddSelectFlags(select, select_flags);
  select->add_option("--arch", select_preview.archs, "Target archs, e.g. n150,p150 (default n150)")
      ->delimiter(',');
  select->add_option("--playbooks", select_preview.playbooks, "Without --failing: the playbooks")
      ->delimiter(',');
  select->add_flag("--clusters", select_preview.clusters_only,
                   "Print the failure clusters (id, entries, taken, signature), not the entries");
  select->add_option("-o,--output", inv.output, "table or json")->capture_default_str();

  // yaml
  auto* yaml = app.add_subcommand("yaml", "Edit test-config YAML in place, byte-faithfully");
  yaml->require_subcommand(1);
  YamlEditOptions edit;
  auto* yaml_edit = yaml->add_subcommand("edit", "Apply a batch of entry edits atomically");
  yaml_edit->add_option("FILE", edit.file, "The YAML file")->required();
  yaml_edit
      ->add_option("--edits", edit.edits, "JSON array of {key, arch, set, delete} (\"-\" = stdin)")
      ->required();
  yaml_edit->add_flag("--diff", edit.diff, "Print the unified diff and write nothing");

  // nightly
  auto* nightly = app.add_subcommand("nightly", "Nightly maintenance from the checkout alone");
  nightly->require_subcommand(1);
  NightlyPolicyOptions policy;
  auto* nightly_policy = nightly->add_subcommand(
      "policy",
      "The nightly policy the checkout's own maintenance history teaches, each knob with where "
      "it came from");
  nightly_policy->add_option("--repo", policy.repo, "tt-xla checkout (git)")
      ->required()
      ->check(CLI::ExistingDirectory);
  nightly_policy->add_option("--rev", policy.rev, "the commit whose history is read")
      ->capture_default_str();
  nightly_policy->add_option("--since", policy.since,
                             "no commit older than this date (YYYY-MM-DD)");
  nightly_policy
      ->add_option("--commits", policy.commits,
                   "the newest commits that changed test-config files to read")
      ->capture_default_str()
      ->check(CLI::Range(1, 5000));
  nightly_policy->add_option("--policy", policy.policy,
                             "a policy file whose knobs replace the learned ones");
  nightly_policy->add_option("-o,--output", policy.output, "yaml or json")->capture_default_str();

  FarmCommands farm;
  farm.Register(app);

  if (auto problem = SubcommandProblem(app, argc, argv)) {
    std::cerr << "triagectl: " << *problem << "\n";
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  // Input errors are reported where the input is read, with its file; this is the last line of
  // defence so that nothing ends in an abort.
  try {
    if (check->parsed()) return RunInventoryCheck(inv, std::cout, std::cerr);
    if (classify->parsed()) return RunInventoryClassify(inv, std::cout, std::cerr);
    if (rules->parsed()) return RunInventoryRules(std::cout);
    if (select->parsed()) {
      return RunInventorySelect(inv, select_flags, select_preview, std::cout, std::cerr);
    }
    if (yaml_edit->parsed()) return RunYamlEdit(edit, std::cin, std::cout, std::cerr);
    if (nightly_policy->parsed()) return RunNightlyPolicy(policy, std::cout, std::cerr);
    if (int rc = farm.Run(std::cout, std::cerr); rc >= 0) return rc;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "triagectl: unexpected error: " << e.what() << "\n";
    return kExitUsage;
  }
  return kExitUsage;
}
