// A blocking TCP connection by a deadline, and whole frames over it: what the collector uses to
// reach its aggregator (or relay), a relay its parent, and the load generator an aggregator.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/wire.h"

namespace commprof {

// Splits "host:port"; brackets allowed around IPv6 hosts.
bool SplitHostPort(const std::string& address, std::string& host, std::string& port);

// A connected, blocking TCP socket (close-on-exec, TCP_NODELAY) to `address` (host:port) by
// `deadline` (steady ns). Errors name `what` ("aggregator", "parent aggregator") and the address.
Result<int> ConnectTcp(const std::string& address, uint64_t deadline, const char* what);

// Writes all of `bytes` to a blocking socket (no SIGPIPE); false when the connection failed.
bool SendAll(int fd, std::span<const uint8_t> bytes);
// Reads one whole frame (header checked, then its payload) from a blocking socket; an error when
// the connection ended or the header is invalid.
Status ReadFrame(int fd, wire::FrameHeader& header, std::vector<uint8_t>& payload);

}  // namespace commprof
