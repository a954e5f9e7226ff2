// Where the shipper's frames go: a TCP connection to the aggregator, or a spool file when the
// aggregator cannot be reached (DESIGN.md §5). Both receive the same frames.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"
#include "core/wire.h"

namespace commprof {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual Status Send(std::span<const uint8_t> bytes) = 0;
  // Reads one whole frame within timeout_ms (TCP only: a spool has nothing to answer).
  virtual Status Receive(wire::FrameHeader& header, std::vector<uint8_t>& payload, uint32_t timeout_ms) = 0;
  virtual const char* name() const = 0;
};

// Both take the hello as a ready frame: it is signed once, on the thread that starts the runtime,
// so the shipper thread never calls into OpenSSL (whose exit-time cleanup may already have run
// when a short program ends while the shipper is still connecting).

// Connects to host:port, sends the hello frame and waits for the aggregator's acceptance.
Result<std::unique_ptr<Transport>> ConnectToAggregator(const std::string& address, std::span<const uint8_t> hello_frame,
                                                       uint32_t timeout_ms);

// Creates DIR (and parents) and the rank's spool file in it (named after `hello`), starting
// with the hello frame.
Result<std::unique_ptr<Transport>> OpenSpool(const std::string& dir, const wire::Hello& hello,
                                             std::span<const uint8_t> hello_frame, std::string* path_out);

// Splits "host:port"; brackets allowed around IPv6 hosts.
bool SplitHostPort(const std::string& address, std::string& host, std::string& port);

}  // namespace commprof
