#include "analysis/export/chrome_trace.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <type_traits>
#include <utility>

#include "core/schema/enums.h"

namespace commprof {

// ---- JSON text primitives ----

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

// The JSON spelling of the timeline (docs/chrome-trace.md).
class ChromeEncoder final : public TraceEncoder {
 public:
  explicit ChromeEncoder(TraceSink& sink) : sink_(sink) {}

  void Begin(const Header& /*h*/) override { sink_.buf() += "{\"traceEvents\":["; }
  uint64_t MaxLaneId() const override { return UINT32_MAX; }  // JSON readers take tids as 32-bit numbers
  // Every rank writes records (its process's name first): the parts before wrote some if they had a rank.
  void Continue(size_t ranks_before) override { first_record_ = ranks_before == 0; }

  void Rank(const RankInfo& r, const std::vector<std::string>& strings,
            const TraceRankNumbering& /*numbering*/) override {
    pid_ = r.rank + 1;
    names_.clear();
    names_.reserve(strings.size());
    for (const std::string& s : strings) {
      names_.emplace_back();
      AppendJsonEscaped(names_.back(), s);
    }
    Metadata("process_name", 0, "name", RankProcessName(r));
    Metadata("process_sort_index", 0, "sort_index", r.rank);
    if (r.status != schema::RankStatusName(schema::RankStatus::kComplete)) {
      Metadata("process_labels", 0, "labels", r.status);
    }
  }

  void BeginTrack(const RankInfo& /*r*/, std::string_view name, const TrackLanes& lanes, uint32_t sort_index) override {
    for (uint32_t l = 0; l < lanes.count; ++l) {
      Metadata("thread_name", lanes.id(l), "name", LaneName(name, l));
      Metadata("thread_sort_index", lanes.id(l), "sort_index", sort_index + l);
    }
  }

  void Slice(const TraceSlice& s) override;
  void EndTrack() override {}

  void BeginCounter(const RankInfo& /*r*/, std::string_view name) override {
    counter_name_.clear();
    AppendQuoted(counter_name_, name);
  }

  void CounterPoint(int64_t ts, int64_t value) override {
    std::string& b = sink_.buf();
    BeginRecord();
    b += "{\"ph\":\"C\",\"cat\":\"memory\",\"name\":";
    b += counter_name_;
    b += ",\"pid\":";
    AppendUint(b, pid_);
    b += ",\"ts\":";
    AppendMicros(b, ts);
    b += ",\"args\":{\"bytes\":";
    AppendInt(b, value);
    b += "}}";
  }

  void Finish(const Header& h) override;

 private:
  void BeginRecord() {
    sink_.buf() += first_record_ ? "\n" : ",\n";
    first_record_ = false;
  }
  // One metadata record of the current rank: {"ph":"M","name":WHAT,"pid":P[,"tid":TID],"args":{KEY:VALUE}},
  // VALUE a quoted string or a number; `tid` 0: a process's record.
  template <typename Value>
  void Metadata(const char* what, uint64_t tid, const char* key, const Value& value) {
    std::string& b = sink_.buf();
    BeginRecord();
    b += "{\"ph\":\"M\",\"name\":\"";
    b += what;
    b += "\",\"pid\":";
    AppendUint(b, pid_);
    if (tid != 0) {
      b += ",\"tid\":";
      AppendUint(b, tid);
    }
    b += ",\"args\":{\"";
    b += key;
    b += "\":";
    if constexpr (std::is_integral_v<Value>) {
      AppendUint(b, value);
    } else {
      AppendQuoted(b, value);
    }
    b += "}}";
  }
  // A flow step: "s" on the last arriver's slice, "f" (bound to the enclosing slice) on another
  // participant's. Both ends carry the same cat, name and id, which is how viewers pair them.
  void Flow(char phase, std::string_view name, uint64_t id, uint32_t tid, int64_t ts) {
    std::string& b = sink_.buf();
    b += ",\n{\"ph\":\"";
    b += phase;
    b += phase == 'f' ? "\",\"bp\":\"e\"" : "\"";
    b += ",\"cat\":\"commprof.flow\",\"name\":\"";
    b += name;
    b += "\",\"id\":";
    AppendUint(b, id);
    b += ",\"pid\":";
    AppendUint(b, pid_);
    b += ",\"tid\":";
    AppendUint(b, tid);
    b += ",\"ts\":";
    AppendMicros(b, ts);
    b += '}';
  }

  TraceSink& sink_;
  bool first_record_ = true;
  uint32_t pid_ = 0;
  std::vector<std::string> names_;  // the current rank's string table, JSON-escaped
  std::string counter_name_;        // quoted
};

void ChromeEncoder::Slice(const TraceSlice& s) {
  std::string& b = sink_.buf();
  const commprof_event& e = *s.event;
  BeginRecord();
  b += s.instant ? "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"" : "{\"ph\":\"X\",\"cat\":\"";
  b += schema::KindName(e.kind);
  b += "\",\"name\":\"";
  if (s.string_index != UINT32_MAX) {
    b += names_[s.string_index];
  } else {
    AppendJsonEscaped(b, s.name);
  }
  b += "\",\"pid\":";
  AppendUint(b, pid_);
  b += ",\"tid\":";
  AppendUint(b, s.lane);
  b += ",\"ts\":";
  AppendMicros(b, s.start);
  if (!s.instant) {
    b += ",\"dur\":";
    AppendMicros(b, s.end - s.start);
  }
  if (!s.args.empty() || s.stack != nullptr) {
    b += ",\"args\":{";
    bool first = true;
    for (const TraceArg& a : s.args) {
      b += first ? "\"" : ",\"";
      first = false;
      b += TraceArgName(a.key);
      b += "\":";
      switch (a.type) {
        case TraceArg::Type::kUint:
          AppendUint(b, a.u);
          break;
        case TraceArg::Type::kInt:
          AppendInt(b, a.i);
          break;
        case TraceArg::Type::kId:
          AppendId(b, a.u);
          break;
        case TraceArg::Type::kBool:
          b += a.u != 0 ? "true" : "false";
          break;
        case TraceArg::Type::kString:
          AppendQuoted(b, a.s);
          break;
      }
    }
    if (s.stack != nullptr) {
      // args.stack: the slice's call stack as "function (file:line)" frames, the call site first.
      b += first ? "\"stack\":[" : ",\"stack\":[";
      bool first_frame = true;
      for (const StackFrameInfo& f : *s.stack) {
        b += first_frame ? "\"" : ",\"";
        AppendJsonEscaped(b, f.Label());
        b += '"';
        first_frame = false;
      }
      b += ']';
    }
    b += '}';
  }
  b += '}';
  for (uint64_t id : s.flows_out) {
    Flow('s', s.flow_name, id, s.lane, s.start);
  }
  if (s.flow_in != 0) {
    Flow('f', s.flow_name, s.flow_in, s.lane, s.flow_in_ts);
  }
}

void ChromeEncoder::Finish(const Header& h) {
  const ProfileInfo& info = *h.info;
  const TraceExportStats& stats = *h.stats;
  std::string& b = sink_.buf();
  b += "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{";
  b += "\"commprof_trace_format\":\"commprof-chrome-trace\",\"commprof_trace_version\":1";
  b += ",\"source_file\":";
  AppendQuoted(b, info.path);
  b += ",\"job_id\":";
  AppendQuoted(b, info.job_id);
  b += ",\"command_line\":";
  AppendQuoted(b, info.command_line);
  b += ",\"world_size\":";
  AppendUint(b, info.world_size);
  b += ",\"ranks_exported\":[";
  for (size_t i = 0; i < h.ranks->size(); ++i) {
    if (i) {
      b += ',';
    }
    AppendUint(b, (*h.ranks)[i]);
  }
  b += "],\"time_base\":\"ts and dur in microseconds with ns precision; ts 0 is origin_reference_ns on the job "
       "reference clock (rank 0's clock after each rank's clock model), the earliest exported event\"";
  b += ",\"origin_reference_ns\":";
  AppendInt(b, h.origin);
  if (const std::optional<OriginUtc> utc = FindOriginUtc(info, h.origin)) {
    b += ",\"origin_utc_ns\":";
    AppendInt(b, utc->utc_ns);
    b += ",\"origin_utc\":";
    AppendQuoted(b, FormatUtcNs(utc->utc_ns));
    b += ",\"origin_utc_from_rank\":";
    AppendUint(b, utc->from_rank);
  }
  b += ",\"job_start_utc_ns\":";
  AppendUint(b, info.start_epoch_ns);
  b += ",\"job_start_utc\":";
  AppendQuoted(b, FormatUtcNs(static_cast<int64_t>(info.start_epoch_ns)));
  b += ",\"clock_error_bound_ns\":";
  AppendInt(b, WorstClockErrorBound(info));
  if (stats.cut) {
    b += ",\"cut_from_ns\":";
    AppendInt(b, stats.cut_from_ns);
    if (stats.cut_to_ns != INT64_MAX) {
      b += ",\"cut_to_ns\":";
      AppendInt(b, stats.cut_to_ns);
    }
    b += ",\"events_cut\":";
    AppendUint(b, stats.events_cut);
  }
  b += ",\"events\":";
  AppendUint(b, stats.events);
  b += ",\"slices\":";
  AppendUint(b, stats.slices);
  b += ",\"instants\":";
  AppendUint(b, stats.instants);
  b += ",\"tracks\":";
  AppendUint(b, stats.tracks);
  b += ",\"lanes_added\":";
  AppendUint(b, stats.lanes_added);
  b += ",\"flows\":";
  AppendUint(b, stats.flows);
  b += "}\n}\n";
}

}  // namespace

Status WriteChromeTrace(const ProfileReader& reader, std::ostream& out, const TraceExportOptions& opts,
                        TraceExportStats* stats) {
  return WalkInto<ChromeEncoder>(reader, out, opts, stats);
}

}  // namespace commprof
