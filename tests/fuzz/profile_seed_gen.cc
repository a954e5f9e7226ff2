// Writes the seed corpus of profile_reader_fuzz: small real commprof files, written by the
// aggregator's Hdf5Writer, so the seeds follow the writer whenever the file format changes.
//
//   profile_seed_gen OUTDIR
//
// Files (the writer's default compression, shuffle + LZ4, so the fuzzer mutates LZ4 chunks too):
//   one_rank.h5     one rank, three events, a string table, complete;
//   two_ranks.h5    two ranks with clock points and counters, one of them disconnected;
//   empty_rank.h5   one rank that recorded nothing.
// Every file is opened with ProfileReader before the program exits 0: a seed the reader refuses
// would be a useless seed, so that is an error (exit 1), and so is an unwritable OUTDIR.
//
// tests/fuzz/corpus_h5/ holds the minimised corpus that grew from these seeds.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"
#include "analysis/load/profile_reader.h"

namespace {

using namespace commprof;

commprof_event Event(uint8_t kind, uint8_t subtype, int64_t start, int64_t dur, uint64_t bytes, uint32_t name) {
  commprof_event e{};
  e.kind = kind;
  e.subtype = subtype;
  e.start_ns = start;
  e.end_ns = start + dur;
  e.bytes = bytes;
  e.comm_id = COMMPROF_COMM_WORLD_ID;
  e.peer = COMMPROF_NO_PEER;
  e.device = COMMPROF_HOST_DEVICE;
  e.name_id = name;
  return e;
}

struct SeedRank {
  std::vector<commprof_event> events;
  std::vector<std::string> strings;
  std::vector<ClockPoint> points;
  RankEnd end = RankEnd::kComplete;
};

bool Write(const std::filesystem::path& path, const std::vector<SeedRank>& ranks) {
  JobMeta meta;
  meta.job_id = "fuzz-seed";
  meta.command_line = "mpirun -np " + std::to_string(ranks.size()) + " ./app";
  meta.world_size = static_cast<uint32_t>(ranks.size());
  meta.start_epoch_ns = 1756135989000000000ull;
  auto w = Hdf5Writer::Create(path.string(), meta, WriterOptions{});
  if (!w.ok()) {
    std::fprintf(stderr, "profile_seed_gen: %s\n", w.status().message().c_str());
    return false;
  }
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    RankDescription d;
    d.rank = r;
    d.world_size = meta.world_size;
    d.pid = 100 + r;
    d.host = "node" + std::to_string(r);
    d.start_steady_ns = 1000;
    d.start_utc_ns = meta.start_epoch_ns;
    Status st = w.value()->OpenRank(d);
    if (st.ok() && !ranks[r].strings.empty()) st = w.value()->AppendStrings(r, StringBatch{0, ranks[r].strings});
    if (st.ok() && !ranks[r].events.empty()) st = w.value()->AppendEvents(r, ranks[r].events);
    if (st.ok() && !ranks[r].points.empty()) {
      ClockModel m(ranks[r].points);
      RankClock c;
      c.points = ranks[r].points;
      c.offset_ns = m.OffsetAt(0);
      c.drift_ppm = m.DriftPpm();
      c.error_bound_ns = m.ErrorBoundNs();
      c.method = r == 0 ? "mpi-reference" : "mpi-pingpong";
      st = w.value()->SetClock(r, c);
    }
    if (st.ok()) {
      st = w.value()->CloseRank(r, ranks[r].end, {{"events_recorded", ranks[r].events.size()}, {"dropped_events", 0}},
                                0, ranks[r].end == RankEnd::kComplete ? "bye" : "connection lost");
    }
    if (!st.ok()) {
      std::fprintf(stderr, "profile_seed_gen: %s: %s\n", path.c_str(), st.message().c_str());
      return false;
    }
  }
  Status fin = w.value()->Finalize();
  if (!fin.ok()) {
    std::fprintf(stderr, "profile_seed_gen: %s: %s\n", path.c_str(), fin.message().c_str());
    return false;
  }
  auto rd = ProfileReader::Open(path.string());
  if (!rd.ok() || rd.value()->info().ranks.size() != ranks.size()) {
    std::fprintf(stderr, "profile_seed_gen: %s: the reader refuses the seed: %s\n", path.c_str(),
                 rd.ok() ? "rank count" : rd.status().message().c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: profile_seed_gen OUTDIR\n");
    return 2;
  }
  std::filesystem::path out = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) {
    std::fprintf(stderr, "profile_seed_gen: cannot create %s: %s\n", out.c_str(), ec.message().c_str());
    return 1;
  }
  SeedRank one;
  one.strings = {"MPI_Allreduce", "MPI_Send", "main"};
  one.events = {Event(COMMPROF_KIND_MPI_COLLECTIVE, COMMPROF_OP_ALLREDUCE, 1000, 500, 4096, 0),
                Event(COMMPROF_KIND_MPI_P2P, COMMPROF_OP_SEND, 2000, 100, 64, 1),
                Event(COMMPROF_KIND_MPI_COLLECTIVE, COMMPROF_OP_BARRIER, 3000, 50, 0, 0)};
  SeedRank r0 = one, r1 = one;
  r0.points = {{0, 0, 10}, {1000000, 5, 12}};
  r1.points = {{0, -2500, 40}, {1000000, -2490, 35}};
  r1.end = RankEnd::kDisconnected;
  r1.events.pop_back();
  SeedRank empty;
  bool ok = Write(out / "one_rank.h5", {one}) && Write(out / "two_ranks.h5", {r0, r1}) &&
            Write(out / "empty_rank.h5", {empty});
  return ok ? 0 : 1;
}
