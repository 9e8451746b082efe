#include "common/util/net.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/util/strings.h"

namespace triage::util {

std::string BindProblem(std::string_view address) {
  std::string host;
  std::string port;
  if (address.starts_with("[")) {
    const auto close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return "not a host:port address";
    }
    host = std::string(address.substr(1, close - 1));
    port = std::string(address.substr(close + 2));
  } else {
    const auto colon = address.rfind(':');
    if (colon == std::string_view::npos) return "not a host:port address";
    host = std::string(address.substr(0, colon));
    port = std::string(address.substr(colon + 1));
  }
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos) {
    return StrCat("'", port, "' is not a port number");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return StrCat("cannot resolve '", host, "': ", gai_strerror(rc));
  }
  std::string problem;
  for (addrinfo* a = found; a != nullptr && problem.empty(); a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      switch (errno) {
        case EADDRINUSE:
          problem = "address in use (another process holds it)";
          break;
        case EADDRNOTAVAIL:
          problem = "address not available on this host";
          break;
        case EACCES:
          problem = "permission denied (ports below 1024 need privileges)";
          break;
        default:
          problem = std::strerror(errno);
      }
    }
    close(fd);
  }
  freeaddrinfo(found);
  return problem;
}

std::string ListenProblem(std::initializer_list<Listener> listeners) {
  for (auto it = listeners.begin(); it != listeners.end(); ++it) {
    if (it->address.empty()) continue;
    for (auto before = listeners.begin(); before != it; ++before) {
      if (before->address == it->address && !it->address.ends_with(":0")) {
        return StrCat(it->setting, " ", it->address, ": the same address as ", before->setting,
                      " (each listener needs its own port)");
      }
    }
    if (std::string problem = BindProblem(it->address); !problem.empty()) {
      return StrCat(it->setting, " ", it->address, ": ", problem);
    }
  }
  return "";
}

}  // namespace triage::util
