#pragma once

#include <string>
#include <string_view>

namespace triage::diff {

// The id git gives a file's content: the SHA-1 of "blob <size>\0<content>", as 40 lowercase hex
// digits (`git hash-object`). A patch's `index` line names the blobs by these ids, so that
// `git apply --3way` can find the preimage when the file moved on (docs/report.md, "The patches").
std::string GitBlobId(std::string_view content);

// The id of no blob ("0" x 40), for a new or deleted file's index line.
inline constexpr std::string_view kNullBlobId = "0000000000000000000000000000000000000000";

}  // namespace triage::diff
