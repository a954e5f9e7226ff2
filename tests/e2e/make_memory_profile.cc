// make_memory_profile OUT.h5 [--ranks N] [--churn K] [--hostile] [--no-memory] [--bare R]: a commprof file
// with a planted allocation pattern, written through the project's writer (Hdf5Writer), for the
// memory timeline's CLI and browser tests (memory_timeline_cli.py, tests/browser/
// check_memory_timeline.py), which state the same truth in Python.
//
// The truth, on the aligned clock (rank r's own clock reads r x 50 us behind: alignment matters):
//   every rank: 4096 B of DEVICE_STATIC memory named NAME at 1 ms, never freed; a free of an
//     address never allocated at 2 ms (changes nothing);
//   rank r: (r % 4 + 1) GiB at (5 + 3r) ms, freed 3 ms later; DEVICE memory, except rank 1 whose
//     block is PINNED (another category, and a later peak). Its peak: (r % 4 + 1) GiB + 4096 B at
//     (5 + 3r) ms, live then: the big block, then the static one;
//   --churn K: K blocks of 1 MiB per rank, the i-th at 10 + 3N + i x 10 / K ms, each freed 50 us
//     later (after every big block is freed: the peaks stay where they are, the charts get records
//     enough to be downsampled);
//   one capture window (WINDOW, K = 0) per rank from 0 to 6.5 ms.
// NAME is "static_weights", or with --hostile markup meant to break out of the page.
// --no-memory: the same ranks with one MPI_Barrier each and no allocation record.
// --bare R (repeatable): rank R alone is so, next to ranks with records.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"
#include "commprof/event.h"
#include "core/clock_model.h"

namespace commprof {
namespace {

constexpr int64_t kMs = 1'000'000, kUs = 1'000;
constexpr uint8_t kPinned = 2, kDevice = 3, kDeviceStatic = 6;  // CUpti_ActivityMemoryKind
constexpr const char* kHostileName = "<img src=x onerror=alert(1)></script><script>alert(2)</script>&amp;";

commprof_event Mem(bool alloc, int64_t t, uint64_t address, uint64_t bytes, uint8_t kind, uint32_t name = 0) {
  commprof_event e{};
  e.kind = alloc ? COMMPROF_KIND_MEM_ALLOC : COMMPROF_KIND_MEM_FREE;
  e.start_ns = e.end_ns = static_cast<uint64_t>(t);
  e.seq = address;
  e.bytes = bytes;
  e.subtype = kind;
  e.name_id = name;
  e.thread_id = 0xFFFFFFFFu;
  e.peer = COMMPROF_NO_PEER;
  return e;
}

int Run(const std::string& out, uint32_t ranks, uint32_t churn, bool hostile, bool no_memory,
        const std::vector<uint32_t>& bare) {
  JobMeta meta;
  meta.job_id = hostile ? std::string("mem<b>job</b>") : std::string("memjob");
  meta.world_size = ranks;
  auto w = Hdf5Writer::Create(out, meta, WriterOptions{});
  if (!w.ok()) {
    std::fprintf(stderr, "make_memory_profile: %s\n", w.status().message().c_str());
    return 1;
  }
  for (uint32_t r = 0; r < ranks; ++r) {
    const int64_t behind = static_cast<int64_t>(r) * 50 * kUs;  // local = aligned - behind
    RankDescription h;
    h.rank = r;
    h.world_size = ranks;
    h.pid = 1000 + r;
    h.host = "node" + std::to_string(r / 8);
    Status st = w.value()->OpenRank(h);
    if (st.ok()) {
      st = w.value()->AppendStrings(r, StringBatch{0, {"", hostile ? kHostileName : "static_weights", "window"}});
    }
    std::vector<commprof_event> ev;
    commprof_event win{};
    win.kind = COMMPROF_KIND_WINDOW;
    win.subtype = 2;
    win.start_ns = 0;
    win.end_ns = static_cast<uint64_t>(6 * kMs + kMs / 2 - behind);
    win.name_id = 2;
    win.peer = COMMPROF_NO_PEER;
    win.device = COMMPROF_HOST_DEVICE;
    if (no_memory || std::find(bare.begin(), bare.end(), r) != bare.end()) {
      commprof_event b{};
      b.kind = COMMPROF_KIND_MPI_COLLECTIVE;
      b.subtype = COMMPROF_OP_BARRIER;
      b.comm_id = COMMPROF_COMM_WORLD_ID;
      b.start_ns = static_cast<uint64_t>(kMs);
      b.end_ns = static_cast<uint64_t>(2 * kMs);
      b.peer = COMMPROF_NO_PEER;
      b.device = COMMPROF_HOST_DEVICE;
      ev.push_back(b);
    } else {
      auto local = [&](int64_t aligned) { return aligned - behind; };
      ev.push_back(Mem(true, local(1 * kMs), 0x100, 4096, kDeviceStatic, 1));
      ev.push_back(Mem(false, local(2 * kMs), 0xDEAD, 1 << 20, kDevice));
      const int64_t t = (5 + 3 * static_cast<int64_t>(r)) * kMs;
      const uint64_t big = (r % 4 + 1) * (1ull << 30);
      const uint8_t kind = r == 1 ? kPinned : kDevice;
      ev.push_back(Mem(true, local(t), 0x7f0000000000ull, big, kind));
      ev.push_back(Mem(false, local(t + 3 * kMs), 0x7f0000000000ull, big, kind));
      const int64_t churn_start = (10 + 3 * static_cast<int64_t>(ranks)) * kMs;
      for (uint32_t i = 0; i < churn; ++i) {
        const int64_t at = churn_start + static_cast<int64_t>(i) * 10 * kMs / churn;
        ev.push_back(Mem(true, local(at), 0x200000 + i, 1 << 20, kDevice));
        ev.push_back(Mem(false, local(at + 50 * kUs), 0x200000 + i, 1 << 20, kDevice));
      }
    }
    ev.push_back(win);
    if (st.ok()) {
      st = w.value()->AppendEvents(r, ev);
    }
    if (st.ok() && behind != 0) {
      RankClock c;
      c.points = {ClockPoint{0, behind, 10}};
      c.anchor_local_ns = 0;
      c.offset_ns = behind;
      c.error_bound_ns = 10;
      c.method = "mpi-pingpong";
      st = w.value()->SetClock(r, c);
    }
    if (st.ok()) {
      st = w.value()->CloseRank(r, RankEnd::kComplete, {}, 0, "bye");
    }
    if (!st.ok()) {
      std::fprintf(stderr, "make_memory_profile: rank %u: %s\n", r, st.message().c_str());
      return 1;
    }
  }
  const Status fin = w.value()->Finalize();
  if (!fin.ok()) {
    std::fprintf(stderr, "make_memory_profile: %s\n", fin.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace commprof

int main(int argc, char** argv) {
  CLI::App app("Writes a commprof file with a planted allocation pattern (see the source's header).");
  std::string out;
  uint32_t ranks = 4, churn = 0;
  bool hostile = false, no_memory = false;
  std::vector<uint32_t> bare;
  app.add_option("out", out, "output .h5")->required();
  app.add_option("--ranks", ranks, "number of ranks")->check(CLI::Range(1, 4096));
  app.add_option("--churn", churn, "small alloc/free pairs per rank after the peaks");
  app.add_flag("--hostile", hostile, "name the static block (and the job) with markup");
  app.add_flag("--no-memory", no_memory, "no allocation record at all");
  app.add_option("--bare", bare, "this rank has no allocation record (repeatable)");
  CLI11_PARSE(app, argc, argv);
  return commprof::Run(out, ranks, churn, hostile, no_memory, bare);
}
