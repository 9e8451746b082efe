#include "common/rpc/rpc.h"

#include <algorithm>
#include <cctype>
#include <random>
#include <thread>

#include "common/util/file.h"
#include "common/util/strings.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace triage::rpc {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), util::MessageOf(status));
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

namespace {

absl::StatusOr<std::string> Pem(const std::string& path, std::string_view what) {
  auto text = util::ReadFile(path, 1 << 20);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        util::StrCat("TLS ", what, ": ", util::MessageOf(text.status())));
  }
  return *text;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TlsServerConfig& tls, bool insecure) {
  if (tls.cert_file.empty() && tls.key_file.empty()) {
    if (!insecure) {
      return absl::FailedPreconditionError(
          "no TLS certificate configured: give tls_cert and tls_key, or set insecure to serve "
          "plaintext");
    }
    return grpc::InsecureServerCredentials();
  }
  if (tls.cert_file.empty() || tls.key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a key");
  }
  auto cert = Pem(tls.cert_file, "certificate");
  if (!cert.ok()) return cert.status();
  auto key = Pem(tls.key_file, "key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!tls.client_ca_file.empty()) {
    auto ca = Pem(tls.client_ca_file, "client CA");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const TlsClientConfig& tls) {
  if (tls.insecure) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  if (!tls.ca_file.empty()) {
    auto ca = Pem(tls.ca_file, "CA");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
  }
  if (!tls.cert_file.empty() || !tls.key_file.empty()) {
    auto cert = Pem(tls.cert_file, "client certificate");
    if (!cert.ok()) return cert.status();
    auto key = Pem(tls.key_file, "client key");
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *cert;
    options.pem_private_key = *key;
  }
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(const std::string& address,
                                                       const TlsClientConfig& tls) {
  auto creds = ClientCredentials(tls);
  if (!creds.ok()) return creds.status();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  // gRPC's own reconnect backoff grows to two minutes. A coordinator that restarts must see its
  // agents back well within a lease's life, so reconnect attempts stay at most a second apart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1'000);
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 64 << 20);
  return grpc::CreateCustomChannel(address, *creds, args);
}

namespace {

bool Contains(std::string_view haystack, std::string_view needle) {
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(),
                     [&](char a, char b) { return lower(a) == lower(b); }) != haystack.end();
}

}  // namespace

absl::Status DescribeCallError(const absl::Status& status, std::string_view address,
                               Service expected, bool insecure) {
  if (status.ok()) return status;
  const std::string_view message(status.message().data(), status.message().size());
  if (absl::IsUnimplemented(status) && message.empty()) {
    // gRPC's answer for a method the server does not have: the other port of the coordinator.
    const bool agent = expected == Service::kAgent;
    return absl::UnimplementedError(util::StrCat(
        address, " does not serve the ", agent ? "AgentService" : "ControlService",
        " (UNIMPLEMENTED): is it the coordinator's ", agent ? "control" : "agent", " port? ",
        agent ? "agents use the agent port" : "triagectl uses the control port"));
  }
  if (!absl::IsUnavailable(status)) return status;
  constexpr std::string_view kTlsMismatch =
      "TLS handshake failed or plaintext peer: is --insecure set on one side only?";
  std::string_view hint;
  const bool tls_failed =
      Contains(message, "handshake") || Contains(message, "ssl") || Contains(message, "tsi_");
  if (tls_failed && Contains(message, "certificate")) {
    // Both sides speak TLS, but a certificate was refused.
    hint =
        "TLS handshake failed: a certificate was not accepted (is the TLS CA setting the CA that "
        "signed the coordinator's certificate? mutual TLS also needs a client certificate)";
  } else if (tls_failed) {
    // A TLS client reading a plaintext answer ("wrong version number").
    hint = kTlsMismatch;
  } else if (insecure &&
             (Contains(message, "socket closed") || Contains(message, "connection reset") ||
              Contains(message, "end of file"))) {
    // A TLS server drops a plaintext client without a word.
    hint = kTlsMismatch;
  } else if (Contains(message, "connection refused")) {
    hint = "connection refused: is the coordinator running, and is the port right?";
  }
  if (hint.empty()) {
    return absl::UnavailableError(
        util::StrCat("cannot reach the coordinator at ", address, ": ", message));
  }
  return absl::UnavailableError(
      util::StrCat("cannot reach the coordinator at ", address, ": ", hint, " (", message, ")"));
}

void AddBearer(grpc::ClientContext& context, const std::string& token) {
  if (!token.empty()) context.AddMetadata(kAuthorizationHeader, "Bearer " + token);
}

bool IsRetryable(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

absl::Status Retry(const RetryPolicy& policy, const std::function<absl::Status()>& call,
                   const std::function<bool()>& stop) {
  static thread_local std::mt19937 rng(std::random_device{}());
  auto backoff = policy.initial_backoff;
  absl::Status last;
  for (int attempt = 1;; ++attempt) {
    last = call();
    if (last.ok() || !IsRetryable(last)) return last;
    if (policy.max_attempts > 0 && attempt >= policy.max_attempts) return last;
    if (stop && stop()) return last;
    // Full jitter: sleep a random time up to the current backoff, in slices so stop() is seen.
    std::uniform_int_distribution<long> dist(backoff.count() / 2, backoff.count());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(dist(rng));
    while (std::chrono::steady_clock::now() < deadline) {
      if (stop && stop()) return last;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    backoff = std::min(backoff * 2, policy.max_backoff);
  }
}

}  // namespace triage::rpc
