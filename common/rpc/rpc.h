#pragma once

// gRPC helpers shared by the coordinator's server, the agent's client and triagectl: status
// conversion (in one place), TLS credentials, bearer tokens and the one retrier that owns the
// retryable codes and the backoff.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grpc {
class Status;
class ChannelCredentials;
class ServerCredentials;
class ClientContext;
class Channel;
}  // namespace grpc

namespace triage::rpc {

// gRPC's own log lines (gpr_log: errors only, unless GRPC_VERBOSITY asks for more) go to spdlog,
// one line each with "grpc:" before them: errors as warnings, the rest at debug. A daemon calls
// it once at start.
void RouteGrpcLogs();
// While one lives, gRPC's lines go to debug only: around a call whose failure the caller reports
// in one line of its own (a listener that cannot bind), so gRPC's dump of it is not printed too.
class QuietGrpcLogs {
 public:
  QuietGrpcLogs();
  ~QuietGrpcLogs();
  QuietGrpcLogs(const QuietGrpcLogs&) = delete;
  QuietGrpcLogs& operator=(const QuietGrpcLogs&) = delete;
};

grpc::Status ToGrpc(const absl::Status& status);
absl::Status FromGrpc(const grpc::Status& status);

struct TlsServerConfig {
  std::string cert_file;       // PEM certificate chain of the server
  std::string key_file;        // PEM private key
  std::string client_ca_file;  // set: mutual TLS, clients must present a certificate it signed
  // The settings that name the files, for messages.
  std::string cert_flag = "--tls_cert";
  std::string key_flag = "--tls_key";
  std::string client_ca_flag = "--tls_client_ca";
};
// Plaintext only when insecure is true (the caller logs the warning). Every file is read and
// checked first: it holds PEM blocks of the expected type that parse (certificates, a private
// key), and the key belongs to the certificate; a failure names the flag and the file.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TlsServerConfig& tls, bool insecure);

struct TlsClientConfig {
  std::string ca_file;    // PEM CA that signed the server's certificate ("" = system roots)
  std::string cert_file;  // client certificate for mutual TLS (optional)
  std::string key_file;
  bool insecure = false;  // plaintext
  // The settings that name the files, for messages.
  std::string ca_flag = "--tls_ca";
  std::string cert_flag = "--tls_cert";
  std::string key_flag = "--tls_key";
};
// Files are checked as for ServerCredentials.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const TlsClientConfig& tls);
absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(const std::string& address,
                                                       const TlsClientConfig& tls);

// The coordinator's two gRPC services, each on its own port.
enum class Service { kAgent, kControl };

// A failed call to the coordinator as its user should read it, in the agent and triagectl
// alike: the message names the address and, for the mistakes an operator can fix, the likely
// cause: a wrong port (the peer does not serve `expected`: UNIMPLEMENTED without a message);
// TLS on one side only (a TLS client reading plaintext, or a plaintext client whose connection
// the TLS server drops); a certificate refused; nothing listening. `insecure`: this side speaks
// plaintext. The code stays the same; other failures pass through unchanged, except that
// UNAVAILABLE always names the address.
absl::Status DescribeCallError(const absl::Status& status, std::string_view address,
                               Service expected, bool insecure);

// A call that failed while its channel was connecting, so the coordinator never saw it, for a
// reason that may pass: a connection attempt that timed out on a loaded host, or a peer that
// closed it before answering. Not a refused connection or a TLS mismatch (DescribeCallError's
// hints), which waiting does not mend. Such a call can be sent again, even one that is not
// idempotent.
bool IsPassingConnectFailure(const absl::Status& status, bool insecure);

// "authorization: Bearer <token>" on a call.
void AddBearer(grpc::ClientContext& context, const std::string& token);
inline constexpr char kAuthorizationHeader[] = "authorization";

// Retries a call on UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED and ABORTED with
// exponential backoff and jitter, until it succeeds, fails otherwise, attempts run out or
// stop() says so. sleep, when given, waits out each backoff (on the caller's clock, ending early
// when stopping); without it the backoff is slept in real time, polling stop().
struct RetryPolicy {
  int max_attempts = 8;  // 0 = until stop()
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{10'000};
};
bool IsRetryable(const absl::Status& status);
absl::Status Retry(const RetryPolicy& policy, const std::function<absl::Status()>& call,
                   const std::function<bool()>& stop = {},
                   const std::function<void(std::chrono::milliseconds)>& sleep = {});

}  // namespace triage::rpc
