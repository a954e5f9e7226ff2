// The HDF5 writer under the aggregator's streaming pattern: RANKS ranks, each sending events
// frames of BATCH records, appended round-robin as frames arrive, with a flush every 100 rounds
// (the aggregator flushes every --flush-ms). Prints the writing process's CPU time per event.
//   commprof_bench_writer RANKS EVENTS BATCH OUT.h5
// bench/README.md (Writer chunk size) has the figures that chose schema::kEventChunk.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"

namespace {

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

}  // namespace

int main(int argc, char** argv) {
  using namespace commprof;
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s RANKS EVENTS BATCH OUT.h5\n", argv[0]);
    return 2;
  }
  const uint32_t ranks = static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10));
  const uint64_t total = std::strtoull(argv[2], nullptr, 10);
  const size_t batch = std::strtoull(argv[3], nullptr, 10);
  if (ranks == 0 || batch == 0) {
    std::fprintf(stderr, "RANKS and BATCH must be positive\n");
    return 2;
  }
  auto created = Hdf5Writer::Create(argv[4], JobMeta{"bench", "commprof_bench_writer", ranks, 0}, WriterOptions{});
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
  std::vector<commprof_event> ev(batch);
  for (size_t i = 0; i < batch; ++i) {
    ev[i].seq = i;
    ev[i].start_ns = 10 * i;
    ev[i].end_ns = 10 * i + 5;
  }
  const double cpu0 = CpuSeconds();
  const double wall0 = WallSeconds();
  uint64_t done = 0;
  for (uint64_t round = 1; done < total; ++round) {
    for (uint32_t r = 0; r < ranks && done < total; ++r) {
      if (Status st = w.AppendEvents(r, ev); !st.ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
      }
      done += batch;
    }
    if (round % 100 == 0 && !w.Flush().ok()) {
      return 1;
    }
  }
  if (Status st = w.Finalize(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  const double cpu = CpuSeconds() - cpu0;
  const double wall = WallSeconds() - wall0;
  std::printf("%u ranks, %llu events in frames of %zu: wall %.3f s, cpu %.3f s, %.2f M events/s of cpu\n", ranks,
              static_cast<unsigned long long>(done), batch, wall, cpu, static_cast<double>(done) / cpu / 1e6);
  return 0;
}
