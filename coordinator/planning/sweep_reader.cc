#include "coordinator/planning/sweep_reader.h"

#include "common/git/git.h"
#include "common/nightly/history.h"
#include "common/util/strings.h"

namespace triage::coord {

SweepReader MakeGitSweepReader(std::filesystem::path cache_dir, std::size_t max_file_bytes) {
  return
      [cache_dir, max_file_bytes](const v1::StartSweepRequest& req) -> absl::StatusOr<SweepInput> {
        absl::StatusOr<git::Pinned> pinned = absl::UnknownError("unset");
        git::PinOptions pin;
        pin.forge_ref = req.forge_ref();
        pin.allow_dirty = req.allow_dirty();
        std::string display;
        if (!req.repo_path().empty()) {
          std::error_code ec;
          auto path = std::filesystem::absolute(req.repo_path(), ec);
          if (ec || !std::filesystem::is_directory(path, ec)) {
            return absl::InvalidArgumentError(util::StrCat(
                "repo_path ", req.repo_path(), ": not a directory on the coordinator's machine"));
          }
          pinned = git::PinCheckout(path, pin);
          display = path.string();
        } else {
          pinned = git::FetchAndPin(req.git_url(), req.git_ref(), cache_dir, pin);
          display = util::StrCat(req.git_url(), req.git_ref().empty() ? "" : "@", req.git_ref());
        }
        if (!pinned.ok()) return pinned.status();
        git::GitSource source(pinned->repo, pinned->ttxla_commit);
        inventory::LoadOptions options;
        options.max_file_bytes = max_file_bytes;
        auto inv = inventory::LoadInventory(source, options);
        if (!inv.ok()) return inv.status();
        SweepInput in;
        in.repo = display;
        in.ttxla_commit = pinned->ttxla_commit;
        in.forge_commit = pinned->forge_commit;
        in.forge_gitlink = pinned->forge_gitlink;
        in.forge_source = std::string(git::ForgeSourceName(pinned->forge_source));
        in.notes = pinned->notes;
        in.agent_repo_url = !req.git_url().empty()        ? req.git_url()
                            : !pinned->origin_url.empty() ? pinned->origin_url
                                                          : pinned->repo.string();
        in.inventory = std::move(*inv);
        constexpr std::size_t kMaxDurationsBytes = 64 << 20;
        if (auto d = source.Read(".test_durations", kMaxDurationsBytes); d.ok()) {
          in.checkout_durations = std::move(*d);
        } else if (!absl::IsNotFound(d.status())) {
          in.notes.push_back(util::StrCat("the checkout's .test_durations was not read: ",
                                          util::MessageOf(d.status())));
        }
        // The rules' policy, learned from the history behind the commit.
        const bool rules = !req.nightly().empty() || req.recheck_skipped();
        if (rules && !req.nightly_options().no_learn()) {
          auto learned = nightly::LearnFromCheckout(git::Git(pinned->repo), pinned->ttxla_commit);
          if (learned.ok()) {
            in.learned_policy = std::move(learned->learned.policy);
            in.learned_from = learned->Describe();
          } else {
            in.notes.push_back(
                util::StrCat("nightly policy: the defaults, the checkout's history was not read: ",
                             util::MessageOf(learned.status())));
          }
        }
        // Incremental sweeps compare what every result depends on (docs/farm.md).
        auto forge = git::ForgeRepo(pinned->repo, pinned->ttxla_commit, pinned->forge_commit,
                                    req.git_url(), cache_dir);
        auto trees = forge.ok() ? ReadInputTrees(git::Git(pinned->repo), pinned->ttxla_commit,
                                                 git::Git(*forge), pinned->forge_commit)
                                : absl::StatusOr<InputTrees>(forge.status());
        if (trees.ok()) {
          in.inputs = std::move(*trees);
        } else {
          in.notes.push_back(util::StrCat(
              "input hashes not recorded (a later incremental sweep cannot carry from this one): ",
              util::MessageOf(trees.status())));
        }
        return in;
      };
}

}  // namespace triage::coord
