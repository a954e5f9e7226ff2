#include "analysis/metrics/op_stats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "analysis/load/event_screen.h"
#include "analysis/metrics/duration_sketch.h"
#include "core/schema/enums.h"

namespace commprof {
namespace {

constexpr std::array<const char*, 10> kCategories = {"mpi",    "nccl",     "nccl_channel", "kernel", "memcpy",
                                                     "memset", "cuda_api", "nvtx",         "user",   "torch"};
enum Category : uint8_t { kMpi, kNccl, kNcclChannel, kKernel, kMemcpy, kMemset, kCudaApi, kNvtx, kUser, kTorch, kNone };

Category CategoryIndexOf(const commprof_event& e) {
  switch (e.kind) {
    case COMMPROF_KIND_MPI_INIT:
    case COMMPROF_KIND_MPI_FINALIZE:
    case COMMPROF_KIND_MPI_COLLECTIVE:
    case COMMPROF_KIND_MPI_P2P:
    case COMMPROF_KIND_MPI_WAIT:
      return kMpi;
    case COMMPROF_KIND_MPI_COMM:
      return e.subtype == COMMPROF_OP_NCCL_COMM_INIT ? kNccl : kMpi;
    case COMMPROF_KIND_NCCL_API:
    case COMMPROF_KIND_NCCL_COLLECTIVE:
      return kNccl;
    case COMMPROF_KIND_COMM_KERNEL:
      // The NCCL plugin's per-channel records carry the commHash; CUPTI's nccl kernels carry 0.
      return e.comm_id != COMMPROF_NO_COMM_ID ? kNcclChannel : kKernel;
    case COMMPROF_KIND_COMPUTE_KERNEL:
      return kKernel;
    case COMMPROF_KIND_MEMCPY:
      return kMemcpy;
    case COMMPROF_KIND_MEMSET:
      return kMemset;
    case COMMPROF_KIND_CUDA_API:
      return kCudaApi;
    case COMMPROF_KIND_NVTX_RANGE:
      return kNvtx;
    case COMMPROF_KIND_USER_RANGE:
      return kUser;
    case COMMPROF_KIND_HOST_OP:
    case COMMPROF_KIND_HOST_ANNOTATION:
    case COMMPROF_KIND_GPU_ANNOTATION:
    case COMMPROF_KIND_PYTHON_FUNCTION:
      return kTorch;
    default:
      return kNone;
  }
}

// The bytes a call moved; 0 for kinds whose `bytes` field means something else (requests of a
// Wait, communicator size, shared memory of a kernel, an NVTX payload, ...).
uint64_t BytesOf(const commprof_event& e) {
  switch (e.kind) {
    case COMMPROF_KIND_MPI_COLLECTIVE:
    case COMMPROF_KIND_MPI_P2P:
    case COMMPROF_KIND_NCCL_API:
    case COMMPROF_KIND_NCCL_COLLECTIVE:
    case COMMPROF_KIND_MEMCPY:
    case COMMPROF_KIND_MEMSET:
      return e.bytes;
    default:
      return 0;
  }
}

bool KindHasBytes(uint8_t kind) {
  return kind == COMMPROF_KIND_MPI_COLLECTIVE || kind == COMMPROF_KIND_MPI_P2P || kind == COMMPROF_KIND_NCCL_API ||
         kind == COMMPROF_KIND_NCCL_COLLECTIVE || kind == COMMPROF_KIND_MEMCPY || kind == COMMPROF_KIND_MEMSET;
}

bool KindHasComm(uint8_t kind) {
  return kind == COMMPROF_KIND_MPI_COLLECTIVE || kind == COMMPROF_KIND_MPI_P2P || kind == COMMPROF_KIND_MPI_COMM ||
         kind == COMMPROF_KIND_NCCL_API || kind == COMMPROF_KIND_NCCL_COLLECTIVE || kind == COMMPROF_KIND_COMM_KERNEL ||
         kind == COMMPROF_KIND_MPI_INIT;
}

// CUpti_ActivityMemcpyKind as Nsight Systems and nvprof print it.
const char* MemcpyName(uint8_t subtype) {
  static constexpr std::array<const char*, 11> kNames = {"Memcpy", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                                         "AtoD",   "DtoA", "DtoD", "HtoH", "PtoP"};
  return subtype < kNames.size() ? kNames[subtype] : "Memcpy";
}

// Nested families (docs/metrics.md §12.2): a range's direct children are the ranges of its own
// family on its own thread (and NVTX domain, or device and stream) that it contains.
enum Family : uint64_t {
  kNoFamily = 0,
  kNvtxFamily = 1,
  kUserFamily = 2,
  kTorchHostFamily = 3,
  kGpuAnnotationFamily = 4
};

uint64_t FamilyOf(const commprof_event& e) {
  uint64_t family = kNoFamily;
  uint64_t extra = 0;
  switch (e.kind) {
    case COMMPROF_KIND_NVTX_RANGE:
      if (e.subtype != 0) {
        return kNoFamily;  // start/end ranges do not nest (they may cross threads)
      }
      family = kNvtxFamily;
      extra = e.comm_id;  // the domain
      break;
    case COMMPROF_KIND_USER_RANGE:
      family = kUserFamily;
      break;
    case COMMPROF_KIND_HOST_OP:
    case COMMPROF_KIND_HOST_ANNOTATION:
    case COMMPROF_KIND_PYTHON_FUNCTION:
      family = kTorchHostFamily;
      break;
    case COMMPROF_KIND_GPU_ANNOTATION:
      family = kGpuAnnotationFamily;
      extra = e.device;
      break;
    default:
      return kNoFamily;
  }
  return (family << 56) | ((extra & 0xFFFFFFu) << 32) | e.thread_id;
}

struct Accumulator {
  Category category = kNone;
  std::string name;
  std::optional<uint64_t> comm;
  std::optional<int> size_bucket;
  std::optional<uint32_t> rank;
  bool bandwidth = false;
  uint64_t calls = 0;
  int64_t total_ns = 0, self_ns = 0, min_ns = 0, max_ns = 0;
  uint64_t bytes = 0;
  DurationSketch sketch;
  std::vector<RankTotal> per_rank;

  explicit Accumulator(size_t exact) : sketch(exact) {}

  RankTotal& ShareOf(uint32_t r) {
    if (per_rank.empty() || per_rank.back().rank != r) {
      per_rank.push_back(RankTotal{r, 0, 0, 0, 0});
    }
    return per_rank.back();
  }
};

// What identifies a row across ranks.
using GlobalKey = std::tuple<uint8_t, std::string, uint64_t, int, int64_t>;

// What identifies a row within one rank, before the name is looked up: (category, name_id or the
// memcpy kind, comm, bucket).
struct LocalKey {
  uint8_t category;
  uint32_t name;
  uint64_t comm;
  int bucket;
  bool operator==(const LocalKey&) const = default;
};
struct LocalKeyHash {
  size_t operator()(const LocalKey& k) const {
    uint64_t h = k.comm * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t{k.name} << 16) ^ (uint64_t{k.category} << 8) ^ static_cast<uint64_t>(k.bucket + 1);
    return static_cast<size_t>(h * 0xBF58476D1CE4E5B9ull);
  }
};

// One nested range of the rank being read (40 bytes).
struct Span {
  uint64_t family;
  uint64_t start;
  uint64_t end;
  int64_t covered;  // by direct children
  uint32_t row;
};

std::string NameOf(const commprof_event& e, const std::vector<std::string>& strings) {
  if (e.kind == COMMPROF_KIND_MEMCPY) {
    return MemcpyName(e.subtype);
  }
  if (e.kind == COMMPROF_KIND_MEMSET) {
    return "Memset";
  }
  if (e.kind == COMMPROF_KIND_MPI_COMM && e.subtype == COMMPROF_OP_NCCL_COMM_INIT) {
    return "ncclCommInit";  // its name is the communicator's, not the call's
  }
  if (e.name_id < strings.size() && !strings[e.name_id].empty()) {
    return strings[e.name_id];
  }
  switch (e.kind) {
    case COMMPROF_KIND_MPI_INIT:
      return "MPI_Init";
    case COMMPROF_KIND_MPI_FINALIZE:
      return "MPI_Finalize";
    case COMMPROF_KIND_MPI_COLLECTIVE:
    case COMMPROF_KIND_MPI_P2P:
    case COMMPROF_KIND_MPI_WAIT:
    case COMMPROF_KIND_MPI_COMM:
    case COMMPROF_KIND_NCCL_API:
    case COMMPROF_KIND_NCCL_COLLECTIVE:
    case COMMPROF_KIND_COMM_KERNEL:
      return schema::OpName(e.subtype);
    default:
      return std::string("(unnamed ") + schema::KindName(e.kind) + ")";
  }
}

OpStatsRow Finish(Accumulator& a, size_t ranks_read) {
  OpStatsRow row;
  row.category = kCategories[a.category];
  row.name = std::move(a.name);
  row.comm = a.comm;
  row.size_bucket = a.size_bucket;
  row.rank = a.rank;
  row.calls = a.calls;
  row.total_ns = a.total_ns;
  row.self_ns = a.self_ns;
  row.min_ns = a.min_ns;
  row.max_ns = a.max_ns;
  row.mean_ns = a.calls > 0 ? static_cast<double>(a.total_ns) / static_cast<double>(a.calls) : 0.0;
  row.p50_ns = a.sketch.Quantile(0.50);
  row.p99_ns = a.sketch.Quantile(0.99);
  row.percentiles_exact = a.sketch.exact();
  row.bytes = a.bytes;
  if (a.bandwidth && a.bytes > 0 && a.total_ns > 0) {
    row.bandwidth_gbps = static_cast<double>(a.bytes) / static_cast<double>(a.total_ns);  // B/ns = GB/s
  }
  row.per_rank = std::move(a.per_rank);
  if (!a.rank.has_value() && a.total_ns > 0 && ranks_read > 0) {
    const RankTotal* top = &row.per_rank.front();
    for (const RankTotal& t : row.per_rank) {
      if (t.total_ns > top->total_ns) {
        top = &t;
      }
    }
    const double mean = static_cast<double>(a.total_ns) / static_cast<double>(ranks_read);
    row.imbalance = static_cast<double>(top->total_ns) / mean;
    row.max_rank = top->rank;
  }
  return row;
}

}  // namespace

std::span<const char* const> StatsCategories() { return kCategories; }

const char* StatsCategoryOf(const commprof_event& e) {
  const Category c = CategoryIndexOf(e);
  return c == kNone ? nullptr : kCategories[c];
}

bool StatsKindHasBandwidth(uint8_t kind) {
  return kind == COMMPROF_KIND_MPI_COLLECTIVE || kind == COMMPROF_KIND_MPI_P2P ||
         kind == COMMPROF_KIND_NCCL_COLLECTIVE || kind == COMMPROF_KIND_MEMCPY || kind == COMMPROF_KIND_MEMSET;
}

int SizeBucketOf(uint64_t bytes) { return static_cast<int>(std::bit_width(bytes)); }

uint64_t SizeBucketLow(int bucket) { return bucket <= 0 ? 0 : uint64_t{1} << (bucket - 1); }

uint64_t SizeBucketHigh(int bucket) {
  if (bucket <= 0) {
    return 1;
  }
  return bucket >= 64 ? UINT64_MAX : uint64_t{1} << bucket;
}

std::string SizeBucketLabel(int bucket) {
  if (bucket <= 0) {
    return "0 B";
  }
  auto size = [](uint64_t b) {
    static constexpr std::array<const char*, 7> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    size_t u = 0;
    while (b >= 1024 && b % 1024 == 0 && u + 1 < kUnits.size()) {
      b /= 1024;
      ++u;
    }
    return std::to_string(b) + " " + kUnits[u];
  };
  const std::string high = bucket >= 64 ? std::string("16 EiB") : size(SizeBucketHigh(bucket));
  return "[" + size(SizeBucketLow(bucket)) + ", " + high + ")";
}

Result<OpStats> ComputeOpStats(ProfileReader& reader, const StatsOptions& options) {
  if (options.screen_rows) {
    ScreenEventRows(reader);
  }
  std::array<bool, kCategories.size()> wanted{};
  wanted.fill(options.kinds.empty());
  for (const std::string& k : options.kinds) {
    for (size_t c = 0; c < kCategories.size(); ++c) {
      if (k == kCategories[c]) {
        wanted[c] = true;
      }
    }
  }
  OpStats out;
  for (const RankInfo& r : reader.info().ranks) {
    if (r.status == schema::RankStatusName(schema::RankStatus::kMissing)) {
      continue;
    }
    if (!options.ranks.empty() &&
        std::find(options.ranks.begin(), options.ranks.end(), r.rank) == options.ranks.end()) {
      continue;
    }
    out.ranks.push_back(r.rank);
  }

  std::vector<Accumulator> rows;
  std::map<GlobalKey, uint32_t> row_of;
  std::map<std::pair<uint8_t, std::string>, std::map<int, uint64_t>> histograms;
  for (uint32_t rank : out.ranks) {
    auto strings = reader.Strings(rank);
    if (!strings.ok()) {
      return strings.status();
    }
    std::unordered_map<LocalKey, uint32_t, LocalKeyHash> local;
    std::vector<Span> spans;
    COMMPROF_RETURN_IF_ERROR(reader.ForEachEventChunk(rank, [&](std::span<const commprof_event> chunk) {
      out.events_read += chunk.size();
      for (const commprof_event& e : chunk) {
        const Category c = CategoryIndexOf(e);
        if (c == kNone || !wanted[c]) {
          continue;
        }
        if ((e.flags & COMMPROF_FLAG_INCOMPLETE) != 0) {
          ++out.incomplete_skipped;
          continue;
        }
        if ((e.flags & COMMPROF_FLAG_RECV_HALF) != 0) {
          continue;  // an MPI_Sendrecv is one call: its send half carries it
        }
        const uint64_t bytes = BytesOf(e);
        const int bucket = options.by_size && KindHasBytes(e.kind) ? SizeBucketOf(bytes) : -1;
        const uint64_t comm = options.by_comm && KindHasComm(e.kind) ? e.comm_id : 0;
        const uint32_t name_key = e.kind == COMMPROF_KIND_MEMCPY ? e.subtype : e.name_id;
        // Memcpy and memset rows are named by kind, so their name_id must not split them.
        const LocalKey lk{static_cast<uint8_t>(c),
                          e.kind == COMMPROF_KIND_MEMSET                                                ? 0u
                          : e.kind == COMMPROF_KIND_MPI_COMM && e.subtype == COMMPROF_OP_NCCL_COMM_INIT ? UINT32_MAX
                                                                                                        : name_key,
                          comm, bucket};
        auto it = local.find(lk);
        uint32_t index = 0;
        if (it != local.end()) {
          index = it->second;
        } else {
          std::string name = NameOf(e, strings.value());
          GlobalKey gk{static_cast<uint8_t>(c), name, comm, bucket, options.by_rank ? int64_t{rank} : -1};
          auto [g, fresh] = row_of.emplace(std::move(gk), static_cast<uint32_t>(rows.size()));
          if (fresh) {
            Accumulator& a = rows.emplace_back(options.exact_samples);
            a.category = c;
            a.name = std::move(name);
            if (options.by_comm) {
              a.comm = comm;
            }
            if (bucket >= 0) {
              a.size_bucket = bucket;
            }
            if (options.by_rank) {
              a.rank = rank;
            }
            a.bandwidth = StatsKindHasBandwidth(e.kind);
          }
          index = g->second;
          local.emplace(lk, index);
        }
        Accumulator& a = rows[index];
        const auto ns = static_cast<int64_t>(e.end_ns - e.start_ns);  // screened: end >= start
        a.min_ns = a.calls == 0 ? ns : std::min(a.min_ns, ns);
        a.max_ns = a.calls == 0 ? ns : std::max(a.max_ns, ns);
        ++a.calls;
        a.total_ns += ns;
        a.bytes += bytes;
        a.sketch.Add(ns);
        RankTotal& share = a.ShareOf(rank);
        ++share.calls;
        share.total_ns += ns;
        share.bytes += bytes;
        if (KindHasBytes(e.kind)) {
          ++histograms[{static_cast<uint8_t>(c), a.name}][SizeBucketOf(bytes)];
        }
        const uint64_t family = FamilyOf(e);
        if (family == kNoFamily) {
          a.self_ns += ns;
          share.self_ns += ns;
        } else {
          spans.push_back(Span{family, e.start_ns, e.end_ns, 0, index});
        }
        ++out.events_counted;
      }
    }));
    // Self times of the nested ranges: in start order per family, outer before inner at a tie.
    std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) {
      return std::tie(x.family, x.start, y.end) < std::tie(y.family, y.start, x.end);
    });
    std::vector<size_t> stack;
    auto close = [&](size_t i) {
      const Span& s = spans[i];
      const int64_t self = std::max<int64_t>(0, static_cast<int64_t>(s.end - s.start) - s.covered);
      rows[s.row].self_ns += self;
      rows[s.row].per_rank.back().self_ns += self;  // the rank being read is its last share
    };
    for (size_t i = 0; i < spans.size(); ++i) {
      while (!stack.empty() &&
             (spans[stack.back()].family != spans[i].family || spans[stack.back()].end <= spans[i].start)) {
        close(stack.back());
        stack.pop_back();
      }
      if (!stack.empty()) {
        Span& parent = spans[stack.back()];
        parent.covered += static_cast<int64_t>(std::min(spans[i].end, parent.end) - spans[i].start);
      }
      stack.push_back(i);
    }
    while (!stack.empty()) {
      close(stack.back());
      stack.pop_back();
    }
  }

  out.rows.reserve(rows.size());
  for (Accumulator& a : rows) {
    out.rows.push_back(Finish(a, out.ranks.size()));
  }
  std::sort(out.rows.begin(), out.rows.end(), [](const OpStatsRow& x, const OpStatsRow& y) {
    if (x.total_ns != y.total_ns) {
      return x.total_ns > y.total_ns;
    }
    auto cat = [](const std::string& c) {
      return std::find(kCategories.begin(), kCategories.end(), c) - kCategories.begin();
    };
    return std::make_tuple(cat(x.category), std::cref(x.name), x.comm, x.size_bucket, x.rank) <
           std::make_tuple(cat(y.category), std::cref(y.name), y.comm, y.size_bucket, y.rank);
  });
  for (auto& [key, buckets] : histograms) {
    SizeHistogram h{kCategories[key.first], key.second, {}};
    h.buckets.assign(buckets.begin(), buckets.end());
    out.size_histograms.push_back(std::move(h));
  }
  return out;
}

}  // namespace commprof
