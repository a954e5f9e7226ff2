// make_synthetic_profile: writes a valid commprof HDF5 file of any size through the project's own
// writer (aggregator/hdf5/hdf5_writer.h), for the analysis-at-scale benchmark (bench/README.md,
// bench/analysis_scale.sh).
//
// Design. The job is simulated iteration by iteration for all ranks in lockstep on the reference
// time base (rank 0's clock), so every cross-rank rule holds by construction: each blocking
// collective ends after its last arrival (or after its root, for a broadcast), the collectives on a
// communicator are called in the same order with the same per-communicator sequence numbers on
// every member, and a receive ends after its send started. Each event is then put on its rank's
// local clock by inverting a known linear clock model (a per-host offset plus a drift), and that
// model is written as the rank's clock_points, so the analysis' alignment has real work to do and
// undoes it to within a nanosecond of rounding. Events go to the writer in chunks of one HDF5
// chunk per rank: memory is (ranks x chunk), never the file.
//
// One iteration of one rank (15 events; 24 with --gpu):
//   STEP; user ranges forward > layer.0, layer.1 (the forward compute)      4 events
//   MPI_Allreduce, MPI_Bcast (root 0) on MPI_COMM_WORLD                       2
//   MPI_Iallreduce on MPI_COMM_WORLD, issued before the backward compute;
//   an MPI_Test inside it that finds nothing, MPI_Wait after it               3 (Test, Wait, Iallreduce)
//   user range backward                                                       1
//   MPI_Allreduce, MPI_Reduce (root 0) on the rank's half of the world        2 (sub-communicator)
//   MPI_Send to rank+1, MPI_Recv from rank-1 (a ring)                         2
//   MPI_Allgather on MPI_COMM_WORLD                                           1
//   --gpu, device 0: memcpy HtoD, 3 forward + 3 backward compute kernels on stream 7, an
//   allreduce communication kernel on stream 13 overlapping the backward kernels, memcpy DtoH  9
// Before the first iteration: MPI_INIT and the MPI_COMM split event of the two halves; after the
// last: USER_MARK "tail" events up to the exact event count asked for, then MPI_FINALIZE.
//
// --slow-rank K --slow-us U: rank K computes U us longer before every blocking collective it
// enters, so it is the last arriver of each of them (5 of the 7 matched instances of an iteration
// with 2+ ranks per half): a persistent, compute-caused straggler the report must name.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"
#include "commprof/event.h"
#include "core/clock_model.h"
#include "core/wire.h"

namespace commprof {
namespace {

struct Options {
  uint32_t ranks = 64;
  uint64_t events = 1000000;
  std::string out;
  int64_t slow_rank = -1;
  double slow_us = 0;
  double clock_offset_us = 0;
  uint64_t seed = 1;
  bool gpu = false;
  uint32_t ranks_per_node = 8;
  double compute_us = 2000;
};

// splitmix64: small, fast, and the same stream on every platform (std::uniform_* is not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n).
  int64_t Below(int64_t n) { return n <= 0 ? 0 : static_cast<int64_t>(Next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t s_;
};

// The rank's string table: row 0 "" and row 1 "<overflow>" as the collector writes them.
enum Name : uint32_t {
  kNameEmpty = 0,
  kNameOverflow,
  kNameInit,
  kNameFinalize,
  kNameCommSplit,
  kNameAllreduce,
  kNameBcast,
  kNameReduce,
  kNameAllgather,
  kNameIallreduce,
  kNameSend,
  kNameRecv,
  kNameWait,
  kNameTest,
  kNameStep,
  kNameForward,
  kNameLayer0,
  kNameLayer1,
  kNameBackward,
  kNameTail,
  kNameGemmFwd,
  kNameGeluFwd,
  kNameGemmBwd,
  kNameGeluBwd,
  kNameAdamStep,
  kNameNcclAllreduce,
  kNameMemcpyHtoD,
  kNameMemcpyDtoH,
  kNameCount
};
const char* const kNames[kNameCount] = {"",
                                        "<overflow>",
                                        "MPI_Init",
                                        "MPI_Finalize",
                                        "MPI_Comm_split",
                                        "MPI_Allreduce",
                                        "MPI_Bcast",
                                        "MPI_Reduce",
                                        "MPI_Allgather",
                                        "MPI_Iallreduce",
                                        "MPI_Send",
                                        "MPI_Recv",
                                        "MPI_Wait",
                                        "MPI_Test",
                                        "step",
                                        "forward",
                                        "layer.0",
                                        "layer.1",
                                        "backward",
                                        "tail",
                                        "ampere_sgemm_128x64_nn",
                                        "gelu_forward_kernel",
                                        "ampere_sgemm_128x64_nt",
                                        "gelu_backward_kernel",
                                        "multi_tensor_apply_kernel<AdamFunctor>",
                                        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                                        "Memcpy HtoD (Pageable -> Device)",
                                        "Memcpy DtoH (Device -> Pageable)"};

constexpr uint32_t kEventsPerIteration = 15;
constexpr uint32_t kGpuEventsPerIteration = 9;
constexpr uint32_t kFixedEvents = 3;  // MPI_INIT, the MPI_COMM split, MPI_FINALIZE
constexpr uint32_t kMainThread = 0;
constexpr uint32_t kComputeStream = 7;
constexpr uint32_t kCommStream = 13;
constexpr uint32_t kCopyStream = 3;
constexpr int64_t kUs = 1000;
constexpr int64_t kReferenceT0 = 5'000'000'000'000;  // rank 0's CLOCK_MONOTONIC at the start (~83 min uptime)
constexpr uint64_t kEpochStart = 1'767'225'600'000'000'000ull;  // 2026-01-01 UTC, fixed: files are reproducible

// A straight-line clock model of one host: reference = local + offset_ns + drift * (local - anchor).
struct HostClock {
  int64_t offset_ns = 0;
  double drift = 0;  // ppm * 1e-6
  int64_t anchor_local = 0;
  int64_t ToLocal(int64_t ref) const {
    // ref = l + o + k (l - A)  =>  l = A + (ref - o - A) / (1 + k)
    long double l = static_cast<long double>(anchor_local) +
                    static_cast<long double>(ref - offset_ns - anchor_local) / (1.0L + drift);
    return static_cast<int64_t>(std::llround(l));
  }
  int64_t OffsetAt(int64_t local) const {
    return offset_ns + static_cast<int64_t>(std::llround(drift * static_cast<long double>(local - anchor_local)));
  }
};

// Transfer time of a collective moving `bytes`: 5 us latency plus 10 GB/s.
int64_t TransferNs(uint64_t bytes, Rng& rng) { return 5 * kUs + static_cast<int64_t>(bytes / 10) + rng.Below(2 * kUs); }

class Generator {
 public:
  explicit Generator(const Options& o) : o_(o), rng_(o.seed * 0x2545F4914F6CDD1Dull + 17) {}

  int Run(const std::string& command_line);

 private:
  struct RankState {
    int64_t t = 0;  // reference time of the rank's next action
    Rng rng{0};
    std::vector<commprof_event> buf;
    uint64_t written = 0;
    uint32_t correlation = 0;
    int64_t compute_before = 0;  // extra compute of the planted straggler before each collective
  };

  // Event on rank r, times given on the reference clock, stored on the rank's local clock.
  commprof_event& Add(uint32_t r, uint8_t kind, uint32_t name, int64_t ref_start, int64_t ref_end);
  Status FlushRank(uint32_t r, bool force);
  // A blocking collective over ranks [first, first + n): arrivals at each rank's t (plus the
  // straggler's extra compute), ends by the op's rule; advances each member's t past its exit.
  void Blocking(uint32_t first, uint32_t n, uint64_t comm_id, uint64_t seq, uint8_t op, uint32_t name, uint64_t bytes,
                int32_t root);
  void Iteration(uint64_t i);
  uint32_t HalfBase(uint32_t r) const { return r < half_ ? 0 : half_; }
  uint32_t HalfSize(uint32_t r) const { return r < half_ ? half_ : o_.ranks - half_; }
  uint64_t HalfCommId(uint32_t r) const { return (static_cast<uint64_t>(HalfBase(r) + 1) << 32) | 1u; }

  Options o_;
  Rng rng_;
  std::unique_ptr<Hdf5Writer> writer_;
  std::vector<RankState> st_;
  std::vector<HostClock> clocks_;  // per rank (ranks of one host share the values)
  uint32_t half_ = 0;
  size_t chunk_ = 16384;
  uint64_t world_seq_ = 0;
  uint64_t half_seq_ = 0;
  std::vector<int64_t> scratch_;
};

commprof_event& Generator::Add(uint32_t r, uint8_t kind, uint32_t name, int64_t ref_start, int64_t ref_end) {
  RankState& s = st_[r];
  commprof_event& e = s.buf.emplace_back();
  e = commprof_event{};
  e.kind = kind;
  e.name_id = name;
  e.start_ns = static_cast<uint64_t>(clocks_[r].ToLocal(ref_start));
  e.end_ns = std::max(e.start_ns, static_cast<uint64_t>(clocks_[r].ToLocal(ref_end)));
  e.peer = COMMPROF_NO_PEER;
  e.device = COMMPROF_HOST_DEVICE;
  e.thread_id = kMainThread;
  return e;
}

Status Generator::FlushRank(uint32_t r, bool force) {
  RankState& s = st_[r];
  if (s.buf.empty() || (!force && s.buf.size() < chunk_)) return Status::Ok();
  // Whole chunks while streaming (each append fills HDF5 chunks exactly), the rest at the end.
  size_t n = force ? s.buf.size() : chunk_;
  COMMPROF_RETURN_IF_ERROR(writer_->AppendEvents(r, std::span<const commprof_event>(s.buf.data(), n)));
  s.written += n;
  s.buf.erase(s.buf.begin(), s.buf.begin() + static_cast<std::ptrdiff_t>(n));
  return Status::Ok();
}

void Generator::Blocking(uint32_t first, uint32_t n, uint64_t comm_id, uint64_t seq, uint8_t op, uint32_t name,
                         uint64_t bytes, int32_t root) {
  scratch_.resize(n);
  int64_t last = INT64_MIN;
  for (uint32_t k = 0; k < n; ++k) {
    RankState& s = st_[first + k];
    scratch_[k] = s.t + 3 * kUs + s.rng.Below(20 * kUs) + s.compute_before;  // a little host work first
    last = std::max(last, scratch_[k]);
  }
  int64_t root_arrival = root >= 0 ? scratch_[static_cast<size_t>(root)] : 0;
  int64_t transfer = TransferNs(bytes, rng_);
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t r = first + k;
    int64_t a = scratch_[k], end = 0;
    bool is_root = root >= 0 && static_cast<int32_t>(k) == root;
    if (op == COMMPROF_OP_BCAST) {
      end = std::max(a, root_arrival) + transfer;  // non-roots wait for the root, the root for nobody
    } else if (op == COMMPROF_OP_REDUCE) {
      end = is_root ? last + transfer : a + transfer;  // contributors leave, the root waits for all
    } else {
      end = last + transfer;
    }
    end += st_[r].rng.Below(kUs);
    commprof_event& e = Add(r, COMMPROF_KIND_MPI_COLLECTIVE, name, a, end);
    e.subtype = op;
    e.comm_id = comm_id;
    e.seq = seq;
    e.bytes = bytes;
    e.peer = root;
    e.datatype = COMMPROF_DT_FLOAT32;
    e.reduce_op = (op == COMMPROF_OP_ALLREDUCE || op == COMMPROF_OP_REDUCE) ? COMMPROF_RED_SUM : COMMPROF_RED_NONE;
    st_[r].t = end;
  }
}

void Generator::Iteration(uint64_t i) {
  const uint32_t R = o_.ranks;
  const auto compute = static_cast<int64_t>(o_.compute_us * kUs);
  // Forward: step mark, two layers inside a forward range, GPU kernels behind them.
  for (uint32_t r = 0; r < R; ++r) {
    RankState& s = st_[r];
    int64_t t0 = s.t;
    int64_t len = compute + s.rng.Below(compute / 10 + 1);  // 0-10 % jitter
    Add(r, COMMPROF_KIND_STEP, kNameStep, t0, t0).seq = i;
    int64_t mid = t0 + len / 2;
    Add(r, COMMPROF_KIND_USER_RANGE, kNameLayer0, t0 + kUs, mid).seq = 1;
    Add(r, COMMPROF_KIND_USER_RANGE, kNameLayer1, mid, t0 + len - kUs).seq = 1;
    Add(r, COMMPROF_KIND_USER_RANGE, kNameForward, t0, t0 + len);
    if (o_.gpu) {
      auto gpu = [&](uint8_t kind, uint32_t name, uint32_t stream, int64_t a, int64_t b) -> commprof_event& {
        commprof_event& e = Add(r, kind, name, a, b);
        e.device = 0;
        e.thread_id = stream;
        e.correlation = ++s.correlation;
        return e;
      };
      gpu(COMMPROF_KIND_MEMCPY, kNameMemcpyHtoD, kCopyStream, t0 + 2 * kUs, t0 + 40 * kUs).bytes = 8u << 20;
      int64_t k0 = t0 + 45 * kUs, step = (len - 60 * kUs) / 3;
      gpu(COMMPROF_KIND_COMPUTE_KERNEL, kNameGemmFwd, kComputeStream, k0, k0 + step - kUs);
      gpu(COMMPROF_KIND_COMPUTE_KERNEL, kNameGeluFwd, kComputeStream, k0 + step, k0 + 2 * step - kUs);
      gpu(COMMPROF_KIND_COMPUTE_KERNEL, kNameGemmFwd, kComputeStream, k0 + 2 * step, k0 + 3 * step - kUs);
    }
    s.t = t0 + len;
  }
  Blocking(0, R, COMMPROF_COMM_WORLD_ID, world_seq_++, COMMPROF_OP_ALLREDUCE, kNameAllreduce, 1u << 20,
           COMMPROF_NO_PEER);
  Blocking(0, R, COMMPROF_COMM_WORLD_ID, world_seq_++, COMMPROF_OP_BCAST, kNameBcast, 4096, 0);

  // Iallreduce issued before the backward compute, tested inside it, waited for after it.
  const uint64_t iseq = world_seq_++;
  constexpr uint64_t kGradBytes = 16u << 20;
  int64_t last_issue = INT64_MIN;
  scratch_.resize(R);
  for (uint32_t r = 0; r < R; ++r) {
    scratch_[r] = st_[r].t + 2 * kUs;
    last_issue = std::max(last_issue, scratch_[r]);
  }
  const int64_t done = last_issue + TransferNs(kGradBytes, rng_);  // when the reduction is complete everywhere
  for (uint32_t r = 0; r < R; ++r) {
    RankState& s = st_[r];
    int64_t issue = scratch_[r];
    int64_t b0 = issue + 3 * kUs;
    int64_t len = 2 * compute + s.rng.Below(compute / 5 + 1);
    int64_t test_at = b0 + len / 3;
    commprof_event& test = Add(r, COMMPROF_KIND_MPI_WAIT, kNameTest, test_at, test_at + kUs);
    test.subtype = COMMPROF_OP_TEST;
    test.bytes = 1;
    Add(r, COMMPROF_KIND_USER_RANGE, kNameBackward, b0, b0 + len);
    if (o_.gpu) {
      auto gpu = [&](uint8_t kind, uint32_t name, uint32_t stream, int64_t a, int64_t b) -> commprof_event& {
        commprof_event& e = Add(r, kind, name, a, b);
        e.device = 0;
        e.thread_id = stream;
        e.correlation = ++s.correlation;
        return e;
      };
      int64_t step = (len - 60 * kUs) / 3;
      gpu(COMMPROF_KIND_COMPUTE_KERNEL, kNameGeluBwd, kComputeStream, b0 + 5 * kUs, b0 + 5 * kUs + step - kUs);
      gpu(COMMPROF_KIND_COMPUTE_KERNEL, kNameGemmBwd, kComputeStream, b0 + 5 * kUs + step,
          b0 + 5 * kUs + 2 * step - kUs);
      gpu(COMMPROF_KIND_COMPUTE_KERNEL, kNameAdamStep, kComputeStream, b0 + 5 * kUs + 2 * step,
          b0 + 5 * kUs + 3 * step - kUs);
      // The communication kernel runs from the issue to the reduction's completion (or its own
      // minimum time), overlapping the backward kernels: the overlap the analysis measures.
      commprof_event& ck = gpu(COMMPROF_KIND_COMM_KERNEL, kNameNcclAllreduce, kCommStream, issue + kUs,
                               std::max(done, issue + 50 * kUs));
      ck.subtype = COMMPROF_OP_ALLREDUCE;
      ck.bytes = kGradBytes;
      ck.datatype = COMMPROF_DT_FLOAT32;
      ck.reduce_op = COMMPROF_RED_SUM;
      gpu(COMMPROF_KIND_MEMCPY, kNameMemcpyDtoH, kCopyStream, b0 + len - 40 * kUs, b0 + len - 5 * kUs).bytes = 1u << 20;
    }
    int64_t wait_start = b0 + len + kUs;
    int64_t wait_end = std::max(wait_start, done) + kUs + s.rng.Below(kUs);
    commprof_event& w = Add(r, COMMPROF_KIND_MPI_WAIT, kNameWait, wait_start, wait_end);
    w.subtype = COMMPROF_OP_WAIT;
    w.bytes = 1;
    // Stored at completion, right after the Wait that saw it complete (docs/file-format.md).
    commprof_event& ia = Add(r, COMMPROF_KIND_MPI_COLLECTIVE, kNameIallreduce, issue - 2 * kUs, wait_end);
    ia.subtype = COMMPROF_OP_ALLREDUCE;
    ia.comm_id = COMMPROF_COMM_WORLD_ID;
    ia.seq = iseq;
    ia.bytes = kGradBytes;
    ia.datatype = COMMPROF_DT_FLOAT32;
    ia.reduce_op = COMMPROF_RED_SUM;
    ia.flags = COMMPROF_FLAG_NONBLOCKING;
    s.t = wait_end;
  }

  // The two halves, each on its own communicator (same call order, so one sequence counter).
  const uint64_t hs = half_seq_;
  half_seq_ += 2;
  for (uint32_t base : {0u, half_}) {
    uint32_t n = HalfSize(base);
    if (n == 0) continue;
    Blocking(base, n, HalfCommId(base), hs, COMMPROF_OP_ALLREDUCE, kNameAllreduce, 256u << 10, COMMPROF_NO_PEER);
    Blocking(base, n, HalfCommId(base), hs + 1, COMMPROF_OP_REDUCE, kNameReduce, 64u << 10, 0);
  }

  // A ring of Send/Recv pairs on MPI_COMM_WORLD (tag = iteration).
  constexpr uint64_t kMsg = 64u << 10;
  for (uint32_t r = 0; r < R; ++r) scratch_[r] = st_[r].t + kUs + st_[r].rng.Below(5 * kUs);  // send starts
  for (uint32_t r = 0; r < R; ++r) {
    RankState& s = st_[r];
    uint32_t to = (r + 1) % R, from = (r + R - 1) % R;
    int64_t send_start = scratch_[r];
    int64_t send_end = send_start + 2 * kUs + static_cast<int64_t>(kMsg / 10);  // eager: buffered, no wait
    commprof_event& snd = Add(r, COMMPROF_KIND_MPI_P2P, kNameSend, send_start, send_end);
    snd.subtype = COMMPROF_OP_SEND;
    snd.comm_id = COMMPROF_COMM_WORLD_ID;
    snd.bytes = kMsg;
    snd.peer = static_cast<int32_t>(to);
    snd.correlation = static_cast<uint32_t>(i);
    snd.datatype = COMMPROF_DT_BYTE;
    int64_t recv_start = send_end + kUs;
    int64_t recv_end = std::max(recv_start, scratch_[from] + static_cast<int64_t>(kMsg / 10)) + 3 * kUs;
    commprof_event& rcv = Add(r, COMMPROF_KIND_MPI_P2P, kNameRecv, recv_start, recv_end);
    rcv.subtype = COMMPROF_OP_RECV;
    rcv.comm_id = COMMPROF_COMM_WORLD_ID;
    rcv.bytes = kMsg;
    rcv.peer = static_cast<int32_t>(from);
    rcv.correlation = static_cast<uint32_t>(i);
    rcv.datatype = COMMPROF_DT_BYTE;
    s.t = recv_end;
  }
  Blocking(0, R, COMMPROF_COMM_WORLD_ID, world_seq_++, COMMPROF_OP_ALLGATHER, kNameAllgather, 64u * R,
           COMMPROF_NO_PEER);
}

int Generator::Run(const std::string& command_line) {
  const uint32_t R = o_.ranks;
  const uint32_t per_iter = kEventsPerIteration + (o_.gpu ? kGpuEventsPerIteration : 0);
  const uint64_t per_rank = o_.events / R;  // the first events % R ranks get one tail mark more
  if (per_rank < kFixedEvents + per_iter) {
    std::fprintf(stderr, "make_synthetic_profile: --events %llu gives %llu per rank; need at least %u\n",
                 static_cast<unsigned long long>(o_.events), static_cast<unsigned long long>(per_rank),
                 kFixedEvents + per_iter);
    return 2;
  }
  const uint64_t iterations = (per_rank - kFixedEvents) / per_iter;
  half_ = R / 2;
  // One HDF5 chunk (16 Ki records, 1 MiB) per rank and append, fewer when there are many ranks, so
  // the buffers stay under ~128 MiB.
  chunk_ = std::clamp<size_t>((128u << 20) / sizeof(commprof_event) / R, 1024, 16384);

  JobMeta meta;
  meta.job_id = "synthetic-" + std::to_string(R) + "x" + std::to_string(o_.events) + "-seed" + std::to_string(o_.seed);
  meta.command_line = command_line;
  meta.world_size = R;
  meta.start_epoch_ns = kEpochStart;
  auto w = Hdf5Writer::Create(o_.out, meta, WriterOptions{});
  if (!w.ok()) {
    std::fprintf(stderr, "make_synthetic_profile: %s\n", w.status().message().c_str());
    return 1;
  }
  writer_ = std::move(w.value());

  // Clocks: rank 0's host is the reference; every other host gets an offset in
  // [-clock_offset_us, +clock_offset_us] and a drift in [-5, +5] ppm (none without the option).
  const uint32_t per_node = std::max<uint32_t>(1, o_.ranks_per_node);
  const uint32_t hosts = (R + per_node - 1) / per_node;
  std::vector<HostClock> host_clock(hosts);
  Rng clock_rng(o_.seed ^ 0xC10C);
  for (uint32_t h = 1; h < hosts && o_.clock_offset_us > 0; ++h) {
    host_clock[h].offset_ns = static_cast<int64_t>((2 * clock_rng.Unit() - 1) * o_.clock_offset_us * kUs);
    host_clock[h].drift = (2 * clock_rng.Unit() - 1) * 5e-6;
  }
  clocks_.resize(R);
  st_.resize(R);
  const int64_t start_ref = kReferenceT0;
  for (uint32_t r = 0; r < R; ++r) {
    HostClock c = host_clock[r / per_node];
    c.anchor_local = start_ref - c.offset_ns;  // local time at the job's start, about
    clocks_[r] = c;
    RankState& s = st_[r];
    s.rng = Rng(o_.seed * 1000003 + r);
    s.t = start_ref + 50 * kUs + s.rng.Below(200 * kUs);  // MPI_Init returns at slightly different times
    s.buf.reserve(chunk_ + 2 * per_iter);
    if (static_cast<int64_t>(r) == o_.slow_rank) s.compute_before = static_cast<int64_t>(o_.slow_us * kUs);
    RankDescription h;
    h.rank = r;
    h.world_size = R;
    h.pid = 40000 + r;
    h.start_steady_ns = static_cast<uint64_t>(c.ToLocal(s.t));
    h.start_utc_ns = kEpochStart + static_cast<uint64_t>(s.t - start_ref);
    char host[32];
    std::snprintf(host, sizeof host, "node%03u", r / per_node);
    h.host = host;
    Status st = writer_->OpenRank(h);
    StringBatch names;
    names.first_id = 0;
    names.strings.assign(kNames, kNames + kNameCount);
    if (st.ok()) st = writer_->AppendStrings(r, names);
    if (!st.ok()) {
      std::fprintf(stderr, "make_synthetic_profile: %s\n", st.message().c_str());
      return 1;
    }
  }

  auto wall0 = std::chrono::steady_clock::now();
  // MPI_Init (from before the collector started) and the split of the world into two halves.
  for (uint32_t r = 0; r < R; ++r) {
    RankState& s = st_[r];
    commprof_event& init = Add(r, COMMPROF_KIND_MPI_INIT, kNameInit, start_ref - 30 * kUs * 1000, s.t);
    init.comm_id = COMMPROF_COMM_WORLD_ID;
    init.bytes = R;
  }
  int64_t split_last = INT64_MIN;
  for (uint32_t r = 0; r < R; ++r) split_last = std::max(split_last, st_[r].t + 10 * kUs);
  for (uint32_t r = 0; r < R; ++r) {
    RankState& s = st_[r];
    int64_t end = split_last + 30 * kUs + s.rng.Below(kUs);
    commprof_event& split = Add(r, COMMPROF_KIND_MPI_COMM, kNameCommSplit, s.t + 10 * kUs, end);
    split.subtype = COMMPROF_OP_COMM_SPLIT;
    split.comm_id = HalfCommId(r);
    split.seq = COMMPROF_COMM_WORLD_ID;
    split.bytes = HalfSize(r);
    split.peer = static_cast<int32_t>(r - HalfBase(r));
    s.t = end;
  }

  for (uint64_t i = 0; i < iterations; ++i) {
    Iteration(i);
    for (uint32_t r = 0; r < R; ++r) {
      Status st = FlushRank(r, false);
      if (!st.ok()) {
        std::fprintf(stderr, "make_synthetic_profile: %s\n", st.message().c_str());
        return 1;
      }
    }
  }

  // Tail marks up to the exact count, MPI_Finalize, the clock model, the bye.
  int64_t end_ref = 0;
  for (uint32_t r = 0; r < R; ++r) {
    RankState& s = st_[r];
    uint64_t mine = per_rank + (r < o_.events % R ? 1 : 0);
    uint64_t have = s.written + s.buf.size() + 1;  // + MPI_FINALIZE
    if (have > mine) {                             // per_iter disagrees with Iteration(): a bug here, not a user error
      std::fprintf(stderr, "make_synthetic_profile: internal error: rank %u made %llu events, more than %llu\n", r,
                   static_cast<unsigned long long>(have), static_cast<unsigned long long>(mine));
      return 1;
    }
    uint64_t tail = mine - have;
    for (uint64_t k = 0; k < tail; ++k) {
      s.t += kUs;
      Add(r, COMMPROF_KIND_USER_MARK, kNameTail, s.t, s.t);
      if (Status st = FlushRank(r, false); !st.ok()) {
        std::fprintf(stderr, "make_synthetic_profile: %s\n", st.message().c_str());
        return 1;
      }
    }
    Add(r, COMMPROF_KIND_MPI_FINALIZE, kNameFinalize, s.t + 5 * kUs, s.t + 200 * kUs);
    s.t += 200 * kUs;
    end_ref = std::max(end_ref, s.t);
  }
  uint64_t total = 0;
  for (uint32_t r = 0; r < R; ++r) {
    RankState& s = st_[r];
    Status st = FlushRank(r, true);
    // Three sync epochs (start, middle, end) on the host's line; half round trips 0.3-0.8 us as
    // ping-pong over shared memory or a fast network gives. Rank 0 is the reference itself.
    const HostClock& c = clocks_[r];
    int64_t l_end = c.ToLocal(end_ref);
    RankClock clock;
    for (int64_t l : {c.anchor_local, c.anchor_local + (l_end - c.anchor_local) / 2, l_end}) {
      clock.points.push_back({l, c.OffsetAt(l), r == 0 ? 0 : 300 + s.rng.Below(500)});
    }
    ClockModel model(clock.points);
    clock.anchor_local_ns = static_cast<uint64_t>(c.anchor_local);
    clock.offset_ns = model.OffsetAt(c.anchor_local);
    clock.drift_ppm = model.DriftPpm();
    clock.error_bound_ns = model.ErrorBoundNs();
    clock.method = r == 0 ? "mpi-reference" : "mpi-pingpong";
    if (st.ok()) st = writer_->SetClock(r, clock);
    std::vector<std::pair<std::string, uint64_t>> counters = {{"events_recorded", s.written},
                                                              {"events_shipped", s.written},
                                                              {"batches_sent", (s.written + chunk_ - 1) / chunk_},
                                                              {"dropped_ring_full", 0},
                                                              {"dropped_no_buffer", 0},
                                                              {"dropped_range_depth", 0},
                                                              {"dropped_requests", 0},
                                                              {"dropped_strings", 0},
                                                              {"requests_incomplete", 0},
                                                              {"clock_sync_epochs", 3}};
    if (st.ok()) st = writer_->CloseRank(r, RankEnd::kComplete, counters, 0, "bye");
    if (!st.ok()) {
      std::fprintf(stderr, "make_synthetic_profile: %s\n", st.message().c_str());
      return 1;
    }
    total += s.written;
  }
  if (total != o_.events) {
    std::fprintf(stderr, "make_synthetic_profile: internal error: wrote %llu events, not %llu\n",
                 static_cast<unsigned long long>(total), static_cast<unsigned long long>(o_.events));
    return 1;
  }
  if (Status st = writer_->Finalize(); !st.ok()) {
    std::fprintf(stderr, "make_synthetic_profile: %s\n", st.message().c_str());
    return 1;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const uint64_t world_instances = iterations * 3, half_instances = iterations * (half_ > 0 ? 4 : 2);
  std::printf(
      "make_synthetic_profile: %s: %u ranks, %llu events (%llu iterations of %u per rank), %llu blocking "
      "instances (%llu world, %llu sub-communicator), gpu %s, slow rank %lld (+%.0f us), clock offsets up to %.0f us; "
      "%.1f MB in %.2f s\n",
      o_.out.c_str(), R, static_cast<unsigned long long>(total), static_cast<unsigned long long>(iterations), per_iter,
      static_cast<unsigned long long>(world_instances + half_instances),
      static_cast<unsigned long long>(world_instances), static_cast<unsigned long long>(half_instances),
      o_.gpu ? "on" : "off", static_cast<long long>(o_.slow_rank), o_.slow_us, o_.clock_offset_us,
      static_cast<double>(total * sizeof(commprof_event)) / 1e6, secs);
  return 0;
}

}  // namespace
}  // namespace commprof

int main(int argc, char** argv) {
  commprof::Options o;
  CLI::App app{"Writes a synthetic commprof HDF5 profile (a realistic MPI/GPU event mix) for analysis benchmarks."};
  app.add_option("--ranks", o.ranks, "number of ranks (>= 2)")->capture_default_str()->check(CLI::Range(2u, 1u << 20));
  app.add_option("--events", o.events, "total number of events over all ranks")->capture_default_str();
  app.add_option("--out", o.out, "output HDF5 file")->required();
  app.add_option("--slow-rank", o.slow_rank,
                 "plant a straggler: this rank computes longer before each blocking collective")
      ->capture_default_str();
  app.add_option("--slow-us", o.slow_us, "extra compute of the slow rank before each blocking collective (us)")
      ->capture_default_str();
  app.add_option("--clock-offset-us", o.clock_offset_us,
                 "per-host clock offsets up to +-this (us), with drifts up to +-5 ppm, written as clock_points")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed (same seed, same file)")->capture_default_str();
  app.add_flag("--gpu", o.gpu, "add device-0 compute kernels, a communication kernel and memcpys each iteration");
  app.add_option("--ranks-per-node", o.ranks_per_node, "ranks per host (they share a clock)")->capture_default_str();
  app.add_option("--compute-us", o.compute_us, "forward compute per iteration (us); backward is twice that")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.slow_rank >= static_cast<int64_t>(o.ranks)) {
    std::fprintf(stderr, "make_synthetic_profile: --slow-rank %lld is not a rank of %u\n",
                 static_cast<long long>(o.slow_rank), o.ranks);
    return 2;
  }
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  return commprof::Generator(o).Run(cmd);
}
