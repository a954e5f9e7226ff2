// Ingest: the single HDF5 writer thread and the queue that feeds it. Network sessions and
// `commprof merge` hand it decoded frames, which it turns into the writer's storage types; it
// alone touches the Hdf5Writer, flushing it every flush period so a killed job leaves a readable
// file.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"
#include "core/wire.h"

namespace commprof {

// What a hello finds when it claims its rank (see Ingest::ClaimRank).
struct RankClaim {
  enum class Kind { kNew, kResume, kTaken };
  Kind kind = Kind::kNew;
  uint64_t generation = 0;     // which of the rank's streams this is: frames of older ones are ignored
  uint64_t next_batch = 0;     // kResume: batches below this are already stored (resends are skipped)
  uint32_t strings_known = 0;  // kResume: string ids below this are already stored
  uint64_t batches_lost = 0;   // kResume: gaps counted by the earlier streams
  std::string why;             // kTaken: why the rank cannot be claimed
};

class Ingest {
 public:
  static Result<std::unique_ptr<Ingest>> Start(const std::string& path, const JobMeta& meta,
                                               const WriterOptions& options, uint32_t flush_ms = 1000);
  ~Ingest();

  // Reserves a rank for a stream. A rank is one process: a hello from the same process (pid,
  // host and start time) after its earlier stream ended without a bye resumes it (a reconnect, or
  // the spool a collector wrote after losing its connection); the same process while its earlier
  // stream is still open supersedes that stream (the collector gave up on it, e.g. a late
  // hello-ack); any other hello for a claimed rank is refused.
  RankClaim ClaimRank(const wire::Hello& hello);

  // Frames as ranks send them; the writer gets its own types (RankDescription, ...). Each carries
  // the claim's generation: a superseded stream's frames are dropped here.
  void OpenRank(const wire::Hello& hello);
  void Strings(uint32_t rank, uint64_t generation, wire::Strings strings);
  void Events(uint32_t rank, uint64_t generation, uint64_t batch_seq, std::vector<commprof_event> events);
  void Clock(uint32_t rank, uint64_t generation, wire::Clock clock);
  // The stream ended. A bye closes the rank for good. Any other end is held back until Finish,
  // since the same process may resume; `batches_lost` is the total over the rank's streams.
  void CloseRank(uint32_t rank, uint64_t generation, RankEnd end,
                 std::vector<std::pair<std::string, uint64_t>> counters, uint64_t batches_lost, std::string reason);

  // A rank a relay stored in its shard (docs/scale.md#relays): claimed here as done, so that no
  // hello or spool can claim it again, and linked into the file (Hdf5Writer::LinkRank). False,
  // and nothing done, when the rank is already claimed. `events` counts in events_written().
  bool LinkShardRank(uint32_t rank, uint32_t world_size, const std::string& shard_file, uint64_t events);
  // The world size a relay reported with none of its ranks stored (its shard failed first): the
  // file still says how many ranks the job had, and lists those absent as missing.
  void NoteWorldSize(uint32_t world_size);

  // Runs `task` on the writer thread, after what is queued before it, with the writer's open file;
  // the file is flushed right after, so what it wrote survives a job killed next (the /hang group,
  // docs/hangs.md). A task's error is logged prefixed with `what`, and does not fail the file.
  // Not run once the writer has failed.
  using WriterTask = std::function<Status(hid_t file)>;
  void RunOnWriter(std::string what, WriterTask task);

  // What of `rank` is written and flushed to disk, so the aggregator can acknowledge it: batches
  // with batch_seq below `batches`, and whether the bye (the rank's end) is too. `never`: the
  // writer has failed, so nothing more becomes durable (a session then stops waiting for it).
  struct Durable {
    uint64_t batches = 0;
    bool bye = false;
    bool never = false;
  };
  Durable DurableOf(uint32_t rank) const;

  // Back-pressure (docs/scale.md#back-pressure): the events queued for the writer and not yet
  // written, in bytes, are kept under `limit` by the sessions, which stop reading while
  // Congested(). 0: no bound. A session may still queue the frame it was reading, so the queue's
  // peak stays below limit + (open connections x largest frame).
  void SetQueueLimit(uint64_t limit_bytes) { queue_limit_ = limit_bytes; }
  bool Congested() const { return queue_limit_ != 0 && queued_bytes_.load(std::memory_order_relaxed) > queue_limit_; }
  uint64_t queue_peak_bytes() const { return queue_peak_.load(std::memory_order_relaxed); }
  // Test aid (COMMPROF_TEST_WRITER_DELAY_US): the writer sleeps this long per 1000 events it
  // writes, to stand for a slow disk.
  void SetWriterDelayForTests(std::chrono::microseconds d) { writer_delay_us_ = d.count(); }

  // Drains the queue, finalizes and closes the file; returns the first write error, if any.
  // `incomplete`: Hdf5Writer::Finalize's.
  Status Finish(const std::string& incomplete = "");
  // Events in the file: appended so far; after Finish, those the file holds (after a write
  // error, the ones stored by the last complete flush).
  uint64_t events_written() const;
  // After a write error (the writer's failed state, hdf5_writer.h): events that the file does
  // not hold. 0 otherwise. Final after Finish.
  uint64_t events_not_stored() const;
  // The first write error ("writing PATH failed: REASON"), OK while there is none.
  Status write_error() const;
  std::vector<uint32_t> ranks_claimed() const;
  // The largest world size a rank's hello or a linked shard said (0 before any).
  uint32_t world_size_seen() const;
  // Ranks whose bye has been received.
  std::set<uint32_t> ranks_done() const;

 private:
  struct OpenCmd {
    RankDescription rank;
  };
  struct StringsCmd {
    uint32_t rank;
    StringBatch strings;
  };
  struct EventsCmd {
    uint32_t rank;
    uint64_t batch_seq;
    std::vector<commprof_event> events;
  };
  struct ClockCmd {
    uint32_t rank;
    RankClock clock;
  };
  struct CloseCmd {
    uint32_t rank;
    RankEnd end;
    std::vector<std::pair<std::string, uint64_t>> counters;
    uint64_t batches_lost;
    std::string reason;
  };
  struct TaskCmd {
    std::string what;
    WriterTask task;
  };
  struct LinkCmd {
    uint32_t rank;
    uint32_t world_size;
    std::string shard_file;
    uint64_t events;
  };
  using Command = std::variant<OpenCmd, StringsCmd, EventsCmd, ClockCmd, CloseCmd, TaskCmd, LinkCmd>;

  std::atomic<uint64_t> queued_bytes_{0};  // events bytes queued and not yet written
  std::atomic<uint64_t> queue_peak_{0};
  std::atomic<uint64_t> queue_limit_{0};
  std::atomic<int64_t> writer_delay_us_{0};

  // One rank's streams as seen by the network side (under mu_).
  struct RankProgress {
    uint32_t pid = 0;
    uint64_t start_steady_ns = 0;
    std::string host;
    uint64_t generation = 0;
    bool said_bye = false;       // closed for good
    uint64_t next_batch = 0;     // batches queued for the writer
    uint32_t strings_known = 0;  // string ids queued for the writer
    uint64_t batches_lost = 0;
    uint64_t written_batches = 0;  // writer thread: batches appended ...
    uint64_t durable_batches = 0;  // ... and flushed
    bool bye_written = false;      // writer thread: the bye's close is applied ...
    bool bye_durable = false;      // ... and flushed
    std::optional<CloseCmd> pending_close;
  };

  Ingest() = default;
  void Push(Command c);
  void PushLocked(Command c);  // with mu_ held
  // True when `generation` is the rank's current stream (under mu_).
  bool Current(uint32_t rank, uint64_t generation) const;
  void Loop();
  void Apply(Command& c);

  std::unique_ptr<Hdf5Writer> writer_;
  uint32_t flush_ms_ = 1000;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Command> queue_;
  std::map<uint32_t, RankProgress> progress_;
  uint32_t world_size_seen_ = 0;  // under mu_
  uint32_t world_noted_ = 0;      // under mu_: NoteWorldSize's, for the writer at Finish
  bool stop_ = false;
  Status first_error_;
  bool writer_failed_ = false;  // writer_->failed(), kept under mu_ for the sessions (DurableOf)
  uint64_t events_written_ = 0;
  uint64_t linked_events_ = 0;  // in the shards of relays, linked into the file
  uint64_t events_not_stored_ = 0;
  std::thread thread_;
  bool finished_ = false;
};

}  // namespace commprof
