#include "coordinator/planning/nightly_chunks.h"

#include <string>
#include <utility>

#include "google/protobuf/io/coded_stream.h"

namespace triage::coord {
namespace {

// What a repeated element adds to its run's encoding: the field's tag (one byte for fields
// 1..15), the length and the element.
std::size_t ElementBytes(std::size_t size) {
  return 1 + google::protobuf::io::CodedOutputStream::VarintSize64(size) + size;
}

// The chunk's own fields around its run: begin_run, run_records, the run's tag and length.
constexpr std::size_t kEnvelopeBytes = 32;

}  // namespace

bool ChunkNightlyRun(v1::NightlyRun run, std::size_t max_bytes,
                     const std::function<bool(v1::NightlyChunk& chunk)>& send) {
  const std::size_t budget = max_bytes > 2 * kEnvelopeBytes ? max_bytes - kEnvelopeBytes : 1;
  google::protobuf::RepeatedPtrField<std::string> files;
  google::protobuf::RepeatedPtrField<std::string> problems;
  google::protobuf::RepeatedPtrField<v1::NightlyRecord> records;
  files.Swap(run.mutable_files());
  problems.Swap(run.mutable_problems());
  records.Swap(run.mutable_records());
  v1::NightlyChunk chunk;
  chunk.set_begin_run(true);
  chunk.set_run_records(records.size());
  // The header: every field of the run but the three lists.
  *chunk.mutable_run() = std::move(run);
  std::size_t size = chunk.run().ByteSizeLong();
  bool pending = true;  // the chunk holds something not yet sent (the header at first)

  // Sends the chunk when one more element of `bytes` would pass the budget.
  auto make_room = [&](std::size_t bytes) {
    if (!pending || size + bytes <= budget) return true;
    if (!send(chunk)) return false;
    chunk.Clear();
    size = 0;
    pending = false;
    return true;
  };
  for (auto& file : files) {
    const std::size_t bytes = ElementBytes(file.size());
    if (!make_room(bytes)) return false;
    chunk.mutable_run()->add_files(std::move(file));
    size += bytes;
    pending = true;
  }
  for (auto& problem : problems) {
    const std::size_t bytes = ElementBytes(problem.size());
    if (!make_room(bytes)) return false;
    chunk.mutable_run()->add_problems(std::move(problem));
    size += bytes;
    pending = true;
  }
  for (auto& record : records) {
    const std::size_t bytes = ElementBytes(record.ByteSizeLong());
    if (!make_room(bytes)) return false;
    *chunk.mutable_run()->add_records() = std::move(record);
    size += bytes;
    pending = true;
  }
  return !pending || send(chunk);
}

}  // namespace triage::coord
