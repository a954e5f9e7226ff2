// Perfetto protobuf export (analysis/export/perfetto_trace.h) of a hand-made 2-rank file written with
// the real Hdf5Writer, read back with a protobuf wire reader written here from the format's public
// description (not the encoder's code). Every expected value is worked out by hand from MakeJob().
// The e2e test (tests/e2e/perfetto_export.py) decodes real jobs' traces with protoc.
#include "analysis/export/perfetto_trace.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/export/chrome_trace.h"
#include "analysis/load/profile_reader.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;
using test_support::events::Collective;

// ---- a protobuf wire reader: a message is a list of (field, wire type, value or bytes) ----

struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t value = 0;     // varint, fixed64
  std::string_view data;  // length-delimited
};

bool ReadVarint(std::string_view& in, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    v |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// The fields of one message; fails the test on a malformed encoding.
std::vector<Field> Fields(std::string_view in) {
  std::vector<Field> out;
  while (!in.empty()) {
    uint64_t key = 0;
    if (!ReadVarint(in, key)) {
      ADD_FAILURE() << "truncated key";
      return out;
    }
    Field f{static_cast<uint32_t>(key >> 3), static_cast<uint32_t>(key & 7)};
    if (f.wire == 0) {
      EXPECT_TRUE(ReadVarint(in, f.value));
    } else if (f.wire == 1) {
      if (in.size() < 8) {
        ADD_FAILURE() << "truncated fixed64";
        return out;
      }
      for (int i = 0; i < 8; ++i) f.value |= static_cast<uint64_t>(static_cast<uint8_t>(in[i])) << (8 * i);
      in.remove_prefix(8);
    } else if (f.wire == 2) {
      uint64_t len = 0;
      if (!ReadVarint(in, len) || len > in.size()) {
        ADD_FAILURE() << "bad length";
        return out;
      }
      f.data = in.substr(0, len);
      in.remove_prefix(len);
    } else {
      ADD_FAILURE() << "wire type " << f.wire;
      return out;
    }
    out.push_back(f);
  }
  return out;
}

const Field* Get(const std::vector<Field>& m, uint32_t number) {
  for (const Field& f : m) {
    if (f.number == number) return &f;
  }
  return nullptr;
}
std::vector<const Field*> All(const std::vector<Field>& m, uint32_t number) {
  std::vector<const Field*> out;
  for (const Field& f : m) {
    if (f.number == number) out.push_back(&f);
  }
  return out;
}

// One TrackEvent with its timestamp rebuilt and its interned ids resolved.
struct Event {
  int64_t ts = 0;
  uint64_t type = 0;  // 1 BEGIN, 2 END, 3 INSTANT, 4 COUNTER
  uint64_t track = 0;
  std::string name;
  std::string category;
  std::map<std::string, std::string> args;  // values printed as decimal, strings as they are
  std::vector<uint64_t> flows;
  int64_t counter = 0;
};

struct Decoded {
  std::map<uint64_t, std::string> track_names;  // uuid -> name (process tracks: process_name)
  std::map<uint64_t, uint64_t> track_pid;       // uuid -> pid of its process
  std::vector<Event> events;                    // in file order
  std::map<std::string, std::string> facts;     // the "commprof trace" instant's args
};

// Decodes the packets: per sequence, interned tables and the incremental clock (clock 64, set by
// the snapshot of the packet that cleared the state).
Decoded Decode(const std::string& bytes) {
  Decoded d;
  EXPECT_EQ(static_cast<uint8_t>(bytes.at(0)), 0x0A);
  struct Sequence {
    std::map<uint64_t, std::string> names, categories, arg_names, strings;
    bool delta = false;
    int64_t last = 0;
    uint64_t default_track = 0;
    bool valid = false;
  };
  std::map<uint64_t, Sequence> seqs;
  std::map<uint64_t, uint64_t> parent;
  for (const Field& packet_field : Fields(bytes)) {
    EXPECT_EQ(packet_field.number, 1u);
    const std::vector<Field> p = Fields(packet_field.data);
    const uint64_t seq_id = Get(p, 10) ? Get(p, 10)->value : 0;
    Sequence& seq = seqs[seq_id];
    const uint64_t flags = Get(p, 13) ? Get(p, 13)->value : 0;
    if (flags & 1) {
      seq = Sequence{};
      seq.valid = true;
    }
    if (flags & 2) {
      EXPECT_TRUE(seq.valid) << "sequence " << seq_id << " used before its state was cleared";
    }
    if (const Field* defaults = Get(p, 59)) {
      const auto df = Fields(defaults->data);
      seq.delta = Get(df, 58) && Get(df, 58)->value == 64;
      if (const Field* ted = Get(df, 11)) seq.default_track = Get(Fields(ted->data), 11)->value;
    }
    if (const Field* snap = Get(p, 6)) {
      const std::vector<Field> clocks = Fields(snap->data);  // outlives the loop (range-init temporaries do not)
      for (const Field* c : All(clocks, 1)) {
        const auto cf = Fields(c->data);
        if (Get(cf, 1)->value == 64) seq.last = static_cast<int64_t>(Get(cf, 2)->value);
      }
    }
    if (const Field* interned = Get(p, 12)) {
      for (const Field& entry : Fields(interned->data)) {
        const auto ef = Fields(entry.data);
        std::map<uint64_t, std::string>* table = entry.number == 1    ? &seq.categories
                                                 : entry.number == 2  ? &seq.names
                                                 : entry.number == 3  ? &seq.arg_names
                                                 : entry.number == 29 ? &seq.strings
                                                                      : nullptr;
        if (table == nullptr) {
          ADD_FAILURE() << "interned field " << entry.number;
          continue;
        }
        EXPECT_EQ(table->count(Get(ef, 1)->value), 0u) << "iid defined twice";
        (*table)[Get(ef, 1)->value] = std::string(Get(ef, 2)->data);
      }
    }
    if (const Field* desc = Get(p, 60)) {
      const auto tf = Fields(desc->data);
      const uint64_t uuid = Get(tf, 1)->value;
      EXPECT_EQ(d.track_names.count(uuid), 0u) << "uuid " << uuid << " described twice";
      if (const Field* proc = Get(tf, 3)) {
        const auto pf = Fields(proc->data);
        d.track_names[uuid] = std::string(Get(pf, 6)->data);
        d.track_pid[uuid] = Get(pf, 1)->value;
      } else {
        d.track_names[uuid] = Get(tf, 2) ? std::string(Get(tf, 2)->data) : "";
        if (const Field* par = Get(tf, 5)) parent[uuid] = par->value;
      }
    }
    const Field* te = Get(p, 11);
    if (te == nullptr) continue;
    const Field* ts = Get(p, 8);
    if (ts == nullptr || seq_id == 0) {
      ADD_FAILURE() << "a track event without timestamp or sequence";
      continue;
    }
    Event e;
    if (seq.delta) {
      seq.last += static_cast<int64_t>(ts->value);
      e.ts = seq.last;
    } else {
      e.ts = static_cast<int64_t>(ts->value);
    }
    const auto ef = Fields(te->data);
    e.type = Get(ef, 9)->value;
    e.track = Get(ef, 11) ? Get(ef, 11)->value : seq.default_track;
    if (const Field* n = Get(ef, 10)) {
      EXPECT_EQ(seq.names.count(n->value), 1u) << "name iid " << n->value << " not defined";
      e.name = seq.names[n->value];
    } else if (const Field* lit = Get(ef, 23)) {
      e.name = std::string(lit->data);
    }
    if (const Field* c = Get(ef, 3)) e.category = seq.categories.at(c->value);
    for (const Field* a : All(ef, 4)) {
      const auto af = Fields(a->data);
      const std::string key = Get(af, 1) ? seq.arg_names.at(Get(af, 1)->value) : std::string(Get(af, 10)->data);
      std::string value;
      if (const Field* v = Get(af, 3)) value = std::to_string(v->value);
      if (const Field* v = Get(af, 4)) value = std::to_string(static_cast<int64_t>(v->value));
      if (const Field* v = Get(af, 2)) value = v->value ? "true" : "false";
      if (const Field* v = Get(af, 6)) value = std::string(v->data);
      if (const Field* v = Get(af, 17)) value = seq.strings.at(v->value);
      e.args[key] = value;
    }
    for (const Field* f : All(ef, 47)) {
      EXPECT_EQ(f->wire, 1u) << "flow ids are fixed64";
      e.flows.push_back(f->value);
    }
    if (const Field* v = Get(ef, 30)) e.counter = static_cast<int64_t>(v->value);
    if (e.name == "commprof trace") {
      d.facts = e.args;
      continue;
    }
    d.events.push_back(e);
  }
  for (const auto& [uuid, par] : parent) d.track_pid[uuid] = d.track_pid.at(par);
  return d;
}

commprof_event Ev(uint8_t kind, uint32_t name, uint64_t start, uint64_t end) {
  commprof_event e{};
  e.kind = kind;
  e.name_id = name;
  e.start_ns = start;
  e.end_ns = end;
  e.peer = COMMPROF_NO_PEER;
  e.device = COMMPROF_HOST_DEVICE;
  return e;
}

commprof_event Mem(bool alloc, uint64_t t, uint64_t address, uint64_t bytes) {
  commprof_event e = Ev(alloc ? COMMPROF_KIND_MEM_ALLOC : COMMPROF_KIND_MEM_FREE, 2, t, t);  // "memory"
  e.seq = address;
  e.bytes = bytes;
  e.device = 0;
  e.subtype = 1;  // device memory
  return e;
}

// Invalid UTF-8 a program may name a kernel with: a stray FF and a truncated E2 82.
const std::string kBadName = "k\xFFx\xE2\x82";
const std::string kBadNameAsUtf8 = "k\xEF\xBF\xBDx\xEF\xBF\xBD";  // each ill-formed part -> U+FFFD

// The job (local ns; reference = local + offset):
//   rank 0, offset 0:    MPI_Init [1000,2000]; range "outer" [10000,30000]; Barrier seq 0
//                        [20000,30000] inside it, ending on the same ns
//   rank 1, offset +500: Barrier seq 0 local [24500,29000] -> [25000,29500]: the last arriver;
//                        a kernel named kBadName on GPU 0 stream 3 local [25500,26500] -> [26000,27000];
//                        4096 B allocated at local 25500 -> 26000, freed at local 27500 -> 28000 (these
//                        records are also 0-length slices on GPU 0 stream 0, as the exporter shows them)
// Origin: rank 0's MPI_Init at 1000. Relative to it: r0 Init [0,1000], outer [9000,29000],
// Barrier [19000,29000]; r1 Barrier [24000,28500], kernel [25000,26000], memory 4096 at 25000, 0 at 27000.
std::vector<RankData> MakeJob() {
  std::vector<RankData> r(2);
  r[0].strings = {"MPI_Init", "MPI_Barrier", "outer"};
  r[0].points = {ClockPoint{0, 0, 10}};
  r[0].events = {Ev(COMMPROF_KIND_MPI_INIT, 0, 1000, 2000), Ev(COMMPROF_KIND_USER_RANGE, 2, 10000, 30000),
                 Collective(COMMPROF_OP_BARRIER, 0, 20000, 30000, {.name = 1})};
  r[1].strings = {"MPI_Barrier", kBadName, "memory"};
  r[1].points = {ClockPoint{0, 500, 10}};
  commprof_event kernel = Ev(COMMPROF_KIND_COMPUTE_KERNEL, 1, 25500, 26500);
  kernel.device = 0;
  kernel.thread_id = 3;
  r[1].events = {Collective(COMMPROF_OP_BARRIER, 0, 24500, 29000, {.name = 0}), kernel, Mem(true, 25500, 0x1000, 4096),
                 Mem(false, 27500, 0x1000, 0)};
  return r;
}

class PerfettoTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reader_ = test_support::WriteProfile(dir_ / "job.h5", MakeJob(), {.job_id = "job-pf"});
    ASSERT_NE(reader_, nullptr);
  }
  Decoded Export(const TraceExportOptions& opts = {}) {
    std::ostringstream os;
    Status st = WritePerfettoTrace(*reader_, os, opts, &stats_);
    EXPECT_TRUE(st.ok()) << st.message();
    bytes_ = os.str();
    EXPECT_EQ(stats_.bytes, bytes_.size());
    return Decode(bytes_);
  }
  // "pid/track name" of an event's track.
  static std::string Where(const Decoded& d, const Event& e) {
    return std::to_string(d.track_pid.at(e.track)) + "/" + d.track_names.at(e.track);
  }

  TempDir dir_{"commprof-perfetto"};
  std::unique_ptr<ProfileReader> reader_;
  TraceExportStats stats_;
  std::string bytes_;
};

TEST_F(PerfettoTraceTest, TimestampsRebuildToTheAlignedTimesAndSlicesNestPerTrack) {
  Decoded d = Export();
  std::vector<std::string> got;
  for (const Event& e : d.events) {
    if (e.type == 4) continue;
    got.push_back(Where(d, e) + " " + std::to_string(e.type) + " " + std::to_string(e.ts) + " " + e.name);
  }
  const std::vector<std::string> want = {
      "1/thread 0 1 0 MPI_Init",
      "1/thread 0 2 1000 ",
      "1/thread 0 1 9000 outer",
      "1/thread 0 1 19000 MPI_Barrier",
      "1/thread 0 2 29000 ",
      "1/thread 0 2 29000 ",
      "2/thread 0 1 24000 MPI_Barrier",
      "2/thread 0 2 28500 ",
      "2/GPU 0 stream 0 1 25000 memory",
      "2/GPU 0 stream 0 2 25000 ",
      "2/GPU 0 stream 0 1 27000 memory",
      "2/GPU 0 stream 0 2 27000 ",
      "2/GPU 0 stream 3 1 25000 " + kBadNameAsUtf8,
      "2/GPU 0 stream 3 2 26000 ",
  };
  EXPECT_EQ(got, want);
  EXPECT_EQ(d.track_names.at(1), "rank 0 (h0, pid 100)");
  EXPECT_EQ(d.track_pid.at(1), 1u);  // pid = rank + 1: 0 is the idle process to Perfetto
  EXPECT_EQ(d.facts.at("origin_reference_ns"), "1000");
  EXPECT_EQ(d.facts.at("job_id"), "job-pf");
}

TEST_F(PerfettoTraceTest, TheFlowRunsFromTheLastArriversBeginToTheWaitersOwnEnd) {
  Decoded d = Export();
  // Rank 1 arrived last (25000 > 20000): its Barrier's BEGIN carries the flow; rank 0's Barrier END
  // carries it too, and it must be the first END at 29000 on rank 0's track, the one that closes the
  // Barrier (nested in "outer", which ends on the same ns): an END closes the innermost open slice.
  std::vector<const Event*> with_flow;
  for (const Event& e : d.events) {
    if (!e.flows.empty()) with_flow.push_back(&e);
  }
  ASSERT_EQ(with_flow.size(), 2u);
  EXPECT_EQ(with_flow[0]->flows, with_flow[1]->flows);
  EXPECT_EQ(with_flow[0]->type, 2u);  // rank 0 is written first: its END
  EXPECT_EQ(with_flow[0]->ts, 29000);
  EXPECT_EQ(with_flow[1]->type, 1u);
  EXPECT_EQ(with_flow[1]->ts, 24000);
  EXPECT_EQ(with_flow[1]->args.at("last_rank"), "1");
  // Simulate the reader's stack on rank 0's thread: the END with the flow must close MPI_Barrier.
  std::vector<std::string> stack;
  std::string closed_by_flow;
  for (const Event& e : d.events) {
    if (Where(d, e) != "1/thread 0") continue;
    if (e.type == 1) stack.push_back(e.name);
    if (e.type == 2) {
      ASSERT_FALSE(stack.empty());
      if (!e.flows.empty()) closed_by_flow = stack.back();
      stack.pop_back();
    }
  }
  EXPECT_TRUE(stack.empty());
  EXPECT_EQ(closed_by_flow, "MPI_Barrier");
  EXPECT_EQ(stats_.flows, 1u);
}

TEST_F(PerfettoTraceTest, ArgsAreInternedAndCountersCarryTheBytesInUse) {
  Decoded d = Export();
  const Event* barrier = nullptr;
  std::vector<std::pair<int64_t, int64_t>> memory;
  for (const Event& e : d.events) {
    if (e.type == 1 && e.name == "MPI_Barrier" && d.track_pid.at(e.track) == 1) barrier = &e;
    if (e.type == 4) memory.emplace_back(e.ts, e.counter);
  }
  ASSERT_NE(barrier, nullptr);
  EXPECT_EQ(barrier->category, "mpi_collective");
  EXPECT_EQ(barrier->args.at("op"), "barrier");
  EXPECT_EQ(barrier->args.at("seq"), "0");
  EXPECT_EQ(barrier->args.at("wait_ns"), "5000");  // waited from 20000 to the last arrival at 25000
  EXPECT_EQ(barrier->args.at("last_rank"), "1");
  EXPECT_EQ(memory, (std::vector<std::pair<int64_t, int64_t>>{{25000, 4096}, {27000, 0}}));
}

TEST_F(PerfettoTraceTest, ACutKeepsWhatOverlapsAndTheCounterLevelAtItsStart) {
  TraceExportOptions opts;
  opts.time_range = TraceTimeRange{26500, 28600};
  Decoded d = Export(opts);
  std::map<std::string, int> begins;
  std::vector<std::pair<int64_t, int64_t>> memory;
  for (const Event& e : d.events) {
    if (e.type == 1) ++begins[Where(d, e) + " " + e.name];
    if (e.type == 4) memory.emplace_back(e.ts, e.counter);
  }
  // Kept: outer, both Barriers and the free at 27000 overlap [26500, 28600); MPI_Init, the kernel
  // [25000,26000] and the allocation at 25000 do not.
  EXPECT_EQ(begins, (std::map<std::string, int>{{"1/thread 0 outer", 1},
                                                {"1/thread 0 MPI_Barrier", 1},
                                                {"2/thread 0 MPI_Barrier", 1},
                                                {"2/GPU 0 stream 0 memory", 1}}));
  EXPECT_EQ(stats_.events_cut, 3u);
  EXPECT_EQ(stats_.flows, 1u);  // both Barriers kept: the flow too
  // The level at the cut's start (4096 since 25000), then the free at 27000.
  EXPECT_EQ(memory, (std::vector<std::pair<int64_t, int64_t>>{{26500, 4096}, {27000, 0}}));
  EXPECT_EQ(d.facts.at("cut_from_ns"), "26500");
  EXPECT_EQ(d.facts.at("cut_to_ns"), "28600");

  // A cut that keeps rank 0's Barrier but not rank 1's: no flow, and no flow id left dangling.
  opts.time_range = TraceTimeRange{19000, 23000};
  d = Export(opts);
  for (const Event& e : d.events) EXPECT_TRUE(e.flows.empty()) << Where(d, e) << " " << e.name;
  EXPECT_EQ(stats_.flows, 0u);
}

// (The size against the JSON is checked on real jobs by tests/e2e/perfetto_export.py: on a job this
// small the trace's facts and track descriptors outweigh the events.)
TEST_F(PerfettoTraceTest, AWriteFailureNamesTheOutputAndARankNotInTheFileTheInput) {
  TraceExportOptions opts;
  opts.ranks = {5};
  std::ostringstream os;
  Status st = WritePerfettoTrace(*reader_, os, opts, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("job.h5"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 5"), std::string::npos) << st.message();

  std::ostringstream broken;
  broken.setstate(std::ios::badbit);
  TraceExportOptions named;
  named.output_name = "out.pftrace";
  st = WritePerfettoTrace(*reader_, broken, named, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find("out.pftrace"), std::string::npos) << st.message();
}

// A broadcast whose root left before the last rank arrived: an arrow from the late rank's arrival to
// the root's slice would point back in time, so neither format draws one.
TEST(PerfettoTraceFlows, AParticipantThatLeftBeforeTheLastArrivalGetsNoArrowInEitherFormat) {
  TempDir dir("commprof-perfetto-bcast");
  std::vector<RankData> r(3);
  for (auto& x : r) {
    x.strings = {"MPI_Bcast"};
    x.points = {ClockPoint{0, 0, 10}};
  }
  // Root 0 [1000,1100] leaves at once; rank 1 [1050,3000] arrives before it left; rank 2 [2000,3000]
  // arrives last, after the root had left.
  r[0].events = {Collective(COMMPROF_OP_BCAST, 0, 1000, 1100, {.root = 0, .bytes = 8})};
  r[1].events = {Collective(COMMPROF_OP_BCAST, 0, 1050, 3000, {.root = 0, .bytes = 8})};
  r[2].events = {Collective(COMMPROF_OP_BCAST, 0, 2000, 3000, {.root = 0, .bytes = 8})};
  auto reader = test_support::WriteProfile(dir / "bcast.h5", r);
  ASSERT_NE(reader, nullptr);
  TraceExportStats stats;
  std::ostringstream pb, js;
  ASSERT_TRUE(WritePerfettoTrace(*reader, pb, {}, &stats).ok());
  EXPECT_EQ(stats.flows, 1u);  // rank 2 -> rank 1 only
  const Decoded d = Decode(pb.str());
  std::map<uint64_t, std::vector<int64_t>> flow_ts;
  for (const Event& e : d.events) {
    for (uint64_t f : e.flows) flow_ts[f].push_back(e.ts);
  }
  ASSERT_EQ(flow_ts.size(), 1u);
  EXPECT_EQ(flow_ts.begin()->second, (std::vector<int64_t>{2000, 1000}));  // rank 1's END, rank 2's BEGIN
  ASSERT_TRUE(WriteChromeTrace(*reader, js, {}, &stats).ok());
  EXPECT_EQ(stats.flows, 1u);
  size_t s_events = 0, pos = 0;
  while ((pos = js.str().find("\"ph\":\"s\"", pos)) != std::string::npos) {
    ++s_events;
    ++pos;
  }
  EXPECT_EQ(s_events, 1u);
}

TEST(TraceCuts, TimeRangesAndStepRangesParseOrSayWhy) {
  TraceTimeRange r;
  std::string why;
  ASSERT_TRUE(ParseTimeRange("1.5s:2s", r, why)) << why;
  EXPECT_EQ(r.from_ns, 1500000000);
  EXPECT_EQ(r.to_ns, 2000000000);
  ASSERT_TRUE(ParseTimeRange(":250us", r, why));
  EXPECT_EQ(r.from_ns, 0);
  EXPECT_EQ(r.to_ns, 250000);
  ASSERT_TRUE(ParseTimeRange("7ms:", r, why));
  EXPECT_EQ(r.to_ns, INT64_MAX);
  EXPECT_FALSE(ParseTimeRange("2s", r, why));
  EXPECT_NE(why.find("FROM:TO"), std::string::npos);
  EXPECT_FALSE(ParseTimeRange("3s:1s", r, why));
  EXPECT_FALSE(ParseTimeRange("1:2:3", r, why));
  EXPECT_FALSE(ParseTimeRange("-1s:", r, why));
  TraceStepRange s;
  ASSERT_TRUE(ParseStepRange("5-8", s, why));
  EXPECT_EQ(s.first, 5u);
  EXPECT_EQ(s.last, 8u);
  ASSERT_TRUE(ParseStepRange("4", s, why));
  EXPECT_EQ(s.first, 4u);
  EXPECT_EQ(s.last, 4u);
  EXPECT_FALSE(ParseStepRange("8-5", s, why));
  // Exact decimals: a double would make 1.001 s 1000999999 ns; a fraction of a ns rounds.
  ASSERT_TRUE(ParseTimeRange("1.001s:1.015s", r, why)) << why;
  EXPECT_EQ(r.from_ns, 1001000000);
  EXPECT_EQ(r.to_ns, 1015000000);
  ASSERT_TRUE(ParseTimeRange("5:5.5", r, why)) << why;
  EXPECT_EQ(r.to_ns, 6);
  ASSERT_TRUE(ParseTimeRange("0.000000001s:9223372036s", r, why)) << why;
  EXPECT_EQ(r.from_ns, 1);
  EXPECT_FALSE(ParseTimeRange("9223372037s:", r, why));  // beyond int64 ns
  EXPECT_FALSE(ParseTimeRange(".s:", r, why));
  EXPECT_FALSE(ParseStepRange("x", s, why));
  EXPECT_FALSE(ParseStepRange("5-", s, why));
}

}  // namespace
}  // namespace commprof
