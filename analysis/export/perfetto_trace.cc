#include "analysis/export/perfetto_trace.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/export/utf8_text.h"
#include "core/schema/enums.h"

namespace commprof {
namespace {

// ---- protobuf wire format (proto2: every repeated field unpacked, one tag per element) ----

constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2;

void Varint(std::string& b, uint64_t v) {
  if (v < 0x80) {  // most tags, flags, iids and lengths
    b.push_back(static_cast<char>(v));
    return;
  }
  char bytes[10];
  size_t n = 0;
  while (v >= 0x80) {
    bytes[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  bytes[n++] = static_cast<char>(v);
  b.append(bytes, n);
}
void Tag(std::string& b, uint32_t field, uint32_t wire) { Varint(b, (static_cast<uint64_t>(field) << 3) | wire); }
void VarintField(std::string& b, uint32_t field, uint64_t v) {
  Tag(b, field, kVarint);
  Varint(b, v);
}
void BytesField(std::string& b, uint32_t field, std::string_view s) {
  Tag(b, field, kLengthDelimited);
  Varint(b, s.size());
  b.append(s);
}
void TextField(std::string& b, uint32_t field, std::string_view s) {  // a string field: valid UTF-8
  std::string text;
  AppendValidUtf8(text, s);
  BytesField(b, field, text);
}

// ---- the same, through a raw cursor into room reserved in the output (the per-event path) ----

static_assert(std::endian::native == std::endian::little, "fixed64 fields are written as the host stores them");

char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}
char* PutVarintField(char* p, uint32_t field, uint64_t v) {
  return PutVarint(PutVarint(p, (static_cast<uint64_t>(field) << 3) | kVarint), v);
}
char* PutFixed64Field(char* p, uint32_t field, uint64_t v) {
  p = PutVarint(p, (static_cast<uint64_t>(field) << 3) | kFixed64);
  std::memcpy(p, &v, 8);
  return p + 8;
}
// Opens a length-delimited field at `p`: returns where its one length byte is.
char* PutOpen(char*& p, uint32_t field) {
  p = PutVarint(p, (static_cast<uint64_t>(field) << 3) | kLengthDelimited);
  return p++;
}
// Closes the field whose length byte is at `len_at`, the body ending at `p`; a body of 128 bytes or
// more is moved up to widen its length (the caller reserved room for it). Returns the new end.
char* PutClose(char* len_at, char* p) {
  const auto len = static_cast<uint64_t>(p - (len_at + 1));
  if (len < 0x80) {
    *len_at = static_cast<char>(len);
    return p;
  }
  char bytes[10];
  const size_t n = static_cast<size_t>(PutVarint(bytes, len) - bytes);
  std::memmove(len_at + n, len_at + 1, static_cast<size_t>(len));
  std::memcpy(len_at, bytes, n);
  return p + (n - 1);
}

// Field numbers of Perfetto's public trace format (docs/perfetto-trace.md lists the subset).
constexpr uint32_t kTracePacket = 1;  // Trace.packet: the file is a stream of these
namespace packet {
constexpr uint32_t kClockSnapshot = 6, kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11, kInternedData = 12,
                   kSequenceFlags = 13, kDefaults = 59, kTrackDescriptor = 60;
constexpr uint64_t kIncrementalStateCleared = 1, kNeedsIncrementalState = 2;
}  // namespace packet
namespace clock {
constexpr uint32_t kClocks = 1, kId = 1, kTimestamp = 2, kIncremental = 3;
constexpr uint64_t kBoottime = 6, kSequenceDelta = 64;  // 64: the first sequence-scoped clock id
}  // namespace clock
namespace defaults {
constexpr uint32_t kTimestampClockId = 58, kTrackEventDefaults = 11, kTrackUuid = 11;
}
namespace track {
constexpr uint32_t kUuid = 1, kName = 2, kProcess = 3, kParentUuid = 5, kCounter = 8, kSiblingOrderRank = 12,
                   kDescription = 14;
constexpr uint32_t kPid = 1, kProcessName = 6, kProcessLabels = 8;  // ProcessDescriptor
constexpr uint32_t kCounterUnit = 3;                                // CounterDescriptor
constexpr uint64_t kUnitSizeBytes = 3;
}  // namespace track
namespace event {
constexpr uint32_t kCategoryIids = 3, kDebugAnnotations = 4, kType = 9, kNameIid = 10, kTrackUuid = 11, kName = 23,
                   kCounterValue = 30, kFlowIds = 47;
constexpr uint64_t kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4;
}  // namespace event
namespace annotation {
constexpr uint32_t kNameIid = 1, kBool = 2, kUint = 3, kInt = 4, kString = 6, kName = 10, kArray = 12, kStringIid = 17;
}
namespace interned {
constexpr uint32_t kCategories = 1, kEventNames = 2, kAnnotationNames = 3, kStrings = 29;
constexpr uint32_t kIid = 1, kName = 2;  // EventCategory, EventName, DebugAnnotationName, InternedString (str)
}  // namespace interned

// Sequence 1 is reserved by Perfetto for its tracing service's own packets.
constexpr uint32_t kDescriptorSequence = 2;        // descriptors and the trace's facts: no interning, no clock
constexpr uint64_t kCounterUuidBase = 1ull << 40;  // counter tracks, above every lane id
constexpr uint64_t kFactsUuid = (1ull << 40) - 1;

// An iid valid in one sequence only: entries of earlier sequences are told apart by generation.
struct Interned {
  uint32_t generation = 0;
  uint32_t iid = 0;
};

class PerfettoEncoder final : public TraceEncoder {
 public:
  explicit PerfettoEncoder(TraceSink& sink) : sink_(sink) {}

  void Begin(const Header& h) override;
  uint64_t MaxLaneId() const override { return kFactsUuid - 1; }  // below the facts' and counters' tracks
  // Sequences and counter uuids are numbered per rank (Rank): nothing to carry over.
  void Continue(size_t /*ranks_before*/) override {}
  void Rank(const RankInfo& r, const std::vector<std::string>& strings, const TraceRankNumbering& numbering) override;
  void BeginTrack(const RankInfo& r, std::string_view name, const TrackLanes& lanes, uint32_t sort_index) override;
  void Slice(const TraceSlice& s) override;
  void EndTrack() override { FlushEnds(INT64_MAX); }
  void BeginCounter(const RankInfo& r, std::string_view name) override;
  void CounterPoint(int64_t ts, int64_t value) override;
  void Finish(const Header& /*h*/) override {}

 private:
  // A slice's END, waiting for time to reach it. Equal ends: the later BEGIN (the inner slice)
  // ends first.
  struct PendingEnd {
    int64_t end;
    uint64_t order;
    uint64_t lane;
    bool first_lane;
    uint64_t flow_in;
    bool operator>(const PendingEnd& o) const { return end != o.end ? end > o.end : order < o.order; }
  };

  void StartSequence(uint64_t default_track, int64_t t0);
  // Starts the current track's sequence at its first event, before anything is interned for it.
  void EnsureSequence(int64_t t0) {
    if (!sequence_started_) {
      StartSequence(sequence_track_, t0);
    }
  }
  void Descriptor(const std::string& desc);
  // An event packet: BeginEvent makes `room` bytes of scratch (at least what the event can take),
  // writes the packet's first fields, opens its TrackEvent and returns the cursor for the event's
  // fields; EndEvent closes them at the cursor and appends the packet to the output, with the
  // entries interned meanwhile. Raw writes into scratch, one append per packet: no per-byte
  // bounds checks and no zero-filling of the output.
  char* BeginEvent(int64_t ts, size_t room);
  void EndEvent(char* p);
  static char* TrackUuid(char* p, uint64_t lane, bool first_lane) {
    return first_lane ? p : PutVarintField(p, event::kTrackUuid, lane);
  }
  void FlushEnds(int64_t until);
  uint32_t NameIid(const TraceSlice& s);
  uint32_t CategoryIid(uint8_t kind);
  uint32_t AnnotationNameIid(TraceArgKey key);
  uint32_t StringIid(std::string_view s, Interned& slot);
  // TraceArg strings are static names: found by address, through a small direct-mapped cache.
  uint32_t StaticStringIid(std::string_view s) {
    auto& cached = static_cache_[(reinterpret_cast<uintptr_t>(s.data()) >> 3) % static_cache_.size()];
    if (cached.first != s.data()) {
      cached = {s.data(), &static_string_iids_[s.data()]};
    }
    return StringIid(s, *cached.second);
  }
  char* Annotation(char* p, const TraceArg& a);
  char* StackAnnotation(char* p, const std::vector<StackFrameInfo>& frames);

  TraceSink& sink_;
  uint64_t process_uuid_ = 0;
  uint64_t next_counter_uuid_ = kCounterUuidBase;
  uint32_t next_sequence_ = kDescriptorSequence + 1;
  // The current sequence.
  uint32_t sequence_ = 0;
  bool sequence_started_ = false;
  uint64_t sequence_track_ = 0;  // the track of a sequence not started yet
  int64_t last_ts_ = 0;
  uint32_t generation_ = 0;
  uint32_t next_iid_name_ = 0, next_iid_category_ = 0, next_iid_annotation_ = 0, next_iid_string_ = 0;
  std::vector<Interned> name_iids_;  // by index in the rank's string table
  std::unordered_map<std::string, Interned> other_name_iids_;
  std::array<Interned, 256> category_iids_{};
  std::array<Interned, static_cast<size_t>(TraceArgKey::kCount)> annotation_iids_{};
  std::unordered_map<const char*, Interned> static_string_iids_;                 // TraceArg strings: static names
  std::unordered_map<std::string, Interned> string_iids_;                        // stack frames
  std::string new_categories_, new_names_, new_annotation_names_, new_strings_;  // InternedData fields
  std::priority_queue<PendingEnd, std::vector<PendingEnd>, std::greater<>> ends_;
  uint64_t begun_ = 0;
  std::vector<char> scratch_;  // the open event packet's body
  char* event_len_ = nullptr;  // length byte of its TrackEvent, in scratch_
  std::array<std::pair<const char*, Interned*>, 64> static_cache_{};
  // Scratch buffers for the packets built aside (descriptors, sequence starts), reused.
  std::string te_, pkt_, ann_, elem_, entry_;
};

void PerfettoEncoder::Descriptor(const std::string& desc) {
  pkt_.clear();
  VarintField(pkt_, packet::kSequenceId, kDescriptorSequence);
  BytesField(pkt_, packet::kTrackDescriptor, desc);
  BytesField(sink_.buf(), kTracePacket, pkt_);
}

// The sequence's first packet: clears its incremental state, makes `default_track` the track of
// its events and its timestamps deltas on clock 64, which starts at `t0` on the trace's clock.
void PerfettoEncoder::StartSequence(uint64_t default_track, int64_t t0) {
  sequence_ = next_sequence_++;
  sequence_started_ = true;
  ++generation_;
  next_iid_name_ = next_iid_category_ = next_iid_annotation_ = next_iid_string_ = 0;
  last_ts_ = t0;
  pkt_.clear();
  ann_.clear();
  elem_.clear();
  VarintField(elem_, clock::kId, clock::kBoottime);
  VarintField(elem_, clock::kTimestamp, static_cast<uint64_t>(t0));
  BytesField(ann_, clock::kClocks, elem_);
  elem_.clear();
  VarintField(elem_, clock::kId, clock::kSequenceDelta);
  VarintField(elem_, clock::kTimestamp, static_cast<uint64_t>(t0));
  VarintField(elem_, clock::kIncremental, 1);
  BytesField(ann_, clock::kClocks, elem_);
  BytesField(pkt_, packet::kClockSnapshot, ann_);
  VarintField(pkt_, packet::kSequenceId, sequence_);
  VarintField(pkt_, packet::kSequenceFlags, packet::kIncrementalStateCleared);
  elem_.clear();
  VarintField(elem_, defaults::kTrackUuid, default_track);
  ann_.clear();
  VarintField(ann_, defaults::kTimestampClockId, clock::kSequenceDelta);
  BytesField(ann_, defaults::kTrackEventDefaults, elem_);
  BytesField(pkt_, packet::kDefaults, ann_);
  BytesField(sink_.buf(), kTracePacket, pkt_);
}

char* PerfettoEncoder::BeginEvent(int64_t ts, size_t room) {
  if (scratch_.size() < room + 32) {
    scratch_.resize(std::max(room + 32, 2 * scratch_.size()));
  }
  char* p = scratch_.data();
  p = PutVarintField(p, packet::kTimestamp, static_cast<uint64_t>(ts - last_ts_));  // non-decreasing per sequence
  last_ts_ = ts;
  p = PutVarintField(p, packet::kSequenceId, sequence_);
  event_len_ = PutOpen(p, packet::kTrackEvent);
  return p;
}

void PerfettoEncoder::EndEvent(char* p) {
  p = PutClose(event_len_, p);
  const auto body = static_cast<size_t>(p - scratch_.data());
  const size_t interned =
      new_categories_.size() + new_names_.size() + new_annotation_names_.size() + new_strings_.size();
  char head[24];
  char* h = head;
  size_t packet_len = body + 2;  // + sequence_flags
  if (interned > 0) {
    char len[10];
    packet_len += 1 + static_cast<size_t>(PutVarint(len, interned) - len) + interned;
  }
  h = PutVarint(h, (uint64_t{kTracePacket} << 3) | kLengthDelimited);
  h = PutVarint(h, packet_len);
  std::string& b = sink_.buf();
  b.append(head, static_cast<size_t>(h - head));
  b.append(scratch_.data(), body);
  if (interned > 0) {
    Tag(b, packet::kInternedData, kLengthDelimited);
    Varint(b, interned);
    b += new_categories_;
    b += new_names_;
    b += new_annotation_names_;
    b += new_strings_;
    new_categories_.clear();
    new_names_.clear();
    new_annotation_names_.clear();
    new_strings_.clear();
  }
  VarintField(b, packet::kSequenceFlags, packet::kNeedsIncrementalState);
}

// Appends one interned entry {iid, name} to `into` as field `field` of InternedData.
void AddEntry(std::string& into, uint32_t field, uint32_t iid, std::string_view name, std::string& scratch) {
  scratch.clear();
  VarintField(scratch, interned::kIid, iid);
  TextField(scratch, interned::kName, name);
  BytesField(into, field, scratch);
}

uint32_t PerfettoEncoder::NameIid(const TraceSlice& s) {
  Interned* slot = nullptr;
  if (s.string_index != UINT32_MAX) {
    slot = &name_iids_[s.string_index];
  } else {
    slot = &other_name_iids_[std::string(s.name)];
  }
  if (slot->generation != generation_) {
    *slot = Interned{generation_, ++next_iid_name_};
    AddEntry(new_names_, interned::kEventNames, slot->iid, s.name, entry_);
  }
  return slot->iid;
}

uint32_t PerfettoEncoder::CategoryIid(uint8_t kind) {
  Interned& slot = category_iids_[kind];
  if (slot.generation != generation_) {
    slot = Interned{generation_, ++next_iid_category_};
    AddEntry(new_categories_, interned::kCategories, slot.iid, schema::KindName(kind), entry_);
  }
  return slot.iid;
}

uint32_t PerfettoEncoder::AnnotationNameIid(TraceArgKey key) {
  Interned& slot = annotation_iids_[static_cast<size_t>(key)];
  if (slot.generation != generation_) {
    slot = Interned{generation_, ++next_iid_annotation_};
    AddEntry(new_annotation_names_, interned::kAnnotationNames, slot.iid, TraceArgName(key), entry_);
  }
  return slot.iid;
}

uint32_t PerfettoEncoder::StringIid(std::string_view s, Interned& slot) {
  if (slot.generation != generation_) {
    slot = Interned{generation_, ++next_iid_string_};
    AddEntry(new_strings_, interned::kStrings, slot.iid, s, entry_);
  }
  return slot.iid;
}

// One argument: at most 1 + 1 + 6 + 11 bytes, so its length always fits one byte.
char* PerfettoEncoder::Annotation(char* p, const TraceArg& a) {
  char* len_at = PutOpen(p, event::kDebugAnnotations);
  p = PutVarintField(p, annotation::kNameIid, AnnotationNameIid(a.key));
  switch (a.type) {
    case TraceArg::Type::kUint:
    case TraceArg::Type::kId:
      p = PutVarintField(p, annotation::kUint, a.u);
      break;
    case TraceArg::Type::kInt:
      p = PutVarintField(p, annotation::kInt, static_cast<uint64_t>(a.i));
      break;
    case TraceArg::Type::kBool:
      p = PutVarintField(p, annotation::kBool, a.u != 0 ? 1 : 0);
      break;
    case TraceArg::Type::kString:
      p = PutVarintField(p, annotation::kStringIid, StaticStringIid(a.s));
      break;
  }
  return PutClose(len_at, p);
}

// At most 8 + 16 bytes per frame.
char* PerfettoEncoder::StackAnnotation(char* p, const std::vector<StackFrameInfo>& frames) {
  char* len_at = PutOpen(p, event::kDebugAnnotations);
  p = PutVarintField(p, annotation::kNameIid, AnnotationNameIid(TraceArgKey::kStack));
  for (const StackFrameInfo& f : frames) {
    const std::string label = f.Label();
    char* frame_len = PutOpen(p, annotation::kArray);
    p = PutVarintField(p, annotation::kStringIid, StringIid(label, string_iids_[label]));
    p = PutClose(frame_len, p);
  }
  return PutClose(len_at, p);
}

void PerfettoEncoder::Begin(const Header& h) {
  const ProfileInfo& info = *h.info;
  const TraceExportStats& stats = *h.stats;
  std::string desc;
  VarintField(desc, track::kUuid, kFactsUuid);
  TextField(desc, track::kName, "commprof");
  TextField(desc, track::kDescription,
            "commprof trace of " + info.path +
                ": timestamps are ns since the earliest exported event "
                "(origin_reference_ns on the job's reference clock)");
  Descriptor(desc);
  // The trace's facts: the args of one instant, on the descriptor sequence (literal names: no
  // interned state there), at the start of what is shown.
  te_.clear();
  auto text = [&](const char* name, std::string_view value) {
    ann_.clear();
    TextField(ann_, annotation::kName, name);
    TextField(ann_, annotation::kString, value);
    BytesField(te_, event::kDebugAnnotations, ann_);
  };
  auto number = [&](const char* name, int64_t value) {
    ann_.clear();
    TextField(ann_, annotation::kName, name);
    VarintField(ann_, annotation::kInt, static_cast<uint64_t>(value));
    BytesField(te_, event::kDebugAnnotations, ann_);
  };
  text("commprof_trace_format", "commprof-perfetto-trace");
  number("commprof_trace_version", 1);
  text("source_file", info.path);
  text("job_id", info.job_id);
  text("command_line", info.command_line);
  number("world_size", static_cast<int64_t>(info.world_size));
  std::string ranks;
  for (uint32_t r : *h.ranks) {
    ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
  }
  text("ranks_exported", ranks);
  number("origin_reference_ns", h.origin);
  if (const std::optional<OriginUtc> utc = FindOriginUtc(info, h.origin)) {
    number("origin_utc_ns", utc->utc_ns);
    text("origin_utc", FormatUtcNs(utc->utc_ns));
    number("origin_utc_from_rank", utc->from_rank);
  }
  number("job_start_utc_ns", static_cast<int64_t>(info.start_epoch_ns));
  number("clock_error_bound_ns", WorstClockErrorBound(info));
  if (stats.cut) {
    number("cut_from_ns", stats.cut_from_ns);
    if (stats.cut_to_ns != INT64_MAX) {
      number("cut_to_ns", stats.cut_to_ns);
    }
  }
  VarintField(te_, event::kType, event::kInstant);
  VarintField(te_, event::kTrackUuid, kFactsUuid);
  TextField(te_, event::kName, "commprof trace");
  pkt_.clear();
  VarintField(pkt_, packet::kTimestamp, static_cast<uint64_t>(stats.cut ? stats.cut_from_ns : 0));
  VarintField(pkt_, packet::kSequenceId, kDescriptorSequence);
  BytesField(pkt_, packet::kTrackEvent, te_);
  BytesField(sink_.buf(), kTracePacket, pkt_);
}

void PerfettoEncoder::Rank(const RankInfo& r, const std::vector<std::string>& strings,
                           const TraceRankNumbering& numbering) {
  // The rank's sequences and counter tracks follow those every exported rank before it reserved
  // (one per track and per memory series, kept by a cut or not), whichever process writes it. The
  // generation of interned entries only has to differ between sequences: it counts them too.
  const uint64_t sequences = numbering.tracks_before + numbering.series_before;
  next_sequence_ = static_cast<uint32_t>(kDescriptorSequence + 1 + sequences);
  generation_ = static_cast<uint32_t>(sequences);
  next_counter_uuid_ = kCounterUuidBase + numbering.series_before;
  name_iids_.assign(strings.size(), Interned{});
  other_name_iids_.clear();
  process_uuid_ = r.rank + 1;  // lane ids are above every rank + 1
  std::string proc;
  VarintField(proc, track::kPid, r.rank + 1);  // pid 0 is the idle process to Perfetto
  TextField(proc, track::kProcessName, RankProcessName(r));
  if (r.status != schema::RankStatusName(schema::RankStatus::kComplete)) {
    TextField(proc, track::kProcessLabels, r.status);
  }
  std::string desc;
  VarintField(desc, track::kUuid, process_uuid_);
  BytesField(desc, track::kProcess, proc);
  Descriptor(desc);
}

void PerfettoEncoder::BeginTrack(const RankInfo& /*r*/, std::string_view name, const TrackLanes& lanes,
                                 uint32_t sort_index) {
  for (uint32_t l = 0; l < lanes.count; ++l) {
    std::string desc;
    VarintField(desc, track::kUuid, lanes.id(l));
    TextField(desc, track::kName, LaneName(name, l));
    VarintField(desc, track::kParentUuid, process_uuid_);
    VarintField(desc, track::kSiblingOrderRank, sort_index + l);
    Descriptor(desc);
  }
  sequence_started_ = false;  // the sequence starts at the track's first event
  sequence_track_ = lanes.first;
  begun_ = 0;
}

void PerfettoEncoder::FlushEnds(int64_t until) {
  while (!ends_.empty() && ends_.top().end <= until) {
    const PendingEnd e = ends_.top();
    ends_.pop();
    char* p = BeginEvent(e.end, 32);
    p = PutVarintField(p, event::kType, event::kSliceEnd);
    p = TrackUuid(p, e.lane, e.first_lane);
    if (e.flow_in != 0) {
      p = PutFixed64Field(p, event::kFlowIds, e.flow_in);
    }
    EndEvent(p);
  }
}

void PerfettoEncoder::Slice(const TraceSlice& s) {
  EnsureSequence(s.start);
  FlushEnds(s.start);  // what ended by now, before what begins (equal times: END first)
  const size_t room =
      48 + 24 * s.args.size() + 11 * s.flows_out.size() + (s.stack != nullptr ? 16 + 24 * s.stack->size() : 0);
  char* p = BeginEvent(s.start, room);
  p = PutVarintField(p, event::kCategoryIids, CategoryIid(s.event->kind));
  for (const TraceArg& a : s.args) {
    p = Annotation(p, a);
  }
  if (s.stack != nullptr) {
    p = StackAnnotation(p, *s.stack);
  }
  p = PutVarintField(p, event::kType, s.instant ? event::kInstant : event::kSliceBegin);
  p = PutVarintField(p, event::kNameIid, NameIid(s));
  p = TrackUuid(p, s.lane, s.first_lane);
  for (uint64_t id : s.flows_out) {
    p = PutFixed64Field(p, event::kFlowIds, id);
  }
  EndEvent(p);
  if (!s.instant) {
    ends_.push(PendingEnd{s.end, begun_++, s.lane, s.first_lane, s.flow_in});
  }
}

void PerfettoEncoder::BeginCounter(const RankInfo& /*r*/, std::string_view name) {
  const uint64_t uuid = next_counter_uuid_++;
  std::string counter;
  VarintField(counter, track::kCounterUnit, track::kUnitSizeBytes);
  std::string desc;
  VarintField(desc, track::kUuid, uuid);
  TextField(desc, track::kName, name);
  VarintField(desc, track::kParentUuid, process_uuid_);
  BytesField(desc, track::kCounter, counter);
  Descriptor(desc);
  sequence_started_ = false;
  sequence_track_ = uuid;
}

void PerfettoEncoder::CounterPoint(int64_t ts, int64_t value) {
  EnsureSequence(ts);
  char* p = BeginEvent(ts, 16);
  p = PutVarintField(p, event::kType, event::kCounter);
  p = PutVarintField(p, event::kCounterValue, static_cast<uint64_t>(value));
  EndEvent(p);
}

}  // namespace

Status WritePerfettoTrace(const ProfileReader& reader, std::ostream& out, const TraceExportOptions& opts,
                          TraceExportStats* stats) {
  return WalkInto<PerfettoEncoder>(reader, out, opts, stats);
}

}  // namespace commprof
