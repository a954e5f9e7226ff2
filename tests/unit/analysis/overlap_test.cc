// Overlap, exposed communication and the temporal breakdown (analysis/metrics/overlap.h,
// docs/metrics.md §6): hand-made ranks with the expected figures worked out in the comments, for
// both bases, then a file written with the real Hdf5Writer (with a clock model that stretches one
// rank's time, and a rank large enough to be read in several chunks).
#include "analysis/metrics/overlap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;
namespace events = test_support::events;

commprof_event Ev(uint8_t kind, uint64_t start, uint64_t end, uint16_t flags = 0, uint8_t op = COMMPROF_OP_NONE) {
  commprof_event e{};
  e.kind = kind;
  e.subtype = op;
  e.start_ns = start;
  e.end_ns = end;
  e.flags = flags;
  e.peer = COMMPROF_NO_PEER;
  e.device = COMMPROF_HOST_DEVICE;
  e.comm_id = COMMPROF_COMM_WORLD_ID;
  return e;
}
commprof_event Init(uint64_t s, uint64_t e) { return Ev(COMMPROF_KIND_MPI_INIT, s, e); }
commprof_event Finalize(uint64_t s, uint64_t e) { return Ev(COMMPROF_KIND_MPI_FINALIZE, s, e); }
commprof_event Blocking(uint8_t op, uint64_t s, uint64_t e) { return events::Collective(op, 0, s, e); }
// An Iallreduce from issue to completion.
commprof_event NonBlocking(uint64_t s, uint64_t e, uint16_t extra_flags = 0) {
  return events::Collective(COMMPROF_OP_ALLREDUCE, 0, s, e,
                            {.flags = static_cast<uint16_t>(COMMPROF_FLAG_NONBLOCKING | extra_flags)});
}
commprof_event Wait(uint8_t op, uint64_t s, uint64_t e) { return Ev(COMMPROF_KIND_MPI_WAIT, s, e, 0, op); }
commprof_event Gpu(uint8_t kind, uint16_t device, uint32_t stream, uint64_t s, uint64_t e) {
  commprof_event ev = Ev(kind, s, e);
  ev.device = device;
  ev.thread_id = stream;
  ev.comm_id = COMMPROF_NO_COMM_ID;
  return ev;
}

void ExpectBreakdown(const TimeBreakdown& b, int64_t span, int64_t compute, int64_t exposed, int64_t memory,
                     int64_t idle) {
  EXPECT_EQ(b.span_ns, span);
  EXPECT_EQ(b.compute_ns, compute);
  EXPECT_EQ(b.exposed_comm_ns, exposed);
  EXPECT_EQ(b.memory_ns, memory);
  EXPECT_EQ(b.idle_ns, idle);
  EXPECT_EQ(b.compute_ns + b.exposed_comm_ns + b.memory_ns + b.idle_ns, b.span_ns) << "the parts tile the span";
}

// A CPU rank that only makes blocking calls.
std::vector<commprof_event> BlockingRank() {
  return {Init(0, 100), Blocking(COMMPROF_OP_BARRIER, 100, 150), Blocking(COMMPROF_OP_ALLREDUCE, 1150, 1300),
          Blocking(COMMPROF_OP_ALLREDUCE, 2300, 2400), Finalize(2500, 2600)};
}

TEST(Overlap, BlockingOnlyRankOverlapsNothing) {
  // C = [100,150) + [1150,1300) + [2300,2400) = 50 + 150 + 100 = 300, all inside calls.
  // M = C + Init [0,100) + Finalize [2500,2600) = 500; span [0,2600) = 2600.
  // overlap 0; exposed = |C ∩ M| = 300; compute = 2600 - 500 = 2100; idle = |M \ C| = 200.
  RankOverlap r = ComputeRankOverlap(3, BlockingRank());
  EXPECT_EQ(r.rank, 3u);
  EXPECT_EQ(r.basis, OverlapBasis::kCpuOutsideMpi);
  EXPECT_STREQ(OverlapBasisName(r.basis), "cpu-outside-mpi");
  EXPECT_EQ(r.comm_ns, 300);
  EXPECT_EQ(r.overlap, 0.0);
  EXPECT_EQ(r.exposed_comm_ns, 300);
  ExpectBreakdown(r.breakdown, 2600, 2100, 300, 0, 200);
  EXPECT_EQ(r.incomplete_events, 0u);
  EXPECT_TRUE(r.devices.empty());
}

// Iallreduce issued at 200, polled by MPI_Test, completed by the Test at [640,650); one more Test
// and a Wait after completion (the request is MPI_REQUEST_NULL by then, as in mpi_straggler).
std::vector<commprof_event> NonBlockingRank() {
  return {Init(0, 100),
          NonBlocking(200, 650),
          Wait(COMMPROF_OP_TEST, 300, 310),
          Wait(COMMPROF_OP_TEST, 400, 410),
          Wait(COMMPROF_OP_TEST, 500, 510),
          Wait(COMMPROF_OP_TEST, 640, 650),
          Wait(COMMPROF_OP_TEST, 700, 710),
          Wait(COMMPROF_OP_WAIT, 900, 910),
          Finalize(1000, 1100)};
}

TEST(Overlap, IallreduceWithTestPollsOverlapsTheComputeBetweenThePolls) {
  // C = in flight [200,650) + Test [700,710) + Wait [900,910) = 450 + 10 + 10 = 470.
  // M = Init 100 + five Tests 50 + Wait 10 + Finalize 100 = 260.
  // C ∩ M = four Tests inside [200,650) (40) + Test [700,710) + Wait [900,910) = 60 = exposed.
  // overlap = (470 - 60) / 470 = 410 / 470.
  // span [0,1100) = 1100: compute = 1100 - 260 = 840, exposed 60, idle = |M \ C| = 260 - 60 = 200.
  std::vector<commprof_event> events = NonBlockingRank();
  RankOverlap r = ComputeRankOverlap(0, events);
  EXPECT_EQ(r.basis, OverlapBasis::kCpuOutsideMpi);
  EXPECT_EQ(r.comm_ns, 470);
  EXPECT_EQ(r.exposed_comm_ns, 60);
  EXPECT_DOUBLE_EQ(r.overlap, 410.0 / 470.0);
  ExpectBreakdown(r.breakdown, 1100, 840, 60, 0, 200);

  // Events arrive per thread, not in time order: the figures do not depend on the order.
  std::mt19937 rng(7);
  for (int i = 0; i < 5; ++i) {
    std::shuffle(events.begin(), events.end(), rng);
    RankOverlap s = ComputeRankOverlap(0, events);
    EXPECT_EQ(s.comm_ns, 470);
    EXPECT_EQ(s.exposed_comm_ns, 60);
    ExpectBreakdown(s.breakdown, 1100, 840, 60, 0, 200);
  }
}

TEST(Overlap, NonBlockingPointToPointCountsLikeCollectives) {
  // Isend [100,400) and Irecv [150,500) in flight, Waitall [450,500) completes both;
  // a blocking Send [600,650) after. Init [0,50), Finalize [700,750).
  // C = [100,500) + [600,650) = 400 + 50 = 450; M = 50 + 50 + 50 + 50 = 200 (Init, Waitall, Send,
  // Finalize); C ∩ M = Waitall 50 + Send 50 = 100 -> overlap 350/450.
  // span 750: compute = 750 - 200 = 550, exposed 100, idle = Init + Finalize = 100.
  std::vector<commprof_event> ev = {Init(0, 50),
                                    Ev(COMMPROF_KIND_MPI_P2P, 100, 400, COMMPROF_FLAG_NONBLOCKING, COMMPROF_OP_SEND),
                                    Ev(COMMPROF_KIND_MPI_P2P, 150, 500, COMMPROF_FLAG_NONBLOCKING, COMMPROF_OP_RECV),
                                    Wait(COMMPROF_OP_WAITALL, 450, 500),
                                    Ev(COMMPROF_KIND_MPI_P2P, 600, 650, 0, COMMPROF_OP_SEND),
                                    Finalize(700, 750)};
  RankOverlap r = ComputeRankOverlap(1, ev);
  EXPECT_EQ(r.comm_ns, 450);
  EXPECT_EQ(r.exposed_comm_ns, 100);
  EXPECT_DOUBLE_EQ(r.overlap, 350.0 / 450.0);
  ExpectBreakdown(r.breakdown, 750, 550, 100, 0, 100);
}

TEST(Overlap, IncompleteOperationsAreCountedAndLeftOutOfCommunication) {
  // Iallreduce [200,700) completed by a Wait [600,700); an Isend issued at 720 whose request was
  // freed at 780 (INCOMPLETE): not communication, but counted. Init [0,100), Finalize [800,900).
  // C = [200,700) = 500 (with the Isend it would be 560); M = 100 + 100 + 100 = 300;
  // exposed = Wait 100; overlap = 400/500 = 0.8.
  // span [0,900) = 900: compute = 900 - 300 = 600, exposed 100, idle = 200.
  std::vector<commprof_event> ev = {
      Init(0, 100), NonBlocking(200, 700), Wait(COMMPROF_OP_WAIT, 600, 700),
      Ev(COMMPROF_KIND_MPI_P2P, 720, 780, COMMPROF_FLAG_NONBLOCKING | COMMPROF_FLAG_INCOMPLETE, COMMPROF_OP_SEND),
      Finalize(800, 900)};
  RankOverlap r = ComputeRankOverlap(0, ev);
  EXPECT_EQ(r.incomplete_events, 1u);
  EXPECT_EQ(r.comm_ns, 500);
  EXPECT_EQ(r.exposed_comm_ns, 100);
  EXPECT_DOUBLE_EQ(r.overlap, 0.8);
  ExpectBreakdown(r.breakdown, 900, 600, 100, 0, 200);
}

TEST(Overlap, CommunicatorCreationIsCommunicationAndRangesOnlyWidenTheSpan) {
  // Comm_split [100,160) is a collective over its parent: in C and M. A user range [50,1000)
  // and a mark at 1200 add no interval but stretch the span to [0,1200).
  // C = 60 = exposed, overlap 0; M = Init 50 + split 60 = 110; compute = 1200 - 110 = 1090;
  // idle = Init 50.
  std::vector<commprof_event> ev = {Init(0, 50), Ev(COMMPROF_KIND_MPI_COMM, 100, 160, 0, COMMPROF_OP_COMM_SPLIT),
                                    Ev(COMMPROF_KIND_USER_RANGE, 50, 1000), Ev(COMMPROF_KIND_USER_MARK, 1200, 1200)};
  RankOverlap r = ComputeRankOverlap(0, ev);
  EXPECT_EQ(r.comm_ns, 60);
  EXPECT_EQ(r.exposed_comm_ns, 60);
  EXPECT_EQ(r.overlap, 0.0);
  ExpectBreakdown(r.breakdown, 1200, 1090, 60, 0, 50);
}

TEST(Overlap, NoCommunicationGivesZeroOverlapAndNoEventsGiveZeros) {
  // Init [0,10), Finalize [90,100): C empty -> overlap 0 (not NaN); compute 80, idle 20.
  RankOverlap r = ComputeRankOverlap(0, std::vector<commprof_event>{Init(0, 10), Finalize(90, 100)});
  EXPECT_EQ(r.comm_ns, 0);
  EXPECT_EQ(r.overlap, 0.0);
  EXPECT_EQ(r.exposed_comm_ns, 0);
  ExpectBreakdown(r.breakdown, 100, 80, 0, 0, 20);
  RankOverlap none = ComputeRankOverlap(0, std::vector<commprof_event>{});
  EXPECT_EQ(none.comm_ns, 0);
  ExpectBreakdown(none.breakdown, 0, 0, 0, 0, 0);
}

// One GPU, two streams: compute kernels on stream 7, communication on stream 8, a memcpy.
std::vector<commprof_event> OneGpuRank() {
  return {Init(0, 50),
          Gpu(COMMPROF_KIND_COMPUTE_KERNEL, 0, 7, 100, 300),
          Gpu(COMMPROF_KIND_COMPUTE_KERNEL, 0, 7, 400, 600),
          Gpu(COMMPROF_KIND_NCCL_COLLECTIVE, 0, 8, 250, 450),
          Gpu(COMMPROF_KIND_COMM_KERNEL, 0, 8, 750, 850),
          Gpu(COMMPROF_KIND_MEMCPY, 0, 7, 550, 650),
          Finalize(950, 1000)};
}

TEST(Overlap, GpuKernelsOnTwoStreamsOverlapWhereTheyRunTogether) {
  // K = [100,300) + [400,600) = 400; C = [250,450) + [750,850) = 300;
  // C ∩ K = [250,300) + [400,450) = 100 -> overlap 1/3, exposed = [300,400) + [750,850) = 200.
  // memory: [550,650) minus K ∪ C = [600,650) = 50.
  // Device span [100,850) = 750; covered = [100,650) + [750,850) = 650 -> idle [650,750) = 100.
  // Rank span [0,1000) (host Init/Finalize) = 1000: idle = 1000 - 650 = 350.
  RankOverlap r = ComputeRankOverlap(0, OneGpuRank());
  EXPECT_EQ(r.basis, OverlapBasis::kGpuKernels);
  EXPECT_STREQ(OverlapBasisName(r.basis), "gpu-kernels");
  EXPECT_EQ(r.comm_ns, 300);
  EXPECT_EQ(r.exposed_comm_ns, 200);
  EXPECT_DOUBLE_EQ(r.overlap, 100.0 / 300.0);
  ExpectBreakdown(r.breakdown, 1000, 400, 200, 50, 350);
  ASSERT_EQ(r.devices.size(), 1u);
  const DeviceOverlap& d = r.devices[0];
  EXPECT_EQ(d.device, 0);
  EXPECT_EQ(d.comm_ns, 300);
  EXPECT_EQ(d.exposed_comm_ns, 200);
  EXPECT_DOUBLE_EQ(d.overlap, 100.0 / 300.0);
  ExpectBreakdown(d.breakdown, 750, 400, 200, 50, 100);
}

TEST(Overlap, TwoGpusAndHostMpiAreMeasuredPerDeviceAloneAndPerRankTogether) {
  // OneGpuRank plus a host MPI_Barrier [900,940) and GPU 1 with a compute kernel [100,200) and a
  // communication kernel [150,250).
  // GPU 0 alone: as in the test above (host MPI is on no device).
  // GPU 1 alone: C ∩ K = [150,200) = 50 of |C| = 100 -> overlap 0.5, exposed 50; span [100,250)
  //   = 150: compute 100, exposed 50, memory 0, idle 0.
  // Rank: K = [100,300) + [400,600) = 400 (GPU 1's kernel lies inside GPU 0's first one);
  //   C = [150,450) + [750,850) + [900,940) = 300 + 100 + 40 = 440;
  //   C ∩ K = [150,300) + [400,450) = 200 -> overlap 200/440, exposed 240;
  //   memory [600,650) = 50; covered = [100,650) + [750,850) + [900,940) = 690 -> idle 1000 - 690 = 310.
  std::vector<commprof_event> ev = OneGpuRank();
  ev.push_back(Blocking(COMMPROF_OP_BARRIER, 900, 940));
  ev.push_back(Gpu(COMMPROF_KIND_COMPUTE_KERNEL, 1, 3, 100, 200));
  ev.push_back(Gpu(COMMPROF_KIND_COMM_KERNEL, 1, 4, 150, 250));
  RankOverlap r = ComputeRankOverlap(2, ev);
  EXPECT_EQ(r.basis, OverlapBasis::kGpuKernels);
  EXPECT_EQ(r.comm_ns, 440);
  EXPECT_EQ(r.exposed_comm_ns, 240);
  EXPECT_DOUBLE_EQ(r.overlap, 200.0 / 440.0);
  ExpectBreakdown(r.breakdown, 1000, 400, 240, 50, 310);
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.devices[0].device, 0);
  EXPECT_EQ(r.devices[0].comm_ns, 300);
  EXPECT_EQ(r.devices[0].exposed_comm_ns, 200);
  ExpectBreakdown(r.devices[0].breakdown, 750, 400, 200, 50, 100);
  EXPECT_EQ(r.devices[1].device, 1);
  EXPECT_EQ(r.devices[1].comm_ns, 100);
  EXPECT_EQ(r.devices[1].exposed_comm_ns, 50);
  EXPECT_DOUBLE_EQ(r.devices[1].overlap, 0.5);
  ExpectBreakdown(r.devices[1].breakdown, 150, 100, 50, 0, 0);
}

TEST(Overlap, GpuCommunicationWithoutComputeKernelRecordsFallsBackToTheHostBasis) {
  // NCCL [200,500) on GPU 0 but no compute kernel recorded (CUPTI off): nothing on the GPU to
  // overlap with, so the rank is measured on the host: C = Barrier [600,700) = 100 = exposed;
  // M = Init 100 + Barrier 100 + Finalize 100 = 300; span [0,900): compute 600, idle 200.
  std::vector<commprof_event> ev = {Init(0, 100), Gpu(COMMPROF_KIND_NCCL_COLLECTIVE, 0, 1, 200, 500),
                                    Blocking(COMMPROF_OP_BARRIER, 600, 700), Finalize(800, 900)};
  RankOverlap r = ComputeRankOverlap(0, ev);
  EXPECT_EQ(r.basis, OverlapBasis::kCpuOutsideMpi);
  EXPECT_EQ(r.comm_ns, 100);
  EXPECT_EQ(r.exposed_comm_ns, 100);
  EXPECT_TRUE(r.devices.empty());
  ExpectBreakdown(r.breakdown, 900, 600, 100, 0, 200);
}

TEST(Overlap, IncompleteGpuCommunicationIsCountedToo) {
  // A compute kernel [0,100) and an NCCL collective [50,150) flagged INCOMPLETE: C is empty.
  std::vector<commprof_event> ev = {Gpu(COMMPROF_KIND_COMPUTE_KERNEL, 0, 1, 0, 100),
                                    Gpu(COMMPROF_KIND_NCCL_COLLECTIVE, 0, 2, 50, 150)};
  ev[1].flags = COMMPROF_FLAG_INCOMPLETE;
  RankOverlap r = ComputeRankOverlap(0, ev);
  EXPECT_EQ(r.incomplete_events, 1u);
  EXPECT_EQ(r.comm_ns, 0);
  EXPECT_EQ(r.overlap, 0.0);
  // span [0,150): compute 100, idle 50.
  ExpectBreakdown(r.breakdown, 150, 100, 0, 0, 50);
}

TEST(Overlap, ClockModelStretchesAndShiftsTheRanksTime) {
  // reference = local + 5000 + 0.1 * local (points (0, +5000) and (1e6, +105000)): every
  // length of NonBlockingRank grows by 10 %: C 470 -> 517, exposed 60 -> 66, span 1100 -> 1210,
  // compute 840 -> 924, idle 200 -> 220; overlap stays 410/470 = 451/517.
  ClockModel m({{0, 5000, 10}, {1000000, 105000, 10}});
  RankOverlap r = ComputeRankOverlap(1, NonBlockingRank(), m);
  EXPECT_EQ(r.comm_ns, 517);
  EXPECT_EQ(r.exposed_comm_ns, 66);
  EXPECT_DOUBLE_EQ(r.overlap, 451.0 / 517.0);
  ExpectBreakdown(r.breakdown, 1210, 924, 66, 0, 220);
}

// ---- read from a file written by the aggregator's writer ----

TEST(Overlap, FileRanksAreReadOneAtATimeOnTheAlignedClock) {
  // Rank 0: BlockingRank, no clock model. Rank 1: NonBlockingRank with the stretching model of
  // the test above. Rank 2: 20000 periods of 1000 ns (80000 events, more than one 65536-event
  // read chunk): Iallreduce [p, p+500) with a Test [p+100, p+110) and a Wait [p+490, p+500),
  // then a blocking Allreduce [p+600, p+700). Per period C = [p, p+500) + [p+600, p+700) = 600,
  // C ∩ M = 10 + 10 + 100 = 120 -> overlap 480/600 = 0.8 exactly; span = 19999 * 1000 + 700;
  // compute = span - 120 * 20000; no Init/Finalize, so idle 0.
  // Rank 3: opened but never sent an event: all zeros.
  constexpr int64_t kPeriods = 20000;
  RankData big;
  for (int64_t k = 0; k < kPeriods; ++k) {
    uint64_t p = static_cast<uint64_t>(k) * 1000;
    big.events.push_back(NonBlocking(p, p + 500));
    big.events.push_back(Wait(COMMPROF_OP_TEST, p + 100, p + 110));
    big.events.push_back(Wait(COMMPROF_OP_WAIT, p + 490, p + 500));
    big.events.push_back(Blocking(COMMPROF_OP_ALLREDUCE, p + 600, p + 700));
  }
  TempDir dir("commprof-overlap");
  std::vector<RankData> job(4);
  job[0].events = BlockingRank();
  job[1].events = NonBlockingRank();
  job[1].points = {{0, 5000, 10}, {1000000, 105000, 10}};
  job[2] = big;
  auto reader = test_support::WriteProfile(dir / "overlap.h5", job, {.job_id = "job-overlap"});
  ASSERT_NE(reader, nullptr);
  auto res = ComputeOverlap(*reader);
  ASSERT_TRUE(res.ok()) << res.status().message();
  const std::vector<RankOverlap>& ranks = res.value();
  ASSERT_EQ(ranks.size(), 4u);

  EXPECT_EQ(ranks[0].rank, 0u);
  EXPECT_EQ(ranks[0].comm_ns, 300);
  EXPECT_EQ(ranks[0].overlap, 0.0);
  ExpectBreakdown(ranks[0].breakdown, 2600, 2100, 300, 0, 200);

  EXPECT_EQ(ranks[1].rank, 1u);
  EXPECT_EQ(ranks[1].comm_ns, 517);
  EXPECT_EQ(ranks[1].exposed_comm_ns, 66);
  ExpectBreakdown(ranks[1].breakdown, 1210, 924, 66, 0, 220);

  const int64_t span = (kPeriods - 1) * 1000 + 700;
  EXPECT_EQ(ranks[2].comm_ns, 600 * kPeriods);
  EXPECT_EQ(ranks[2].exposed_comm_ns, 120 * kPeriods);
  EXPECT_DOUBLE_EQ(ranks[2].overlap, 0.8);
  ExpectBreakdown(ranks[2].breakdown, span, span - 120 * kPeriods, 120 * kPeriods, 0, 0);
  // The streamed figures equal those of the whole list at once.
  RankOverlap whole = ComputeRankOverlap(2, big.events);
  EXPECT_EQ(whole.comm_ns, ranks[2].comm_ns);
  EXPECT_EQ(whole.breakdown.compute_ns, ranks[2].breakdown.compute_ns);

  EXPECT_EQ(ranks[3].rank, 3u);
  EXPECT_EQ(ranks[3].comm_ns, 0);
  ExpectBreakdown(ranks[3].breakdown, 0, 0, 0, 0, 0);
}

}  // namespace
}  // namespace commprof
