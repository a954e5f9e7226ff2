#include "analysis/load/profile_reader.h"

#include <algorithm>

namespace commprof {

using h5::Handle;
using h5::ReadDoubleAttr;
using h5::ReadIntAttr;
using h5::ReadStringAttr;

const char* KindName(uint8_t kind) {
  switch (kind) {
    case COMMPROF_KIND_MPI_INIT:
      return "mpi_init";
    case COMMPROF_KIND_MPI_FINALIZE:
      return "mpi_finalize";
    case COMMPROF_KIND_MPI_COLLECTIVE:
      return "mpi_collective";
    case COMMPROF_KIND_MPI_P2P:
      return "mpi_p2p";
    case COMMPROF_KIND_MPI_WAIT:
      return "mpi_wait";
    case COMMPROF_KIND_MPI_COMM:
      return "mpi_comm";
    case COMMPROF_KIND_USER_RANGE:
      return "user_range";
    case COMMPROF_KIND_USER_MARK:
      return "user_mark";
    case COMMPROF_KIND_STEP:
      return "step";
    case COMMPROF_KIND_COMPUTE_KERNEL:
      return "compute_kernel";
    case COMMPROF_KIND_COMM_KERNEL:
      return "comm_kernel";
    case COMMPROF_KIND_MEMCPY:
      return "memcpy";
    case COMMPROF_KIND_MEMSET:
      return "memset";
    case COMMPROF_KIND_MEM_ALLOC:
      return "mem_alloc";
    case COMMPROF_KIND_MEM_FREE:
      return "mem_free";
    case COMMPROF_KIND_NCCL_API:
      return "nccl_api";
    case COMMPROF_KIND_NCCL_COLLECTIVE:
      return "nccl_collective";
    case COMMPROF_KIND_NVTX_RANGE:
      return "nvtx_range";
    case COMMPROF_KIND_NVTX_MARK:
      return "nvtx_mark";
    case COMMPROF_KIND_SYNC:
      return "sync";
    case COMMPROF_KIND_NCCL_PROXY_OP:
      return "nccl_proxy_op";
    case COMMPROF_KIND_NCCL_PROXY_STEP:
      return "nccl_proxy_step";
    case COMMPROF_KIND_GPU_OVERHEAD:
      return "gpu_overhead";
    case COMMPROF_KIND_CUDA_API:
      return "cuda_api";
    case COMMPROF_KIND_HOST_OP:
      return "host_op";
    case COMMPROF_KIND_HOST_ANNOTATION:
      return "host_annotation";
    case COMMPROF_KIND_GPU_ANNOTATION:
      return "gpu_annotation";
    case COMMPROF_KIND_PYTHON_FUNCTION:
      return "python_function";
    case COMMPROF_KIND_IMPORTED_OTHER:
      return "imported_other";
    default:
      return "unknown";
  }
}

namespace {

// Collects the names of the integer attributes of a group (for the counters).
herr_t CollectAttr(hid_t loc, const char* name, const H5A_info_t*, void* data) {
  auto* names = static_cast<std::vector<std::string>*>(data);
  Handle attr(H5Aopen(loc, name, H5P_DEFAULT));
  Handle type(H5Aget_type(attr.get()));
  if (H5Tget_class(type.get()) == H5T_INTEGER) names->emplace_back(name);
  return 0;
}

}  // namespace

Result<std::unique_ptr<ProfileReader>> ProfileReader::Open(const std::string& path) {
  h5::QuietErrors();
  std::unique_ptr<ProfileReader> r(new ProfileReader());
  if (H5Fis_hdf5(path.c_str()) <= 0) return InvalidArgument(path + ": not an HDF5 file (or missing)");
  r->file_ = Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!r->file_.valid()) return IoError(path + ": cannot open (is a writer still holding it?)");
  hid_t f = r->file_.get();
  ProfileInfo& info = r->info_;
  info.path = path;
  info.format = ReadStringAttr(f, "format").value_or("");
  if (info.format != h5::kFormatName) {
    return InvalidArgument(path + ": root attribute 'format' is '" + info.format + "', not a commprof file");
  }
  info.format_version = static_cast<uint64_t>(ReadIntAttr(f, "format_version").value_or(0));
  if (info.format_version != h5::kFormatVersion) {
    return InvalidArgument(path + ": format_version " + std::to_string(info.format_version) +
                           " is not supported by this build (" + std::to_string(h5::kFormatVersion) + ")");
  }
  info.job_id = ReadStringAttr(f, "job_id").value_or("");
  info.command_line = ReadStringAttr(f, "command_line").value_or("");
  info.world_size = static_cast<uint64_t>(ReadIntAttr(f, "world_size").value_or(0));
  info.start_epoch_ns = static_cast<uint64_t>(ReadIntAttr(f, "start_epoch_ns").value_or(0));
  info.finalized = ReadIntAttr(f, "finalized").value_or(0) != 0;

  Handle ranks(H5Gopen2(f, "ranks", H5P_DEFAULT));
  if (!ranks.valid()) return Corrupt(path + ": group /ranks is missing");
  H5G_info_t ginfo;
  H5Gget_info(ranks.get(), &ginfo);
  for (hsize_t i = 0; i < ginfo.nlinks; ++i) {
    char name[64] = {};
    H5Lget_name_by_idx(ranks.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
    Handle g(H5Gopen2(ranks.get(), name, H5P_DEFAULT));
    if (!g.valid()) continue;
    RankInfo ri;
    ri.rank = static_cast<uint32_t>(std::stoul(name));
    ri.host = ReadStringAttr(g.get(), "host").value_or("");
    ri.pid = static_cast<uint64_t>(ReadIntAttr(g.get(), "pid").value_or(0));
    ri.status = ReadStringAttr(g.get(), "status").value_or("unknown");
    ri.end_reason = ReadStringAttr(g.get(), "end_reason").value_or("");
    ri.clock_offset_ns = ReadIntAttr(g.get(), "clock_offset_ns").value_or(0);
    ri.clock_drift_ppm = ReadDoubleAttr(g.get(), "clock_drift_ppm").value_or(0.0);
    ri.clock_error_bound_ns = ReadIntAttr(g.get(), "clock_error_bound_ns").value_or(-1);
    ri.clock_method = ReadStringAttr(g.get(), "clock_method").value_or("none");
    std::vector<std::string> attrs;
    hsize_t idx = 0;
    H5Aiterate2(g.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, CollectAttr, &attrs);
    for (const auto& a : attrs) {
      // Every integer attribute that is not identity or clock metadata is a counter, so counters
      // a newer collector adds show up without a reader change.
      bool metadata = a == "rank" || a == "pid" || a.rfind("start_", 0) == 0 || a == "clock_offset_ns" ||
                      a == "clock_error_bound_ns" || a == "clock_anchor_local_ns";
      if (!metadata) ri.counters[a] = static_cast<uint64_t>(ReadIntAttr(g.get(), a.c_str()).value_or(0));
    }
    ri.start_steady_ns = static_cast<uint64_t>(ReadIntAttr(g.get(), "start_steady_ns").value_or(0));
    ri.start_utc_ns = static_cast<uint64_t>(ReadIntAttr(g.get(), "start_utc_ns").value_or(0));
    if (H5Lexists(g.get(), "clock_points", H5P_DEFAULT) > 0) {
      Handle d(H5Dopen2(g.get(), "clock_points", H5P_DEFAULT));
      Handle space(H5Dget_space(d.get()));
      hsize_t dims[2] = {0, 0};
      if (H5Sget_simple_extent_ndims(space.get()) == 2) H5Sget_simple_extent_dims(space.get(), dims, nullptr);
      if (dims[1] != 3) return Corrupt(path + ": /ranks/" + name + "/clock_points is not an N x 3 table");
      ri.clock_points.resize(dims[0]);
      if (dims[0] > 0 &&
          H5Dread(d.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ri.clock_points.data()) < 0) {
        return Corrupt(path + ": cannot read /ranks/" + name + "/clock_points");
      }
      // The model's arithmetic trusts its points: reject values no clock produces (|offset| over
      // a day, negative times or round trips) rather than overflow on them.
      constexpr int64_t kDayNs = 86400LL * 1000000000LL;
      for (size_t k = 0; k < ri.clock_points.size(); ++k) {
        const ClockPoint& p = ri.clock_points[k];
        if (p.local_ns < 0 || p.half_rtt_ns < 0 || p.offset_ns > kDayNs || p.offset_ns < -kDayNs ||
            p.half_rtt_ns > kDayNs) {
          return Corrupt(path + ": /ranks/" + name + "/clock_points row " + std::to_string(k) +
                         " holds impossible values");
        }
      }
    }
    ri.dropped_events = ri.counters.count("dropped_events") ? ri.counters["dropped_events"] : 0;
    if (H5Lexists(g.get(), "events", H5P_DEFAULT) > 0) {
      Handle d(H5Dopen2(g.get(), "events", H5P_DEFAULT));
      Handle space(H5Dget_space(d.get()));
      hsize_t n = 0;
      H5Sget_simple_extent_dims(space.get(), &n, nullptr);
      ri.event_count = n;
    }
    info.ranks.push_back(std::move(ri));
  }
  std::sort(info.ranks.begin(), info.ranks.end(), [](const RankInfo& a, const RankInfo& b) { return a.rank < b.rank; });
  return r;
}

Result<std::vector<std::string>> ProfileReader::Strings(uint32_t rank) const {
  std::string p = RankPath(rank) + "/strings";
  if (H5Lexists(file_.get(), RankPath(rank).c_str(), H5P_DEFAULT) <= 0 ||
      H5Lexists(file_.get(), p.c_str(), H5P_DEFAULT) <= 0) {
    return std::vector<std::string>{};
  }
  Handle d(H5Dopen2(file_.get(), p.c_str(), H5P_DEFAULT));
  Handle space(H5Dget_space(d.get()));
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  std::vector<char*> raw(n, nullptr);
  if (n > 0 && H5Dread(d.get(), h5::VarStringType(), H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()) < 0) {
    return Corrupt(info_.path + ": cannot read " + p);
  }
  std::vector<std::string> out;
  out.reserve(n);
  for (char* s : raw) out.emplace_back(s != nullptr ? s : "");
  if (n > 0) H5Dvlen_reclaim(h5::VarStringType(), space.get(), H5P_DEFAULT, raw.data());
  return out;
}

Status ProfileReader::ForEachEventChunk(uint32_t rank,
                                        const std::function<void(std::span<const commprof_event>)>& fn) const {
  std::string p = RankPath(rank) + "/events";
  if (H5Lexists(file_.get(), RankPath(rank).c_str(), H5P_DEFAULT) <= 0 ||
      H5Lexists(file_.get(), p.c_str(), H5P_DEFAULT) <= 0) {
    return Status::Ok();  // a missing rank has no events
  }
  Handle d(H5Dopen2(file_.get(), p.c_str(), H5P_DEFAULT));
  Handle fspace(H5Dget_space(d.get()));
  hsize_t n = 0;
  H5Sget_simple_extent_dims(fspace.get(), &n, nullptr);
  constexpr hsize_t kChunk = 65536;
  std::vector<commprof_event> buf(static_cast<size_t>(std::min<hsize_t>(n, kChunk)));
  for (hsize_t start = 0; start < n; start += kChunk) {
    hsize_t count = std::min(kChunk, n - start);
    H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    Handle mspace(H5Screate_simple(1, &count, nullptr));
    if (H5Dread(d.get(), h5::EventType(), mspace.get(), fspace.get(), H5P_DEFAULT, buf.data()) < 0) {
      return Corrupt(info_.path + ": cannot read " + p + " at record " + std::to_string(start));
    }
    fn(std::span<const commprof_event>(buf.data(), static_cast<size_t>(count)));
  }
  return Status::Ok();
}

}  // namespace commprof
