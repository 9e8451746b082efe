#include "coordinator/server/guard.h"

namespace triage::coord {
namespace {

std::string_view CodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return "OK";
    case absl::StatusCode::kCancelled:
      return "CANCELLED";
    case absl::StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case absl::StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kNotFound:
      return "NOT_FOUND";
    case absl::StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case absl::StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case absl::StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case absl::StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case absl::StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case absl::StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
    default:
      return "ERROR";
  }
}

}  // namespace

absl::StatusOr<Caller> Guard::Check(grpc::CallbackServerContext* ctx, Permission permission,
                                    std::string_view method) const {
  std::string_view header;
  const auto& md = ctx->client_metadata();
  auto it = md.find(rpc::kAuthorizationHeader);
  if (it != md.end()) header = std::string_view(it->second.data(), it->second.size());
  auto caller = auth_->Authenticate(header);
  if (!caller.ok()) return caller.status();
  if (auto st = Authenticator::Authorize(*caller, permission, method); !st.ok()) return st;
  return caller;
}

void Guard::Observe(std::string_view method, const absl::Status& status,
                    Clock::time_point start) const {
  if (metrics_ == nullptr) return;
  metrics_->Rpc(method, CodeName(status.code()),
                std::chrono::duration<double>(Clock::now() - start).count());
}

}  // namespace triage::coord
