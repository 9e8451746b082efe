#include "common/git/git.h"

#include <filesystem>
#include <string>
#include <vector>

#include "common/inventory/inventory.h"
#include "common/process/process.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::git {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kYamlPath[] =
    "tests/runner/test_config/torch/test_config_inference_single_device.yaml";
constexpr char kYaml[] =
    "test_config:\n"
    "  a/pytorch-A-single_device-inference:\n"
    "    status: EXPECTED_PASSING\n"
    "  b/pytorch-B-single_device-inference:\n"
    "    status: KNOWN_FAILURE_XFAIL\n"
    "    reason: \"boom\"\n";

// Runs git for the test's own setup, isolated from the user's configuration.
std::string Sh(const fs::path& dir, std::vector<std::string> args) {
  process::RunOptions options;
  options.argv = testing::GitTestArgv(dir, args);
  options.env = testing::GitTestEnv();
  options.timeout = std::chrono::seconds(60);
  auto r = process::Run(options);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  EXPECT_TRUE(r->ok()) << util::StrJoin(args, " ") << ": " << r->Describe() << "\n" << r->output;
  return std::string(util::TrimWhitespace(r->output));
}

std::string Commit(const fs::path& dir, const std::string& message) {
  Sh(dir, {"add", "-A"});
  Sh(dir, {"commit", "-q", "-m", message});
  return Sh(dir, {"rev-parse", "HEAD"});
}

// A tt-xla-shaped repository with its tt_forge_models submodule.
class GitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    forge_ = tmp_.path() / "forge-upstream";
    ttxla_ = tmp_.path() / "ttxla-upstream";
    fs::create_directories(forge_);
    fs::create_directories(ttxla_);
    Sh(forge_, {"init", "-q"});
    testing::WriteFileOrDie(forge_ / "a" / "pytorch" / "loader.py", "class ModelLoader:\n  pass\n");
    testing::WriteFileOrDie(forge_ / "training_utils.py", "# registry\n");
    forge_sha_ = Commit(forge_, "forge 1");

    Sh(ttxla_, {"init", "-q"});
    testing::WriteFileOrDie(ttxla_ / kYamlPath, kYaml);
    testing::WriteFileOrDie(ttxla_ / "tests" / "runner" / "conftest.py", "# conftest\n");
    testing::WriteFileOrDie(ttxla_ / "README.md", "tt-xla\n");
    testing::WriteFileOrDie(ttxla_ / "data.bin", std::string("\0\x01\xff\0binary\n\0", 12));
    Sh(ttxla_, {"submodule", "add", "-q", forge_.string(), "third_party/tt_forge_models"});
    ttxla_sha_ = Commit(ttxla_, "tt-xla 1");
  }

  testing::TempDir tmp_;
  fs::path forge_, ttxla_;
  std::string forge_sha_, ttxla_sha_;
};

TEST_F(GitTest, RevParse) {
  Git git(ttxla_);
  EXPECT_EQ(git.repo(), ttxla_);
  auto head = git.RevParse("HEAD");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(*head, ttxla_sha_);
  EXPECT_EQ(head->size(), 40u);
  EXPECT_EQ(*git.RevParse("main"), ttxla_sha_);
  EXPECT_EQ(*git.RevParse(ttxla_sha_.substr(0, 10)), ttxla_sha_);

  auto unknown = git.RevParse("no-such-branch");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::IsNotFound(unknown.status())) << unknown.status();
  EXPECT_THAT(util::MessageOf(unknown.status()), HasSubstr("no-such-branch"));

  auto option = git.RevParse("--all");
  EXPECT_TRUE(absl::IsInvalidArgument(option.status())) << option.status();
}

TEST_F(GitTest, SubmoduleCommit) {
  Git git(ttxla_);
  auto sha = git.SubmoduleCommit(ttxla_sha_, "third_party/tt_forge_models");
  ASSERT_TRUE(sha.ok()) << sha.status();
  EXPECT_EQ(*sha, forge_sha_);
  EXPECT_EQ(*git.SubmoduleCommit("HEAD", "third_party/tt_forge_models/"), forge_sha_);

  auto dir = git.SubmoduleCommit(ttxla_sha_, "tests");
  ASSERT_FALSE(dir.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(dir.status())) << dir.status();
  EXPECT_THAT(util::MessageOf(dir.status()), HasSubstr("not a submodule"));

  auto file = git.SubmoduleCommit(ttxla_sha_, "README.md");
  EXPECT_TRUE(absl::IsFailedPrecondition(file.status())) << file.status();

  auto missing = git.SubmoduleCommit(ttxla_sha_, "third_party/other");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(util::MessageOf(missing.status()), HasSubstr("third_party/other"));
}

TEST_F(GitTest, Show) {
  Git git(ttxla_);
  auto yaml = git.Show(ttxla_sha_, kYamlPath, 1 << 20);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(*yaml, kYaml);

  auto binary = git.Show(ttxla_sha_, "data.bin", 1 << 20);
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_EQ(*binary, std::string("\0\x01\xff\0binary\n\0", 12));

  auto exact = git.Show(ttxla_sha_, "data.bin", 12);
  EXPECT_TRUE(exact.ok()) << exact.status();
  auto too_big = git.Show(ttxla_sha_, "data.bin", 11);
  ASSERT_FALSE(too_big.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(too_big.status())) << too_big.status();

  auto missing = git.Show(ttxla_sha_, "no/such/file", 100);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(util::MessageOf(missing.status()), HasSubstr("no/such/file"));

  auto bad_rev = git.Show(std::string(40, '0'), "README.md", 100);
  ASSERT_FALSE(bad_rev.ok());
  EXPECT_THAT(util::MessageOf(bad_rev.status()), HasSubstr("unknown revision"));

  auto directory = git.Show(ttxla_sha_, "tests", 1 << 20);
  EXPECT_TRUE(absl::IsFailedPrecondition(directory.status())) << directory.status();
}

TEST_F(GitTest, ListFiles) {
  Git git(ttxla_);
  auto tests = git.ListFiles(ttxla_sha_, "tests");
  ASSERT_TRUE(tests.ok()) << tests.status();
  EXPECT_THAT(*tests, ElementsAre("tests/runner/conftest.py", kYamlPath));

  auto all = git.ListFiles(ttxla_sha_, "");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(*all, ElementsAre(".gitmodules", "README.md", "data.bin", "tests/runner/conftest.py",
                                kYamlPath))
      << "sorted, recursive, without the submodule";

  EXPECT_EQ(*git.ListFiles(ttxla_sha_, "tests/runner/test_config/"),
            std::vector<std::string>{kYamlPath});
  auto missing = git.ListFiles(ttxla_sha_, "nope");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  auto prefix_only = git.ListFiles(ttxla_sha_, "test");
  EXPECT_TRUE(absl::IsNotFound(prefix_only.status())) << "a name prefix is not a directory";
}

TEST_F(GitTest, ObjectIdsListTreesBlobsAndTheSubmodule) {
  Git git(ttxla_);
  auto ids = git.ObjectIds(ttxla_sha_);
  ASSERT_TRUE(ids.ok()) << ids.status();
  auto rev = [&](const std::string& spec) {
    auto out = git.Run({"rev-parse", spec});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? std::string(util::TrimWhitespace(*out)) : "";
  };
  EXPECT_EQ(ids->at("").type, "tree");
  EXPECT_EQ(ids->at("").id, rev(ttxla_sha_ + "^{tree}"));
  EXPECT_EQ(ids->at("tests/runner").type, "tree");
  EXPECT_EQ(ids->at("tests/runner").id, rev(ttxla_sha_ + ":tests/runner"));
  EXPECT_EQ(ids->at(kYamlPath).type, "blob");
  EXPECT_EQ(ids->at(kYamlPath).id, rev(ttxla_sha_ + ":" + kYamlPath));
  EXPECT_EQ(ids->at(std::string(kForgeSubmodulePath)).type, "commit");
  EXPECT_EQ(ids->at(std::string(kForgeSubmodulePath)).id, forge_sha_);
  EXPECT_TRUE(absl::IsNotFound(git.ObjectIds(std::string(40, '1')).status()));
}

TEST_F(GitTest, HasCommit) {
  Git git(ttxla_);
  EXPECT_TRUE(*git.HasCommit(ttxla_sha_));
  EXPECT_FALSE(*git.HasCommit(std::string(40, '1')));
  EXPECT_FALSE(*git.HasCommit(forge_sha_)) << "the submodule's commits live in its own repo";
  EXPECT_FALSE(Git(tmp_.path()).HasCommit(ttxla_sha_).ok()) << "not a repository";
}

TEST_F(GitTest, RemoteUrl) {
  EXPECT_EQ(*Git(ttxla_).RemoteUrl(), "");
  const fs::path clone = tmp_.path() / "clone";
  Sh(tmp_.path(), {"clone", "-q", ttxla_.string(), clone.string()});
  EXPECT_EQ(*Git(clone).RemoteUrl("origin"), ttxla_.string());
  EXPECT_EQ(*Git(clone).RemoteUrl("upstream"), "");
}

TEST_F(GitTest, NotARepositoryIsClear) {
  const fs::path plain = tmp_.path() / "plain";
  fs::create_directories(plain);
  auto r = Git(plain).RevParse("HEAD");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_THAT(util::MessageOf(r.status()), HasSubstr("not a git repository"));

  auto missing = Git(tmp_.path() / "missing").Run({"status"});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(util::MessageOf(missing.status()), HasSubstr("missing"));
}

TEST_F(GitTest, RunReportsCommandAndStderr) {
  auto r = Git(ttxla_).Run({"log", "--no-such-option"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(util::MessageOf(r.status()), HasSubstr("git -C " + ttxla_.string() + " log"));
  EXPECT_THAT(util::MessageOf(r.status()), HasSubstr("no-such-option"));

  auto out = Git(ttxla_).Run({"log", "-1", "--format=%s"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "tt-xla 1\n");
}

TEST_F(GitTest, GitSourceReadsTheCommitNotTheWorkingTree) {
  GitSource source(ttxla_, ttxla_sha_);
  EXPECT_EQ(source.Describe(), ttxla_.string() + "@" + ttxla_sha_.substr(0, 12));
  // Later edits to the working tree do not matter.
  testing::WriteFileOrDie(ttxla_ / kYamlPath, "test_config:\n  broken: [\n");
  testing::WriteFileOrDie(ttxla_ / "tests/runner/test_config/torch/new.yaml", "test_config:\n");
  auto inv = inventory::LoadInventory(source);
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_EQ(inv->documents.size(), 1u);
  EXPECT_EQ(inv->documents[0].path(), kYamlPath);
  EXPECT_EQ(inv->TestEntries().size(), 2u);
  EXPECT_TRUE(inv->ok());

  fs::remove_all(ttxla_ / "tests");
  auto again = inventory::LoadInventory(source);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->TestEntries().size(), 2u);

  auto listed = source.List("tests/runner", ".py");
  ASSERT_TRUE(listed.ok());
  EXPECT_THAT(listed->files, ElementsAre("tests/runner/conftest.py"));
}

// The key grammar is the commit's runner's, read like the test-config files.
TEST_F(GitTest, GitSourceReadsTheCommitsRunner) {
  const fs::path runner = ttxla_ / inventory::kRunnerPath;
  testing::WriteFileOrDie(
      runner,
      "@pytest.mark.parametrize(\"run_mode\", [pytest.param(0, id=\"inference\")])\n"
      "@pytest.mark.parametrize(\"op_by_op\", [None, 1], ids=[\"full\", \"op_by_op_torch\"])\n"
      "@pytest.mark.parametrize(\"parallelism\", [pytest.param(0, id=\"single_device\")])\n"
      "@pytest.mark.parametrize(\"test_entry\", entries, ids=entry_id)\n"
      "def test_all_models_torch(test_entry, run_mode, op_by_op, parallelism):\n"
      "    pass\n");
  testing::WriteFileOrDie(ttxla_ / kYamlPath,
                          "test_config:\n  a/pytorch-X-single_device-full-inference:\n"
                          "    status: EXPECTED_PASSING\n");
  const std::string sha = Commit(ttxla_, "op by op");
  fs::remove(runner);
  auto inv = inventory::LoadInventory(GitSource(ttxla_, sha));
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_TRUE(inv->ok()) << inv->diagnostics.front().ToString();
  EXPECT_EQ(inv->grammar.source, "tests/runner/test_models.py:5");
  EXPECT_EQ(inv->grammar.Pattern(),
            "<model_path>/<framework>[-<variant>]-<parallelism>-<op_by_op>-<run_mode>");
  // The first commit has no runner: the built-in grammar, without a diagnostic.
  auto first = inventory::LoadInventory(GitSource(ttxla_, ttxla_sha_));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->grammar.built_in());
  EXPECT_TRUE(first->diagnostics.empty());
}

// In a commit, a link is read as the test-config file it names; one that leaves the repository is
// an error naming it (never the link text parsed as YAML).
TEST_F(GitTest, GitSourceSymlinks) {
  const fs::path config = ttxla_ / "tests/runner/test_config";
  fs::create_directories(config / "jax");
  fs::create_symlink("../torch/test_config_inference_single_device.yaml",
                     config / "jax/test_config_inference_single_device.yaml");
  fs::create_symlink("../../../../../etc/passwd", config / "torch/escape.yaml");
  fs::create_symlink("/etc", config / "etc");
  fs::create_symlink("../../conftest.py", config / "torch/conftest.yaml");
  const std::string sha = Commit(ttxla_, "links");
  GitSource source(ttxla_, sha);
  auto inv = inventory::LoadInventory(source);
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_EQ(inv->documents.size(), 2u);
  EXPECT_EQ(inv->documents[0].path(),
            "tests/runner/test_config/jax/test_config_inference_single_device.yaml");
  EXPECT_EQ(inv->documents[0].entries().size(), 2u);
  std::vector<std::string> errors;
  for (const auto& d : inv->diagnostics) errors.push_back(d.ToString());
  EXPECT_THAT(errors,
              ElementsAre("tests/runner/test_config/etc: symbolic link to '/etc', outside the "
                          "repository; not read",
                          "tests/runner/test_config/torch/conftest.yaml: symbolic link to "
                          "'../../conftest.py', which is not a regular file listed under "
                          "tests/runner/test_config/; not read",
                          "tests/runner/test_config/torch/escape.yaml: symbolic link to "
                          "'../../../../../etc/passwd', outside the repository; not read"));
}

TEST_F(GitTest, GitSourceWithoutTestConfig) {
  GitSource source(forge_, forge_sha_);
  auto inv = inventory::LoadInventory(source);
  ASSERT_FALSE(inv.ok());
  EXPECT_TRUE(absl::IsNotFound(inv.status())) << inv.status();
  EXPECT_THAT(util::MessageOf(inv.status()), HasSubstr(forge_sha_.substr(0, 12)));
}

TEST_F(GitTest, PinCheckout) {
  auto pinned = PinCheckout(ttxla_);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->ttxla_commit, ttxla_sha_);
  EXPECT_EQ(pinned->forge_commit, forge_sha_);
  EXPECT_EQ(pinned->origin_url, "");
  EXPECT_EQ(pinned->repo, ttxla_);

  EXPECT_EQ(pinned->forge_gitlink, forge_sha_);
  EXPECT_TRUE(pinned->notes.empty());

  // What the submodule has checked out counts, and the pin says it differs from the gitlink.
  const fs::path clone = tmp_.path() / "clone";
  Sh(tmp_.path(), {"clone", "-q", ttxla_.string(), clone.string()});
  Sh(clone, {"submodule", "update", "-q", "--init"});
  testing::WriteFileOrDie(clone / "third_party/tt_forge_models/extra.py", "x = 1\n");
  const std::string local = Commit(clone / "third_party/tt_forge_models", "local forge commit");
  auto from_clone = PinCheckout(clone);
  ASSERT_TRUE(from_clone.ok()) << from_clone.status();
  EXPECT_EQ(from_clone->forge_commit, local);
  EXPECT_EQ(from_clone->forge_gitlink, forge_sha_);
  EXPECT_EQ(from_clone->forge_source, ForgeSource::kCheckout);
  ASSERT_EQ(from_clone->notes.size(), 1u);
  EXPECT_THAT(from_clone->notes[0], HasSubstr(forge_sha_.substr(0, 12)));
  EXPECT_EQ(from_clone->origin_url, ttxla_.string());

  // --forge-ref names another commit of the submodule.
  auto by_ref = PinCheckout(clone, {.forge_ref = forge_sha_});
  ASSERT_TRUE(by_ref.ok()) << by_ref.status();
  EXPECT_EQ(by_ref->forge_commit, forge_sha_);
  EXPECT_EQ(by_ref->forge_source, ForgeSource::kRef);
  EXPECT_TRUE(by_ref->notes.empty());

  // Local changes in either repository are refused, by path, unless allowed.
  testing::WriteFileOrDie(clone / "third_party/tt_forge_models/extra.py", "x = 2\n");
  testing::WriteFileOrDie(clone / "untracked.txt", "u\n");
  auto dirty = PinCheckout(clone);
  ASSERT_FALSE(dirty.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(dirty.status())) << dirty.status();
  EXPECT_THAT(util::MessageOf(dirty.status()), HasSubstr("tt_forge_models: extra.py"));
  EXPECT_THAT(util::MessageOf(dirty.status()), HasSubstr("tt-xla: untracked.txt"));
  auto allowed = PinCheckout(clone, {.allow_dirty = true});
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_EQ(allowed->forge_commit, local);
  EXPECT_THAT(allowed->notes.back(), HasSubstr("not part of the sweep"));

  auto not_ttxla = PinCheckout(forge_);
  ASSERT_FALSE(not_ttxla.ok());
  EXPECT_THAT(util::MessageOf(not_ttxla.status()), HasSubstr("third_party/tt_forge_models"));
  EXPECT_THAT(util::MessageOf(not_ttxla.status()), HasSubstr(forge_.string()));
}

TEST_F(GitTest, FetchAndPin) {
  const fs::path cache = tmp_.path() / "cache";
  const std::string url = "file://" + ttxla_.string();
  auto first = FetchAndPin(url, "", cache);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->ttxla_commit, ttxla_sha_);
  EXPECT_EQ(first->forge_commit, forge_sha_);
  EXPECT_EQ(first->origin_url, url);
  EXPECT_EQ(first->repo, cache / CacheNameForUrl(url));
  EXPECT_TRUE(fs::exists(first->repo / "HEAD"));
  EXPECT_EQ(*Git(first->repo).Run({"rev-parse", "--is-bare-repository"}), "true\n");

  // A new upstream commit on main and a tag: the second call fetches.
  testing::WriteFileOrDie(ttxla_ / "README.md", "tt-xla v2\n");
  const std::string second_sha = Commit(ttxla_, "tt-xla 2");
  Sh(ttxla_, {"tag", "v1", ttxla_sha_});
  auto second = FetchAndPin(url, "main", cache);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->ttxla_commit, second_sha);
  EXPECT_EQ(second->repo, first->repo);
  EXPECT_EQ(FetchAndPin(url, "v1", cache)->ttxla_commit, ttxla_sha_);
  EXPECT_EQ(FetchAndPin(url, ttxla_sha_, cache)->ttxla_commit, ttxla_sha_);

  // The committed files are readable from the cache.
  GitSource source(second->repo, second->ttxla_commit);
  auto inv = inventory::LoadInventory(source);
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->TestEntries().size(), 2u);

  auto unknown = FetchAndPin(url, "no-such-branch", cache);
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::IsNotFound(unknown.status())) << unknown.status();
  EXPECT_THAT(util::MessageOf(unknown.status()), HasSubstr("no-such-branch"));
}

TEST_F(GitTest, FetchAndPinWithAForgeRef) {
  const fs::path cache = tmp_.path() / "cache";
  const std::string url = "file://" + ttxla_.string();
  // An uplift on a branch of tt-forge-models that tt-xla does not record.
  Sh(forge_, {"checkout", "-q", "-b", "uplift"});
  testing::WriteFileOrDie(forge_ / "training_utils.py", "# registry v2\n");
  const std::string uplift = Commit(forge_, "forge uplift");
  auto pinned = FetchAndPin(url, "", cache, {.forge_ref = "uplift"});
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->ttxla_commit, ttxla_sha_);
  EXPECT_EQ(pinned->forge_commit, uplift);
  EXPECT_EQ(pinned->forge_gitlink, forge_sha_);
  EXPECT_EQ(pinned->forge_source, ForgeSource::kRef);
  ASSERT_EQ(pinned->notes.size(), 1u);
  EXPECT_THAT(pinned->notes[0], HasSubstr("--forge-ref"));
  // The URL came from .gitmodules; the forge is cached beside tt-xla.
  auto forge_url = ForgeUrl(Git(pinned->repo), ttxla_sha_, url);
  ASSERT_TRUE(forge_url.ok()) << forge_url.status();
  EXPECT_EQ(*forge_url, forge_.string());
  EXPECT_TRUE(fs::exists(cache / CacheNameForUrl(*forge_url) / "HEAD"));

  // Without it: the gitlink. An unknown ref names itself.
  EXPECT_EQ(FetchAndPin(url, "", cache)->forge_commit, forge_sha_);
  auto unknown = FetchAndPin(url, "", cache, {.forge_ref = "no-such-uplift"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(util::MessageOf(unknown.status()), HasSubstr("--forge-ref"));
  EXPECT_THAT(util::MessageOf(unknown.status()), HasSubstr("no-such-uplift"));
}

TEST_F(GitTest, FetchAndPinRejectsBadUrls) {
  const fs::path cache = tmp_.path() / "cache";
  for (const char* url : {"", "-uhttps://x", "--upload-pack=touch /tmp/x",
                          "ext::sh -c touch% /tmp/x", "EXT::sh", "fd::3", "https://host/a\nb"}) {
    auto r = FetchAndPin(url, "", cache);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << url << ": " << r.status();
  }
  auto missing = FetchAndPin("file://" + (tmp_.path() / "nope").string(), "", cache);
  ASSERT_FALSE(missing.ok());
  // Short: the URL and what git said, not the command line with the cache's paths.
  const std::string said = util::MessageOf(missing.status());
  EXPECT_EQ(said.rfind("cannot fetch file://" + (tmp_.path() / "nope").string() + ": fatal: ", 0),
            0u)
      << said;
  EXPECT_THAT(said, HasSubstr("(git exit 128)"));
  EXPECT_THAT(said, Not(HasSubstr("--bare")));
  EXPECT_THAT(said, Not(HasSubstr(cache.string())));
  EXPECT_LT(said.size(), 300u) << said;
  // A failed clone leaves nothing behind that a later call could mistake for a cache.
  for (const auto& entry : fs::directory_iterator(cache)) ADD_FAILURE() << entry.path();

  auto bad_ref = FetchAndPin("file://" + ttxla_.string(), "--all", cache);
  EXPECT_TRUE(absl::IsInvalidArgument(bad_ref.status())) << bad_ref.status();
}

TEST(CacheNameTest, StableSanitizedAndCredentialFree) {
  const std::string name = CacheNameForUrl("https://token123@github.com/tenstorrent/tt-xla.git");
  EXPECT_EQ(name, CacheNameForUrl("https://token123@github.com/tenstorrent/tt-xla.git"));
  EXPECT_TRUE(name.starts_with("github.com_tenstorrent_tt-xla-")) << name;
  EXPECT_TRUE(name.ends_with(".git")) << name;
  EXPECT_EQ(name.find("token123"), std::string::npos);
  EXPECT_NE(name, CacheNameForUrl("https://github.com/tenstorrent/tt-xla.git"));
  const std::string odd = CacheNameForUrl("../../etc/passwd");
  EXPECT_EQ(odd.find('/'), std::string::npos);
  EXPECT_FALSE(odd.starts_with('.'));
}

}  // namespace
}  // namespace triage::git
