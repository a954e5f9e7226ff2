#include "analysis/load/profile_reader.h"

#include <algorithm>
#include <iterator>

namespace commprof {

using h5::Handle;
using h5::Read;
namespace root_attr = schema::root_attr;
namespace rank_attr = schema::rank_attr;

namespace {

// Collects the names of the integer attributes of a group (for the counters).
herr_t CollectAttr(hid_t loc, const char* name, const H5A_info_t*, void* data) {
  auto* names = static_cast<std::vector<std::string>*>(data);
  Handle attr(H5Aopen(loc, name, H5P_DEFAULT));
  Handle type(H5Aget_type(attr.get()));
  if (H5Tget_class(type.get()) == H5T_INTEGER) {
    names->emplace_back(name);
  }
  return 0;
}

}  // namespace

Result<std::unique_ptr<ProfileReader>> ProfileReader::Open(const std::string& path) {
  h5::QuietErrors();
  std::unique_ptr<ProfileReader> r(new ProfileReader());
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    return InvalidArgument(path + ": not an HDF5 file (or missing)");
  }
  r->file_ = Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!r->file_.valid()) {
    return IoError(path + ": cannot open (is a writer still holding it?)");
  }
  hid_t f = r->file_.get();
  ProfileInfo& info = r->info_;
  info.path = path;
  info.format = Read(f, root_attr::kFormat).value_or("");
  if (info.format != schema::kFormatName) {
    return InvalidArgument(path + ": root attribute '" + root_attr::kFormat.name + "' is '" + info.format +
                           "', not a commprof file");
  }
  info.format_version = Read(f, root_attr::kFormatVersion).value_or(0);
  if (info.format_version != schema::kFormatVersion) {
    return InvalidArgument(path + ": " + root_attr::kFormatVersion.name + " " + std::to_string(info.format_version) +
                           " is not supported by this build (" + std::to_string(schema::kFormatVersion) + ")");
  }
  info.job_id = Read(f, root_attr::kJobId).value_or("");
  info.command_line = Read(f, root_attr::kCommandLine).value_or("");
  info.world_size = Read(f, root_attr::kWorldSize).value_or(0);
  info.start_epoch_ns = Read(f, root_attr::kStartEpochNs).value_or(0);
  info.finalized = Read(f, root_attr::kFinalized).value_or(0) != 0;

  Handle ranks(H5Gopen2(f, schema::kRanksGroup, H5P_DEFAULT));
  if (!ranks.valid()) {
    return Corrupt(path + ": group /" + schema::kRanksGroup + " is missing");
  }
  H5G_info_t ginfo;
  H5Gget_info(ranks.get(), &ginfo);
  for (hsize_t i = 0; i < ginfo.nlinks; ++i) {
    char name[64] = {};
    H5Lget_name_by_idx(ranks.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
    Handle g(H5Gopen2(ranks.get(), name, H5P_DEFAULT));
    if (!g.valid()) {
      continue;
    }
    RankInfo ri;
    ri.rank = static_cast<uint32_t>(std::stoul(name));
    ri.host = Read(g.get(), rank_attr::kHost).value_or("");
    ri.pid = Read(g.get(), rank_attr::kPid).value_or(0);
    ri.status = Read(g.get(), rank_attr::kStatus).value_or("unknown");
    ri.end_reason = Read(g.get(), rank_attr::kEndReason).value_or("");
    ri.clock_offset_ns = Read(g.get(), rank_attr::kClockOffsetNs).value_or(0);
    ri.clock_drift_ppm = Read(g.get(), rank_attr::kClockDriftPpm).value_or(0.0);
    ri.clock_error_bound_ns = Read(g.get(), rank_attr::kClockErrorBoundNs).value_or(-1);
    ri.clock_method = Read(g.get(), rank_attr::kClockMethod).value_or("none");
    std::vector<std::string> attrs;
    hsize_t idx = 0;
    H5Aiterate2(g.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, CollectAttr, &attrs);
    for (const auto& a : attrs) {
      // Every integer attribute that is not identity or clock metadata is a counter, so counters
      // a newer collector adds show up without a reader change.
      bool metadata = std::find(std::begin(schema::kRankMetadataAttrs), std::end(schema::kRankMetadataAttrs), a) !=
                      std::end(schema::kRankMetadataAttrs);
      if (!metadata) {
        ri.counters[a] = static_cast<uint64_t>(h5::ReadIntAttr(g.get(), a.c_str()).value_or(0));
      }
    }
    ri.start_steady_ns = Read(g.get(), rank_attr::kStartSteadyNs).value_or(0);
    ri.start_utc_ns = Read(g.get(), rank_attr::kStartUtcNs).value_or(0);
    const char* points = schema::kClockPointsDataset;
    if (H5Lexists(g.get(), points, H5P_DEFAULT) > 0) {
      Handle d(H5Dopen2(g.get(), points, H5P_DEFAULT));
      Handle space(H5Dget_space(d.get()));
      hsize_t dims[2] = {0, 0};
      if (H5Sget_simple_extent_ndims(space.get()) == 2) {
        H5Sget_simple_extent_dims(space.get(), dims, nullptr);
      }
      if (dims[1] != std::size(schema::kClockPointColumns)) {
        return Corrupt(path + ": /ranks/" + name + "/" + points + " is not an N x 3 table");
      }
      ri.clock_points.resize(dims[0]);
      if (dims[0] > 0 &&
          H5Dread(d.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ri.clock_points.data()) < 0) {
        return Corrupt(path + ": cannot read /ranks/" + name + "/" + points);
      }
      // The model's arithmetic trusts its points: reject values no clock produces (|offset| over
      // a day, negative times or round trips) rather than overflow on them.
      constexpr int64_t kDayNs = 86400LL * 1000000000LL;
      for (size_t k = 0; k < ri.clock_points.size(); ++k) {
        const ClockPoint& p = ri.clock_points[k];
        if (p.local_ns < 0 || p.half_rtt_ns < 0 || p.offset_ns > kDayNs || p.offset_ns < -kDayNs ||
            p.half_rtt_ns > kDayNs) {
          return Corrupt(path + ": /ranks/" + name + "/" + points + " row " + std::to_string(k) +
                         " holds impossible values");
        }
      }
    }
    const std::string dropped = rank_attr::kDroppedEvents.name;
    ri.dropped_events = ri.counters.count(dropped) ? ri.counters[dropped] : 0;
    if (H5Lexists(g.get(), schema::kEventsDataset, H5P_DEFAULT) > 0) {
      Handle d(H5Dopen2(g.get(), schema::kEventsDataset, H5P_DEFAULT));
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
  std::string p = RankPath(rank) + "/" + schema::kStringsDataset;
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
  for (char* s : raw) {
    out.emplace_back(s != nullptr ? s : "");
  }
  if (n > 0) {
    H5Dvlen_reclaim(h5::VarStringType(), space.get(), H5P_DEFAULT, raw.data());
  }
  return out;
}

Status ProfileReader::ForEachEventChunk(uint32_t rank,
                                        const std::function<void(std::span<const commprof_event>)>& fn) const {
  std::string p = RankPath(rank) + "/" + schema::kEventsDataset;
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
