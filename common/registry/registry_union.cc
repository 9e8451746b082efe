#include "common/registry/registry_union.h"

namespace triage::registry {
namespace {

std::string Serialize(const std::vector<v1::RegistryOp>& ops) {
  std::string out;
  for (const auto& op : ops) {
    out += op.SerializeAsString();
    out += '\n';
  }
  return out;
}

}  // namespace

v1::RegistryOp AddOp(const std::string& cls, const std::string& attr) {
  v1::RegistryOp op;
  op.set_kind(v1::RegistryOp::ADD);
  op.set_cls(cls);
  op.set_attr(attr);
  return op;
}

v1::RegistryOp RemoveOp(const std::string& cls) {
  v1::RegistryOp op;
  op.set_kind(v1::RegistryOp::REMOVE);
  op.set_cls(cls);
  return op;
}

bool RegistryUnion::Add(const v1::ShardSpec& spec) {
  std::map<std::string, std::vector<v1::RegistryOp>> mine;
  std::vector<std::string> mine_order;
  for (const auto& op : spec.pre_registry()) {
    auto [at, fresh] = mine.try_emplace(op.cls());
    if (fresh) mine_order.push_back(op.cls());
    at->second.push_back(op);
  }
  const std::string state = Serialize(
      std::vector<v1::RegistryOp>(spec.pre_registry().begin(), spec.pre_registry().end()));
  std::set<std::string> depends;  // the classes this shard depends on
  bool unknown = false;
  for (const auto& e : spec.entries()) {
    if (e.output_class().empty()) {
      unknown = true;
    } else {
      depends.insert(e.output_class());
    }
  }
  for (const auto& cls : mine_order) depends.insert(cls);

  if (!empty_ && (unknown || unknown_)) {
    // Only the same lines everywhere.
    if (states_.size() != 1 || *states_.begin() != state) return false;
  } else if (!empty_) {
    auto needs = [&](const std::string& cls) {
      auto it = mine.find(cls);
      return it == mine.end() ? std::string() : Serialize(it->second);
    };
    for (const auto& cls : depends) {  // what this shard would see: others' lines first
      auto have = lines_.find(cls);
      if (have != lines_.end() && Serialize(have->second) != needs(cls)) return false;
    }
    for (const auto& cls : mine_order) {  // what the others would see of its lines
      auto d = depends_.find(cls);
      if (d != depends_.end() && d->second != needs(cls)) return false;
    }
  }
  empty_ = false;
  unknown_ = unknown_ || unknown;
  states_.insert(state);
  for (const auto& cls : mine_order) {
    if (lines_.try_emplace(cls, mine[cls]).second) order_.push_back(cls);
  }
  for (const auto& cls : depends) {
    auto it = mine.find(cls);
    depends_.try_emplace(cls, it == mine.end() ? std::string() : Serialize(it->second));
  }
  return true;
}

std::vector<v1::RegistryOp> RegistryUnion::Ops() const {
  std::vector<v1::RegistryOp> out;
  for (const auto& cls : order_) {
    const auto& ops = lines_.at(cls);
    out.insert(out.end(), ops.begin(), ops.end());
  }
  return out;
}

}  // namespace triage::registry
