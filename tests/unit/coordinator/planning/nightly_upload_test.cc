// Nightly runs in bounded messages (docs/nightly.md, "How the runs reach the coordinator"):
// ChunkNightlyRun keeps every chunk under its limit and NightlyUploads puts the runs back
// together byte for byte (the same digest), refusing what passes its limits by name.

#include "coordinator/planning/nightly_upload.h"

#include <string>
#include <vector>

#include "coordinator/planning/nightly_chunks.h"
#include "coordinator/planning/start_request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::coord {
namespace {

using ::testing::HasSubstr;

v1::NightlyRecord Record(int i, const std::string& arch, std::size_t message_bytes) {
  v1::NightlyRecord r;
  r.set_test_function("test_all_models_torch");
  r.set_key("m" + std::to_string(i) + "/pytorch-Base-single_device-inference");
  r.set_arch(arch);
  r.set_outcome(v1::NightlyRecord::FAILED);
  r.set_error_message(std::string(message_bytes, 'e'));
  r.set_failure(std::string(message_bytes, 'f'));
  r.set_bringup_status("FAILED_RUNTIME");
  r.set_source("n150/report.xml:" + std::to_string(10 * i + 3));
  r.set_duration_seconds(41.5);
  r.set_pcc(0.987);
  return r;
}

// One night of `per_arch` failing testcases on three archs, with 2 KB messages by default.
v1::NightlyRun Night(const std::string& label, int per_arch, std::size_t message_bytes = 2000) {
  v1::NightlyRun run;
  run.set_label(label);
  run.set_source("/runs/" + label);
  run.set_started_unix_ms(1795745624123);
  for (const std::string arch : {"n150", "p150", "n300"}) {
    run.add_files(arch + "/report.xml");
    for (int i = 0; i < per_arch; ++i) *run.add_records() = Record(i, arch, message_bytes);
  }
  run.set_testcases(run.records_size() + 7);
  run.set_not_model_tests(7);
  for (int i = 0; i < 120; ++i) run.add_problems("x.xml:" + std::to_string(i) + ": no tags");
  return run;
}

// The chunks ChunkNightlyRun makes of run.
std::vector<v1::NightlyChunk> Chunks(const v1::NightlyRun& run, std::size_t max_bytes) {
  std::vector<v1::NightlyChunk> out;
  EXPECT_TRUE(ChunkNightlyRun(run, max_bytes, [&](v1::NightlyChunk& c) {
    out.push_back(c);
    return true;
  }));
  return out;
}

TEST(ChunkNightlyRun, KeepsEveryChunkUnderTheLimitAndTheRunsDigest) {
  // A week's night of the bug report: 3,000 records of about 4 KB, 12 MB in one message.
  const v1::NightlyRun night = Night("2026-11-27", 1000);
  ASSERT_GT(night.ByteSizeLong(), 2 * kNightlyChunkBytes) << "several chunks at the default";
  for (const std::size_t limit : {kNightlyChunkBytes, std::size_t{64} << 10, std::size_t{5000}}) {
    SCOPED_TRACE(limit);
    const auto chunks = Chunks(night, limit);
    ASSERT_FALSE(chunks.empty());
    EXPECT_TRUE(chunks.front().begin_run());
    EXPECT_EQ(chunks.front().run_records(), 3000);
    EXPECT_EQ(chunks.front().run().label(), "2026-11-27");
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      EXPECT_LE(chunks[i].ByteSizeLong(), limit) << "chunk " << i;
      EXPECT_EQ(chunks[i].begin_run(), i == 0) << "chunk " << i;
      bytes += chunks[i].ByteSizeLong();
    }
    // Chunks are filled: at most one more than the bytes need.
    EXPECT_LE(chunks.size(), bytes / (limit - 4500) + 2);

    // Put back together by the coordinator: the same run, so the same digest.
    FakeClock clock;
    NightlyUploads uploads(&clock);
    auto id = uploads.Begin("ops");
    ASSERT_TRUE(id.ok()) << id.status();
    for (auto c : chunks) ASSERT_TRUE(uploads.Add(*id, c).ok());
    v1::NightlyChunk last;
    last.set_last(true);
    last.set_runs(1);
    ASSERT_TRUE(uploads.Add(*id, last).ok());
    auto done = uploads.Finish(*id);
    ASSERT_TRUE(done.ok()) << done.status();
    google::protobuf::RepeatedPtrField<v1::NightlyRun> original;
    *original.Add() = night;
    EXPECT_EQ(done->nightly_digest(), NightlyDigest(original));
    EXPECT_EQ(done->records(), 3000);
    EXPECT_EQ(done->runs(), 1);
    auto runs = uploads.Take(*id, "ops");
    ASSERT_TRUE(runs.ok()) << runs.status();
    ASSERT_EQ(runs->size(), 1);
    EXPECT_EQ(runs->Get(0).SerializeAsString(), night.SerializeAsString());
  }
}

TEST(ChunkNightlyRun, AnElementLargerThanTheLimitGoesAlone) {
  v1::NightlyRun run;
  run.set_label("big");
  *run.add_records() = Record(1, "n150", 10);
  *run.add_records() = Record(2, "n150", 30'000);  // 60 KB
  *run.add_records() = Record(3, "n150", 10);
  const auto chunks = Chunks(run, 16 << 10);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].run().records_size(), 1);
  EXPECT_EQ(chunks[1].run().records_size(), 1);
  EXPECT_GT(chunks[1].ByteSizeLong(), std::size_t{16} << 10);
  EXPECT_EQ(chunks[2].run().records_size(), 1);
}

TEST(ChunkNightlyRun, StopsWhenTheStreamBreaks) {
  int sent = 0;
  EXPECT_FALSE(
      ChunkNightlyRun(Night("n", 100), 64 << 10, [&](v1::NightlyChunk&) { return ++sent < 2; }));
  EXPECT_EQ(sent, 2);
}

// Uploads one run per entry of runs; the status of the first refusal (Add or Finish).
absl::Status Upload(NightlyUploads& uploads, const std::string& id,
                    const std::vector<v1::NightlyRun>& runs, std::size_t limit = 64 << 10) {
  for (const auto& run : runs) {
    absl::Status st;
    ChunkNightlyRun(run, limit, [&](v1::NightlyChunk& c) {
      st = uploads.Add(id, c);
      return st.ok();
    });
    if (!st.ok()) return st;
  }
  v1::NightlyChunk last;
  last.set_last(true);
  last.set_runs(runs.size());
  if (auto st = uploads.Add(id, last); !st.ok()) return st;
  return uploads.Finish(id).status();
}

TEST(NightlyUploads, RefusalsNameTheRunAndTheLimit) {
  FakeClock clock;
  NightlyUploadLimits limits;
  limits.max_records = 5000;
  limits.max_bytes = 40 << 20;
  NightlyUploads uploads(&clock, limits);

  auto a = uploads.Begin("ops");
  ASSERT_TRUE(a.ok());
  auto st = Upload(uploads, *a, {Night("night-1", 1000), Night("night-2", 1000)});
  EXPECT_TRUE(absl::IsResourceExhausted(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("nightly run 2 (night-2)"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("more than 5000 records"));
  EXPECT_EQ(uploads.held(), 0) << "a refused upload is dropped";
  EXPECT_EQ(uploads.held_bytes(), 0u);

  // Bytes: 3,000 records of 40 KB pass 40 MiB in the first run.
  auto b = uploads.Begin("ops");
  ASSERT_TRUE(b.ok());
  st = Upload(uploads, *b, {Night("fat", 1000, 20'000)});
  EXPECT_TRUE(absl::IsResourceExhausted(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("nightly run 1 (fat)"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("more than 40 MiB"));

  // Two uploads together pass the bytes the coordinator holds.
  auto c = uploads.Begin("ops");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(Upload(uploads, *c, {Night("one", 1000, 4000)}).ok());
  auto d = uploads.Begin("ci");
  ASSERT_TRUE(d.ok());
  st = Upload(uploads, *d, {Night("two", 1000, 4000)});
  EXPECT_TRUE(absl::IsResourceExhausted(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("nightly run 1 (two): with the other uploads"));
  EXPECT_EQ(uploads.held(), 1);

  // A record that does not check.
  auto e = uploads.Begin("ops");
  ASSERT_TRUE(e.ok());
  v1::NightlyRun bad = Night("bad-arch", 2);
  bad.mutable_records(4)->set_arch("n999");
  st = Upload(uploads, *e, {bad});
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("nightly run 1 (bad-arch)"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("unknown arch 'n999'"));
}

TEST(NightlyUploads, CountsAreChecked) {
  FakeClock clock;
  NightlyUploads uploads(&clock);
  // A run whose records are not all there.
  auto a = uploads.Begin("ops");
  ASSERT_TRUE(a.ok());
  auto chunks = Chunks(Night("short", 10), 64 << 10);
  chunks.front().set_run_records(31);
  for (auto& c : chunks) ASSERT_TRUE(uploads.Add(*a, c).ok());
  v1::NightlyChunk last;
  last.set_last(true);
  last.set_runs(1);
  auto st = uploads.Add(*a, last);
  EXPECT_THAT(std::string(st.message()), HasSubstr("nightly run 1 (short): 31 records announced"));
  // A stream that ends before its last chunk keeps nothing.
  auto b = uploads.Begin("ops");
  ASSERT_TRUE(b.ok());
  for (auto& c : Chunks(Night("cut", 10), 64 << 10)) ASSERT_TRUE(uploads.Add(*b, c).ok());
  EXPECT_THAT(std::string(uploads.Finish(*b).status().message()), HasSubstr("before its last"));
  EXPECT_EQ(uploads.held(), 0);
}

TEST(NightlyUploads, HeldForOneCallerABoundedTimeAndCount) {
  FakeClock clock;
  NightlyUploadLimits limits;
  limits.max_uploads = 2;
  NightlyUploads uploads(&clock, limits);
  auto a = uploads.Begin("ops");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(Upload(uploads, *a, {Night("n1", 5), Night("n2", 5)}).ok());
  auto b = uploads.Begin("ops");
  ASSERT_TRUE(b.ok());
  auto third = uploads.Begin("ops");
  EXPECT_TRUE(absl::IsResourceExhausted(third.status())) << third.status();
  EXPECT_THAT(std::string(third.status().message()), HasSubstr("2 nightly uploads already"));

  EXPECT_TRUE(absl::IsNotFound(uploads.Take(*a, "someone-else").status()));
  auto runs = uploads.Take(*a, "ops");
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ(runs->size(), 2);
  EXPECT_TRUE(absl::IsNotFound(uploads.Take(*a, "ops").status())) << "taken once";

  // b, being received, expires an hour after it began; a new upload can begin.
  clock.Advance(std::chrono::minutes(59));
  uploads.Expire();
  EXPECT_EQ(uploads.held(), 1);
  clock.Advance(std::chrono::minutes(1));
  uploads.Expire();
  EXPECT_EQ(uploads.held(), 0);
  v1::NightlyChunk c = Chunks(Night("late", 1), 64 << 10).front();
  EXPECT_TRUE(absl::IsNotFound(uploads.Add(*b, c)));
  EXPECT_TRUE(uploads.Begin("ops").ok());
}

}  // namespace
}  // namespace triage::coord
