#include "analysis/report/analysis_group.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/h5/chunk_encoder.h"
#include "core/h5/failsafe_driver.h"
#include "core/h5/h5_util.h"
#include "core/h5/lz4_filter.h"
#include "core/schema/analysis_tables.h"
#include "core/schema/enums.h"

namespace commprof {
namespace {

using h5::Handle;
using schema::ArrivalRow;
using schema::CollectiveRow;
using schema::InstanceRow;
using schema::MemoryRow;
using schema::RankRow;
using schema::StepRankRow;
namespace attr = schema::analysis_attr;

// Tables of more rows than this are chunked and compressed; smaller ones are stored contiguous
// (a chunk index costs about as much as 128 rows save). With 4096, a job's instances table of
// 1500 rows stayed uncompressed: a third of an 8-rank MPI job's file.
constexpr hsize_t kContiguousRows = 128;
constexpr hsize_t kChunkRows = 16384;

// A 1-D table of `rows`, its compound type derived from the schema's column list. An empty table
// is still created so readers find every documented dataset. Any row count is stored: the chunk
// is never larger than the (fixed) extent of the dataset, which HDF5 refuses.
template <typename Row>
bool WriteRows(hid_t group, const std::vector<Row>& rows) {
  using Table = schema::TableOf<Row>;
  Handle type = h5::BuildCompound(sizeof(Row), Table::kColumns);
  const hsize_t n = rows.size();
  hsize_t dims[1] = {n};
  Handle space(H5Screate_simple(1, dims, nullptr));
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  const bool compressed = n > kContiguousRows;
  const hsize_t chunk = std::min(kChunkRows, n);
  if (compressed) {
    H5Pset_chunk(dcpl.get(), 1, &chunk);
    h5::SetCodecFilters(dcpl.get(), h5::Codec::kShuffleLz4, 0);
  }
  Handle d(H5Dcreate2(group, Table::kName, type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!d.valid()) {
    return false;
  }
  if (rows.empty()) {
    return true;
  }
  // The rows' bytes are the file's records (the type is built from the row's own layout), padding
  // included: the records are the columns' bytes alone, so that no leftover memory reaches the file
  // and the same analysis is the same bytes.
  std::vector<uint8_t> records(rows.size() * sizeof(Row), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto* from = reinterpret_cast<const uint8_t*>(&rows[i]);
    uint8_t* to = records.data() + i * sizeof(Row);
    for (const schema::Column& c : Table::kColumns) {
      std::memcpy(to + c.offset, from + c.offset, c.size);
    }
  }
  if (compressed) {
    // The chunks are encoded here and stored whole: a third of the time of HDF5's pipeline.
    h5::ChunkEncoder encoder(h5::Codec::kShuffleLz4, 0, sizeof(Row), static_cast<size_t>(chunk));
    return encoder.WriteRows(d.get(), 0, records);
  }
  return H5Dwrite(d.get(), type.get(), H5S_ALL, H5S_ALL, h5::Transfer(rows.size(), sizeof(Row)).id(), records.data()) >=
         0;
}

bool WriteStringDataset(hid_t group, const char* name, const std::string& value) {
  Handle space(H5Screate(H5S_SCALAR));
  Handle d(H5Dcreate2(group, name, h5::VarStringType(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  const char* p = value.c_str();
  return d.valid() && H5Dwrite(d.get(), h5::VarStringType(), H5S_ALL, H5S_ALL, h5::Transfer(1).id(), &p) >= 0;
}

}  // namespace

Status WriteAnalysisGroup(const std::string& path, const JobReport& report) {
  h5::QuietErrors();
  h5::RegisterLz4Filter();  // the tables of more than kContiguousRows rows are LZ4-compressed
  const WaitReport& w = report.wait;
  std::vector<RankRow> ranks;
  ranks.reserve(w.ranks.size());
  for (size_t i = 0; i < w.ranks.size(); ++i) {
    const auto& m = w.ranks[i];
    P2PRankStats p = i < report.p2p.ranks.size() ? report.p2p.ranks[i] : P2PRankStats{};
    RankOverlap o = i < report.overlap.size() ? report.overlap[i] : RankOverlap{};
    // Designated initializers: a column moved in the schema without moving it here fails to compile.
    ranks.push_back({.rank = m.rank,
                     .instances = m.instances,
                     .comm_time_ns = m.comm_time_ns,
                     .wait_time_ns = m.wait_time_ns,
                     .wait_share = m.wait_share,
                     .times_last = m.times_last,
                     .expected_last = m.expected_last,
                     .delay_caused_ns = m.delay_caused_ns,
                     .wait_imposed_ns = m.wait_imposed_ns,
                     .transfer_time_ns = m.transfer_time_ns,
                     .p2p_sent = p.sent,
                     .p2p_received = p.received,
                     .p2p_time_ns = p.p2p_time_ns,
                     .late_sender_wait_ns = p.late_sender_wait_ns,
                     .late_receiver_wait_ns = p.late_receiver_wait_ns,
                     .overlap = o.overlap,
                     .exposed_comm_ns = o.exposed_comm_ns,
                     .span_ns = o.breakdown.span_ns,
                     .compute_ns = o.breakdown.compute_ns,
                     .memory_ns = o.breakdown.memory_ns,
                     .idle_ns = o.breakdown.idle_ns});
  }
  std::vector<CollectiveRow> types;
  for (const auto& t : w.types) {
    CollectiveRow row{};
    std::strncpy(row.type, schema::CollectiveOpName(t.op), sizeof row.type - 1);
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
      arrivals.push_back({.instance = instances.size(),
                          .rank = a.world_rank,
                          .local_rank = a.local_rank,
                          .start_ns = a.start,
                          .end_ns = a.end,
                          .wait_ns = im.waits[i],
                          .transfer_ns = im.transfers[i]});
    }
    instances.push_back(row);
  }

  std::vector<MemoryRow> memory;
  for (const MemorySeries& m : report.memory) {
    for (const MemoryPoint& pt : m.points) {
      memory.push_back({.rank = m.rank,
                        .device = m.device,
                        .memory_kind = m.memory_kind,
                        .time_ns = pt.time_ns,
                        .bytes_in_use = pt.bytes_in_use,
                        .delta_bytes = pt.delta_bytes});
    }
  }

  // The step table (docs/metrics.md §10): one row per rank of each step.
  std::vector<StepRankRow> steps;
  for (const StepRow& s : report.steps.steps) {
    for (const StepRankFigures& f : s.ranks) {
      steps.push_back({.step = s.step,
                       .rank = f.rank,
                       .window = s.window,
                       .start_ns = s.start_ns,
                       .duration_ns = f.duration_ns,
                       .comm_ns = f.comm_ns,
                       .wait_ns = f.wait_ns,
                       .delay_cost_ns = static_cast<int64_t>(std::llround(f.delay_cost_ns)),
                       .straggler_rank = s.straggler});
    }
  }

  // Through the fail-safe driver: a full disk fails the write once, HDF5 still closes the file
  // (with sec2 it cannot, and its exit handler then crashes), and the file stays as it was.
  Handle fapl(h5::FailSafeAccessList());
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl.valid() ? fapl.get() : H5P_DEFAULT));
  if (!file.valid()) {
    return IoError(path + ": cannot open for writing the analysis group");
  }
  const char* group = schema::kAnalysisGroup;
  auto write_failed = [&](const std::string& what) -> Status {
    const int err = h5::WriteErrno(h5::FailSafeOf(file.get()));
    return IoError(path + ": " + what + (err != 0 ? std::string(": ") + std::strerror(err) : std::string()) +
                   "; the file is otherwise as it was");
  };
  // The group is written unlinked and flushed first, then linked in place of the old one: a write
  // that fails on the way (a full disk) leaves no /analysis pointing at half-written objects, which
  // HDF5 could then neither read nor delete.
  Handle g(H5Gcreate_anon(file.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!g.valid()) {
    return IoError(path + ": cannot create /" + group);
  }
  const Straggler none;
  const Straggler& v = report.stragglers.empty() ? none : report.stragglers.front();
  const hid_t a = g.get();
  using h5::Write;
  bool ok = Write(a, attr::kAnalysisVersionAttr, kAnalysisGroupVersion) &&
            Write(a, attr::kReportSchemaVersion, static_cast<uint64_t>(kReportSchemaVersion)) &&
            Write(a, attr::kMatched, w.matched) && Write(a, attr::kIncomplete, w.incomplete) &&
            Write(a, attr::kSkewThresholdNs, w.skew_threshold_ns) &&
            Write(a, attr::kClockViolations, report.clock.violations) &&
            Write(a, attr::kStragglers, static_cast<uint64_t>(report.stragglers.size())) &&
            Write(a, attr::kStragglerRank, report.stragglers.empty() ? int64_t{-1} : static_cast<int64_t>(v.rank)) &&
            Write(a, attr::kStragglerShare, v.share) &&
            Write(a, attr::kStragglerDelayCostNs, static_cast<int64_t>(std::llround(v.delay_cost_ns))) &&
            Write(a, attr::kStragglerPattern, v.pattern) && Write(a, attr::kStragglerCause, v.cause) &&
            Write(a, attr::kP2pMatched, report.p2p.matched) &&
            Write(a, attr::kP2pUnmatchedSends, report.p2p.unmatched_sends) &&
            Write(a, attr::kP2pUnmatchedRecvs, report.p2p.unmatched_recvs) &&
            Write(a, attr::kP2pLateSenderWaitNs, report.p2p.late_sender_wait_ns) &&
            Write(a, attr::kP2pLateReceiverWaitNs, report.p2p.late_receiver_wait_ns);
  ok = ok && WriteRows(a, ranks) && WriteRows(a, types) && WriteRows(a, instances) && WriteRows(a, arrivals) &&
       WriteRows(a, memory) && WriteRows(a, steps) &&
       WriteStringDataset(a, schema::kReportJsonDataset, ReportToJson(report).dump());
  if (!ok || H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0 || h5::WriteErrno(h5::FailSafeOf(file.get())) != 0) {
    return write_failed(std::string("writing /") + group + " failed");
  }
  if (H5Lexists(file.get(), group, H5P_DEFAULT) > 0 && H5Ldelete(file.get(), group, H5P_DEFAULT) < 0) {
    return IoError(path + ": cannot replace the existing /" + group +
                   " group (HDF5 cannot read it: damaged, e.g. by a write that failed before this version)");
  }
  if (H5Olink(g.get(), file.get(), group, H5P_DEFAULT, H5P_DEFAULT) < 0 || H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0 ||
      h5::WriteErrno(h5::FailSafeOf(file.get())) != 0) {
    return write_failed(std::string("linking /") + group + " failed");
  }
  return Status::Ok();
}

template <typename Row>
Result<std::vector<Row>> ReadAnalysisTable(const std::string& path) {
  h5::QuietErrors();
  h5::RegisterLz4Filter();  // the tables of more than kContiguousRows rows are LZ4-compressed
  using Table = schema::TableOf<Row>;
  const std::string where = path + ": /" + schema::kAnalysisGroup + "/" + Table::kName;
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) {
    return IoError(path + ": cannot open");
  }
  const std::string name = std::string(schema::kAnalysisGroup) + "/" + Table::kName;
  if (H5Lexists(file.get(), schema::kAnalysisGroup, H5P_DEFAULT) <= 0 ||
      H5Lexists(file.get(), name.c_str(), H5P_DEFAULT) <= 0) {
    return NotFound(where + " does not exist");
  }
  Handle d(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT));
  Handle space(H5Dget_space(d.get()));
  if (!d.valid() || H5Sget_simple_extent_ndims(space.get()) != 1) {
    return Corrupt(where + " is not a 1-D table");
  }
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  std::vector<Row> rows(static_cast<size_t>(n));
  Handle type = h5::BuildCompound(sizeof(Row), Table::kColumns);
  if (n > 0 &&
      H5Dread(d.get(), type.get(), H5S_ALL, H5S_ALL, h5::Transfer(rows.size(), sizeof(Row)).id(), rows.data()) < 0) {
    return Corrupt(where + ": cannot read");
  }
  return rows;
}

template Result<std::vector<schema::RankRow>> ReadAnalysisTable(const std::string&);
template Result<std::vector<schema::CollectiveRow>> ReadAnalysisTable(const std::string&);
template Result<std::vector<schema::InstanceRow>> ReadAnalysisTable(const std::string&);
template Result<std::vector<schema::ArrivalRow>> ReadAnalysisTable(const std::string&);
template Result<std::vector<schema::MemoryRow>> ReadAnalysisTable(const std::string&);
template Result<std::vector<schema::StepRankRow>> ReadAnalysisTable(const std::string&);

}  // namespace commprof
