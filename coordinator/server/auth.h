#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/model.h"

namespace triage::coord {

// What a role may do: viewers only read; only agents lease and complete; only operators start,
// cancel, requeue and drain (and read).
enum class Permission { kAgent, kRead, kOperate };

struct Token {
  std::string name;
  std::string role;  // agent | operator | viewer
  std::string token;
};

// Bearer-token authentication. Disabled only in insecure mode: then every caller is
// "anonymous" with every permission.
class Authenticator {
 public:
  // tokens.yaml:  tokens: [{name: alice, role: operator, token: "..."}, ...]
  static absl::StatusOr<Authenticator> FromFile(const std::string& path);
  // The same from the file's text; source names it in messages.
  static absl::StatusOr<Authenticator> FromYaml(std::string_view text, const std::string& source);
  static absl::StatusOr<Authenticator> FromTokens(std::vector<Token> tokens);
  static Authenticator Disabled();

  bool enabled() const { return enabled_; }
  // From the value of the "authorization" header ("Bearer <token>"); empty = none sent.
  absl::StatusOr<Caller> Authenticate(std::string_view header) const;
  static absl::Status Authorize(const Caller& caller, Permission permission,
                                std::string_view method);

 private:
  bool enabled_ = true;
  std::vector<Token> tokens_;
};

}  // namespace triage::coord
