#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "coordinator/triagectl/select_cmd.h"

namespace CLI {
class App;
}

namespace triage::ctl {

// How triagectl reaches the coordinator's control port.
struct Connection {
  std::string coordinator = "127.0.0.1:7602";
  std::string token;
  std::string token_file;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  bool insecure = false;
};

struct FarmOptions {
  Connection conn;
  std::string output = "table";  // table | json
  // sweep start
  std::string repo;
  std::string git_url;
  std::string git_ref;
  std::vector<std::string> playbooks;
  std::vector<std::string> archs;
  std::string durations;
  std::string executor;
  std::string command;  // JSON argv array for the command executor
  std::string per;
  std::vector<std::string> params;  // k=v
  int priority = 0;
  int max_attempts = 0;
  std::string reason;
  std::string rules;
  std::string agent_repo_url;
  std::string forge_ref;
  bool allow_dirty = false;
  bool watch = false;  // --watch or --wait
  std::string request_id;
  int max_failed_shards = 0;
  bool incremental = false;
  std::string since;
  // sweep start --nightly (docs/nightly.md): the runs and the rules' options (0 = default)
  std::vector<std::string> nightly;
  bool recheck_skipped = false;  // sweep start --recheck-skipped
  SelectFlags select;            // sweep start --failing, --keys, ... (select_cmd.h)
  int confirm = 0;
  bool no_confirm = false;
  double max_device_hours = 0;
  double pcc_margin = 0;
  double pcc_step = 0;
  double pcc_far_below = 0;
  int regression_runs = 0;
  int promote_runs = 0;
  std::string policy;     // --policy FILE: its knobs over the learned ones
  bool no_learn = false;  // --no-learn: the defaults, not the checkout's history, under --policy
  // sweep patch / report: tracking-issue links (cluster id or key -> URL)
  std::string issue_links;
  // ids and filters
  std::string id;
  std::string sweep;
  std::string state;
  int limit = 0;  // audit list: the latest N (0: the coordinator's 100)
  bool stuck = false;
  double stuck_minutes = 15;
  // patch / apply / report
  std::string out_dir;
  // diff: the newer sweep (id is the older one); --all: list still_passing and still_failing too
  std::string other_id;
  bool all = false;
  // sweep durations
  std::string durations_arch;   // "" = the sweep's first target arch
  std::string durations_out;    // "" = stdout
  std::string durations_merge;  // an existing .test_durations file to update
  // sweep apply: landing on branches (docs/landing.md); sweep pr-body
  std::string branch;
  bool commit = false;
  std::string push_remote;
  bool force = false;
  std::string onto;
  std::string forge_onto;
  std::vector<std::string> exclude;  // entry keys
  bool exclude_review = false;
  std::string author;                 // "Name <email>"
  std::string committer;              // "Name <email>"
  std::string pr_repo;                // pr-body: tt-xla, forge or "" (both)
  int blocked_timeout_seconds = 600;  // sweep watch / start --watch
  std::string split_by;               // pr-body: "", file or kind (one tt-xla text per part)
  std::string evidence_url;
};

// Registers `sweep`, `shards`, `shard` and `agents` on app; Run executes the parsed one.
class FarmCommands {
 public:
  void Register(CLI::App& app);
  // -1 when none of these commands was parsed.
  int Run(std::ostream& out, std::ostream& err);

 private:
  // The flags every farm command takes: where the coordinator is, credentials, -o.
  void AddConnectionFlags(CLI::App* cmd);
  // group's subcommand name with the connection flags; Run knows it as "<group> <name>".
  CLI::App* AddCommand(CLI::App* group, const std::string& name, const std::string& description);
  void RegisterSweep(CLI::App& app);
  void RegisterSweepStart(CLI::App* sweep);
  void RegisterSweepDurations(CLI::App* sweep);
  void RegisterSweepLand(CLI::App* sweep);  // apply and pr-body
  void RegisterShards(CLI::App& app);
  void RegisterAgents(CLI::App& app);
  void RegisterAudit(CLI::App& app);

  FarmOptions o_;
  std::map<std::string, CLI::App*> cmds_;
};

}  // namespace triage::ctl
