#include "collector/shipper.h"

#include <algorithm>
#include <chrono>

#include "collector/runtime.h"
#include "core/log.h"

namespace commprof {
namespace {
constexpr uint32_t kBatchEvents = 4096;  // 256 KiB per events frame
}

Shipper::Shipper(Runtime& runtime) : rt_(runtime), scratch_(std::make_unique<commprof_event[]>(kBatchEvents)) {
  const Identity& id = rt_.identity();
  hello_.rank = id.rank;
  hello_.world_size = id.world_size;
  hello_.pid = id.pid;
  hello_.host = id.host;
  hello_.job_id = rt_.config().job_id;
  hello_.start_steady_ns = rt_.start_anchor().steady_ns;
  hello_.start_utc_ns = rt_.start_anchor().utc_ns;
  out_.reserve(wire::EventsFrameSize(kBatchEvents) * 2);
  wire::AppendHello(hello_frame_, hello_, rt_.config().secret);  // see transport.h: here, not on our thread
}

Shipper::~Shipper() { Stop(); }

void Shipper::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Shipper::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  flush_ = true;
  cv_.notify_one();
}

void Shipper::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) {
      return;
    }
    stop_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

void Shipper::Connect() {
  auto t = rt_.transports().Connect(hello_frame_);
  if (t.ok()) {
    transport_ = std::move(t.value());
    return;
  }
  SwitchToSpool(t.status().message().c_str());
}

void Shipper::SwitchToSpool(const char* why) {
  transport_.reset();
  if (spooling_) {
    return;
  }
  spooling_ = true;
  std::string path;
  auto s = rt_.transports().OpenSpool(hello_, hello_frame_, &path);
  if (!s.ok()) {
    COMMPROF_LOG_ERROR("%s, and spooling failed too (%s): events from now on are dropped", why,
                       s.status().message().c_str());
    return;
  }
  COMMPROF_LOG_WARN("%s; spooling to %s (turn it into a file with `commprof merge`)", why, path.c_str());
  transport_ = std::move(s.value());
  strings_sent_ = 0;  // the spool is a complete stream of its own: strings from id 0
}

void Shipper::SendOrSpool(std::vector<uint8_t>& frames) {
  if (frames.empty()) {
    return;
  }
  if (transport_ != nullptr) {
    Status st = transport_->Send(frames);
    if (st.ok()) {
      ++batches_sent_;
      bytes_sent_ += frames.size();
      frames.clear();
      return;
    }
    if (spooling_) {
      COMMPROF_LOG_ERROR("%s; events from now on are dropped", st.message().c_str());
      transport_.reset();
    } else {
      // The aggregator went away: keep everything not yet acknowledged by writing it to the spool.
      SwitchToSpool(st.message().c_str());
      if (transport_ != nullptr) {
        std::vector<uint8_t> strings;
        auto all = rt_.strings().Since(0);
        wire::AppendStrings(strings, 0, all);
        strings_sent_ = static_cast<uint32_t>(all.size());
        if (transport_->Send(strings).ok() && transport_->Send(frames).ok()) {
          ++batches_sent_;
        }
      }
    }
  }
  frames.clear();
}

bool Shipper::TcpSyncWanted() const {
  return rt_.config().clock_sync && !rt_.identity().mpi && !rt_.clock_by_mpi() && !tcp_sync_failed_ &&
         transport_ != nullptr && !spooling_;
}

void Shipper::TcpEpoch(uint32_t rounds) {
  std::vector<ClockSample> epoch;
  std::vector<uint8_t> frame, payload;
  for (uint32_t k = 0; k < rounds; ++k) {
    ClockSample s;
    s.local_send_ns = rt_.Now();
    frame.clear();
    wire::AppendClockPing(frame, s.local_send_ns);
    wire::FrameHeader h;
    if (!transport_->Send(frame).ok() || !transport_->Receive(h, payload, 2000).ok()) {
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

void Shipper::ShipOnce() {
  if (uint64_t v = rt_.clock_version(); v != clock_sent_version_) {
    clock_sent_version_ = v;
    wire::AppendClock(out_, rt_.TakeClockFrame());
  }
  // Strings go first so every name id in the following events is already known to the reader.
  auto fresh = rt_.strings().Since(strings_sent_);
  if (!fresh.empty()) {
    wire::AppendStrings(out_, strings_sent_, fresh);
    strings_sent_ += static_cast<uint32_t>(fresh.size());
  }
  rt_.DrainAll(scratch_.get(), kBatchEvents, [this](const commprof_event* ev, uint32_t n) {
    wire::AppendEvents(out_, batch_seq_++, ev, n);
    events_shipped_ += n;
    if (out_.size() >= wire::EventsFrameSize(kBatchEvents)) {
      SendOrSpool(out_);
    }
  });
  SendOrSpool(out_);
}

void Shipper::Loop() {
  Connect();
  if (TcpSyncWanted()) {
    uint64_t t0 = rt_.Now();
    TcpEpoch(rt_.config().clock_sync_rounds);
    rt_.SetCounter("clock_sync_init_ns", rt_.Now() - t0);
  }
  const auto period = std::chrono::milliseconds(rt_.config().flush_ms);
  for (;;) {
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, period, [this] { return stop_ || flush_; });
      stopping = stop_;
      flush_ = false;
    }
    if (!stopping && TcpSyncWanted() && rt_.Now() >= next_tcp_sync_ns_) {
      TcpEpoch(std::max(1u, rt_.config().clock_sync_rounds / 2));
    }
    ShipOnce();
    if (stopping) {
      break;
    }
  }
  if (TcpSyncWanted()) {
    TcpEpoch(rt_.config().clock_sync_rounds);
  }
  wire::AppendClock(out_, rt_.TakeClockFrame());
  wire::Bye bye = rt_.Counters();
  bye.counters.emplace_back("events_shipped", events_shipped_);
  bye.counters.emplace_back("batches_sent", batches_sent_);
  bye.counters.emplace_back("spooled", spooling_ ? 1 : 0);
  wire::AppendBye(out_, bye);
  SendOrSpool(out_);
  transport_.reset();
}

}  // namespace commprof
