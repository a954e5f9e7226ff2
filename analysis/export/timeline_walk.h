// The job's merged timeline, walked once for every trace format (docs/chrome-trace.md and
// docs/perfetto-trace.md are the user-facing contracts).
//
// Purpose: what a timeline shows (which ranks, where each event sits, lanes, flows, counters, the
// time origin, a cut in time) is decided here, once; an encoder only spells it (Chrome JSON,
// Perfetto protobuf), so both formats show the same trace.
// Concepts: one *process* per rank; one *track* per host thread (the event's thread_id) or GPU
// stream (device, thread_id); a track whose slices overlap partially is split into *lanes*
// (LaneAssigner), each of which nests; lane ids are unique across the trace and above every
// rank + 1. *Flows* link each matched blocking collective instance from the last arriver's slice
// to every other participant's slice (flow id = the instance's base + the arrival's index).
// *Counters*: bytes in use per (rank, device, memory kind). The *origin* is the earliest aligned
// event of the exported ranks; every time handed to an encoder is ns since the origin.
// The *cut* (--time-range, --steps) keeps the events that overlap it, the flows whose two slices
// are both kept, and each counter's level at the cut's start plus its changes inside it; it never
// moves the origin, so a cut trace shows the times of the whole one.
// Operation, bounded memory: the instance table (the report's figures) is built first, on the same
// read of the file that finds the origin and the step marks; then each rank in turn is loaded (its
// events and string table only), sorted per track, split into lanes and handed to the encoder,
// which writes through a fixed-size buffer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "analysis/load/stack_table.h"
#include "commprof/event.h"
#include "core/status.h"

namespace commprof {

struct TraceExportProgress {
  uint32_t ranks_done = 0;
  uint32_t ranks_total = 0;
  uint64_t events_written = 0;
  uint64_t bytes_written = 0;
};

// A cut in time: [from, to) in ns since the origin (--time-range FROM:TO).
struct TraceTimeRange {
  int64_t from_ns = 0;
  int64_t to_ns = INT64_MAX;
};

// Steps first..last (--steps A-B): from the earliest start of step `first` on an exported rank to
// the latest end of step `last` (docs/metrics.md §10's step intervals).
struct TraceStepRange {
  uint64_t first = 0;
  uint64_t last = 0;
};

struct TraceExportStats;
class TraceSink;

// A part of a trace, for `commprof export` as an MPI job (docs/scale.md#distributed-analysis): each
// process walks a contiguous block of the exported ranks, and the parts written one after the
// other in rank order are the one-process trace byte for byte. A part's bytes depend on the parts
// before it only through numbers every process finds on its own read of the file (each rank's
// tracks, memory series and rows: TraceRankNumbering, TrackLanes), so no part waits for another's.
struct TracePart {
  size_t first = 0;  // the exported ranks (in file order) with these indices: [first, last)
  size_t last = SIZE_MAX;
  bool begin = true;   // writes the trace's beginning
  bool finish = true;  // writes the trace's end (after append_later_parts)
  // When set, called once the instance table is read and before anything is written; an error
  // (another part cannot be written) ends the walk.
  std::function<Status()> ready;
};

// The read of the whole file a timeline starts with, before it writes anything: every collective
// instance matched and measured, and per rank its earliest event, its tracks, memory series and
// rows (the numbering, TracePart) and, when made for --steps, its step marks. It checks the
// non-blocking collectives as if it matched them (the trace draws no arrows for them), so it
// refuses every row the screening (ScreenEventRows) would leave out: a file whose string tables
// read and that it takes needs no screening. WalkTimeline makes it itself unless given one (TraceExportOptions::read).
struct TimelineRead {  // opaque: made by ReadTimeline only
  virtual ~TimelineRead() = default;
};
Result<std::shared_ptr<const TimelineRead>> ReadTimeline(const ProfileReader& reader, bool step_marks);

struct TraceExportOptions {
  std::vector<uint32_t> ranks;               // ranks to export; empty: all of them. A rank not in the file is an error.
  std::optional<TraceTimeRange> time_range;  // at most one of time_range and steps
  std::optional<TraceStepRange> steps;
  std::string output_name = "output";  // names the output in error messages
  // Called after each rank and about every million events; may be empty.
  std::function<void(const TraceExportProgress&)> progress;
  TracePart part;  // the whole trace unless set
  // ReadTimeline of this reader as it is now (its ranks), made with step marks when `steps` is set;
  // null: the walk reads the file itself.
  std::shared_ptr<const TimelineRead> read;
  // With part.finish: called after the part's ranks, before the trace's end is written; writes
  // the later parts to the sink and adds their figures to the stats (which the end reports).
  std::function<Status(TraceSink&, TraceExportStats&)> append_later_parts;
};

struct TraceExportStats {
  uint32_t ranks = 0;
  uint64_t events = 0;  // slices and instants written, one per recorded event
  uint64_t slices = 0;
  uint64_t instants = 0;
  uint64_t tracks = 0;              // distinct (rank, device, thread or stream) tracks, lanes not counted
  uint64_t lanes_added = 0;         // extra lanes beyond one per track
  uint64_t flows = 0;               // arrows
  uint64_t counters = 0;            // counter samples: memory in use
  uint64_t counter_series = 0;      // counter tracks (one per rank, device and memory kind with samples)
  uint64_t events_cut = 0;          // events left out by the cut
  uint64_t bytes = 0;               // bytes written
  int64_t origin_reference_ns = 0;  // time 0 on the reference clock
  bool cut = false;                 // a cut was asked for; then:
  int64_t cut_from_ns = 0;          // [cut_from_ns, cut_to_ns) since the origin
  int64_t cut_to_ns = INT64_MAX;
};

// The byte output: a buffer handed to the stream in large writes.
class TraceSink {
 public:
  TraceSink(std::ostream& out, std::string name) : out_(out), name_(std::move(name)) { buf_.reserve(kFlushAt + 4096); }
  std::string& buf() { return buf_; }
  // Flushes when the buffer is full; returns false once the stream failed.
  bool MaybeFlush() { return buf_.size() < kFlushAt || Flush(); }
  bool Flush();
  // Bytes written elsewhere (a later part of the trace), after what the buffer holds, without
  // copying them into it; false once the stream failed.
  bool WriteThrough(std::string_view bytes);
  // `n` bytes at bytes() written into the same file by someone else (a later part, written in
  // place by its own process): flushes what the buffer holds and moves the stream past them,
  // without writing them; false once the stream failed.
  bool Skip(uint64_t n);
  uint64_t bytes() const { return written_ + buf_.size(); }
  Status Error() const {
    return IoError(name_ + ": write failed (disk full, past the file-size limit, or the stream closed?)");
  }

 private:
  static constexpr size_t kFlushAt = 1 << 20;
  std::ostream& out_;
  std::string name_;
  std::string buf_;
  uint64_t written_ = 0;
};

// The arguments a slice carries, by name (both formats spell these names).
enum class TraceArgKey : uint8_t {
  kOp,
  kCommId,
  kSeq,
  kBytes,
  kRoot,
  kNonblocking,
  kIncomplete,
  kUntrackedComm,
  kInstance,
  kRanksSeen,
  kWaitNs,
  kSkewNs,
  kLastRank,
  kPeer,
  kTag,
  kRequests,
  kParentCommId,
  kSize,
  kRankInComm,
  kStep,
  kAddress,
  kMemoryKind,
  kTotalAllocated,
  kCorrelation,
  kStack,
  kCount,
};
const char* TraceArgName(TraceArgKey key);

struct TraceArg {
  enum class Type : uint8_t { kUint, kInt, kId, kBool, kString };
  TraceArgKey key;
  Type type;
  uint64_t u = 0;      // kUint, kId (a 64-bit identifier), kBool
  int64_t i = 0;       // kInt
  std::string_view s;  // kString: a static name (operation, memory kind, instance state)
};

// The ids of one track's lanes (docs/chrome-trace.md, "Tracks and lanes"): its first lane's, then
// its extra lanes' (a block of their own, above every first lane).
struct TrackLanes {
  uint64_t first = 0;
  uint64_t extra_first = 0;  // lane 2's id; lane L+1's is extra_first + L - 1
  uint32_t count = 1;
  uint64_t id(uint32_t l) const { return l == 0 ? first : extra_first + (l - 1); }
};

// What the exported ranks before a rank reserved, whatever a cut keeps of them: every track one
// first-lane id and one Perfetto packet sequence, every memory series one sequence and one counter
// track (docs/perfetto-trace.md). A rank's numbers start after them.
struct TraceRankNumbering {
  uint64_t tracks_before = 0;
  uint64_t series_before = 0;
};

// One recorded event as the timeline shows it.
struct TraceSlice {
  const commprof_event* event = nullptr;
  uint32_t rank = 0;
  uint64_t lane = 0;        // trace-wide lane id
  bool first_lane = false;  // the lane is its track's first
  int64_t start = 0;        // ns since the origin
  int64_t end = 0;          // == start for an instant
  bool instant = false;
  std::string_view name;
  uint32_t string_index = UINT32_MAX;  // index of `name` in the rank's string table, else UINT32_MAX
  std::span<const TraceArg> args;
  const std::vector<StackFrameInfo>* stack = nullptr;  // its call stack (--stacks), call site first
  std::string_view flow_name;                          // the collective's operation, when flows are set
  std::span<const uint64_t> flows_out;                 // flows from this slice (it arrived last)
  uint64_t flow_in = 0;                                // 0, or the flow into this slice
  int64_t flow_in_ts = 0;                              // where that flow lands: the last arrival, inside this slice
};

// What a timeline is spelled through. Calls come in this order: Begin (or Continue); per exported rank Rank,
// then per track BeginTrack, Slice..., EndTrack, then per counter series BeginCounter,
// CounterPoint...; Finish.
class TraceEncoder {
 public:
  struct Header {
    const ProfileInfo* info = nullptr;
    const std::vector<uint32_t>* ranks = nullptr;  // exported, sorted
    int64_t origin = 0;                            // on the reference clock
    const TraceExportStats* stats = nullptr;       // the cut is known at Begin, the counts at Finish
  };
  virtual ~TraceEncoder() = default;
  virtual void Begin(const Header& h) = 0;
  // The largest lane id the format can carry (Chrome JSON: 2^32 - 1, the tids its readers take).
  virtual uint64_t MaxLaneId() const = 0;
  // Instead of Begin, for a part after the first (TracePart): the parts before wrote the trace's
  // beginning and `ranks_before` exported ranks.
  virtual void Continue(size_t ranks_before) = 0;
  virtual void Rank(const RankInfo& r, const std::vector<std::string>& strings,
                    const TraceRankNumbering& numbering) = 0;
  // `sort_index` orders the rank's lanes (lane l of the track: sort_index + l).
  virtual void BeginTrack(const RankInfo& r, std::string_view name, const TrackLanes& lanes, uint32_t sort_index) = 0;
  virtual void Slice(const TraceSlice& s) = 0;
  virtual void EndTrack() = 0;
  virtual void BeginCounter(const RankInfo& r, std::string_view name) = 0;
  virtual void CounterPoint(int64_t ts, int64_t value) = 0;
  virtual void Finish(const Header& h) = 0;
};

// Walks `reader`'s file into `encoder`, writing through `sink`. Errors name the input file, or
// `opts.output_name` when writing fails; `stats` is filled as far as it got.
Status WalkTimeline(const ProfileReader& reader, TraceEncoder& encoder, TraceSink& sink, const TraceExportOptions& opts,
                    TraceExportStats& stats);

// Walks into an `Encoder` made from the sink (ChromeEncoder, PerfettoEncoder) writing to `out`;
// `stats` may be null.
template <class Encoder>
Status WalkInto(const ProfileReader& reader, std::ostream& out, const TraceExportOptions& opts,
                TraceExportStats* stats) {
  TraceExportStats local;
  TraceSink sink(out, opts.output_name);
  Encoder encoder(sink);
  return WalkTimeline(reader, encoder, sink, opts, stats != nullptr ? *stats : local);
}

// Parses --time-range FROM:TO (durations as ParseDurationNs: "1.5s", "200ms", "500" = ns; either
// side may be empty). False with `why` set when malformed.
bool ParseTimeRange(const std::string& spec, TraceTimeRange& out, std::string& why);
// Parses --steps A-B or A. False with `why` set when malformed.
bool ParseStepRange(const std::string& spec, TraceStepRange& out, std::string& why);

// What both formats call a rank's process: "rank R (HOST, pid PID)", or "rank R (missing)".
std::string RankProcessName(const RankInfo& r);
// Lane `l` (from 0) of the track named `track`: the track's name, then "TRACK (lane L+1)".
std::string LaneName(std::string_view track, uint32_t l);

// "YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ".
std::string FormatUtcNs(int64_t epoch_ns);

// The UTC time of reference-clock time `origin`, through the first rank that recorded when its
// collector started (on both clocks: utc(t) = start_utc + (t - reference(start_steady))).
struct OriginUtc {
  int64_t utc_ns = 0;
  uint32_t from_rank = 0;
};
std::optional<OriginUtc> FindOriginUtc(const ProfileInfo& info, int64_t origin);
// The largest clock error bound over the ranks (-1: none known).
int64_t WorstClockErrorBound(const ProfileInfo& info);

}  // namespace commprof
