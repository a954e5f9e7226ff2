// The golden 4-rank profile of the operation-statistics tests (docs/metrics.md §12): the unit
// tests of analysis/metrics/op_stats and the `commprof stats` CLI tests compute their expected
// figures by hand from these planted events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commprof/event.h"
#include "support/test_support.h"

namespace commprof::op_stats_golden {

using test_support::RankData;
using test_support::events::Collective;

// The strings every rank shares (name_id = index).
enum Name : uint32_t {
  kEmpty,
  kAllreduce,
  kOuter,
  kInner,
  kLeaf,
  kStepUser,
  kFwdUser,
  kLinear,
  kMm,
  kAnnotation,
  kSendrecv,
  kWait,
  kGemm,
  kIsend,
  kLongKernel,
};
inline const std::vector<std::string> kStrings = {
    "", "MPI_Allreduce", "outer", "inner", "leaf", "step_user", "fwd_user", "aten::linear", "aten::mm",
    "ProfilerStep#1", "MPI_Sendrecv", "MPI_Wait", "gemm_kernel", "MPI_Isend",
    // A kernel name longer than the text table's name column, with commas CSV must quote.
    "void cutlass::Kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GemmShape<128, 256, 64>, "
    "cutlass::epilogue::thread::LinearCombination<float, 4, float, float>>>(Params)"};

inline commprof_event Range(uint8_t kind, uint32_t name, uint64_t start, uint64_t end, uint32_t thread = 0) {
  commprof_event e{};
  e.kind = kind;
  e.name_id = name;
  e.start_ns = start;
  e.end_ns = end;
  e.thread_id = thread;
  e.peer = COMMPROF_NO_PEER;
  e.device = COMMPROF_HOST_DEVICE;
  return e;
}

// Planted on every rank r: five MPI_Allreduce calls (seq 0-4) of 100, 200, 300, 400 and 500 ns,
// except rank 2's last, which takes 5000 ns. Calls 0-2 move 1 KiB, calls 3-4 1 MiB.
inline constexpr uint32_t kRanks = 4;
inline constexpr uint64_t kSmall = 1024, kBig = 1 << 20;
inline int64_t AllreduceNs(uint32_t r, uint64_t i) {
  return r == 2 && i == 4 ? 5000 : static_cast<int64_t>(100 * (i + 1));
}

inline std::vector<RankData> GoldenRanks() {
  std::vector<RankData> ranks(kRanks);
  for (uint32_t r = 0; r < kRanks; ++r) {
    ranks[r].strings = kStrings;
    for (uint64_t i = 0; i < 5; ++i) {
      const uint64_t start = 1'000'000 + i * 100'000;
      ranks[r].events.push_back(Collective(COMMPROF_OP_ALLREDUCE, i, start, start + AllreduceNs(r, i),
                                           {.bytes = i < 3 ? kSmall : kBig, .name = kAllreduce}));
    }
  }
  // Rank 1 ran the long-named kernel twice, 700 ns each.
  for (uint64_t i = 0; i < 2; ++i) {
    commprof_event k =
        Range(COMMPROF_KIND_COMPUTE_KERNEL, kLongKernel, 5'000'000 + i * 10'000, 5'000'700 + i * 10'000, 13);
    k.device = 0;
    ranks[1].events.push_back(k);
  }
  std::vector<commprof_event>& e = ranks[0].events;
  // NVTX push/pop on thread 0, stored at their pops: outer [1000, 11000] holds inner [2000, 5000]
  // (which holds leaf [2500, 3000]) and inner [6000, 8000]. Thread 1: outer [1000, 2000] alone.
  auto nvtx = [](uint32_t name, uint64_t s, uint64_t t, uint64_t depth, uint32_t thread = 0) {
    commprof_event n = Range(COMMPROF_KIND_NVTX_RANGE, name, s, t, thread);
    n.seq = depth;
    return n;
  };
  e.push_back(nvtx(kLeaf, 2500, 3000, 2));
  e.push_back(nvtx(kInner, 2000, 5000, 1));
  e.push_back(nvtx(kInner, 6000, 8000, 1));
  e.push_back(nvtx(kOuter, 1000, 11000, 0));
  e.push_back(nvtx(kOuter, 1000, 2000, 0, 1));
  // A user range around all of it with one child user range; the NVTX ranges are another family
  // and do not count as its children.
  e.push_back(Range(COMMPROF_KIND_USER_RANGE, kFwdUser, 100, 900));
  e.push_back(Range(COMMPROF_KIND_USER_RANGE, kStepUser, 0, 20000));
  // Imported torch events on OS thread 7: an annotation [0, 5000] holding aten::linear
  // [100, 1100], which holds aten::mm [200, 700] (written in start order, as the importer may).
  e.push_back(Range(COMMPROF_KIND_HOST_ANNOTATION, kAnnotation, 0, 5000, 7));
  e.push_back(Range(COMMPROF_KIND_HOST_OP, kLinear, 100, 1100, 7));
  e.push_back(Range(COMMPROF_KIND_HOST_OP, kMm, 200, 700, 7));
  // Two HtoD copies of 1 MB in 100 us each: 10 GB/s.
  for (uint64_t i = 0; i < 2; ++i) {
    commprof_event c = Range(COMMPROF_KIND_MEMCPY, 0, 50'000 + i * 200'000, 150'000 + i * 200'000);
    c.subtype = 1;
    c.bytes = 1'000'000;
    c.peer = -1;
    e.push_back(c);
  }
  // One MPI_Sendrecv (two events: its send half carries the call), an MPI_Wait on 3 requests
  // (bytes counts requests, not bytes), a CUDA kernel, and an Isend that never completed.
  commprof_event send = test_support::events::P2p(COMMPROF_OP_SENDRECV, 3'000'000, 3'004'000, 1, 5, 4096);
  send.name_id = kSendrecv;
  commprof_event recv = send;
  recv.flags = COMMPROF_FLAG_RECV_HALF;
  recv.bytes = 8192;
  e.push_back(send);
  e.push_back(recv);
  commprof_event wait = test_support::events::WaitCall(COMMPROF_OP_WAITALL, 3'100'000, 3'100'700);
  wait.name_id = kWait;
  wait.bytes = 3;
  e.push_back(wait);
  commprof_event kernel = Range(COMMPROF_KIND_COMPUTE_KERNEL, kGemm, 4'000'000, 4'000'900, 13);
  kernel.device = 0;
  kernel.bytes = 49152;  // shared memory per block: not moved bytes
  e.push_back(kernel);
  commprof_event lost = test_support::events::P2p(COMMPROF_OP_SEND, 3'200'000, 9'000'000, 1, 6, 64);
  lost.name_id = kIsend;
  lost.flags = COMMPROF_FLAG_NONBLOCKING | COMMPROF_FLAG_INCOMPLETE;
  e.push_back(lost);
  return ranks;
}

}  // namespace commprof::op_stats_golden
