// The daemons' config file (Schema::LoadYaml): any text is read without crashing or throwing,
// into a schema with a field of every type; an error is InvalidArgument.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/config/config.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string data_dir = "/var/lib/triage";
  std::int64_t lease_ttl_seconds = 120;
  double ratio = 0.5;
  bool insecure = false;
  std::vector<std::string> default_archs = {"n150"};
  triage::config::Schema schema(triage::config::kCoordinatorEnvPrefix);
  schema.Add("data_dir", &data_dir, "where data lives");
  schema.Add("lease_ttl_seconds", &lease_ttl_seconds, "lease lifetime");
  schema.Add("ratio", &ratio, "a fraction");
  schema.Add("insecure", &insecure, "plaintext");
  schema.Add("default_archs", &default_archs, "archs");
  auto st = schema.LoadYaml(text, "coordinator.yaml");
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == absl::StatusCode::kInvalidArgument, "unexpected status: %s",
               st.ToString().c_str());
    return 0;
  }
  (void)schema.Describe();
  return 0;
}
