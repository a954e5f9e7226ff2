// Setup shared by the unit tests: temporary directories, polling, a raw TCP client that speaks
// frames, hand-made
// profiles written through the real Hdf5Writer and the events they hold, reading a rank's events
// back, comparing events and taking a frame's payload.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "commprof/event.h"
#include "core/wire.h"

namespace commprof::test_support {

using Bytes = std::vector<uint8_t>;

// A fresh directory under the system temp dir ("<prefix>-XXXXXX"), removed with everything in it
// at destruction; path() is empty if it could not be made.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "commprof-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Polls `done` every 2 ms until it holds (true) or timeout_ms pass (false).
bool WaitFor(const std::function<bool()>& done, int timeout_ms = 10000);

// A blocking TCP client to 127.0.0.1:port with a 5 s receive timeout and TCP_NODELAY (small
// frames go out at once, no Nagle wait for the server's delayed ack). Unless told not to, it
// reads the server's challenge first (docs/wire-protocol.md): challenge() is its nonce, which a
// hello must be signed over (wire::AppendHello with the nonce).
class TcpClient {
 public:
  explicit TcpClient(uint16_t port, bool read_challenge = true);
  const std::optional<wire::Nonce>& challenge() const { return challenge_; }
  ~TcpClient() { Close(); }
  TcpClient(const TcpClient&) = delete;
  TcpClient& operator=(const TcpClient&) = delete;

  bool Send(const Bytes& b);
  bool ReadExactly(uint8_t* p, size_t n);

  // The next whole frame from the server (nullopt on EOF, timeout or a bad header).
  std::optional<std::pair<wire::FrameType, Bytes>> ReadFrame();

  // The hello-ack the server answers with (nullopt if none arrives).
  std::optional<wire::HelloAck> ReadAck();

  // True when the server closes the connection (EOF or reset) before the receive timeout.
  bool WaitClosedByPeer();

  // True when the server closes the connection (EOF or reset) before the receive timeout,
  // and false if it sends anything before that.
  bool WaitClosedByPeerWithoutAnswer();

  void Close();
  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::optional<wire::Nonce> challenge_;
};

// One rank of a hand-made profile: its events (local clock) and clock points (empty: no clock
// frame, so its model is the identity).
struct RankData {
  std::vector<commprof_event> events;
  std::vector<ClockPoint> points;
  std::vector<std::string> strings;  // its string table from id 0 (what name_id indexes); may be empty
  std::string host;                  // empty: "h<rank>"
};

// What a hand-made profile says about the job as a whole; the defaults write only the job id.
struct ProfileOptions {
  std::string job_id = "job-test";
  std::string command_line;
  uint64_t start_epoch_ns = 0;
  // Every rank's hello: its steady clock and UTC read together at its start.
  uint64_t start_steady_ns = 0;
  uint64_t start_utc_ns = 0;
  // Counters of every rank's bye (rank attributes), e.g. stacks_unique.
  std::vector<std::pair<std::string, uint64_t>> counters;
};

// Writes a finished profile with ranks 0..n-1 (pid 100 + r) through the real Hdf5Writer and
// opens it; failures are test failures and give nullptr. A rank with clock points gets a clock
// frame summarising its model at local time 0 (method "mpi-reference" for rank 0, else
// "mpi-pingpong").
std::unique_ptr<ProfileReader> WriteProfile(const std::string& path, const std::vector<RankData>& ranks,
                                            const ProfileOptions& options = {});

// Builders of the host MPI events the analysis tests hand-make, as a rank records them (local ns,
// docs/file-format.md gives each field's meaning per kind). Only the fields named are set; the
// rest are zero, device is COMMPROF_HOST_DEVICE.
namespace events {

// The optional fields of Collective(), named at the call site with designated initializers:
// Collective(COMMPROF_OP_BCAST, 0, 100, 200, {.root = 1}).
struct CollectiveFields {
  int32_t root = COMMPROF_NO_PEER;  // a rank in `comm`
  uint64_t comm = COMMPROF_COMM_WORLD_ID;
  uint16_t flags = 0;
  uint64_t bytes = 0;
  uint32_t name = 0;  // index into the rank's string table
};

// A collective (blocking unless f.flags says COMMPROF_FLAG_NONBLOCKING), number `seq` on its
// communicator.
commprof_event Collective(uint8_t op, uint64_t seq, uint64_t start, uint64_t end, const CollectiveFields& f = {});

// The NCCL profiler plugin's collective record (kind 17): as Collective() on the NCCL
// communicator `comm_hash`, with the GPU's device 0 (docs/file-format.md).
commprof_event NcclCollective(uint8_t op, uint64_t seq, uint64_t start, uint64_t end, uint64_t comm_hash,
                              uint64_t bytes);

// A point-to-point operation; `peer` is the rank in `comm`, `tag` goes in `correlation`.
commprof_event P2p(uint8_t op, uint64_t start, uint64_t end, int32_t peer, uint32_t tag, uint64_t bytes,
                   uint64_t comm = COMMPROF_COMM_WORLD_ID, uint16_t flags = 0, uint32_t thread = 0);
// A blocking MPI_Send / MPI_Recv.
commprof_event Send(uint64_t start, uint64_t end, int32_t peer, uint32_t tag, uint64_t bytes = 8,
                    uint64_t comm = COMMPROF_COMM_WORLD_ID);
commprof_event Recv(uint64_t start, uint64_t end, int32_t peer, uint32_t tag, uint64_t bytes = 8,
                    uint64_t comm = COMMPROF_COMM_WORLD_ID);

// A Wait*/Test* call (kind MPI_WAIT) on one request, on `thread`.
commprof_event WaitCall(uint8_t op, uint64_t start, uint64_t end, uint32_t thread = 0);

// A communicator creation (MPI_Comm_split of MPI_COMM_WORLD at local time 10): this rank is
// `rank_in_comm` of the `size` members of `comm`.
commprof_event CommCreated(uint64_t comm, int32_t rank_in_comm, uint64_t size);

}  // namespace events

// All of a rank's events in file order; `chunks`, when given, gets the number of chunks read.
std::vector<commprof_event> ReadEvents(const ProfileReader& r, uint32_t rank, size_t* chunks = nullptr);

// Field-by-field equality of two events, naming the event's index on failure.
void ExpectEventEq(const commprof_event& a, const commprof_event& b, size_t index);

// Checks the frame's header and returns its payload.
Bytes PayloadOf(const Bytes& frame, wire::FrameType expected_type);

// The bytes after a frame's header (no checks).
inline std::span<const uint8_t> PayloadSpan(const Bytes& frame) {
  return std::span<const uint8_t>(frame).subspan(wire::kHeaderSize);
}

}  // namespace commprof::test_support
