// A load generator that speaks the wire protocol (docs/wire-protocol.md) as many ranks would: each
// simulated rank connects to an aggregator (`commprof aggregate`), answers its challenge, sends a
// hello, its strings, EVENTS events in frames of BATCH and a bye, and waits for the bye's
// acknowledgement. Ranks are spread over THREADS threads, each driving its ranks' connections
// round-robin, so all of them stream at once. It prints what it sent and how long it took.
//
//   commprof_load_generator --port P --secret S --job J --ranks N --events E [--batch B]
//                           [--threads T] [--world W] [--first-rank R]
//                           [--hosts H [--relay-command COMMPROF --shard-dir DIR]]
//
// With --hosts the ranks are spread over H simulated hosts in contiguous blocks (else 8 a host);
// with --relay-command each connects through its host's relay (docs/scale.md#relays), started and found exactly as a
// collector does (core/relay_rendezvous.h); the relays write shards into DIR and report to the aggregator at P.
//
// Exit 0 when every rank's bye was acknowledged, 1 otherwise (naming the rank), 2 on bad usage.
// Used by the back-pressure and relay tests (tests/e2e/backpressure_e2e.py, relay_e2e.py) and
// bench/README.md#ingest.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "commprof/event.h"
#include "core/clock.h"
#include "core/relay_rendezvous.h"
#include "core/tcp_connect.h"
#include "core/wire.h"

namespace {

using namespace commprof;

struct Options {
  uint16_t port = 0;
  std::string secret;
  std::string job;
  uint32_t ranks = 0;
  uint64_t events = 0;
  uint32_t batch = 1000;
  uint32_t threads = 8;
  uint32_t world = 0;  // 0: = ranks
  uint32_t first_rank = 0;
  // The ranks are spread over `hosts` simulated hosts (0: 8 ranks a host). With a relay command,
  // each rank connects through its host's relay (docs/scale.md#relays, started as a collector
  // starts it), not to the port.
  uint32_t hosts = 0;
  std::string relay_command;  // the commprof executable
  std::string shard_dir;
};

// One simulated rank's stream, advanced one frame at a time.
class SimRank {
 public:
  SimRank(const Options& o, uint32_t rank) : o_(o), rank_(rank) {}

  // Connects, answers the challenge and sends the hello and the strings; false on failure.
  bool Open() {
    const std::string parent = "127.0.0.1:" + std::to_string(o_.port);
    std::string address = parent;
    if (!o_.relay_command.empty()) {
      RelayRequest req;
      req.command = o_.relay_command;
      req.parent = parent;
      req.shard_dir = o_.shard_dir;
      req.job_key = RelayJobKey(o_.job, o_.secret, parent);
      req.host_key = HostName();
      req.timeout_ms = 60000;
      auto relay = FindOrStartRelay(req);
      if (!relay.ok()) {
        return Fail("no relay: " + relay.status().message());
      }
      address = relay.value();
    }
    auto fd = ConnectTcp(address, SteadyNowNs() + 60'000'000'000ull, "aggregator");
    if (!fd.ok()) {
      return Fail(fd.status().message());
    }
    fd_ = fd.value();
    wire::FrameHeader h;
    std::vector<uint8_t> payload;
    if (!ReadFrame(fd_, h, payload).ok() || h.type != wire::FrameType::kChallenge) {
      return Fail("no challenge");
    }
    auto nonce = wire::DecodeChallenge(payload);
    if (!nonce.ok()) {
      return Fail("bad challenge");
    }
    wire::Hello hello;
    hello.rank = rank_;
    hello.world_size = o_.world != 0 ? o_.world : o_.ranks;
    hello.pid = 100000 + rank_;
    hello.host = HostName();
    hello.job_id = o_.job;
    hello.start_steady_ns = 1;
    hello.start_utc_ns = 2;
    std::vector<uint8_t> out;
    wire::AppendHello(out, hello, o_.secret, nonce.value());
    if (!SendAll(fd_, out) || !ReadFrame(fd_, h, payload).ok() || h.type != wire::FrameType::kHelloAck) {
      return Fail("no hello-ack");
    }
    auto ack = wire::DecodeHelloAck(payload);
    if (!ack.ok() || !ack->accepted) {
      return Fail("hello refused: " + (ack.ok() ? ack->reason : ack.status().message()));
    }
    out.clear();
    const std::string_view names[] = {"<overflow>", "MPI_Allreduce"};
    wire::AppendStrings(out, 0, names);
    return SendAll(fd_, out) || Fail("cannot send strings");
  }

  // Sends the next events frame, or the bye after the last; false once there is nothing left.
  bool Step() {
    if (sent_ >= o_.events) {
      if (!bye_sent_) {
        wire::Bye bye;
        bye.counters = {{"events_recorded", o_.events}, {"dropped_ring_full", 0}};
        std::vector<uint8_t> out;
        wire::AppendBye(out, bye);
        bye_sent_ = true;
        if (!SendAll(fd_, out)) {
          Fail("cannot send the bye");
        }
      }
      return false;
    }
    const uint64_t n = std::min<uint64_t>(o_.batch, o_.events - sent_);
    frame_events_.resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      commprof_event& e = frame_events_[i];
      e = commprof_event{};
      const uint64_t k = sent_ + i;
      e.kind = COMMPROF_KIND_MPI_COLLECTIVE;
      e.subtype = COMMPROF_OP_ALLREDUCE;
      e.comm_id = COMMPROF_COMM_WORLD_ID;
      e.seq = k;
      e.start_ns = 1000000 + k * 25000 + (rank_ % 7) * 100;
      e.end_ns = e.start_ns + 20000;
      e.bytes = 8;
      e.peer = -1;
      e.name_id = 1;
      e.device = COMMPROF_HOST_DEVICE;
    }
    std::vector<uint8_t> out;
    wire::AppendEvents(out, batch_seq_++, frame_events_.data(), frame_events_.size());
    if (!SendAll(fd_, out)) {
      Fail("cannot send events");
      return false;
    }
    sent_ += n;
    return true;
  }

  // Waits for the acknowledgement of the bye (the whole stream on disk).
  bool Finish() {
    if (failed_) {
      return false;
    }
    wire::FrameHeader h;
    std::vector<uint8_t> payload;
    while (ReadFrame(fd_, h, payload).ok()) {
      if (h.type == wire::FrameType::kBatchAck) {
        auto ack = wire::DecodeBatchAck(payload);
        if (ack.ok() && ack->bye_stored) {
          ::close(fd_);
          fd_ = -1;
          return true;
        }
      }
    }
    return Fail("the connection ended before the bye was acknowledged");
  }

  uint64_t sent() const { return sent_; }

  // Its simulated host: with --hosts H the ranks are split into H contiguous blocks, else 8 a host.
  std::string HostName() const {
    const uint32_t world = o_.world != 0 ? o_.world : o_.ranks;
    const uint32_t per_host = o_.hosts > 0 ? (world + o_.hosts - 1) / o_.hosts : 8;
    return "loadgen-" + std::to_string(rank_ / per_host);
  }
  bool failed() const { return failed_; }

 private:
  bool Fail(const std::string& why) {
    if (!failed_) {
      std::fprintf(stderr, "commprof_load_generator: rank %u: %s\n", rank_, why.c_str());
    }
    failed_ = true;
    return false;
  }

  const Options& o_;
  uint32_t rank_;
  int fd_ = -1;
  uint64_t sent_ = 0;
  uint64_t batch_seq_ = 0;
  bool bye_sent_ = false;
  bool failed_ = false;
  std::vector<commprof_event> frame_events_;
};

bool ParseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--port") {
      o.port = static_cast<uint16_t>(std::strtoul(v, nullptr, 10));
    } else if (k == "--secret") {
      o.secret = v;
    } else if (k == "--job") {
      o.job = v;
    } else if (k == "--ranks") {
      o.ranks = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    } else if (k == "--events") {
      o.events = std::strtoull(v, nullptr, 10);
    } else if (k == "--batch") {
      o.batch = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    } else if (k == "--threads") {
      o.threads = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    } else if (k == "--world") {
      o.world = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    } else if (k == "--first-rank") {
      o.first_rank = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    } else if (k == "--hosts") {
      o.hosts = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    } else if (k == "--relay-command") {
      o.relay_command = v;
    } else if (k == "--shard-dir") {
      o.shard_dir = v;
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && o.port != 0 && !o.secret.empty() && !o.job.empty() && o.ranks > 0 && o.batch > 0 &&
         o.threads > 0 && (o.relay_command.empty() || (o.hosts > 0 && !o.shard_dir.empty()));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: %s --port P --secret S --job J --ranks N --events E [--batch B] [--threads T] [--world W] "
                 "[--first-rank R] [--hosts H [--relay-command COMMPROF --shard-dir DIR]]\n",
                 argv[0]);
    return 2;
  }
  if (!o.relay_command.empty()) {
    // What a rank's environment gives the relay it starts.
    ::setenv("COMMPROF_SECRET", o.secret.c_str(), 1);
    ::setenv("COMMPROF_JOB_ID", o.job.c_str(), 1);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<uint32_t> failed{0};
  std::atomic<uint64_t> sent{0};
  std::vector<std::thread> threads;
  const uint32_t nthreads = std::min(o.threads, o.ranks);
  for (uint32_t t = 0; t < nthreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<SimRank> ranks;
      for (uint32_t r = t; r < o.ranks; r += nthreads) {
        ranks.emplace_back(o, o.first_rank + r);
      }
      for (auto& r : ranks) {
        r.Open();
      }
      for (bool more = true; more;) {
        more = false;
        for (auto& r : ranks) {
          if (!r.failed() && r.Step()) {
            more = true;
          }
        }
      }
      for (auto& r : ranks) {
        r.Step();  // the bye of a rank whose last frame was just sent
        if (!r.Finish()) {
          failed++;
        }
        sent += r.sent();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%u ranks, %llu events sent in %.3f s (%.2f M events/s), %u failed\n", o.ranks,
              static_cast<unsigned long long>(sent.load()), s, static_cast<double>(sent.load()) / s / 1e6,
              failed.load());
  return failed.load() == 0 ? 0 : 1;
}
