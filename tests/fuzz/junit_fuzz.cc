// The JUnit XML reader: any bytes are read without crashing. A report it accepts is looked up by
// its own keys (and one it lacks), and every testcase goes through the verdict rules; each
// accepted testcase's key is what KeyOfTestName says of its name, and every reason is already in
// the form NormalizeReason gives (a fixed point, within max_reason_bytes).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/junit/junit.h"
#include "common/junit/reason.h"
#include "common/junit/verdict.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  auto report = triage::junit::ParseJUnit(xml, "report.xml");
  if (!report.ok()) {
    FUZZ_CHECK(report.status().code() == absl::StatusCode::kInvalidArgument,
               "unexpected status: %s", report.status().ToString().c_str());
    return 0;
  }
  std::vector<std::string> keys;
  for (const auto& tc : report->cases) {
    FUZZ_CHECK(tc.key == triage::junit::KeyOfTestName(tc.name), "key '%s' of '%s'", tc.key.c_str(),
               tc.name.c_str());
    keys.push_back(tc.key);
    triage::junit::VerifyContext ctx;
    ctx.log_text = tc.system_out;
    ctx.old_reason = tc.message;
    ctx.max_reason_bytes = 40;
    const auto finding = triage::junit::Classify(&tc, ctx);
    FUZZ_CHECK(finding.reason.size() <= ctx.max_reason_bytes, "reason of %zu bytes",
               finding.reason.size());
    FUZZ_CHECK(
        triage::junit::NormalizeReason(finding.reason, ctx.max_reason_bytes) == finding.reason,
        "reason '%s' is not in the form of a reason", finding.reason.c_str());
  }
  keys.push_back("no/such-key");
  auto found = triage::junit::ForKeys(*report, keys);
  if (found.ok()) {
    FUZZ_CHECK(found->size() == keys.size(), "ForKeys: %zu answers for %zu keys", found->size(),
               keys.size());
    FUZZ_CHECK(found->back().outcome == triage::junit::Outcome::kMissing ||
                   found->back().key == "no/such-key",
               "a missing key answered");
  }
  triage::junit::VerifyContext none;
  none.log_text = std::string(xml.substr(0, 4096));
  (void)triage::junit::Classify(nullptr, none);
  return 0;
}
