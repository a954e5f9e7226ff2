// Operation statistics (docs/metrics.md §12, `commprof stats`): one row per operation name —
// MPI calls, NCCL operations, CUDA kernels, copies and memsets, NVTX and user ranges, imported
// torch operators, CUDA API calls — with calls, total and self time, mean, p50/p99, min/max,
// bytes, bandwidth, and how the time spreads over the ranks (per-rank totals, imbalance, the
// slowest rank). Rows may be split further by communicator, message-size bucket and rank.
//
// Streaming: one rank at a time, its events in the reader's chunks (so `--window K` applies);
// memory per row is bounded (DurationSketch, a per-rank total per rank that has the row), and of
// the rank being read only the nested ranges self time needs are held. Self time: see
// ComputeOpStats.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "analysis/metrics/duration_sketch.h"
#include "commprof/event.h"
#include "core/status.h"

namespace commprof {

// The categories `--kinds` filters on, in output order (docs/metrics.md §12.1 maps them to kinds).
std::span<const char* const> StatsCategories();
// The category of an event, nullptr for an event the stats do not count (marks, steps, windows,
// allocations, call sites, proxy records, ...).
const char* StatsCategoryOf(const commprof_event& e);

// Message-size buckets (powers of two): bucket 0 holds 0 bytes, bucket k >= 1 holds
// [2^(k-1), 2^k) bytes.
int SizeBucketOf(uint64_t bytes);
uint64_t SizeBucketLow(int bucket);       // smallest byte count of the bucket
uint64_t SizeBucketHigh(int bucket);      // one past the largest (UINT64_MAX for bucket 64)
std::string SizeBucketLabel(int bucket);  // "0 B", "1-2 KiB" style: "[1 KiB, 2 KiB)"

struct StatsOptions {
  // Rows are always by (category, name); these split them further.
  bool by_comm = false;
  bool by_size = false;
  bool by_rank = false;
  std::vector<std::string> kinds;  // categories to keep (StatsCategories); empty: every one
  std::vector<uint32_t> ranks;     // ranks to read; empty: every readable rank. Others are ignored.
  size_t exact_samples = 4096;     // per row: exact percentiles up to this many calls (DurationSketch)
  // Run ScreenEventRows first, so a rank with a row the analyses cannot take is left out (and
  // named in reader.info().faults) like an unreadable one.
  bool screen_rows = true;
};

// One rank's share of a row.
struct RankTotal {
  uint32_t rank = 0;
  uint64_t calls = 0;
  int64_t total_ns = 0;
  int64_t self_ns = 0;
  uint64_t bytes = 0;
};

struct OpStatsRow {
  std::string category;  // StatsCategories()
  std::string name;
  std::optional<uint64_t> comm;    // by_comm only: the communicator id (0: the event has none)
  std::optional<int> size_bucket;  // by_size only: SizeBucketOf(bytes of each call)
  std::optional<uint32_t> rank;    // by_rank only
  uint64_t calls = 0;
  int64_t total_ns = 0;
  int64_t self_ns = 0;  // total minus the time of direct children (nested kinds); else = total
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  double mean_ns = 0.0;  // total_ns / calls
  int64_t p50_ns = 0;    // nearest rank over the calls' durations
  int64_t p99_ns = 0;
  bool percentiles_exact = true;  // false: from the histogram, within DurationSketch::kRelativeError
  uint64_t bytes = 0;
  std::optional<double> bandwidth_gbps;  // bytes / total_ns (GB/s = 1e9 B/s): transfers with bytes only
  // Ranks that have the row, in rank order (the others have zeros).
  std::vector<RankTotal> per_rank;
  // Over the ranks read (zeros included): max/mean of the per-rank totals and the rank with the
  // largest total (the lowest such rank on a tie). Empty with by_rank or when total is 0.
  std::optional<double> imbalance;
  std::optional<uint32_t> max_rank;
};

// Calls per message-size bucket of one transfer operation (every bucket with calls, ascending).
struct SizeHistogram {
  std::string category;
  std::string name;
  std::vector<std::pair<int, uint64_t>> buckets;  // (SizeBucketOf, calls)
};

struct OpStats {
  std::vector<OpStatsRow> rows;                // total_ns descending, then category, name, comm, size, rank
  std::vector<SizeHistogram> size_histograms;  // category, name order
  std::vector<uint32_t> ranks;                 // the ranks read
  uint64_t events_read = 0;                    // every event of those ranks (after --window)
  uint64_t events_counted = 0;                 // those that went into a row
  uint64_t incomplete_skipped = 0;             // INCOMPLETE events: no true end, not counted
  // Events the ranks read recorded that the file does not hold (dropped in the collector, lost
  // on the way: RankInfo::missing_events): the figures are short of them.
  uint64_t missing_events = 0;
  // Parts of the ranks read that are damaged although readable, one line each naming the file:
  // events whose name is not in their rank's string table (counted under their operation's name).
  std::vector<std::string> faults;
};

// Whether bandwidth is meaningful for an event's kind: MPI collectives and point-to-point, NCCL
// operations (kind 17), memcpy and memset.
bool StatsKindHasBandwidth(uint8_t kind);

// The statistics of some ranks before their rows are finished: what each process of `commprof
// stats` as an MPI job (docs/scale.md#distributed-analysis) computes for its contiguous block of
// ranks. Partials merged in rank order finish into exactly what one pass over every rank gives:
// sums and extremes add, the per-rank shares append, the sketches merge (DurationSketch::Merge).
struct OpStatsPartial {
  // A row being accumulated, under its key: (category, name, comm or 0, size bucket or -1, rank or -1).
  using RowKey = std::tuple<uint8_t, std::string, uint64_t, int, int64_t>;
  static constexpr size_t kNoHistogram = SIZE_MAX;
  struct Row {
    uint8_t category = 0;  // index into StatsCategories()
    std::string name;
    std::optional<uint64_t> comm;
    std::optional<int> size_bucket;
    std::optional<uint32_t> rank;
    bool bandwidth = false;
    size_t histogram = kNoHistogram;  // its operation's size histogram (index into histograms)
    uint64_t calls = 0;
    int64_t total_ns = 0, self_ns = 0, min_ns = 0, max_ns = 0;
    uint64_t bytes = 0;
    DurationSketch sketch;
    std::vector<RankTotal> per_rank;  // in rank order

    explicit Row(size_t exact) : sketch(exact) {}
    RankTotal& ShareOf(uint32_t r) {
      if (per_rank.empty() || per_rank.back().rank != r) {
        per_rank.push_back(RankTotal{r, 0, 0, 0, 0});
      }
      return per_rank.back();
    }
    RowKey Key() const {
      return {category, name, comm.value_or(0), size_bucket.value_or(-1), rank ? int64_t{*rank} : -1};
    }
  };

  size_t exact_samples = DurationSketch::kDefaultExactLimit;
  std::vector<Row> rows;
  std::map<RowKey, uint32_t> row_of;
  // Calls per size bucket (SizeBucketOf: 0-64) of each operation with bytes, by (category, name).
  std::map<std::pair<uint8_t, std::string>, size_t> histogram_of;
  std::vector<std::array<uint64_t, 65>> histograms;
  uint64_t events_read = 0;
  uint64_t events_counted = 0;
  uint64_t incomplete_skipped = 0;
  std::vector<std::string> faults;  // OpStats::faults of these ranks, in rank order

  // The index of the row under `key`, made (empty, named by the key) when there is none yet.
  uint32_t RowFor(const RowKey& key);
  // The histogram of the operation (category, name), made when there is none yet.
  size_t HistogramFor(uint8_t category, const std::string& name);
  // Adds `later`, computed over ranks that all come after this partial's.
  void Merge(OpStatsPartial&& later);
};

// The ranks ComputeOpStats reads, in rank order: those of the file that are not missing (after any
// screening) and that options.ranks asks for.
std::vector<uint32_t> StatsRanks(const ProfileReader& reader, const StatsOptions& options);
// Reads `ranks` (a contiguous run of StatsRanks) one at a time into a partial; no screening. Fails
// (naming the file) at the first rank whose strings or events cannot be read.
Result<OpStatsPartial> AccumulateOpStats(ProfileReader& reader, const StatsOptions& options,
                                         std::span<const uint32_t> ranks);
// The rows and totals of a partial of every one of StatsRanks.
OpStats FinishOpStats(const ProfileReader& reader, const StatsOptions& options, OpStatsPartial partial);
// A partial (or the error its process ended in) as bytes for another process of the same build.
std::string EncodeOpStatsPart(const Result<OpStatsPartial>& part);
Result<OpStatsPartial> DecodeOpStatsPart(std::string_view bytes);

// Reads the ranks of `reader` (after options.ranks) one at a time. Self time: the nested kinds —
// NVTX push/pop ranges (per thread and domain), user ranges (per thread), imported host ops,
// annotations and Python frames (per thread), imported GPU annotations (per device and stream) —
// have self time = duration minus the time their direct children cover (clamped to the range).
// Recorded ranges are taken in the end order they are stored in (holding only the children of
// open ranges); imported ones, or recorded ones found out of end order, are sorted by start and
// walked with a stack. Every other kind: self = total.
// Fails (naming the file) only when a rank's strings or events cannot be read.
Result<OpStats> ComputeOpStats(ProfileReader& reader, const StatsOptions& options);

}  // namespace commprof
