// The coordinator's tokens file (tokens.yaml): any text is read without crashing or throwing;
// an error is InvalidArgument. With the tokens it accepts, an authorization header made of the
// rest of the input authenticates as a caller with a known role, or is refused.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "coordinator/server/auth.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto auth = triage::coord::Authenticator::FromYaml(text, "tokens.yaml");
  if (!auth.ok()) {
    FUZZ_CHECK(auth.status().code() == absl::StatusCode::kInvalidArgument, "unexpected status: %s",
               auth.status().ToString().c_str());
    return 0;
  }
  // The header: "Bearer " and the value of the first token: line, or the last line.
  std::string header = "Bearer ";
  const std::size_t at = text.find("token: ");
  std::string_view value =
      at != std::string_view::npos ? text.substr(at + 7) : text.substr(text.rfind('\n') + 1);
  value = value.substr(0, value.find_first_of("\n,}"));
  header += value;
  auto caller = auth->Authenticate(header);
  if (caller.ok()) {
    FUZZ_CHECK(caller->role == "agent" || caller->role == "operator" || caller->role == "viewer",
               "caller '%s' with role '%s'", caller->name.c_str(), caller->role.c_str());
    (void)triage::coord::Authenticator::Authorize(*caller, triage::coord::Permission::kOperate,
                                                  "StartSweep");
  }
  return 0;
}
