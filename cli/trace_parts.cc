#include "cli/trace_parts.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "analysis/export/chrome_trace.h"
#include "analysis/export/perfetto_trace.h"
#include "cli/output_file.h"
#include "core/clock_domain.h"
#include "core/log.h"
#include "core/part_bytes.h"

namespace commprof::cli {
namespace {

constexpr int kTagCanWrite = 11;
constexpr int kTagPartInfo = 12;
constexpr int kTagPartBytes = 13;
constexpr int kTagReady = 14;
constexpr int kTagPlaced = 15;
constexpr int kTagCanPlace = 16;
constexpr size_t kChunk = size_t{4} << 20;  // a block's bytes cross to the first in pieces of this size

constexpr uint32_t kMagic = 0x54504350;  // "CPPT"
constexpr uint32_t kReadyKind = 1, kInfoKind = 2, kPlacedKind = 3;
constexpr uint64_t kFiguresBytes = sizeof(TraceExportStats);

// Seconds since this process's export started (COMMPROF_LOG=info prints each stage's time).
double Seconds() {
  static const auto t0 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Status Malformed() {
  return Internal(
      "distributed export: a message from another process is malformed (are all processes the same "
      "commprof build?)");
}

// The block of process `p` of `k`: indices into the exported ranks.
std::pair<size_t, size_t> BlockOfProcess(size_t ranks, int p, int k) {
  return BlockOf(ranks, static_cast<size_t>(p), static_cast<size_t>(k));
}

size_t ExportedRanks(const ProfileReader& reader, const TraceExportOptions& opts) {
  return opts.ranks.empty() ? reader.info().ranks.size()
                            : std::set<uint32_t>(opts.ranks.begin(), opts.ranks.end()).size();
}

// A block's figures (and the status it ended in) as bytes; `bytes` is the size of its trace.
std::string EncodeFigures(uint32_t kind, const Status& st, const TraceExportStats& s, uint64_t bytes) {
  PartWriter w;
  PutPartHead(w, kMagic, kind, kFiguresBytes, st);
  if (st.ok()) {
    w.Put(s);
    w.Put(bytes);
  }
  return w.Take();
}

Status DecodeFigures(uint32_t kind, std::string_view in, TraceExportStats& s, uint64_t& bytes) {
  PartReader r(in);
  COMMPROF_RETURN_IF_ERROR(GetPartHead(r, kMagic, kind, kFiguresBytes, Malformed()));
  return r.Get(s) && r.Get(bytes) && r.done() ? Status::Ok() : Malformed();
}

void AddFigures(TraceExportStats& into, const TraceExportStats& s) {
  into.ranks += s.ranks;
  into.events += s.events;
  into.slices += s.slices;
  into.instants += s.instants;
  into.tracks += s.tracks;
  into.lanes_added += s.lanes_added;
  into.flows += s.flows;
  into.counters += s.counters;
  into.counter_series += s.counter_series;
  into.events_cut += s.events_cut;
}

// `file` as an absolute path (a later process may have another working directory); empty stays empty.
std::string AbsolutePath(const std::string& file) {
  std::error_code ec;
  const std::filesystem::path abs = file.empty() ? std::filesystem::path() : std::filesystem::absolute(file, ec);
  return ec ? file : abs.string();
}

// The output file the first process named in `where` (EncodePlace), opened for writing, when this
// process is on the same machine and the path leads it to that very file (device and inode);
// else -1 (another machine, the same path naming another file, a malformed word, or no offset).
int OpenTheSameFile(const std::string& where, std::string& output, uint64_t& offset) {
  PartReader r(where);
  std::string file;
  uint64_t domain = 0, dev = 0, ino = 0;
  if (!r.Get(offset) || !r.GetString(file) || !r.GetString(output) || !r.Get(domain) || !r.Get(dev) || !r.Get(ino) ||
      !r.done() || offset == UINT64_MAX || domain != SystemClockDomain()) {
    return -1;
  }
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == dev &&
      static_cast<uint64_t>(st.st_ino) == ino) {
    return fd;
  }
  if (fd >= 0) {
    ::close(fd);
  }
  return -1;
}

// A block's trace, held in an unnamed file of the temporary directory until it goes into the output.
class HeldPart {
 public:
  Status Open(int rank) {
    const char* tmpdir = std::getenv("TMPDIR");
    const std::string dir = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
    std::string name = dir + "/commprof-export-part-XXXXXX";
    const int fd = ::mkstemp(name.data());
    if (fd < 0) {
      return IoError("distributed export: process " + std::to_string(rank) + " cannot create a file in " + dir +
                     " to hold its part of the trace: " + std::strerror(errno) +
                     " (TMPDIR names where; it needs room for the process's share of the trace)");
    }
    name_ = "process " + std::to_string(rank) + "'s part of the trace (held in " + dir + ", TMPDIR)";
    file_.open(name, std::ios::in | std::ios::out | std::ios::trunc | std::ios::binary);
    ::unlink(name.c_str());  // gone with the process, whatever ends it
    fd_ = fd;                // the same file, for copying it out whole (CopyInto)
    return file_.is_open() ? Status::Ok() : IoError("distributed export: cannot open " + name);
  }
  HeldPart() = default;
  HeldPart(const HeldPart&) = delete;
  HeldPart& operator=(const HeldPart&) = delete;
  ~HeldPart() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  std::iostream& stream() { return file_; }
  const std::string& name() const { return name_; }

  // Writes the held bytes [0, bytes) into `out` (the output `output`, being written by the first
  // process, which skips over them) at `offset`: in the kernel where it can (copy_file_range), else
  // read and written in pieces.
  // Closes `out`.
  Status CopyInto(int out, const std::string& output, uint64_t offset, uint64_t bytes) {
    Status st = Copy(out, offset, bytes, output);
    if (::close(out) != 0 && st.ok()) {
      st = CopyFailed(output, errno);
    }
    return st;
  }

 private:
  // The output, not the held part, is what a full disk or the file-size limit stops.
  Status CopyFailed(const std::string& output, int err) const {
    const bool room = err == ENOSPC || err == EFBIG || err == EDQUOT;
    return IoError(output + ": write failed" + (room ? " (disk full, or past the file-size limit?)" : "") +
                   " while copying " + name_ + " into it: " + std::strerror(err));
  }

  Status Copy(int out, uint64_t offset, uint64_t bytes, const std::string& output) {
    auto in_at = static_cast<off_t>(0), out_at = static_cast<off_t>(offset);
    bool kernel = true;
    std::string piece;
    for (uint64_t left = bytes; left > 0;) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(left, kChunk));
      ssize_t n = -1;
      if (kernel) {
        n = ::copy_file_range(fd_, &in_at, out, &out_at, want, 0);
        if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
          kernel = false;  // another file system, or an old kernel: through this process instead
          continue;
        }
      } else {
        piece.resize(want);
        n = ::pread(fd_, piece.data(), want, in_at);
        for (ssize_t done = 0; n > 0 && done < n;) {  // a short write goes on where it stopped
          const ssize_t w = ::pwrite(out, piece.data() + done, static_cast<size_t>(n - done), out_at + done);
          if (w < 0 && errno == EINTR) {
            continue;
          }
          if (w <= 0) {
            return CopyFailed(output, w < 0 ? errno : EIO);
          }
          done += w;
        }
        if (n > 0) {
          in_at += n;
          out_at += n;
        }
      }
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        return n < 0 ? CopyFailed(output, errno)
                     : IoError(output + ": copying " + name_ + " into it failed: the held part ended early");
      }
      left -= static_cast<uint64_t>(n);
    }
    return Status::Ok();
  }

  std::fstream file_;
  std::string name_;
  int fd_ = -1;
};

// The first process: puts the later blocks, in order, into the trace being written; a block that
// failed is drained like the others (its process waits for that) and its error returned.
// When the output is a regular file (`file`, the path being written), each later process that
// finds that very file on this machine writes its block into it itself, at the offset the first
// gives it, all at once, and the first skips over them. The others' bytes (and every block on
// stdout, a pipe or a device) the first takes and writes.
class LaterParts {
 public:
  LaterParts(AnalysisWorld& world, const std::string& file, std::string output)
      : world_(world),
        taken_(static_cast<size_t>(world.size()), false),
        file_(AbsolutePath(file)),
        output_(std::move(output)) {
    struct stat st {};
    if (!file_.empty() && ::stat(file_.c_str(), &st) == 0) {
      file_id_ = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
    }
  }

  Status Append(TraceSink& sink, TraceExportStats& stats) {
    COMMPROF_LOG_INFO("export process 0: own block written after %.3f s", Seconds());
    Status first_error;
    std::vector<int> placing;  // processes writing their block into the file now
    for (int q = 1; q < world_.size(); ++q) {
      TraceExportStats s;
      uint64_t bytes = 0;
      // After a failed block the later ones are taken and dropped: one process would have stopped.
      const bool keep = first_error.ok();
      const Status st =
          keep && !file_.empty() ? Place(q, sink, s, bytes, placing) : Take(q, keep ? &sink : nullptr, s, bytes);
      if (!st.ok() && first_error.ok()) {
        first_error = st;
      }
      if (st.ok() && first_error.ok()) {
        AddFigures(stats, s);
      }
    }
    // Every block placed is waited for (its process writes into the file until it answers); the
    // first failure in rank order is the export's, as one process would have stopped there.
    for (int q : placing) {
      TraceExportStats ignored;
      uint64_t none = 0;
      const Status st = DecodeFigures(kPlacedKind, world_.Receive(q, kTagPlaced), ignored, none);
      if (!st.ok() && first_error.ok()) {
        first_error = st;
      }
    }
    if (!placing.empty()) {
      COMMPROF_LOG_INFO("export process 0: %zu later block(s) written in place after %.3f s", placing.size(),
                        Seconds());
    }
    return first_error;
  }
  // Whatever the trace did not take (it failed before the later blocks), taken and dropped.
  void Drain() {
    for (int q = 1; q < world_.size(); ++q) {
      TraceExportStats s;
      uint64_t bytes = 0;
      (void)Take(q, nullptr, s, bytes);
    }
  }

 private:
  // Block q's figures; when it has bytes, tells its process where in the file to write them (the
  // end of what the trace holds so far) and moves the trace past them.
  Status Place(int q, TraceSink& sink, TraceExportStats& s, uint64_t& bytes, std::vector<int>& placing) {
    taken_[static_cast<size_t>(q)] = true;
    Status st = DecodeFigures(kInfoKind, world_.Receive(q, kTagPartInfo), s, bytes);
    if (!st.ok() || bytes == 0) {
      return st;  // a failed or empty block sends no bytes
    }
    // After a failed write the offset says "none": q then sends its block to be dropped.
    const bool flushed = sink.Flush();
    world_.SendAtOnce(q, kTagReady, EncodePlace(flushed ? sink.bytes() : UINT64_MAX));
    if (world_.ReceiveAtOnce(q, kTagCanPlace) == "1") {
      placing.push_back(q);
      return sink.Skip(bytes) ? Status::Ok() : sink.Error();
    }
    // q does not see this file (another machine, or another file under that name there): its
    // bytes come through this process, as on stdout.
    const Status streamed = Stream(q, flushed ? &sink : nullptr, bytes);
    return flushed ? streamed : sink.Error();
  }
  // Where q's block goes: the offset, the file (absolute, as this process reached it) and what
  // makes it this very file: this machine's clock domain (a boot id) and the file's device and inode.
  std::string EncodePlace(uint64_t offset) const {
    PartWriter w;
    w.Put(file_id_ ? offset : UINT64_MAX);
    w.PutString(file_);
    w.PutString(output_);
    w.Put(SystemClockDomain());
    w.Put(file_id_ ? file_id_->first : 0);
    w.Put(file_id_ ? file_id_->second : 0);
    return w.Take();
  }

  Status Take(int q, TraceSink* sink, TraceExportStats& s, uint64_t& bytes) {
    if (taken_[static_cast<size_t>(q)]) {
      return Status::Ok();
    }
    taken_[static_cast<size_t>(q)] = true;
    Status st = DecodeFigures(kInfoKind, world_.Receive(q, kTagPartInfo), s, bytes);
    if (!st.ok() || bytes == 0) {
      return st;  // a failed or empty block sends no bytes
    }
    return Stream(q, sink, bytes);
  }
  // Block q's `bytes`, through this process into `sink` (null: taken and dropped).
  Status Stream(int q, TraceSink* sink, uint64_t bytes) {
    Status st;
    // The block's process waits (politely) for this word, then both move its bytes at full speed.
    world_.SendAtOnce(q, kTagReady, std::string());
    for (uint64_t got = 0; got < bytes;) {
      const std::string chunk = world_.ReceiveAtOnce(q, kTagPartBytes);
      if (chunk.empty()) {  // its held file could not be read back: why follows
        TraceExportStats ignored;
        uint64_t none = 0;
        const Status why = DecodeFigures(kInfoKind, world_.ReceiveAtOnce(q, kTagPartInfo), ignored, none);
        return why.ok() ? Internal("distributed export: process " + std::to_string(q) + " sent less of its part") : why;
      }
      got += chunk.size();
      if (sink != nullptr && st.ok() && !sink->WriteThrough(chunk)) {
        st = sink->Error();
      }
    }
    return st;
  }

  AnalysisWorld& world_;
  std::vector<bool> taken_;
  std::string file_;    // the output being written, when it is a regular file; else empty
  std::string output_;  // the output as the user named it, for messages
  std::optional<std::pair<uint64_t, uint64_t>> file_id_;  // file_'s device and inode, once stat'ed
};

// Before any block is written: every process tells the first whether its walk got there (the
// instance table read, its held file open), and the first tells every process whether all did. A
// block is written only when every block can be (on stdout the trace cannot be taken back); when
// one cannot, the first reports the lowest block's error, as one process would have stopped there.
// Each process runs it once: from its walk, before it writes, or after a walk that failed before
// getting there (the others wait for every process's word). No layout crosses: each process
// numbers its block from its own read of the file (TracePart).
class StartGate {
 public:
  explicit StartGate(AnalysisWorld& world) : world_(world) {}

  Status Run(const Status& mine) {
    if (!done_) {
      COMMPROF_LOG_INFO("export process %d: ready to write after %.3f s", world_.rank(), Seconds());
      done_ = true;
      answer_ = world_.first() ? Gather(mine) : Ask(mine);
    }
    return answer_;
  }
  bool done() const { return done_; }
  bool go() const { return go_; }

 private:
  Status Gather(const Status& mine) {
    Status first_error = mine;
    for (int q = 1; q < world_.size(); ++q) {
      TraceExportStats ignored;
      uint64_t none = 0;
      const Status st = DecodeFigures(kReadyKind, world_.Receive(q, kTagCanWrite), ignored, none);
      if (!st.ok() && first_error.ok()) {
        first_error = st;
      }
    }
    go_ = first_error.ok();
    (void)world_.TextFromFirst(go_ ? "1" : "0");
    return first_error;
  }

  Status Ask(const Status& mine) {
    world_.Send(0, kTagCanWrite, EncodeFigures(kReadyKind, mine, TraceExportStats{}, 0));
    const std::string go = world_.TextFromFirst(std::string());
    world_.FinishSends();
    if (go != "0" && go != "1") {
      go_ = true;  // the first waits for this block: it gets the error instead
      return Malformed();
    }
    go_ = go == "1";
    return go_ ? Status::Ok() : Internal("distributed export: ended by the first process (a block failed)");
  }

  AnalysisWorld& world_;
  bool done_ = false;
  bool go_ = false;
  Status answer_;
};

// A later process: its block's trace into a held file, then to the first in pieces once the first
// asks for them (so no more than one piece is in memory).
Status WriteLaterPart(AnalysisWorld& world, const ProfileReader& reader, TraceExportOptions opts, TraceFormat format) {
  const auto [first, last] = BlockOfProcess(ExportedRanks(reader, opts), world.rank(), world.size());
  StartGate gate(world);
  TraceExportStats stats;
  HeldPart held;
  Status st = Status::Ok();
  if (first < last) {
    st = held.Open(world.rank());
    if (st.ok()) {
      opts.part = TracePart{first, last, false, false, [&gate] { return gate.Run(Status::Ok()); }};
      opts.progress = nullptr;
      opts.output_name = held.name();  // a full TMPDIR is named as such, not as the output
      st = WriteTrace(format, reader, held.stream(), opts, &stats);
    }
  }
  if (!gate.done()) {
    (void)gate.Run(st);
  }
  if (!gate.go()) {
    return st;  // a block failed: the first reports it, and takes no block
  }
  if (st.ok() && first < last && !held.stream().flush()) {  // its last bytes may fail only now
    st = IoError(held.name() + ": write failed (disk full, or past the file-size limit?)");
  }
  const uint64_t bytes = st.ok() && first < last ? static_cast<uint64_t>(held.stream().tellp()) : 0;
  COMMPROF_LOG_INFO("export process %d: ranks %zu-%zu written (%llu bytes held) after %.3f s", world.rank(), first,
                    last, static_cast<unsigned long long>(bytes), Seconds());
  world.Send(0, kTagPartInfo, EncodeFigures(kInfoKind, st, stats, bytes));
  world.FinishSends();
  if (bytes > 0) {
    std::string where = world.Receive(0, kTagReady);
    if (!where.empty()) {  // the output is a file: into it at the offset given, if this process sees it
      std::string output;
      uint64_t offset = 0;
      const int out = OpenTheSameFile(where, output, offset);
      world.SendAtOnce(0, kTagCanPlace, out >= 0 ? "1" : "0");
      if (out >= 0) {
        const Status placed = held.CopyInto(out, output, offset, bytes);
        world.SendAtOnce(0, kTagPlaced, EncodeFigures(kPlacedKind, placed, {}, 0));
        COMMPROF_LOG_INFO("export process %d: block written into the output after %.3f s", world.rank(), Seconds());
        return placed.ok() ? st : placed;
      }
      where = world.Receive(0, kTagReady);  // the first takes the bytes instead: its word follows
    }
    held.stream().seekg(0);
    std::string chunk(kChunk, '\0');
    for (uint64_t left = bytes; left > 0;) {
      const auto n = static_cast<std::streamsize>(std::min<uint64_t>(left, kChunk));
      held.stream().read(chunk.data(), n);
      if (held.stream().gcount() != n) {
        // The first is still owed the bytes it was promised: an empty piece, then why.
        Status why = IoError(held.name() + ": could not be read back");
        world.SendAtOnce(0, kTagPartBytes, std::string());
        world.SendAtOnce(0, kTagPartInfo, EncodeFigures(kInfoKind, why, {}, 0));
        return why;
      }
      world.SendAtOnce(0, kTagPartBytes, chunk.substr(0, static_cast<size_t>(n)));
      left -= static_cast<uint64_t>(n);
    }
    COMMPROF_LOG_INFO("export process %d: block taken by the first after %.3f s", world.rank(), Seconds());
  }
  return st;
}

}  // namespace

Status WriteTrace(TraceFormat format, const ProfileReader& reader, std::ostream& out, const TraceExportOptions& opts,
                  TraceExportStats* stats) {
  return format == TraceFormat::kPerfetto ? WritePerfettoTrace(reader, out, opts, stats)
                                          : WriteChromeTrace(reader, out, opts, stats);
}

Status WriteTraceTogether(AnalysisWorld& world, const ProfileReader& reader, const TraceExportOptions& opts,
                          TraceFormat format, const std::string& output, TraceExportStats& stats) {
  (void)Seconds();
  if (!world.first()) {
    return WriteLaterPart(world, reader, opts, format);
  }
  StartGate gate(world);
  TraceExportOptions mine = opts;
  const auto [first, last] = BlockOfProcess(ExportedRanks(reader, opts), 0, world.size());
  mine.part = TracePart{first, last, true, true, [&gate] { return gate.Run(Status::Ok()); }};
  mine.progress = nullptr;
  std::optional<LaterParts> later;
  Status st = WriteOutputFile(output, [&](std::ostream& out, const std::string& file) {
    later.emplace(world, file, opts.output_name);
    mine.append_later_parts = [&later](TraceSink& sink, TraceExportStats& s) { return later->Append(sink, s); };
    return WriteTrace(format, reader, out, mine, &stats);
  });
  if (!later) {
    later.emplace(world, std::string(), opts.output_name);  // no output was created: the blocks are dropped
  }
  if (!gate.done()) {  // the walk failed before it: the others are told not to write
    (void)gate.Run(st.ok() ? Internal("distributed export: no trace was written") : st);
  }
  if (gate.go()) {
    later->Drain();
  }
  return st;
}

}  // namespace commprof::cli
