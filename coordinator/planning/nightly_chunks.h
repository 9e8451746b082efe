#pragma once

// Nightly runs cut into bounded messages for UploadNightly (docs/nightly.md, "How the runs reach
// the coordinator"): triagectl sends each run as chunks; the coordinator appends them
// (coordinator/planning/nightly_upload.h). Protobuf only, so triagectl links nothing of the
// coordinator.

#include <cstddef>
#include <functional>

#include "triage/v1/control.pb.h"

namespace triage::coord {

// What triagectl puts in one chunk: far below gRPC's 64 MiB message cap, and large enough that a
// week of nights goes in a few dozen messages.
inline constexpr std::size_t kNightlyChunkBytes = 4 << 20;

// Cuts run into chunks of at most max_bytes serialized each and gives them to send in order: the
// first with begin_run, run_records and the run's label, source, counts and started time, then
// its files, problems and records (a single file, problem or record larger than max_bytes goes
// alone in its chunk). The run's parts are moved into the chunks. send returns false when the
// stream broke: ChunkNightlyRun stops and returns false.
bool ChunkNightlyRun(v1::NightlyRun run, std::size_t max_bytes,
                     const std::function<bool(v1::NightlyChunk& chunk)>& send);

}  // namespace triage::coord
