// The CUPTI source without a GPU (docs/cupti.md): synthetic buffers of the real CUDA 13.0 record
// structs, laid out as CUPTI lays them out, walked by the real libcupti's
// cuptiActivityGetNextRecord (it works without a driver), translated by the live code path; and
// the source driven through its callbacks exactly as CUPTI drives it, with test doubles only for
// the calls that need a GPU (enable, flush, dropped count).
#include "collector/cupti_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/ingest.h"
#include "analysis/load/profile_reader.h"
#include "collector/cupti_library.h"
#include "collector/cupti_translate.h"
#include "collector/runtime.h"
#include "core/log.h"
#include "support/live_aggregator.h"
#include "support/test_support.h"

// These tests dlopen the real libcupti, whose exit handlers first touch its dynamic TLS on the main
// thread. GCC 12's libasan (LLVM <= 16 runtime) takes any dynamic TLS block that malloc places at
// offset 16 of a page for a glibc-2.19-style block, reads the ASan chunk header before it as its
// {size, start}, and LeakSanitizer's tracer then dies scanning that range at exit ("Tracer caught
// signal 11", google/sanitizers#1322), depending only on the allocation history (e.g. the length of
// the working directory). Without the interception LSan still scans that block: glibc allocates it
// from ld.so, and LSan treats ld.so's allocations as roots (use_ld_allocations). Our own TLS is
// initial-exec (static) and is scanned either way. Used only by ASan builds; ASAN_OPTIONS overrides.
extern "C" const char* __asan_default_options() { return "intercept_tls_get_addr=0"; }

namespace commprof {
namespace {

const CuptiLibrary& RealCupti() {
  std::string error;
  const CuptiLibrary* lib = LoadCuptiLibrary(error);
  if (lib == nullptr) {
    ADD_FAILURE() << "libcupti.so.13 of the toolkit commprof was built with did not load: " << error;
    std::abort();
  }
  return *lib;
}

// Records laid end to end, each at an 8-byte boundary, as CUPTI writes them into a buffer.
class SyntheticBuffer {
 public:
  explicit SyntheticBuffer(uint8_t* storage, size_t capacity) : data_(storage), capacity_(capacity) {
    std::memset(data_, 0, capacity_);
  }
  template <typename Record>
  Record& Add(CUpti_ActivityKind kind) {
    static_assert(sizeof(Record) % 8 == 0);
    EXPECT_LE(used_ + sizeof(Record), capacity_);
    auto* r = reinterpret_cast<Record*>(data_ + used_);
    r->kind = kind;
    used_ += sizeof(Record);
    return *r;
  }
  uint8_t* data() { return data_; }
  size_t used() const { return used_; }

 private:
  uint8_t* data_;
  size_t capacity_;
  size_t used_ = 0;
};

// The strings and threads of the surroundings, recorded so each lookup can be checked.
class RecordingContext final : public TranslationContext {
 public:
  uint32_t Intern(const char* text) override {
    ++intern_calls;
    for (size_t i = 0; i < strings.size(); ++i) {
      if (strings[i] == text) return static_cast<uint32_t>(i + 1);
    }
    strings.emplace_back(text);
    return static_cast<uint32_t>(strings.size());
  }
  uint32_t HostThread(uint32_t cupti_thread_id) override {
    ++thread_calls;
    return cupti_thread_id == 4242 ? 3u : 0x80000000u | cupti_thread_id;
  }
  const char* ApiName(CUpti_ActivityKind kind, uint32_t cbid) override {
    const char* name = nullptr;
    auto domain = kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    return RealCupti().GetCallbackName(domain, cbid, &name) == CUPTI_SUCCESS ? name : nullptr;
  }
  std::string Name(uint32_t id) const { return id >= 1 && id <= strings.size() ? strings[id - 1] : "<none>"; }

  std::vector<std::string> strings;
  int intern_calls = 0;
  int thread_calls = 0;
};

struct PlantedBuffer {
  alignas(8) uint8_t storage[4096];
  SyntheticBuffer buf{storage, sizeof storage};
  CUpti_ActivityOverheadCommandBufferFullData* overhead_data = nullptr;
};

// One record of every kind we store, with distinct values in every field we keep.
void Plant(PlantedBuffer& p) {
  auto& k = p.buf.Add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.start = 1000;
  k.end = 1500;
  k.deviceId = 1;
  k.streamId = 7;
  k.correlationId = 11;
  k.name = "_Z6vecAddPfS_i";
  k.gridX = 120000;
  k.gridY = 3;
  k.gridZ = 2;
  k.blockX = 256;
  k.blockY = 4;
  k.blockZ = 1;
  k.staticSharedMemory = 4096;
  k.dynamicSharedMemory = 512;
  k.registersPerThread = 40;

  auto& n = p.buf.Add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  n.start = 1600;
  n.end = 2600;
  n.deviceId = 1;
  n.streamId = 13;
  n.correlationId = 12;
  n.name = "_Z32ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
  n.gridX = 2;
  n.gridY = 1;
  n.gridZ = 1;
  n.blockX = 640;
  n.blockY = 1;
  n.blockZ = 1;

  auto& m = p.buf.Add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  m.bytes = 1 << 20;
  m.start = 3000;
  m.end = 3400;
  m.deviceId = 1;
  m.streamId = 7;
  m.correlationId = 21;
  m.runtimeCorrelationId = 20;

  auto& pp = p.buf.Add<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2);
  pp.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  pp.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  pp.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  pp.bytes = 65536;
  pp.start = 3500;
  pp.end = 3600;
  pp.deviceId = 4;  // where CUPTI says the copy ran; we store the source device
  pp.srcDeviceId = 2;
  pp.dstDeviceId = 3;
  pp.streamId = 9;
  pp.correlationId = 22;

  auto& s = p.buf.Add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  s.value = 0xAB;
  s.bytes = 4096;
  s.start = 3700;
  s.end = 3710;
  s.deviceId = 1;
  s.streamId = 7;
  s.correlationId = 23;
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;

  auto& a = p.buf.Add<CUpti_ActivityMemory4>(CUPTI_ACTIVITY_KIND_MEMORY2);
  a.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  a.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  a.correlationId = 31;
  a.address = 0x7f0000001000ull;
  a.bytes = 8u << 20;
  a.timestamp = 900;
  a.deviceId = 1;
  a.contextId = 1;
  a.streamId = 0xFFFFFFFFu;

  auto& f = p.buf.Add<CUpti_ActivityMemory4>(CUPTI_ACTIVITY_KIND_MEMORY2);
  f.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  f.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
  f.correlationId = 32;
  f.address = 0x7f0000002000ull;
  f.bytes = 4u << 20;
  f.timestamp = 5000;
  f.deviceId = 1;
  f.streamId = 7;
  f.isAsync = 1;

  auto& y = p.buf.Add<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  y.start = 4000;
  y.end = 4800;
  y.correlationId = 41;
  y.contextId = 1;
  y.streamId = 7;
  y.cudaEventId = 5;

  auto& o = p.buf.Add<CUpti_ActivityOverhead3>(CUPTI_ACTIVITY_KIND_OVERHEAD);
  o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL;
  o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  o.objectId.pt.processId = 99;
  o.objectId.pt.threadId = 4242;
  o.start = 4100;
  o.end = 4200;
  o.correlationId = 51;
  // CUPTI allocates this for the client to free: the translation must free it (ASan checks).
  p.overhead_data = static_cast<CUpti_ActivityOverheadCommandBufferFullData*>(
      std::malloc(sizeof(CUpti_ActivityOverheadCommandBufferFullData)));
  o.overheadData = p.overhead_data;

  auto& r = p.buf.Add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  r.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  r.start = 950;
  r.end = 990;
  r.processId = 99;
  r.threadId = 4242;
  r.correlationId = 11;
  r.returnValue = 0;

  auto& d = p.buf.Add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  d.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  d.start = 960;
  d.end = 980;
  d.processId = 99;
  d.threadId = 777;
  d.correlationId = 61;
  d.returnValue = 1;

  // A kind we do not store: walked past, counted as ignored.
  auto& c = p.buf.Add<CUpti_ActivityCudaEvent2>(CUPTI_ACTIVITY_KIND_CUDA_EVENT);
  c.correlationId = 71;
}

constexpr size_t kPlantedRecords = 12;
constexpr size_t kPlantedEvents = 11;

void CheckPlanted(const std::vector<commprof_event>& ev, const RecordingContext& ctx) {
  ASSERT_EQ(ev.size(), kPlantedEvents);
  const commprof_event& k = ev[0];
  EXPECT_EQ(k.kind, COMMPROF_KIND_COMPUTE_KERNEL);
  EXPECT_EQ(k.start_ns, 1000u);
  EXPECT_EQ(k.end_ns, 1500u);
  EXPECT_EQ(k.device, 1);
  EXPECT_EQ(k.thread_id, 7u);
  EXPECT_EQ(k.correlation, 11u);
  EXPECT_EQ(ctx.Name(k.name_id), "_Z6vecAddPfS_i");
  EXPECT_EQ(k.seq, 120000ull | (3ull << 32) | (2ull << 48));
  EXPECT_EQ(k.peer, 256 | (4 << 11) | (1 << 22));
  EXPECT_EQ(k.bytes, 4608u);
  EXPECT_EQ(k.datatype, 40);
  EXPECT_EQ(k.comm_id, 0u);
  EXPECT_EQ(k.flags, 0);

  const commprof_event& n = ev[1];
  EXPECT_EQ(n.kind, COMMPROF_KIND_COMM_KERNEL);
  EXPECT_EQ(n.start_ns, 1600u);
  EXPECT_EQ(n.end_ns, 2600u);
  EXPECT_EQ(n.thread_id, 13u);
  EXPECT_EQ(n.correlation, 12u);
  EXPECT_EQ(ctx.Name(n.name_id), "_Z32ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE");
  EXPECT_EQ(n.seq, 2ull | (1ull << 32) | (1ull << 48));
  EXPECT_EQ(n.peer, 640 | (1 << 11) | (1 << 22));

  const commprof_event& m = ev[2];
  EXPECT_EQ(m.kind, COMMPROF_KIND_MEMCPY);
  EXPECT_EQ(m.subtype, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  EXPECT_EQ(m.datatype, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
  EXPECT_EQ(m.reduce_op, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(m.bytes, 1u << 20);
  EXPECT_EQ(m.start_ns, 3000u);
  EXPECT_EQ(m.end_ns, 3400u);
  EXPECT_EQ(m.device, 1);
  EXPECT_EQ(m.thread_id, 7u);
  EXPECT_EQ(m.correlation, 21u);
  EXPECT_EQ(m.seq, 20u);
  EXPECT_EQ(m.flags, COMMPROF_FLAG_NONBLOCKING);
  EXPECT_EQ(m.peer, COMMPROF_NO_PEER);

  const commprof_event& pp = ev[3];
  EXPECT_EQ(pp.kind, COMMPROF_KIND_MEMCPY);
  EXPECT_EQ(pp.subtype, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
  EXPECT_EQ(pp.datatype, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(pp.reduce_op, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(pp.bytes, 65536u);
  EXPECT_EQ(pp.start_ns, 3500u);
  EXPECT_EQ(pp.end_ns, 3600u);
  EXPECT_EQ(pp.device, 2);
  EXPECT_EQ(pp.peer, 3);
  EXPECT_EQ(pp.thread_id, 9u);
  EXPECT_EQ(pp.correlation, 22u);
  EXPECT_EQ(pp.flags, 0);

  const commprof_event& s = ev[4];
  EXPECT_EQ(s.kind, COMMPROF_KIND_MEMSET);
  EXPECT_EQ(s.subtype, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(s.bytes, 4096u);
  EXPECT_EQ(s.seq, 0xABu);
  EXPECT_EQ(s.start_ns, 3700u);
  EXPECT_EQ(s.end_ns, 3710u);
  EXPECT_EQ(s.device, 1);
  EXPECT_EQ(s.thread_id, 7u);
  EXPECT_EQ(s.correlation, 23u);

  const commprof_event& a = ev[5];
  EXPECT_EQ(a.kind, COMMPROF_KIND_MEM_ALLOC);
  EXPECT_EQ(a.start_ns, 900u);
  EXPECT_EQ(a.end_ns, 900u);
  EXPECT_EQ(a.bytes, 8u << 20);
  EXPECT_EQ(a.seq, 0x7f0000001000ull);
  EXPECT_EQ(a.subtype, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(a.device, 1);
  EXPECT_EQ(a.thread_id, 0xFFFFFFFFu);
  EXPECT_EQ(a.correlation, 31u);
  EXPECT_EQ(a.name_id, 0u);
  EXPECT_EQ(a.flags, 0);

  const commprof_event& f = ev[6];
  EXPECT_EQ(f.kind, COMMPROF_KIND_MEM_FREE);
  EXPECT_EQ(f.start_ns, 5000u);
  EXPECT_EQ(f.end_ns, 5000u);
  EXPECT_EQ(f.bytes, 4u << 20);
  EXPECT_EQ(f.seq, 0x7f0000002000ull);
  EXPECT_EQ(f.subtype, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED);
  EXPECT_EQ(f.thread_id, 7u);
  EXPECT_EQ(f.correlation, 32u);
  EXPECT_EQ(f.flags, COMMPROF_FLAG_NONBLOCKING);

  const commprof_event& y = ev[7];
  EXPECT_EQ(y.kind, COMMPROF_KIND_SYNC);
  EXPECT_EQ(y.subtype, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
  EXPECT_EQ(y.start_ns, 4000u);
  EXPECT_EQ(y.end_ns, 4800u);
  EXPECT_EQ(y.thread_id, kUnknownHostThread);
  EXPECT_EQ(y.peer, 7);
  EXPECT_EQ(y.seq, 5u);
  EXPECT_EQ(y.correlation, 41u);
  EXPECT_EQ(y.device, COMMPROF_HOST_DEVICE);

  const commprof_event& o = ev[8];
  EXPECT_EQ(o.kind, COMMPROF_KIND_GPU_OVERHEAD);
  EXPECT_EQ(o.start_ns, 4100u);
  EXPECT_EQ(o.end_ns, 4200u);
  EXPECT_EQ(o.seq, static_cast<uint64_t>(CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL));
  EXPECT_EQ(ctx.Name(o.name_id), "command_buffer_full");
  EXPECT_EQ(o.thread_id, 3u);  // CUPTI thread 4242 is our thread 3 (RecordingContext)
  EXPECT_EQ(o.device, COMMPROF_HOST_DEVICE);
  EXPECT_EQ(o.correlation, 51u);

  const commprof_event& r = ev[9];
  EXPECT_EQ(r.kind, COMMPROF_KIND_CUDA_API);
  EXPECT_EQ(ctx.Name(r.name_id), "cudaLaunchKernel");  // the real table's cudaLaunchKernel_v7000
  EXPECT_EQ(r.subtype, CUPTI_ACTIVITY_KIND_RUNTIME);
  EXPECT_EQ(r.seq, static_cast<uint64_t>(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_EQ(r.start_ns, 950u);
  EXPECT_EQ(r.end_ns, 990u);
  EXPECT_EQ(r.thread_id, 3u);
  EXPECT_EQ(r.correlation, 11u);
  EXPECT_EQ(r.peer, 0);
  EXPECT_EQ(r.device, COMMPROF_HOST_DEVICE);

  const commprof_event& d = ev[10];
  EXPECT_EQ(d.kind, COMMPROF_KIND_CUDA_API);
  EXPECT_EQ(ctx.Name(d.name_id), "cuLaunchKernel");
  EXPECT_EQ(d.subtype, CUPTI_ACTIVITY_KIND_DRIVER);
  EXPECT_EQ(d.seq, static_cast<uint64_t>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  EXPECT_EQ(d.start_ns, 960u);
  EXPECT_EQ(d.end_ns, 980u);
  EXPECT_EQ(d.thread_id, 0x80000000u | 777u);  // a thread that never recorded with us
  EXPECT_EQ(d.correlation, 61u);
  EXPECT_EQ(d.peer, 1);
}

TEST(CuptiTranslation, EveryStoredFieldOfEachRecordKindFromABufferWalkedByLibcupti) {
  PlantedBuffer p;
  Plant(p);
  RecordingContext ctx;
  CuptiTranslator translator(ctx);
  std::vector<commprof_event> ev;
  BufferStats stats = WalkActivityBuffer(RealCupti().GetNextRecord, p.buf.data(), p.buf.used(), translator,
                                         [&](const commprof_event& e) { ev.push_back(e); });
  EXPECT_EQ(stats.records, kPlantedRecords);
  EXPECT_EQ(stats.translated, kPlantedEvents);
  EXPECT_EQ(stats.ignored, 1u);
  // The last event: the driver record (the CUDA_EVENT record after it is ignored).
  CheckPlanted(ev, ctx);
}

TEST(CuptiTranslation, NamesAndThreadsAreLookedUpOncePerRun) {
  RecordingContext ctx;
  CuptiTranslator translator(ctx);
  for (int round = 0; round < 3; ++round) {
    PlantedBuffer p;
    Plant(p);
    std::vector<commprof_event> ev;
    WalkActivityBuffer(RealCupti().GetNextRecord, p.buf.data(), p.buf.used(), translator,
                       [&](const commprof_event& e) { ev.push_back(e); });
    CheckPlanted(ev, ctx);
  }
  // 2 kernel names, 1 overhead name, 2 API names; threads 4242 and 777.
  EXPECT_EQ(ctx.intern_calls, 5);
  EXPECT_EQ(ctx.thread_calls, 2);
}

TEST(CuptiTranslation, NcclKernelsAreRecognisedMangledOrNot) {
  EXPECT_TRUE(IsNcclKernelName("ncclKernel_AllReduce_RING_LL_Sum_float"));
  EXPECT_TRUE(IsNcclKernelName("ncclDevKernel_AllGather_RING_LL"));
  EXPECT_TRUE(IsNcclKernelName("_Z29ncclDevKernel_Generic_4ILi0EEv24ncclDevKernelArgsStorage"));
  EXPECT_FALSE(IsNcclKernelName("_ZN4nccl6kernelEv"));  // a function in a namespace `nccl`: not NCCL's kernel
  EXPECT_FALSE(IsNcclKernelName("_Z6vecAddPfS_i"));
  EXPECT_FALSE(IsNcclKernelName("gemm_nccl_like"));
  EXPECT_FALSE(IsNcclKernelName(nullptr));
}

TEST(CuptiBufferPool, LendsEachBufferOnceReusesReturnedOnesAndRefusesWhenAllAreOut) {
  CuptiBufferPool pool(1000, 3);
  EXPECT_EQ(pool.buffer_bytes(), 1000u);
  uint8_t* a = pool.Acquire();
  uint8_t* b = pool.Acquire();
  uint8_t* c = pool.Acquire();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(a != b && b != c && a != c);
  for (uint8_t* x : {a, b, c}) EXPECT_EQ(reinterpret_cast<uintptr_t>(x) % 8, 0u);
  EXPECT_EQ(pool.Acquire(), nullptr);
  EXPECT_TRUE(pool.Release(b));
  EXPECT_EQ(pool.Acquire(), b);  // the same memory again: no allocation per buffer
  uint8_t foreign[8];
  EXPECT_FALSE(pool.Release(foreign));
}

// ---- the source, driven as CUPTI drives it

Config TestConfig() {
  Config c;
  c.buffer_events = 1024;
  c.memory_mb = 8;
  c.flush_ms = 5;
  c.request_slots = 64;
  c.cuda_api = "launch";
  c.cupti_buffer_kb = 64;
  c.cupti_buffers = 2;
  return c;
}

Identity TestIdentity() {
  Identity id;
  id.rank = 1;
  id.host = "cupti-test";
  return id;
}

// What a GPU-backed libcupti would do for the calls that need one; the rest is the real library.
struct FakeGpuCupti {
  static inline std::vector<CUpti_ActivityKind> enabled;
  static inline std::vector<CUpti_CallbackId> runtime_apis, driver_apis;
  static inline CUpti_BuffersCallbackRequestFunc request = nullptr;
  static inline CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  static inline CUpti_TimestampCallbackFunc clock = nullptr;
  static inline std::vector<std::pair<uint8_t*, size_t>> filled;  // buffers CUPTI holds, with valid bytes
  // Atomic: CUPTI's count is thread-safe, and buffers complete on several threads at once.
  static inline std::atomic<size_t> dropped = 0;
  static inline CUpti_ActivityKind fail_kind = CUPTI_ACTIVITY_KIND_INVALID;
  static inline int flushes = 0;
  static inline uint32_t last_flush_flag = 0;
  static inline int per_thread_buffers = -1;

  static void Reset() {
    enabled.clear();
    runtime_apis.clear();
    driver_apis.clear();
    request = nullptr;
    complete = nullptr;
    clock = nullptr;
    filled.clear();
    dropped = 0;
    fail_kind = CUPTI_ACTIVITY_KIND_INVALID;
    flushes = 0;
    per_thread_buffers = -1;
  }
  static CuptiLibrary Table() {
    CuptiLibrary t = RealCupti();  // walker, names, result strings: the real ones
    t.Enable = [](CUpti_ActivityKind k) {
      if (k == fail_kind) return CUPTI_ERROR_UNKNOWN;
      enabled.push_back(k);
      return CUPTI_SUCCESS;
    };
    t.Disable = [](CUpti_ActivityKind k) {
      std::erase(enabled, k);
      return CUPTI_SUCCESS;
    };
    t.EnableRuntimeApi = [](CUpti_CallbackId cbid, uint8_t on) {
      if (on != 0) {
        runtime_apis.push_back(cbid);
      } else {
        std::erase(runtime_apis, cbid);
      }
      return CUPTI_SUCCESS;
    };
    t.EnableDriverApi = [](CUpti_CallbackId cbid, uint8_t on) {
      if (on != 0) {
        driver_apis.push_back(cbid);
      } else {
        std::erase(driver_apis, cbid);
      }
      return CUPTI_SUCCESS;
    };
    t.RegisterCallbacks = [](CUpti_BuffersCallbackRequestFunc rq, CUpti_BuffersCallbackCompleteFunc cp) {
      request = rq;
      complete = cp;
      return CUPTI_SUCCESS;
    };
    t.SetAttribute = [](CUpti_ActivityAttribute a, size_t* size, void* value) {
      if (a == CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER && *size == 1) {
        per_thread_buffers = *static_cast<uint8_t*>(value);
        return CUPTI_SUCCESS;
      }
      return CUPTI_ERROR_INVALID_PARAMETER;
    };
    t.RegisterTimestampCallback = [](CUpti_TimestampCallbackFunc c) {
      clock = c;
      return CUPTI_SUCCESS;
    };
    // FlushAll hands every held buffer back on the calling thread, as CUPTI does.
    t.FlushAll = [](uint32_t flag) {
      ++flushes;
      last_flush_flag = flag;
      auto held = filled;
      filled.clear();
      for (auto& [b, valid] : held) complete(nullptr, 0, b, 0, valid);
      return CUPTI_SUCCESS;
    };
    t.GetNumDroppedRecords = [](CUcontext, uint32_t, size_t* n) {
      *n = dropped.exchange(0);  // reading resets the count
      return CUPTI_SUCCESS;
    };
    return t;
  }
};

std::vector<commprof_event> Drain(Runtime& rt) {
  std::vector<commprof_event> out;
  commprof_event scratch[64];
  rt.DrainAll(scratch, 64, [&](const commprof_event* e, uint32_t n) { out.insert(out.end(), e, e + n); });
  return out;
}

std::map<std::string, uint64_t> CountersOf(const Runtime& rt) {
  std::map<std::string, uint64_t> c;
  for (const auto& [k, v] : rt.Counters().counters) c[k] = v;
  return c;
}

TEST(CuptiSource, DrivenAsCuptiDrivesItRecordsStreamsOnOurClockAndCountsDrops) {
  FakeGpuCupti::Reset();
  CuptiLibrary table = FakeGpuCupti::Table();
  Runtime rt(TestConfig(), TestIdentity());
  CuptiSource::Options o;
  o.buffer_bytes = 64 << 10;
  o.buffers = 2;
  CuptiSource source(rt, table, o);
  ASSERT_TRUE(source.Start());
  EXPECT_EQ(FakeGpuCupti::per_thread_buffers, 0) << "shared activity buffers, set before anything is enabled";

  // The kinds of docs/cupti.md, and launch calls only through the per-function switches.
  std::vector<CUpti_ActivityKind> want = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                          CUPTI_ACTIVITY_KIND_MEMCPY,
                                          CUPTI_ACTIVITY_KIND_MEMCPY2,
                                          CUPTI_ACTIVITY_KIND_MEMSET,
                                          CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                          CUPTI_ACTIVITY_KIND_OVERHEAD,
                                          CUPTI_ACTIVITY_KIND_MEMORY2};
  EXPECT_EQ(FakeGpuCupti::enabled, want);
  EXPECT_NE(std::find(FakeGpuCupti::runtime_apis.begin(), FakeGpuCupti::runtime_apis.end(),
                      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000),
            FakeGpuCupti::runtime_apis.end());
  EXPECT_NE(std::find(FakeGpuCupti::driver_apis.begin(), FakeGpuCupti::driver_apis.end(),
                      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel),
            FakeGpuCupti::driver_apis.end());

  // Our clock is CUPTI's: the registered callback reads the runtime's Now().
  ASSERT_NE(FakeGpuCupti::clock, nullptr);
  uint64_t before = rt.Now();
  uint64_t t = FakeGpuCupti::clock();
  uint64_t after = rt.Now();
  EXPECT_LE(before, t);
  EXPECT_LE(t, after);

  // CUPTI asks for buffers; the pool lends two, then declines (counted).
  uint8_t* b1 = nullptr;
  uint8_t* b2 = nullptr;
  uint8_t* b3 = reinterpret_cast<uint8_t*>(1);
  size_t size = 0, max_records = 99;
  FakeGpuCupti::request(&b1, &size, &max_records);
  EXPECT_EQ(size, 64u << 10);
  EXPECT_EQ(max_records, 0u);
  FakeGpuCupti::request(&b2, &size, &max_records);
  FakeGpuCupti::request(&b3, &size, &max_records);
  ASSERT_NE(b1, nullptr);
  ASSERT_NE(b2, nullptr);
  EXPECT_EQ(b3, nullptr);

  // CUPTI fills the first buffer and drops 7 records for want of a third; a step flush delivers it.
  PlantedBuffer p;
  Plant(p);
  std::memcpy(b1, p.buf.data(), p.buf.used());
  FakeGpuCupti::filled.emplace_back(b1, p.buf.used());
  FakeGpuCupti::dropped = 7;
  source.Flush();
  EXPECT_EQ(FakeGpuCupti::last_flush_flag, 0u);
  std::vector<commprof_event> ev = Drain(rt);
  ASSERT_EQ(ev.size(), kPlantedEvents);
  // GPU events keep their stream as thread_id (Runtime::Record would have stamped this thread).
  EXPECT_EQ(ev[0].thread_id, 7u);
  EXPECT_EQ(ev[1].thread_id, 13u);
  EXPECT_EQ(ev[3].thread_id, 9u);
  EXPECT_EQ(rt.strings().View(ev[0].name_id), "_Z6vecAddPfS_i");
  EXPECT_EQ(rt.strings().View(ev[9].name_id), "cudaLaunchKernel");
  // The launching thread 4242 never recorded here: a foreign thread id, not a wrong index.
  EXPECT_EQ(ev[9].thread_id, Runtime::kForeignThread | 4242u);
  // The returned buffer is lent again.
  uint8_t* again = nullptr;
  FakeGpuCupti::request(&again, &size, &max_records);
  EXPECT_EQ(again, b1);

  // At the end: kinds off, a forced flush of what CUPTI still holds, counters for the bye.
  std::memcpy(again, p.buf.data(), sizeof(CUpti_ActivityKernel10));
  FakeGpuCupti::filled.emplace_back(again, sizeof(CUpti_ActivityKernel10));
  FakeGpuCupti::dropped = 2;
  source.Stop();
  EXPECT_TRUE(FakeGpuCupti::enabled.empty());
  EXPECT_TRUE(FakeGpuCupti::runtime_apis.empty() && FakeGpuCupti::driver_apis.empty());
  EXPECT_EQ(FakeGpuCupti::last_flush_flag, static_cast<uint32_t>(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  EXPECT_EQ(Drain(rt).size(), 1u);
  auto c = CountersOf(rt);
  EXPECT_EQ(c["dropped_cupti_records"], 9u);
  EXPECT_EQ(c["cupti_buffers_refused"], 1u);
  EXPECT_EQ(c["cupti_records"], kPlantedEvents + 1);
  EXPECT_EQ(c["cupti_records_ignored"], 1u);
  EXPECT_EQ(c.count("gpu_tracing_unavailable"), 0u);
  source.Stop();  // idempotent
  EXPECT_EQ(FakeGpuCupti::flushes, 2);
}

// The whole path of a GPU record: a buffer completed on CUPTI's worker thread, the runtime's ring,
// the shipper, the aggregator and the HDF5 file, read back by the analysis reader; the end-of-run
// forced flush and the dropped count land in the rank's counters.
TEST(CuptiSource, RecordsFromCuptisWorkerThreadReachTheFileWithStreamsNamesAndCounters) {
  test_support::TempDir dir("commprof-cupti");
  ASSERT_FALSE(dir.path().empty());
  test_support::LiveAggregator agg(dir / "out.h5", StreamPolicy{"cupti-secret", "job-cupti"}, 1);
  ASSERT_TRUE(agg.ok());
  FakeGpuCupti::Reset();
  CuptiLibrary table = FakeGpuCupti::Table();
  {
    Config c = TestConfig();
    c.aggregator = "127.0.0.1:" + std::to_string(agg.port());
    c.secret = "cupti-secret";
    c.job_id = "job-cupti";
    c.spool_dir = dir / "spool";
    c.connect_timeout_ms = 2000;
    Identity id = TestIdentity();
    id.rank = 0;
    Runtime rt(c, id);
    rt.Start();
    CuptiSource source(rt, table, {});
    ASSERT_TRUE(source.Start());
    PlantedBuffer p;
    Plant(p);
    std::thread cupti_worker([&] {
      uint8_t* b = nullptr;
      size_t size = 0, max_records = 0;
      FakeGpuCupti::request(&b, &size, &max_records);
      ASSERT_NE(b, nullptr);
      std::memcpy(b, p.buf.data(), p.buf.used());
      FakeGpuCupti::complete(nullptr, 0, b, size, p.buf.used());
    });
    cupti_worker.join();
    // One kernel still in CUPTI's hands at the end, and 5 records CUPTI could not store.
    uint8_t* b = nullptr;
    size_t size = 0, max_records = 0;
    FakeGpuCupti::request(&b, &size, &max_records);
    ASSERT_NE(b, nullptr);
    std::memcpy(b, p.buf.data(), sizeof(CUpti_ActivityKernel10));
    FakeGpuCupti::filled.emplace_back(b, sizeof(CUpti_ActivityKernel10));
    FakeGpuCupti::dropped = 5;
    source.Stop();  // what Runtime::Shutdown does first for its own tracer
    rt.Shutdown();
  }
  ASSERT_TRUE(test_support::WaitFor([&] { return agg.stats().ended.load() == 1; }));
  Status fin = agg.Finish();
  ASSERT_TRUE(fin.ok()) << fin.message();

  auto r = ProfileReader::Open(dir / "out.h5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const RankInfo& rank = r.value()->info().ranks.at(0);
  EXPECT_EQ(rank.status, "complete");
  EXPECT_EQ(rank.counters.at("cupti_records"), kPlantedEvents + 1);
  EXPECT_EQ(rank.counters.at("dropped_cupti_records"), 5u);
  EXPECT_EQ(rank.counters.at("dropped_events"), 5u) << "CUPTI's drops count among the rank's dropped events";
  EXPECT_EQ(rank.counters.at("dropped_ring_full"), 0u);
  auto strings = r.value()->Strings(0);
  ASSERT_TRUE(strings.ok()) << strings.status().message();
  std::vector<commprof_event> ev = test_support::ReadEvents(*r.value(), 0);
  ASSERT_EQ(ev.size(), kPlantedEvents + 1);
  std::map<uint8_t, int> per_kind;
  for (const auto& e : ev) ++per_kind[e.kind];
  EXPECT_EQ(per_kind[COMMPROF_KIND_COMPUTE_KERNEL], 2);
  EXPECT_EQ(per_kind[COMMPROF_KIND_COMM_KERNEL], 1);
  EXPECT_EQ(per_kind[COMMPROF_KIND_MEMCPY], 2);
  EXPECT_EQ(per_kind[COMMPROF_KIND_MEMSET], 1);
  EXPECT_EQ(per_kind[COMMPROF_KIND_MEM_ALLOC], 1);
  EXPECT_EQ(per_kind[COMMPROF_KIND_MEM_FREE], 1);
  EXPECT_EQ(per_kind[COMMPROF_KIND_SYNC], 1);
  EXPECT_EQ(per_kind[COMMPROF_KIND_GPU_OVERHEAD], 1);
  EXPECT_EQ(per_kind[COMMPROF_KIND_CUDA_API], 2);
  for (const auto& e : ev) {
    if (e.kind == COMMPROF_KIND_COMPUTE_KERNEL) {
      EXPECT_EQ(e.thread_id, 7u);
      EXPECT_EQ(strings.value().at(e.name_id), "_Z6vecAddPfS_i");
      EXPECT_EQ(e.start_ns, 1000u);
      EXPECT_EQ(e.end_ns, 1500u);
    }
    if (e.kind == COMMPROF_KIND_MEM_ALLOC) {
      EXPECT_EQ(e.bytes, 8u << 20);
      EXPECT_EQ(e.seq, 0x7f0000001000ull);
      EXPECT_EQ(e.device, 1);
    }
    if (e.kind == COMMPROF_KIND_CUDA_API && e.subtype == CUPTI_ACTIVITY_KIND_RUNTIME) {
      EXPECT_EQ(strings.value().at(e.name_id), "cudaLaunchKernel");
    }
  }
}

// CUPTI may complete buffers on its worker thread and in a flushing thread at the same time:
// every record of every buffer still becomes exactly one correct event.
TEST(CuptiSource, BuffersCompletedOnSeveralThreadsAtOnceLoseAndMixNothing) {
  FakeGpuCupti::Reset();
  CuptiLibrary table = FakeGpuCupti::Table();
  Config c = TestConfig();
  c.buffer_events = 4096;
  Runtime rt(c, TestIdentity());
  CuptiSource source(rt, table, {});
  ASSERT_TRUE(source.Start());
  constexpr int kThreads = 6;  // more than the source's translators
  constexpr int kBuffersEach = 40;
  PlantedBuffer p;
  Plant(p);
  std::free(p.overhead_data);  // copied many times below: no record may own a heap block
  auto* overhead = reinterpret_cast<CUpti_ActivityOverhead3*>(
      p.buf.data() + 2 * sizeof(CUpti_ActivityKernel10) + 2 * sizeof(CUpti_ActivityMemcpy6) +
      sizeof(CUpti_ActivityMemset4) + 2 * sizeof(CUpti_ActivityMemory4) + sizeof(CUpti_ActivitySynchronization2));
  ASSERT_EQ(overhead->kind, CUPTI_ACTIVITY_KIND_OVERHEAD);
  overhead->overheadData = nullptr;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kBuffersEach; ++i) {
        uint8_t* b = nullptr;
        size_t size = 0, max_records = 0;
        FakeGpuCupti::request(&b, &size, &max_records);
        if (b == nullptr) {
          ADD_FAILURE() << "the pool ran dry with at most " << kThreads << " buffers out";
          return;
        }
        std::memcpy(b, p.buf.data(), p.buf.used());
        FakeGpuCupti::complete(nullptr, 0, b, size, p.buf.used());
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<commprof_event> ev = Drain(rt);
  ASSERT_EQ(ev.size(), static_cast<size_t>(kThreads * kBuffersEach) * kPlantedEvents);
  std::map<uint8_t, int> per_kind;
  for (const auto& e : ev) {
    ++per_kind[e.kind];
    if (e.kind == COMMPROF_KIND_COMPUTE_KERNEL) {
      EXPECT_EQ(rt.strings().View(e.name_id), "_Z6vecAddPfS_i");
      EXPECT_EQ(e.thread_id, 7u);
    }
    if (e.kind == COMMPROF_KIND_CUDA_API && e.subtype == CUPTI_ACTIVITY_KIND_DRIVER) {
      EXPECT_EQ(rt.strings().View(e.name_id), "cuLaunchKernel");
    }
  }
  EXPECT_EQ(per_kind[COMMPROF_KIND_COMPUTE_KERNEL], kThreads * kBuffersEach);
  EXPECT_EQ(per_kind[COMMPROF_KIND_CUDA_API], 2 * kThreads * kBuffersEach);
  EXPECT_EQ(source.records_translated(), static_cast<uint64_t>(kThreads * kBuffersEach) * kPlantedEvents);
}

TEST(CuptiSource, HostApiRecordsOfARecordingThreadCarryItsIndex) {
  FakeGpuCupti::Reset();
  CuptiLibrary table = FakeGpuCupti::Table();
  Runtime rt(TestConfig(), TestIdentity());
  commprof_event mark{};
  rt.Record(mark);  // this thread registers with the runtime
  uint32_t my_index = rt.Thread()->index;
  CuptiSource source(rt, table, {});
  ASSERT_TRUE(source.Start());
  uint8_t* b = nullptr;
  size_t size = 0, max_records = 0;
  FakeGpuCupti::request(&b, &size, &max_records);
  ASSERT_NE(b, nullptr);
  auto* r = reinterpret_cast<CUpti_ActivityAPI*>(b);
  std::memset(r, 0, sizeof *r);
  r->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  r->cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  r->threadId = rt.Thread()->os_tid;
  FakeGpuCupti::filled.emplace_back(b, sizeof *r);
  source.Flush();
  std::vector<commprof_event> ev = Drain(rt);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].kind, COMMPROF_KIND_CUDA_API);
  EXPECT_EQ(ev[1].thread_id, my_index);
}

TEST(CuptiSource, AnyCuptiErrorTurnsTracingOffWithOneLogLineNamingRankCallAndError) {
  FakeGpuCupti::Reset();
  FakeGpuCupti::fail_kind = CUPTI_ACTIVITY_KIND_MEMORY2;  // the last call: everything before it is undone
  CuptiLibrary table = FakeGpuCupti::Table();
  Runtime rt(TestConfig(), TestIdentity());
  CuptiSource source(rt, table, {});
  SetLogPrefix("commprof[rank 1]");
  testing::internal::CaptureStderr();
  EXPECT_FALSE(source.Start());
  source.Flush();
  source.Stop();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(
      err,
      "commprof[rank 1]: warning: GPU tracing unavailable: cuptiActivityEnable(MEMORY2) failed: CUPTI_ERROR_UNKNOWN "
      "(999); the job runs on without CUDA records\n");
  EXPECT_TRUE(FakeGpuCupti::enabled.empty()) << "the kinds enabled before the failure are disabled again";
  EXPECT_TRUE(FakeGpuCupti::runtime_apis.empty() && FakeGpuCupti::driver_apis.empty());
  EXPECT_EQ(FakeGpuCupti::flushes, 0);
  EXPECT_EQ(CountersOf(rt)["gpu_tracing_unavailable"], 1u);
}

// The real libcupti on a machine without a GPU or driver.
TEST(CuptiSource, RealLibcuptiWithoutAGpuReportsTracingUnavailableOnce) {
  Runtime rt(TestConfig(), TestIdentity());
  SetLogPrefix("commprof[rank 1]");
  testing::internal::CaptureStderr();
  std::unique_ptr<GpuTracer> tracer = StartGpuTracer(rt);
  std::string err = testing::internal::GetCapturedStderr();
  if (CountersOf(rt).count("gpu_tracing_unavailable") == 0) {
    GTEST_SKIP() << "CUPTI started: this machine has a working GPU driver, the no-GPU path cannot be tested";
  }
  EXPECT_NE(err.find("commprof[rank 1]: warning: GPU tracing unavailable: cupti"), std::string::npos) << err;
  EXPECT_NE(err.find("CUPTI_ERROR_"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  ASSERT_NE(tracer, nullptr);
  tracer->Flush();  // harmless when tracing is off
  tracer->Stop();
}

}  // namespace
}  // namespace commprof
