// Ingest: the single HDF5 writer thread and the queue that feeds it. Network sessions and
// `commprof merge` hand it decoded frames, which it turns into the writer's storage types; it
// alone touches the Hdf5Writer, flushing it every flush period so a killed job leaves a readable
// file.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"
#include "core/wire.h"

namespace commprof {

class Ingest {
 public:
  static Result<std::unique_ptr<Ingest>> Start(const std::string& path, const JobMeta& meta,
                                               const WriterOptions& options, uint32_t flush_ms = 1000);
  ~Ingest();

  // Reserves a rank for one stream; false when another stream already holds it.
  bool ClaimRank(uint32_t rank);

  // Frames as ranks send them; the writer gets its own types (RankDescription, ...).
  void OpenRank(const wire::Hello& hello);
  void Strings(uint32_t rank, wire::Strings strings);
  void Events(uint32_t rank, std::vector<commprof_event> events);
  void Clock(uint32_t rank, wire::Clock clock);
  void CloseRank(uint32_t rank, RankEnd end, std::vector<std::pair<std::string, uint64_t>> counters,
                 uint64_t batches_lost, std::string reason);

  // Drains the queue, finalizes and closes the file; returns the first write error, if any.
  Status Finish();
  // Events in the file: appended so far; after Finish, those the file holds (after a write
  // error, the ones stored by the last complete flush).
  uint64_t events_written() const;
  // After a write error (the writer's failed state, hdf5_writer.h): events that the file does
  // not hold. 0 otherwise. Final after Finish.
  uint64_t events_not_stored() const;
  // The first write error ("writing PATH failed: REASON"), OK while there is none.
  Status write_error() const;
  std::vector<uint32_t> ranks_claimed() const;

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
  using Command = std::variant<OpenCmd, StringsCmd, EventsCmd, ClockCmd, CloseCmd>;

  Ingest() = default;
  void Push(Command c);
  void Loop();
  void Apply(Command& c);

  std::unique_ptr<Hdf5Writer> writer_;
  uint32_t flush_ms_ = 1000;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Command> queue_;
  std::set<uint32_t> claimed_;
  bool stop_ = false;
  Status first_error_;
  uint64_t events_written_ = 0;
  uint64_t events_not_stored_ = 0;
  std::thread thread_;
  bool finished_ = false;
};

}  // namespace commprof
