#include "aggregator/ingest.h"

#include <algorithm>
#include <chrono>
#include <thread>

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

RankClaim Ingest::ClaimRank(const wire::Hello& hello) {
  std::lock_guard<std::mutex> lock(mu_);
  RankClaim claim;
  auto [it, fresh] = progress_.try_emplace(hello.rank);
  RankProgress& p = it->second;
  if (fresh) {
    p.pid = hello.pid;
    p.start_steady_ns = hello.start_steady_ns;
    p.host = hello.host;
    claim.generation = p.generation;
    return claim;
  }
  bool same_process = p.pid == hello.pid && p.start_steady_ns == hello.start_steady_ns && p.host == hello.host;
  if (!same_process) {
    claim.kind = RankClaim::Kind::kTaken;
    claim.why = "rank " + std::to_string(hello.rank) + " (pid " + std::to_string(hello.pid) +
                ") is already connected or stored (pid " + std::to_string(p.pid) + ")";
    return claim;
  }
  // The same process again: its earlier stream ended, or is being given up by the collector. Even
  // after its bye was stored it may send its spool (it did not get the confirmation): everything in
  // it is then skipped as already stored, and its end stays the first one.
  claim.kind = RankClaim::Kind::kResume;
  claim.generation = ++p.generation;
  claim.next_batch = p.next_batch;
  claim.strings_known = p.strings_known;
  claim.batches_lost = p.batches_lost;
  p.pending_close.reset();
  return claim;
}

bool Ingest::Current(uint32_t rank, uint64_t generation) const {
  auto it = progress_.find(rank);
  return it != progress_.end() && it->second.generation == generation;
}

Ingest::Durable Ingest::DurableOf(uint32_t rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = progress_.find(rank);
  if (it == progress_.end()) {
    return {0, false, writer_failed_};
  }
  return {it->second.durable_batches, it->second.bye_durable, writer_failed_};
}

std::set<uint32_t> Ingest::ranks_done() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<uint32_t> out;
  for (const auto& [rank, p] : progress_) {
    if (p.said_bye) {
      out.insert(rank);
    }
  }
  return out;
}

uint32_t Ingest::world_size_seen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return world_size_seen_;
}

std::vector<uint32_t> Ingest::ranks_claimed() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint32_t> out;
  out.reserve(progress_.size());
  for (const auto& [rank, p] : progress_) {
    out.push_back(rank);
  }
  return out;
}

uint64_t Ingest::events_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_written_ + linked_events_;
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
  std::lock_guard<std::mutex> lock(mu_);
  PushLocked(std::move(c));
}

void Ingest::PushLocked(Command c) {
  queue_.push_back(std::move(c));
  cv_.notify_one();
}

bool Ingest::LinkShardRank(uint32_t rank, uint32_t world_size, const std::string& shard_file, uint64_t events) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = progress_.try_emplace(rank);
  if (!fresh) {
    return false;
  }
  world_size_seen_ = std::max(world_size_seen_, world_size);
  it->second.said_bye = true;  // the relay stored its whole stream
  it->second.bye_written = true;
  it->second.bye_durable = true;
  PushLocked(LinkCmd{rank, world_size, shard_file, events});
  return true;
}

void Ingest::NoteWorldSize(uint32_t world_size) {
  std::lock_guard<std::mutex> lock(mu_);
  world_size_seen_ = std::max(world_size_seen_, world_size);
  world_noted_ = std::max(world_noted_, world_size);
}

void Ingest::OpenRank(const wire::Hello& hello) {
  // The job id and the proof were checked by the session; the file keeps what describes the rank.
  std::lock_guard<std::mutex> lock(mu_);
  world_size_seen_ = std::max(world_size_seen_, hello.world_size);
  PushLocked(OpenCmd{
      RankDescription{hello.rank, hello.world_size, hello.pid, hello.start_steady_ns, hello.start_utc_ns, hello.host}});
}
void Ingest::Strings(uint32_t rank, uint64_t generation, wire::Strings s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!Current(rank, generation)) {
    return;
  }
  RankProgress& p = progress_[rank];
  // A resumed stream starts its table from id 0 again: only ids the file lacks go on.
  uint64_t end = uint64_t{s.first_id} + s.strings.size();
  if (end <= p.strings_known) {
    return;
  }
  if (s.first_id < p.strings_known) {
    s.strings.erase(s.strings.begin(), s.strings.begin() + (p.strings_known - s.first_id));
    s.first_id = p.strings_known;
  }
  p.strings_known = static_cast<uint32_t>(end);
  PushLocked(StringsCmd{rank, {s.first_id, std::move(s.strings)}});
}

void Ingest::Events(uint32_t rank, uint64_t generation, uint64_t batch_seq, std::vector<commprof_event> e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!Current(rank, generation)) {
    return;
  }
  RankProgress& p = progress_[rank];
  if (batch_seq < p.next_batch) {
    return;  // resent after a reconnect, and already stored
  }
  p.next_batch = batch_seq + 1;
  const uint64_t bytes = e.size() * sizeof(commprof_event);
  const uint64_t now = queued_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (now > queue_peak_.load(std::memory_order_relaxed)) {
    queue_peak_.store(now, std::memory_order_relaxed);  // under mu_: no other writer of the peak
  }
  PushLocked(EventsCmd{rank, batch_seq, std::move(e)});
}

void Ingest::Clock(uint32_t rank, uint64_t generation, wire::Clock c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!Current(rank, generation)) {
    return;
  }
  PushLocked(ClockCmd{rank, RankClock{c.offset_ns, c.drift_ppm, c.error_bound_ns, c.anchor_local_ns,
                                      std::move(c.method), std::move(c.points), std::move(c.samples)}});
}

void Ingest::RunOnWriter(std::string what, WriterTask task) { Push(TaskCmd{std::move(what), std::move(task)}); }

void Ingest::CloseRank(uint32_t rank, uint64_t generation, RankEnd end,
                       std::vector<std::pair<std::string, uint64_t>> counters, uint64_t batches_lost,
                       std::string reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!Current(rank, generation)) {
    return;
  }
  RankProgress& p = progress_[rank];
  if (p.said_bye) {
    return;  // a resent stream of a rank already closed: its first end stands
  }
  p.batches_lost = batches_lost;
  CloseCmd cmd{rank, end, std::move(counters), batches_lost, std::move(reason)};
  if (end != RankEnd::kComplete) {
    p.pending_close = std::move(cmd);  // the process may come back: decided at Finish
    return;
  }
  p.said_bye = true;
  PushLocked(std::move(cmd));
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
          if (const int64_t us = writer_delay_us_.load(std::memory_order_relaxed); us > 0) {
            // A slow disk takes time in proportion to what it writes: `us` per 1000 events.
            std::this_thread::sleep_for(std::chrono::microseconds(us * static_cast<int64_t>(cmd.events.size()) / 1000));
          }
          Status s = writer_->AppendEvents(cmd.rank, cmd.events);
          queued_bytes_.fetch_sub(cmd.events.size() * sizeof(commprof_event), std::memory_order_relaxed);
          if (s.ok()) {
            std::lock_guard<std::mutex> lock(mu_);
            events_written_ += cmd.events.size();
            progress_[cmd.rank].written_batches = cmd.batch_seq + 1;
          }
          return s;
        }
        if constexpr (std::is_same_v<T, ClockCmd>) {
          return writer_->SetClock(cmd.rank, cmd.clock);
        }
        if constexpr (std::is_same_v<T, TaskCmd>) {
          if (writer_->failed()) {
            return Status::Ok();  // the failure is reported once, already
          }
          if (Status s = cmd.task(writer_->file_id()); !s.ok()) {
            COMMPROF_LOG_ERROR("writer: %s: %s", cmd.what.c_str(), s.message().c_str());
          }
          return Status::Ok();
        }
        if constexpr (std::is_same_v<T, LinkCmd>) {
          Status s = writer_->LinkRank(cmd.rank, cmd.world_size, cmd.shard_file);
          if (s.ok()) {
            std::lock_guard<std::mutex> lock(mu_);
            linked_events_ += cmd.events;
          }
          return s;
        }
        if constexpr (std::is_same_v<T, CloseCmd>) {
          Status s = writer_->CloseRank(cmd.rank, cmd.end, cmd.counters, cmd.batches_lost, cmd.reason);
          if (s.ok() && cmd.end == RankEnd::kComplete) {
            std::lock_guard<std::mutex> lock(mu_);
            progress_[cmd.rank].bye_written = true;
          }
          return s;
        }
      },
      c);
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    writer_failed_ = writer_failed_ || writer_->failed();
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
    // A bye is acknowledged once everything before it is on disk, and its rank is waiting for
    // that acknowledgement to exit: flush at once rather than at the next period.
    bool bye_applied = false;
    for (auto& c : batch) {
      Apply(c);
      // A task's group (/hang) is wanted on disk at once too: the job may be killed right after.
      bye_applied = bye_applied || std::holds_alternative<CloseCmd>(c) || std::holds_alternative<TaskCmd>(c);
    }
    if (bye_applied || std::chrono::steady_clock::now() >= next_flush) {
      if (!writer_->failed()) {
        if (Status s = writer_->Flush(); !s.ok()) {
          COMMPROF_LOG_ERROR("writer: %s; nothing more is stored, events are counted", s.message().c_str());
          std::lock_guard<std::mutex> lock(mu_);
          writer_failed_ = writer_failed_ || writer_->failed();
          if (first_error_.ok() || first_error_.code() != StatusCode::kIoError) {
            first_error_ = s;
          }
        } else {
          // On disk now: what the sessions may acknowledge (never once a write failed: the
          // collectors then keep, and spool, what they sent).
          std::lock_guard<std::mutex> lock(mu_);
          if (!writer_->failed()) {
            for (auto& [rank, p] : progress_) {
              p.durable_batches = p.written_batches;
              p.bye_durable = p.bye_written;
            }
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

Status Ingest::Finish(const std::string& incomplete) {
  if (finished_) {
    return first_error_;
  }
  finished_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Streams that ended without a bye and never resumed: now their end is final.
    for (auto& [rank, p] : progress_) {
      if (p.pending_close.has_value()) {
        queue_.push_back(std::move(*p.pending_close));
        p.pending_close.reset();
      }
    }
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) {
    thread_.join();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    writer_->RaiseWorldSize(world_noted_);
  }
  Status fin = writer_->Finalize(incomplete);
  std::lock_guard<std::mutex> lock(mu_);
  if (!fin.ok() && (first_error_.ok() || first_error_.code() != StatusCode::kIoError)) {
    first_error_ = fin;
  }
  events_not_stored_ = writer_->events_not_stored();
  events_written_ = writer_->events_stored();
  return first_error_;
}

}  // namespace commprof
