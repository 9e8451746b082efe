#include "common/rpc/rpc.h"

#include <chrono>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace triage::rpc {
namespace {

std::string Describe(const absl::Status& st, Service service, bool insecure) {
  auto out = DescribeCallError(st, "127.0.0.1:7602", service, insecure);
  EXPECT_EQ(out.code(), st.code()) << "the code stays";
  return std::string(out.message());
}

constexpr char kTlsMismatch[] =
    "TLS handshake failed or plaintext peer: is --insecure set on one side only?";

// gRPC 1.51's messages, as the agent and triagectl see them.
TEST(DescribeCallError, NamesTheLikelyCause) {
  EXPECT_EQ(Describe(absl::UnimplementedError(""), Service::kAgent, true),
            "127.0.0.1:7602 does not serve the AgentService (UNIMPLEMENTED): is it the "
            "coordinator's control port? agents use the agent port");
  EXPECT_EQ(Describe(absl::UnimplementedError(""), Service::kControl, true),
            "127.0.0.1:7602 does not serve the ControlService (UNIMPLEMENTED): is it the "
            "coordinator's agent port? triagectl uses the control port");

  const std::string wrong_version =
      "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:7602: Ssl "
      "handshake failed: SSL_ERROR_SSL: error:0A00010B:SSL routines::wrong version number";
  EXPECT_EQ(Describe(absl::UnavailableError(wrong_version), Service::kControl, false),
            std::string("cannot reach the coordinator at 127.0.0.1:7602: ") + kTlsMismatch + " (" +
                wrong_version + ")");

  const std::string closed =
      "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:7602: Socket "
      "closed";
  EXPECT_EQ(Describe(absl::UnavailableError(closed), Service::kAgent, true),
            std::string("cannot reach the coordinator at 127.0.0.1:7602: ") + kTlsMismatch + " (" +
                closed + ")");
  // A TLS client whose connection is closed: nothing to say about --insecure.
  EXPECT_EQ(Describe(absl::UnavailableError(closed), Service::kAgent, false),
            "cannot reach the coordinator at 127.0.0.1:7602: " + closed);

  const std::string verify =
      "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:7602: Ssl "
      "handshake failed: SSL_ERROR_SSL: error:0A000086:SSL routines::certificate verify failed";
  EXPECT_NE(Describe(absl::UnavailableError(verify), Service::kControl, false)
                .find("a certificate was not accepted"),
            std::string::npos);

  EXPECT_NE(Describe(absl::UnavailableError("failed to connect to all addresses; last error: "
                                            "UNKNOWN: ipv4:127.0.0.1:7602: Failed to connect to "
                                            "remote host: Connection refused"),
                     Service::kControl, true)
                .find(": connection refused: is the coordinator running, and is the port right?"),
            std::string::npos);
}

// Connection attempts that may pass are sent again; what waiting does not mend is not.
TEST(IsPassingConnectFailure, OnlyAConnectionAttemptThatMayPass) {
  const std::string prefix = "failed to connect to all addresses; last error: ";
  // Both seen on a loaded 2-core host, each from a coordinator that was listening.
  EXPECT_TRUE(IsPassingConnectFailure(
      absl::UnavailableError(prefix + "UNKNOWN: ipv4:127.0.0.1:47293: connection attempt timed out "
                                      "before receiving SETTINGS frame"),
      true));
  EXPECT_TRUE(IsPassingConnectFailure(
      absl::UnavailableError(prefix + "UNKNOWN: ipv4:127.0.0.1:7602: No such file or directory"),
      true));
  // A TLS client whose connection was closed may try again; a plaintext one met a TLS server.
  const std::string closed = prefix + "UNAVAILABLE: ipv4:127.0.0.1:7602: Socket closed";
  EXPECT_TRUE(IsPassingConnectFailure(absl::UnavailableError(closed), false));
  EXPECT_FALSE(IsPassingConnectFailure(absl::UnavailableError(closed), true));
  EXPECT_FALSE(IsPassingConnectFailure(
      absl::UnavailableError(prefix +
                             "UNKNOWN: ipv4:127.0.0.1:7602: Failed to connect to remote host: "
                             "Connection refused"),
      true));
  EXPECT_FALSE(IsPassingConnectFailure(
      absl::UnavailableError(prefix +
                             "UNKNOWN: ipv4:127.0.0.1:7602: Ssl handshake failed: SSL_ERROR_SSL: "
                             "error:0A00010B:SSL routines::wrong version number"),
      false));
  // The coordinator's own UNAVAILABLE (it saw the call) and other codes are not connect failures.
  EXPECT_FALSE(IsPassingConnectFailure(absl::UnavailableError("draining: retry later"), true));
  EXPECT_FALSE(IsPassingConnectFailure(absl::DeadlineExceededError(prefix + "timed out"), true));
}

TEST(DescribeCallError, LeavesTheCoordinatorsOwnAnswersAlone) {
  for (const auto& st : {absl::UnimplementedError("this coordinator builds no patches"),
                         absl::NotFoundError("no sweep s-1"),
                         absl::PermissionDeniedError("v (role viewer) may not call StartSweep")}) {
    EXPECT_EQ(DescribeCallError(st, "127.0.0.1:7602", Service::kControl, false), st);
  }
}

// A caller's sleep waits out every backoff (the agent's, on its injected clock): jittered
// between half and all of a backoff that doubles up to its cap; no real time passes here.
TEST(Retry, BacksOffThroughTheCallersSleep) {
  using std::chrono::milliseconds;
  std::vector<milliseconds> waits;
  int calls = 0;
  absl::Status st = Retry(
      {0, milliseconds(100), milliseconds(300)},
      [&] { return ++calls < 5 ? absl::UnavailableError("down") : absl::OkStatus(); }, {},
      [&](milliseconds d) { waits.push_back(d); });
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(calls, 5);
  ASSERT_EQ(waits.size(), 4u);
  const milliseconds caps[] = {milliseconds(100), milliseconds(200), milliseconds(300),
                               milliseconds(300)};
  for (size_t i = 0; i < waits.size(); ++i) {
    EXPECT_GE(waits[i], caps[i] / 2) << i;
    EXPECT_LE(waits[i], caps[i]) << i;
  }
}

// Stopping during a caller's sleep ends the retries without another call.
TEST(Retry, StopsAfterTheCallersSleepWhenToldTo) {
  bool stopping = false;
  int calls = 0;
  absl::Status st = Retry(
      {0, std::chrono::milliseconds(10), std::chrono::milliseconds(10)},
      [&] {
        ++calls;
        return absl::UnavailableError("down");
      },
      [&] { return stopping; }, [&](std::chrono::milliseconds) { stopping = true; });
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace triage::rpc
