// Synthetic multi-rank Kineto traces for the importer's tests and benchmark, in the format
// docs/kineto-import.md describes: the top-level keys, both time dialects, GPU rows on pid =
// device / tid = stream, cuda_runtime launches linked by `correlation`, the
// record_param_comms > nccl:* > cudaLaunchKernelExC nesting, collective args copied onto the NCCL
// kernel (new dialect only), flows and metadata rows that an importer must skip.
//
// The planted truth: iteration i starts at true time start + i * period on every rank. Each rank
// computes (one kernel of compute_ns, plus straggler_delay_ns on the straggler), then launches one
// AllReduce whose kernel starts when the rank gets there and ends, on every rank, transfer_ns after
// the last rank arrived (+ end_jitter_ns * (rank % 3) so ends are not bit-identical). Rank r's clock
// reads true time + clock_skew_ns[r], so the offset `--align collective-ends` must recover for
// rank r against rank 0 is skew[0] - skew[r] (within the end jitter).
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace commprof::test_support {

struct KinetoSynth {
  uint32_t ranks = 4;
  uint32_t iterations = 20;
  bool new_dialect = true;  // float µs on baseTimeNanoseconds + pg_config + kernel args; else epoch µs ints
  bool gzip = false;
  int32_t straggler = -1;  // rank that computes longer, -1: none
  int64_t straggler_delay_ns = 0;
  std::vector<int64_t> clock_skew_ns;  // per rank, default 0
  int64_t compute_ns = 2'000'000;
  int64_t transfer_ns = 500'000;
  int64_t end_jitter_ns = 1'000;
  int64_t period_ns = 10'000'000;
  uint32_t compute_kernels = 1;                  // per iteration (more make bigger files for the benchmark)
  int64_t start_ns = 1'711'964'700'000'000'000;  // true start, epoch ns (a multiple of 1000)
  int64_t base_ns = 1'711'964'646'000'000'000;   // baseTimeNanoseconds of the new dialect
};

namespace kineto_synth_detail {

inline std::string Ts(const KinetoSynth& s, int64_t abs_ns) {
  char buf[48];
  if (s.new_dialect) {
    int64_t rel = abs_ns - s.base_ns;
    std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(rel / 1000),
                  static_cast<long long>(rel % 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(abs_ns / 1000));  // epoch µs, integer
  }
  return buf;
}
inline std::string Dur(const KinetoSynth& s, int64_t ns) {
  char buf[48];
  if (s.new_dialect) {
    std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(ns / 1000));
  }
  return buf;
}

}  // namespace kineto_synth_detail

// The text of rank `rank`'s trace.
inline std::string KinetoSynthTrace(const KinetoSynth& s, uint32_t rank) {
  using kineto_synth_detail::Dur;
  using kineto_synth_detail::Ts;
  const int64_t skew = rank < s.clock_skew_ns.size() ? s.clock_skew_ns[rank] : 0;
  const int pid = 1000 + static_cast<int>(rank), tid = 2000 + static_cast<int>(rank);
  const int device = static_cast<int>(rank % 8);
  std::string ranks_list;
  for (uint32_t r = 0; r < s.ranks; ++r) ranks_list += (r ? ", " : "") + std::to_string(r);
  std::string out =
      "{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": " + std::to_string(rank) +
      ", \"world_size\": " + std::to_string(s.ranks);
  if (s.new_dialect) {
    out +=
        ", \"pg_count\": 1, \"pg_config\": [{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": "
        "\"cuda:nccl\", \"pg_size\": " +
        std::to_string(s.ranks) + ", \"ranks\": [" + ranks_list + "]}], \"nccl_version\": \"2.21.5\"";
  }
  out += "},\n  \"traceEvents\": [\n";
  bool first = true;
  auto add = [&](const std::string& ev) {
    out += first ? "  " : ",\n  ";
    out += ev;
    first = false;
  };
  add("{\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": " + std::to_string(pid) +
      ", \"tid\": 0, \"args\": {\"name\": \"python3\"}}");
  int64_t correlation = 100;
  int64_t external = 5000;
  for (uint32_t i = 0; i < s.iterations; ++i) {
    const int64_t t0 = s.start_ns + static_cast<int64_t>(i) * s.period_ns;
    const int64_t my_compute = s.compute_ns + (static_cast<int32_t>(rank) == s.straggler ? s.straggler_delay_ns : 0);
    int64_t slowest = s.compute_ns + (s.straggler >= 0 ? s.straggler_delay_ns : 0);
    const int64_t launch_gap = 20'000;
    const int64_t arrive = t0 + launch_gap + my_compute;
    const int64_t last_arrive = t0 + launch_gap + slowest;
    const int64_t end = last_arrive + s.transfer_ns + s.end_jitter_ns * (rank % 3);
    auto at = [&](int64_t true_ns) { return Ts(s, true_ns + skew); };
    add("{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#" + std::to_string(i) +
        "\", \"pid\": " + std::to_string(pid) + ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + at(t0) +
        ", \"dur\": " + Dur(s, s.period_ns - 1000) + ", \"args\": {\"External id\": " + std::to_string(external++) +
        "}}");
    // Compute: aten::mm launching compute_kernels kernels back to back on stream 7.
    const int64_t each = my_compute / s.compute_kernels;
    for (uint32_t k = 0; k < s.compute_kernels; ++k) {
      const int64_t c = correlation++;
      const int64_t cpu = t0 + 1000 + static_cast<int64_t>(k) * 3000;
      add("{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": " + std::to_string(pid) +
          ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + at(cpu) + ", \"dur\": " + Dur(s, 2000) +
          ", \"args\": {\"External id\": " + std::to_string(external++) + ", \"Input Dims\": [[64, 64], [64, 64]]}}");
      add("{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": " + std::to_string(pid) +
          ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + at(cpu + 500) + ", \"dur\": " + Dur(s, 1000) +
          ", \"args\": {\"External id\": " + std::to_string(c) +
          ", \"cbid\": 211, \"correlation\": " + std::to_string(c) + "}}");
      add("{\"ph\": \"s\", \"id\": " + std::to_string(c) + ", \"pid\": " + std::to_string(pid) + ", \"tid\": " +
          std::to_string(tid) + ", \"ts\": " + at(cpu + 500) + ", \"cat\": \"ac2g\", \"name\": \"ac2g\"}");
      add("{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void gemm_kernel<float>(float const*, float*)\", "
          "\"pid\": " +
          std::to_string(device) + ", \"tid\": 7, \"ts\": " + at(t0 + launch_gap + static_cast<int64_t>(k) * each) +
          ", \"dur\": " + Dur(s, each) + ", \"args\": {\"External id\": " + std::to_string(c) +
          ", \"device\": " + std::to_string(device) + ", \"stream\": 7, \"correlation\": " + std::to_string(c) + "}}");
    }
    // The AllReduce: record_param_comms > nccl:all_reduce > cudaLaunchKernelExC -> NCCL kernel.
    const int64_t c = correlation++;
    const int64_t rpc_ext = external++;
    const int64_t cpu = t0 + 1000 + static_cast<int64_t>(s.compute_kernels) * 3000;
    std::string coll_args =
        "\"Collective name\": \"allreduce\", \"In msg nelems\": 1048576, \"Out msg nelems\": 1048576, "
        "\"Group size\": " +
        std::to_string(s.ranks) +
        ", \"dtype\": \"Float\", \"In split size\": \"[]\", "
        "\"Out split size\": \"[]\", \"Process Group Name\": \"0\", \"Process Group Description\": "
        "\"default_pg\", \"Process Group Ranks\": \"[" +
        ranks_list + "]\"";
    add("{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": " + std::to_string(pid) +
        ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + at(cpu) + ", \"dur\": " + Dur(s, 4000) +
        ", \"args\": {\"External id\": " + std::to_string(rpc_ext) + ", " + coll_args + "}}");
    add("{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"nccl:all_reduce\", \"pid\": " + std::to_string(pid) +
        ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + at(cpu + 1000) + ", \"dur\": " + Dur(s, 2000) + "}");
    add("{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernelExC\", \"pid\": " +
        std::to_string(pid) + ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + at(cpu + 1500) +
        ", \"dur\": " + Dur(s, 1000) + ", \"args\": {\"External id\": " + std::to_string(rpc_ext) +
        ", \"cbid\": 430, \"correlation\": " + std::to_string(c) + "}}");
    std::string kargs = "\"External id\": " + std::to_string(s.new_dialect ? rpc_ext : c) +
                        ", \"device\": " + std::to_string(device) +
                        ", \"stream\": 20, \"correlation\": " + std::to_string(c);
    if (s.new_dialect) kargs += ", " + coll_args;
    add("{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"" +
        std::string(s.new_dialect ? "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
                                  : "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)") +
        "\", \"pid\": " + std::to_string(device) + ", \"tid\": 20, \"ts\": " + at(arrive) +
        ", \"dur\": " + Dur(s, end - arrive) + ", \"args\": {" + kargs + "}}");
    add("{\"ph\": \"f\", \"id\": " + std::to_string(c) + ", \"pid\": " + std::to_string(device) +
        ", \"tid\": 20, \"ts\": " + at(arrive) + ", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}");
    add("{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy DtoH (Device -> Pinned)\", \"pid\": " +
        std::to_string(device) + ", \"tid\": 7, \"ts\": " + at(end + 10'000) + ", \"dur\": " + Dur(s, 3000) +
        ", \"args\": {\"device\": " + std::to_string(device) +
        ", \"stream\": 7, \"correlation\": " + std::to_string(correlation++) + ", \"bytes\": 4096}}");
  }
  add("{\"ph\": \"X\", \"cat\": \"Trace\", \"name\": \"PyTorch Profiler (0)\", \"pid\": \"Spans\", \"tid\": "
      "\"PyTorch Profiler\", \"ts\": " +
      Ts(s, s.start_ns + skew) + ", \"dur\": " + Dur(s, s.period_ns) + "}");
  out += "\n  ],\n  \"traceName\": \"rank" + std::to_string(rank) + ".json\"";
  if (s.new_dialect)
    out += ",\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": " + std::to_string(s.base_ns);
  out += "\n}\n";
  return out;
}

// Writes `text` to `path`, gzip-compressed when `gzip`; false on an I/O error.
inline bool WriteTraceFile(const std::string& path, const std::string& text, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb1");
    if (f == nullptr) return false;
    bool ok = gzwrite(f, text.data(), static_cast<unsigned>(text.size())) == static_cast<int>(text.size());
    return gzclose(f) == Z_OK && ok;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

// Writes rank<r>.json[.gz] for every rank into `dir`; returns the paths (empty on failure).
inline std::vector<std::string> WriteKinetoSynth(const KinetoSynth& s, const std::string& dir) {
  std::vector<std::string> paths;
  for (uint32_t r = 0; r < s.ranks; ++r) {
    std::string p = dir + "/rank" + std::to_string(r) + (s.gzip ? ".json.gz" : ".json");
    if (!WriteTraceFile(p, KinetoSynthTrace(s, r), s.gzip)) return {};
    paths.push_back(p);
  }
  return paths;
}

}  // namespace commprof::test_support
