#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "triage/v1/types.pb.h"

namespace triage::registry {

// The registry lines of verify-phase shards that share one workspace (docs/farm.md, "Batched
// verification"). training_utils.py looks a forward output up by its class name, so a line for
// one class changes nothing for a model returning another: shards may share one file when every
// shard sees, for each class it depends on (the classes of its entries' outputs, and those its
// own lines name), exactly the lines its own spec gives it. A shard with an entry whose output
// class is unknown may depend on any line: it shares only with shards whose lines are all the
// same as its own.
// A registry line to add (`_register_attr("cls", "attr")`) or one to remove, as results and
// specs carry them.
v1::RegistryOp AddOp(const std::string& cls, const std::string& attr);
v1::RegistryOp RemoveOp(const std::string& cls);

class RegistryUnion {
 public:
  // Adds spec's pre_registry lines when the union stays true to every shard in it, spec
  // included; false, with nothing changed, when it would not.
  bool Add(const v1::ShardSpec& spec);
  // The lines of the union, each class's in its shard's order, classes in the order added.
  std::vector<v1::RegistryOp> Ops() const;

 private:
  std::vector<std::string> order_;                            // classes with lines, as added
  std::map<std::string, std::vector<v1::RegistryOp>> lines_;  // class -> its lines
  std::map<std::string, std::string> depends_;  // class a shard depends on -> lines it needs
  std::set<std::string> states_;                // every shard's whole pre_registry
  bool unknown_ = false;                        // a shard depends on classes not known
  bool empty_ = true;
};

}  // namespace triage::registry
