// A week of nights reaches the coordinator (docs/nightly.md, "How the runs reach the
// coordinator"), with real processes on loopback: seven nights of three archs with 1,000 failing
// testcases each and 2 KB error messages (about 90 MB of records, more than gRPC's 64 MiB
// message cap) go from triagectl to the coordinator in bounded chunks, the sweep starts with the
// right intake counts, and a repeated --request-id compares the runs' digest.

#include <chrono>
#include <iostream>
#include <regex>

#include "common/util/strings.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/pytest_xml.h"
#include "tests/support/test_support.h"

namespace triage {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace px = nightly::testing;

constexpr int kNights = 7;
constexpr int kPerArch = 1000;
const char* const kArchs[] = {"n150", "p150", "n300"};

std::string Key(int i) { return util::StrCat("m", i, "/pytorch-Base-single_device-inference"); }

// kPerArch failing testcases on arch, each with a 2 KB error message (and failure message).
std::string NightReport(const std::string& arch, int night) {
  std::vector<px::Case> cases;
  cases.reserve(kPerArch);
  for (int i = 0; i < kPerArch; ++i) {
    px::Tags tags;
    tags.arch = "'" + arch + "'";
    tags.model_name = util::StrCat("pt_m", i);
    tags.bringup_status = "FAILED_RUNTIME";
    tags.pcc.clear();
    px::Case c;
    c.name = util::StrCat("test_all_models_torch[", Key(i), "]");
    c.tags = tags.Literal();
    const std::string message =
        util::StrCat("TT_FATAL @ buffer.cpp:", i, " night ", night, ": ", std::string(2000, 'x'));
    c.error_message = message;
    c.outcome = px::OutcomeXml("failure", "", message, "E   RuntimeError: TT_FATAL\n");
    cases.push_back(std::move(c));
  }
  return px::Report(cases, util::StrCat("2026-11-2", night, "T02:13:44+00:00"));
}

// VmHWM of a process (its peak resident memory), in MiB; -1 when it cannot be read.
long PeakMiB(int pid) {
  const std::string status = testing::ReadFileOrDie(util::StrCat("/proc/", pid, "/status"));
  std::smatch m;
  if (!std::regex_search(status, m, std::regex("VmHWM:\\s+(\\d+) kB"))) return -1;
  return std::stol(m[1].str()) / 1024;
}

class NightlyWeekUploadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::map<std::string, std::string> yaml, forge;
    std::string config = "test_config:\n";
    for (int i = 0; i < kPerArch; ++i) {
      util::StrAppend(&config, "  ", Key(i), ":\n    status: EXPECTED_PASSING\n");
      forge[util::StrCat("m", i, "/pytorch/loader.py")] = "class ModelLoader:\n    pass\n";
    }
    yaml["tests/runner/test_config/torch/test_config_inference_single_device.yaml"] = config;
    repo_ = testing::MakeTtXlaRepo(tmp_.path() / "src", yaml, forge);
    for (int night = 1; night <= kNights; ++night) {
      for (const char* arch : kArchs) {
        testing::WriteFileOrDie(
            tmp_.path() / "nightly" / util::StrCat("night-", night) / arch / "report.xml",
            NightReport(arch, night));
      }
    }
    agent_port_ = testing::FreePort();
    control_port_ = testing::FreePort();
    ASSERT_TRUE(testing::StartLoopbackCoordinator(coordinator_, tmp_.path(), agent_port_,
                                                  control_port_, {"--tick_ms", "200"}))
        << testing::ReadFileOrDie(tmp_.path() / "coordinator.log");
  }

  // `sweep start` over the first `nights` nights with extra flags: exit code, output in *out.
  int Start(int nights, std::vector<std::string> extra, std::string* out) {
    std::vector<std::string> args = {
        "sweep", "start", "--repo", repo_.string(), "--reason", "last seven nights", "-o", "json"};
    for (int night = 1; night <= nights; ++night) {
      args.push_back("--nightly");
      args.push_back((tmp_.path() / "nightly" / util::StrCat("night-", night)).string());
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return testing::RunCtl(control_port_, args, tmp_.path(), out);
  }

  testing::TempDir tmp_;
  std::filesystem::path repo_;
  int agent_port_ = 0;
  int control_port_ = 0;
  testing::ChildProcess coordinator_;
};

TEST_F(NightlyWeekUploadTest, AWeekOfNightsStartsASweepWithItsIntakeCounts) {
  std::string out;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(Start(kNights, {"--request-id", "week-48"}, &out), 0) << out;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "sweep start, " << kNights << " nights: " << seconds << " s; coordinator peak "
            << PeakMiB(coordinator_.pid()) << " MiB\n";
  for (int night = 1; night <= kNights; ++night) {
    EXPECT_NE(out.find(util::StrCat("triagectl: nightly night-", night,
                                    ": 3 files, 3000 testcases, 3000 model test records, ")),
              std::string::npos)
        << out;
  }
  const json sweep = json::parse(out.substr(out.find('{')), nullptr, false);
  ASSERT_TRUE(sweep.is_object()) << out;
  const json& intake = sweep["nightly"];
  EXPECT_EQ(intake.value("runs", 0), kNights);
  EXPECT_EQ(intake.value("testcases", 0), kNights * 3 * kPerArch);
  EXPECT_EQ(intake.value("records", 0), kNights * 3 * kPerArch);
  EXPECT_EQ(intake.value("mapped", 0), kNights * 3 * kPerArch);
  EXPECT_EQ(intake.value("unmapped", 0), 0);
  EXPECT_EQ(intake["archs"].size(), 3u) << intake.dump();
  ASSERT_EQ(intake["run_labels"].size(), static_cast<std::size_t>(kNights)) << intake.dump();
  EXPECT_EQ(intake["run_labels"][0], "night-1");
  EXPECT_EQ(intake["run_labels"][kNights - 1], "night-7");
  int candidates = 0;
  for (const auto& [kind, n] : intake["candidates"].items()) candidates += n.get<int>();
  EXPECT_EQ(candidates, 3 * kPerArch) << intake.dump();
  const std::string id = sweep.value("id", "");
  ASSERT_FALSE(id.empty()) << out;

  // The same request again: the runs' digest is the same, so it is the same sweep.
  ASSERT_EQ(Start(kNights, {"--request-id", "week-48"}, &out), 0) << out;
  const json again = json::parse(out.substr(out.find('{')), nullptr, false);
  ASSERT_TRUE(again.is_object()) << out;
  EXPECT_EQ(again.value("id", ""), id);
  EXPECT_TRUE(again.value("existing", false)) << out;
  // Other runs under the same id: a mistake, named.
  EXPECT_EQ(Start(2, {"--request-id", "week-48"}, &out), 1) << out;
  EXPECT_NE(out.find("already started sweep " + id + " with other options (nightly_digest"),
            std::string::npos)
      << out;
  std::cout << "coordinator peak after three uploads: " << PeakMiB(coordinator_.pid()) << " MiB\n";
}

}  // namespace
}  // namespace triage
