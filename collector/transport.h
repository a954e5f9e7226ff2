// Where the shipper's frames go: a TCP connection to the aggregator, or a spool file when the
// aggregator cannot be reached. Both receive the same frames.
//
// The runtime is given a TransportFactory rather than opening sockets and files itself, so a test
// can hand its frames to an in-process aggregator or capture them, with no network in between.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/config.h"
#include "core/status.h"
#include "core/tcp_connect.h"
#include "core/wire.h"

namespace commprof {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual Status Send(std::span<const uint8_t> bytes) = 0;
  // Reads one whole frame within timeout_ms (TCP only: a spool has nothing to answer).
  virtual Status Receive(wire::FrameHeader& header, std::vector<uint8_t>& payload, uint32_t timeout_ms) = 0;
  // A whole frame the peer has already sent, without waiting: false when there is none (yet).
  virtual Result<bool> TryReceive(wire::FrameHeader& /*header*/, std::vector<uint8_t>& /*payload*/) { return false; }
  // True when the peer acknowledges stored batches (an aggregator over TCP); a spool never does.
  virtual bool acknowledges() const { return false; }
  // True once a Send failed because the peer took nothing for COMMPROF_SEND_TIMEOUT_MS.
  virtual bool congested() const { return false; }
  virtual const char* name() const = 0;
};

// Where a runtime's shipper gets its transports from. Called on the shipper thread only.
class TransportFactory {
 public:
  virtual ~TransportFactory() = default;
  // A link to the aggregator, which has accepted `hello_frame`; an error says why there is none
  // (the shipper then spools, logging the message).
  virtual Result<std::unique_ptr<Transport>> Connect(std::span<const uint8_t> hello_frame) = 0;
  // The fallback: a spool that starts with `hello_frame`; `path_out` names it for the log.
  virtual Result<std::unique_ptr<Transport>> OpenSpool(const wire::Hello& hello, std::span<const uint8_t> hello_frame,
                                                       std::string* path_out) = 0;
};

// The production factory: TCP to config.aggregator within config.connect_timeout_ms (an error
// when no aggregator is configured), spool files under config.spool_dir.
std::unique_ptr<TransportFactory> MakeNetworkTransports(const Config& config);

// Both take the hello as a ready frame, signed once on the thread that starts the runtime with the
// spool proof (no nonce). Over TCP the hello must instead prove the secret over the aggregator's
// per-connection challenge, so ConnectToAggregator re-signs it per connection (wire::ResignHello):
// that HMAC is computed without OpenSSL, whose exit-time cleanup may already have run when a short
// program ends while the shipper is still connecting.

// Connects to host:port, reads the aggregator's challenge, sends the hello signed over it with
// `secret`, and waits for the aggregator's acceptance. A connection the aggregator closes before
// its challenge (its connection caps) is retried with back-off within timeout_ms.
// `send_timeout_ms` (0: none): a Send that finds the aggregator taking nothing for that long fails,
// and the transport says congested().
Result<std::unique_ptr<Transport>> ConnectToAggregator(const std::string& address, std::span<const uint8_t> hello_frame,
                                                       std::string_view secret, uint32_t timeout_ms,
                                                       uint32_t send_timeout_ms = 0);

// Creates DIR (and parents, mode 0700) and the rank's spool file in it (named after `hello`,
// mode 0600), starting with the hello frame.
Result<std::unique_ptr<Transport>> OpenSpool(const std::string& dir, const wire::Hello& hello,
                                             std::span<const uint8_t> hello_frame, std::string* path_out);

}  // namespace commprof
