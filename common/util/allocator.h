#pragma once

#include <string>

namespace triage::util {

// The malloc the process runs on, e.g. "jemalloc 5.3.0-0-g54eaed1d8b56…". The coordinator and
// farm_bench link jemalloc (its per-thread caches cost gRPC and protobuf less CPU than glibc's
// malloc: docs/bench-farm.md); calling this also keeps the linker from dropping it.
std::string AllocatorName();

}  // namespace triage::util
