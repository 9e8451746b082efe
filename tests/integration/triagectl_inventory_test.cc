// The inventory commands as users and scripts run them: the real triagectl binary on a
// temporary tt-xla-shaped tree.

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_support.h"

namespace triage {
namespace {

const std::string kTriagectl = TRIAGE_BINARY_DIR "/coordinator/triagectl/triagectl";
constexpr char kTraining[] =
    "tests/runner/test_config/torch/test_config_training_single_device.yaml";

constexpr char kYaml[] =
    "test_config:\n"
    "  a/pytorch-X-single_device-training:\n"
    "    status: NOT_SUPPORTED_SKIP\n"
    "    bringup_status: FAILED_FE_COMPILATION\n"
    "    reason: \"tt-forge-models doesn't implement unpack_forward_output for this model.\"\n"
    "  b/c/pytorch-single_device-training:\n"
    "    status: EXPECTED_PASSING # keep me\n";

class TriagectlTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::WriteFileOrDie(tmp_.path() / kTraining, kYaml); }
  int Run(std::vector<std::string> args, std::string* out) {
    args.insert(args.begin(), kTriagectl);
    return testing::RunCommand(args, tmp_.path(), out);
  }
  testing::TempDir tmp_;
};

TEST_F(TriagectlTest, CheckCleanTreeExitsZero) {
  std::string out;
  EXPECT_EQ(Run({"inventory", "check", "--repo", "."}, &out), 0) << out;
  EXPECT_NE(out.find("1 files, 2 entries: 0 error(s)"), std::string::npos) << out;
}

// The placeholders file names models planned but not yet tested: check counts its entries and
// says so, classify leaves them out and says why, so the two counts can be reconciled; the
// classify table names files by their full path, as its JSON does.
TEST_F(TriagectlTest, PlaceholdersAreCountedApartAndFilesByTheirFullPath) {
  const std::string placeholders = "tests/runner/test_config/torch/test_config_placeholders.yaml";
  testing::WriteFileOrDie(tmp_.path() / placeholders,
                          "PLACEHOLDER_MODELS:\n  org/Model-A:\n    bringup_status: NOT_STARTED\n"
                          "  org/Model-B:\n    bringup_status: NOT_STARTED\n");
  std::string out;
  ASSERT_EQ(Run({"inventory", "check", "--repo", "."}, &out), 0) << out;
  EXPECT_NE(out.find("2 files, 4 entries (2 test entries and 2 placeholders of " + placeholders +
                     ": models planned but not yet tested, which classify and sweeps leave "
                     "out): 0 error(s)"),
            std::string::npos)
      << out;
  ASSERT_EQ(Run({"inventory", "classify", "--repo", "."}, &out), 0) << out;
  EXPECT_NE(out.find("2 entries (2 placeholders of " + placeholders +
                     " left out: models planned but not yet tested), "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(std::string(kTraining) + "  "), std::string::npos)
      << "the full path in the table: " << out;
}

TEST_F(TriagectlTest, CheckReportsProblemsAndExitsOne) {
  testing::WriteFileOrDie(tmp_.path() /
                              "tests/runner/test_config/torch/test_config_inference_"
                              "single_device.yaml",
                          "test_config:\n  a/pytorch-X-single_device-inference:\n"
                          "    status: PASSING\n    statsu: x\n");
  std::string out;
  EXPECT_EQ(Run({"inventory", "check", "--repo", "."}, &out), 1);
  EXPECT_NE(out.find("tests/runner/test_config/torch/test_config_inference_single_device.yaml:3:"
                     "13: status: invalid value 'PASSING'"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("single_device.yaml:4:5: unknown field 'statsu'"), std::string::npos) << out;
}

TEST_F(TriagectlTest, CheckHonoursTheSizeLimit) {
  std::string out;
  EXPECT_EQ(Run({"inventory", "check", "--repo", ".", "--max-file-bytes", "64"}, &out), 1);
  EXPECT_NE(out.find("over the size limit of 64 bytes"), std::string::npos) << out;
}

TEST_F(TriagectlTest, A100MiBFileIsRefusedWithoutReadingIt) {
  const auto big = tmp_.path() /
                   "tests/runner/test_config/torch/test_config_inference_"
                   "single_device.yaml";
  testing::WriteFileOrDie(big, "");
  std::filesystem::resize_file(big, 100ull << 20);  // sparse: instant, no disk use
  std::string out;
  EXPECT_EQ(Run({"inventory", "check", "--repo", "."}, &out), 1);
  EXPECT_NE(out.find("test_config_inference_single_device.yaml: file is over the size limit of "
                     "8388608 bytes"),
            std::string::npos)
      << out;
  // yaml edit refuses it the same way and writes nothing.
  testing::WriteFileOrDie(tmp_.path() / "edits.json", "[]");
  EXPECT_NE(Run({"yaml", "edit", big.string(), "--edits", "edits.json"}, &out), 0);
  EXPECT_NE(out.find("over the limit"), std::string::npos) << out;
  EXPECT_EQ(std::filesystem::file_size(big), 100ull << 20);
}

TEST_F(TriagectlTest, NotACheckoutIsAUsageError) {
  std::string out;
  EXPECT_EQ(Run({"inventory", "check", "--repo", "/"}, &out), 2);
  EXPECT_NE(out.find("is this a tt-xla checkout?"), std::string::npos) << out;
  EXPECT_EQ(Run({"inventory", "frobnicate"}, &out), 2);
}

TEST_F(TriagectlTest, KeyOutsideTheRepositoryIsAnInvalidEntry) {
  testing::WriteFileOrDie(tmp_.path() / kTraining,
                          std::string(kYaml) +
                              "  ../../etc/x/pytorch-V-single_device-training:\n"
                              "    status: NOT_SUPPORTED_SKIP\n"
                              "    reason: \"tt-forge-models doesn't implement "
                              "unpack_forward_output for this model.\"\n");
  std::string out;
  EXPECT_EQ(Run({"inventory", "check", "--repo", "."}, &out), 1);
  EXPECT_NE(out.find(std::string(kTraining) +
                     ":8:3: key '../../etc/x/pytorch-V-single_device-training' names a model "
                     "path outside the repository (a '..' component)"),
            std::string::npos)
      << out;
  // Classification lists it without a loader path (nothing outside the repository is named).
  ASSERT_EQ(Run({"inventory", "classify", "--repo", ".", "-o", "json"}, &out), 0) << out;
  EXPECT_NE(out.find("1 validation error(s)"), std::string::npos) << out;
  const auto open = out.find('['), close = out.rfind(']');
  ASSERT_NE(open, std::string::npos) << out;
  auto json = nlohmann::json::parse(out.substr(open, close - open + 1));
  ASSERT_EQ(json.size(), 3u);
  EXPECT_EQ(json[2]["key"], "../../etc/x/pytorch-V-single_device-training");
  EXPECT_EQ(json[2]["loader"], "");
}

TEST_F(TriagectlTest, LinksLeavingTheRepositoryAndSpecialFilesAreNamedErrors) {
  namespace fs = std::filesystem;
  testing::TempDir outside;
  testing::WriteFileOrDie(outside.path() / "x.yaml", kYaml);
  testing::WriteFileOrDie(outside.path() / "ext" / "test_config_inference_single_device.yaml",
                          kYaml);
  const fs::path config = tmp_.path() / "tests/runner/test_config";
  fs::create_symlink(outside.path() / "x.yaml", config / "torch/outside.yaml");
  fs::create_symlink(outside.path() / "ext", config / "ext");
  fs::create_symlink("missing.yaml", config / "torch/gone.yaml");
  ASSERT_EQ(::mkfifo((config / "torch/fifo.yaml").c_str(), 0644), 0);
  // A link that stays inside the repository is read like the file it names.
  fs::create_directories(config / "jax");
  fs::create_symlink("../torch/test_config_training_single_device.yaml",
                     config / "jax/test_config_training_single_device.yaml");
  std::string out;
  EXPECT_EQ(Run({"inventory", "check", "--repo", "."}, &out), 1) << out;
  for (const std::string& want : {
           "tests/runner/test_config/ext: symbolic link to '" + (outside.path() / "ext").string() +
               "', outside the repository; not read",
           "tests/runner/test_config/torch/outside.yaml: symbolic link to '" +
               (outside.path() / "x.yaml").string() + "', outside the repository; not read",
           std::string("tests/runner/test_config/torch/gone.yaml: dangling symbolic link (to "
                       "'missing.yaml'); not read"),
           std::string("tests/runner/test_config/torch/fifo.yaml: is a FIFO, not a regular file; "
                       "not read"),
           std::string("2 files, 4 entries: 4 error(s)"),
       }) {
    EXPECT_NE(out.find(want), std::string::npos) << out << "\nwant: " << want;
  }
}

TEST_F(TriagectlTest, CrlfNulAndDeepNestingAreOneErrorEach) {
  struct Case {
    std::string name, text, want;
  };
  std::string crlf;
  for (char c : std::string(kYaml)) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  const Case cases[] = {
      {"CRLF", crlf,
       ":1:13: uses CRLF line endings (first at line 1, 7 line(s) in all); test-config files use "
       "LF only"},
      {"NUL",
       std::string(kYaml) + "  c/pytorch-single_device-training:\n    reason: \"a" +
           std::string(1, '\0') + "\"\n",
       ":9:15: contains a NUL byte"},
      {"deep flow",
       std::string(kYaml) +
           "  c/pytorch-single_device-training:\n    markers: " + std::string(10000, '[') + "\n",
       // yaml-cpp reads each unclosed '[' here as a list holding a one-pair mapping: two levels.
       ":9:63: nested deeper than 100 levels"},
  };
  for (const auto& c : cases) {
    testing::WriteFileOrDie(tmp_.path() / kTraining, c.text);
    std::string out;
    EXPECT_EQ(Run({"inventory", "check", "--repo", "."}, &out), 1) << c.name;
    EXPECT_NE(out.find(std::string(kTraining) + c.want), std::string::npos)
        << c.name << ": " << out << "\nwant: " << c.want;
    EXPECT_NE(out.find("1 files, 0 entries: 1 error(s)"), std::string::npos)
        << c.name << ": " << out;
    // yaml edit refuses the file and leaves it as it is.
    testing::WriteFileOrDie(tmp_.path() / "edits.json",
                            R"([{"key": "a/pytorch-X-single_device-training",
                                 "set": {"status": "EXPECTED_PASSING"}}])");
    EXPECT_EQ(Run({"yaml", "edit", kTraining, "--edits", "edits.json"}, &out), 1) << c.name;
    EXPECT_NE(out.find(std::string(kTraining) + c.want), std::string::npos) << c.name << out;
    EXPECT_EQ(testing::ReadFileOrDie(tmp_.path() / kTraining), c.text) << c.name;
  }
}

TEST_F(TriagectlTest, HostileRulesFileIsAnErrorNamingIt) {
  struct Case {
    std::string text, want;
  };
  const Case cases[] = {
      {"playbooks: " + std::string(10000, '['), "rules.yaml:1:"},
      {"playbooks:\n  - name: x\n    flavors: [[1]]\n", "rules.yaml:3:"},
      {"playbooks:\n  - name: x\n    require: {a: [b]}\n", "rules.yaml:3:"},
  };
  for (const auto& c : cases) {
    testing::WriteFileOrDie(tmp_.path() / "rules.yaml", c.text);
    std::string out;
    EXPECT_EQ(Run({"inventory", "classify", "--repo", ".", "--rules", "rules.yaml"}, &out), 2)
        << c.text.substr(0, 40) << out;
    EXPECT_EQ(out.rfind("triagectl: " + c.want, 0), 0u) << out;
  }
}

TEST_F(TriagectlTest, ClassifyJsonIsAContract) {
  std::string out;
  ASSERT_EQ(Run({"inventory", "classify", "--repo", ".", "-o", "json"}, &out), 0) << out;
  // stdout and stderr share the pipe here: the JSON array is what precedes the summary line.
  auto json = nlohmann::json::parse(out.substr(0, out.rfind("]") + 1));
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0]["key"], "a/pytorch-X-single_device-training");
  EXPECT_EQ(json[0]["file"], kTraining);
  EXPECT_EQ(json[0]["status"], "NOT_SUPPORTED_SKIP");
  EXPECT_EQ(json[0]["bringup_status"], "FAILED_FE_COMPILATION");
  EXPECT_EQ(json[0]["playbook"], "unpack_forward_output");
  EXPECT_EQ(json[0]["flavor"], "not_implemented");
  EXPECT_EQ(json[0]["loader"], "third_party/tt_forge_models/a/pytorch/loader.py");
  EXPECT_TRUE(json[1]["playbook"].is_null());
  EXPECT_TRUE(json[1]["flavor"].is_null());
  EXPECT_TRUE(json[1]["reason"].is_null());
}

// `inventory select` previews a sweep's selection: --failing takes the entry without a playbook
// too; --keys reads a file of pytest node ids; a bad flag is named; the JSON is a contract.
TEST_F(TriagectlTest, SelectPreviewsTheFailingEntriesByKeyAndCluster) {
  testing::WriteFileOrDie(tmp_.path() / kTraining, std::string(kYaml) +
                                                       "  d/pytorch-Y-single_device-training:\n"
                                                       "    status: KNOWN_FAILURE_XFAIL\n"
                                                       "  e/pytorch-Z-single_device-training:\n"
                                                       "    status: KNOWN_FAILURE_XFAIL\n"
                                                       "    reason: \"Hang\"\n");
  std::string out;
  ASSERT_EQ(Run({"inventory", "select", "--repo", ".", "--failing", "-o", "json"}, &out), 0) << out;
  const auto j = nlohmann::json::parse(out.substr(0, out.rfind("}") + 1));
  ASSERT_EQ(j["selected"], 3) << out;
  EXPECT_EQ(j["without_reason"], 1);
  EXPECT_EQ(j["entries"][1]["key"], "d/pytorch-Y-single_device-training");
  EXPECT_TRUE(j["entries"][1]["cluster"].is_null());
  EXPECT_EQ(j["entries"][0]["playbook"], "remediate");
  const std::string hang = j["entries"][2]["cluster"];
  EXPECT_EQ(j["clusters"][0]["id"], hang);

  testing::WriteFileOrDie(
      tmp_.path() / "keys.txt",
      "# from CI\n\ntests/runner/test_models.py::test_all_models_torch["
      "d/pytorch-Y-single_device-training]\na/pytorch-X-single_device-training\n");
  ASSERT_EQ(Run({"inventory", "select", "--repo", ".", "--failing", "--keys", "keys.txt"}, &out), 0)
      << out;
  EXPECT_NE(out.find("selected 2 of 2 matching failing entries on n150; 1 clusters"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("e/pytorch-Z"), std::string::npos) << out;
  ASSERT_EQ(Run({"inventory", "select", "--repo", ".", "--failing", "--cluster", hang}, &out), 0)
      << out;
  EXPECT_NE(out.find("e/pytorch-Z-single_device-training"), std::string::npos) << out;
  EXPECT_NE(out.find("selected 1 of 1 "), std::string::npos) << out;

  EXPECT_EQ(Run({"inventory", "select", "--repo", ".", "--failing", "--cluster", "c-1"}, &out), 2);
  EXPECT_NE(out.find("triagectl: --cluster: 'c-1' is not a cluster id"), std::string::npos) << out;
  EXPECT_EQ(Run({"inventory", "select", "--repo", ".", "--failing", "--status", "passing"}, &out),
            2);
  EXPECT_NE(out.find("--status: 'PASSING' is not a failing status"), std::string::npos) << out;
}

TEST_F(TriagectlTest, YamlEditDiffWritesNothingAndEditIsAtomic) {
  testing::WriteFileOrDie(tmp_.path() / "edits.json", R"([
    {"key": "a/pytorch-X-single_device-training",
     "set": {"status": "EXPECTED_PASSING", "assert_pcc": false},
     "delete": ["bringup_status", "reason"]},
    {"key": "b/c/pytorch-single_device-training", "arch": "p150",
     "set": {"status": "KNOWN_FAILURE_XFAIL", "markers": ["notimeout"]}}
  ])");
  std::string out;
  ASSERT_EQ(Run({"yaml", "edit", kTraining, "--edits", "edits.json", "--diff"}, &out), 0) << out;
  EXPECT_NE(out.find("+    assert_pcc: false\n"), std::string::npos) << out;
  EXPECT_NE(out.find("+      p150:\n"), std::string::npos) << out;
  EXPECT_EQ(testing::ReadFileOrDie(tmp_.path() / kTraining), kYaml) << "--diff writes nothing";
  // The diff applies with git.
  testing::WriteFileOrDie(tmp_.path() / "p.patch", out.substr(0, out.rfind('\n') + 1));
  std::string log;
  ASSERT_EQ(testing::RunCommand({"git", "apply", "--check", "p.patch"}, tmp_.path(), &log), 0)
      << log;

  ASSERT_EQ(Run({"yaml", "edit", kTraining, "--edits", "edits.json"}, &out), 0) << out;
  EXPECT_EQ(testing::ReadFileOrDie(tmp_.path() / kTraining),
            "test_config:\n"
            "  a/pytorch-X-single_device-training:\n"
            "    status: EXPECTED_PASSING\n"
            "    assert_pcc: false\n"
            "  b/c/pytorch-single_device-training:\n"
            "    status: EXPECTED_PASSING # keep me\n"
            "    arch_overrides:\n"
            "      p150:\n"
            "        status: KNOWN_FAILURE_XFAIL\n"
            "        markers: [notimeout]\n");
}

// comments and create: a commented PCC line and a new entry whose fields keep the order written
// (not the JSON library's sorted order).
TEST_F(TriagectlTest, YamlEditCommentsAndCreates) {
  testing::WriteFileOrDie(tmp_.path() / "edits.json", R"([
    {"key": "b/c/pytorch-single_device-training", "set": {"required_pcc": 0.97},
     "comments": {"required_pcc": "pcc 0.9734 on n150"}},
    {"key": "z/pytorch-New-single_device-training", "create": true,
     "set": {"status": "KNOWN_FAILURE_XFAIL", "reason": "TT_FATAL: boom",
             "bringup_status": "FAILED_RUNTIME"}}
  ])");
  std::string out;
  ASSERT_EQ(Run({"yaml", "edit", kTraining, "--edits", "edits.json"}, &out), 0) << out;
  EXPECT_EQ(testing::ReadFileOrDie(tmp_.path() / kTraining),
            std::string(kYaml) +
                "    required_pcc: 0.97 # pcc 0.9734 on n150\n"
                "  z/pytorch-New-single_device-training:\n"
                "    status: KNOWN_FAILURE_XFAIL\n"
                "    reason: \"TT_FATAL: boom\"\n"
                "    bringup_status: FAILED_RUNTIME\n");
  struct Case {
    std::string edits, want;
  };
  const Case cases[] = {
      {R"([{"key": "a/pytorch-X-single_device-training", "create": true,
            "set": {"status": "EXPECTED_PASSING"}}])",
       "entry 'a/pytorch-X-single_device-training' already exists"},
      {R"([{"key": "a/pytorch-X-single_device-training", "create": 1}])",
       "[0].create: expected true or false"},
      {R"([{"key": "a/pytorch-X-single_device-training", "comments": {"status": 1}}])",
       "[0].comments.status: expected a string"},
      {R"([{"key": "a/pytorch-X-single_device-training", "comments": ["status"]}])",
       "[0].comments: expected an object"},
      {R"([{"key": "a/pytorch-X-single_device-training", "set": {"status": "EXPECTED_PASSING"},
            "comments": {"status": "a\nb"}}])",
       "comment on field 'status': the text must be one line"},
  };
  const std::string before = testing::ReadFileOrDie(tmp_.path() / kTraining);
  for (const auto& c : cases) {
    testing::WriteFileOrDie(tmp_.path() / "edits.json", c.edits);
    EXPECT_EQ(Run({"yaml", "edit", kTraining, "--edits", "edits.json"}, &out), 1) << c.edits;
    EXPECT_NE(out.find(c.want), std::string::npos) << out << "\nwant: " << c.want;
    EXPECT_EQ(testing::ReadFileOrDie(tmp_.path() / kTraining), before) << c.edits;
  }
}

TEST_F(TriagectlTest, YamlEditThroughASymlinkEditsItsTarget) {
  testing::WriteFileOrDie(
      tmp_.path() / "edits.json",
      R"([{"key": "a/pytorch-X-single_device-training", "set": {"status": "EXPECTED_PASSING"}}])");
  const auto link = tmp_.path() / "linked.yaml";
  std::filesystem::create_symlink(tmp_.path() / kTraining, link);
  std::string out;
  ASSERT_EQ(Run({"yaml", "edit", link.string(), "--edits", "edits.json"}, &out), 0) << out;
  EXPECT_TRUE(std::filesystem::is_symlink(link)) << "the link stays a link";
  EXPECT_NE(testing::ReadFileOrDie(tmp_.path() / kTraining).find("status: EXPECTED_PASSING"),
            std::string::npos);
}

TEST_F(TriagectlTest, InvalidBatchChangesNothing) {
  struct Case {
    std::string edits, want;
  };
  const Case cases[] = {
      {R"([{"key": "a/pytorch-X-single_device-training", "set": {"status": "EXPECTED_PASSING"}},
           {"key": "nope/pytorch-single_device-training", "set": {"status": "EXPECTED_PASSING"}}])",
       "no entry 'nope/pytorch-single_device-training'"},
      {R"([{"key": "a/pytorch-X-single_device-training", "set": {"status": null}}])",
       "edits.json: [0].set.status: expected a string, boolean, number or list, got null"},
      {R"([{"key": "a/pytorch-X-single_device-training", "set": {"assert_pcc": "false"}}])",
       "assert_pcc: expected true or false, got string false"},
      {R"([{"key": "a/pytorch-X-single_device-training", "sett": {}}])", "unknown member 'sett'"},
      {R"({"key": 1})", "expected a JSON array of edits"},
      {R"([{"key": )", "invalid JSON"},
      // An integer JSON can write but a field cannot hold: an error, not a silent wrap.
      {R"([{"key": "a/pytorch-X-single_device-training", "set": {"batch_size": 18446744073709551615}}])",
       "edits.json: [0].set.batch_size: integer 18446744073709551615 is out of range (at most "
       "9223372036854775807)"},
      {std::string(100000, '[') + std::string(100000, ']'), "edits.json: [0]: expected an object"},
      // A number JSON can write but a double cannot hold: an error, not an abort.
      {R"([{"key": "a/pytorch-X-single_device-training", "set": {"required_pcc": 1e400}}])",
       "edits.json: invalid JSON"},
  };
  for (const auto& c : cases) {
    testing::WriteFileOrDie(tmp_.path() / "edits.json", c.edits);
    std::string out;
    EXPECT_EQ(Run({"yaml", "edit", kTraining, "--edits", "edits.json"}, &out), 1) << c.edits;
    EXPECT_NE(out.find(c.want), std::string::npos) << out << "\nwant: " << c.want;
    EXPECT_EQ(testing::ReadFileOrDie(tmp_.path() / kTraining), kYaml) << c.edits;
  }
}

TEST_F(TriagectlTest, FileWithErrorsIsNeverWritten) {
  const std::string bad = std::string(kYaml) + "<<<<<<< HEAD\n";
  testing::WriteFileOrDie(tmp_.path() / kTraining, bad);
  testing::WriteFileOrDie(tmp_.path() / "edits.json",
                          R"([{"key": "a/pytorch-X-single_device-training",
                               "set": {"status": "EXPECTED_PASSING"}}])");
  std::string out;
  EXPECT_EQ(Run({"yaml", "edit", kTraining, "--edits", "edits.json"}, &out), 1);
  EXPECT_NE(out.find(":8:1: merge conflict marker"), std::string::npos) << out;
  EXPECT_EQ(testing::ReadFileOrDie(tmp_.path() / kTraining), bad);
}

TEST_F(TriagectlTest, HelpAndRules) {
  std::string out;
  EXPECT_EQ(Run({"--help"}, &out), 0);
  EXPECT_NE(out.find("inventory"), std::string::npos);
  EXPECT_EQ(Run({"inventory", "rules"}, &out), 0);
  EXPECT_NE(out.find("unpack_forward_output"), std::string::npos);
}

// A command or subcommand that does not exist: the message lists the ones that do; exit 2.
TEST_F(TriagectlTest, UnknownSubcommandListsTheKnownOnes) {
  std::string out;
  EXPECT_EQ(Run({"sweep", "frobnicate"}, &out), 2);
  EXPECT_EQ(
      out,
      "triagectl: unknown subcommand 'frobnicate' of 'sweep'; expected one of: start, list, "
      "status, watch, cancel, resume, patch, apply, pr-body, report, issues, diff, durations, "
      "audit\n");
  EXPECT_EQ(Run({"agents", "frobnicate", "--insecure"}, &out), 2);
  EXPECT_EQ(out,
            "triagectl: unknown subcommand 'frobnicate' of 'agents'; expected one of: list, drain, "
            "undrain\n");
  EXPECT_EQ(Run({"frobnicate"}, &out), 2);
  EXPECT_EQ(out,
            "triagectl: unknown command 'frobnicate'; expected one of: inventory, yaml, nightly, "
            "sweep, shards, shard, agents, audit\n");
  EXPECT_EQ(Run({"nightly", "frobnicate"}, &out), 2);
  EXPECT_EQ(out,
            "triagectl: unknown subcommand 'frobnicate' of 'nightly'; expected one of: policy\n");
  EXPECT_EQ(Run({"shard"}, &out), 2);
  EXPECT_EQ(out, "triagectl: 'shard' needs a subcommand; expected one of: requeue, cancel\n");
  // Known commands are untouched, help included.
  EXPECT_EQ(Run({"sweep", "--help"}, &out), 0) << out;
  EXPECT_EQ(Run({"inventory", "rules"}, &out), 0) << out;
}

}  // namespace
}  // namespace triage
