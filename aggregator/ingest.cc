#include "aggregator/ingest.h"

#include <chrono>

#include "core/h5/h5_util.h"
#include "core/log.h"

namespace commprof {

Result<std::unique_ptr<Ingest>> Ingest::Start(const std::string& path, const JobMeta& meta,
                                              const WriterOptions& options, uint32_t flush_ms) {
  auto w = Hdf5Writer::Create(path, meta, options);
  if (!w.ok()) {
    return w.status();
  }
  std::unique_ptr<Ingest> in(new Ingest());
  in->writer_ = std::move(w.value());
  in->flush_ms_ = flush_ms;
  in->thread_ = std::thread([p = in.get()] { p->Loop(); });
  return in;
}

Ingest::~Ingest() { (void)Finish(); }

bool Ingest::ClaimRank(uint32_t rank) {
  std::lock_guard<std::mutex> lock(mu_);
  return claimed_.insert(rank).second;
}

std::vector<uint32_t> Ingest::ranks_claimed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {claimed_.begin(), claimed_.end()};
}

uint64_t Ingest::events_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_written_;
}

uint64_t Ingest::events_not_stored() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_not_stored_;
}

Status Ingest::write_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_.code() == StatusCode::kIoError ? first_error_ : Status::Ok();
}

void Ingest::Push(Command c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(c));
  }
  cv_.notify_one();
}

void Ingest::OpenRank(const wire::Hello& hello) {
  // The job id and the proof were checked by the session; the file keeps what describes the rank.
  Push(OpenCmd{
      RankDescription{hello.rank, hello.world_size, hello.pid, hello.start_steady_ns, hello.start_utc_ns, hello.host}});
}
void Ingest::Strings(uint32_t rank, wire::Strings s) { Push(StringsCmd{rank, {s.first_id, std::move(s.strings)}}); }
void Ingest::Events(uint32_t rank, std::vector<commprof_event> e) { Push(EventsCmd{rank, std::move(e)}); }
void Ingest::Clock(uint32_t rank, wire::Clock c) {
  Push(ClockCmd{rank, RankClock{c.offset_ns, c.drift_ppm, c.error_bound_ns, c.anchor_local_ns, std::move(c.method),
                                std::move(c.points), std::move(c.samples)}});
}
void Ingest::CloseRank(uint32_t rank, RankEnd end, std::vector<std::pair<std::string, uint64_t>> counters,
                       uint64_t batches_lost, std::string reason) {
  Push(CloseCmd{rank, end, std::move(counters), batches_lost, std::move(reason)});
}

void Ingest::Apply(Command& c) {
  Status st = std::visit(
      [this](auto& cmd) -> Status {
        using T = std::decay_t<decltype(cmd)>;
        if constexpr (std::is_same_v<T, OpenCmd>) {
          return writer_->OpenRank(cmd.rank);
        }
        if constexpr (std::is_same_v<T, StringsCmd>) {
          return writer_->AppendStrings(cmd.rank, cmd.strings);
        }
        if constexpr (std::is_same_v<T, EventsCmd>) {
          Status s = writer_->AppendEvents(cmd.rank, cmd.events);
          if (s.ok()) {
            std::lock_guard<std::mutex> lock(mu_);
            events_written_ += cmd.events.size();
          }
          return s;
        }
        if constexpr (std::is_same_v<T, ClockCmd>) {
          return writer_->SetClock(cmd.rank, cmd.clock);
        }
        if constexpr (std::is_same_v<T, CloseCmd>) {
          return writer_->CloseRank(cmd.rank, cmd.end, cmd.counters, cmd.batches_lost, cmd.reason);
        }
      },
      c);
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    // A failed writer answers every later frame with the same error: said once, not per frame.
    bool repeat = writer_->failed() && first_error_.code() == StatusCode::kIoError;
    if (!repeat) {
      COMMPROF_LOG_ERROR("writer: %s%s", st.message().c_str(),
                         writer_->failed() ? "; nothing more is stored, events are counted" : "");
    }
    if (first_error_.ok() || (writer_->failed() && first_error_.code() != StatusCode::kIoError)) {
      first_error_ = st;
    }
  }
}

void Ingest::Loop() {
  // HDF5 keeps its error-printing setting per thread: this thread's must be silenced too.
  h5::QuietErrors();
  auto period = std::chrono::milliseconds(flush_ms_);
  auto next_flush = std::chrono::steady_clock::now() + period;
  for (;;) {
    std::deque<Command> batch;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, next_flush, [this] { return stop_ || !queue_.empty(); });
      batch.swap(queue_);
      stopping = stop_;
    }
    for (auto& c : batch) {
      Apply(c);
    }
    if (std::chrono::steady_clock::now() >= next_flush) {
      if (!writer_->failed()) {
        if (Status s = writer_->Flush(); !s.ok()) {
          COMMPROF_LOG_ERROR("writer: %s; nothing more is stored, events are counted", s.message().c_str());
          std::lock_guard<std::mutex> lock(mu_);
          if (first_error_.ok() || first_error_.code() != StatusCode::kIoError) {
            first_error_ = s;
          }
        }
      }
      next_flush = std::chrono::steady_clock::now() + period;
    }
    if (stopping) {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) {
        break;
      }
    }
  }
}

Status Ingest::Finish() {
  if (finished_) {
    return first_error_;
  }
  finished_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) {
    thread_.join();
  }
  Status fin = writer_->Finalize();
  std::lock_guard<std::mutex> lock(mu_);
  if (!fin.ok() && (first_error_.ok() || first_error_.code() != StatusCode::kIoError)) {
    first_error_ = fin;
  }
  events_not_stored_ = writer_->events_not_stored();
  events_written_ = writer_->events_stored();
  return first_error_;
}

}  // namespace commprof
