#include "analysis/export/timeline_walk.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <map>
#include <tuple>
#include <utility>

#include "analysis/compare/run_diff.h"
#include "analysis/export/chrome_trace.h"
#include "analysis/export/lane_assigner.h"
#include "analysis/match/collective_instances.h"
#include "analysis/match/collective_key_index.h"
#include "analysis/metrics/memory_usage.h"
#include "analysis/metrics/step_table.h"
#include "analysis/metrics/wait_metrics.h"
#include "core/schema/enums.h"

namespace commprof {

bool TraceSink::Flush() {
  if (!buf_.empty()) {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    written_ += buf_.size();
    buf_.clear();
  }
  return static_cast<bool>(out_);
}

bool TraceSink::WriteThrough(std::string_view bytes) {
  if (!Flush()) {
    return false;
  }
  out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  written_ += bytes.size();
  return static_cast<bool>(out_);
}

bool TraceSink::Skip(uint64_t n) {
  if (!Flush()) {
    return false;
  }
  out_.seekp(static_cast<std::streamoff>(n), std::ios::cur);
  written_ += n;
  return static_cast<bool>(out_);
}

const char* TraceArgName(TraceArgKey key) {
  static constexpr const char* kNames[] = {"op",
                                           "comm_id",
                                           "seq",
                                           "bytes",
                                           "root",
                                           "nonblocking",
                                           "incomplete",
                                           "untracked_comm",
                                           "instance",
                                           "ranks_seen",
                                           "wait_ns",
                                           "skew_ns",
                                           "last_rank",
                                           "peer",
                                           "tag",
                                           "requests",
                                           "parent_comm_id",
                                           "size",
                                           "rank_in_comm",
                                           "step",
                                           "address",
                                           "memory_kind",
                                           "total_allocated",
                                           "correlation",
                                           "stack"};
  static_assert(std::size(kNames) == static_cast<size_t>(TraceArgKey::kCount));
  return kNames[static_cast<size_t>(key)];
}

std::string RankProcessName(const RankInfo& r) {
  if (r.status == schema::RankStatusName(schema::RankStatus::kMissing)) {
    return "rank " + std::to_string(r.rank) + " (missing)";
  }
  return "rank " + std::to_string(r.rank) + " (" + r.host + ", pid " + std::to_string(r.pid) + ")";
}

std::string LaneName(std::string_view track, uint32_t l) {
  return l == 0 ? std::string(track) : std::string(track) + " (lane " + std::to_string(l + 1) + ")";
}

std::string FormatUtcNs(int64_t epoch_ns) {
  const int64_t secs = epoch_ns >= 0 ? epoch_ns / 1000000000 : -((-epoch_ns + 999999999) / 1000000000);
  const int64_t sub = epoch_ns - secs * 1000000000;
  time_t t = static_cast<time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%09lldZ", static_cast<long long>(sub));
  return buf;
}

std::optional<OriginUtc> FindOriginUtc(const ProfileInfo& info, int64_t origin) {
  for (const RankInfo& r : info.ranks) {
    if (r.start_utc_ns != 0) {
      const int64_t anchor = r.clock_model().ToReference(static_cast<int64_t>(r.start_steady_ns));
      return OriginUtc{static_cast<int64_t>(r.start_utc_ns) + (origin - anchor), r.rank};
    }
  }
  return std::nullopt;
}

int64_t WorstClockErrorBound(const ProfileInfo& info) {
  int64_t worst = -1;
  for (const RankInfo& r : info.ranks) {
    worst = std::max(worst, r.clock_error_bound_ns);
  }
  return worst;
}

namespace {

// "1.001s", "250us", "7" (ns) -> ns, exactly: digits and a decimal fraction read as integers (a
// double would make 1.001 s 1000999999 ns). A fraction finer than a ns is rounded to the nearest.
std::optional<int64_t> ParseExactDurationNs(std::string_view text) {
  size_t i = 0;
  uint64_t whole = 0, frac = 0, frac_scale = 1;
  bool digits = false;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, digits = true) {
    whole = whole * 10 + static_cast<uint64_t>(text[i] - '0');
    if (whole > static_cast<uint64_t>(INT64_MAX)) {
      return std::nullopt;
    }
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, digits = true) {
      if (frac_scale < 10000000000ull) {  // 10 decimals: a s to the ns, and the digit that rounds it
        frac = frac * 10 + static_cast<uint64_t>(text[i] - '0');
        frac_scale *= 10;
      }
    }
  }
  const double unit = DurationUnitNs(text.substr(i));
  if (!digits || unit == 0) {
    return std::nullopt;
  }
  const auto per = static_cast<uint64_t>(unit);                      // 1, 1e3, 1e6 or 1e9: exact
  const uint64_t part = (frac * per + frac_scale / 2) / frac_scale;  // frac * per < 1e19: no overflow
  if (whole > (static_cast<uint64_t>(INT64_MAX) - part) / per) {
    return std::nullopt;
  }
  return static_cast<int64_t>(whole * per + part);
}

}  // namespace

bool ParseTimeRange(const std::string& spec, TraceTimeRange& out, std::string& why) {
  const size_t colon = spec.find(':');
  if (colon == std::string::npos || spec.find(':', colon + 1) != std::string::npos) {
    why = "give FROM:TO, e.g. 2s:3.5s, 120ms: or :500ms (ns since the trace's time 0; units ns, us, ms, s)";
    return false;
  }
  const std::string from = spec.substr(0, colon), to = spec.substr(colon + 1);
  if (from.empty() && to.empty()) {
    why = "both ends are empty: give FROM, TO or both (FROM:TO)";
    return false;
  }
  TraceTimeRange r;
  for (const auto& [text, into] : {std::pair{from, &r.from_ns}, std::pair{to, &r.to_ns}}) {
    if (text.empty()) {
      continue;
    }
    const std::optional<int64_t> ns = ParseExactDurationNs(text);
    if (!ns) {
      why = "'" + text + "' is not a duration such as 1.5s, 200ms, 40us or 500 (ns)";
      return false;
    }
    *into = *ns;
  }
  if (r.to_ns <= r.from_ns) {
    why = "the range is empty (TO must be after FROM)";
    return false;
  }
  out = r;
  return true;
}

bool ParseStepRange(const std::string& spec, TraceStepRange& out, std::string& why) {
  auto number = [](std::string_view s, uint64_t& v) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  const size_t dash = spec.find('-');
  TraceStepRange r;
  const bool ok = dash == std::string::npos ? number(spec, r.first) && ((r.last = r.first), true)
                                            : number(std::string_view(spec).substr(0, dash), r.first) &&
                                                  number(std::string_view(spec).substr(dash + 1), r.last);
  if (!ok) {
    why = "give a step number or a range of them, e.g. 5 or 5-8";
    return false;
  }
  if (r.last < r.first) {
    why = "the range is empty (" + std::to_string(r.last) + " is before " + std::to_string(r.first) + ")";
    return false;
  }
  out = r;
  return true;
}

namespace {

bool IsInstant(uint8_t kind) {
  return kind == COMMPROF_KIND_USER_MARK || kind == COMMPROF_KIND_NVTX_MARK || kind == COMMPROF_KIND_STEP;
}

// The instance table: every matched blocking collective instance, measured, found by
// (communicator, sequence number).
struct InstanceTable {
  struct Row {
    CollectiveInstance in;
    InstanceMetrics metrics;  // the report's per-instance figures (MeasureInstances)
    uint64_t flow_base = 0;   // flow id of arrival j is flow_base + j
  };
  std::vector<Row> rows;
  CollectiveKeyIndex by_key;  // numbers the rows: instance keys are unique

  const Row* Find(const CollectiveKey& key) const {
    const std::optional<uint32_t> number = by_key.Find(key);
    return number ? &rows[*number] : nullptr;
  }
};

// Where `rank`'s arrival in `in` is when the communicator's ranks are consecutive (the world, a
// block of it): rank - first rank. Past the end (or wrapped to huge, for a rank below the first)
// where it cannot be; ArrivalIndex checks it, the walk's prefetch only bounds it.
size_t GuessedArrival(const CollectiveInstance& in, uint32_t rank) {
  return in.arrivals.empty() ? SIZE_MAX : size_t{rank - in.arrivals.front().world_rank};
}

// The arrival of `rank` whose entry is `start` (a rank holds one arrival per instance unless the
// file is damaged; matching the time keeps duplicates apart too).
int32_t ArrivalIndex(const CollectiveInstance& in, uint32_t rank, int64_t start) {
  // Arrivals are sorted by rank, and a communicator's ranks are usually consecutive (the world, a
  // block of it): the arrival is then at rank - first rank, one cache line, where a binary search
  // over a large instance touches one line per step (each a miss: the walk goes from instance to
  // instance). Where the guess is not the rank's first arrival, the search decides.
  auto it = in.arrivals.end();
  const size_t guess = GuessedArrival(in, rank);
  if (guess < in.arrivals.size() && in.arrivals[guess].world_rank == rank &&
      (guess == 0 || in.arrivals[guess - 1].world_rank < rank)) {
    it = in.arrivals.begin() + static_cast<std::ptrdiff_t>(guess);
  } else {
    it = std::lower_bound(in.arrivals.begin(), in.arrivals.end(), rank,
                          [](const Arrival& a, uint32_t r) { return a.world_rank < r; });
  }
  for (; it != in.arrivals.end() && it->world_rank == rank; ++it) {
    if (it->start == start) {
      return static_cast<int32_t>(it - in.arrivals.begin());
    }
  }
  return -1;
}

// One event placed on its track, in reference-clock ns (the origin not yet subtracted).
struct Item {
  int64_t start;
  int64_t end;
  uint32_t index;  // in the rank's event vector
  uint32_t track;
  uint32_t lane;
};

struct TrackKey {
  bool gpu;
  uint16_t device;
  uint32_t stream;  // thread_id
  bool operator<(const TrackKey& o) const {
    return std::tie(gpu, device, stream) < std::tie(o.gpu, o.device, o.stream);
  }
  bool operator==(const TrackKey&) const = default;
};

TrackKey TrackOf(const commprof_event& e) { return TrackKey{e.device != COMMPROF_HOST_DEVICE, e.device, e.thread_id}; }

// Events that describe other events, not time: no track of their own (TakeCallSites drops them).
bool DescribesOthers(const commprof_event& e) {
  return e.kind == COMMPROF_KIND_CALL_SITE || e.kind == COMMPROF_KIND_STACK_FRAME;
}

// What one rank's read (ReadInstancesAndOrigin) finds for the numbering: its tracks and memory
// series, whether a cut keeps them or not, and its rows.
struct RankSeen {
  std::vector<TrackKey> tracks;  // sorted once the read is done
  std::vector<uint32_t> series;  // device << 8 | memory kind
  uint64_t rows = 0;
  TrackKey last{false, 0, 0};
  void Add(std::span<const commprof_event> chunk) {
    rows += chunk.size();
    for (const commprof_event& e : chunk) {
      if (DescribesOthers(e)) {
        continue;
      }
      const TrackKey key = TrackOf(e);
      if (tracks.empty() || !(key == last)) {  // a rank's rows mostly stay on one track a while
        if (std::find(tracks.begin(), tracks.end(), key) == tracks.end()) {
          tracks.push_back(key);
        }
        last = key;
      }
      if (e.kind == COMMPROF_KIND_MEM_ALLOC || e.kind == COMMPROF_KIND_MEM_FREE) {
        const uint32_t s = uint32_t{e.device} << 8 | e.subtype;
        if (std::find(series.begin(), series.end(), s) == series.end()) {
          series.push_back(s);
        }
      }
    }
  }
};

// What ReadTimeline reads, behind the opaque TimelineRead (its types are this file's own).
struct TimelineReadData final : TimelineRead {
  std::vector<uint32_t> ranks;       // the reader's ranks when read, in file order: the vectors below go by their index
  InstanceTable instances;           // the blocking instances (the trace's arrows and waits)
  std::vector<int64_t> earliest;     // aligned start of the rank's earliest event (INT64_MAX: none)
  std::vector<RankSeen> seen;        // tracks sorted
  std::vector<RankStepMarks> marks;  // with step_marks only
  bool step_marks = false;
};

}  // namespace

Result<std::shared_ptr<const TimelineRead>> ReadTimeline(const ProfileReader& reader, bool step_marks) {
  const ProfileInfo& info = reader.info();
  auto read = std::make_shared<TimelineReadData>();
  const size_t n = info.ranks.size();
  std::vector<ClockModel> models;
  for (const RankInfo& r : info.ranks) {
    read->ranks.push_back(r.rank);
    models.push_back(r.clock_model());
  }
  read->step_marks = step_marks;
  read->earliest.assign(n, INT64_MAX);
  read->seen.resize(n);
  read->marks.resize(step_marks ? n : 0);
  auto loaded = LoadCollectiveInstances(
      reader, true, /*nonblocking=*/false,
      [&](uint32_t k, std::span<const commprof_event> chunk) {
        int64_t& earliest = read->earliest[k];
        for (const commprof_event& e : chunk) {
          earliest = std::min(earliest, models[k].ToReference(static_cast<int64_t>(e.start_ns)));
        }
        read->seen[k].Add(chunk);
        if (step_marks) {
          AddStepMarks(chunk, read->marks[k]);
        }
      },
      /*check_nonblocking=*/true);
  if (!loaded.ok()) {
    return loaded.status();
  }
  for (RankSeen& seen : read->seen) {
    std::sort(seen.tracks.begin(), seen.tracks.end());
  }
  const int64_t threshold = SkewThresholdNs(info);
  InstanceTable& table = read->instances;
  table.rows.reserve(loaded.value().size());
  table.by_key = CollectiveKeyIndex(loaded.value().size());
  uint64_t next_flow = 1;
  for (CollectiveInstance& in : loaded.value()) {
    InstanceTable::Row row;
    row.metrics = MeasureInstance(in, threshold);
    std::vector<int64_t>().swap(row.metrics.transfers);  // the trace shows waits only: free the rest
    row.flow_base = next_flow;
    next_flow += in.arrivals.size();
    row.in = std::move(in);
    if (table.by_key.FindOrInsert(row.in.key()).second) {
      table.rows.push_back(std::move(row));
    }
  }
  return std::shared_ptr<const TimelineRead>(std::move(read));
}

namespace {

std::string TrackName(const TrackKey& k) {
  return k.gpu ? "GPU " + std::to_string(k.device) + " stream " + std::to_string(k.stream)
               : "thread " + std::to_string(k.stream);
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

class Walker {
 public:
  Walker(const ProfileReader& reader, TraceEncoder& encoder, TraceSink& sink, const TraceExportOptions& opts,
         TraceExportStats& stats)
      : reader_(reader), info_(reader.info()), enc_(encoder), sink_(sink), opts_(opts), stats_(stats) {}

  Status Run();

 private:
  Status SelectRanks();
  // The file's read (ReadTimeline, or the one given), and from it the origin, the numbering and the cut.
  Status ReadInstancesAndOrigin();
  Status ResolveCut(const std::vector<RankStepMarks>& marks);
  // Where each exported rank's numbers start (numbers_), from what the file's read saw of it.
  Status Number();
  // The ranks of the part, laid out and written.
  Status WalkPart();
  Status WalkRank(const RankInfo& r, size_t rank_index);
  Status WriteCounters(const RankInfo& r, std::span<const commprof_event> events, const ClockModel& model);
  void Emit(const RankInfo& r, const commprof_event& e, const Item& it, uint64_t lane, bool first_lane);
  // Emit's look-ups of the items ahead, made early (WalkRank): kFindAhead items ahead the row,
  // kArrivalAhead ahead the rank's arrival in it.
  static constexpr size_t kFindAhead = 12, kArrivalAhead = 6, kUpcoming = 16;
  const InstanceTable::Row* FindAndPrefetch(const commprof_event& e) const;
  static void PrefetchArrival(const InstanceTable::Row* row, uint32_t rank);
  void CollectiveArgs(const RankInfo& r, const commprof_event& e, const Item& it, TraceSlice& s);
  void TakeCallSites(const RankInfo& r, std::vector<commprof_event>& events);
  bool Selected(uint32_t rank) const { return std::binary_search(ranks_.begin(), ranks_.end(), rank); }
  // Whether [start, end] (reference clock, end >= start) is kept by the cut.
  bool InCut(int64_t start, int64_t end) const { return start < cut_to_ && end >= cut_from_; }
  bool InCut(const Arrival& a) const { return InCut(a.start, std::max(a.start, a.end)); }
  // Whether the last arrival falls inside participant `a`'s slice, where its arrow lands (3 ns
  // clear of its end, for the JSON's truncating readers): not for a participant that left before
  // the last rank arrived (a broadcast's root, a zero-byte call) or whose clock disagrees; the
  // arrow would point back in time. Decided on the arrivals, the same on both ends of the arrow.
  static bool Released(const Arrival& last, const Arrival& a) {
    return last.start <= std::max(a.start, std::max(a.start, a.end) - 3);
  }
  // The slice as the JSON readers see it (relative to the origin): the lanes hold in each view.
  LaneSlice Views(const Item& it) const {
    static constexpr MicrosReader kReaders[LaneSlice::kViews] = {MicrosReader::kExact, MicrosReader::kStrtodTruncate,
                                                                 MicrosReader::kDigitsTruncate};
    LaneSlice v;
    const int64_t ts = it.start - origin_, dur = it.end - it.start;
    for (size_t k = 0; k < LaneSlice::kViews; ++k) {
      v.start[k] = ReadBackNs(ts, kReaders[k]);
      v.end[k] = v.start[k] + ReadBackNs(dur, kReaders[k]);
    }
    return v;
  }
  void Progress(uint32_t ranks_done) {
    if (opts_.progress) {
      opts_.progress({ranks_done, static_cast<uint32_t>(ranks_.size()), stats_.events, sink_.bytes()});
    }
  }
  void Arg(TraceArgKey key, TraceArg::Type type, uint64_t u, int64_t i = 0, std::string_view s = {}) {
    args_[n_args_++] = TraceArg{key, type, u, i, s};
  }

  const ProfileReader& reader_;
  const ProfileInfo& info_;
  TraceEncoder& enc_;
  TraceSink& sink_;
  const TraceExportOptions& opts_;
  TraceExportStats& stats_;
  TraceEncoder::Header header_;
  std::vector<uint32_t> ranks_;               // selected, sorted
  std::shared_ptr<const TimelineRead> read_;  // a TimelineReadData: Read()
  const TimelineReadData& Read() const { return static_cast<const TimelineReadData&>(*read_); }
  int64_t origin_ = 0;
  int64_t cut_from_ = INT64_MIN, cut_to_ = INT64_MAX;  // reference clock
  // Lane ids are unique across the trace and above every pid (docs/chrome-trace.md): some JSON
  // readers give an event without a tid (process metadata) the tid of its pid. First lanes are
  // numbered from the largest rank + 2, in rank order, each exported rank's tracks (all of them,
  // kept by a cut or not) after those of the ranks before it; extra lanes above every first lane,
  // at the rows of the ranks before plus the track's place among the rank's sorted slices. So
  // every process of an export numbers its block alone, the same as one process would. Ids stay
  // within the format's MaxLaneId (Chrome JSON: 2^32 - 1, the tids its readers take).
  struct RankNumbers {
    TraceRankNumbering before;
    uint64_t rows_before = 0;
  };
  std::vector<RankNumbers> numbers_;  // by index in info_.ranks (exported ranks only)
  uint64_t first_lane_base_ = 1;
  uint64_t extra_lane_base_ = 1;                       // above every first lane
  const std::vector<std::string>* strings_ = nullptr;  // the current rank's string table
  std::string unknown_name_;
  std::array<TraceArg, 16> args_{};  // the current event's: at most 11 (a collective's)
  size_t n_args_ = 0;
  std::vector<uint64_t> flows_out_;
  uint64_t events_since_progress_ = 0;
  // Call sites (--stacks): every rank's stacks, and the current rank's CALL_SITEs, by the
  // (start, kind, communicator) of the API event they belong to.
  StackMap stacks_;
  std::map<std::tuple<uint64_t, uint8_t, uint64_t>, const std::vector<StackFrameInfo>*> call_sites_;
};

// Drops the rank's CALL_SITE and STACK_FRAME events (they describe other events, not time) and
// keeps what the API slices need to carry their stack.
void Walker::TakeCallSites(const RankInfo& r, std::vector<commprof_event>& events) {
  call_sites_.clear();
  if (!stacks_.empty()) {
    for (const commprof_event& e : events) {
      if (e.kind != COMMPROF_KIND_CALL_SITE) {
        continue;
      }
      if (auto it = stacks_.find({r.rank, static_cast<uint32_t>(e.seq)}); it != stacks_.end()) {
        call_sites_[{e.start_ns, e.subtype, e.comm_id}] = &it->second;
      }
    }
  }
  std::erase_if(events, [](const commprof_event& e) {
    return e.kind == COMMPROF_KIND_CALL_SITE || e.kind == COMMPROF_KIND_STACK_FRAME;
  });
}

Status Walker::SelectRanks() {
  if (opts_.ranks.empty()) {
    for (const RankInfo& r : info_.ranks) {
      ranks_.push_back(r.rank);
    }
    return Status::Ok();
  }
  ranks_ = opts_.ranks;
  std::sort(ranks_.begin(), ranks_.end());
  ranks_.erase(std::unique(ranks_.begin(), ranks_.end()), ranks_.end());
  for (uint32_t want : ranks_) {
    bool found = std::any_of(info_.ranks.begin(), info_.ranks.end(), [&](const RankInfo& r) { return r.rank == want; });
    if (!found) {
      return InvalidArgument(info_.path + ": rank " + std::to_string(want) + " is not in the file (it has " +
                             std::to_string(info_.ranks.size()) + " rank group(s))");
    }
  }
  return Status::Ok();
}

Status Walker::ReadInstancesAndOrigin() {
  if (opts_.read != nullptr) {
    read_ = opts_.read;
    std::vector<uint32_t> now;
    for (const RankInfo& r : info_.ranks) {
      now.push_back(r.rank);
    }
    if (Read().ranks != now || (opts_.steps && !Read().step_marks)) {
      return Internal(info_.path + ": the timeline was given a read of other ranks, or one without step marks");
    }
  } else {
    auto read = ReadTimeline(reader_, opts_.steps.has_value());
    if (!read.ok()) {
      return read.status();
    }
    read_ = std::move(read.value());
  }
  int64_t origin = INT64_MAX;
  for (size_t k = 0; k < info_.ranks.size(); ++k) {
    if (Selected(info_.ranks[k].rank)) {
      origin = std::min(origin, Read().earliest[k]);
    }
  }
  origin_ = origin != INT64_MAX ? origin : 0;  // no event at all: nothing is relative to it
  stats_.origin_reference_ns = origin_;
  COMMPROF_RETURN_IF_ERROR(Number());
  if (!opts_.steps) {
    return ResolveCut({});
  }
  std::vector<RankStepMarks> marks(info_.ranks.size());  // the exported ranks' only
  for (size_t k = 0; k < info_.ranks.size(); ++k) {
    if (Selected(info_.ranks[k].rank)) {
      marks[k] = Read().marks[k];
    }
  }
  return ResolveCut(marks);
}

Status Walker::Number() {
  for (const RankInfo& r : info_.ranks) {
    first_lane_base_ = std::max<uint64_t>(first_lane_base_, uint64_t{r.rank} + 2);
  }
  numbers_.assign(info_.ranks.size(), RankNumbers{});
  TraceRankNumbering sum;
  uint64_t rows = 0;
  for (size_t k = 0; k < info_.ranks.size(); ++k) {
    if (!Selected(info_.ranks[k].rank)) {
      continue;
    }
    const RankSeen& seen = Read().seen[k];
    numbers_[k] = RankNumbers{sum, rows};
    sum.tracks_before += seen.tracks.size();
    sum.series_before += seen.series.size();
    rows += seen.rows;
  }
  extra_lane_base_ = first_lane_base_ + sum.tracks_before;
  // Every id the walk could give (an extra lane's is below its rank's rows' end) fits the format,
  // or the export stops here, before anything is written.
  if (extra_lane_base_ + rows > enc_.MaxLaneId()) {
    return InvalidArgument(info_.path + ": the exported ranks hold " + std::to_string(rows) +
                           " events, more than this format's lane ids reach (" + std::to_string(enc_.MaxLaneId()) +
                           " at most: the lanes of overlapping slices are numbered by event); export fewer ranks "
                           "(--ranks), or as --format perfetto");
  }
  return Status::Ok();
}

Status Walker::ResolveCut(const std::vector<RankStepMarks>& marks) {
  if (opts_.time_range) {
    cut_from_ = SaturatingAdd(origin_, opts_.time_range->from_ns);
    cut_to_ = SaturatingAdd(origin_, opts_.time_range->to_ns);
  } else if (opts_.steps) {
    const StepModel model = BuildStepModel(info_, marks);
    const TraceStepRange want = *opts_.steps;
    const std::string asked = want.first == want.last ? std::to_string(want.first)
                                                      : std::to_string(want.first) + "-" + std::to_string(want.last);
    if (model.empty()) {
      return InvalidArgument(info_.path + ": --steps " + asked +
                             ": the ranks exported mark no steps (commprof_step(), MPI_Pcontrol, or an imported "
                             "trace's ProfilerStep#N)");
    }
    int64_t from = INT64_MAX, to = INT64_MIN;
    for (const std::vector<RankStep>& steps : model.ranks) {
      for (const RankStep& s : steps) {
        if (s.step >= want.first && s.step <= want.last) {
          from = std::min(from, s.start_ns);
          to = std::max(to, s.end_ns);
        }
      }
    }
    if (from == INT64_MAX) {
      return InvalidArgument(info_.path + ": --steps " + asked + ": no exported rank marks such a step (the file's " +
                             "steps: " + std::to_string(model.numbers.front()) + "-" +
                             std::to_string(model.numbers.back()) + ", " + std::to_string(model.numbers.size()) +
                             " step number(s))");
    }
    cut_from_ = from;
    // Half-open: step B ends where a rank's step B + 1 begins, which is not kept (a step of no
    // length keeps its instant).
    cut_to_ = to > from ? to : from + 1;
  } else {
    return Status::Ok();
  }
  stats_.cut = true;
  stats_.cut_from_ns = std::max<int64_t>(0, cut_from_ - origin_);
  stats_.cut_to_ns = cut_to_ == INT64_MAX ? INT64_MAX : cut_to_ - origin_;
  return Status::Ok();
}

void Walker::CollectiveArgs(const RankInfo& r, const commprof_event& e, const Item& it, TraceSlice& s) {
  using T = TraceArg::Type;
  Arg(TraceArgKey::kOp, T::kString, 0, 0, schema::CollectiveOpName(e.subtype));
  Arg(TraceArgKey::kCommId, T::kId, e.comm_id);
  Arg(TraceArgKey::kSeq, T::kId, e.seq);
  Arg(TraceArgKey::kBytes, T::kUint, e.bytes);
  if (e.peer >= 0) {
    Arg(TraceArgKey::kRoot, T::kInt, 0, e.peer);
  }
  if (e.flags & COMMPROF_FLAG_NONBLOCKING) {
    Arg(TraceArgKey::kNonblocking, T::kBool, 1);
  }
  if (e.flags & COMMPROF_FLAG_INCOMPLETE) {
    Arg(TraceArgKey::kIncomplete, T::kBool, 1);
  }
  if (e.flags & COMMPROF_FLAG_UNTRACKED_COMM) {
    Arg(TraceArgKey::kUntrackedComm, T::kBool, 1);
  }
  if (!IsMatchableCollective(e)) {
    return;
  }
  const InstanceTable::Row* row = Read().instances.Find(KeyOf(e));
  const int32_t j = row != nullptr ? ArrivalIndex(row->in, r.rank, it.start) : -1;
  if (row == nullptr || j < 0) {
    Arg(TraceArgKey::kInstance, T::kString, 0, 0, "unmatched");
    return;
  }
  const CollectiveInstance& in = row->in;
  if (!in.complete()) {
    Arg(TraceArgKey::kInstance, T::kString, 0, 0, "incomplete");
    Arg(TraceArgKey::kRanksSeen, T::kUint, in.arrivals.size());
    return;
  }
  const Arrival& last = in.arrivals[static_cast<size_t>(row->metrics.last_index)];
  Arg(TraceArgKey::kWaitNs, T::kInt, 0, row->metrics.waits[static_cast<size_t>(j)]);
  Arg(TraceArgKey::kSkewNs, T::kInt, 0, row->metrics.skew_ns);
  Arg(TraceArgKey::kLastRank, T::kUint, last.world_rank);
  s.flow_name = schema::CollectiveOpName(in.op);
  if (j == row->metrics.last_index) {
    for (size_t k = 0; k < in.arrivals.size(); ++k) {
      const Arrival& a = in.arrivals[k];
      if (static_cast<int32_t>(k) != j && Selected(a.world_rank) && InCut(a) && Released(last, a)) {
        flows_out_.push_back(row->flow_base + k);
      }
    }
    stats_.flows += flows_out_.size();
    s.flows_out = flows_out_;
  } else if (Selected(last.world_rank) && InCut(last) && Released(last, in.arrivals[static_cast<size_t>(j)])) {
    // Lands inside this slice at the moment the last rank arrived (the release), so the arrow runs
    // forward in time; clamped into the slice if the clocks disagree, 3 ns clear of its end so that
    // a truncating JSON reader (MicrosReader) still sees it inside.
    s.flow_in = row->flow_base + static_cast<uint64_t>(j);
    s.flow_in_ts = std::clamp(last.start, it.start, std::max(it.start, it.end - 3)) - origin_;
  }
}

void Walker::Emit(const RankInfo& r, const commprof_event& e, const Item& it, uint64_t lane, bool first_lane) {
  using T = TraceArg::Type;
  TraceSlice s;
  s.event = &e;
  s.rank = r.rank;
  s.lane = lane;
  s.first_lane = first_lane;
  s.start = it.start - origin_;
  s.end = it.end - origin_;
  s.instant = IsInstant(e.kind);
  if (e.name_id < strings_->size() && !(*strings_)[e.name_id].empty()) {
    s.name = (*strings_)[e.name_id];
    s.string_index = e.name_id;
  } else if (e.name_id < strings_->size()) {
    s.name = schema::KindName(e.kind);
  } else {
    unknown_name_ = "<unknown name " + std::to_string(e.name_id) + ">";
    s.name = unknown_name_;
  }
  n_args_ = 0;
  flows_out_.clear();
  switch (e.kind) {
    case COMMPROF_KIND_MPI_COLLECTIVE:
    case COMMPROF_KIND_NCCL_COLLECTIVE:
      CollectiveArgs(r, e, it, s);
      break;
    case COMMPROF_KIND_MPI_P2P:
      Arg(TraceArgKey::kOp, T::kString, 0, 0, schema::OpName(e.subtype));
      Arg(TraceArgKey::kCommId, T::kId, e.comm_id);
      Arg(TraceArgKey::kPeer, T::kInt, 0, e.peer);
      Arg(TraceArgKey::kBytes, T::kUint, e.bytes);
      Arg(TraceArgKey::kTag, T::kUint, e.correlation);
      if (e.flags & COMMPROF_FLAG_NONBLOCKING) {
        Arg(TraceArgKey::kNonblocking, T::kBool, 1);
      }
      if (e.flags & COMMPROF_FLAG_INCOMPLETE) {
        Arg(TraceArgKey::kIncomplete, T::kBool, 1);
      }
      break;
    case COMMPROF_KIND_MPI_WAIT:
      Arg(TraceArgKey::kOp, T::kString, 0, 0, schema::OpName(e.subtype));
      Arg(TraceArgKey::kRequests, T::kUint, e.bytes);
      break;
    case COMMPROF_KIND_MPI_COMM:
      Arg(TraceArgKey::kOp, T::kString, 0, 0, schema::OpName(e.subtype));
      Arg(TraceArgKey::kCommId, T::kId, e.comm_id);
      Arg(TraceArgKey::kParentCommId, T::kId, e.seq);
      Arg(TraceArgKey::kSize, T::kUint, e.bytes);
      Arg(TraceArgKey::kRankInComm, T::kInt, 0, e.peer);
      break;
    case COMMPROF_KIND_STEP:
      Arg(TraceArgKey::kStep, T::kUint, e.seq);
      break;
    case COMMPROF_KIND_MEM_ALLOC:
    case COMMPROF_KIND_MEM_FREE:
      // seq is the block's address and, on imported torch records, comm_id torch's "Total
      // Allocated" (docs/file-format.md): named as such, never as a communicator and sequence.
      Arg(TraceArgKey::kBytes, T::kUint, e.bytes);
      Arg(TraceArgKey::kAddress, T::kUint, e.seq);
      Arg(TraceArgKey::kMemoryKind, T::kString, 0, 0, schema::MemoryKindName(e.subtype));
      if (e.comm_id != 0) {
        Arg(TraceArgKey::kTotalAllocated, T::kUint, e.comm_id);
      }
      if (e.correlation != 0) {
        Arg(TraceArgKey::kCorrelation, T::kUint, e.correlation);
      }
      break;
    case COMMPROF_KIND_MPI_INIT:
    case COMMPROF_KIND_MPI_FINALIZE:
    case COMMPROF_KIND_USER_RANGE:
    case COMMPROF_KIND_USER_MARK:
    case COMMPROF_KIND_NVTX_RANGE:
    case COMMPROF_KIND_NVTX_MARK:
      break;  // nothing beyond the name
    default:
      // GPU and NCCL records: whichever of the common fields are set.
      if (e.bytes != 0) {
        Arg(TraceArgKey::kBytes, T::kUint, e.bytes);
      }
      if (e.comm_id != 0) {
        Arg(TraceArgKey::kCommId, T::kId, e.comm_id);
        Arg(TraceArgKey::kSeq, T::kId, e.seq);
      }
      if (e.peer >= 0) {
        Arg(TraceArgKey::kPeer, T::kInt, 0, e.peer);
      }
      if (e.correlation != 0) {
        Arg(TraceArgKey::kCorrelation, T::kUint, e.correlation);
      }
  }
  s.args = std::span<const TraceArg>(args_.data(), n_args_);
  if (!call_sites_.empty()) {
    if (auto cs = call_sites_.find({e.start_ns, e.kind, e.comm_id}); cs != call_sites_.end()) {
      s.stack = cs->second;
    }
  }
  enc_.Slice(s);
  ++stats_.events;
  ++(s.instant ? stats_.instants : stats_.slices);
}

// The walk goes from instance to instance, each one's arrivals and waits a block of its own: read
// when Emit needs them, each is a cache miss (most of the export's time with 64 ranks). So the
// items ahead are looked up early and their blocks asked for: the start of the arrivals kFindAhead
// items early, then, once that is in, the line of this rank's arrival and its wait.
const InstanceTable::Row* Walker::FindAndPrefetch(const commprof_event& e) const {
  if (!IsMatchableCollective(e)) {
    return nullptr;
  }
  const InstanceTable::Row* row = Read().instances.Find(KeyOf(e));
  if (row != nullptr && !row->in.arrivals.empty()) {
    __builtin_prefetch(row->in.arrivals.data());
    __builtin_prefetch(row->metrics.waits.data());
  }
  return row;
}

void Walker::PrefetchArrival(const InstanceTable::Row* row, uint32_t rank) {
  if (row == nullptr) {
    return;
  }
  const size_t guess = GuessedArrival(row->in, rank);
  if (guess < row->in.arrivals.size()) {
    __builtin_prefetch(row->in.arrivals.data() + guess);
    if (guess < row->metrics.waits.size()) {
      __builtin_prefetch(row->metrics.waits.data() + guess);
    }
  }
}

Status Walker::WalkRank(const RankInfo& r, size_t rank_index) {
  auto strings = reader_.Strings(r.rank);
  if (!strings.ok()) {
    return strings.status();
  }
  strings_ = &strings.value();
  const RankNumbers& numbers = numbers_[rank_index];
  const std::vector<TrackKey>& tracks = Read().seen[rank_index].tracks;  // a track's first lane is its place here
  enc_.Rank(r, strings.value(), numbers.before);

  // One rank's events, in memory: the lane split needs each track sorted.
  std::vector<commprof_event> events;
  events.reserve(static_cast<size_t>(r.event_count));
  COMMPROF_RETURN_IF_ERROR(reader_.ForEachEventChunk(
      r.rank, [&](std::span<const commprof_event> chunk) { events.insert(events.end(), chunk.begin(), chunk.end()); }));
  TakeCallSites(r, events);
  if (events.size() > UINT32_MAX) {
    return InvalidArgument(info_.path + ": rank " + std::to_string(r.rank) +
                           " holds more than 2^32 events, more than the exporter can index");
  }
  std::map<TrackKey, uint32_t> track_ids;  // few tracks per rank
  std::vector<Item> items;
  items.reserve(events.size());
  const ClockModel model = r.clock_model();
  TrackKey last_key{false, 0, 0};
  uint32_t last_track = UINT32_MAX;
  for (size_t i = 0; i < events.size(); ++i) {
    const commprof_event& e = events[i];
    const int64_t start = model.ToReference(static_cast<int64_t>(e.start_ns));
    int64_t end = IsInstant(e.kind) ? start : model.ToReference(static_cast<int64_t>(e.end_ns));
    if (end < start) {
      end = start;  // a recorded end before the start, or a steep clock segment
    }
    if (!InCut(start, end)) {
      ++stats_.events_cut;
      continue;
    }
    const TrackKey key = TrackOf(e);
    if (last_track == UINT32_MAX || !(key == last_key)) {
      auto [it, inserted] = track_ids.emplace(key, static_cast<uint32_t>(track_ids.size()));
      last_key = key;
      last_track = it->second;
    }
    items.push_back(Item{start, end, static_cast<uint32_t>(i), last_track, 0});
  }
  // Order: by track in TrackKey order (host threads, then GPU streams), then start, then the
  // longer slice first so that an enclosing slice precedes what it encloses.
  std::vector<uint32_t> track_order(track_ids.size());
  {
    uint32_t k = 0;
    for (auto& [key, id] : track_ids) {
      track_order[id] = k;
      id = k++;  // from here on a track is its place in TrackKey order
    }
  }
  for (Item& it : items) {
    it.track = track_order[it.track];
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.track != b.track) {
      return a.track < b.track;
    }
    if (a.start != b.start) {
      return a.start < b.start;
    }
    if (a.end != b.end) {
      return a.end > b.end;
    }
    return a.index < b.index;
  });

  uint32_t sort_index = 0;
  size_t pos = 0;
  LaneAssigner lanes;
  std::array<const InstanceTable::Row*, kUpcoming> upcoming{};  // rows of the items ahead (or null)
  for (const auto& [key, id] : track_ids) {
    size_t end_pos = pos;
    while (end_pos < items.size() && items[end_pos].track == id) {
      ++end_pos;
    }
    lanes.Reset();
    for (size_t i = pos; i < end_pos; ++i) {
      Item& it = items[i];
      // An instant always fits lane 0: every slice still open there started before it and ends
      // after, in every view (zero length cannot cross anything).
      it.lane = IsInstant(events[it.index].kind) ? 0 : lanes.Place(Views(it));
    }
    TrackLanes ids;
    ids.count = std::max(1u, lanes.lanes());
    const auto reserved = std::lower_bound(tracks.begin(), tracks.end(), key);
    if (reserved == tracks.end() || !(*reserved == key)) {
      return Internal(info_.path + ": rank " + std::to_string(r.rank) + ": " + TrackName(key) +
                      " was not seen on the first read of the rank (the file changed while being read?)");
    }
    ids.first = first_lane_base_ + numbers.before.tracks_before + static_cast<uint64_t>(reserved - tracks.begin());
    // Extra lane L + 1 of the track whose slices start at `pos` takes the id of the L-th slice
    // after: a track has fewer lanes than slices, so the blocks of two tracks never meet.
    const uint64_t extra = extra_lane_base_ + numbers.rows_before + pos;  // within MaxLaneId (Number)
    ids.extra_first = ids.count > 1 ? extra : 0;
    ++stats_.tracks;
    stats_.lanes_added += ids.count - 1;
    enc_.BeginTrack(r, TrackName(key), ids, sort_index);
    sort_index += ids.count;
    for (size_t i = pos; i < end_pos; ++i) {
      if (i + kFindAhead < end_pos) {
        upcoming[(i + kFindAhead) % kUpcoming] = FindAndPrefetch(events[items[i + kFindAhead].index]);
      }
      if (i + kArrivalAhead < end_pos) {
        PrefetchArrival(upcoming[(i + kArrivalAhead) % kUpcoming], r.rank);
      }
      const Item& it = items[i];
      Emit(r, events[it.index], it, ids.id(it.lane), it.lane == 0);
      if (!sink_.MaybeFlush()) {
        return sink_.Error();
      }
      if (++events_since_progress_ >= (1u << 20)) {
        events_since_progress_ = 0;
        Progress(stats_.ranks);
      }
    }
    enc_.EndTrack();
    pos = end_pos;
  }
  COMMPROF_RETURN_IF_ERROR(WriteCounters(r, events, model));
  strings_ = nullptr;
  return sink_.MaybeFlush() ? Status::Ok() : sink_.Error();
}

// One counter series per device and memory kind that has allocation/free records: the bytes in
// use after each record (docs/metrics.md §7, the same series as /analysis/memory). Under a cut,
// the level at the cut's start (when a record came before it) and the records inside it.
Status Walker::WriteCounters(const RankInfo& r, std::span<const commprof_event> events, const ClockModel& model) {
  MemoryUsageBuilder builder(r.rank, model);
  builder.Add(events);
  for (const MemorySeries& m : builder.Finish()) {
    auto first = std::lower_bound(m.points.begin(), m.points.end(), cut_from_,
                                  [](const MemoryPoint& p, int64_t t) { return p.time_ns < t; });
    auto last =
        std::lower_bound(first, m.points.end(), cut_to_, [](const MemoryPoint& p, int64_t t) { return p.time_ns < t; });
    const bool level_before = first != m.points.begin() && cut_from_ > INT64_MIN;
    if (first == last && !level_before) {
      continue;
    }
    // Host memory (an imported trace's CPU allocations) is not "device 65535".
    ++stats_.counter_series;
    const std::string where =
        m.device == COMMPROF_HOST_DEVICE ? std::string("host") : "device " + std::to_string(m.device);
    enc_.BeginCounter(r, "memory in use: " + where + " " + schema::MemoryKindName(m.memory_kind));
    if (level_before) {
      enc_.CounterPoint(cut_from_ - origin_, std::prev(first)->bytes_in_use);
      ++stats_.counters;
    }
    for (auto p = first; p != last; ++p) {
      enc_.CounterPoint(p->time_ns - origin_, p->bytes_in_use);
      ++stats_.counters;
      if (!sink_.MaybeFlush()) {
        return sink_.Error();
      }
    }
  }
  return Status::Ok();
}

Status Walker::Run() {
  const TracePart& part = opts_.part;
  COMMPROF_RETURN_IF_ERROR(SelectRanks());
  COMMPROF_RETURN_IF_ERROR(ReadInstancesAndOrigin());
  auto stacks = LoadStacks(reader_);
  if (!stacks.ok()) {
    return stacks.status();
  }
  stacks_ = std::move(stacks.value());
  if (part.ready) {
    COMMPROF_RETURN_IF_ERROR(part.ready());
  }
  header_ = TraceEncoder::Header{&info_, &ranks_, origin_, &stats_};
  if (part.begin) {
    enc_.Begin(header_);
  } else {
    enc_.Continue(std::min(part.first, ranks_.size()));
  }
  Progress(0);
  COMMPROF_RETURN_IF_ERROR(WalkPart());
  if (part.finish) {
    if (opts_.append_later_parts) {
      if (!sink_.Flush()) {
        return sink_.Error();
      }
      COMMPROF_RETURN_IF_ERROR(opts_.append_later_parts(sink_, stats_));
    }
    enc_.Finish(header_);
  }
  return sink_.Flush() ? Status::Ok() : sink_.Error();
}

Status Walker::WalkPart() {
  size_t index = 0;  // of the rank among the exported ones
  for (size_t k = 0; k < info_.ranks.size(); ++k) {
    const RankInfo& r = info_.ranks[k];
    if (!Selected(r.rank)) {
      continue;
    }
    const size_t i = index++;
    if (i < opts_.part.first || i >= opts_.part.last) {
      continue;
    }
    COMMPROF_RETURN_IF_ERROR(WalkRank(r, k));
    ++stats_.ranks;
    Progress(stats_.ranks);
  }
  return Status::Ok();
}
}  // namespace

Status WalkTimeline(const ProfileReader& reader, TraceEncoder& encoder, TraceSink& sink, const TraceExportOptions& opts,
                    TraceExportStats& stats) {
  stats = TraceExportStats{};
  Walker w(reader, encoder, sink, opts, stats);
  Status st = w.Run();
  stats.bytes = sink.bytes();
  return st;
}

}  // namespace commprof
