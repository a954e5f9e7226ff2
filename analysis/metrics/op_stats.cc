#include "analysis/metrics/op_stats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "analysis/load/event_screen.h"
#include "analysis/metrics/duration_sketch.h"
#include "core/schema/enums.h"

namespace commprof {
namespace {

constexpr std::array<const char*, 9> kCategories = {"mpi",      "nccl", "kernel", "memcpy", "memset",
                                                    "cuda_api", "nvtx", "user",   "torch"};
enum Category : uint8_t { kMpi, kNccl, kKernel, kMemcpy, kMemset, kCudaApi, kNvtx, kUser, kTorch, kNone };

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
    case COMMPROF_KIND_COMM_KERNEL:  // CUPTI's or an imported NCCL kernel, or the plugin's per-channel record
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

// Recorded ranges carry their nesting depth (NVTX push/pop, user ranges: `seq`) and arrive at their
// end; imported ones neither.
bool HasDepth(uint64_t family) {
  const uint64_t f = family >> 56;
  return f == kNvtxFamily || f == kUserFamily;
}

// One key's completed ranges not yet claimed by a parent, as (start, end), in end order.
struct EndOrderNest {
  std::vector<std::pair<uint64_t, uint64_t>> pending;
  uint64_t last_end = 0;
};

// One nested range of the rank being read (40 bytes).
struct Span {
  uint64_t family;
  uint64_t start;
  uint64_t end;
  int64_t covered;  // by direct children
  uint32_t row;
};

// What tells rows apart within a rank before NameOf is asked: the name_id, except where NameOf
// names the event otherwise.
uint32_t NameKey(const commprof_event& e) {
  constexpr uint32_t kNamedByKind = 1u << 31;  // above any string id
  if (e.kind == COMMPROF_KIND_MEMCPY && e.subtype != 0) {
    return kNamedByKind | e.subtype;
  }
  if (e.kind == COMMPROF_KIND_MPI_COMM && e.subtype == COMMPROF_OP_NCCL_COMM_INIT) {
    return kNamedByKind | COMMPROF_OP_NCCL_COMM_INIT;
  }
  return e.name_id;
}

std::string NameOf(const commprof_event& e, const std::vector<std::string>& strings) {
  // Recorded copies are named by their direction (subtype); imported ones carry Kineto's name.
  if (e.kind == COMMPROF_KIND_MEMCPY && (e.subtype != 0 || e.name_id == 0 || e.name_id >= strings.size())) {
    return MemcpyName(e.subtype);
  }
  if (e.kind == COMMPROF_KIND_MEMSET && (e.name_id == 0 || e.name_id >= strings.size())) {
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

OpStatsRow Finish(OpStatsPartial::Row& a, size_t ranks_read) {
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

namespace {

// Whether the stats read rank `r`: it is not missing, and options.ranks asks for it.
bool StatsRead(const RankInfo& r, const StatsOptions& options) {
  return r.status != schema::RankStatusName(schema::RankStatus::kMissing) &&
         (options.ranks.empty() ||
          std::find(options.ranks.begin(), options.ranks.end(), r.rank) != options.ranks.end());
}

}  // namespace

std::vector<uint32_t> StatsRanks(const ProfileReader& reader, const StatsOptions& options) {
  std::vector<uint32_t> out;
  for (const RankInfo& r : reader.info().ranks) {
    if (StatsRead(r, options)) {
      out.push_back(r.rank);
    }
  }
  return out;
}

Result<OpStatsPartial> AccumulateOpStats(ProfileReader& reader, const StatsOptions& options,
                                         std::span<const uint32_t> ranks) {
  std::array<bool, kCategories.size()> wanted{};
  wanted.fill(options.kinds.empty());
  for (const std::string& k : options.kinds) {
    for (size_t c = 0; c < kCategories.size(); ++c) {
      if (k == kCategories[c]) {
        wanted[c] = true;
      }
    }
  }
  OpStatsPartial out;
  out.exact_samples = options.exact_samples;
  std::vector<OpStatsPartial::Row>& rows = out.rows;
  std::vector<std::array<uint64_t, 65>>& histograms = out.histograms;
  for (uint32_t rank : ranks) {
    auto strings = reader.Strings(rank);
    if (!strings.ok()) {
      return strings.status();
    }
    // Events naming a string the rank's table lacks (a damaged or missing /ranks/R/strings): their
    // names are lost, so the rows they go to are not what the program called; said, not hidden.
    uint64_t unnamed = 0;
    std::unordered_map<LocalKey, uint32_t, LocalKeyHash> local;
    // The row of an event the stats count (creating it on first sight), or none.
    auto row_index = [&](const commprof_event& e, Category c) {
      const uint64_t bytes = BytesOf(e);
      const int bucket = options.by_size && KindHasBytes(e.kind) ? SizeBucketOf(bytes) : -1;
      const uint64_t comm = options.by_comm && KindHasComm(e.kind) ? e.comm_id : 0;
      const LocalKey lk{static_cast<uint8_t>(c), NameKey(e), comm, bucket};
      auto it = local.find(lk);
      if (it != local.end()) {
        return it->second;
      }
      const size_t before = rows.size();
      const uint32_t index = out.RowFor(
          {static_cast<uint8_t>(c), NameOf(e, strings.value()), comm, bucket, options.by_rank ? int64_t{rank} : -1});
      if (rows.size() > before) {  // made now: what the key does not say
        OpStatsPartial::Row& a = rows[index];
        if (!options.by_comm) {
          a.comm.reset();
        }
        a.bandwidth = StatsKindHasBandwidth(e.kind);
        if (KindHasBytes(e.kind)) {
          a.histogram = out.HistogramFor(a.category, a.name);  // one per operation, whatever splits its rows
        }
      }
      local.emplace(lk, index);
      return index;
    };
    // The category of an event the stats count, kNone for the others; counts in `incomplete` (when
    // given) the events left out for having no true end.
    auto counted = [&](const commprof_event& e, uint64_t* incomplete) {
      const Category c = CategoryIndexOf(e);
      if (c == kNone || !wanted[c] || (e.flags & COMMPROF_FLAG_RECV_HALF) != 0) {
        return kNone;  // an MPI_Sendrecv is one call: its send half carries it
      }
      if ((e.flags & COMMPROF_FLAG_INCOMPLETE) != 0) {
        if (incomplete != nullptr) {
          ++*incomplete;
        }
        return kNone;
      }
      return c;
    };

    // Self times (docs/metrics.md §12.2). Recorded NVTX push/pop and user ranges arrive at their
    // end, per thread: when one arrives, its direct children are the completed ranges of its key
    // not yet claimed that start within it, and outermost ranges (depth 0) are never anyone's
    // child, so only the children of ranges still open are held. Imported ranges (any order), and
    // recorded ones if they ever arrive out of end order, are held and sorted instead.
    std::vector<Span> spans;
    std::unordered_map<uint64_t, EndOrderNest> nests;
    std::unordered_map<uint32_t, int64_t> streamed_self;  // row -> self time from `nests`
    bool end_ordered = true;
    COMMPROF_RETURN_IF_ERROR(reader.ForEachEventChunk(rank, [&](std::span<const commprof_event> chunk) {
      out.events_read += chunk.size();
      for (const commprof_event& e : chunk) {
        const Category c = counted(e, &out.incomplete_skipped);
        if (c == kNone) {
          continue;
        }
        const uint32_t index = row_index(e, c);
        unnamed += e.name_id != 0 && e.name_id >= strings->size() ? 1 : 0;
        OpStatsPartial::Row& a = rows[index];
        const uint64_t bytes = BytesOf(e);
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
        if (a.histogram != OpStatsPartial::kNoHistogram) {
          ++histograms[a.histogram][static_cast<size_t>(SizeBucketOf(bytes))];
        }
        ++out.events_counted;
        const uint64_t family = FamilyOf(e);
        if (family == kNoFamily) {
          a.self_ns += ns;
          share.self_ns += ns;
        } else if (!HasDepth(family)) {
          spans.push_back(Span{family, e.start_ns, e.end_ns, 0, index});
        } else if (end_ordered) {
          EndOrderNest& nest = nests[family];
          if (e.end_ns < nest.last_end) {
            end_ordered = false;  // not as recorded: sort this rank's ranges instead (below)
            nests.clear();
            streamed_self.clear();
            continue;
          }
          nest.last_end = e.end_ns;
          int64_t covered = 0;
          while (!nest.pending.empty() && nest.pending.back().first >= e.start_ns) {
            covered += static_cast<int64_t>(std::min(nest.pending.back().second, e.end_ns) - nest.pending.back().first);
            nest.pending.pop_back();
          }
          streamed_self[index] += std::max<int64_t>(0, ns - covered);
          if (e.seq > 0) {
            nest.pending.emplace_back(e.start_ns, e.end_ns);
          }
        }
      }
    }));
    if (unnamed > 0) {
      out.faults.push_back(reader.info().path + ": rank " + std::to_string(rank) + ": " + std::to_string(unnamed) +
                           " events name strings that /ranks/" + std::to_string(rank) + "/strings (" +
                           std::to_string(strings->size()) +
                           " strings) does not hold; they are counted under their operation's name");
    }
    for (const auto& [row, self] : streamed_self) {
      rows[row].self_ns += self;
      rows[row].per_rank.back().self_ns += self;  // the rank being read is its last share
    }
    if (!end_ordered) {
      COMMPROF_RETURN_IF_ERROR(reader.ForEachEventChunk(rank, [&](std::span<const commprof_event> chunk) {
        for (const commprof_event& e : chunk) {
          const Category c = counted(e, nullptr);
          const uint64_t family = c == kNone ? kNoFamily : FamilyOf(e);
          if (family != kNoFamily && HasDepth(family)) {
            spans.push_back(Span{family, e.start_ns, e.end_ns, 0, row_index(e, c)});
          }
        }
      }));
    }
    // In start order per key, outer before inner at a tie, with a stack of the open ranges.
    std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) {
      return std::tie(x.family, x.start, y.end) < std::tie(y.family, y.start, x.end);
    });
    std::vector<size_t> stack;
    auto close = [&](size_t i) {
      const Span& s = spans[i];
      const int64_t self = std::max<int64_t>(0, static_cast<int64_t>(s.end - s.start) - s.covered);
      rows[s.row].self_ns += self;
      rows[s.row].per_rank.back().self_ns += self;
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

  return out;
}

OpStats FinishOpStats(const ProfileReader& reader, const StatsOptions& options, OpStatsPartial partial) {
  OpStats out;
  for (const RankInfo& r : reader.info().ranks) {  // StatsRanks and their missing events, in one pass
    if (StatsRead(r, options)) {
      out.ranks.push_back(r.rank);
      out.missing_events += r.missing_events();
    }
  }
  out.events_read = partial.events_read;
  out.events_counted = partial.events_counted;
  out.incomplete_skipped = partial.incomplete_skipped;
  out.faults = std::move(partial.faults);
  out.rows.reserve(partial.rows.size());
  for (OpStatsPartial::Row& a : partial.rows) {
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
  for (const auto& [key, index] : partial.histogram_of) {
    SizeHistogram h{kCategories[key.first], key.second, {}};
    const std::array<uint64_t, 65>& calls = partial.histograms[index];
    for (size_t b = 0; b < calls.size(); ++b) {
      if (calls[b] > 0) {
        h.buckets.emplace_back(static_cast<int>(b), calls[b]);
      }
    }
    out.size_histograms.push_back(std::move(h));
  }
  return out;
}

Result<OpStats> ComputeOpStats(ProfileReader& reader, const StatsOptions& options) {
  if (options.screen_rows) {
    ScreenEventRows(reader);
  }
  const std::vector<uint32_t> ranks = StatsRanks(reader, options);
  auto partial = AccumulateOpStats(reader, options, ranks);
  if (!partial.ok()) {
    return partial.status();
  }
  return FinishOpStats(reader, options, std::move(partial.value()));
}

}  // namespace commprof
