#include "coordinator/server/auth.h"

#include <sys/stat.h>

#include "common/util/file.h"
#include "common/util/strings.h"
#include "yaml-cpp/yaml.h"

namespace triage::coord {
namespace {

// Compares in time independent of where the strings differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<Authenticator> Authenticator::FromTokens(std::vector<Token> tokens) {
  for (const auto& t : tokens) {
    if (t.role != "agent" && t.role != "operator" && t.role != "viewer") {
      return absl::InvalidArgumentError(util::StrCat("token '", t.name, "': role must be agent, ",
                                                     "operator or viewer, got '", t.role, "'"));
    }
    if (t.token.size() < 16) {
      return absl::InvalidArgumentError(
          util::StrCat("token '", t.name, "': tokens must be at least 16 characters"));
    }
    if (t.name.empty()) return absl::InvalidArgumentError("every token needs a name");
  }
  Authenticator a;
  a.tokens_ = std::move(tokens);
  return a;
}

absl::StatusOr<Authenticator> Authenticator::FromFile(const std::string& path) {
  auto text = util::ReadFile(path, 1 << 20);
  if (!text.ok()) return text.status();
  return FromYaml(*text, path);
}

absl::StatusOr<Authenticator> Authenticator::FromYaml(std::string_view text,
                                                      const std::string& source) {
  const std::string& path = source;
  std::vector<Token> tokens;
  auto at = [&](const YAML::Node& n) { return util::StrCat(path, ":", n.Mark().line + 1); };
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    if (!root.IsMap()) {
      return absl::InvalidArgumentError(util::StrCat(
          root.IsNull() ? path : at(root), ": expected a mapping with a 'tokens' list, got ",
          root.IsNull()       ? "an empty file"
          : root.IsSequence() ? "a list"
                              : "a scalar"));
    }
    for (const auto& kv : root) {
      if (kv.first.Scalar() != "tokens") {
        return absl::InvalidArgumentError(
            util::StrCat(at(kv.first), ": unknown key '", kv.first.Scalar(), "' (only 'tokens')"));
      }
    }
    const YAML::Node list = root["tokens"];
    if (!list || !list.IsSequence()) {
      return absl::InvalidArgumentError(
          util::StrCat(list ? at(list) : path, ": expected a 'tokens' list"));
    }
    std::size_t i = 0;
    for (const auto& t : list) {
      const std::string where = util::StrCat(at(t), ": tokens[", i++, "]");
      if (!t.IsMap()) {
        return absl::InvalidArgumentError(
            util::StrCat(where, ": expected a mapping with name, role and token"));
      }
      for (const auto& kv : t) {
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
        if (key != "name" && key != "role" && key != "token") {
          return absl::InvalidArgumentError(util::StrCat(at(kv.first), ": tokens[", i - 1,
                                                         "]: unknown field '", key,
                                                         "' (name, role, token)"));
        }
      }
      Token token;
      for (auto [field, out] : {std::pair{"name", &token.name}, std::pair{"role", &token.role},
                                std::pair{"token", &token.token}}) {
        const YAML::Node v = t[field];
        if (!v) {
          return absl::InvalidArgumentError(util::StrCat(where, ": field '", field,
                                                         "' is missing (each token needs name, ",
                                                         "role and token)"));
        }
        if (!v.IsScalar()) {
          return absl::InvalidArgumentError(
              util::StrCat(at(v), ": tokens[", i - 1, "].", field, ": expected a string"));
        }
        *out = v.Scalar();
      }
      if (auto st = FromTokens({token}); !st.ok()) {
        return absl::InvalidArgumentError(util::StrCat(where, ": ", st.status().message()));
      }
      tokens.push_back(std::move(token));
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        util::StrCat(path, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(util::StrCat(path, ": the 'tokens' list is empty"));
  }
  auto a = FromTokens(std::move(tokens));
  if (!a.ok()) return absl::InvalidArgumentError(util::StrCat(path, ": ", a.status().message()));
  return a;
}

Authenticator Authenticator::Disabled() {
  Authenticator a;
  a.enabled_ = false;
  return a;
}

absl::StatusOr<Caller> Authenticator::Authenticate(std::string_view header) const {
  if (!enabled_) return Caller{"anonymous", ""};
  constexpr std::string_view kBearer = "Bearer ";
  if (header.empty()) return absl::UnauthenticatedError("missing bearer token");
  if (!header.starts_with(kBearer)) {
    return absl::UnauthenticatedError("authorization must be 'Bearer <token>'");
  }
  std::string_view token = header.substr(kBearer.size());
  for (const auto& t : tokens_) {
    if (ConstantTimeEquals(token, t.token)) return Caller{t.name, t.role};
  }
  return absl::UnauthenticatedError("unknown bearer token");
}

absl::Status Authenticator::Authorize(const Caller& caller, Permission permission,
                                      std::string_view method) {
  if (caller.role.empty()) return absl::OkStatus();  // auth disabled
  bool ok = false;
  switch (permission) {
    case Permission::kAgent:
      ok = caller.role == "agent";
      break;
    case Permission::kRead:
      ok = caller.role == "viewer" || caller.role == "operator";
      break;
    case Permission::kOperate:
      ok = caller.role == "operator";
      break;
  }
  if (ok) return absl::OkStatus();
  return absl::PermissionDeniedError(
      util::StrCat(caller.name, " (role ", caller.role, ") may not call ", method));
}

}  // namespace triage::coord
