// The HDF5 writer under the aggregator's streaming pattern: RANKS ranks, each sending events
// frames of BATCH records, appended round-robin as frames arrive, with a flush every 100 rounds
// (the aggregator flushes every --flush-ms). Prints the writing process's CPU time per event, the
// bytes per event on disk, and the time a plain write() of the same bytes takes.
//   commprof_bench_writer RANKS EVENTS BATCH OUT.h5 [CODEC [FROM.h5]]
// CODEC: lz4 (default), deflate[:N] or none (docs/file-format.md#compression). FROM.h5: replay the
// events of a recorded file (its ranks' tables, cycled and shifted in time), so that the codec
// sees real records; without it the records are synthetic and compress unrealistically well.
// bench/README.md (Writer chunk size, Compression) has the figures.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"
#include "core/h5/h5_util.h"

namespace {

using namespace commprof;

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double WallSeconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Every rank's events table of a commprof file, in rank order (ranks without one skipped).
std::vector<std::vector<commprof_event>> ReadRecorded(const char* path) {
  std::vector<std::vector<commprof_event>> out;
  h5::QuietErrors();
  h5::Handle f(H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) {
    return out;
  }
  for (uint32_t r = 0;; ++r) {
    std::string name = "/ranks/" + std::to_string(r) + "/events";
    if (H5Lexists(f.get(), "/ranks", H5P_DEFAULT) <= 0) {
      break;
    }
    std::string group = "/ranks/" + std::to_string(r);
    if (H5Lexists(f.get(), group.c_str(), H5P_DEFAULT) <= 0) {
      break;
    }
    if (H5Lexists(f.get(), name.c_str(), H5P_DEFAULT) <= 0) {
      continue;
    }
    h5::Handle d(H5Dopen2(f.get(), name.c_str(), H5P_DEFAULT));
    h5::Handle space(H5Dget_space(d.get()));
    hssize_t n = H5Sget_simple_extent_npoints(space.get());
    if (n <= 0) {
      continue;
    }
    std::vector<commprof_event> ev(static_cast<size_t>(n));
    if (H5Dread(d.get(), h5::EventType(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ev.data()) < 0) {
      return {};
    }
    out.push_back(std::move(ev));
  }
  return out;
}

// The frames the bench appends, round after round: rank r's k-th frame is BATCH records taken
// from source table r % sources at position k * BATCH (cycling), shifted by the table's span per
// cycle so that times keep rising as in a longer run.
class FrameSource {
 public:
  FrameSource(std::vector<std::vector<commprof_event>> tables, size_t batch)
      : tables_(std::move(tables)), batch_(batch), frame_(batch) {
    if (tables_.empty()) {  // synthetic: the same ascending records
      std::vector<commprof_event> ev(batch);
      for (size_t i = 0; i < batch; ++i) {
        ev[i].seq = i;
        ev[i].start_ns = 10 * i;
        ev[i].end_ns = 10 * i + 5;
      }
      tables_.push_back(std::move(ev));
    }
  }
  const std::vector<commprof_event>& Frame(uint32_t rank, uint64_t k) {
    const auto& t = tables_[rank % tables_.size()];
    const uint64_t span = t.back().end_ns - t.front().start_ns + 1;
    for (size_t i = 0; i < batch_; ++i) {
      const uint64_t at = k * batch_ + i;
      const uint64_t shift = (at / t.size()) * span;
      frame_[i] = t[at % t.size()];
      frame_[i].start_ns += shift;
      frame_[i].end_ns += shift;
    }
    return frame_;
  }

 private:
  std::vector<std::vector<commprof_event>> tables_;
  size_t batch_;
  std::vector<commprof_event> frame_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || argc > 7) {
    std::fprintf(stderr, "usage: %s RANKS EVENTS BATCH OUT.h5 [CODEC [FROM.h5]]\n", argv[0]);
    return 2;
  }
  const uint32_t ranks = static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10));
  const uint64_t total = std::strtoull(argv[2], nullptr, 10);
  const size_t batch = std::strtoull(argv[3], nullptr, 10);
  const std::string out = argv[4];
  if (ranks == 0 || batch == 0) {
    std::fprintf(stderr, "RANKS and BATCH must be positive\n");
    return 2;
  }
  auto options = ParseCompression(argc > 5 ? argv[5] : "lz4");
  if (!options) {
    std::fprintf(stderr, "CODEC must be lz4, deflate, deflate:N or none\n");
    return 2;
  }
  std::vector<std::vector<commprof_event>> recorded;
  if (argc > 6) {
    recorded = ReadRecorded(argv[6]);
    if (recorded.empty()) {
      std::fprintf(stderr, "%s: no events tables read\n", argv[6]);
      return 1;
    }
  }
  FrameSource frames(std::move(recorded), batch);

  // The baseline: the same frames' bytes written with plain write() calls, one per frame.
  double plain_wall = 0;
  {
    const std::string raw = out + ".raw";
    int fd = ::open(raw.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
      std::perror(raw.c_str());
      return 1;
    }
    const double t0 = WallSeconds();
    uint64_t done = 0;
    for (uint64_t round = 0; done < total; ++round) {
      for (uint32_t r = 0; r < ranks && done < total; ++r) {
        const auto& f = frames.Frame(r, round);
        if (::write(fd, f.data(), f.size() * sizeof(commprof_event)) < 0) {
          std::perror(raw.c_str());
          return 1;
        }
        done += batch;
      }
    }
    ::close(fd);
    plain_wall = WallSeconds() - t0;
    std::filesystem::remove(raw);
  }

  auto created = Hdf5Writer::Create(out, JobMeta{"bench", "commprof_bench_writer", ranks, 0}, *options);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().message().c_str());
    return 1;
  }
  Hdf5Writer& w = *created.value();
  for (uint32_t r = 0; r < ranks; ++r) {
    RankDescription d;
    d.rank = r;
    d.world_size = ranks;
    if (Status st = w.OpenRank(d); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 1;
    }
  }
  const double cpu0 = CpuSeconds();
  const double wall0 = WallSeconds();
  uint64_t done = 0;
  for (uint64_t round = 0; done < total; ++round) {
    for (uint32_t r = 0; r < ranks && done < total; ++r) {
      if (Status st = w.AppendEvents(r, frames.Frame(r, round)); !st.ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
      }
      done += batch;
    }
    if ((round + 1) % 100 == 0 && !w.Flush().ok()) {
      return 1;
    }
  }
  if (Status st = w.Finalize(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  const double cpu = CpuSeconds() - cpu0;
  const double wall = WallSeconds() - wall0;
  const auto bytes = std::filesystem::file_size(out);
  // The frame copying is part of both timings (the plain write() loop builds the same frames).
  std::printf(
      "%u ranks, %llu events in frames of %zu, %s: wall %.3f s, cpu %.3f s, %.2f M events/s of cpu, "
      "%.1f bytes/event on disk; plain write() of the same bytes: %.3f s (writer at %.0f %% of it)\n",
      ranks, static_cast<unsigned long long>(done), batch, argc > 5 ? argv[5] : "lz4", wall, cpu,
      static_cast<double>(done) / cpu / 1e6, static_cast<double>(bytes) / static_cast<double>(done), plain_wall,
      100.0 * plain_wall / wall);
  return 0;
}
