#include "analysis/report/analysis_group.h"

#include <cstddef>
#include <cstring>
#include <vector>

#include "core/h5/h5_util.h"

namespace commprof {
namespace {

using h5::Handle;

// Row layouts of the tables (field names = docs/file-format.md column names).
struct RankRow {
  uint32_t rank;
  uint64_t instances;
  int64_t comm_time_ns;
  int64_t wait_time_ns;
  double wait_share;
  uint64_t times_last;
  int64_t delay_caused_ns;
  int64_t wait_imposed_ns;
  int64_t transfer_time_ns;
  uint64_t p2p_sent;
  uint64_t p2p_received;
  int64_t p2p_time_ns;
  int64_t late_sender_wait_ns;
  int64_t late_receiver_wait_ns;
  double overlap;
  int64_t exposed_comm_ns;
  int64_t span_ns;
  int64_t compute_ns;
  int64_t memory_ns;
  int64_t idle_ns;
};

struct CollectiveRow {
  char type[24];
  uint8_t op;
  uint64_t count;
  uint64_t bytes;
  double mean_duration_ns;
  double mean_wait_ns;
  double mean_transfer_ns;
  int64_t skew_p50_ns;
  int64_t skew_p99_ns;
  double algbw_gbps;
  double busbw_gbps;
};

struct InstanceRow {
  uint64_t comm_id;
  uint64_t seq;
  uint8_t op;
  uint8_t complete;
  uint32_t participants;
  uint32_t comm_size;
  uint64_t bytes;
  int64_t first_arrival_ns;
  int64_t last_arrival_ns;
  int64_t skew_ns;
  int64_t last_end_ns;
  int64_t straggler_rank;  // -1: no straggler (skew under the threshold) or incomplete
  int64_t delay_caused_ns;
  int64_t total_wait_ns;
  int64_t transfer_ns;
  double algbw_gbps;
  double busbw_gbps;
  uint64_t first_arrival_row;  // index of its first row in `arrivals`
};

struct ArrivalRow {
  uint64_t instance;  // row in `instances`
  uint32_t rank;      // world rank
  int32_t local_rank;
  int64_t start_ns;
  int64_t end_ns;
  int64_t wait_ns;
  int64_t transfer_ns;
};

struct MemoryRow {
  uint32_t rank;
  uint16_t device;
  uint8_t memory_kind;
  int64_t time_ns;
  int64_t bytes_in_use;
  int64_t delta_bytes;
};

// Builds a compound type field by field; the last argument list names every member once.
class CompoundBuilder {
 public:
  explicit CompoundBuilder(size_t size) : type_(H5Tcreate(H5T_COMPOUND, size)) {}
  CompoundBuilder& Field(const char* name, size_t offset, hid_t type) {
    H5Tinsert(type_.get(), name, offset, type);
    return *this;
  }
  Handle Take() { return std::move(type_); }

 private:
  Handle type_;
};

#define COMMPROF_COL(T, name, h5type) Field(#name, offsetof(T, name), h5type)

Handle RankType() {
  return CompoundBuilder(sizeof(RankRow))
      .COMMPROF_COL(RankRow, rank, H5T_NATIVE_UINT32)
      .COMMPROF_COL(RankRow, instances, H5T_NATIVE_UINT64)
      .COMMPROF_COL(RankRow, comm_time_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(RankRow, wait_time_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(RankRow, wait_share, H5T_NATIVE_DOUBLE)
      .COMMPROF_COL(RankRow, times_last, H5T_NATIVE_UINT64)
      .COMMPROF_COL(RankRow, delay_caused_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(RankRow, wait_imposed_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(RankRow, transfer_time_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(RankRow, p2p_sent, H5T_NATIVE_UINT64)
      .COMMPROF_COL(RankRow, p2p_received, H5T_NATIVE_UINT64)
      .COMMPROF_COL(RankRow, p2p_time_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(RankRow, late_sender_wait_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(RankRow, late_receiver_wait_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(RankRow, overlap, H5T_NATIVE_DOUBLE)
      .COMMPROF_COL(RankRow, exposed_comm_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(RankRow, span_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(RankRow, compute_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(RankRow, memory_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(RankRow, idle_ns, H5T_NATIVE_INT64)
      .Take();
}

Handle CollectiveType() {
  Handle name(H5Tcopy(H5T_C_S1));
  H5Tset_size(name.get(), sizeof(CollectiveRow::type));
  H5Tset_strpad(name.get(), H5T_STR_NULLTERM);
  return CompoundBuilder(sizeof(CollectiveRow))
      .COMMPROF_COL(CollectiveRow, type, name.get())
      .COMMPROF_COL(CollectiveRow, op, H5T_NATIVE_UINT8)
      .COMMPROF_COL(CollectiveRow, count, H5T_NATIVE_UINT64)
      .COMMPROF_COL(CollectiveRow, bytes, H5T_NATIVE_UINT64)
      .COMMPROF_COL(CollectiveRow, mean_duration_ns, H5T_NATIVE_DOUBLE)
      .COMMPROF_COL(CollectiveRow, mean_wait_ns, H5T_NATIVE_DOUBLE)
      .COMMPROF_COL(CollectiveRow, mean_transfer_ns, H5T_NATIVE_DOUBLE)
      .COMMPROF_COL(CollectiveRow, skew_p50_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(CollectiveRow, skew_p99_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(CollectiveRow, algbw_gbps, H5T_NATIVE_DOUBLE)
      .COMMPROF_COL(CollectiveRow, busbw_gbps, H5T_NATIVE_DOUBLE)
      .Take();
}

Handle InstanceType() {
  return CompoundBuilder(sizeof(InstanceRow))
      .COMMPROF_COL(InstanceRow, comm_id, H5T_NATIVE_UINT64)
      .COMMPROF_COL(InstanceRow, seq, H5T_NATIVE_UINT64)
      .COMMPROF_COL(InstanceRow, op, H5T_NATIVE_UINT8)
      .COMMPROF_COL(InstanceRow, complete, H5T_NATIVE_UINT8)
      .COMMPROF_COL(InstanceRow, participants, H5T_NATIVE_UINT32)
      .COMMPROF_COL(InstanceRow, comm_size, H5T_NATIVE_UINT32)
      .COMMPROF_COL(InstanceRow, bytes, H5T_NATIVE_UINT64)
      .COMMPROF_COL(InstanceRow, first_arrival_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(InstanceRow, last_arrival_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(InstanceRow, skew_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(InstanceRow, last_end_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(InstanceRow, straggler_rank, H5T_NATIVE_INT64)
      .COMMPROF_COL(InstanceRow, delay_caused_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(InstanceRow, total_wait_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(InstanceRow, transfer_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(InstanceRow, algbw_gbps, H5T_NATIVE_DOUBLE)
      .COMMPROF_COL(InstanceRow, busbw_gbps, H5T_NATIVE_DOUBLE)
      .COMMPROF_COL(InstanceRow, first_arrival_row, H5T_NATIVE_UINT64)
      .Take();
}

Handle ArrivalType() {
  return CompoundBuilder(sizeof(ArrivalRow))
      .COMMPROF_COL(ArrivalRow, instance, H5T_NATIVE_UINT64)
      .COMMPROF_COL(ArrivalRow, rank, H5T_NATIVE_UINT32)
      .COMMPROF_COL(ArrivalRow, local_rank, H5T_NATIVE_INT32)
      .COMMPROF_COL(ArrivalRow, start_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(ArrivalRow, end_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(ArrivalRow, wait_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(ArrivalRow, transfer_ns, H5T_NATIVE_INT64)
      .Take();
}

Handle MemoryType() {
  return CompoundBuilder(sizeof(MemoryRow))
      .COMMPROF_COL(MemoryRow, rank, H5T_NATIVE_UINT32)
      .COMMPROF_COL(MemoryRow, device, H5T_NATIVE_UINT16)
      .COMMPROF_COL(MemoryRow, memory_kind, H5T_NATIVE_UINT8)
      .COMMPROF_COL(MemoryRow, time_ns, H5T_NATIVE_INT64)
      .COMMPROF_COL(MemoryRow, bytes_in_use, H5T_NATIVE_INT64)
      .COMMPROF_COL(MemoryRow, delta_bytes, H5T_NATIVE_INT64)
      .Take();
}

#undef COMMPROF_COL

// A 1-D table of `rows`, chunked and compressed when large; an empty table is still created so
// readers find every documented dataset.
template <typename Row>
bool WriteRows(hid_t group, const char* name, hid_t type, const std::vector<Row>& rows) {
  hsize_t dims[1] = {rows.size()};
  Handle space(H5Screate_simple(1, dims, nullptr));
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (rows.size() > 4096) {
    hsize_t chunk = 16384;
    H5Pset_chunk(dcpl.get(), 1, &chunk);
    H5Pset_shuffle(dcpl.get());
    H5Pset_deflate(dcpl.get(), 1);
  }
  Handle d(H5Dcreate2(group, name, type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!d.valid()) return false;
  return rows.empty() || H5Dwrite(d.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) >= 0;
}

bool WriteStringDataset(hid_t group, const char* name, const std::string& value) {
  Handle space(H5Screate(H5S_SCALAR));
  Handle d(H5Dcreate2(group, name, h5::VarStringType(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  const char* p = value.c_str();
  return d.valid() && H5Dwrite(d.get(), h5::VarStringType(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p) >= 0;
}

}  // namespace

Status WriteAnalysisGroup(const std::string& path, const JobReport& report) {
  h5::QuietErrors();
  const WaitReport& w = report.wait;
  std::vector<RankRow> ranks;
  for (size_t i = 0; i < w.ranks.size(); ++i) {
    const auto& m = w.ranks[i];
    P2PRankStats p = i < report.p2p.ranks.size() ? report.p2p.ranks[i] : P2PRankStats{};
    RankOverlap o = i < report.overlap.size() ? report.overlap[i] : RankOverlap{};
    ranks.push_back({m.rank,
                     m.instances,
                     m.comm_time_ns,
                     m.wait_time_ns,
                     m.wait_share,
                     m.times_last,
                     m.delay_caused_ns,
                     m.wait_imposed_ns,
                     m.transfer_time_ns,
                     p.sent,
                     p.received,
                     p.p2p_time_ns,
                     p.late_sender_wait_ns,
                     p.late_receiver_wait_ns,
                     o.overlap,
                     o.exposed_comm_ns,
                     o.breakdown.span_ns,
                     o.breakdown.compute_ns,
                     o.breakdown.memory_ns,
                     o.breakdown.idle_ns});
  }
  std::vector<CollectiveRow> types;
  for (const auto& t : w.types) {
    CollectiveRow row{};
    std::strncpy(row.type, OpTypeName(t.op), sizeof row.type - 1);
    row.op = t.op;
    row.count = t.count;
    row.bytes = t.bytes;
    row.mean_duration_ns = t.mean_duration_ns;
    row.mean_wait_ns = t.mean_wait_ns;
    row.mean_transfer_ns = t.mean_transfer_ns;
    row.skew_p50_ns = t.skew_p50_ns;
    row.skew_p99_ns = t.skew_p99_ns;
    row.algbw_gbps = t.algbw_gbps;
    row.busbw_gbps = t.busbw_gbps;
    types.push_back(row);
  }
  std::vector<InstanceRow> instances;
  std::vector<ArrivalRow> arrivals;
  instances.reserve(report.instances.size());
  for (size_t k = 0; k < report.instances.size(); ++k) {
    const CollectiveInstance& in = report.instances[k];
    const InstanceMetrics& im = report.measured[k];  // measured once by AnalyzeJob
    InstanceRow row{};
    row.comm_id = in.comm_id;
    row.seq = in.seq;
    row.op = in.op;
    row.complete = in.complete() ? 1 : 0;
    row.participants = static_cast<uint32_t>(in.arrivals.size());
    row.comm_size = in.comm_size;
    row.bytes = in.bytes;
    row.first_arrival_ns = im.first_arrival;
    row.last_arrival_ns = im.last_arrival;
    row.skew_ns = im.skew_ns;
    row.last_end_ns = im.last_end;
    // Incomplete instances are listed but not measured (docs/metrics.md §1): no straggler.
    row.straggler_rank = in.complete() && im.straggler_index >= 0
                             ? static_cast<int64_t>(in.arrivals[im.straggler_index].world_rank)
                             : int64_t{-1};
    row.delay_caused_ns = in.complete() ? im.delay_caused_ns : 0;
    row.total_wait_ns = im.total_wait_ns;
    row.transfer_ns = im.transfer_ns;
    row.algbw_gbps = im.algbw_gbps;
    row.busbw_gbps = im.busbw_gbps;
    row.first_arrival_row = arrivals.size();
    for (size_t i = 0; i < in.arrivals.size(); ++i) {
      const Arrival& a = in.arrivals[i];
      arrivals.push_back({instances.size(), a.world_rank, a.local_rank, a.start, a.end, im.waits[i], im.transfers[i]});
    }
    instances.push_back(row);
  }

  std::vector<MemoryRow> memory;
  for (const MemorySeries& m : report.memory) {
    for (const MemoryPoint& pt : m.points) {
      memory.push_back({m.rank, m.device, m.memory_kind, pt.time_ns, pt.bytes_in_use, pt.delta_bytes});
    }
  }

  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  if (!file.valid()) return IoError(path + ": cannot open for writing the analysis group");
  if (H5Lexists(file.get(), "analysis", H5P_DEFAULT) > 0 && H5Ldelete(file.get(), "analysis", H5P_DEFAULT) < 0) {
    return IoError(path + ": cannot replace the existing /analysis group");
  }
  Handle g(H5Gcreate2(file.get(), "analysis", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!g.valid()) return IoError(path + ": cannot create /analysis");
  const StragglerVerdict& v = w.verdict;
  bool ok = h5::WriteAttr(g.get(), "analysis_version", kAnalysisGroupVersion) &&
            h5::WriteAttr(g.get(), "report_schema_version", static_cast<uint64_t>(kReportSchemaVersion)) &&
            h5::WriteAttr(g.get(), "matched", w.matched) && h5::WriteAttr(g.get(), "incomplete", w.incomplete) &&
            h5::WriteAttr(g.get(), "skew_threshold_ns", w.skew_threshold_ns) &&
            h5::WriteAttr(g.get(), "clock_violations", report.clock.violations) &&
            h5::WriteAttr(g.get(), "straggler_rank", v.found ? static_cast<int64_t>(v.rank) : int64_t{-1}) &&
            h5::WriteAttr(g.get(), "straggler_share_last", v.share_last) &&
            h5::WriteAttr(g.get(), "straggler_delay_caused_ns", v.delay_caused_ns) &&
            h5::WriteAttr(g.get(), "straggler_cause", v.cause) &&
            h5::WriteAttr(g.get(), "p2p_matched", report.p2p.matched) &&
            h5::WriteAttr(g.get(), "p2p_unmatched_sends", report.p2p.unmatched_sends) &&
            h5::WriteAttr(g.get(), "p2p_unmatched_recvs", report.p2p.unmatched_recvs) &&
            h5::WriteAttr(g.get(), "p2p_late_sender_wait_ns", report.p2p.late_sender_wait_ns) &&
            h5::WriteAttr(g.get(), "p2p_late_receiver_wait_ns", report.p2p.late_receiver_wait_ns);
  ok = ok && WriteRows(g.get(), "ranks", RankType().get(), ranks) &&
       WriteRows(g.get(), "collectives", CollectiveType().get(), types) &&
       WriteRows(g.get(), "instances", InstanceType().get(), instances) &&
       WriteRows(g.get(), "arrivals", ArrivalType().get(), arrivals) &&
       WriteRows(g.get(), "memory", MemoryType().get(), memory) &&
       WriteStringDataset(g.get(), "report_json", ReportToJson(report).dump());
  if (!ok) return IoError(path + ": writing /analysis failed");
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) return IoError(path + ": flushing /analysis failed");
  return Status::Ok();
}

}  // namespace commprof
