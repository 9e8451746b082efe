#include "coordinator/triagectl/farm_cmd.h"

#include <cstdlib>
#include <iostream>
#include <string_view>
#include <utility>

#include "CLI/CLI.hpp"
#include "common/config/config.h"
#include "coordinator/triagectl/farm_common.h"
#include "coordinator/triagectl/farm_durations_cmd.h"
#include "coordinator/triagectl/farm_land_cmd.h"
#include "coordinator/triagectl/farm_oncall_cmd.h"
#include "coordinator/triagectl/farm_results_cmd.h"
#include "coordinator/triagectl/farm_sweep_cmd.h"
#include "coordinator/triagectl/inventory_cmd.h"

namespace triage::ctl {
namespace {

// Each command Register adds, by the name Run knows it by.
constexpr std::pair<std::string_view, farm::Verb> kVerbs[] = {
    {"sweep start", farm::RunSweepStart},   {"sweep list", farm::RunSweepList},
    {"sweep status", farm::RunSweepStatus}, {"sweep cancel", farm::RunSweepCancel},
    {"sweep resume", farm::RunSweepResume}, {"sweep watch", farm::RunSweepWatch},
    {"sweep patch", farm::RunSweepPatch},   {"sweep report", farm::RunSweepReport},
    {"shards list", farm::RunShardsList},   {"shard requeue", farm::RunShardRequeue},
    {"shard cancel", farm::RunShardCancel}, {"agents list", farm::RunAgentsList},
    {"agents drain", farm::RunAgentDrain},  {"agents undrain", farm::RunAgentUndrain},
    {"sweep diff", farm::RunSweepDiff},     {"sweep audit", farm::RunAuditList},
    {"sweep issues", farm::RunSweepIssues}, {"audit list", farm::RunAuditList}};

// The verbs registered by a Register function of their own (RegisterSweepDurations,
// RegisterSweepLand).
constexpr std::pair<std::string_view, farm::Verb> kOwnVerbs[] = {
    {"sweep durations", farm::RunSweepDurations},
    {"sweep apply", farm::RunSweepApply},
    {"sweep pr-body", farm::RunSweepPrBody}};

// --stuck-minutes: a number of minutes above 0, at most a year.
CLI::Validator StuckMinutes() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !(x > 0) || x > 525600.0) {
          return "must be a number of minutes above 0 (at most a year), got " + v;
        }
        return "";
      },
      "MINUTES > 0");
}

}  // namespace

void FarmCommands::AddConnectionFlags(CLI::App* c) {
  // Environment: TRIAGECTL_* only (the daemons read TRIAGE_COORDINATOR_* and TRIAGE_AGENT_*). An
  // old-style TRIAGE_* variable of these flags is reported once and not used.
  static constexpr std::pair<const char*, const char*> kEnv[] = {
      {"TRIAGE_COORDINATOR", "TRIAGECTL_SERVER"},    {"TRIAGE_TOKEN", "TRIAGECTL_TOKEN"},
      {"TRIAGE_TOKEN_FILE", "TRIAGECTL_TOKEN_FILE"}, {"TRIAGE_TLS_CA", "TRIAGECTL_TLS_CA"},
      {"TRIAGE_TLS_CERT", "TRIAGECTL_TLS_CERT"},     {"TRIAGE_TLS_KEY", "TRIAGECTL_TLS_KEY"},
      {"TRIAGE_INSECURE", "TRIAGECTL_INSECURE"}};
  c->add_option("--coordinator", o_.conn.coordinator, "Control address host:port")
      ->envname("TRIAGECTL_SERVER")
      ->capture_default_str();
  c->add_option("--token", o_.conn.token, "Bearer token")->envname("TRIAGECTL_TOKEN");
  c->add_option("--token-file", o_.conn.token_file, "File holding the bearer token")
      ->envname("TRIAGECTL_TOKEN_FILE");
  c->add_option("--tls-ca", o_.conn.tls_ca, "PEM CA of the coordinator")
      ->envname("TRIAGECTL_TLS_CA");
  c->add_option("--tls-cert", o_.conn.tls_cert, "Client certificate (mutual TLS)")
      ->envname("TRIAGECTL_TLS_CERT");
  c->add_option("--tls-key", o_.conn.tls_key, "Client key (mutual TLS)")
      ->envname("TRIAGECTL_TLS_KEY");
  c->add_flag("--insecure", o_.conn.insecure, "Plaintext gRPC")->envname("TRIAGECTL_INSECURE");
  c->add_option("-o,--output", o_.output, "table or json")->capture_default_str();
  c->parse_complete_callback([] {
    for (const auto& [old_name, new_name] : kEnv) {
      if (std::getenv(old_name) != nullptr && std::getenv(new_name) == nullptr) {
        std::cerr << "triagectl: warning: " << config::LegacyEnvWarning(old_name, new_name) << "\n";
      }
    }
  });
}

CLI::App* FarmCommands::AddCommand(CLI::App* group, const std::string& name,
                                   const std::string& description) {
  auto* cmd = group->add_subcommand(name, description);
  AddConnectionFlags(cmd);
  cmds_[group->get_name() + " " + name] = cmd;
  return cmd;
}

void FarmCommands::Register(CLI::App& app) {
  RegisterSweep(app);
  RegisterShards(app);
  RegisterAgents(app);
  RegisterAudit(app);
}

void FarmCommands::RegisterSweepStart(CLI::App* sweep) {
  auto* start = AddCommand(sweep, "start", "Start a sweep over a tt-xla checkout");
  start->add_option("--repo", o_.repo, "tt-xla checkout visible to the coordinator (read at HEAD)");
  start->add_option("--git-url", o_.git_url, "Or a git URL the coordinator fetches");
  start->add_option("--ref", o_.git_ref, "Branch, tag or sha for --git-url (default HEAD)");
  start->add_option("--playbooks", o_.playbooks, "Playbooks (default: all)")->delimiter(',');
  start->add_option("--arch", o_.archs, "Target archs, e.g. n150,p150 (default n150)")
      ->delimiter(',');
  start->add_option("--durations", o_.durations, "pytest-split .test_durations file")
      ->check(CLI::ExistingFile);
  start->add_option("--executor", o_.executor, "native (default), command or replay");
  start->add_option("--command", o_.command,
                    "command executor: JSON argv array, e.g. '[\"tool\",\"{key}\"]'");
  start->add_option("--per", o_.per, "command executor: run per entry (default) or shard");
  start->add_option("--param", o_.params, "Executor parameter key=value (repeatable)");
  start->add_option("--priority", o_.priority, "Higher runs first");
  start->add_option("--max-attempts", o_.max_attempts, "Attempts before quarantine (1..1000)")
      ->check(CLI::Range(1, 1000));
  start->add_option("--reason", o_.reason, "Why (audit log)");
  start->add_option("--rules", o_.rules, "Classification rules YAML")->check(CLI::ExistingFile);
  start->add_option("--agent-repo-url", o_.agent_repo_url,
                    "Where agents fetch the commits (default: the repo's origin)");
  start->add_option("--forge-ref", o_.forge_ref,
                    "tt-forge-models branch, tag or sha to sweep (default: the submodule's "
                    "checked-out HEAD for --repo, the recorded gitlink for --git-url)");
  start->add_flag("--allow-dirty", o_.allow_dirty,
                  "--repo with local changes: sweep the HEAD commits without them (default: "
                  "refuse, listing the changed paths)");
  start->add_option("--request-id", o_.request_id,
                    "Idempotency key: the same key again returns the sweep it started instead "
                    "of starting another (e.g. the scheduled date of a weekly run)");
  start
      ->add_option("--max-failed-shards", o_.max_failed_shards,
                   "Failure budget: past N failed shards the sweep stops leasing and waits for "
                   "a person (`sweep resume`, `sweep cancel`); 0 = none (default)")
      ->check(CLI::Range(0, 100000));
  start->add_flag("--incremental", o_.incremental,
                  "Carry forward an earlier sweep's results for every loader whose inputs "
                  "(entries, loader tree, runner, registry, playbook, executor, archs) are "
                  "unchanged, and run only the rest");
  start
      ->add_option("--since", o_.since,
                   "--incremental: the sweep to carry from (default: the latest succeeded "
                   "sweep of the same repository)")
      ->needs("--incremental");
  AddSelectFlags(start, o_.select);
  AddRemediationFlags(start, o_.select);
  start->add_flag("--recheck-skipped", o_.recheck_skipped,
                  "Recheck every NOT_SUPPORTED_SKIP entry on the sweep's archs with --force-run "
                  "under the nightly rules (docs/nightly.md, \"Rechecking skipped entries\"); "
                  "with --max-device-hours, the entries checked longest ago first");
  start->add_option("--nightly", o_.nightly,
                    "A nightly sweep (docs/nightly.md): one CI run's downloaded test reports, a "
                    "directory of JUnit XML (found recursively; .zip/.tar.gz in it too) or an "
                    "archive; repeat for several runs. With --failing: no nightly sweep, the "
                    "failing entries whose test failed in these runs are taken");
  start
      ->add_option("--confirm", o_.confirm,
                   "--nightly: confirmation runs per candidate on its arch (default 2)")
      ->check(CLI::Range(1, 20));
  start->add_flag("--no-confirm", o_.no_confirm,
                  "--nightly: propose from the nightly alone, run nothing (labelled so)");
  start
      ->add_option("--max-device-hours", o_.max_device_hours,
                   "--nightly: device-time budget for confirmations, most valuable first; the "
                   "rest is reported unconfirmed (default: none)")
      ->check(CLI::Range(0.0, 100000.0));
  start
      ->add_option("--pcc-margin", o_.pcc_margin,
                   "--nightly: head room below the worst PCC for a threshold (0: none)")
      ->check(CLI::Range(0.0, 0.5));
  start->add_option("--pcc-step", o_.pcc_step, "--nightly: the threshold grid (0.01)")
      ->check(CLI::Range(0.0001, 0.5));
  start
      ->add_option("--pcc-far-below", o_.pcc_far_below,
                   "--nightly: at or below this PCC assert_pcc false, above it a lowered "
                   "threshold (0.97)")
      ->check(CLI::Range(0.0, 1.0));
  start
      ->add_option("--regression-runs", o_.regression_runs,
                   "--nightly: latest runs that must fail for a demotion (2)")
      ->check(CLI::Range(1, 100));
  start
      ->add_option("--promote-runs", o_.promote_runs,
                   "--nightly: latest runs that must pass for a promotion or new entry (2)")
      ->check(CLI::Range(1, 100));
  start->add_option("--policy", o_.policy,
                    "--nightly/--recheck-skipped: a nightly policy file (docs/nightly.md, \"The "
                    "policy\"); its knobs replace those learned from the checkout's history");
  start->add_flag("--no-learn", o_.no_learn,
                  "--nightly/--recheck-skipped: follow the default policy (with --policy's knobs "
                  "over it), not the one the checkout's maintenance history teaches");
  start->add_flag("--watch,--wait", o_.watch,
                  "Follow the sweep until it ends: exit 0 if it succeeds, 1 if it fails, is "
                  "cancelled, stops at its failure budget or stays blocked");
  start
      ->add_option("--blocked-timeout", o_.blocked_timeout_seconds,
                   "--watch: seconds a sweep may stay blocked (no agent can take its work) "
                   "before the watch gives up with exit 1; the sweep goes on (default 600)")
      ->check(CLI::Range(1, 7 * 24 * 3600));
}

void FarmCommands::RegisterSweepDurations(CLI::App* sweep) {
  auto* durations = AddCommand(
      sweep, "durations",
      "Write a finished sweep's measured pytest times as a .test_durations file (for the next "
      "sweep start --durations)");
  durations->add_option("ID", o_.id, "Sweep id")->required();
  durations->add_option("--arch", o_.durations_arch,
                        "The arch whose times to write (default: the sweep's first target arch)");
  durations->add_option("--out", o_.durations_out,
                        "File to write, replaced atomically (default: stdout)");
  durations
      ->add_option("--merge", o_.durations_merge,
                   "Start from this durations file: its other tests are kept, the measured ones "
                   "overwritten")
      ->check(CLI::ExistingFile);
}

void FarmCommands::RegisterSweep(CLI::App& app) {
  auto* sweep = app.add_subcommand("sweep", "Start, follow and manage sweeps");
  sweep->require_subcommand(1);
  RegisterSweepStart(sweep);
  AddCommand(sweep, "list", "List sweeps");
  auto* status = AddCommand(sweep, "status", "Show a sweep (alias: get)");
  status->alias("get");
  status->add_option("ID", o_.id, "Sweep id")->required();
  auto* watch =
      AddCommand(sweep, "watch",
                 "Follow a sweep with a progress bar; exit 0 if it succeeds, 1 if it fails or "
                 "stays blocked");
  watch->add_option("ID", o_.id, "Sweep id")->required();
  watch
      ->add_option("--blocked-timeout", o_.blocked_timeout_seconds,
                   "Seconds the sweep may stay blocked (no agent can take its work) before the "
                   "watch gives up with exit 1; the sweep goes on (default 600)")
      ->check(CLI::Range(1, 7 * 24 * 3600));
  auto* cancel = AddCommand(sweep, "cancel", "Cancel a running sweep");
  cancel->add_option("ID", o_.id, "Sweep id")->required();
  cancel->add_option("--reason", o_.reason, "Why (audit log)")->required();
  auto* resume = AddCommand(sweep, "resume",
                            "Set a running sweep's failure budget (a sweep stopped at its budget "
                            "leases again)");
  resume->add_option("ID", o_.id, "Sweep id")->required();
  resume
      ->add_option("--max-failed-shards", o_.max_failed_shards,
                   "The new budget: above the sweep's failed shards, or 0 = none")
      ->required()
      ->check(CLI::Range(0, 100000));
  resume->add_option("--reason", o_.reason, "Why (audit log)")->required();
  auto* patch = AddCommand(sweep, "patch", "Write tt-xla.patch and tt-forge-models.patch");
  patch->add_option("ID", o_.id, "Sweep id")->required();
  patch->add_option("--out", o_.out_dir, "Output directory")->required();
  patch
      ->add_option("--issue-links", o_.issue_links,
                   "YAML/JSON: failure cluster id (c-xxxxxxxx) or entry key -> tracking URL, "
                   "appended to the reasons the sweep writes (docs/nightly.md)")
      ->check(CLI::ExistingFile);
  RegisterSweepLand(sweep);
  auto* report = AddCommand(sweep, "report", "Write report.md and report.json");
  report->add_option("ID", o_.id, "Sweep id")->required();
  report->add_option("--out", o_.out_dir, "Output directory (default: .)");
  report->add_option("--issue-links", o_.issue_links, "As for sweep patch")
      ->check(CLI::ExistingFile);
  auto* issues = AddCommand(
      sweep, "issues",
      "Issue drafts (markdown) for what a command sweep left failing: one per remediation cluster "
      "(fingerprint, or failure cluster of the reason) with its layer, tests per arch, error, "
      "diagnosis and evidence links");
  issues->add_option("ID", o_.id, "Sweep id")->required();
  issues->add_option("--out", o_.out_dir,
                     "Write one file per draft to this directory (default: print them)");
  issues->add_option("--evidence-url", o_.evidence_url,
                     "Prefix of the evidence links (where `sweep report --out` was published)");
  auto* diff = AddCommand(sweep, "diff",
                          "Compare two sweeps' reports: what was fixed, regressed, newly failing, "
                          "and how the failure clusters moved");
  diff->add_option("A", o_.id, "The older sweep's id")->required();
  diff->add_option("B", o_.other_id, "The newer sweep's id")->required();
  diff->add_flag("--all", o_.all, "List still_passing and still_failing entries too");
  RegisterSweepDurations(sweep);
  auto* audit = AddCommand(sweep, "audit", "Who acted on a sweep and its shards, and why");
  audit->add_option("ID", o_.sweep, "Sweep id")->required();
  audit->add_option("--limit", o_.limit, "The latest N (default 100)")->check(CLI::Range(1, 10000));
}

void FarmCommands::RegisterSweepLand(CLI::App* sweep) {
  auto* apply = AddCommand(
      sweep, "apply",
      "Apply a sweep to a clean checkout: uncommitted at the sweep's commits by default; with "
      "--branch (and --commit, --push) as the two branches of its pull requests");
  apply->add_option("ID", o_.id, "Sweep id")->required();
  apply->add_option("--repo", o_.repo, "The tt-xla checkout (with its submodule)")->required();
  apply->add_option("--branch", o_.branch,
                    "Check out a new branch NAME in both repositories (tt-forge-models only when "
                    "the sweep changed it) at their bases, and apply there");
  apply->add_flag("--commit", o_.commit,
                  "Commit on the branches: tt-forge-models first, then tt-xla with the YAML and "
                  "the submodule moved to that commit (needs --branch)");
  apply->add_option("--push", o_.push_remote,
                    "Push both branches to this remote of each repository (needs --commit)");
  apply->add_flag("--force", o_.force, "Reset an existing branch NAME (and force the push)");
  apply->add_option("--onto", o_.onto,
                    "Apply onto this later tt-xla commit instead of the sweep's, entry by entry; "
                    "entries changed upstream since the sweep are left out and listed");
  apply->add_option("--forge-onto", o_.forge_onto,
                    "The tt-forge-models base (default: the gitlink of --onto, else the sweep's)");
  apply
      ->add_option("--exclude", o_.exclude, "Leave out these entry keys (repeat or comma-separate)")
      ->delimiter(',');
  apply->add_flag("--exclude-review", o_.exclude_review,
                  "Leave out every entry the sweep flagged for a person");
  apply
      ->add_option("--split-by", o_.split_by,
                   "One branch (--branch NAME-PART) and commit per test-config file or per kind "
                   "of change, for a sweep too large for one pull request (needs --commit)")
      ->check(CLI::IsMember({"file", "kind"}));
  apply->add_option("--author", o_.author, "Commit author, \"Name <email>\" (default: git's)");
  apply->add_option("--committer", o_.committer,
                    "Committer, \"Name <email>\" (default: git's user.name and user.email)");
  apply->add_option("--evidence-url", o_.evidence_url,
                    "Prefix of the evidence links in the commit messages (default: local paths)");
  auto* body = AddCommand(sweep, "pr-body",
                          "Print the pull-request descriptions of a sweep (markdown, from its "
                          "report): tt-forge-models' (when it changes anything) and tt-xla's");
  body->add_option("ID", o_.id, "Sweep id")->required();
  body->add_option("--repo", o_.pr_repo, "Only this one: tt-xla or forge")
      ->check(CLI::IsMember({"tt-xla", "forge"}));
  body->add_option("--evidence-url", o_.evidence_url,
                   "Prefix of the evidence links (where `sweep report --out` was published)");
  body->add_option("--split-by", o_.split_by,
                   "One tt-xla pull request per test-config file or per kind of change, for a "
                   "sweep too large for one")
      ->check(CLI::IsMember({"file", "kind"}));
  body->add_option("--exclude", o_.exclude, "As for sweep apply")->delimiter(',');
  body->add_flag("--exclude-review", o_.exclude_review, "As for sweep apply");
}

void FarmCommands::RegisterShards(CLI::App& app) {
  auto* shards = app.add_subcommand("shards", "List shards");
  shards->require_subcommand(1);
  auto* shards_list = AddCommand(shards, "list", "List shards (filters combine)");
  shards_list->add_option("--sweep", o_.sweep, "Only this sweep");
  shards_list->add_option("--state", o_.state,
                          "waiting, queued, leased, running, succeeded, failed, quarantined, "
                          "cancelled");
  shards_list->add_flag("--stuck", o_.stuck,
                        "Only leased/running shards without progress for --stuck-minutes");
  shards_list
      ->add_option("--stuck-minutes", o_.stuck_minutes,
                   "Threshold for --stuck, > 0 (implies --stuck)")
      ->capture_default_str()
      ->check(StuckMinutes());

  auto* shard = app.add_subcommand("shard", "Act on one shard");
  shard->require_subcommand(1);
  auto* requeue = AddCommand(shard, "requeue", "Put a shard back in the queue");
  requeue->add_option("ID", o_.id, "Shard id")->required();
  requeue->add_option("--reason", o_.reason, "Why (audit log)")->required();
  auto* cancel = AddCommand(shard, "cancel", "Cancel a shard");
  cancel->add_option("ID", o_.id, "Shard id")->required();
  cancel->add_option("--reason", o_.reason, "Why (audit log)");
}

void FarmCommands::RegisterAgents(CLI::App& app) {
  auto* agents = app.add_subcommand("agents", "List and drain agents");
  agents->require_subcommand(1);
  AddCommand(agents, "list", "List agents");
  auto* drain = AddCommand(agents, "drain", "Finish the current shard, then hand out nothing");
  drain->add_option("ID", o_.id, "Agent id")->required();
  drain->add_option("--reason", o_.reason, "Why (audit log)")->required();
  auto* undrain = AddCommand(agents, "undrain", "Hand out shards again");
  undrain->add_option("ID", o_.id, "Agent id")->required();
  undrain->add_option("--reason", o_.reason, "Why (audit log)");
}

void FarmCommands::RegisterAudit(CLI::App& app) {
  auto* audit = app.add_subcommand("audit", "Who did what, when and why (the audit log)");
  audit->require_subcommand(1);
  auto* list = AddCommand(audit, "list", "The latest actions, oldest first");
  list->add_option("--sweep", o_.sweep, "Only this sweep's actions and its shards'");
  list->add_option("--limit", o_.limit, "The latest N (default 100)")->check(CLI::Range(1, 10000));
}

int FarmCommands::Run(std::ostream& out, std::ostream& err) {
  std::string which;
  for (const auto& [name, cmd] : cmds_) {
    if (cmd->parsed()) which = name;
  }
  if (which.empty()) return -1;
  if (o_.output != "table" && o_.output != "json") {
    err << "triagectl: -o must be table or json\n";
    return kExitUsage;
  }
  if (which == "sweep patch" || which == "sweep report") {
    // Checked before asking the coordinator: an output path that cannot be a directory.
    if (std::string problem = farm::OutDirProblem(o_.out_dir.empty() ? "." : o_.out_dir);
        !problem.empty()) {
      err << "triagectl: --out " << o_.out_dir << ": " << problem << "\n";
      return kExitUsage;
    }
  }
  auto client = farm::Client::Connect(o_.conn);
  if (!client.ok()) return farm::Error(err, client.status());
  for (const auto& [name, run] : kVerbs) {
    if (name == which) return run(*client, o_, out, err);
  }
  for (const auto& [name, run] : kOwnVerbs) {
    if (name == which) return run(*client, o_, out, err);
  }
  return -1;
}

}  // namespace triage::ctl
