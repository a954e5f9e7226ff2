// Loads the plugin the way NCCL 2.28's loader does (docs/nccl-plugin.md §1), next to the real libnccl.so.2,
// without a GPU: NCCL_PROFILER_PLUGIN=commprof -> dlopen("commprof") fails -> the
// libnccl-profiler-<name>.so rule, found on LD_LIBRARY_PATH -> dlsym ncclProfiler_v5, v4, v3, v2,
// v1. Then drives each table once in an unprofiled process (mask 0, NULL context) to show the
// shims tolerate the calls NCCL makes. Exit 77 (skipped) when libnccl.so.2 is absent.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "nccl_hooks/nccl_profiler_abi.h"

namespace {

int failures = 0;
void Check(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

bool FileContains(const std::string& bytes, const char* needle) { return bytes.find(needle) != std::string::npos; }

// openPluginLib (2.28): the value as given, then libnccl-profiler-<value>.so when it has no '/'
// and is not already lib*.so.
void* OpenLikeNccl(const std::string& value, std::string* opened) {
  void* h = ::dlopen(value.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h != nullptr) {
    *opened = value;
    return h;
  }
  if (value.find('/') != std::string::npos ||
      (value.rfind("lib", 0) == 0 && value.size() > 3 && value.compare(value.size() - 3, 3, ".so") == 0))
    return nullptr;
  std::string name = "libnccl-profiler-" + value + ".so";
  h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h != nullptr) *opened = name;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  const char* nccl_path = argc > 1 ? argv[1] : "/usr/local/cuda/lib64/libnccl.so.2";
  if (::access(nccl_path, R_OK) != 0) {
    std::printf("SKIPPED: %s is not present (no CUDA toolkit NCCL on this machine)\n", nccl_path);
    return 77;
  }
  ::unsetenv("COMMPROF_AGGREGATOR");
  ::unsetenv("COMMPROF_SPOOL_DIR");

  void* nccl = ::dlopen(nccl_path, RTLD_NOW | RTLD_LOCAL);
  Check(nccl != nullptr, "the real libnccl.so.2 loads without a GPU");
  if (nccl == nullptr) std::printf("  dlerror: %s\n", ::dlerror());
  std::ifstream f(nccl_path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // The names its loader looks up are the ones we export, and it knows the libnccl-profiler prefix.
  Check(FileContains(bytes, "ncclProfiler_v5") && FileContains(bytes, "ncclProfiler_v4") &&
            FileContains(bytes, "ncclProfiler_v2"),
        "libnccl.so.2 names ncclProfiler_v5/_v4/_v2");
  Check(FileContains(bytes, "libnccl-profiler") && FileContains(bytes, "NCCL_PROFILER_PLUGIN"),
        "libnccl.so.2 has the NCCL_PROFILER_PLUGIN / libnccl-profiler-<name>.so rule");

  std::string opened;
  void* plugin = OpenLikeNccl("commprof", &opened);
  Check(plugin != nullptr && opened == "libnccl-profiler-commprof.so",
        "NCCL_PROFILER_PLUGIN=commprof resolves to libnccl-profiler-commprof.so on LD_LIBRARY_PATH");
  if (plugin == nullptr) {
    std::printf("  dlerror: %s\n", ::dlerror());
    return 1;
  }
  auto* v5 = static_cast<CpNcclProfilerV5*>(::dlsym(plugin, "ncclProfiler_v5"));
  auto* v4 = static_cast<CpNcclProfilerV4*>(::dlsym(plugin, "ncclProfiler_v4"));
  auto* v2 = static_cast<CpNcclProfilerV2*>(::dlsym(plugin, "ncclProfiler_v2"));
  Check(v5 != nullptr && v4 != nullptr && v2 != nullptr, "dlsym finds ncclProfiler_v5, _v4 and _v2");
  Check(::dlsym(plugin, "ncclProfiler_v3") == nullptr && ::dlsym(plugin, "ncclProfiler_v1") == nullptr,
        "no v3/v1 table (NCCL takes v5 first)");
  if (v5 == nullptr || v4 == nullptr || v2 == nullptr) return 1;
  Check(std::strcmp(v5->name, "commprof") == 0, "v5 table name is \"commprof\"");

  // v5: init, the application-thread sequence of one AllReduce, KernelCh on a second thread.
  void* ctx = nullptr;
  int mask = 0;
  mask = -1;
  void* junk = reinterpret_cast<void*>(0x1);
  ctx = junk;
  Check(v5->init(&ctx, 0x1234, &mask, "world", 1, 4, 0, nullptr) == kCpNcclSuccess, "v5 init succeeds");
  // Profiling is off in this process (no COMMPROF_AGGREGATOR/SPOOL_DIR): no events asked for and a
  // NULL context; the calls below then exercise the NULL-context path NCCL takes after that.
  // (The mask of a profiled process is checked by check_runtime_records.py.)
  Check(mask == 0 && ctx == nullptr, "unprofiled process: mask 0 and a NULL context");
  CpNcclEventDescrV5 d{};
  d.type = kCpNcclGroupApi;
  d.groupApi.groupDepth = 1;
  void* hGA = nullptr;
  v5->startEvent(ctx, &hGA, &d);
  v5->recordEventState(hGA, kCpNcclStateGroupStartApiStop, nullptr);
  d = CpNcclEventDescrV5{};
  d.type = kCpNcclColl;
  d.parentObj = nullptr;
  d.coll.func = "AllReduce";
  d.coll.count = 16;
  d.coll.datatype = "ncclFloat32";
  d.coll.nChannels = 1;
  void* hC = nullptr;
  v5->startEvent(ctx, &hC, &d);
  v5->stopEvent(hC);
  v5->stopEvent(hGA);
  std::thread proxy([&] {
    CpNcclEventDescrV5 k{};
    k.type = kCpNcclKernelCh;
    k.parentObj = hC;
    k.kernelCh.pTimer = 1000;
    void* hK = nullptr;
    v5->startEvent(ctx, &hK, &k);
    CpNcclStateArgsV5 args{};
    args.kernelCh.pTimer = 2000;
    v5->recordEventState(hK, kCpNcclStateKernelChStop, &args);
    v5->stopEvent(hK);
  });
  proxy.join();
  Check(v5->stopEvent(nullptr) == kCpNcclSuccess &&
            v5->recordEventState(nullptr, kCpNcclStateKernelChStop, nullptr) == kCpNcclSuccess,
        "NULL handles are accepted");
  void* h = nullptr;
  Check(v5->startEvent(nullptr, &h, &d) == kCpNcclSuccess && h == nullptr, "a NULL context gives a NULL handle");
  Check(v5->finalize(ctx) == kCpNcclSuccess, "v5 finalize succeeds");

  void* ctx4 = nullptr;
  mask = 0;
  mask = -1;
  Check(v4->init(&ctx4, &mask, "world", 0x1234, 1, 4, 0, nullptr) == kCpNcclSuccess && mask == 0,
        "v4 init (mask 2nd, hash 4th) succeeds, mask 0 when unprofiled");
  Check(v4->finalize(ctx4) == kCpNcclSuccess, "v4 finalize succeeds");
  void* ctx2 = nullptr;
  mask = 0;
  mask = -1;
  Check(v2->init(&ctx2, &mask) == kCpNcclSuccess && mask == 0, "v2 init succeeds, mask 0 when unprofiled");
  Check(v2->finalize(ctx2) == kCpNcclSuccess, "v2 finalize succeeds");

  ::dlclose(plugin);
  if (nccl != nullptr) ::dlclose(nccl);
  std::printf("%s\n", failures == 0 ? "PASS" : "FAILED");
  return failures == 0 ? 0 : 1;
}
