#include "analysis/export/chrome_trace.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "analysis/export/lane_assigner.h"
#include "analysis/load/stack_table.h"
#include "analysis/match/collective_instances.h"
#include "analysis/metrics/memory_usage.h"
#include "analysis/metrics/wait_metrics.h"
#include "core/schema/enums.h"

namespace commprof {

// ---- JSON text primitives ----

void AppendJsonEscaped(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Fast path: a run of printable ASCII that needs no escape.
    size_t j = i;
    while (j < n && p[j] >= 0x20 && p[j] < 0x80 && p[j] != '"' && p[j] != '\\') {
      ++j;
    }
    out.append(s.data() + i, j - i);
    i = j;
    if (i >= n) {
      break;
    }
    const unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        default:
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
      }
      ++i;
      continue;
    }
    // A multi-byte sequence: the allowed range of the second byte depends on the lead (this
    // excludes overlong forms, surrogates and code points above U+10FFFF); later bytes are
    // 80..BF. On the first byte out of range, the bytes consumed so far (the maximal subpart)
    // become one U+FFFD and decoding resumes at the offending byte.
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) {
        lo = 0xA0;
      }
      if (c == 0xED) {
        hi = 0x9F;
      }
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) {
        lo = 0x90;
      }
      if (c == 0xF4) {
        hi = 0x8F;
      }
    }
    if (len == 0) {  // 80..C1 or F5..FF can never start a character
      out += kReplacement;
      ++i;
      continue;
    }
    size_t k = 1;
    for (; k < len && i + k < n; ++k) {
      const unsigned char b = p[i + k];
      if (b < lo || b > hi) {
        break;
      }
      lo = 0x80;
      hi = 0xBF;
    }
    if (k == len) {
      out.append(s.data() + i, len);
    } else {
      out += kReplacement;
    }
    i += k;
  }
}

void AppendMicros(std::string& out, int64_t ns) {
  uint64_t u = static_cast<uint64_t>(ns);
  if (ns < 0) {
    out += '-';
    u = ~u + 1;  // |ns| without overflow at INT64_MIN
  }
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, u / 1000);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
  const auto frac = static_cast<unsigned>(u % 1000);
  const char dec[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                       static_cast<char>('0' + frac % 10)};
  out.append(dec, 4);
}

int64_t ReadBackNs(int64_t ns, MicrosReader reader) {
  if (reader == MicrosReader::kExact) {
    return ns;
  }
  const bool negative = ns < 0;
  const uint64_t u = negative ? ~static_cast<uint64_t>(ns) + 1 : static_cast<uint64_t>(ns);
  double us = 0;
  if (reader == MicrosReader::kStrtodTruncate) {
    // The decimal text denotes exactly u / 1000, and IEEE division rounds that quotient correctly,
    // as strtod does.
    us = static_cast<double>(u) / 1000.0;
  } else {
    // The parser accumulates the digits before and after the point separately.
    const uint64_t whole_us = u / 1000, frac_ns = u % 1000;
    us = static_cast<double>(whole_us) + static_cast<double>(frac_ns) / 1000.0;
  }
  const auto back = static_cast<int64_t>(us * 1000.0);  // truncation toward zero, as the readers do
  return negative ? -back : back;
}

namespace {

void AppendUint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

void AppendInt(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

// JavaScript viewers read numbers as doubles: an id above 2^53 would be shown rounded, so it is
// written as a decimal string instead (docs/chrome-trace.md).
void AppendId(std::string& out, uint64_t v) {
  constexpr uint64_t kMaxExact = 1ull << 53;
  if (v <= kMaxExact) {
    AppendUint(out, v);
  } else {
    out += '"';
    AppendUint(out, v);
    out += '"';
  }
}

void AppendQuoted(std::string& out, std::string_view s) {
  out += '"';
  AppendJsonEscaped(out, s);
  out += '"';
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

bool IsInstant(uint8_t kind) {
  return kind == COMMPROF_KIND_USER_MARK || kind == COMMPROF_KIND_NVTX_MARK || kind == COMMPROF_KIND_STEP;
}

bool IsMatchedKind(const commprof_event& e) { return IsMatchableCollective(e); }

// The output: a byte buffer handed to the stream in large writes.
class Sink {
 public:
  Sink(std::ostream& out, std::string name) : out_(out), name_(std::move(name)) { buf_.reserve(kFlushAt + 4096); }
  std::string& buf() { return buf_; }
  // Flushes when the buffer is full; returns false once the stream failed.
  bool MaybeFlush() { return buf_.size() < kFlushAt || Flush(); }
  bool Flush() {
    if (!buf_.empty()) {
      out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
      written_ += buf_.size();
      buf_.clear();
    }
    return static_cast<bool>(out_);
  }
  uint64_t bytes() const { return written_ + buf_.size(); }
  Status Error() const { return IoError(name_ + ": write failed (disk full or stream closed?)"); }

 private:
  static constexpr size_t kFlushAt = 1 << 20;
  std::ostream& out_;
  std::string name_;
  std::string buf_;
  uint64_t written_ = 0;
};

// The instance table: every matched blocking collective instance, measured, found by
// (communicator, sequence number).
struct InstanceTable {
  struct Row {
    CollectiveInstance in;
    InstanceMetrics metrics;  // the report's per-instance figures (MeasureInstances)
    uint64_t flow_base = 0;   // flow id of arrival j is flow_base + j
  };
  std::vector<Row> rows;
  std::unordered_map<CollectiveKey, uint32_t, CollectiveKeyHash> by_key;

  const Row* Find(const CollectiveKey& key) const {
    auto it = by_key.find(key);
    return it == by_key.end() ? nullptr : &rows[it->second];
  }
};

// The arrival of `rank` whose entry is `start` (a rank holds one arrival per instance unless the
// file is damaged; matching the time keeps duplicates apart too).
int32_t ArrivalIndex(const CollectiveInstance& in, uint32_t rank, int64_t start) {
  auto it = std::lower_bound(in.arrivals.begin(), in.arrivals.end(), rank,
                             [](const Arrival& a, uint32_t r) { return a.world_rank < r; });
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
};

std::string TrackName(const TrackKey& k) {
  return k.gpu ? "GPU " + std::to_string(k.device) + " stream " + std::to_string(k.stream)
               : "thread " + std::to_string(k.stream);
}

class TraceWriter {
 public:
  TraceWriter(const ProfileReader& reader, Sink& sink, const ChromeExportOptions& opts, ChromeExportStats& stats)
      : reader_(reader), info_(reader.info()), sink_(sink), opts_(opts), stats_(stats) {}

  Status Run();

 private:
  Status SelectRanks();
  Status BuildInstances();
  Status FindOrigin();
  Status WriteRank(const RankInfo& r);
  void WriteProcessMetadata(const RankInfo& r);
  void WriteThreadMetadata(uint32_t pid, uint32_t tid, const std::string& name, uint32_t sort_index);
  void WriteEvent(const RankInfo& r, const commprof_event& e, const Item& it, uint32_t tid);
  void WriteMemoryCounters(const RankInfo& r, std::span<const commprof_event> events, const ClockModel& model);
  void WriteCollectiveArgs(const RankInfo& r, const commprof_event& e, const Item& it, uint32_t tid,
                           std::string& flows);
  void WriteFlow(char phase, const CollectiveInstance& in, uint64_t id, uint32_t pid, uint32_t tid, int64_t ts,
                 std::string& into);
  void BeginEvent();
  Status Finish();
  bool Selected(uint32_t rank) const { return std::binary_search(ranks_.begin(), ranks_.end(), rank); }
  // The slice as printed (relative to the origin) and as each truncating reader reads it back.
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

  const ProfileReader& reader_;
  const ProfileInfo& info_;
  Sink& sink_;
  const ChromeExportOptions& opts_;
  ChromeExportStats& stats_;
  std::vector<uint32_t> ranks_;  // selected, sorted
  InstanceTable instances_;
  int64_t origin_ = 0;
  bool first_record_ = true;
  // tids are unique across the trace and above every pid (docs/chrome-trace.md): some readers give
  // an event without a tid (process metadata) the tid of its pid.
  uint32_t next_tid_ = 1;
  std::vector<std::string> names_;  // the current rank's string table, JSON-escaped
  uint64_t events_since_progress_ = 0;
  // Call sites (--stacks): every rank's stacks, and the current rank's CALL_SITEs, by the
  // (start, kind, communicator) of the API event they belong to.
  void TakeCallSites(const RankInfo& r, std::vector<commprof_event>& events);
  void AppendStack(size_t args_at, const commprof_event& e);
  StackMap stacks_;
  std::map<std::tuple<uint64_t, uint8_t, uint64_t>, const std::vector<StackFrameInfo>*> call_sites_;
};

// Drops the rank's CALL_SITE and STACK_FRAME events (they describe other events, not time) and
// keeps what the API slices need to carry their stack.
void TraceWriter::TakeCallSites(const RankInfo& r, std::vector<commprof_event>& events) {
  call_sites_.clear();
  if (stacks_.empty()) {
    return;
  }
  for (const commprof_event& e : events) {
    if (e.kind != COMMPROF_KIND_CALL_SITE) {
      continue;
    }
    if (auto it = stacks_.find({r.rank, static_cast<uint32_t>(e.seq)}); it != stacks_.end()) {
      call_sites_[{e.start_ns, e.subtype, e.comm_id}] = &it->second;
    }
  }
  std::erase_if(events, [](const commprof_event& e) {
    return e.kind == COMMPROF_KIND_CALL_SITE || e.kind == COMMPROF_KIND_STACK_FRAME;
  });
}

// args.stack: the slice's call stack as "function (file:line)" frames, the call site first
// (docs/chrome-trace.md). `args_at`: where the event's args began in the buffer.
void TraceWriter::AppendStack(size_t args_at, const commprof_event& e) {
  if (call_sites_.empty()) {
    return;
  }
  auto it = call_sites_.find({e.start_ns, e.kind, e.comm_id});
  if (it == call_sites_.end()) {
    return;
  }
  std::string& b = sink_.buf();
  if (b.size() > args_at) {
    b.pop_back();  // the args object's closing brace
    b += ",\"stack\":[";
  } else {
    b += ",\"args\":{\"stack\":[";
  }
  bool first = true;
  for (const StackFrameInfo& f : *it->second) {
    b += first ? "\"" : ",\"";
    AppendJsonEscaped(b, f.Label());
    b += '"';
    first = false;
  }
  b += "]}";
}

Status TraceWriter::SelectRanks() {
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

Status TraceWriter::BuildInstances() {
  auto loaded = LoadCollectiveInstances(reader_, true);
  if (!loaded.ok()) {
    return loaded.status();
  }
  std::vector<InstanceMetrics> measured = MeasureInstances(loaded.value(), SkewThresholdNs(info_));
  uint64_t next_flow = 1;
  instances_.rows.reserve(loaded.value().size());
  for (size_t k = 0; k < loaded.value().size(); ++k) {
    CollectiveInstance& in = loaded.value()[k];
    InstanceTable::Row row;
    row.metrics = std::move(measured[k]);
    std::vector<int64_t>().swap(row.metrics.transfers);  // the trace shows waits only: free the rest
    row.flow_base = next_flow;
    next_flow += in.arrivals.size();
    row.in = std::move(in);
    instances_.by_key.emplace(row.in.key(), static_cast<uint32_t>(instances_.rows.size()));
    instances_.rows.push_back(std::move(row));
  }
  return Status::Ok();
}

Status TraceWriter::FindOrigin() {
  int64_t origin = INT64_MAX;
  for (const RankInfo& r : info_.ranks) {
    if (!Selected(r.rank)) {
      continue;
    }
    ClockModel model = r.clock_model();
    COMMPROF_RETURN_IF_ERROR(reader_.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      for (const auto& e : chunk) {
        origin = std::min(origin, model.ToReference(static_cast<int64_t>(e.start_ns)));
      }
    }));
  }
  origin_ = origin != INT64_MAX ? origin : 0;  // no event at all: nothing is relative to it
  stats_.origin_reference_ns = origin_;
  return Status::Ok();
}

void TraceWriter::BeginEvent() {
  std::string& b = sink_.buf();
  if (first_record_) {
    b += "\n";
    first_record_ = false;
  } else {
    b += ",\n";
  }
}

void TraceWriter::WriteProcessMetadata(const RankInfo& r) {
  const uint32_t pid = r.rank + 1;
  std::string name = "rank " + std::to_string(r.rank);
  if (r.status == schema::RankStatusName(schema::RankStatus::kMissing)) {
    name += " (missing)";
  } else {
    name += " (" + r.host + ", pid " + std::to_string(r.pid) + ")";
  }
  std::string& b = sink_.buf();
  BeginEvent();
  b += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":";
  AppendUint(b, pid);
  b += ",\"args\":{\"name\":";
  AppendQuoted(b, name);
  b += "}}";
  BeginEvent();
  b += "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":";
  AppendUint(b, pid);
  b += ",\"args\":{\"sort_index\":";
  AppendUint(b, r.rank);
  b += "}}";
  if (r.status != schema::RankStatusName(schema::RankStatus::kComplete)) {
    BeginEvent();
    b += "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":";
    AppendUint(b, pid);
    b += ",\"args\":{\"labels\":";
    AppendQuoted(b, r.status);
    b += "}}";
  }
}

void TraceWriter::WriteThreadMetadata(uint32_t pid, uint32_t tid, const std::string& name, uint32_t sort_index) {
  std::string& b = sink_.buf();
  BeginEvent();
  b += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":";
  AppendUint(b, pid);
  b += ",\"tid\":";
  AppendUint(b, tid);
  b += ",\"args\":{\"name\":";
  AppendQuoted(b, name);
  b += "}}";
  BeginEvent();
  b += "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":";
  AppendUint(b, pid);
  b += ",\"tid\":";
  AppendUint(b, tid);
  b += ",\"args\":{\"sort_index\":";
  AppendUint(b, sort_index);
  b += "}}";
}

// A flow step of `in`: "s" on the last arriver's slice, "f" (bound to the enclosing slice) on
// another participant's. Both ends carry the same cat, name and id, which is how viewers pair them.
void TraceWriter::WriteFlow(char phase, const CollectiveInstance& in, uint64_t id, uint32_t pid, uint32_t tid,
                            int64_t ts, std::string& into) {
  into += ",\n{\"ph\":\"";
  into += phase;
  into += phase == 'f' ? "\",\"bp\":\"e\"" : "\"";
  into += ",\"cat\":\"commprof.flow\",\"name\":\"";
  into += schema::CollectiveOpName(in.op);
  into += "\",\"id\":";
  AppendUint(into, id);
  into += ",\"pid\":";
  AppendUint(into, pid);
  into += ",\"tid\":";
  AppendUint(into, tid);
  into += ",\"ts\":";
  AppendMicros(into, ts - origin_);
  into += '}';
}

void TraceWriter::WriteCollectiveArgs(const RankInfo& r, const commprof_event& e, const Item& it, uint32_t tid,
                                      std::string& flows) {
  std::string& b = sink_.buf();
  b += ",\"args\":{\"op\":\"";
  b += schema::CollectiveOpName(e.subtype);
  b += "\",\"comm_id\":";
  AppendId(b, e.comm_id);
  b += ",\"seq\":";
  AppendId(b, e.seq);
  b += ",\"bytes\":";
  AppendUint(b, e.bytes);
  if (e.peer >= 0) {
    b += ",\"root\":";
    AppendInt(b, e.peer);
  }
  if (e.flags & COMMPROF_FLAG_NONBLOCKING) {
    b += ",\"nonblocking\":true";
  }
  if (e.flags & COMMPROF_FLAG_INCOMPLETE) {
    b += ",\"incomplete\":true";
  }
  if (e.flags & COMMPROF_FLAG_UNTRACKED_COMM) {
    b += ",\"untracked_comm\":true";
  }
  if (IsMatchedKind(e)) {
    const InstanceTable::Row* row = instances_.Find(KeyOf(e));
    const int32_t j = row != nullptr ? ArrivalIndex(row->in, r.rank, it.start) : -1;
    if (row == nullptr || j < 0) {
      b += ",\"instance\":\"unmatched\"";
    } else if (!row->in.complete()) {
      b += ",\"instance\":\"incomplete\",\"ranks_seen\":";
      AppendUint(b, row->in.arrivals.size());
    } else {
      const CollectiveInstance& in = row->in;
      const Arrival& last = in.arrivals[static_cast<size_t>(row->metrics.last_index)];
      b += ",\"wait_ns\":";
      AppendInt(b, row->metrics.waits[static_cast<size_t>(j)]);
      b += ",\"skew_ns\":";
      AppendInt(b, row->metrics.skew_ns);
      b += ",\"last_rank\":";
      AppendUint(b, last.world_rank);
      const uint32_t pid = r.rank + 1;
      if (j == row->metrics.last_index) {
        for (size_t k = 0; k < in.arrivals.size(); ++k) {
          if (static_cast<int32_t>(k) == j || !Selected(in.arrivals[k].world_rank)) {
            continue;
          }
          WriteFlow('s', in, row->flow_base + k, pid, tid, it.start, flows);
          ++stats_.flows;
        }
      } else if (Selected(last.world_rank)) {
        // Bind inside this slice at the moment the last rank arrived (the release), so the arrow
        // runs forward in time; clamped into the slice if the clocks disagree, 3 ns clear of its
        // end so that a truncating reader (MicrosReader) still sees it inside.
        const int64_t ts = std::clamp(last.start, it.start, std::max(it.start, it.end - 3));
        WriteFlow('f', in, row->flow_base + static_cast<uint64_t>(j), pid, tid, ts, flows);
      }
    }
  }
  b += '}';
}

void TraceWriter::WriteEvent(const RankInfo& r, const commprof_event& e, const Item& it, uint32_t tid) {
  std::string& b = sink_.buf();
  BeginEvent();
  const bool instant = IsInstant(e.kind);
  b += instant ? "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"" : "{\"ph\":\"X\",\"cat\":\"";
  b += schema::KindName(e.kind);
  b += "\",\"name\":\"";
  if (e.name_id < names_.size() && !names_[e.name_id].empty()) {
    b += names_[e.name_id];
  } else if (e.name_id < names_.size()) {
    b += schema::KindName(e.kind);
  } else {
    b += "<unknown name ";
    AppendUint(b, e.name_id);
    b += '>';
  }
  b += "\",\"pid\":";
  AppendUint(b, r.rank + 1);
  b += ",\"tid\":";
  AppendUint(b, tid);
  b += ",\"ts\":";
  AppendMicros(b, it.start - origin_);
  if (!instant) {
    b += ",\"dur\":";
    AppendMicros(b, it.end - it.start);
  }
  std::string flows;
  const size_t args_at = b.size();
  switch (e.kind) {
    case COMMPROF_KIND_MPI_COLLECTIVE:
    case COMMPROF_KIND_NCCL_COLLECTIVE:
      WriteCollectiveArgs(r, e, it, tid, flows);
      break;
    case COMMPROF_KIND_MPI_P2P:
      b += ",\"args\":{\"op\":\"";
      b += schema::OpName(e.subtype);
      b += "\",\"comm_id\":";
      AppendId(b, e.comm_id);
      b += ",\"peer\":";
      AppendInt(b, e.peer);
      b += ",\"bytes\":";
      AppendUint(b, e.bytes);
      b += ",\"tag\":";
      AppendUint(b, e.correlation);
      if (e.flags & COMMPROF_FLAG_NONBLOCKING) {
        b += ",\"nonblocking\":true";
      }
      if (e.flags & COMMPROF_FLAG_INCOMPLETE) {
        b += ",\"incomplete\":true";
      }
      b += '}';
      break;
    case COMMPROF_KIND_MPI_WAIT:
      b += ",\"args\":{\"op\":\"";
      b += schema::OpName(e.subtype);
      b += "\",\"requests\":";
      AppendUint(b, e.bytes);
      b += '}';
      break;
    case COMMPROF_KIND_MPI_COMM:
      b += ",\"args\":{\"op\":\"";
      b += schema::OpName(e.subtype);
      b += "\",\"comm_id\":";
      AppendId(b, e.comm_id);
      b += ",\"parent_comm_id\":";
      AppendId(b, e.seq);
      b += ",\"size\":";
      AppendUint(b, e.bytes);
      b += ",\"rank_in_comm\":";
      AppendInt(b, e.peer);
      b += '}';
      break;
    case COMMPROF_KIND_STEP:
      b += ",\"args\":{\"step\":";
      AppendUint(b, e.seq);
      b += '}';
      break;
    case COMMPROF_KIND_MEM_ALLOC:
    case COMMPROF_KIND_MEM_FREE:
      // seq is the block's address and, on imported torch records, comm_id torch's "Total
      // Allocated" (docs/file-format.md): named as such, never as a communicator and sequence.
      b += ",\"args\":{\"bytes\":";
      AppendUint(b, e.bytes);
      b += ",\"address\":";
      AppendUint(b, e.seq);
      b += ",\"memory_kind\":\"";
      b += schema::MemoryKindName(e.subtype);
      b += '"';
      if (e.comm_id != 0) {
        b += ",\"total_allocated\":";
        AppendUint(b, e.comm_id);
      }
      if (e.correlation != 0) {
        b += ",\"correlation\":";
        AppendUint(b, e.correlation);
      }
      b += '}';
      break;
    case COMMPROF_KIND_MPI_INIT:
    case COMMPROF_KIND_MPI_FINALIZE:
    case COMMPROF_KIND_USER_RANGE:
    case COMMPROF_KIND_USER_MARK:
    case COMMPROF_KIND_NVTX_RANGE:
    case COMMPROF_KIND_NVTX_MARK:
      break;  // nothing beyond the name
    default: {
      // GPU and NCCL records: whichever of the common fields are set.
      bool any = false;
      auto key = [&](const char* k) {
        b += any ? ",\"" : ",\"args\":{\"";
        b += k;
        b += "\":";
        any = true;
      };
      if (e.bytes != 0) {
        key("bytes");
        AppendUint(b, e.bytes);
      }
      if (e.comm_id != 0) {
        key("comm_id");
        AppendId(b, e.comm_id);
        key("seq");
        AppendId(b, e.seq);
      }
      if (e.peer >= 0) {
        key("peer");
        AppendInt(b, e.peer);
      }
      if (e.correlation != 0) {
        key("correlation");
        AppendUint(b, e.correlation);
      }
      if (any) {
        b += '}';
      }
    }
  }
  AppendStack(args_at, e);
  b += '}';
  if (!flows.empty()) {
    b += flows;
  }
  ++stats_.events;
  ++(instant ? stats_.instants : stats_.slices);
}

Status TraceWriter::WriteRank(const RankInfo& r) {
  WriteProcessMetadata(r);
  auto strings = reader_.Strings(r.rank);
  if (!strings.ok()) {
    return strings.status();
  }
  names_.clear();
  names_.reserve(strings.value().size());
  for (const std::string& s : strings.value()) {
    names_.emplace_back();
    AppendJsonEscaped(names_.back(), s);
  }

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
  std::vector<Item> items(events.size());
  const ClockModel model = r.clock_model();
  TrackKey last_key{false, 0, 0};
  uint32_t last_track = UINT32_MAX;
  for (size_t i = 0; i < events.size(); ++i) {
    const commprof_event& e = events[i];
    TrackKey key{e.device != COMMPROF_HOST_DEVICE, e.device, e.thread_id};
    if (last_track == UINT32_MAX || key < last_key || last_key < key) {
      auto [it, inserted] = track_ids.emplace(key, static_cast<uint32_t>(track_ids.size()));
      last_key = key;
      last_track = it->second;
    }
    const int64_t start = model.ToReference(static_cast<int64_t>(e.start_ns));
    int64_t end = IsInstant(e.kind) ? start : model.ToReference(static_cast<int64_t>(e.end_ns));
    if (end < start) {
      end = start;  // a recorded end before the start, or a steep clock segment
    }
    items[i] = Item{start, end, static_cast<uint32_t>(i), last_track, 0};
  }
  // Order: by track in TrackKey order (host threads, then GPU streams), then start, then the
  // longer slice first so that an enclosing slice precedes what it encloses.
  std::vector<uint32_t> track_order(track_ids.size());
  {
    uint32_t k = 0;
    for (const auto& [key, id] : track_ids) {
      track_order[id] = k++;
    }
  }
  std::sort(items.begin(), items.end(), [&](const Item& a, const Item& b) {
    const uint32_t ta = track_order[a.track], tb = track_order[b.track];
    if (ta != tb) {
      return ta < tb;
    }
    if (a.start != b.start) {
      return a.start < b.start;
    }
    if (a.end != b.end) {
      return a.end > b.end;
    }
    return a.index < b.index;
  });

  const uint32_t pid = r.rank + 1;
  uint32_t sort_index = 0;
  size_t pos = 0;
  LaneAssigner lanes;
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
    const uint32_t n_lanes = std::max(1u, lanes.lanes());
    const uint32_t first_tid = next_tid_;
    next_tid_ += n_lanes;
    const std::string base = TrackName(key);
    for (uint32_t l = 0; l < n_lanes; ++l) {
      WriteThreadMetadata(pid, first_tid + l, l == 0 ? base : base + " (lane " + std::to_string(l + 1) + ")",
                          sort_index++);
    }
    ++stats_.tracks;
    stats_.lanes_added += n_lanes - 1;
    for (size_t i = pos; i < end_pos; ++i) {
      const Item& it = items[i];
      WriteEvent(r, events[it.index], it, first_tid + it.lane);
      if (!sink_.MaybeFlush()) {
        return sink_.Error();
      }
      if (++events_since_progress_ >= (1u << 20)) {
        events_since_progress_ = 0;
        Progress(stats_.ranks);
      }
    }
    pos = end_pos;
  }
  WriteMemoryCounters(r, events, model);
  return sink_.MaybeFlush() ? Status::Ok() : sink_.Error();
}

// One counter track per device and memory kind that has allocation/free records: the bytes in use
// after each record (docs/metrics.md §7, the same series as /analysis/memory).
void TraceWriter::WriteMemoryCounters(const RankInfo& r, std::span<const commprof_event> events,
                                      const ClockModel& model) {
  MemoryUsageBuilder builder(r.rank, model);
  builder.Add(events);
  const uint32_t pid = r.rank + 1;
  for (const MemorySeries& m : builder.Finish()) {
    // Host memory (an imported trace's CPU allocations) is not "device 65535".
    const std::string where =
        m.device == COMMPROF_HOST_DEVICE ? std::string("host") : "device " + std::to_string(m.device);
    const std::string name = "memory in use: " + where + " " + schema::MemoryKindName(m.memory_kind);
    for (const MemoryPoint& pt : m.points) {
      std::string& b = sink_.buf();
      BeginEvent();
      b += "{\"ph\":\"C\",\"cat\":\"memory\",\"name\":";
      AppendQuoted(b, name);
      b += ",\"pid\":";
      AppendUint(b, pid);
      b += ",\"ts\":";
      AppendMicros(b, pt.time_ns - origin_);
      b += ",\"args\":{\"bytes\":";
      AppendInt(b, pt.bytes_in_use);
      b += "}}";
      ++stats_.counters;
      if (!sink_.MaybeFlush()) {
        return;
      }
    }
  }
}

Status TraceWriter::Finish() {
  std::string& b = sink_.buf();
  b += "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{";
  b += "\"commprof_trace_format\":\"commprof-chrome-trace\",\"commprof_trace_version\":1";
  b += ",\"source_file\":";
  AppendQuoted(b, info_.path);
  b += ",\"job_id\":";
  AppendQuoted(b, info_.job_id);
  b += ",\"command_line\":";
  AppendQuoted(b, info_.command_line);
  b += ",\"world_size\":";
  AppendUint(b, info_.world_size);
  b += ",\"ranks_exported\":[";
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (i) {
      b += ',';
    }
    AppendUint(b, ranks_[i]);
  }
  b += "],\"time_base\":\"ts and dur in microseconds with ns precision; ts 0 is origin_reference_ns on the job "
       "reference clock (rank 0's clock after each rank's clock model), the earliest exported event\"";
  b += ",\"origin_reference_ns\":";
  AppendInt(b, origin_);
  // UTC of the origin, through the first rank that recorded when its collector started, on both
  // clocks: utc(t) = start_utc + (t - reference(start_steady)).
  for (const RankInfo& r : info_.ranks) {
    if (r.start_utc_ns == 0) {
      continue;
    }
    const int64_t anchor = r.clock_model().ToReference(static_cast<int64_t>(r.start_steady_ns));
    const int64_t utc = static_cast<int64_t>(r.start_utc_ns) + (origin_ - anchor);
    b += ",\"origin_utc_ns\":";
    AppendInt(b, utc);
    b += ",\"origin_utc\":";
    AppendQuoted(b, FormatUtcNs(utc));
    b += ",\"origin_utc_from_rank\":";
    AppendUint(b, r.rank);
    break;
  }
  b += ",\"job_start_utc_ns\":";
  AppendUint(b, info_.start_epoch_ns);
  b += ",\"job_start_utc\":";
  AppendQuoted(b, FormatUtcNs(static_cast<int64_t>(info_.start_epoch_ns)));
  int64_t worst_bound = -1;
  for (const RankInfo& r : info_.ranks) {
    worst_bound = std::max(worst_bound, r.clock_error_bound_ns);
  }
  b += ",\"clock_error_bound_ns\":";
  AppendInt(b, worst_bound);
  b += ",\"events\":";
  AppendUint(b, stats_.events);
  b += ",\"slices\":";
  AppendUint(b, stats_.slices);
  b += ",\"instants\":";
  AppendUint(b, stats_.instants);
  b += ",\"tracks\":";
  AppendUint(b, stats_.tracks);
  b += ",\"lanes_added\":";
  AppendUint(b, stats_.lanes_added);
  b += ",\"flows\":";
  AppendUint(b, stats_.flows);
  b += "}\n}\n";
  if (!sink_.Flush()) {
    return sink_.Error();
  }
  return Status::Ok();
}

Status TraceWriter::Run() {
  COMMPROF_RETURN_IF_ERROR(SelectRanks());
  for (const RankInfo& r : info_.ranks) {
    next_tid_ = std::max(next_tid_, r.rank + 2);
  }
  COMMPROF_RETURN_IF_ERROR(BuildInstances());
  COMMPROF_RETURN_IF_ERROR(FindOrigin());
  auto stacks = LoadStacks(reader_);
  if (!stacks.ok()) {
    return stacks.status();
  }
  stacks_ = std::move(stacks.value());
  sink_.buf() += "{\"traceEvents\":[";
  Progress(0);
  for (const RankInfo& r : info_.ranks) {
    if (!Selected(r.rank)) {
      continue;
    }
    COMMPROF_RETURN_IF_ERROR(WriteRank(r));
    ++stats_.ranks;
    Progress(stats_.ranks);
  }
  return Finish();
}

}  // namespace

Status WriteChromeTrace(const ProfileReader& reader, std::ostream& out, const ChromeExportOptions& opts,
                        ChromeExportStats* stats) {
  ChromeExportStats local;
  ChromeExportStats& s = stats != nullptr ? *stats : local;
  s = ChromeExportStats{};
  Sink sink(out, opts.output_name);
  TraceWriter w(reader, sink, opts, s);
  Status st = w.Run();
  s.bytes = sink.bytes();
  return st;
}

}  // namespace commprof
