#include "coordinator/persistence/journal.h"

#include <cstdlib>
#include <future>
#include <memory>

#include "common/util/log.h"
#include "common/util/strings.h"

namespace triage::coord {

Journal::Journal(Store* store, CoordinatorMetrics* metrics,
                 std::function<void(const absl::Status&)> rebuild)
    : store_(store),
      metrics_(metrics),
      commits_(store, std::move(rebuild), [this](double seconds, std::uint64_t mutations, bool ok) {
        healthy_.store(ok);
        metrics_->StoreCommit(seconds, static_cast<int>(mutations), ok);
      }) {}

absl::Status Journal::Stage(const Mutation& m, Effects& after) {
  auto ticket = store_->Stage(m);
  if (!ticket.ok()) {
    healthy_.store(false);
    return absl::UnavailableError(util::StrCat("store: ", util::MessageOf(ticket.status())));
  }
  after.ticket = last_staged_ = *ticket;
  return absl::OkStatus();
}

void Journal::Settle(Effects& after) {
  std::vector<GroupCommit::Item> items = std::move(after.now);
  for (auto& item : after.last) {
    item.last = true;
    items.push_back(std::move(item));
  }
  after.now.clear();
  after.last.clear();
  commits_.Submit(after.ticket, std::move(items));
}

absl::Status Journal::SettleAndWait(Effects& after) {
  auto result = std::make_shared<std::promise<absl::Status>>();
  auto got = result->get_future();
  after.Reply([result] { result->set_value(absl::OkStatus()); },
              [result](const absl::Status& st) { result->set_value(st); });
  Settle(after);
  return got.get();
}

Snapshot Journal::Rewind(const absl::Status& why) {
  healthy_.store(false);
  commits_.Lost(store_->Abort());
  auto snap = store_->Load();
  if (!snap.ok()) {
    spdlog::critical(
        "coordinator: a commit failed ({}) and the state cannot be reloaded "
        "({}); exiting so that a restart recovers from the database",
        util::MessageOf(why), util::MessageOf(snap.status()));
    std::abort();
  }
  spdlog::error(
      "coordinator: a commit failed ({}); state reloaded from the database, the "
      "operations in that commit were answered UNAVAILABLE",
      util::MessageOf(why));
  return std::move(*snap);
}

void Journal::Probe() {
  // A database file that is no longer the one open (deleted or replaced) is noticed here even
  // when nothing is being written; the store's Check puts a deleted one back and proves with a
  // commit that writing works again.
  if (!store_->FileIntact()) {
    if (healthy_.exchange(false)) {
      spdlog::error("coordinator: the database file was deleted or replaced while open");
    }
  }
  if (!healthy_.load()) healthy_.store(store_->Check().ok());
}

}  // namespace triage::coord
