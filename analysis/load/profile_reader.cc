#include "analysis/load/profile_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <set>

#include "core/h5/chunk_encoder.h"
#include "core/h5/damage_guard.h"
#include "core/schema/enums.h"

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

// Bounds on tables read whole. A collector has at most 2^20 strings (wire-protocol.md); an
// imported trace may have more, so there is room. Clock points: one per synchronization epoch.
constexpr hsize_t kMaxStrings = hsize_t{1} << 26;
constexpr hsize_t kMaxClockPoints = hsize_t{1} << 20;

// A group name as a rank: decimal digits only, no sign, no leading zero, at most 2^32 - 1 (so
// "-1", "2junk", "01" and "4294967296" are not ranks).
std::optional<uint32_t> ParseRankName(const std::string& name) {
  if (name.empty() || name.size() > 10 || (name.size() > 1 && name[0] == '0')) {
    return std::nullopt;
  }
  uint64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(v);
}

// A name as it can be printed on one line: control bytes escaped, at most 80 bytes shown.
std::string Printable(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size() && i < 80; ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (name.size() > 80) {
    out += "... (" + std::to_string(name.size()) + " bytes)";
  }
  return "'" + out + "'";
}

// Why a file cannot be opened as HDF5, in words that say what to do.
Status OpenFailure(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return InvalidArgument(path + ": cannot open: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    return InvalidArgument(path + ": is a directory, not a commprof file");
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return InvalidArgument(path + ": cannot read: " + std::strerror(errno));
  }
  if (st.st_size == 0) {
    return InvalidArgument(path + ": empty file (0 bytes), not an HDF5 file");
  }
  return InvalidArgument(path + ": not an HDF5 file (no HDF5 signature in its first bytes)");
}

// The writer's status string: a scalar fixed-size string dataset at the root, written when the
// file is created and rewritten in place at the end (so a writer killed or out of disk leaves
// "writing" or "failed: ..." behind). "" when the file has none or it cannot be read.
std::string ReadWriteStatus(hid_t f) {
  constexpr const char* kWriteStatus = "write_status";
  if (H5Lexists(f, kWriteStatus, H5P_DEFAULT) <= 0) {
    return "";
  }
  Handle d(H5Dopen2(f, kWriteStatus, H5P_DEFAULT));
  Handle ftype(H5Dget_type(d.get()));
  Handle space(H5Dget_space(d.get()));
  if (!d.valid() || H5Tget_class(ftype.get()) != H5T_STRING || H5Tis_variable_str(ftype.get()) != 0 ||
      H5Sget_simple_extent_type(space.get()) != H5S_SCALAR) {
    return "";
  }
  const size_t n = H5Tget_size(ftype.get());
  if (n == 0 || n > 65536) {
    return "";
  }
  std::vector<char> buf(n + 1, '\0');
  Handle mtype(H5Tcopy(H5T_C_S1));
  H5Tset_size(mtype.get(), n + 1);
  if (H5Dread(d.get(), mtype.get(), H5S_ALL, H5S_ALL, h5::Transfer(1, n + 1).id(), buf.data()) < 0) {
    return "";
  }
  return std::string(buf.data());
}

// The rows of the rank table `name` of group `g`, which must be a 1-D dataset of type class `cls`
// (`what` names its rows in the error, `where` the group).
Result<hsize_t> TableRows(hid_t g, const char* name, H5T_class_t cls, const std::string& where, const char* what) {
  Handle d(H5Dopen2(g, name, H5P_DEFAULT));
  Handle space(H5Dget_space(d.get()));
  Handle type(H5Dget_type(d.get()));
  if (!d.valid() || H5Sget_simple_extent_ndims(space.get()) != 1 || H5Tget_class(type.get()) != cls) {
    return Corrupt(where + "/" + name + " is not a 1-D table of " + what);
  }
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  return n;
}

// A root attribute's comma-separated file names ("" holds none).
std::vector<std::string> SplitNames(const std::string& names) {
  std::vector<std::string> out;
  for (size_t at = 0; !names.empty() && at <= names.size();) {
    const size_t comma = std::min(names.find(',', at), names.size());
    out.push_back(names.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

}  // namespace

std::string FormatRankRanges(const RankRanges& ranges) {
  std::string out;
  for (const auto& [a, b] : ranges) {
    out += (out.empty() ? "" : ",") + std::to_string(a);
    if (b != a) {
      out += "-" + std::to_string(b);
    }
  }
  return out;
}

RankRanges RangesOfRanks(const std::vector<uint32_t>& sorted_ranks) {
  RankRanges out;
  for (uint32_t r : sorted_ranks) {
    if (!out.empty() && out.back().second + 1 == r) {
      out.back().second = r;
    } else {
      out.emplace_back(r, r);
    }
  }
  return out;
}

RankRanges ProfileInfo::NeverConnected() const {
  if (shard) {
    return {};  // the job's other ranks are in other shards
  }
  // Every rank the file has something of (a readable group, or one that could not be read) is
  // present; a "missing" group is not. Cost: the groups, whatever world_size says.
  std::vector<uint32_t> present;
  std::vector<uint32_t> missing;
  for (const RankInfo& r : ranks) {
    (r.status == schema::RankStatusName(schema::RankStatus::kMissing) ? missing : present).push_back(r.rank);
  }
  for (const RankFault& f : faults) {
    if (f.rank) {
      present.push_back(*f.rank);
    }
  }
  std::sort(present.begin(), present.end());
  std::sort(missing.begin(), missing.end());
  RankRanges out;
  auto add = [&](uint32_t a, uint32_t b) {
    if (!out.empty() && out.back().second + 1 == a) {
      out.back().second = b;
    } else {
      out.emplace_back(a, b);
    }
  };
  // Walk [0, world_size) by the present ranks: everything between two of them is never-connected.
  uint64_t next = 0;
  for (uint32_t p : present) {
    if (p >= world_size) {
      break;
    }
    if (p > next) {
      add(static_cast<uint32_t>(next), p - 1);
    }
    next = std::max<uint64_t>(next, uint64_t{p} + 1);
  }
  if (next < world_size) {
    add(static_cast<uint32_t>(next), static_cast<uint32_t>(world_size - 1));
  }
  // "missing" groups of ranks at or above world_size (not written by this writer, but honest).
  for (uint32_t m : missing) {
    if (m >= world_size) {
      add(m, m);
    }
  }
  return out;
}

uint64_t ProfileInfo::lost_batches() const {
  uint64_t n = 0;
  for (const RankInfo& r : ranks) {
    n += r.batches_lost;
  }
  return n;
}

std::optional<double> RankInfo::clock_drift_uncertainty_ppm() const {
  if (clock_points.size() < 2 || clock_points.back().local_ns <= clock_points.front().local_ns) {
    return std::nullopt;
  }
  const double span = static_cast<double>(clock_points.back().local_ns - clock_points.front().local_ns);
  return static_cast<double>(clock_points.front().half_rtt_ns + clock_points.back().half_rtt_ns) / span * 1e6;
}

uint64_t ProfileInfo::missing_events() const {
  uint64_t n = events_not_stored;
  for (const RankInfo& r : ranks) {
    n += r.missing_events();
  }
  return n;
}

namespace {
// Enough for a shard per node of a few hundred nodes; beyond it the least recently used closes.
constexpr unsigned kShardFilesKeptOpen = 256;

// `path` opened read-only, or why it cannot be, in words that say what to do: not HDF5
// (OpenFailure), locked by a writer, cut short, damaged.
Result<Handle> OpenForReading(const std::string& path, hid_t fapl) {
  // A FIFO would block the open until something writes into it, a device read forever: neither is
  // a file this can read.
  if (struct stat st{}; ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    const char* what = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device";
    return InvalidArgument(path + ": not a regular file (" + what + "), not a commprof file");
  }
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return OpenFailure(path);
  }
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl));
  if (file.valid()) {
    return file;
  }
  const h5::ErrorStackSummary why = h5::SummarizeErrorStack();
  if (why.locked) {
    return IoError(path +
                   ": locked: another process has it open for writing (a commprof run or aggregate still "
                   "running?); read it once that process has finished");
  }
  if (why.truncated) {
    struct stat st {};
    std::string sizes;
    if (::stat(path.c_str(), &st) == 0 && why.stored_eof) {
      sizes = " (" + std::to_string(st.st_size) + " bytes of the " + std::to_string(*why.stored_eof) +
              " its HDF5 superblock records)";
    }
    return Corrupt(path + ": truncated: the file is shorter than it was written" + sizes +
                   "; an incomplete copy or a full disk? A file whose writer was killed is not cut short and "
                   "opens");
  }
  return Corrupt(path + ": damaged: it has an HDF5 signature but HDF5 cannot open it (" + why.detail + ")");
}

// The directory of the job file itself, with its '/' ("" for a bare name in the working
// directory): a job file opened through a symbolic link has its shards beside the file the link
// leads to, where HDF5 looks for them too.
std::string FileDirectory(const std::string& job) {
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(job, ec);
  const std::string file = ec ? job : real.string();
  const size_t slash = file.find_last_of('/');
  return slash == std::string::npos ? std::string() : file.substr(0, slash + 1);
}

// The file and object an external link `name` in `group` points to; nullopt for any other link.
std::optional<std::pair<std::string, std::string>> ExternalLinkTarget(hid_t group, const std::string& name) {
  H5L_info_t info;
  if (H5Lget_info(group, name.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_EXTERNAL) {
    return std::nullopt;
  }
  std::vector<char> value(info.u.val_size);
  const char* file = nullptr;
  const char* object = nullptr;
  unsigned flags = 0;
  if (value.empty() || H5Lget_val(group, name.c_str(), value.data(), value.size(), H5P_DEFAULT) < 0 ||
      H5Lunpack_elink_val(value.data(), value.size(), &flags, &file, &object) < 0 || file == nullptr ||
      object == nullptr) {
    return std::nullopt;
  }
  return std::make_pair(std::string(file), std::string(object));
}

// The rows of the chunked dataset `events` (n rows) before its last chunk when that chunk alone
// cannot be read (its filter fails on it); nullopt when it reads, or when an earlier row cannot be
// read either (a damage that ForEachStoredChunk names).
std::optional<hsize_t> RowsBeforeDamagedLastChunk(hid_t events, hsize_t n) {
  Handle dcpl(H5Dget_create_plist(events));
  hsize_t chunk = 0;
  if (!dcpl.valid() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED || H5Pget_chunk(dcpl.get(), 1, &chunk) != 1 ||
      chunk == 0 || chunk > (hsize_t{1} << 20)) {
    return std::nullopt;
  }
  const hsize_t last = (n - 1) / chunk * chunk;
  auto readable = [&](hsize_t from, hsize_t count) {
    Handle fspace(H5Dget_space(events));
    Handle mspace(H5Screate_simple(1, &count, nullptr));
    std::vector<commprof_event> rows(static_cast<size_t>(count));
    return H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &from, nullptr, &count, nullptr) >= 0 &&
           H5Dread(events, h5::EventType(), mspace.get(), fspace.get(), H5P_DEFAULT, rows.data()) >= 0;
  };
  if (readable(last, n - last)) {
    return std::nullopt;
  }
  return last == 0 || readable(last - 1, 1) ? std::optional<hsize_t>(last) : std::nullopt;
}
}  // namespace

ProfileReader::~ProfileReader() {
  if (damage_ != nullptr) {
    // After a whole Open the command has read and written what it could: a crash now is at close.
    h5::ReadScope closing(*damage_, /*closing=*/opened_);
    file_.Reset();
  }
}

Result<std::unique_ptr<ProfileReader>> ProfileReader::Open(const std::string& path) {
  h5::QuietErrors();
  std::unique_ptr<ProfileReader> r(new ProfileReader());
  r->damage_ = &h5::DamageMessagesOf(path);  // a damaged file's crash or stall in libhdf5, named
  h5::ReadScope reading(*r->damage_);
  // A job recorded through relays links its ranks to shard files (docs/scale.md#relays): keep the
  // shards open once reached, instead of opening one again for every object read through a link.
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_elink_file_cache_size(fapl.get(), kShardFilesKeptOpen);
  auto file = OpenForReading(path, fapl.get());
  if (!file.ok()) {
    return file.status();
  }
  r->file_ = std::move(file.value());
  hid_t f = r->file_.get();
  ProfileInfo& info = r->info_;
  info.path = path;
  r->file_dir_ = FileDirectory(path);
  auto format = Read(f, root_attr::kFormat);
  if (!format) {
    return InvalidArgument(path + ": an HDF5 file, but not a commprof file (no root attribute '" +
                           root_attr::kFormat.name + "')");
  }
  info.format = *format;
  if (info.format != schema::kFormatName) {
    return InvalidArgument(path + ": root attribute '" + root_attr::kFormat.name + "' is '" + info.format +
                           "', not a commprof file");
  }
  auto version = Read(f, root_attr::kFormatVersion);
  if (!version) {
    return InvalidArgument(path + ": root attribute '" + root_attr::kFormatVersion.name +
                           "' is missing or not an integer");
  }
  info.format_version = *version;
  if (info.format_version > schema::kFormatVersion) {
    return InvalidArgument(path + ": written by a newer commprof (" + root_attr::kFormatVersion.name + " " +
                           std::to_string(info.format_version) + "; this build reads " +
                           std::to_string(schema::kFormatVersion) + "): read it with that version or a later one");
  }
  if (info.format_version != schema::kFormatVersion) {
    return InvalidArgument(path + ": " + root_attr::kFormatVersion.name + " " + std::to_string(info.format_version) +
                           " is not supported by this build (" + std::to_string(schema::kFormatVersion) + ")");
  }
  info.job_id = Read(f, root_attr::kJobId).value_or("");
  info.command_line = Read(f, root_attr::kCommandLine).value_or("");
  info.incarnation = Read(f, root_attr::kIncarnation).value_or(0);
  info.shard = Read(f, root_attr::kShard).value_or(0) == 1;
  info.restart_files = SplitNames(Read(f, root_attr::kRestartFiles).value_or(""));
  info.unjoined_shards = SplitNames(Read(f, root_attr::kUnjoinedShards).value_or(""));
  // The writer gives every file these two when it creates it: without them (a damaged attribute
  // header hides one) the file would read as a job of no ranks that never finished.
  const auto world_size = Read(f, root_attr::kWorldSize);
  const auto finalized = Read(f, root_attr::kFinalized);
  if (!world_size || !finalized) {
    return Corrupt(path + ": root attribute '" + (world_size ? root_attr::kFinalized : root_attr::kWorldSize).name +
                   "' is missing or cannot be read (every commprof file has it): damaged metadata; restore the "
                   "file from a good copy");
  }
  info.world_size = *world_size;
  if (info.world_size > kMaxFileWorldSize) {
    return Corrupt(path + ": root attribute '" + root_attr::kWorldSize.name + "' is " +
                   std::to_string(info.world_size) + ", above the largest world size this build reads (" +
                   std::to_string(kMaxFileWorldSize) + ")");
  }
  info.start_epoch_ns = Read(f, root_attr::kStartEpochNs).value_or(0);
  info.finalized = *finalized != 0;
  info.write_status = ReadWriteStatus(f);
  info.events_not_stored = info.write_failed() ? schema::EventsNotStoredIn(info.write_status) : 0;

  Handle ranks(H5Gopen2(f, schema::kRanksGroup, H5P_DEFAULT));
  if (!ranks.valid()) {
    return Corrupt(path + ": group /" + schema::kRanksGroup + " is missing");
  }
  H5G_info_t ginfo;
  if (H5Gget_info(ranks.get(), &ginfo) < 0) {
    return Corrupt(path + ": cannot list /" + schema::kRanksGroup);
  }
  for (hsize_t i = 0; i < ginfo.nlinks; ++i) {
    auto name = h5::LinkNameByIndex(ranks.get(), i);
    if (!name) {
      r->info_.faults.push_back({std::nullopt, path + ": /ranks: cannot read the name of child " + std::to_string(i)});
      continue;
    }
    auto rank = ParseRankName(*name);
    if (!rank) {
      r->info_.faults.push_back({std::nullopt, path + ": /ranks/" + Printable(*name) +
                                                   ": the name is not a rank (decimal digits, 0 to 4294967295, "
                                                   "no sign or leading zero); left out"});
      continue;
    }
    h5::ReadScope rank_read(*r->damage_);  // a scope begun: the stall watchdog sees progress
    auto ri = r->ReadRank(ranks.get(), *name, *rank);
    if (!ri.ok()) {
      r->info_.faults.push_back({*rank, ri.status().message()});
      continue;
    }
    if (const RankInfo& got = ri.value(); got.damaged_tail > 0) {
      r->info_.faults.push_back({*rank,
                                 path + ": /ranks/" + *name + "/events records " + std::to_string(got.event_count) +
                                     "-" + std::to_string(got.event_count + got.damaged_tail - 1) +
                                     " cannot be read (the last chunk, which the writer was rewriting when it failed "
                                     "or was killed); the rank is read without them",
                                 true});
    }
    info.ranks.push_back(std::move(ri.value()));
  }
  std::sort(info.ranks.begin(), info.ranks.end(), [](const RankInfo& a, const RankInfo& b) { return a.rank < b.rank; });
  r->opened_ = true;
  return r;
}

const Status& ProfileReader::ShardStatus(const std::string& path) const {
  auto it = shard_status_.find(path);
  if (it == shard_status_.end()) {
    Status st;
    struct stat sb {};
    if (::stat(path.c_str(), &sb) != 0) {
      st = IoError("the shard " + path + ", which is missing (" + std::strerror(errno) +
                   "): keep the job file and its .shards directory together");
    } else {
      h5::ReadScope shard_read(h5::DamageMessagesOf(path));  // a crash or stall here names the shard
      if (auto opened = OpenForReading(path, H5P_DEFAULT); !opened.ok()) {
        st = Status(opened.status().code(), "a shard that cannot be read: " + opened.status().message());
      }
    }
    it = shard_status_.emplace(path, std::move(st)).first;
  }
  return it->second;
}

Result<RankInfo> ProfileReader::ReadRank(hid_t ranks, const std::string& name, uint32_t rank) const {
  const std::string& path = info_.path;
  const std::string where = path + ": /ranks/" + name;
  const auto shard = ExternalLinkTarget(ranks, name);
  // As HDF5 finds it first: absolute, else beside the job file.
  const std::string shard_path =
      !shard ? "" : (shard->first.starts_with("/") ? shard->first : file_dir_ + shard->first);
  if (shard) {
    // A rank a relay stored (docs/file-format.md#shards). The shard is looked for beside the job
    // file only: HDF5 would also try the name from the working directory, and so read another
    // job's shard of the same name in place of a missing one.
    if (const Status& st = ShardStatus(shard_path); !st.ok()) {
      // A job file renamed without its shard directory renamed alike: its links still name the
      // directory of the name it was written under.
      const std::string written_dir = std::filesystem::path(shard->first).parent_path().filename().string();
      const std::string now_dir = std::filesystem::path(path).filename().string() + ".shards";
      if (!shard->first.starts_with("/") && written_dir.ends_with(".shards") && written_dir != now_dir) {
        return Status(st.code(), where + " is in " + st.message() + " (this file was written as " +
                                     written_dir.substr(0, written_dir.size() - 7) + ", and its links name " +
                                     written_dir + "/ beside it: renamed, it needs its shard directory by that " +
                                     "name, not " + now_dir + ")");
      }
      return Status(st.code(), where + " is in " + st.message());
    }
  }
  H5O_info_t oinfo;
  if (H5Oget_info_by_name(ranks, name.c_str(), &oinfo, H5P_DEFAULT) < 0 || oinfo.type != H5O_TYPE_GROUP) {
    if (shard) {  // the shard opens, but has no such group
      return Corrupt(where + " is in the shard " + shard_path + ", which has no group " + shard->second);
    }
    return Corrupt(where + " is not a group");
  }
  Handle g(H5Gopen2(ranks, name.c_str(), H5P_DEFAULT));
  if (!g.valid()) {
    return Corrupt(where + ": cannot open the group");
  }
  if (info_.world_size > 0 && rank >= info_.world_size) {
    return Corrupt(where + ": rank " + name + " is not below the root attribute world_size " +
                   std::to_string(info_.world_size));
  }
  RankInfo ri;
  ri.rank = rank;
  if (shard) {
    ri.shard = shard->first;
  }
  if (auto stored = Read(g.get(), rank_attr::kRank); stored && *stored != rank) {
    return Corrupt(where + ": attribute '" + rank_attr::kRank.name + "' is " + std::to_string(*stored) +
                   ", not the group's name");
  }
  ri.host = Read(g.get(), rank_attr::kHost).value_or("");
  ri.pid = Read(g.get(), rank_attr::kPid).value_or(0);
  ri.status = Read(g.get(), rank_attr::kStatus).value_or("unknown");
  ri.end_reason = Read(g.get(), rank_attr::kEndReason).value_or("");
  // A rank linked from a shard its relay never finished (the relay killed with the job: a cancelled
  // Slurm step) still says "connected" there; in a finalized job file no stream is open any more.
  if (shard && info_.finalized && ri.status == schema::RankStatusName(schema::RankStatus::kConnected)) {
    ri.status = schema::RankStatusName(schema::RankStatus::kDisconnected);
    if (ri.end_reason.empty()) {
      ri.end_reason = "its relay ended before finishing its shard";
    }
  }
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
  // Whether the rank has table `name`. A lookup that fails (rather than finding nothing) is a damaged
  // group, not an empty rank: its events would otherwise read as 0 rows and "lost".
  std::string damaged_link;
  auto has = [&](const char* table) {
    const htri_t e = H5Lexists(g.get(), table, H5P_DEFAULT);
    if (e < 0 && damaged_link.empty()) {
      damaged_link = table;
    }
    return e > 0;
  };
  const char* points = schema::kClockPointsDataset;
  const bool has_points = has(points), has_events = has(schema::kEventsDataset),
             has_strings = has(schema::kStringsDataset);
  if (!damaged_link.empty()) {
    return Corrupt(where + ": cannot look up its '" + damaged_link +
                   "' table: the group's links are damaged; restore the file from a good copy");
  }
  if (has_points) {
    Handle d(H5Dopen2(g.get(), points, H5P_DEFAULT));
    Handle space(H5Dget_space(d.get()));
    hsize_t dims[2] = {0, 0};
    if (H5Sget_simple_extent_ndims(space.get()) == 2) {
      H5Sget_simple_extent_dims(space.get(), dims, nullptr);
    }
    if (dims[1] != std::size(schema::kClockPointColumns)) {
      return Corrupt(where + "/" + points + " is not an N x 3 table");
    }
    // One row per synchronization epoch: a damaged dimension must not size an allocation.
    if (dims[0] > kMaxClockPoints) {
      return Corrupt(where + "/" + points + " has " + std::to_string(dims[0]) + " rows, more than the " +
                     std::to_string(kMaxClockPoints) + " any clock model has");
    }
    ri.clock_points.resize(dims[0]);
    if (dims[0] > 0 && H5Dread(d.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ri.clock_points.data()) < 0) {
      return Corrupt(where + "/" + points + ": cannot read");
    }
    // The model's arithmetic trusts its points: reject values no clock produces (|offset| over
    // a day, negative times or round trips) rather than overflow on them.
    constexpr int64_t kDayNs = 86400LL * 1000000000LL;
    for (size_t k = 0; k < ri.clock_points.size(); ++k) {
      const ClockPoint& p = ri.clock_points[k];
      if (p.local_ns < 0 || p.half_rtt_ns < 0 || p.offset_ns > kDayNs || p.offset_ns < -kDayNs ||
          p.half_rtt_ns > kDayNs) {
        return Corrupt(where + "/" + points + " row " + std::to_string(k) + " holds impossible values");
      }
    }
  }
  const std::string dropped = rank_attr::kDroppedEvents.name;
  ri.dropped_events = ri.counters.count(dropped) ? ri.counters[dropped] : 0;
  const std::string lost = rank_attr::kBatchesLost.name;
  ri.batches_lost = ri.counters.count(lost) ? ri.counters[lost] : 0;
  if (has_events) {
    auto n = TableRows(g.get(), schema::kEventsDataset, H5T_COMPOUND, where, "event records");
    if (!n.ok()) {
      return n.status();
    }
    ri.event_count = n.value();
  }
  if (has_strings) {
    auto rows = TableRows(g.get(), schema::kStringsDataset, H5T_STRING, where, "strings");
    if (!rows.ok()) {
      return rows.status();
    }
    const hsize_t n = rows.value();
    // Strings() reads the table whole: a damaged dimension must not size that allocation.
    if (n > kMaxStrings) {
      return Corrupt(where + "/" + schema::kStringsDataset + " has " + std::to_string(n) + " rows, more than the " +
                     std::to_string(kMaxStrings) + " a rank can have");
    }
  }
  // What the collector shipped and the file does not hold: frames lost on the way (batches_lost
  // counts them, this counts their events).
  if (auto shipped = ri.counters.find("events_shipped"); shipped != ri.counters.end()) {
    ri.events_lost = shipped->second > ri.event_count ? shipped->second - ri.event_count : 0;
  }
  // A writer that failed or was killed while rewriting a rank's last, partly filled chunk can leave
  // that chunk unreadable (HDF5 may give the new copy the space of the old one before the chunk
  // index that points at the old one is rewritten: docs/reliability.md). The rank's other rows are
  // read; a rank that said bye was flushed after that chunk and is not probed.
  if (ri.event_count > 0 && ri.status != schema::RankStatusName(schema::RankStatus::kComplete)) {
    Handle events(H5Dopen2(g.get(), schema::kEventsDataset, H5P_DEFAULT));
    if (const auto readable = RowsBeforeDamagedLastChunk(events.get(), ri.event_count)) {
      ri.damaged_tail = ri.event_count - *readable;
      ri.event_count = *readable;
    }
  }
  return ri;
}

void ProfileReader::MarkUnreadable(uint32_t rank, std::string message) {
  auto it = std::find_if(info_.ranks.begin(), info_.ranks.end(), [&](const RankInfo& r) { return r.rank == rank; });
  if (it == info_.ranks.end()) {
    return;
  }
  info_.ranks.erase(it);
  // Left out whole now: its note of a damaged last chunk gives way to this one.
  std::erase_if(info_.faults, [&](const RankFault& f) { return f.partial && f.rank == rank; });
  info_.faults.push_back({rank, std::move(message)});
}

Result<std::vector<std::string>> ProfileReader::Strings(uint32_t rank) const {
  h5::ReadScope reading(*damage_);
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
  if (n > 0 && H5Dread(d.get(), h5::VarStringType(), H5S_ALL, H5S_ALL, h5::Transfer(n).id(), raw.data()) < 0) {
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
  if (!window_) {
    return ForEachStoredChunk(rank, fn);
  }
  auto span = window_span_.find(rank);
  if (span == window_span_.end()) {
    return Status::Ok();  // a rank without window K has been moved to the faults
  }
  const uint64_t lo = span->second.first;
  const uint64_t hi = span->second.second;
  const uint64_t k = *window_;
  std::vector<commprof_event> kept;
  return ForEachStoredChunk(rank, [&](std::span<const commprof_event> chunk) {
    kept.clear();
    for (const commprof_event& e : chunk) {
      bool keep = false;
      switch (e.kind) {
        case COMMPROF_KIND_MPI_COMM:     // communicator definitions: matching needs them
        case COMMPROF_KIND_STACK_FRAME:  // stack definitions, written at process end
          keep = true;
          break;
        case COMMPROF_KIND_WINDOW:
          keep = e.seq == k;
          break;
        default:
          keep = e.start_ns >= lo && e.start_ns <= hi;
          break;
      }
      if (keep) {
        kept.push_back(e);
      }
    }
    if (!kept.empty()) {
      fn(std::span<const commprof_event>(kept.data(), kept.size()));
    }
  });
}

namespace {

std::string WindowList(const std::set<uint64_t>& windows) {
  std::string out;
  for (uint64_t w : windows) {
    out += (out.empty() ? "" : ", ") + std::to_string(w);
  }
  return out.empty() ? "none" : out;
}

}  // namespace

Status ProfileReader::SelectWindow(uint64_t k) {
  window_.reset();
  window_span_.clear();
  std::set<uint64_t> all;
  std::map<uint32_t, std::set<uint64_t>> of_rank;
  for (const RankInfo& r : info_.ranks) {
    std::set<uint64_t>& mine = of_rank[r.rank];
    Status st = ForEachStoredChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      for (const commprof_event& e : chunk) {
        if (e.kind != COMMPROF_KIND_WINDOW) {
          continue;
        }
        mine.insert(e.seq);
        all.insert(e.seq);
        if (e.seq == k && window_span_.count(r.rank) == 0) {
          window_span_[r.rank] = {e.start_ns, std::max(e.start_ns, e.end_ns)};
        }
      }
    });
    COMMPROF_RETURN_IF_ERROR(st);
  }
  if (all.empty()) {
    return InvalidArgument(info_.path + ": --window " + std::to_string(k) +
                           ": the file has no capture windows (recorded without --schedule, --delay or --duration)");
  }
  if (window_span_.empty()) {
    return InvalidArgument(info_.path + ": --window " + std::to_string(k) + ": no rank has window " +
                           std::to_string(k) + " (the file's windows: " + WindowList(all) + ")");
  }
  window_ = k;
  std::vector<uint32_t> lacking;
  for (const RankInfo& r : info_.ranks) {
    if (window_span_.count(r.rank) == 0 && r.status != schema::RankStatusName(schema::RankStatus::kMissing)) {
      lacking.push_back(r.rank);
    }
  }
  for (uint32_t rank : lacking) {
    MarkUnreadable(rank, info_.path + ": /ranks/" + std::to_string(rank) + ": --window " + std::to_string(k) +
                             ": the rank has no window " + std::to_string(k) +
                             " (its windows: " + WindowList(of_rank[rank]) + "); left out");
  }
  return Status::Ok();
}

namespace {

// Which records of [start, start + count) cannot be read, for the message that names them: the
// first chunk of the dataset in that range that HDF5 cannot read (its filter fails, its address is
// bad), as "records A-B (a damaged chunk)"; the whole range when no single chunk fails alone.
std::string DamagedRecords(hid_t dataset, hsize_t start, hsize_t count) {
  hsize_t chunk = 0;
  Handle dcpl(H5Dget_create_plist(dataset));
  if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED || H5Pget_chunk(dcpl.get(), 1, &chunk) != 1 || chunk == 0) {
    chunk = count;
  }
  Handle fspace(H5Dget_space(dataset));
  std::vector<commprof_event> one(static_cast<size_t>(std::min(chunk, count)));
  for (hsize_t at = start - start % chunk; at < start + count; at += chunk) {
    const hsize_t from = std::max(at, start);
    const hsize_t n = std::min(at + chunk, start + count) - from;
    H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &from, nullptr, &n, nullptr);
    Handle mspace(H5Screate_simple(1, &n, nullptr));
    if (H5Dread(dataset, h5::EventType(), mspace.get(), fspace.get(), H5P_DEFAULT, one.data()) < 0) {
      return "records " + std::to_string(from) + "-" + std::to_string(from + n - 1) + " (a damaged chunk)";
    }
  }
  return "records " + std::to_string(start) + "-" + std::to_string(start + count - 1);
}

}  // namespace

Status ProfileReader::ForEachStoredChunk(uint32_t rank,
                                         const std::function<void(std::span<const commprof_event>)>& fn) const {
  std::string p = RankPath(rank) + "/" + schema::kEventsDataset;
  std::optional<h5::ReadScope> reading(std::in_place, *damage_);  // not around `fn`: our own code
  if (H5Lexists(file_.get(), RankPath(rank).c_str(), H5P_DEFAULT) <= 0 ||
      H5Lexists(file_.get(), p.c_str(), H5P_DEFAULT) <= 0) {
    return Status::Ok();  // a missing rank has no events
  }
  Handle d(H5Dopen2(file_.get(), p.c_str(), H5P_DEFAULT));
  Handle fspace(H5Dget_space(d.get()));
  hsize_t n = 0;
  H5Sget_simple_extent_dims(fspace.get(), &n, nullptr);
  // A rank read without its damaged last chunk (RankInfo::damaged_tail) stops before it.
  auto info = std::lower_bound(info_.ranks.begin(), info_.ranks.end(), rank,
                               [](const RankInfo& r, uint32_t want) { return r.rank < want; });
  if (info != info_.ranks.end() && info->rank == rank && info->damaged_tail > 0) {
    n = std::min<hsize_t>(n, info->event_count);
  }
  const hsize_t lz4_chunk = h5::ChunkDecoder::ShuffleLz4ChunkRecords(d.get());
  h5::ChunkDecoder decoder(sizeof(commprof_event), static_cast<size_t>(lz4_chunk));
  // A multiple of the LZ4 chunk, so the fast path reads whole chunks.
  const hsize_t kChunk = lz4_chunk > 0 ? std::max<hsize_t>(1, 65536 / lz4_chunk) * lz4_chunk : 65536;
  std::vector<commprof_event> buf(static_cast<size_t>(std::min<hsize_t>(n, kChunk)));
  reading.reset();
  for (hsize_t start = 0; start < n; start += kChunk) {
    hsize_t count = std::min(kChunk, n - start);
    reading.emplace(*damage_);
    if (lz4_chunk == 0 || !decoder.ReadRows(d.get(), start, count, reinterpret_cast<uint8_t*>(buf.data()))) {
      H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr);
      Handle mspace(H5Screate_simple(1, &count, nullptr));
      if (H5Dread(d.get(), h5::EventType(), mspace.get(), fspace.get(), H5P_DEFAULT, buf.data()) < 0) {
        return Corrupt(info_.path + ": cannot read " + p + " " + DamagedRecords(d.get(), start, count));
      }
    }
    reading.reset();
    fn(std::span<const commprof_event>(buf.data(), static_cast<size_t>(count)));
  }
  return Status::Ok();
}

}  // namespace commprof
