#include "analysis/hang/hang_store.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "analysis/hang/hang_json.h"
#include "core/h5/h5_util.h"
#include "core/schema/columns.h"

namespace commprof::hang {
namespace {

using h5::Handle;
using CallSiteText = char[512];
using ShortText = char[16];
using ReasonText = char[128];

// The tables' columns, stated once (X-macro, as core/schema/analysis_tables.h): row struct and
// HDF5 compound type come from the same list; docs/file-format.md lists the same columns.
#define COMMPROF_HANG_INFLIGHT_COLUMNS(X, S)                                           \
  X(S, uint32_t, rank, "world rank")                                                   \
  X(S, uint32_t, thread, "the rank's thread index")                                    \
  X(S, uint8_t, kind, "event kind (3 collective, 4 p2p, 5 wait, 17 NCCL, 2 finalize)") \
  X(S, uint8_t, op, "`subtype`")                                                       \
  X(S, uint8_t, datatype, "`datatype`")                                                \
  X(S, uint8_t, reduce_op, "`reduce_op`")                                              \
  X(S, uint16_t, flags, "`flags` (NONBLOCKING: a pending request)")                    \
  X(S, uint64_t, comm_id, "communicator id")                                           \
  X(S, uint64_t, seq, "sequence number on it")                                         \
  X(S, uint64_t, bytes, "bytes")                                                       \
  X(S, int32_t, peer, "root or peer, in the communicator (-1: none)")                  \
  X(S, uint32_t, tag, "p2p tag (`correlation`)")                                       \
  X(S, uint64_t, start_ns, "entry, on the rank's clock")                               \
  X(S, uint64_t, age_ns, "the rank's now minus the entry")                             \
  X(S, uint32_t, stack, "call-site stack id (0: none)")                                \
  X(S, CallSiteText, call_site, "call-site text, `frame <- caller <- ...` (cut at 511 bytes)")

#define COMMPROF_HANG_RECENT_COLUMNS(X, S)               \
  X(S, uint32_t, rank, "world rank")                     \
  X(S, uint8_t, kind, "event kind (3 MPI, 17 NCCL)")     \
  X(S, uint8_t, op, "`subtype`")                         \
  X(S, uint8_t, datatype, "`datatype`")                  \
  X(S, uint8_t, reduce_op, "`reduce_op`")                \
  X(S, uint16_t, flags, "`flags`")                       \
  X(S, uint64_t, comm_id, "communicator id")             \
  X(S, uint64_t, seq, "sequence number")                 \
  X(S, uint64_t, bytes, "bytes")                         \
  X(S, int32_t, peer, "root (-1: none)")                 \
  X(S, uint64_t, start_ns, "start, on the rank's clock") \
  X(S, uint64_t, end_ns, "end, on the rank's clock")

#define COMMPROF_HANG_RANK_COLUMNS(X, S)                             \
  X(S, uint32_t, rank, "world rank")                                 \
  X(S, ShortText, condition, "running, finished, died or no_answer") \
  X(S, ReasonText, end_reason, "how it ended, when it did")          \
  X(S, uint8_t, answered, "1: its state is in the tables")           \
  X(S, uint64_t, local_now_ns, "its clock when the state was taken") \
  X(S, int64_t, last_completion_age_ns, "since its last completed communication call (-1: none)")

#define COMMPROF_HANG_COMM_COLUMNS(X, S)     \
  X(S, uint32_t, rank, "world rank")         \
  X(S, uint64_t, comm_id, "communicator id") \
  X(S, uint32_t, size, "its size")           \
  X(S, uint32_t, rank_in_comm, "the rank in it")

struct InflightRow {
  COMMPROF_HANG_INFLIGHT_COLUMNS(COMMPROF_SCHEMA_MEMBER, InflightRow)
};
struct RecentRow {
  COMMPROF_HANG_RECENT_COLUMNS(COMMPROF_SCHEMA_MEMBER, RecentRow)
};
struct RankRow {
  COMMPROF_HANG_RANK_COLUMNS(COMMPROF_SCHEMA_MEMBER, RankRow)
};
struct CommRow {
  COMMPROF_HANG_COMM_COLUMNS(COMMPROF_SCHEMA_MEMBER, CommRow)
};
constexpr schema::Column kInflightColumns[] = {COMMPROF_HANG_INFLIGHT_COLUMNS(COMMPROF_SCHEMA_COLUMN, InflightRow)};
constexpr schema::Column kRecentColumns[] = {COMMPROF_HANG_RECENT_COLUMNS(COMMPROF_SCHEMA_COLUMN, RecentRow)};
constexpr schema::Column kRankColumns[] = {COMMPROF_HANG_RANK_COLUMNS(COMMPROF_SCHEMA_COLUMN, RankRow)};
constexpr schema::Column kCommColumns[] = {COMMPROF_HANG_COMM_COLUMNS(COMMPROF_SCHEMA_COLUMN, CommRow)};

template <size_t N>
void CopyText(char (&dst)[N], const std::string& s) {
  std::memset(dst, 0, N);
  std::memcpy(dst, s.data(), std::min(s.size(), N - 1));
}
template <size_t N>
std::string Text(const char (&src)[N]) {
  return std::string(src, strnlen(src, N));
}

template <typename Row>
bool WriteTable(hid_t group, const char* name, std::span<const schema::Column> cols, const std::vector<Row>& rows) {
  Handle type = h5::BuildCompound(sizeof(Row), cols);
  hsize_t dims[1] = {rows.size()};
  Handle space(H5Screate_simple(1, dims, nullptr));
  Handle d(H5Dcreate2(group, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!d.valid()) {
    return false;
  }
  return rows.empty() || H5Dwrite(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) >= 0;
}

template <typename Row>
Status ReadTable(hid_t group, const char* name, std::span<const schema::Column> cols, const std::string& where,
                 std::vector<Row>& rows) {
  Handle d(H5Dopen2(group, name, H5P_DEFAULT));
  if (!d.valid()) {
    return Corrupt(where + "/" + name + ": missing");
  }
  Handle space(H5Dget_space(d.get()));
  if (H5Sget_simple_extent_ndims(space.get()) != 1) {
    return Corrupt(where + "/" + name + ": not a 1-D table");
  }
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  rows.assign(n, Row{});
  Handle type = h5::BuildCompound(sizeof(Row), cols);
  if (n > 0 && H5Dread(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) < 0) {
    return Corrupt(where + "/" + name + ": unreadable (a column is missing or of another type)");
  }
  return Status::Ok();
}

bool WriteString(hid_t group, const char* name, const std::string& value) {
  Handle space(H5Screate(H5S_SCALAR));
  Handle d(H5Dcreate2(group, name, h5::VarStringType(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  const char* p = value.c_str();
  return d.valid() && H5Dwrite(d.get(), h5::VarStringType(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p) >= 0;
}

std::optional<std::string> ReadString(hid_t group, const char* name) {
  Handle d(H5Dopen2(group, name, H5P_DEFAULT));
  if (!d.valid()) {
    return std::nullopt;
  }
  char* p = nullptr;
  if (H5Dread(d.get(), h5::VarStringType(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p) < 0 || p == nullptr) {
    return std::nullopt;
  }
  std::string s(p);
  H5free_memory(p);
  return s;
}

bool WriteU32ArrayAttr(hid_t obj, const char* name, const std::vector<uint32_t>& v) {
  hsize_t dims[1] = {v.size()};
  Handle space(v.empty() ? H5Screate(H5S_NULL) : H5Screate_simple(1, dims, nullptr));
  Handle a(H5Acreate2(obj, name, H5T_STD_U32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  return a.valid() && (v.empty() || H5Awrite(a.get(), H5T_NATIVE_UINT32, v.data()) >= 0);
}

RankCondition ConditionFrom(const std::string& s) {
  if (s == "finished") {
    return RankCondition::kFinished;
  }
  if (s == "died") {
    return RankCondition::kDied;
  }
  if (s == "no_answer") {
    return RankCondition::kNoAnswer;
  }
  return RankCondition::kRunning;
}

}  // namespace

Status WriteHangGroup(hid_t file, const HangInput& input, const HangReport& report, const std::string& path) {
  h5::QuietErrors();
  const std::string where = path + ":/" + kHangGroup;
  // A second hang in one job (progress resumed after the first, then stopped again) replaces the
  // first: the file keeps the latest diagnosis; the earlier one was printed when it was found.
  if (H5Lexists(file, kHangGroup, H5P_DEFAULT) > 0 && H5Ldelete(file, kHangGroup, H5P_DEFAULT) < 0) {
    return IoError(where + ": cannot replace the earlier diagnosis");
  }
  Handle g(H5Gcreate2(file, kHangGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!g.valid()) {
    return IoError(where + ": cannot create the group");
  }
  std::vector<InflightRow> inflight;
  std::vector<RecentRow> recent;
  std::vector<RankRow> ranks;
  std::vector<CommRow> comms;
  std::vector<const RankSnapshot*> sorted;
  for (const RankSnapshot& s : input.ranks) {
    sorted.push_back(&s);
  }
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->rank < b->rank; });
  for (const RankSnapshot* s : sorted) {
    const wire::HangState& st = s->state;
    RankRow rr{};
    rr.rank = s->rank;
    CopyText(rr.condition, ConditionName(s->condition));
    CopyText(rr.end_reason, s->end_reason);
    rr.answered = s->has_state ? 1 : 0;
    rr.local_now_ns = st.local_now_ns;
    rr.last_completion_age_ns =
        s->has_state && st.last_completion_ns != 0
            ? static_cast<int64_t>(st.local_now_ns - std::min(st.local_now_ns, st.last_completion_ns))
            : int64_t{-1};
    ranks.push_back(rr);
    if (!s->has_state) {
      continue;
    }
    std::map<uint32_t, std::string> sites(st.call_sites.begin(), st.call_sites.end());
    for (const wire::InflightOp& op : st.inflight) {
      const commprof_event& e = op.event;
      InflightRow r{};
      r.rank = s->rank;
      r.thread = e.thread_id;
      r.kind = e.kind;
      r.op = e.subtype;
      r.datatype = e.datatype;
      r.reduce_op = e.reduce_op;
      r.flags = e.flags;
      r.comm_id = e.comm_id;
      r.seq = e.seq;
      r.bytes = e.bytes;
      r.peer = e.peer;
      r.tag = e.correlation;
      r.start_ns = e.start_ns;
      r.age_ns = st.local_now_ns > e.start_ns ? st.local_now_ns - e.start_ns : 0;
      r.stack = op.stack;
      CopyText(r.call_site, sites.count(op.stack) != 0 ? sites[op.stack] : std::string());
      inflight.push_back(r);
    }
    for (const commprof_event& e : st.recent) {
      recent.push_back({.rank = s->rank,
                        .kind = e.kind,
                        .op = e.subtype,
                        .datatype = e.datatype,
                        .reduce_op = e.reduce_op,
                        .flags = e.flags,
                        .comm_id = e.comm_id,
                        .seq = e.seq,
                        .bytes = e.bytes,
                        .peer = e.peer,
                        .start_ns = e.start_ns,
                        .end_ns = e.end_ns});
    }
    for (const wire::CommMembership& m : st.comms) {
      comms.push_back({.rank = s->rank, .comm_id = m.comm_id, .size = m.size, .rank_in_comm = m.rank_in_comm});
    }
  }
  bool ok = h5::WriteAttr(g.get(), "version", kHangGroupVersion) && h5::WriteAttr(g.get(), "source", input.source) &&
            h5::WriteAttr(g.get(), "timeout_s", input.timeout_s) &&
            h5::WriteAttr(g.get(), "detected_utc_ns", input.detected_utc_ns) &&
            h5::WriteAttr(g.get(), "world_size", uint64_t{input.world_size}) &&
            h5::WriteAttr(g.get(), "hang", uint64_t{report.hang ? 1u : 0u}) &&
            h5::WriteAttr(g.get(), "verdict", report.verdict) &&
            WriteU32ArrayAttr(g.get(), "culprits", report.culprits) &&
            WriteU32ArrayAttr(g.get(), "consequences", report.consequences);
  if (!ok) {
    return IoError(where + ": cannot write its attributes");
  }
  if (!WriteTable(g.get(), "inflight", kInflightColumns, inflight) ||
      !WriteTable(g.get(), "recent", kRecentColumns, recent) || !WriteTable(g.get(), "ranks", kRankColumns, ranks) ||
      !WriteTable(g.get(), "comms", kCommColumns, comms) ||
      !WriteString(g.get(), "report_json", HangReportToJson(report).dump())) {
    return IoError(where + ": cannot write its tables");
  }
  return Status::Ok();
}

Status WriteHangGroup(const std::string& path, const HangInput& input, const HangReport& report) {
  h5::QuietErrors();
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  if (!f.valid()) {
    return IoError(path + ": cannot open for writing the hang group");
  }
  return WriteHangGroup(f.get(), input, report, path);
}

Result<std::optional<StoredHang>> ReadHangGroup(hid_t file, const std::string& path) {
  h5::QuietErrors();
  const std::string where = path + ":/" + kHangGroup;
  if (H5Lexists(file, kHangGroup, H5P_DEFAULT) <= 0) {
    return std::optional<StoredHang>();
  }
  Handle g(H5Gopen2(file, kHangGroup, H5P_DEFAULT));
  if (!g.valid()) {
    return Corrupt(where + ": cannot open the group");
  }
  StoredHang out;
  const auto json_text = ReadString(g.get(), "report_json");
  if (!json_text) {
    return Corrupt(where + "/report_json: missing or unreadable");
  }
  auto parsed = nlohmann::ordered_json::parse(*json_text, nullptr, false);
  if (parsed.is_discarded()) {
    return Corrupt(where + "/report_json: not JSON");
  }
  auto report = HangReportFromJson(parsed, where + "/report_json");
  if (!report.ok()) {
    return report.status();
  }
  out.report = std::move(report.value());

  HangInput& in = out.input;
  in.source = h5::ReadStringAttr(g.get(), "source").value_or("");
  in.timeout_s = h5::ReadDoubleAttr(g.get(), "timeout_s").value_or(0);
  in.detected_utc_ns = static_cast<uint64_t>(h5::ReadIntAttr(g.get(), "detected_utc_ns").value_or(0));
  const auto world = h5::ReadIntAttr(g.get(), "world_size");
  if (!world || *world < 0) {
    return Corrupt(where + ": attribute world_size missing or negative");
  }
  in.world_size = static_cast<uint32_t>(*world);
  std::vector<InflightRow> inflight;
  std::vector<RecentRow> recent;
  std::vector<RankRow> ranks;
  std::vector<CommRow> comms;
  COMMPROF_RETURN_IF_ERROR(ReadTable(g.get(), "ranks", kRankColumns, where, ranks));
  COMMPROF_RETURN_IF_ERROR(ReadTable(g.get(), "inflight", kInflightColumns, where, inflight));
  COMMPROF_RETURN_IF_ERROR(ReadTable(g.get(), "recent", kRecentColumns, where, recent));
  COMMPROF_RETURN_IF_ERROR(ReadTable(g.get(), "comms", kCommColumns, where, comms));
  std::map<uint32_t, size_t> index;
  for (const RankRow& r : ranks) {
    RankSnapshot s;
    s.rank = r.rank;
    s.condition = ConditionFrom(Text(r.condition));
    s.end_reason = Text(r.end_reason);
    s.has_state = r.answered != 0;
    s.state.local_now_ns = r.local_now_ns;
    s.state.last_completion_ns =
        r.last_completion_age_ns >= 0 ? r.local_now_ns - static_cast<uint64_t>(r.last_completion_age_ns) : 0;
    index[r.rank] = in.ranks.size();
    in.ranks.push_back(std::move(s));
  }
  auto snap = [&](uint32_t rank, const char* table) -> Result<RankSnapshot*> {
    auto it = index.find(rank);
    if (it == index.end()) {
      return Corrupt(where + "/" + table + ": a row names rank " + std::to_string(rank) + ", absent from /hang/ranks");
    }
    return &in.ranks[it->second];
  };
  for (const InflightRow& r : inflight) {
    auto s = snap(r.rank, "inflight");
    if (!s.ok()) {
      return s.status();
    }
    commprof_event e{};
    e.kind = r.kind;
    e.subtype = r.op;
    e.datatype = r.datatype;
    e.reduce_op = r.reduce_op;
    e.flags = r.flags;
    e.comm_id = r.comm_id;
    e.seq = r.seq;
    e.bytes = r.bytes;
    e.peer = r.peer;
    e.correlation = r.tag;
    e.thread_id = r.thread;
    e.start_ns = e.end_ns = r.start_ns;
    s.value()->state.inflight.push_back({e, r.stack});
    const std::string site = Text(r.call_site);
    if (r.stack != 0 && !site.empty()) {
      s.value()->state.call_sites.emplace_back(r.stack, site);
    }
  }
  for (const RecentRow& r : recent) {
    auto s = snap(r.rank, "recent");
    if (!s.ok()) {
      return s.status();
    }
    commprof_event e{};
    e.kind = r.kind;
    e.subtype = r.op;
    e.datatype = r.datatype;
    e.reduce_op = r.reduce_op;
    e.flags = r.flags;
    e.comm_id = r.comm_id;
    e.seq = r.seq;
    e.bytes = r.bytes;
    e.peer = r.peer;
    e.start_ns = r.start_ns;
    e.end_ns = r.end_ns;
    s.value()->state.recent.push_back(e);
  }
  for (const CommRow& r : comms) {
    auto s = snap(r.rank, "comms");
    if (!s.ok()) {
      return s.status();
    }
    s.value()->state.comms.push_back({r.comm_id, r.size, r.rank_in_comm});
  }
  return std::optional<StoredHang>(std::move(out));
}

Result<std::optional<StoredHang>> ReadHangGroup(const std::string& path) {
  h5::QuietErrors();
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) {
    return IoError(path + ": cannot open");
  }
  return ReadHangGroup(f.get(), path);
}

}  // namespace commprof::hang
