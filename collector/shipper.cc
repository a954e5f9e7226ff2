#include "collector/shipper.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>

#include "collector/runtime.h"
#include "core/launcher_env.h"
#include "core/log.h"

namespace commprof {
namespace {

constexpr uint32_t kBatchEvents = 4096;  // 256 KiB per events frame
constexpr uint32_t kFirstBackoffMs = 50;
constexpr uint32_t kMaxBackoffMs = 2000;

uint64_t SelfId() { return static_cast<uint64_t>(::pthread_self()); }

// CLOCK_MONOTONIC in ms through clock_gettime, which is async-signal-safe.
uint64_t MonotonicMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000u + static_cast<uint64_t>(ts.tv_nsec) / 1000000u;
}

}  // namespace

Shipper::Shipper(Runtime& runtime) : rt_(runtime), scratch_(std::make_unique<commprof_event[]>(kBatchEvents)) {
  const Identity& id = rt_.identity();
  hello_.rank = id.rank;
  hello_.world_size = id.world_size;
  hello_.pid = id.pid;
  hello_.host = id.host;
  hello_.job_id = rt_.config().job_id;
  hello_.start_steady_ns = rt_.start_anchor().steady_ns;
  hello_.start_utc_ns = rt_.start_anchor().utc_ns;
  // A torch elastic restart's worker is a new incarnation of its rank: the aggregator keeps it
  // beside the first instead of refusing a second process with the rank (docs/torchrun.md).
  hello_.incarnation = TorchRestartCount().value_or(0);
  out_.reserve(wire::EventsFrameSize(kBatchEvents) * 2);
  wire::AppendHello(hello_frame_, hello_, rt_.config().secret);  // see transport.h: here, not on our thread
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    wake_pipe_[0] = wake_pipe_[1] = -1;  // WaitForWork then just sleeps out its period
    COMMPROF_LOG_WARN("cannot create the shipper's wake-up pipe: flushes happen every period only");
  }
}

Shipper::~Shipper() {
  Stop();
  for (int fd : wake_pipe_) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
}

void Shipper::Start() {
  thread_ = std::thread([this] { Loop(); });
}

namespace {
void Wake(int fd) {
  if (fd >= 0) {
    char b = 1;
    ssize_t n = ::write(fd, &b, 1);  // a full pipe already means "wake up"
    (void)n;
  }
}
}  // namespace

void Shipper::Flush() {
  flush_.store(true);
  Wake(wake_pipe_[1]);
}

void Shipper::Stop() {
  stop_.store(true);
  Wake(wake_pipe_[1]);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
  }
}

void Shipper::ShipForSignal(int signo, bool final, uint32_t wait_ms) {
  if (stopped_.load() || !thread_.joinable() || thread_id_.load() == SelfId()) {
    return;
  }
  uint64_t before = signal_done_.load();
  signal_final_.store(final);
  signal_.store(signo);
  Wake(wake_pipe_[1]);
  uint64_t deadline = MonotonicMs() + wait_ms;
  while (signal_done_.load() == before && !stopped_.load() && MonotonicMs() < deadline) {
    timespec ts{0, 1000000};
    ::nanosleep(&ts, nullptr);
  }
}

bool Shipper::WaitForWork(uint32_t timeout_ms) {
  if (stop_.load() || flush_.load() || signal_.load() != 0) {
    return true;
  }
  if (wake_pipe_[0] < 0) {
    timespec ts{static_cast<time_t>(timeout_ms / 1000), static_cast<long>(timeout_ms % 1000) * 1000000L};
    ::nanosleep(&ts, nullptr);
    return false;
  }
  pollfd pfd{wake_pipe_[0], POLLIN, 0};
  int pr = ::poll(&pfd, 1, static_cast<int>(timeout_ms));
  char buf[64];
  while (::read(wake_pipe_[0], buf, sizeof buf) > 0) {
  }
  return pr > 0;
}

void Shipper::Connect() {
  auto t = rt_.transports().Connect(hello_frame_);
  if (t.ok()) {
    transport_ = std::move(t.value());
    return;
  }
  // An aggregator that is configured but slow or restarting (the hello-ack came late, the port is
  // not open yet) is retried like a lost connection; a refusal or no aggregator at all is final.
  bool retry = t.status().code() == StatusCode::kUnavailable && !rt_.config().aggregator.empty() &&
               rt_.config().reconnect_ms > 0;
  if (retry) {
    return OnSendFailed(t.status().message());
  }
  SwitchToSpool(t.status().message());
}

void Shipper::SwitchToSpool(const std::string& why) {
  transport_.reset();
  reconnecting_ = false;
  if (spooling_) {
    return;
  }
  spooling_ = true;
  std::string path;
  auto s = rt_.transports().OpenSpool(hello_, hello_frame_, &path);
  if (!s.ok()) {
    COMMPROF_LOG_ERROR(
        "%s, and spooling failed too (%s): %zu unacknowledged batches and events from now on are "
        "dropped",
        why.c_str(), s.status().message().c_str(), unacked_.size());
    unconfirmed_batches_ += unacked_.size();
    unacked_.clear();
    unacked_bytes_ = 0;
    return;
  }
  COMMPROF_LOG_WARN("%s; spooling to %s (turn it into a file with `commprof merge`)", why.c_str(), path.c_str());
  transport_ = std::move(s.value());
  // The spool is a complete stream of its own: strings from id 0, the clock, and every batch the
  // aggregator did not confirm (a merge skips those it stored after all).
  std::vector<uint8_t> restart;
  AppendRestart(restart);
  unacked_.clear();
  unacked_bytes_ = 0;
  Send(restart);
}

void Shipper::AppendRestart(std::vector<uint8_t>& out) {
  auto all = rt_.strings().Since(0);
  wire::AppendStrings(out, 0, all);
  strings_sent_ = static_cast<uint32_t>(all.size());
  clock_sent_version_ = rt_.clock_version();
  wire::AppendClock(out, rt_.TakeClockFrame());
  for (const Unacked& u : unacked_) {
    out.insert(out.end(), u.frame.begin(), u.frame.end());
    ++resent_batches_;
  }
}

void Shipper::OnSendFailed(const std::string& why) {
  transport_.reset();
  if (spooling_) {
    COMMPROF_LOG_ERROR("%s; events from now on are dropped", why.c_str());
    return;
  }
  if (reconnecting_) {
    return;  // the deadline of the first failure stands
  }
  uint32_t window = rt_.config().reconnect_ms;
  if (window == 0) {
    return SwitchToSpool(why);
  }
  reconnecting_ = true;
  reconnect_deadline_ns_ = rt_.Now() + static_cast<uint64_t>(window) * 1000000ull;
  next_attempt_ns_ = rt_.Now() + static_cast<uint64_t>(kFirstBackoffMs) * 1000000ull;
  backoff_ms_ = kFirstBackoffMs;
  COMMPROF_LOG_WARN("%s; reconnecting for up to %u ms, keeping what the aggregator has not confirmed", why.c_str(),
                    window);
}

void Shipper::TryReconnect() {
  uint64_t now = rt_.Now();
  if (now < next_attempt_ns_) {
    return;
  }
  auto t = rt_.transports().Connect(hello_frame_);
  if (t.ok()) {
    transport_ = std::move(t.value());
    reconnecting_ = false;
    ++reconnects_;
    COMMPROF_LOG_INFO("reconnected to the aggregator; resending %zu unconfirmed batches", unacked_.size());
    std::vector<uint8_t> restart;
    AppendRestart(restart);
    Send(restart);
    return;
  }
  if (t.status().code() != StatusCode::kUnavailable || now >= reconnect_deadline_ns_) {
    return SwitchToSpool("cannot reconnect to the aggregator: " + t.status().message());
  }
  backoff_ms_ = std::min(backoff_ms_ * 2, kMaxBackoffMs);
  next_attempt_ns_ = rt_.Now() + static_cast<uint64_t>(backoff_ms_) * 1000000ull;
}

void Shipper::Send(std::vector<uint8_t>& frames) {
  if (frames.empty()) {
    return;
  }
  if (transport_ == nullptr) {
    // Reconnecting: the events are retained and the rest is rebuilt on the new stream. Spool
    // failed: nothing can take them (counted at the bye through events_shipped).
    frames.clear();
    return;
  }
  Status st = transport_->Send(frames);
  size_t size = frames.size();
  frames.clear();
  if (st.ok()) {
    ++batches_sent_;
    bytes_sent_ += size;
    return;
  }
  if (transport_->congested()) {
    // Reconnecting would find the same full queue: the spool takes what the aggregator has not
    // confirmed and everything after, and the aggregator merges it at the end (docs/scale.md).
    ++congestion_spools_;
    transport_.reset();
    return SwitchToSpool(st.message());
  }
  OnSendFailed(st.message());
}

void Shipper::Retain(uint64_t batch_seq, const uint8_t* frame, size_t size) {
  bool acknowledged = transport_ != nullptr ? transport_->acknowledges() : reconnecting_;
  if (!acknowledged) {
    return;  // a spool or a test sink: written is stored
  }
  unacked_.push_back(Unacked{batch_seq, std::vector<uint8_t>(frame, frame + size)});
  unacked_bytes_ += size;
  const size_t limit = static_cast<size_t>(rt_.config().retain_mb) << 20;
  while (unacked_bytes_ > limit && unacked_.size() > 1) {
    unacked_bytes_ -= unacked_.front().frame.size();
    unacked_.pop_front();
    ++unconfirmed_batches_;
  }
}

void Shipper::OnAck(const wire::BatchAck& ack) {
  acked_batches_ = std::max(acked_batches_, ack.durable_batches);
  while (!unacked_.empty() && unacked_.front().batch_seq < acked_batches_) {
    unacked_bytes_ -= unacked_.front().frame.size();
    unacked_.pop_front();
  }
  bye_acked_ = bye_acked_ || ack.bye_stored;
}

Status Shipper::ApplyAck(const std::vector<uint8_t>& payload) {
  auto ack = wire::DecodeBatchAck(payload);
  if (!ack.ok()) {
    return ack.status();
  }
  OnAck(ack.value());
  return Status::Ok();
}

void Shipper::ReadAcks() {
  // A spool (and any transport without a peer) has nothing to read: TryReceive says so.
  if (transport_ == nullptr) {
    return;
  }
  wire::FrameHeader h;
  std::vector<uint8_t> payload;
  for (;;) {
    auto got = transport_->TryReceive(h, payload);
    if (!got.ok()) {
      return OnSendFailed("connection to the aggregator lost: " + got.status().message());
    }
    if (!got.value()) {
      return;
    }
    if (h.type == wire::FrameType::kBatchAck) {
      if (Status st = ApplyAck(payload); !st.ok()) {
        return OnSendFailed("bad batch-ack from the aggregator: " + st.message());
      }
    } else if (h.type == wire::FrameType::kHangQuery) {
      auto q = wire::DecodeHangQuery(payload);
      if (!q.ok()) {
        return OnSendFailed("bad hang-query from the aggregator: " + q.status().message());
      }
      hang_queries_.push_back(q.value());
    } else if (h.type == wire::FrameType::kHangAbort) {
      auto a = wire::DecodeHangAbort(payload);
      if (!a.ok()) {
        return OnSendFailed("bad hang-abort from the aggregator: " + a.status().message());
      }
      hang_abort_ = true;
      hang_abort_reason_ = a->reason;
      return;  // nothing after it matters: the process ends
    } else {
      COMMPROF_LOG_DEBUG("ignoring a %s frame from the aggregator", wire::FrameTypeName(h.type));
    }
  }
}

bool Shipper::AwaitByeAck(std::string& why) {
  uint64_t deadline = MonotonicMs() + rt_.config().bye_ack_ms;
  wire::FrameHeader h;
  std::vector<uint8_t> payload;
  why = "the aggregator did not confirm this rank's stream within COMMPROF_BYE_ACK_MS";
  while (transport_ != nullptr && !bye_acked_) {
    uint64_t now = MonotonicMs();
    if (now >= deadline) {
      return false;
    }
    Status st = transport_->Receive(h, payload, static_cast<uint32_t>(deadline - now));
    if (!st.ok()) {
      // A timeout keeps the message above; an aggregator that could not store the stream (its
      // writer failed) closes the connection instead of confirming.
      if (MonotonicMs() < deadline) {
        why = "the aggregator closed the connection without confirming this rank's stream (" + st.message() + ")";
      }
      return false;
    }
    if (h.type == wire::FrameType::kBatchAck && !ApplyAck(payload).ok()) {
      why = "the aggregator's confirmation of this rank's stream was malformed";
      return false;
    }
  }
  return bye_acked_;
}

bool Shipper::TcpSyncWanted() const {
  return rt_.config().clock_sync && !rt_.identity().mpi && !rt_.clock_by_mpi() && !tcp_sync_failed_ &&
         !tcp_same_clock_ && transport_ != nullptr && !spooling_;
}

void Shipper::TcpEpoch(uint32_t rounds) {
  // A rank on the aggregator's very clock (same boot, clock source and time namespace) is aligned
  // exactly: offset 0, drift 0, bound 0, once. Measuring it would only add the ping-pongs' noise
  // (a microsecond or two of offset, ppm of drift) and clock-condition violations the raw clocks
  // do not have. Looked at before the first point only: the key is read from /proc and /sys, and
  // a rank that measured once keeps measuring.
  if (const std::optional<uint64_t>& key = rt_.config().aggregator_clock_domain;
      tcp_points_.empty() && key && rt_.host_clock().Domain() == *key) {
    tcp_same_clock_ = true;
    tcp_points_.assign(1, ClockPoint{static_cast<int64_t>(rt_.Now()), 0, 0});
    rt_.PublishClock(tcp_points_, {}, "tcp-same-host");
    return;
  }
  std::vector<ClockSample> epoch;
  std::vector<uint8_t> frame, payload;
  for (uint32_t k = 0; k < rounds; ++k) {
    ClockSample s;
    s.local_send_ns = rt_.Now();
    frame.clear();
    wire::AppendClockPing(frame, s.local_send_ns);
    wire::FrameHeader h;
    bool answered = transport_->Send(frame).ok();
    // Batch acknowledgements may come first: take them on the way to the pong.
    while (answered && (answered = transport_->Receive(h, payload, 2000).ok()) &&
           h.type == wire::FrameType::kBatchAck) {
      (void)ApplyAck(payload);  // a bad one is skipped: the pong is what this exchange waits for
    }
    if (!answered) {
      // A late pong would confuse every later exchange: give up on TCP alignment, once.
      tcp_sync_failed_ = true;
      COMMPROF_LOG_WARN("clock sync with the aggregator: no answer in 2 s; keeping the model so far");
      return;
    }
    s.local_recv_ns = rt_.Now();
    auto pong = h.type == wire::FrameType::kClockPong ? wire::DecodeClockPong(payload)
                                                      : Result<wire::ClockPong>(Corrupt("not a clock-pong"));
    if (!pong.ok() || pong->local_send_ns != s.local_send_ns) {
      tcp_sync_failed_ = true;
      COMMPROF_LOG_WARN("clock sync with the aggregator: unexpected answer; keeping the model so far");
      return;
    }
    s.reference_ns = pong->reference_ns;
    epoch.push_back(s);
  }
  ClockPoint p;
  if (!EstimateEpoch(epoch, p)) {
    return;
  }
  if (rt_.clock_by_mpi()) {
    return;  // MPI_Init came meanwhile: its alignment wins
  }
  tcp_points_.push_back(p);
  rt_.PublishClock(tcp_points_, std::move(epoch), "tcp-pingpong");
  rt_.SetCounter("clock_sync_epochs", tcp_points_.size());
  uint32_t interval = rt_.config().clock_sync_interval_ms;
  next_tcp_sync_ns_ = interval == 0 ? UINT64_MAX : rt_.Now() + static_cast<uint64_t>(interval) * 1000000ull;
}

void Shipper::AppendFreshStrings() {
  auto fresh = rt_.strings().Since(strings_sent_);
  if (!fresh.empty()) {
    wire::AppendStrings(out_, strings_sent_, fresh);
    strings_sent_ += static_cast<uint32_t>(fresh.size());
  }
}

void Shipper::ShipOnce() {
  ShipEvents();
  ReadAcks();
  if (!hang_queries_.empty()) {
    // The events recorded up to now first: the answer's history and names are then complete.
    ShipEvents();
    for (const wire::HangQuery& q : hang_queries_) {
      AnswerHangQuery(q);
    }
    hang_queries_.clear();
  }
}

void Shipper::ObserveForHang(const commprof_event* ev, uint32_t n) {
  const uint32_t keep = std::max<uint32_t>(1, rt_.config().hang_history);
  for (uint32_t i = 0; i < n; ++i) {
    const commprof_event& e = ev[i];
    if (e.kind == COMMPROF_KIND_MPI_COMM) {
      // comm_id = the new communicator, bytes = its size, peer = this rank in it.
      if (e.comm_id == 0 || e.bytes == 0 || e.bytes > wire::kMaxWorldSize || e.peer < 0 ||
          static_cast<uint64_t>(e.peer) >= e.bytes) {
        continue;
      }
      if (memberships_.size() >= kHangComms && !memberships_.contains(e.comm_id)) {
        ++hang_untracked_;
        continue;
      }
      memberships_[e.comm_id] =
          wire::CommMembership{e.comm_id, static_cast<uint32_t>(e.bytes), static_cast<uint32_t>(e.peer)};
      continue;
    }
    if ((e.kind != COMMPROF_KIND_MPI_COLLECTIVE && e.kind != COMMPROF_KIND_NCCL_COLLECTIVE) ||
        (e.flags & COMMPROF_FLAG_INCOMPLETE) != 0) {
      continue;
    }
    const auto key = std::make_pair(e.comm_id, e.kind == COMMPROF_KIND_NCCL_COLLECTIVE);
    auto it = history_.find(key);
    if (it == history_.end()) {
      if (history_.size() >= kHangComms) {
        ++hang_untracked_;
        continue;
      }
      it = history_.emplace(key, CommHistory{}).first;
      it->second.ring.resize(keep);
    }
    CommHistory& h = it->second;
    h.ring[h.seen % h.ring.size()] = e;
    ++h.seen;
  }
}

void Shipper::AnswerHangQuery(const wire::HangQuery& query) {
  // Size bounds (docs/wire-protocol.md): the frame stays well under the 16 MiB payload limit.
  constexpr size_t kMaxRecent = 131072;   // 8 MiB of history in all
  constexpr size_t kMaxInflight = 65536;  // 4.25 MiB
  wire::HangState st;
  st.query_id = query.query_id;
  st.inflight = rt_.Inflight(st.last_completion_ns);
  st.local_now_ns = rt_.Now();
  if (st.inflight.size() > kMaxInflight) {
    st.inflight.resize(kMaxInflight);
  }
  size_t per_comm = std::max<uint32_t>(1, rt_.config().hang_history);
  if (query.history != 0) {
    per_comm = std::min<size_t>(per_comm, query.history);
  }
  if (!history_.empty()) {
    per_comm = std::min(per_comm, std::max<size_t>(1, kMaxRecent / history_.size()));
  }
  for (const auto& [key, h] : history_) {
    const size_t size = h.ring.size();
    const uint64_t have = std::min<uint64_t>(h.seen, size);
    const uint64_t take = std::min<uint64_t>(have, per_comm);
    for (uint64_t k = h.seen - take; k < h.seen; ++k) {  // oldest first
      st.recent.push_back(h.ring[k % size]);
    }
  }
  const Identity& id = rt_.identity();
  if ((id.mpi || rt_.mpi() != nullptr) && id.rank < id.world_size) {
    st.comms.push_back(wire::CommMembership{COMMPROF_COMM_WORLD_ID, id.world_size, id.rank});
  }
  for (const auto& [comm, m] : memberships_) {
    if (comm != COMMPROF_COMM_WORLD_ID) {
      st.comms.push_back(m);
    }
  }
  std::vector<uint32_t> stacks;
  for (const wire::InflightOp& op : st.inflight) {
    stacks.push_back(op.stack);
  }
  st.call_sites = rt_.CallSiteTexts(std::move(stacks));
  ++hang_answers_;
  std::vector<uint8_t> frame;
  wire::AppendHangState(frame, st);
  Send(frame);
  COMMPROF_LOG_DEBUG("answered hang-query %llu: %zu in flight, %zu recent, %zu communicators",
                     static_cast<unsigned long long>(query.query_id), st.inflight.size(), st.recent.size(),
                     st.comms.size());
}

void Shipper::EndForHangAbort() {
  std::fprintf(stderr, "commprof: rank %u: ending the job: %s\n", rt_.identity().rank, hang_abort_reason_.c_str());
  std::fflush(stderr);
  // The final flush first, on this thread: the SIGTERM below is blocked here and goes to another
  // thread, whose handler then finds the shipper stopped and lets the signal end the process.
  Finish(SIGTERM);
  stopped_.store(true);
  ::kill(::getpid(), SIGTERM);
}

void Shipper::ShipEvents() {
  if (uint64_t v = rt_.clock_version(); v != clock_sent_version_) {
    clock_sent_version_ = v;
    wire::AppendClock(out_, rt_.TakeClockFrame());
  }
  AppendFreshStrings();
  rt_.DrainAll(scratch_.get(), kBatchEvents, [this](const commprof_event* ev, uint32_t n) {
    // Taken again after the batch was drained: a thread may have interned a name and recorded an
    // event with it after the snapshot above, and the reader must know every id before its event.
    AppendFreshStrings();
    size_t at = out_.size();
    uint64_t seq = batch_seq_++;
    wire::AppendEvents(out_, seq, ev, n);
    Retain(seq, out_.data() + at, out_.size() - at);
    events_shipped_ += n;
    ObserveForHang(ev, n);
    if (out_.size() >= wire::EventsFrameSize(kBatchEvents)) {
      Send(out_);
    }
  });
  Send(out_);
}

void Shipper::Finish(uint64_t signo) {
  if (reconnecting_) {
    next_attempt_ns_ = 0;  // one last try before the spool
    TryReconnect();
    if (reconnecting_) {
      SwitchToSpool("the aggregator is still unreachable at exit");
    }
  }
  if (signo == 0 && TcpSyncWanted()) {
    TcpEpoch(rt_.config().clock_sync_rounds);
  }
  if (signo != 0) {
    // The process ends now: what it is still inside never completes (docs/file-format.md).
    in_flight_at_exit_ = rt_.RecordInflightAsIncomplete(rt_.Now());
  }
  ShipOnce();
  auto tail = [&] {
    wire::Bye bye = rt_.Counters();
    bye.counters.emplace_back("events_shipped", events_shipped_);
    bye.counters.emplace_back("batches_sent", batches_sent_);
    if (reconnects_ > 0 || resent_batches_ > 0) {
      bye.counters.emplace_back("reconnects", reconnects_);
      bye.counters.emplace_back("batches_resent", resent_batches_);
    }
    if (unconfirmed_batches_ > 0) {
      bye.counters.emplace_back("unconfirmed_batches", unconfirmed_batches_);
    }
    if (signo != 0) {
      bye.counters.emplace_back("fatal_signal", signo);
      bye.counters.emplace_back("calls_in_flight_at_exit", in_flight_at_exit_);
    }
    if (hang_answers_ > 0) {
      bye.counters.emplace_back("hang_queries_answered", hang_answers_);
    }
    if (hang_untracked_ > 0) {
      bye.counters.emplace_back("hang_comms_untracked", hang_untracked_);
    }
    if (hang_abort_) {
      bye.counters.emplace_back("ended_by_hang_abort", 1);
    }
    bye.counters.emplace_back("spooled", spooling_ ? 1 : 0);
    if (congestion_spools_ > 0) {
      bye.counters.emplace_back("spooled_congested", congestion_spools_);
    }
    std::vector<uint8_t> frames;
    wire::AppendClock(frames, rt_.TakeClockFrame());
    wire::AppendBye(frames, bye);
    return frames;
  };
  std::vector<uint8_t> frames = tail();
  Send(frames);
  if (std::string why; transport_ != nullptr && transport_->acknowledges() && !AwaitByeAck(why)) {
    // Not confirmed: everything the aggregator did not acknowledge goes to the spool, and the
    // merge at the end of the job skips what it stored after all.
    SwitchToSpool(why);
    frames = tail();
    Send(frames);
  }
  transport_.reset();
}

void Shipper::Loop() {
  thread_id_.store(SelfId());
  // A SIGTERM sent to the process must reach a thread that can wait for us to ship, not this one.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &term, nullptr);
  Connect();
  if (TcpSyncWanted()) {
    uint64_t t0 = rt_.Now();
    TcpEpoch(rt_.config().clock_sync_rounds);
    rt_.SetCounter("clock_sync_init_ns", rt_.Now() - t0);
  }
  const uint32_t period = rt_.config().flush_ms;
  for (;;) {
    // A time window (--delay, --duration) opens and closes on time: wake for it when it is due
    // before the next flush.
    uint32_t wait_ms = period;
    if (uint64_t due = rt_.CaptureDeadline(); due != UINT64_MAX) {
      uint64_t now = rt_.Now();
      wait_ms = due <= now ? 0 : static_cast<uint32_t>(std::min<uint64_t>(period, (due - now + 999999) / 1000000));
    }
    WaitForWork(wait_ms);
    rt_.CaptureTick();
    flush_.store(false);
    bool stopping = stop_.load();
    int signo = signal_.exchange(0);
    if (signo != 0 && signal_final_.load()) {
      Finish(static_cast<uint64_t>(signo));
      stopped_.store(true);
      signal_done_.fetch_add(1);
      return;
    }
    if (reconnecting_) {
      TryReconnect();
    }
    if (!stopping && TcpSyncWanted() && rt_.Now() >= next_tcp_sync_ns_) {
      TcpEpoch(std::max(1u, rt_.config().clock_sync_rounds / 2));
    }
    ShipOnce();
    if (signo != 0) {
      signal_done_.fetch_add(1);
    }
    if (hang_abort_) {
      EndForHangAbort();
      return;
    }
    if (stopping) {
      break;
    }
  }
  Finish(0);
  stopped_.store(true);
}

}  // namespace commprof
