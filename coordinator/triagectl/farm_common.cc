#include "coordinator/triagectl/farm_common.h"

#include <algorithm>

#include "common/util/file.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "coordinator/triagectl/inventory_cmd.h"
#include "google/protobuf/util/json_util.h"

namespace triage::ctl::farm {

absl::StatusOr<Client> Client::Connect(const Connection& c) {
  Client client;
  client.token_ = c.token;
  if (!c.token_file.empty()) {
    auto t = util::ReadFile(c.token_file, 4096);
    if (!t.ok()) return t.status();
    client.token_ = std::string(util::TrimWhitespace(*t));
  }
  rpc::TlsClientConfig tls{c.tls_ca, c.tls_cert, c.tls_key, c.insecure};
  tls.ca_flag = "--tls-ca";
  tls.cert_flag = "--tls-cert";
  tls.key_flag = "--tls-key";
  auto channel = rpc::Connect(c.coordinator, tls);
  if (!channel.ok()) return channel.status();
  client.channel_ = *channel;
  client.stub_ = v1::ControlService::NewStub(client.channel_);
  client.address_ = c.coordinator;
  client.insecure_ = c.insecure;
  return client;
}

grpc::Status Client::Invoke(const std::function<grpc::Status(grpc::ClientContext&)>& call,
                            std::chrono::seconds timeout) {
  const auto attempt = [&] {
    grpc::ClientContext ctx;
    rpc::AddBearer(ctx, token_);
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    return call(ctx);
  };
  grpc::Status st = attempt();
  if (st.ok() || !rpc::IsPassingConnectFailure(rpc::FromGrpc(st), insecure_)) return st;
  if (!channel_->WaitForConnected(std::chrono::system_clock::now() + kReconnect)) return st;
  return attempt();
}

int Error(std::ostream& err, const absl::Status& st) {
  err << "triagectl: " << st.message() << "\n";
  switch (st.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return kExitProblems;
    default:
      return kExitUsage;
  }
}

std::string Json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

void PrintTable(std::ostream& out, const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(header.size(), 0);
  for (std::size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
  for (const auto& r : rows) {
    for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    for (std::size_t i = 0; i < r.size(); ++i) {
      out << r[i];
      if (i + 1 < r.size()) out << std::string(w[i] - r[i].size() + 2, ' ');
    }
    out << "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
}

}  // namespace triage::ctl::farm
