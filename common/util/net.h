#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace triage::util {

// Why a listener cannot bind address ("host:port", "[v6]:port", ":port"), found by trying it
// once with a plain socket (SO_REUSEADDR, no port sharing): "address in use (another process
// holds it)", "address not available on this host", "permission denied ...", "cannot resolve
// ...". "" when the bind works now. For error messages after a server failed to start; it
// keeps nothing open.
std::string BindProblem(std::string_view address);

// A daemon's listeners, checked before it creates anything: the first one that cannot bind
// (BindProblem) or that repeats another's address (with a port other than 0), as one line
// naming its setting: "--control_address 127.0.0.1:7602: address in use (another process holds
// it)". "" when every one can listen now. Listeners with an empty address (off) are skipped.
struct Listener {
  std::string_view setting;  // "--control_address"
  std::string_view address;
};
std::string ListenProblem(std::initializer_list<Listener> listeners);

}  // namespace triage::util
