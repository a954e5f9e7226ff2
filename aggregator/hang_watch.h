// The hang watchdog (--hang-timeout, docs/hangs.md): notices that no rank has completed a
// communication call for a while, asks every connected rank what it is blocked in, and hands the
// answers over for diagnosis.
//
// Concepts. *Progress* is anything that shows the job moving: an events batch holding a completed
// communication event (MPI collective, point-to-point or wait; NCCL API call or collective; not
// INCOMPLETE), a rank connecting, a rank saying bye. The watchdog only sees progress when a batch
// arrives, which lags the ranks by up to their flush period, so progress is the trigger, never the
// proof: the decision is made on the ranks' own answers (wire::HangState), on their own clocks.
//
// Operation (all on the server's io thread; the io_context is run by one thread, so there is no
// lock). Watching: a timer fires `timeout` after the last progress. If some rank is connected and
// has not said bye, a hang-query (query_id + 1) goes to every connected rank, and the answers are
// gathered until all came or `answer_wait` passed. Deciding: it is a hang when no answering rank
// completed a communication call within `timeout` of its snapshot (local_now_ns -
// last_completion_ns) and some rank has an in-flight communication op older than `timeout`.
// Otherwise the job was in a quiet phase (a long computation): watching starts again. On a hang
// the handler gets a hang::HangInput (one snapshot per rank known: answered, finished, died, or
// silent), then, with on_hang abort, every connected rank gets a hang-abort carrying the handler's
// verdict. A hang is reported once: the watchdog stays quiet until progress resumes.
//
// Example: 4 ranks, timeout 2 s. Rank 2 skips an allreduce; ranks 0, 1, 3 block in it at t=10 s.
// Their last batches arrive by ~10.02 s; at ~12.02 s the query goes out; all four answer within
// milliseconds (rank 2 from its barrier); no one completed anything since 10 s and three ranks are
// in the allreduce for 2 s: the handler gets the four answers.
#pragma once

// Boost 1.74 asio/awaitable.hpp uses std::exchange without including <utility> under C++20, so
// <utility> comes first, kept there against clang-format's include sorting.
// clang-format off
#include <utility>
// clang-format on
#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "analysis/hang/hang_diagnosis.h"
#include "commprof/event.h"
#include "core/wire.h"

namespace commprof {

// What --on-hang asks for once a hang is reported.
enum class OnHang { kReport, kAbort };

struct HangWatchOptions {
  std::chrono::milliseconds timeout{0};  // --hang-timeout; 0: the watchdog is off
  OnHang on_hang = OnHang::kReport;
  // How long answers are awaited after a query. A collector answers from its shipper thread, which
  // wakes every COMMPROF_FLUSH_MS (20 ms by default) or sooner: 2 s is 100 of its periods, and
  // still short next to any timeout worth setting.
  std::chrono::milliseconds answer_wait{2000};
};

// The handler of a detected hang: diagnoses, prints, stores. It returns the one-line verdict,
// which is the hang-abort's reason under OnHang::kAbort. Runs on the io thread.
using HangHandler = std::function<std::string(const hang::HangInput&)>;

// The watchdog's side of a connection: frames to one rank. Implemented by the server's session.
class HangPeer {
 public:
  virtual ~HangPeer() = default;
  virtual void SendToRank(std::vector<uint8_t> frame) = 0;
};

// True for an event that shows communication completing: MPI collective, point-to-point or wait,
// NCCL API call or collective, without the INCOMPLETE flag.
bool IsCompletedCommunication(const commprof_event& e);

class HangWatch : public std::enable_shared_from_this<HangWatch> {
 public:
  HangWatch(boost::asio::io_context& io, HangWatchOptions options, HangHandler handler);

  bool enabled() const { return options_.timeout.count() > 0; }
  const HangWatchOptions& options() const { return options_; }

  // ---- from the sessions (io thread) ----
  // A rank's hello was accepted (or its stream resumed): `peer` now speaks for it.
  void RankConnected(uint32_t rank, uint32_t world_size, const std::shared_ptr<HangPeer>& peer);
  // An events batch arrived; progress when it holds a completed communication event.
  void Events(uint32_t rank, std::span<const commprof_event> events);
  // The rank's stream ended: with a bye (`bye`, `reason` from its counters: "bye" or "killed by
  // signal N") or without one. Ignored unless `peer` still speaks for the rank (a superseded
  // stream ending changes nothing).
  void RankEnded(uint32_t rank, const HangPeer* peer, bool bye, const std::string& reason);
  // A decoded hang-state from `rank`. One answering no current query (stale, unknown, repeated) is
  // ignored and counted.
  void Answer(uint32_t rank, wire::HangState state);

  // Stops the timers (the server is closing).
  void Stop();

  // For the tests and the CLI: queries sent (one per query round), hand-overs made, answers ignored.
  uint64_t queries() const { return queries_.load(); }
  uint64_t reports() const { return reports_.load(); }
  uint64_t ignored_answers() const { return ignored_.load(); }
  // True once a hang-abort went out (on_hang abort); the job is expected to end.
  bool aborted() const { return aborted_.load(); }

 private:
  enum class Phase { kWatching, kQuerying, kReported };
  struct RankEntry {
    std::weak_ptr<HangPeer> peer;
    const HangPeer* peer_id = nullptr;  // identity of the current stream's session
    bool connected = false;
    bool bye = false;
    std::string end_reason;
    bool answered = false;  // an answer to the current query came
    wire::HangState state;
  };

  void Progress();
  void ArmWatch();
  void OnWatchTimer();
  void SendQuery();
  bool AllAnswered() const;
  void Decide();
  bool LooksHung() const;
  hang::HangInput BuildInput() const;

  HangWatchOptions options_;
  HangHandler handler_;
  boost::asio::steady_timer watch_timer_;
  boost::asio::steady_timer answer_timer_;
  Phase phase_ = Phase::kWatching;
  bool stopped_ = false;
  std::chrono::steady_clock::time_point last_progress_;
  uint64_t query_id_ = 0;
  uint32_t world_size_ = 0;
  std::map<uint32_t, RankEntry> ranks_;
  std::atomic<uint64_t> queries_{0};
  std::atomic<uint64_t> reports_{0};
  std::atomic<uint64_t> ignored_{0};
  std::atomic<bool> aborted_{false};
};

}  // namespace commprof
