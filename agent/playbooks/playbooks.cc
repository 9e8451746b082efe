#include "agent/playbooks/playbooks.h"

#include "agent/playbooks/registry.h"
#include "common/util/strings.h"

namespace triage::playbooks {
namespace {

// The shard's playbook has no runner: the shard is verified like any other, and refused when it
// needs probing and fixing.
class NoRunner : public Playbook {
 public:
  explicit NoRunner(std::string_view name) {
    const CatalogItem* item = FindInCatalog(name);
    if (item != nullptr) {
      entry_ = *item->entry;
      catalogued_ = true;
    } else {
      entry_.name = name;
    }
  }
  const CatalogEntry& Catalog() const override { return entry_; }
  absl::Status ProbeAndFix(ShardRun&) const override {
    return absl::UnimplementedError(
        util::StrCat("the native executor has no playbook '", Name(), "'",
                     catalogued_ ? " (it is classified and planned, but has no runner yet)" : ""));
  }

 private:
  CatalogEntry entry_;
  bool catalogued_ = false;
};

}  // namespace

absl::StatusOr<v1::ShardResult> RunPlaybook(PlaybookContext& ctx) {
  if (const Playbook* p = FindPlaybook(ctx.spec->playbook())) return p->Run(ctx);
  NoRunner none(ctx.spec->playbook());
  return none.Run(ctx);
}

}  // namespace triage::playbooks
