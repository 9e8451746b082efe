#pragma once

// What the farm commands share (farm_cmd.cc and the farm_*_cmd.cc verbs; not used outside
// triagectl): the control-port client, how a failed call ends a command, and the output formats.

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/rpc/rpc.h"
#include "coordinator/triagectl/farm_cmd.h"
#include "google/protobuf/message.h"
#include "grpcpp/grpcpp.h"
#include "triage/v1/control.grpc.pb.h"

namespace triage::ctl::farm {

class Client {
 public:
  static absl::StatusOr<Client> Connect(const Connection& c);

  template <typename Req, typename Resp, typename Method>
  absl::StatusOr<Resp> Call(Method method, const Req& req,
                            std::chrono::seconds timeout = std::chrono::seconds(60)) {
    Resp resp;
    grpc::Status st =
        Invoke([&](grpc::ClientContext& ctx) { return (stub_.get()->*method)(&ctx, req, &resp); },
               timeout);
    if (!st.ok()) return Describe(st);
    return resp;
  }

  // One unary call made by call on a context with the bearer token and the timeout. A call
  // that failed while the channel was still connecting (rpc::IsPassingConnectFailure: the
  // coordinator never saw it) is sent once more when the channel connects within kReconnect:
  // a coordinator on a loaded host can be slow to answer a new connection. A refused connection
  // or a TLS mismatch fails at once.
  static constexpr std::chrono::seconds kReconnect{20};
  grpc::Status Invoke(const std::function<grpc::Status(grpc::ClientContext&)>& call,
                      std::chrono::seconds timeout);

  // A failed call's status, with the likely cause (wrong port, TLS on one side only).
  absl::Status Describe(const grpc::Status& st) const {
    return rpc::DescribeCallError(rpc::FromGrpc(st), address_, rpc::Service::kControl, insecure_);
  }

  v1::ControlService::Stub* stub() { return stub_.get(); }
  const std::string& token() const { return token_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ControlService::Stub> stub_;
  std::string token_;
  std::string address_;
  bool insecure_ = false;
};

using Stub = v1::ControlService::Stub;

// One verb of the farm commands ("sweep start", "agents drain", ...): its exit code.
using Verb = int (*)(Client& client, const FarmOptions& o, std::ostream& out, std::ostream& err);

// Prints "triagectl: <message>"; the exit code for st (problems for refusals, usage otherwise).
int Error(std::ostream& err, const absl::Status& st);

// -o json: the message as indented JSON with the proto's field names.
std::string Json(const google::protobuf::Message& m);

// -o table: columns padded to their widest cell, two spaces apart.
void PrintTable(std::ostream& out, const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows);

}  // namespace triage::ctl::farm
