#include "common/rpc/rpc.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>

#include "common/util/file.h"
#include "common/util/log.h"
#include "common/util/strings.h"
#include "grpc/support/log.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace triage::rpc {

namespace {

std::atomic<int> quiet_grpc_logs{0};

void GrpcLogToSpdlog(gpr_log_func_args* args) {
  std::string message = args->message != nullptr ? args->message : "";
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  const char* file = args->file != nullptr ? args->file : "?";
  if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
  if (args->severity == GPR_LOG_SEVERITY_ERROR && quiet_grpc_logs.load() == 0) {
    spdlog::warn("grpc: {}:{}: {}", file, args->line, message);
  } else {
    spdlog::debug("grpc: {}:{}: {}", file, args->line, message);
  }
}

}  // namespace

void RouteGrpcLogs() { gpr_set_log_function(GrpcLogToSpdlog); }

QuietGrpcLogs::QuietGrpcLogs() { quiet_grpc_logs.fetch_add(1); }

QuietGrpcLogs::~QuietGrpcLogs() { quiet_grpc_logs.fetch_sub(1); }

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), util::MessageOf(status));
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

namespace {

enum class PemKind { kCertificates, kPrivateKey };

// OpenSSL's first queued error as text (and the queue cleared), "" when there is none.
std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

// Reads a PEM file named by `flag` and checks that it holds what `kind` says: one or more
// certificates (a chain, a CA bundle) or one private key, each of which parses.
absl::StatusOr<std::string> Pem(const std::string& path, PemKind kind, std::string_view flag) {
  auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(util::StrCat(flag, " ", path, ": ", what));
  };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return bad("is a directory, not a PEM file");
  auto text = util::ReadFile(path, 1 << 20);
  if (!text.ok())
    return absl::InvalidArgumentError(util::StrCat(flag, ": ", util::MessageOf(text.status())));
  const bool want_cert = kind == PemKind::kCertificates;
  const std::string_view expected = want_cert ? "a PEM certificate" : "a PEM private key";
  if (text->find("-----BEGIN ") == std::string::npos) {
    return bad(util::StrCat("not ", expected, " (no -----BEGIN block)"));
  }
  const bool has_cert = text->find("-----BEGIN CERTIFICATE-----") != std::string::npos;
  const bool has_key = text->find("PRIVATE KEY-----") != std::string::npos;
  if (want_cert && !has_cert) {
    return bad(has_key ? "holds a private key, not a certificate"
                       : "not a PEM certificate (no -----BEGIN CERTIFICATE----- block)");
  }
  if (!want_cert && !has_key) {
    return bad(has_cert ? "holds a certificate, not a private key"
                        : "not a PEM private key (no -----BEGIN ... PRIVATE KEY----- block)");
  }
  if (!want_cert && text->find("ENCRYPTED PRIVATE KEY-----") != std::string::npos) {
    return bad("the private key is encrypted (give an unencrypted key)");
  }
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(text->data(), static_cast<int>(text->size())), BIO_free);
  ERR_clear_error();
  if (want_cert) {
    int count = 0;
    while (true) {
      X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
      if (cert == nullptr) break;
      X509_free(cert);
      ++count;
    }
    const unsigned long e = ERR_peek_last_error();
    const bool clean_end =
        ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
    if (count == 0 || !clean_end) {
      std::string why = OpenSslError();
      return bad(util::StrCat("a CERTIFICATE block does not parse", why.empty() ? "" : " (", why,
                              why.empty() ? "" : ")"));
    }
    ERR_clear_error();
  } else {
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
    if (key == nullptr) {
      std::string why = OpenSslError();
      return bad(util::StrCat("the PRIVATE KEY block does not parse", why.empty() ? "" : " (", why,
                              why.empty() ? "" : ")"));
    }
    EVP_PKEY_free(key);
  }
  return *text;
}

// The certificate (the first of the chain) and the key belong together.
absl::Status CheckKeyMatches(const std::string& cert_pem, const std::string& key_pem,
                             std::string_view cert_what, std::string_view key_what) {
  std::unique_ptr<BIO, decltype(&BIO_free)> cbio(
      BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())), BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> kbio(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(cbio.get(), nullptr, nullptr, nullptr), X509_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(kbio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  bool ok = cert != nullptr && key != nullptr && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      util::StrCat(key_what, " does not belong to the certificate in ", cert_what));
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
    return absl::InvalidArgumentError(
        util::StrCat("TLS needs both a certificate and a key: give ",
                     tls.cert_file.empty() ? tls.cert_flag : tls.key_flag));
  }
  auto cert = Pem(tls.cert_file, PemKind::kCertificates, tls.cert_flag);
  if (!cert.ok()) return cert.status();
  auto key = Pem(tls.key_file, PemKind::kPrivateKey, tls.key_flag);
  if (!key.ok()) return key.status();
  if (auto st = CheckKeyMatches(*cert, *key, util::StrCat(tls.cert_flag, " ", tls.cert_file),
                                util::StrCat(tls.key_flag, " ", tls.key_file));
      !st.ok()) {
    return st;
  }
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!tls.client_ca_file.empty()) {
    auto ca = Pem(tls.client_ca_file, PemKind::kCertificates, tls.client_ca_flag);
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
    auto ca = Pem(tls.ca_file, PemKind::kCertificates, tls.ca_flag);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
  }
  if (!tls.cert_file.empty() || !tls.key_file.empty()) {
    if (tls.cert_file.empty() || tls.key_file.empty()) {
      return absl::InvalidArgumentError(
          util::StrCat("mutual TLS needs both a client certificate and its key: give ",
                       tls.cert_file.empty() ? tls.cert_flag : tls.key_flag));
    }
    auto cert = Pem(tls.cert_file, PemKind::kCertificates, tls.cert_flag);
    if (!cert.ok()) return cert.status();
    auto key = Pem(tls.key_file, PemKind::kPrivateKey, tls.key_flag);
    if (!key.ok()) return key.status();
    if (auto st = CheckKeyMatches(*cert, *key, util::StrCat(tls.cert_flag, " ", tls.cert_file),
                                  util::StrCat(tls.key_flag, " ", tls.key_file));
        !st.ok()) {
      return st;
    }
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

// The likely cause of a failed connection that an operator can fix (TLS on one side only, a
// certificate refused, nothing listening); empty when the message names none.
std::string_view ConnectHint(std::string_view message, bool insecure) {
  constexpr std::string_view kTlsMismatch =
      "TLS handshake failed or plaintext peer: is --insecure set on one side only?";
  const bool tls_failed =
      Contains(message, "handshake") || Contains(message, "ssl") || Contains(message, "tsi_");
  if (tls_failed && Contains(message, "certificate")) {
    // Both sides speak TLS, but a certificate was refused.
    return "TLS handshake failed: a certificate was not accepted (is the TLS CA setting the CA "
           "that signed the coordinator's certificate? mutual TLS also needs a client "
           "certificate)";
  }
  if (tls_failed) {
    // A TLS client reading a plaintext answer ("wrong version number").
    return kTlsMismatch;
  }
  if (insecure && (Contains(message, "socket closed") || Contains(message, "connection reset") ||
                   Contains(message, "end of file"))) {
    // A TLS server drops a plaintext client without a word.
    return kTlsMismatch;
  }
  if (Contains(message, "connection refused")) {
    return "connection refused: is the coordinator running, and is the port right?";
  }
  return {};
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
  const std::string_view hint = ConnectHint(message, insecure);
  if (hint.empty()) {
    return absl::UnavailableError(
        util::StrCat("cannot reach the coordinator at ", address, ": ", message));
  }
  return absl::UnavailableError(
      util::StrCat("cannot reach the coordinator at ", address, ": ", hint, " (", message, ")"));
}

bool IsPassingConnectFailure(const absl::Status& status, bool insecure) {
  if (!absl::IsUnavailable(status)) return false;
  const std::string_view message(status.message().data(), status.message().size());
  // gRPC's words for a call failed by its channel's connection attempt, before it was sent.
  return Contains(message, "failed to connect to all addresses") &&
         ConnectHint(message, insecure).empty();
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
                   const std::function<bool()>& stop,
                   const std::function<void(std::chrono::milliseconds)>& sleep) {
  static thread_local std::mt19937 rng(std::random_device{}());
  auto backoff = policy.initial_backoff;
  absl::Status last;
  for (int attempt = 1;; ++attempt) {
    last = call();
    if (last.ok() || !IsRetryable(last)) return last;
    if (policy.max_attempts > 0 && attempt >= policy.max_attempts) return last;
    if (stop && stop()) return last;
    // Full jitter: sleep a random time up to the current backoff (polled in slices so stop() is
    // seen, unless the caller sleeps).
    std::uniform_int_distribution<long> dist(backoff.count() / 2, backoff.count());
    const std::chrono::milliseconds wait(dist(rng));
    if (sleep) {
      sleep(wait);
      if (stop && stop()) return last;
    } else {
      auto deadline = std::chrono::steady_clock::now() + wait;
      while (std::chrono::steady_clock::now() < deadline) {
        if (stop && stop()) return last;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    backoff = std::min(backoff * 2, policy.max_backoff);
  }
}

}  // namespace triage::rpc
