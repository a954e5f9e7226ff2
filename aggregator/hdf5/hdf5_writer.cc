#include "aggregator/hdf5/hdf5_writer.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/h5/chunk_encoder.h"
#include "core/h5/lz4_filter.h"

namespace commprof {

using h5::Handle;
using h5::Write;
namespace root_attr = schema::root_attr;
namespace rank_attr = schema::rank_attr;

namespace {

std::string StatusName(schema::RankStatus s) { return schema::RankStatusName(s); }

h5::Codec CodecOf(const WriterOptions& o) {
  switch (o.compression) {
    case Compression::kNone:
      return h5::Codec::kNone;
    case Compression::kLz4:
      return h5::Codec::kShuffleLz4;
    case Compression::kDeflate:
      return h5::Codec::kShuffleDeflate;
  }
  return h5::Codec::kNone;
}

// An empty, extendable, chunked 1-D dataset, compressed as `options` say (nullptr: plain).
Handle CreateTable(hid_t parent, const char* name, hid_t type, hsize_t chunk, const WriterOptions* options) {
  hsize_t dims[1] = {0};
  hsize_t maxdims[1] = {H5S_UNLIMITED};
  Handle space(H5Screate_simple(1, dims, maxdims));
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(dcpl.get(), 1, &chunk);
  if (options != nullptr) {
    h5::SetCodecFilters(dcpl.get(), CodecOf(*options), options->deflate_level);
  }
  return Handle(H5Dcreate2(parent, name, type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
}

// Appends n records of `type` from `data` to the end of a 1-D dataset holding `have` records.
bool AppendRows(hid_t dset, hid_t type, const void* data, hsize_t have, hsize_t n) {
  if (n == 0) {
    return true;
  }
  hsize_t new_size[1] = {have + n};
  if (H5Dset_extent(dset, new_size) < 0) {
    return false;
  }
  Handle fspace(H5Dget_space(dset));
  hsize_t start[1] = {have};
  hsize_t count[1] = {n};
  H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
  Handle mspace(H5Screate_simple(1, count, nullptr));
  return H5Dwrite(dset, type, mspace.get(), fspace.get(), h5::Transfer(n).id(), data) >= 0;
}

// (Re)writes an N x 3 table of 8-byte integers; nothing when there are no rows.
bool WriteTable(hid_t group, const char* name, hid_t type, const void* rows, size_t n) {
  if (H5Lexists(group, name, H5P_DEFAULT) > 0 && H5Ldelete(group, name, H5P_DEFAULT) < 0) {
    return false;
  }
  if (n == 0) {
    return true;
  }
  hsize_t dims[2] = {n, 3};
  Handle space(H5Screate_simple(2, dims, nullptr));
  Handle d(H5Dcreate2(group, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  return d.valid() && H5Dwrite(d.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0;
}

// Clock frames carry only their new samples: append them to an extendable N x 3 table.
bool AppendSamples(hid_t group, const std::vector<ClockSample>& samples) {
  if (samples.empty()) {
    return true;
  }
  const char* name = schema::kClockSamplesDataset;
  Handle d;
  hsize_t have[2] = {0, 3};
  if (H5Lexists(group, name, H5P_DEFAULT) > 0) {
    d = Handle(H5Dopen2(group, name, H5P_DEFAULT));
    Handle space(H5Dget_space(d.get()));
    H5Sget_simple_extent_dims(space.get(), have, nullptr);
  } else {
    hsize_t dims[2] = {0, 3}, maxdims[2] = {H5S_UNLIMITED, 3}, chunk[2] = {schema::kClockSampleChunk, 3};
    Handle space(H5Screate_simple(2, dims, maxdims));
    Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(dcpl.get(), 2, chunk);
    d = Handle(H5Dcreate2(group, name, H5T_NATIVE_UINT64, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  }
  if (!d.valid()) {
    return false;
  }
  hsize_t grown[2] = {have[0] + samples.size(), 3};
  if (H5Dset_extent(d.get(), grown) < 0) {
    return false;
  }
  Handle fspace(H5Dget_space(d.get()));
  hsize_t start[2] = {have[0], 0}, count[2] = {samples.size(), 3};
  H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
  Handle mspace(H5Screate_simple(2, count, nullptr));
  return H5Dwrite(d.get(), H5T_NATIVE_UINT64, mspace.get(), fspace.get(), H5P_DEFAULT, samples.data()) >= 0;
}

}  // namespace

Hdf5Writer::Hdf5Writer(std::string path, JobMeta meta, WriterOptions options)
    : path_(std::move(path)),
      meta_(std::move(meta)),
      options_(options),
      encoder_(std::make_unique<h5::ChunkEncoder>(CodecOf(options), options.deflate_level, sizeof(commprof_event),
                                                  schema::kEventChunk)) {}

Hdf5Writer::~Hdf5Writer() {
  if (!finalized_) {
    (void)Finalize();
  }
}

Status Hdf5Writer::Err(const std::string& what) {
  if (!DeviceFailed()) {
    failure_ = what;
    write_error_ = IoError("writing " + path_ + " failed: " + what);
  }
  return write_error_;
}

bool Hdf5Writer::DeviceFailed() {
  if (!write_error_.ok()) {
    return true;
  }
  if (int err = h5::WriteErrno(driver_); err != 0) {
    failure_ = std::strerror(err);
    write_error_ = IoError("writing " + path_ + " failed: " + failure_);
    return true;
  }
  return false;
}

uint64_t Hdf5Writer::events_not_stored() const { return failed() ? events_received_ - events_flushed_ : 0; }

namespace {

// `text` as the bytes of `write_status`: cut to fit, NUL-padded.
std::array<char, schema::kWriteStatusSize> StatusBytes(const std::string& text) {
  std::array<char, schema::kWriteStatusSize> buf{};
  std::copy_n(text.begin(), std::min(text.size(), buf.size() - 1), buf.begin());
  return buf;
}

}  // namespace

// The root `write_status` dataset: a fixed-size string at a fixed place in the file.
Status Hdf5Writer::WriteStatus(const std::string& text) {
  auto buf = StatusBytes(text);
  Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), buf.size());
  H5Tset_strpad(type.get(), H5T_STR_NULLTERM);
  if (H5Dwrite(write_status_.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0) {
    return Err("cannot write /" + std::string(schema::kWriteStatusDataset));
  }
  return Status::Ok();
}

std::optional<WriterOptions> ParseCompression(const std::string& text) {
  WriterOptions o;
  if (text == "lz4") {
    o.compression = Compression::kLz4;
  } else if (text == "none") {
    o.compression = Compression::kNone;
  } else if (text == "deflate") {
    o.compression = Compression::kDeflate;
  } else if (text.size() == 9 && text.starts_with("deflate:") && text[8] >= '1' && text[8] <= '9') {
    o.compression = Compression::kDeflate;
    o.deflate_level = text[8] - '0';
  } else {
    return std::nullopt;
  }
  return o;
}

Result<std::unique_ptr<Hdf5Writer>> Hdf5Writer::Create(const std::string& path, const JobMeta& meta,
                                                       const WriterOptions& options) {
  h5::QuietErrors();
  if (options.compression == Compression::kLz4 && !h5::RegisterLz4Filter()) {
    return Internal("HDF5 refused to register the LZ4 filter (id " + std::to_string(h5::kLz4FilterId) + ")");
  }
  if (options.compression == Compression::kDeflate && (options.deflate_level < 1 || options.deflate_level > 9)) {
    return InvalidArgument("deflate level " + std::to_string(options.deflate_level) + " is not 1-9");
  }
  std::unique_ptr<Hdf5Writer> w(new Hdf5Writer(path, meta, options));
  // Default (earliest) file format: measured to stay readable by h5py after SIGKILL once
  // flushed, without h5clear. The fail-safe driver (core/h5/failsafe_driver.h) keeps a write
  // error from wrecking HDF5's state; without it the writer falls back to HDF5's default driver.
  Handle fapl(h5::FailSafeAccessList());
  errno = 0;
  w->file_ = Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.valid() ? fapl.get() : H5P_DEFAULT));
  if (!w->file_.valid()) {
    int err = errno;
    return IoError("cannot create HDF5 file " + path + (err != 0 ? std::string(": ") + std::strerror(err) : ""));
  }
  w->driver_ = h5::FailSafeOf(w->file_.get());
  hid_t f = w->file_.get();
  bool ok = Write(f, root_attr::kFormat, schema::kFormatName) &&
            Write(f, root_attr::kFormatVersion, schema::kFormatVersion) && Write(f, root_attr::kJobId, meta.job_id) &&
            Write(f, root_attr::kCommandLine, meta.command_line) && Write(f, root_attr::kWorldSize, meta.world_size) &&
            Write(f, root_attr::kStartEpochNs, meta.start_epoch_ns) && Write(f, root_attr::kFinalized, 0);
  // A relay's shard says so: readers then know its other ranks are in other shards, not missing.
  ok = ok && (!options.shard || Write(f, root_attr::kShard, uint64_t{1}));
  if (!ok) {
    return w->Err("cannot write the root attributes");
  }
  w->ranks_group_ = Handle(H5Gcreate2(f, schema::kRanksGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!w->ranks_group_.valid()) {
    return w->Err("cannot create group /ranks");
  }
  // `write_status`: contiguous and allocated now, so its bytes have a place in the file that no
  // later write moves, where a write failure can still be recorded when HDF5 can write nothing.
  {
    Handle type(H5Tcopy(H5T_C_S1));
    H5Tset_size(type.get(), schema::kWriteStatusSize);
    H5Tset_strpad(type.get(), H5T_STR_NULLTERM);
    Handle space(H5Screate(H5S_SCALAR));
    Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS);
    H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
    w->write_status_ = Handle(
        H5Dcreate2(f, schema::kWriteStatusDataset, type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
    haddr_t offset = w->write_status_.valid() ? H5Dget_offset(w->write_status_.get()) : HADDR_UNDEF;
    if (offset == HADDR_UNDEF) {
      return w->Err("cannot create /" + std::string(schema::kWriteStatusDataset));
    }
    w->write_status_offset_ = offset;
  }
  COMMPROF_RETURN_IF_ERROR(w->WriteStatus(schema::kWriteStatusWriting));
  COMMPROF_RETURN_IF_ERROR(w->Flush());
  return w;
}

Status Hdf5Writer::OpenRank(const RankDescription& d) {
  if (failed()) {
    return write_error_;
  }
  if (ranks_.count(d.rank) != 0) {
    return InvalidArgument("rank " + std::to_string(d.rank) + " is already in " + path_);
  }
  std::string name = std::to_string(d.rank);
  RankOut r;
  r.pending.reserve(schema::kEventChunk);
  r.group = Handle(H5Gcreate2(ranks_group_.get(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!r.group.valid()) {
    return Err("cannot create group /ranks/" + name);
  }
  hid_t g = r.group.get();
  bool ok =
      Write(g, rank_attr::kRank, d.rank) && Write(g, rank_attr::kHost, d.host) && Write(g, rank_attr::kPid, d.pid) &&
      Write(g, rank_attr::kStartSteadyNs, d.start_steady_ns) && Write(g, rank_attr::kStartUtcNs, d.start_utc_ns) &&
      Write(g, rank_attr::kStatus, StatusName(schema::RankStatus::kConnected)) &&
      Write(g, rank_attr::kClockOffsetNs, int64_t{0}) && Write(g, rank_attr::kClockDriftPpm, 0.0) &&
      Write(g, rank_attr::kClockErrorBoundNs, int64_t{-1}) && Write(g, rank_attr::kClockMethod, std::string("none"));
  if (!ok) {
    return Err("cannot write attributes of /ranks/" + name);
  }
  r.events = CreateTable(g, schema::kEventsDataset, h5::EventType(), schema::kEventChunk, &options_);
  r.strings = CreateTable(g, schema::kStringsDataset, h5::VarStringType(), schema::kStringChunk, nullptr);
  if (!r.events.valid() || !r.strings.valid()) {
    return Err("cannot create tables of /ranks/" + name);
  }
  ranks_.emplace(d.rank, std::move(r));
  if (!SeeWorldSize(d.world_size)) {
    return Err("cannot write the root attribute world_size");
  }
  return DeviceFailed() ? write_error_ : Status::Ok();
}

Status Hdf5Writer::LinkRank(uint32_t rank, uint32_t world_size, const std::string& shard_file) {
  if (failed()) {
    return write_error_;
  }
  if (ranks_.count(rank) != 0) {
    return InvalidArgument("rank " + std::to_string(rank) + " is already in " + path_);
  }
  std::string name = std::to_string(rank);
  std::string target = std::string("/") + schema::kRanksGroup + "/" + name;
  if (H5Lcreate_external(shard_file.c_str(), target.c_str(), ranks_group_.get(), name.c_str(), H5P_DEFAULT,
                         H5P_DEFAULT) < 0) {
    return Err("cannot link /ranks/" + name + " to " + shard_file);
  }
  RankOut r;
  r.closed = true;
  ranks_.emplace(rank, std::move(r));
  if (!SeeWorldSize(world_size)) {
    return Err("cannot write the root attribute world_size");
  }
  return DeviceFailed() ? write_error_ : Status::Ok();
}

bool Hdf5Writer::SeeWorldSize(uint32_t world_size) {
  if (world_size <= world_size_seen_) {
    return true;
  }
  world_size_seen_ = world_size;
  return Write(file_.get(), root_attr::kWorldSize, std::max(meta_.world_size, world_size_seen_));
}

Status Hdf5Writer::AppendStrings(uint32_t rank, const StringBatch& s) {
  if (failed()) {
    return write_error_;
  }
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) {
    return Internal("strings for unknown rank " + std::to_string(rank));
  }
  RankOut& r = it->second;
  if (s.first_id != r.n_strings) {
    return Corrupt("rank " + std::to_string(rank) + ": string table continues at id " + std::to_string(s.first_id) +
                   " but " + std::to_string(r.n_strings) + " ids are known");
  }
  std::vector<const char*> ptrs;
  ptrs.reserve(s.strings.size());
  for (const auto& str : s.strings) {
    ptrs.push_back(str.c_str());
  }
  if (!AppendRows(r.strings.get(), h5::VarStringType(), ptrs.data(), r.n_strings, ptrs.size()) || DeviceFailed()) {
    return Err("cannot append to /ranks/" + std::to_string(rank) + "/strings");
  }
  r.n_strings += ptrs.size();
  return Status::Ok();
}

bool Hdf5Writer::WriteEventChunk(RankOut& r, std::span<const commprof_event> records) {
  if (r.extent != r.n_events) {
    hsize_t size[1] = {r.n_events};
    if (H5Dset_extent(r.events.get(), size) < 0) {
      return false;
    }
    r.extent = r.n_events;
  }
  return encoder_->WriteRows(
      r.events.get(), r.n_events - records.size(),
      std::span(reinterpret_cast<const uint8_t*>(records.data()), records.size() * sizeof(commprof_event)));
}

bool Hdf5Writer::StorePendingChunks() {
  for (auto& [rank, r] : ranks_) {
    if (!r.pending_stored) {
      if (!WriteEventChunk(r, r.pending)) {
        return false;
      }
      r.pending_stored = true;
    }
  }
  return true;
}

Status Hdf5Writer::AppendEvents(uint32_t rank, std::span<const commprof_event> events) {
  if (ranks_.count(rank) == 0 && !failed()) {
    return Internal("events for unknown rank " + std::to_string(rank));
  }
  events_received_ += events.size();
  if (failed()) {
    return write_error_;
  }
  RankOut& r = ranks_.at(rank);
  // Records gather per rank until they fill a chunk, which is then encoded and stored whole
  // (docs/file-format.md#compression); Flush stores the partly filled ones.
  for (size_t at = 0; at < events.size();) {
    std::span<const commprof_event> full;  // a chunk to store now
    size_t take = 0;
    if (r.pending.empty() && events.size() - at >= schema::kEventChunk) {
      take = schema::kEventChunk;
      full = events.subspan(at, take);  // a whole chunk in the frame: encoded from there, no copy
    } else {
      take = std::min<size_t>(schema::kEventChunk - r.pending.size(), events.size() - at);
      r.pending.insert(r.pending.end(), events.begin() + static_cast<ptrdiff_t>(at),
                       events.begin() + static_cast<ptrdiff_t>(at + take));
      r.pending_stored = false;
      if (r.pending.size() == schema::kEventChunk) {
        full = r.pending;
      }
    }
    at += take;
    r.n_events += take;
    if (!full.empty()) {
      if (!WriteEventChunk(r, full) || DeviceFailed()) {
        return Err("cannot append to /ranks/" + std::to_string(rank) + "/events");
      }
      r.pending.clear();
      r.pending_stored = true;
    }
  }
  events_appended_ += events.size();
  return Status::Ok();
}

Status Hdf5Writer::SetClock(uint32_t rank, const RankClock& c) {
  if (failed()) {
    return write_error_;
  }
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) {
    return Internal("clock for unknown rank " + std::to_string(rank));
  }
  hid_t g = it->second.group.get();
  bool ok = Write(g, rank_attr::kClockOffsetNs, c.offset_ns) && Write(g, rank_attr::kClockDriftPpm, c.drift_ppm) &&
            Write(g, rank_attr::kClockErrorBoundNs, c.error_bound_ns) &&
            Write(g, rank_attr::kClockAnchorLocalNs, c.anchor_local_ns) && Write(g, rank_attr::kClockMethod, c.method);
  if (!ok) {
    return Err("cannot write clock attributes of rank " + std::to_string(rank));
  }
  // The model is re-sent after every sync epoch: each time it replaces the previous tables.
  static_assert(sizeof(ClockSample) == 24 && sizeof(ClockPoint) == 24);
  if (!AppendSamples(g, c.samples) ||
      !WriteTable(g, schema::kClockPointsDataset, H5T_NATIVE_INT64, c.points.data(), c.points.size()) ||
      DeviceFailed()) {
    return Err("cannot write the clock tables of rank " + std::to_string(rank));
  }
  return Status::Ok();
}

Status Hdf5Writer::CloseRank(uint32_t rank, RankEnd end, const std::vector<std::pair<std::string, uint64_t>>& counters,
                             uint64_t batches_lost, const std::string& reason) {
  if (failed()) {
    return write_error_;
  }
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) {
    return Internal("close of unknown rank " + std::to_string(rank));
  }
  RankOut& r = it->second;
  hid_t g = r.group.get();
  uint64_t dropped = 0;
  bool ok = true;
  for (const auto& [name, value] : counters) {
    ok = ok && h5::WriteAttr(g, name.c_str(), value);
    if (name.rfind("dropped_", 0) == 0) {
      dropped += value;
    }
  }
  ok = ok && Write(g, rank_attr::kStatus, StatusName(end)) && Write(g, rank_attr::kEndReason, reason) &&
       Write(g, rank_attr::kDroppedEvents, dropped) && Write(g, rank_attr::kBatchesLost, batches_lost) &&
       Write(g, rank_attr::kEventsWritten, r.n_events);
  r.closed = true;
  if (!ok) {
    return Err("cannot write final attributes of rank " + std::to_string(rank));
  }
  return Flush();
}

Status Hdf5Writer::Flush() {
  if (failed()) {
    return write_error_;
  }
  if (!StorePendingChunks() || DeviceFailed()) {
    return Err("cannot store the events of the last chunks");
  }
  if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0 || DeviceFailed()) {
    return Err("flush failed");
  }
  events_flushed_ = events_appended_;
  return Status::Ok();
}

namespace {

// "a-b" for a run of ranks, "a" for one.
std::string RankRange(uint32_t first, uint32_t last) {
  return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
}

}  // namespace

Status Hdf5Writer::Finalize(const std::string& incomplete) {
  if (finalized_) {
    return write_error_;
  }
  finalized_ = true;
  hid_t f = file_.get();
  bool ok = !failed();
  if (ok) {
    uint32_t world = std::max({meta_.world_size, world_size_seen_, world_floor_});
    ok = Write(f, root_attr::kWorldSize, world);
    // The ranks below `world` that never said hello, found from the ranks present (an ordered
    // map), never by counting up to `world`: a hello may claim any world size, and finalizing
    // must cost what the ranks present cost.
    // A shard holds some of the job's ranks, the others are in other shards: none is missing.
    const uint64_t gaps_below = options_.shard ? 0 : world;
    std::vector<std::pair<uint32_t, uint32_t>> gaps;
    uint64_t n_missing = 0;
    uint64_t next = 0;
    for (const auto& entry : ranks_) {
      uint32_t rank = entry.first;
      if (rank >= gaps_below) {
        break;
      }
      if (rank > next) {
        gaps.emplace_back(static_cast<uint32_t>(next), rank - 1);
        n_missing += rank - next;
      }
      next = uint64_t{rank} + 1;
    }
    if (next < gaps_below) {
      gaps.emplace_back(static_cast<uint32_t>(next), world - 1);
      n_missing += world - next;
    }
    std::string missing;
    for (const auto& [first, last] : gaps) {
      missing += (missing.empty() ? "" : ",") + RankRange(first, last);
    }
    // A rank that never said hello gets a group, so readers see the gap, not a shorter job;
    // but only as many as the ranks present (or kMissingRankGroups) justify. Beyond that (one
    // hello claiming a world of millions) `ranks_missing` alone lists them.
    if (n_missing <= std::max<uint64_t>(schema::kMissingRankGroups, ranks_.size())) {
      for (const auto& [first, last] : gaps) {
        for (uint64_t rank = first; ok && rank <= last; ++rank) {
          std::string name = std::to_string(rank);
          Handle g(H5Gcreate2(ranks_group_.get(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
          ok = g.valid() && Write(g.get(), rank_attr::kRank, rank) &&
               Write(g.get(), rank_attr::kStatus, StatusName(schema::RankStatus::kMissing));
        }
      }
    }
    for (auto& [rank, r] : ranks_) {
      if (r.closed) {
        continue;
      }
      ok = ok && Write(r.group.get(), rank_attr::kStatus, StatusName(schema::RankStatus::kDisconnected)) &&
           Write(r.group.get(), rank_attr::kEndReason, std::string("no bye before the aggregator finished")) &&
           Write(r.group.get(), rank_attr::kEventsWritten, r.n_events);
    }
    ok = ok && StorePendingChunks();
    ok = ok && Write(f, root_attr::kRanksMissing, missing) && Write(f, root_attr::kFinalized, 1) &&
         WriteStatus(incomplete.empty() ? std::string(schema::kWriteStatusComplete) : "failed: " + incomplete).ok();
    ok = ok && H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0 && !DeviceFailed();
    if (ok) {
      events_flushed_ = events_appended_;
    } else {
      (void)Err("cannot finalize");
    }
  }
  // Every handle is closed, in a failed state too: the driver discards what HDF5 still writes,
  // so the file closes cleanly and nothing is left for HDF5's exit handler.
  ranks_.clear();
  ranks_group_.Reset();
  write_status_.Reset();
  file_.Reset();
  if (failed() && write_status_offset_ != 0) {
    // HDF5 could not write: the failure goes into `write_status` in place, in the bytes it
    // occupies since the file was created (no allocation, so a full disk still takes it).
    std::string text = std::string(schema::kWriteStatusFailedPrefix) + failure_ + "; " +
                       std::to_string(events_not_stored()) + " events not stored";
    auto buf = StatusBytes(text);
    (void)h5::OverwriteInPlace(path_, write_status_offset_, buf.data(), buf.size());
  }
  return write_error_;
}

}  // namespace commprof
