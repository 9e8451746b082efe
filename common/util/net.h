#pragma once

#include <string>
#include <string_view>

namespace triage::util {

// Why a listener cannot bind address ("host:port", "[v6]:port", ":port"), found by trying it
// once with a plain socket (SO_REUSEADDR, no port sharing): "address in use (another process
// holds it)", "address not available on this host", "permission denied ...", "cannot resolve
// ...". "" when the bind works now. For error messages after a server failed to start; it
// keeps nothing open.
std::string BindProblem(std::string_view address);

}  // namespace triage::util
