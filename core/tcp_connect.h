// A blocking TCP connection by a deadline: what the collector uses to reach its aggregator (or
// relay), a relay its parent, and the load generator an aggregator.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace commprof {

// Splits "host:port"; brackets allowed around IPv6 hosts.
bool SplitHostPort(const std::string& address, std::string& host, std::string& port);

// A connected, blocking TCP socket (close-on-exec, TCP_NODELAY) to `address` (host:port) by
// `deadline` (steady ns). Errors name `what` ("aggregator", "parent aggregator") and the address.
Result<int> ConnectTcp(const std::string& address, uint64_t deadline, const char* what);

}  // namespace commprof
