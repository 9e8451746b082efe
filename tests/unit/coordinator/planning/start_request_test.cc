// ValidateStartRequest as a table: each row edits a minimal valid request and expects either an
// error naming the field and value, or the normalised request (defaults filled in).

#include "coordinator/planning/start_request.h"
#include "agent/playbooks/catalog.h"

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::coord {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Custom rules with one playbook of their own.
constexpr const char* kCustomRules = R"yaml(playbooks:
  - name: my_playbook
    flavors:
      - name: only
        any: ["needs a custom fix"]
)yaml";

struct Row {
  using Edit = std::function<void(v1::StartSweepRequest&)>;
  using Check = std::function<void(const StartRequest&)>;
  Row(std::string n, Edit e, std::string err, StartDefaults d = {})
      : name(std::move(n)), edit(std::move(e)), error(std::move(err)), defaults(std::move(d)) {}
  Row(std::string n, Edit e, std::string err, Check c, StartDefaults d = {})
      : name(std::move(n)),
        edit(std::move(e)),
        error(std::move(err)),
        check(std::move(c)),
        defaults(std::move(d)) {}

  std::string name;
  Edit edit;
  // Exactly one of: the error message must contain it, or the result must pass check.
  std::string error;
  Check check;
  StartDefaults defaults;
};

void Command(v1::StartSweepRequest& r, std::map<std::string, std::string> params) {
  r.set_executor("command");
  for (auto& [k, v] : params) (*r.mutable_params())[k] = v;
}

// One nightly run with one record of a model test that passed on n150; the record to edit.
v1::NightlyRecord& NightlyRecord(v1::StartSweepRequest& r) {
  r.mutable_nightly_options()->set_no_confirm(true);
  if (r.nightly().empty()) r.add_nightly()->set_label("night");
  v1::NightlyRun& run = *r.mutable_nightly(0);
  v1::NightlyRecord& rec = *run.add_records();
  rec.set_test_function("test_all_models_torch");
  rec.set_key("m/pytorch-Base-single_device-inference");
  rec.set_arch("n150");
  rec.set_outcome(v1::NightlyRecord::PASSED);
  rec.set_pcc(0.999);
  rec.set_pcc_threshold(0.99);
  rec.set_source("a.xml:4");
  run.set_testcases(1);
  return rec;
}

const std::vector<Row>& Rows() {
  static const std::vector<Row> rows = {
      // --- defaults ------------------------------------------------------------------------
      {"defaults", [](auto&) {}, "",
       [](const StartRequest& s) {
         EXPECT_EQ(s.executor, "native");
         EXPECT_THAT(s.archs, ElementsAre("n150"));
         EXPECT_THAT(s.playbooks, IsEmpty());
         EXPECT_THAT(s.durations, IsEmpty());
         EXPECT_EQ(s.rules, &playbooks::DefaultClassifier());
         EXPECT_EQ(s.custom_rules, nullptr);
       }},
      {"the coordinator's defaults", [](auto&) {}, "",
       [](const StartRequest& s) {
         EXPECT_EQ(s.executor, "replay");
         EXPECT_THAT(s.archs, ElementsAre("p150", "n300"));
       },
       StartDefaults{"replay", {"p150", "n300"}}},
      {"asked executor and archs win over the defaults",
       [](auto& r) {
         r.set_executor("native");
         r.add_archs("p150");
         r.add_archs("n150");
       },
       "",
       [](const StartRequest& s) {
         EXPECT_EQ(s.executor, "native");
         EXPECT_THAT(s.archs, ElementsAre("p150", "n150"));
       },
       StartDefaults{"replay", {"n300"}}},
      {"a recheck sweep that names no arch rechecks the single-device archs",
       [](auto& r) { r.set_recheck_skipped(true); }, "",
       [](const StartRequest& s) { EXPECT_THAT(s.archs, ElementsAre("n150", "p150")); }},
      {"a recheck sweep's named archs win",
       [](auto& r) {
         r.set_recheck_skipped(true);
         r.add_archs("p150");
       },
       "", [](const StartRequest& s) { EXPECT_THAT(s.archs, ElementsAre("p150")); }},
      {"git_url instead of repo_path",
       [](auto& r) {
         r.clear_repo_path();
         r.set_git_url("https://example.com/tt-xla.git");
         r.set_git_ref("main");
       },
       "", [](const StartRequest& s) { EXPECT_EQ(s.executor, "native"); }},

      // --- the repository ------------------------------------------------------------------
      {"neither repo_path nor git_url", [](auto& r) { r.clear_repo_path(); },
       "give exactly one of repo_path or git_url"},
      {"both repo_path and git_url",
       [](auto& r) { r.set_git_url("https://example.com/tt-xla.git"); },
       "give exactly one of repo_path or git_url"},

      // --- executor, archs, playbooks ------------------------------------------------------
      {"since without incremental", [](auto& r) { r.set_since("sw-0001"); },
       "since names the sweep to carry from: it needs incremental"},
      {"since with incremental",
       [](auto& r) {
         r.set_incremental(true);
         r.set_since("sw-0001");
       },
       "", [](const StartRequest&) {}},
      {"unknown executor", [](auto& r) { r.set_executor("docker"); },
       "unknown executor 'docker' (native, command, replay)"},
      {"unknown default executor", [](auto&) {}, "unknown executor 'ssh'",
       StartDefaults{"ssh", {"n150"}}},
      {"unknown arch among known ones",
       [](auto& r) {
         r.add_archs("n150");
         r.add_archs("n999");
       },
       "unknown arch 'n999'"},
      {"known playbooks kept in order",
       [](auto& r) {
         r.add_playbooks("unpack_forward_output");
         r.add_playbooks("dtype_bfloat16");
       },
       "",
       [](const StartRequest& s) {
         EXPECT_THAT(s.playbooks, ElementsAre("unpack_forward_output", "dtype_bfloat16"));
       }},
      {"unknown playbook",
       [](auto& r) {
         r.add_playbooks("dtype_bfloat16");
         r.add_playbooks("no_such_playbook");
       },
       "unknown playbook 'no_such_playbook'"},

      // --- max_attempts --------------------------------------------------------------------
      {"max_attempts 0: the coordinator's", [](auto& r) { r.set_max_attempts(0); }, "",
       [](const StartRequest&) {}},
      {"max_attempts 1", [](auto& r) { r.set_max_attempts(1); }, "", [](const StartRequest&) {}},
      {"max_attempts 1000", [](auto& r) { r.set_max_attempts(1000); }, "",
       [](const StartRequest&) {}},
      {"max_attempts negative", [](auto& r) { r.set_max_attempts(-1); },
       "max_attempts must be between 1 and 1000 (0: the coordinator's default), got -1"},
      {"max_attempts too high", [](auto& r) { r.set_max_attempts(1001); },
       "max_attempts must be between 1 and 1000 (0: the coordinator's default), got 1001"},

      // --- durations -----------------------------------------------------------------------
      {"durations: numbers kept, other values left out",
       [](auto& r) {
         r.set_durations_json(
             R"({"tests/a.py::test_x[bert]": 12.5, "tests/b.py::test_y": 3, "odd": "slow"})");
       },
       "",
       [](const StartRequest& s) {
         EXPECT_EQ(s.durations, (std::map<std::string, double>{{"tests/a.py::test_x[bert]", 12.5},
                                                               {"tests/b.py::test_y", 3}}));
       }},
      {"durations: empty object", [](auto& r) { r.set_durations_json("{}"); }, "",
       [](const StartRequest& s) { EXPECT_THAT(s.durations, IsEmpty()); }},
      {"durations: invalid JSON", [](auto& r) { r.set_durations_json(R"({"a": )"); },
       "durations: invalid JSON"},
      {"durations: a list", [](auto& r) { r.set_durations_json("[1, 2]"); },
       "durations: expected a JSON object of node id -> seconds"},
      {"durations: a number", [](auto& r) { r.set_durations_json("3"); },
       "durations: expected a JSON object"},

      // --- rules ---------------------------------------------------------------------------
      {"custom rules and their playbook",
       [](auto& r) {
         r.set_rules_yaml(kCustomRules);
         r.add_playbooks("my_playbook");
       },
       "",
       [](const StartRequest& s) {
         ASSERT_NE(s.custom_rules, nullptr);
         EXPECT_EQ(s.rules, s.custom_rules.get());
         EXPECT_THAT(s.rules->Playbooks(), ElementsAre("my_playbook"));
         EXPECT_THAT(s.playbooks, ElementsAre("my_playbook"));
       }},
      {"custom rules replace the built-in playbooks",
       [](auto& r) {
         r.set_rules_yaml(kCustomRules);
         r.add_playbooks("dtype_bfloat16");
       },
       "unknown playbook 'dtype_bfloat16'"},
      {"rules without a playbooks list", [](auto& r) { r.set_rules_yaml("playbooks: 3\n"); },
       "expected a mapping with a 'playbooks' list"},
      {"rules with a YAML syntax error", [](auto& r) { r.set_rules_yaml("playbooks: [\n"); },
       "YAML syntax error"},
      {"rules with an invalid pattern",
       [](auto& r) {
         r.set_rules_yaml(
             "playbooks:\n  - name: p\n    flavors:\n      - name: f\n        any: ['(']\n");
       },
       "invalid RE2 pattern '('"},

      // --- the command executor's parameters ---------------------------------------------
      {"command executor with its parameters",
       [](auto& r) {
         Command(r, {{"command", R"(["tool", "{loader}", "{key}"])"},
                     {"per", "shard"},
                     {"timeout_seconds", "3600"}});
       },
       "", [](const StartRequest& s) { EXPECT_EQ(s.executor, "command"); }},
      {"command executor without a command", [](auto& r) { Command(r, {}); },
       "params.command is required"},
      {"command executor by default, without a command", [](auto&) {}, "params.command is required",
       StartDefaults{"command", {"n150"}}},
      {"command not JSON",
       [](auto& r) {
         Command(r, {{"command", "tool {key}"}});
       },
       "params.command is not valid JSON: 'tool {key}'"},
      {"command an empty list",
       [](auto& r) {
         Command(r, {{"command", "[]"}});
       },
       "params.command must be a non-empty JSON array of strings"},
      {"command an object",
       [](auto& r) {
         Command(r, {{"command", R"({"argv": "tool"})"}});
       },
       "params.command must be a non-empty JSON array of strings"},
      {"command with a number",
       [](auto& r) {
         Command(r, {{"command", R"(["tool", 3])"}});
       },
       "params.command[1] must be a string, got 3"},
      {"per neither entry nor shard",
       [](auto& r) {
         Command(r, {{"command", R"(["tool"])"}, {"per", "sweep"}});
       },
       "params.per must be entry or shard, got 'sweep'"},
      {"verify neither true nor false",
       [](auto& r) {
         Command(r, {{"command", R"(["tool"])"}, {"verify", "yes"}});
       },
       "params.verify must be true or false, got 'yes'"},
      {"the wave parameter, the coordinator's own",
       [](auto& r) {
         Command(r, {{"command", R"(["tool"])"}, {"wave", "{}"}});
       },
       "params.wave is the coordinator's own"},
      {"timeout_seconds zero",
       [](auto& r) {
         Command(r, {{"command", R"(["tool"])"}, {"timeout_seconds", "0"}});
       },
       "params.timeout_seconds must be a whole number of seconds from 1 to 604800, got '0'"},
      {"timeout_seconds over a week",
       [](auto& r) {
         Command(r, {{"command", R"(["tool"])"}, {"timeout_seconds", "604801"}});
       },
       "got '604801'"},
      {"timeout_seconds not whole",
       [](auto& r) {
         Command(r, {{"command", R"(["tool"])"}, {"timeout_seconds", "1.5"}});
       },
       "got '1.5'"},
      {"parameters of other executors are theirs to read",
       [](auto& r) { (*r.mutable_params())["command"] = "not checked"; }, "",
       [](const StartRequest& s) { EXPECT_EQ(s.executor, "native"); }},
      // --- nightly runs: the coordinator checks every record again ---------------------------
      {"a nightly record", [](auto& r) { NightlyRecord(r); }, "",
       [](const StartRequest& s) { EXPECT_EQ(s.executor, "native"); }},
      {"a nightly record whose pcc is NaN (a failed comparison)",
       [](auto& r) { NightlyRecord(r).set_pcc(std::nan("")); }, "",
       [](const StartRequest& s) { EXPECT_EQ(s.executor, "native"); }},
      {"a nightly record whose pcc is over 1", [](auto& r) { NightlyRecord(r).set_pcc(1.5); },
       "nightly run 1 (night): a.xml:4: test_all_models_torch[m/pytorch-Base-single_device-"
       "inference] on n150: pcc 1.5 is not a correlation in [-1, 1]"},
      {"a nightly record whose pcc is infinite",
       [](auto& r) { NightlyRecord(r).set_pcc(INFINITY); },
       "[m/pytorch-Base-single_device-inference] on n150: pcc inf is not a correlation"},
      {"a nightly record whose pcc is below -1", [](auto& r) { NightlyRecord(r).set_pcc(-1e308); },
       "is not a correlation in [-1, 1]"},
      {"a nightly record whose pcc_threshold is over 1",
       [](auto& r) { NightlyRecord(r).set_pcc_threshold(1.5); },
       "on n150: pcc_threshold 1.5 is not a threshold in [0, 1]"},
      {"a nightly record whose key holds a right-to-left override",
       [](auto& r) {
         NightlyRecord(r).set_key(
             "m/pytorch-\xE2\x80\xAE"
             "esaB-single_device-inference");
       },
       "nightly run 1 (night): a.xml:4: key 'm/pytorch-<U+202E>esaB-single_device-inference' is "
       "not a test-config key: character 11 is U+202E"},
      {"a nightly record whose key holds a Cyrillic letter",
       [](auto& r) { NightlyRecord(r).set_key("m/pytorch-Bas\xD0\xB5-single_device-inference"); },
       "character 14 is U+0435"},
      {"a negative count of duplicates",
       [](auto& r) {
         NightlyRecord(r);
         r.mutable_nightly(0)->set_duplicate_testcases(-1);
       },
       "nightly run 1 (night): a negative count"},
      // --- selection (docs/remediation.md) ---------------------------------------------------
      {"a failing selection with the command executor",
       [](auto& r) {
         Command(r, {{"command", R"(["agent","{key}"])"}});
         r.mutable_selection()->set_failing(true);
         r.mutable_selection()->add_keys("a/pytorch-V-single_device-training");
       },
       "",
       [](const StartRequest& s) {
         ASSERT_NE(s.selector, nullptr);
         EXPECT_TRUE(s.selector->failing());
         EXPECT_TRUE(s.selector->Matches("f", "a/pytorch-V-single_device-training",
                                         "KNOWN_FAILURE_XFAIL", "", ""));
         EXPECT_FALSE(s.selector->Matches("f", "b", "KNOWN_FAILURE_XFAIL", "", ""));
       }},
      {"no selection: no selector", [](auto&) {}, "",
       [](const StartRequest& s) { EXPECT_EQ(s.selector, nullptr); }},
      {"a failing selection with the native executor",
       [](auto& r) { r.mutable_selection()->set_failing(true); },
       "selection.failing: no playbook handles every failing entry; it needs the command "
       "executor (executor command), not native"},
      {"a failing selection with playbooks",
       [](auto& r) {
         Command(r, {{"command", R"(["agent"])"}});
         r.mutable_selection()->set_failing(true);
         r.add_playbooks("unpack_forward_output");
       },
       "selection.failing takes every failing entry, with or without a reason: playbooks and "
       "rules_yaml do not apply"},
      {"a selection of a passing status with failing",
       [](auto& r) {
         Command(r, {{"command", R"(["agent"])"}});
         r.mutable_selection()->set_failing(true);
         r.mutable_selection()->add_statuses("EXPECTED_PASSING");
       },
       "selection.statuses: 'EXPECTED_PASSING' is not a failing status"},
      {"a selection of an unknown status",
       [](auto& r) { r.mutable_selection()->add_statuses("XFAIL"); },
       "selection.statuses: 'XFAIL' is not a status name"},
      {"a selection with a bad pattern",
       [](auto& r) { r.mutable_selection()->set_reason_regex("(unclosed"); },
       "selection.reason_regex: '(unclosed' is not an RE2 pattern: missing )"},
      {"a selection with a bad cluster id",
       [](auto& r) { r.mutable_selection()->add_clusters("c-12"); },
       "selection.clusters: 'c-12' is not a cluster id (c- and 8 hex digits)"},
      {"a selection with a negative limit", [](auto& r) { r.mutable_selection()->set_limit(-1); },
       "selection.limit: -1 is negative (0: no limit)"},
      {"a selection with an empty key", [](auto& r) { r.mutable_selection()->add_keys(""); },
       "selection.keys: an empty value"},
      {"a selection on a nightly sweep",
       [](auto& r) {
         NightlyRecord(r);
         r.mutable_selection()->set_limit(3);
       },
       "selection: a nightly sweep takes its entries from its own rules; a selection does not "
       "apply"},
      {"a selection on a recheck sweep",
       [](auto& r) {
         r.set_recheck_skipped(true);
         r.mutable_selection()->set_limit(3);
       },
       "selection: a recheck sweep takes its entries from its own rules"},
      {"a selection with incremental",
       [](auto& r) {
         r.set_incremental(true);
         r.mutable_selection()->add_keys("k");
       },
       "a selection does not combine with incremental"},
  };
  return rows;
}

TEST(StartRequestTest, Table) {
  for (const Row& row : Rows()) {
    SCOPED_TRACE(row.name);
    ASSERT_NE(row.error.empty(), row.check == nullptr) << "a row expects an error or a result";
    v1::StartSweepRequest req;
    req.set_repo_path("/repos/tt-xla");
    row.edit(req);
    auto got = ValidateStartRequest(req, row.defaults);
    if (!row.error.empty()) {
      ASSERT_FALSE(got.ok()) << "accepted";
      EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
      EXPECT_THAT(std::string(got.status().message()), HasSubstr(row.error));
    } else {
      ASSERT_TRUE(got.ok()) << got.status();
      row.check(*got);
    }
  }
}

// The same request gives the same answer (no state between calls); custom rules are owned by
// the result and outlive the request.
TEST(StartRequestTest, CustomRulesOutliveTheRequest) {
  StartRequest kept;
  {
    v1::StartSweepRequest req;
    req.set_git_url("https://example.com/tt-xla.git");
    req.set_rules_yaml(kCustomRules);
    auto got = ValidateStartRequest(req, {});
    ASSERT_TRUE(got.ok()) << got.status();
    kept = std::move(*got);
  }
  ASSERT_NE(kept.rules, nullptr);
  EXPECT_EQ(kept.rules, kept.custom_rules.get());
  auto m = kept.rules->ClassifyReason("this model needs a custom fix", "NOT_SUPPORTED_SKIP", "");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->playbook, "my_playbook");
  EXPECT_EQ(m->flavor, "only");
}

}  // namespace
}  // namespace triage::coord
