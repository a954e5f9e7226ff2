// The shipper thread: every flush period it drains the rings into event frames and sends them,
// with any new strings first, to the aggregator.
//
// Delivery (docs/reliability.md): the aggregator acknowledges events batches once they are on
// disk; until then the shipper keeps them. When the connection is lost it reconnects with back-off
// for COMMPROF_RECONNECT_MS, keeping what was not acknowledged, and resends it (the aggregator
// skips what it already stored); when that fails, or no aggregator is reachable at all, it writes
// the same frames to a spool file, once, for the rest of the process. At exit it waits for the
// acknowledgement of its bye, and spools what was not acknowledged.
//
// A fatal signal (collector/fatal_signals.h) wakes the thread through a pipe (the only async-
// signal-safe way to do it) for a last shipment; when it ends the process, every operation still in
// flight is recorded first as an INCOMPLETE event ending then (docs/file-format.md).
//
// Hang diagnosis (docs/hangs.md, docs/wire-protocol.md): the thread answers the aggregator's
// hang-query itself, never waiting on an application thread, within one flush period: it ships what
// the rings hold, then one hang-state frame (the in-flight operations of collector/inflight.h, the
// history of completed collectives it keeps from the events it drains, the communicators seen
// created). A hang-abort ends the process with SIGTERM after that final flush.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collector/transport.h"

namespace commprof {

class Runtime;

class Shipper {
 public:
  explicit Shipper(Runtime& runtime);
  ~Shipper();
  Shipper(const Shipper&) = delete;
  Shipper& operator=(const Shipper&) = delete;

  void Start();
  void Flush();  // wake the thread now
  void Stop();   // final drain + clock + bye; joins the thread

  // Async-signal-safe: asks the thread for a last shipment on behalf of `signo` and waits for it
  // up to `wait_ms`. With `final` (the signal will end the process) the shipment ends with the
  // bye, carrying the signal; otherwise it is an ordinary flush. Returns at once when called on
  // the shipper thread itself (it cannot wait for itself) or after the shipper stopped.
  void ShipForSignal(int signo, bool final, uint32_t wait_ms);

 private:
  struct Unacked {
    uint64_t batch_seq;
    std::vector<uint8_t> frame;
  };

  void Loop();
  bool WaitForWork(uint32_t timeout_ms);  // true when woken before the timeout
  void Connect();
  void ShipOnce();
  // Appends the names interned since the last strings frame (the reader needs an id before its event).
  void AppendFreshStrings();
  void Send(std::vector<uint8_t>& frames);
  void OnSendFailed(const std::string& why);
  void TryReconnect();
  void SwitchToSpool(const std::string& why);
  // What a fresh stream (a reconnect or the spool) needs before new frames: the whole string
  // table, the clock model, and every batch not acknowledged, in order.
  void AppendRestart(std::vector<uint8_t>& out);
  void Retain(uint64_t batch_seq, const uint8_t* frame, size_t size);
  // Reads what the aggregator sent: batch acks, hang queries (kept in hang_queries_), a hang-abort.
  void ReadAcks();
  // Drains the rings into events frames and sends them (the first half of ShipOnce).
  void ShipEvents();
  // Keeps, from drained events, the completed collectives of each communicator and the
  // communicators this rank was seen joining.
  void ObserveForHang(const commprof_event* ev, uint32_t n);
  void AnswerHangQuery(const wire::HangQuery& query);
  // The aggregator's --on-hang abort: log, the final flush, then SIGTERM to the process.
  void EndForHangAbort();
  void OnAck(const wire::BatchAck& ack);
  // Decodes a batch-ack frame's payload and applies it (OnAck); a malformed one is an error.
  Status ApplyAck(const std::vector<uint8_t>& payload);
  // Waits up to COMMPROF_BYE_ACK_MS for the bye's acknowledgement; false, saying why, when none came.
  bool AwaitByeAck(std::string& why);
  void Finish(uint64_t signo);
  // Clock alignment for ranks without MPI: ping-pong against the aggregator over this connection.
  bool TcpSyncWanted() const;
  void TcpEpoch(uint32_t rounds);

  Runtime& rt_;
  wire::Hello hello_;
  std::vector<uint8_t> hello_frame_;  // signed once at construction
  std::unique_ptr<Transport> transport_;
  bool spooling_ = false;
  // Lost connection: reconnect attempts until reconnect_deadline_ns_, then the spool.
  bool reconnecting_ = false;
  uint64_t reconnect_deadline_ns_ = 0;
  uint64_t next_attempt_ns_ = 0;
  uint32_t backoff_ms_ = 0;
  uint32_t strings_sent_ = 0;
  uint64_t batch_seq_ = 0;
  uint64_t batches_sent_ = 0;
  uint64_t bytes_sent_ = 0;
  uint64_t events_shipped_ = 0;
  uint64_t clock_sent_version_ = 0;
  std::deque<Unacked> unacked_;
  size_t unacked_bytes_ = 0;
  uint64_t acked_batches_ = 0;
  bool bye_acked_ = false;
  uint64_t unconfirmed_batches_ = 0;  // forgotten unacknowledged (COMMPROF_RETAIN_MB)
  uint64_t reconnects_ = 0;
  uint64_t congestion_spools_ = 0;  // 1 once a congested aggregator sent the stream to the spool
  uint64_t resent_batches_ = 0;
  std::vector<ClockPoint> tcp_points_;
  uint64_t next_tcp_sync_ns_ = 0;
  bool tcp_same_clock_ = false;   // on the aggregator's clock (COMMPROF_AGGREGATOR_CLOCK): nothing to measure
  bool tcp_sync_failed_ = false;  // an exchange broke: the stream's state is unknown, stop trying
  std::vector<uint8_t> out_;
  std::unique_ptr<commprof_event[]> scratch_;

  // Hang diagnosis: per communicator (key: comm_id, and whether it is NCCL's), its last completed
  // collectives in a ring of config.hang_history; at most kHangComms communicators.
  struct CommHistory {
    std::vector<commprof_event> ring;
    uint64_t seen = 0;  // completed collectives observed; ring[seen % size] is the next to replace
  };
  static constexpr size_t kHangComms = 4096;
  std::map<std::pair<uint64_t, bool>, CommHistory> history_;
  std::map<uint64_t, wire::CommMembership> memberships_;
  uint64_t hang_untracked_ = 0;  // completed collectives and memberships not kept (kHangComms reached)
  std::vector<wire::HangQuery> hang_queries_;
  uint64_t hang_answers_ = 0;
  bool hang_abort_ = false;
  std::string hang_abort_reason_;
  uint64_t in_flight_at_exit_ = 0;

  // Requests from other threads and from signal handlers: flags, then a byte down the pipe.
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<bool> flush_{false};
  std::atomic<int> signal_{0};  // the signal to ship for, 0 when none
  std::atomic<bool> signal_final_{false};
  std::atomic<uint64_t> signal_done_{0};  // shipments done for a signal
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> thread_id_{0};  // pthread_self() of the shipper thread
  std::thread thread_;
};

}  // namespace commprof
