#include "analysis/metrics/memory_timeline.h"

#include <algorithm>
#include <array>
#include <map>
#include <span>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "commprof/event.h"
#include "core/clock_model.h"

namespace commprof {
namespace {

struct Record {
  int64_t time;    // aligned clock
  int64_t local;   // the rank's own clock, to join with its other events
  uint64_t order;  // stored order, breaks ties
  uint64_t address;
  uint64_t bytes;
  uint64_t total_allocated;  // imported: torch's "Total Allocated" after the record (0: none)
  uint32_t correlation;
  uint32_t thread_id;
  uint32_t name_id;
  uint16_t device;
  uint8_t memory_kind;
  bool alloc;
};

// One device's live blocks: (memory kind, address) -> index of the allocating record.
using LiveMap = std::map<std::pair<uint8_t, uint64_t>, size_t>;

// Applies record `r` to `live`; returns its change of bytes in use (memory_usage.cc's rules).
int64_t Apply(const std::vector<Record>& recs, size_t r, LiveMap& live, bool& unmatched) {
  const Record& rec = recs[r];
  unmatched = false;
  const auto key = std::make_pair(rec.memory_kind, rec.address);
  if (rec.alloc) {
    int64_t delta = static_cast<int64_t>(rec.bytes);
    auto [it, added] = live.try_emplace(key, r);
    if (!added) {  // allocated again without a recorded free: the old block is gone
      delta -= static_cast<int64_t>(recs[it->second].bytes);
      it->second = r;
    }
    return delta;
  }
  auto it = live.find(key);
  if (it == live.end()) {
    unmatched = true;
    return 0;
  }
  const int64_t delta = -static_cast<int64_t>(recs[it->second].bytes);
  live.erase(it);
  return delta;
}

// The device's series from its records (time order), and the live set at its peak.
// `join` gets, per listed live allocation, its record's local time and name id.
DeviceTimeline Sweep(uint32_t rank, uint16_t device, const std::vector<Record>& recs, size_t top_live,
                     std::vector<std::pair<int64_t, uint32_t>>& join) {
  DeviceTimeline d;
  d.rank = rank;
  d.device = device;
  for (const Record& r : recs) {
    if (std::find(d.categories.begin(), d.categories.end(), r.memory_kind) == d.categories.end()) {
      d.categories.push_back(r.memory_kind);
    }
  }
  std::sort(d.categories.begin(), d.categories.end());
  auto category_of = [&](uint8_t kind) {
    return static_cast<size_t>(std::lower_bound(d.categories.begin(), d.categories.end(), kind) - d.categories.begin());
  };
  d.in_use.assign(d.categories.size(), {});
  for (auto& v : d.in_use) {
    v.reserve(recs.size());
  }
  d.time_ns.reserve(recs.size());
  std::vector<int64_t> now(d.categories.size(), 0);
  int64_t total = 0;
  LiveMap live;
  for (size_t i = 0; i < recs.size(); ++i) {
    bool unmatched = false;
    const int64_t delta = Apply(recs, i, live, unmatched);
    recs[i].alloc ? ++d.allocs : ++d.frees;
    d.unaddressed_allocs += recs[i].alloc && recs[i].address == 0 ? 1 : 0;
    d.unmatched_frees += unmatched ? 1 : 0;
    now[category_of(recs[i].memory_kind)] += delta;
    total += delta;
    d.time_ns.push_back(recs[i].time);
    for (size_t c = 0; c < now.size(); ++c) {
      d.in_use[c].push_back(now[c]);
    }
    if (total > d.peak_bytes) {
      d.peak_bytes = total;
      d.peak_time_ns = recs[i].time;
      d.peak_index = i;
    }
  }
  d.final_bytes = total;
  d.peak_by_category.resize(d.categories.size(), 0);
  for (size_t c = 0; c < d.categories.size(); ++c) {
    d.peak_by_category[c] = recs.empty() ? 0 : d.in_use[c][d.peak_index];
  }
  if (!recs.empty() && recs.front().total_allocated != 0) {
    // Torch's figure counts everything its allocator holds on the device, the first record's
    // change included; what remains was allocated before the trace started.
    const Record& first = recs.front();
    const int64_t change = first.alloc ? static_cast<int64_t>(first.bytes) : -static_cast<int64_t>(first.bytes);
    d.baseline_bytes = static_cast<int64_t>(first.total_allocated) - change;
  }
  if (d.peak_bytes <= 0) {
    return d;
  }
  // Replay to the peak: the live map then holds exactly what was in use at that moment.
  live.clear();
  for (size_t i = 0; i <= d.peak_index; ++i) {
    bool unmatched = false;
    (void)Apply(recs, i, live, unmatched);
  }
  std::vector<size_t> at_peak;
  at_peak.reserve(live.size());
  for (const auto& [key, idx] : live) {
    at_peak.push_back(idx);
  }
  std::sort(at_peak.begin(), at_peak.end(), [&](size_t a, size_t b) {
    return std::make_tuple(-static_cast<int64_t>(recs[a].bytes), recs[a].time, a) <
           std::make_tuple(-static_cast<int64_t>(recs[b].bytes), recs[b].time, b);
  });
  d.live_count = at_peak.size();
  for (size_t k = 0; k < at_peak.size(); ++k) {
    const Record& r = recs[at_peak[k]];
    if (k >= top_live) {
      d.more_bytes += static_cast<int64_t>(r.bytes);
      continue;
    }
    LiveAllocation a;
    a.address = r.address;
    a.bytes = static_cast<int64_t>(r.bytes);
    a.allocated_ns = r.time;
    a.memory_kind = r.memory_kind;
    a.correlation = r.correlation;
    a.thread_id = r.thread_id;
    d.live.push_back(a);
    join.emplace_back(r.local, r.name_id);
  }
  return d;
}

// What the second pass looks for, per listed allocation of the rank.
struct Wanted {
  LiveAllocation* alloc;
  int64_t local;  // its record's time on the rank's clock
  uint32_t name_id;
  // The imported operator found so far: the innermost (latest start) enclosing the record.
  int64_t op_start = -1;
  uint32_t op_name = 0;
  bool api_found = false;
  uint32_t api_name = 0;
};

// Names the listed allocations of one rank: the record's own name, the CUDA API call with its
// correlation id, else the innermost imported operator on its thread that encloses it.
Status NameAllocations(const ProfileReader& reader, uint32_t rank, std::vector<Wanted>& wanted) {
  if (wanted.empty()) {
    return Status::Ok();
  }
  std::unordered_multimap<uint32_t, size_t> by_correlation;
  std::unordered_multimap<uint32_t, size_t> by_thread;
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (wanted[i].alloc->correlation != 0) {
      by_correlation.emplace(wanted[i].alloc->correlation, i);
    }
    by_thread.emplace(wanted[i].alloc->thread_id, i);
  }
  COMMPROF_RETURN_IF_ERROR(reader.ForEachEventChunk(rank, [&](std::span<const commprof_event> chunk) {
    for (const commprof_event& e : chunk) {
      if (e.kind == COMMPROF_KIND_CUDA_API && e.correlation != 0) {
        auto [lo, hi] = by_correlation.equal_range(e.correlation);
        for (auto it = lo; it != hi; ++it) {
          wanted[it->second].api_found = true;
          wanted[it->second].api_name = e.name_id;
        }
      } else if (e.kind == COMMPROF_KIND_HOST_OP) {
        auto [lo, hi] = by_thread.equal_range(e.thread_id);
        for (auto it = lo; it != hi; ++it) {
          Wanted& w = wanted[it->second];
          const auto start = static_cast<int64_t>(e.start_ns), end = static_cast<int64_t>(e.end_ns);
          if (start <= w.local && w.local <= end && start >= w.op_start) {
            w.op_start = start;
            w.op_name = e.name_id;
          }
        }
      }
    }
  }));
  auto strings = reader.Strings(rank);
  if (!strings.ok()) {
    return strings.status();
  }
  const std::vector<std::string>& s = strings.value();
  auto text = [&](uint32_t id) { return id < s.size() ? s[id] : std::string(); };
  for (Wanted& w : wanted) {
    std::string own = text(w.name_id);
    // Torch names every memory instant "[memory]": that says nothing about the block.
    w.alloc->name = own == "[memory]" ? std::string() : own;
    if (w.api_found) {
      w.alloc->allocated_by = text(w.api_name);
    } else if (w.op_start >= 0) {
      w.alloc->allocated_by = text(w.op_name);
    }
  }
  return Status::Ok();
}

}  // namespace

int64_t DeviceTimeline::TotalAt(size_t i) const {
  int64_t t = 0;
  for (const auto& c : in_use) {
    t += c[i];
  }
  return t;
}

Result<MemoryTimeline> BuildMemoryTimeline(const ProfileReader& reader, const MemoryTimelineOptions& options) {
  MemoryTimeline out;
  bool any = false;
  for (const RankInfo& r : reader.info().ranks) {
    if (!options.ranks.empty() &&
        std::find(options.ranks.begin(), options.ranks.end(), r.rank) == options.ranks.end()) {
      continue;
    }
    const ClockModel clock = r.clock_model();
    std::map<uint16_t, std::vector<Record>> by_device;
    uint64_t order = 0;
    COMMPROF_RETURN_IF_ERROR(reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      for (const commprof_event& e : chunk) {
        ++order;
        if (e.kind != COMMPROF_KIND_MEM_ALLOC && e.kind != COMMPROF_KIND_MEM_FREE) {
          continue;
        }
        const auto local = static_cast<int64_t>(e.start_ns);
        by_device[e.device].push_back({clock.ToReference(local), local, order, e.seq, e.bytes, e.comm_id, e.correlation,
                                       e.thread_id, e.name_id, e.device, e.subtype, e.kind == COMMPROF_KIND_MEM_ALLOC});
      }
    }));
    if (by_device.empty()) {
      out.ranks_without_records.push_back(r.rank);
      continue;
    }
    std::vector<std::pair<int64_t, uint32_t>> join;
    const size_t first_device = out.devices.size();
    for (auto& [device, recs] : by_device) {
      std::stable_sort(recs.begin(), recs.end(), [](const Record& a, const Record& b) {
        return std::tie(a.time, a.order) < std::tie(b.time, b.order);
      });
      out.devices.push_back(Sweep(r.rank, device, recs, options.top_live, join));
      recs = {};  // done with them before the next device's sweep
      const DeviceTimeline& d = out.devices.back();
      out.start_ns = any ? std::min(out.start_ns, d.time_ns.front()) : d.time_ns.front();
      out.end_ns = any ? std::max(out.end_ns, d.time_ns.back()) : d.time_ns.back();
      any = true;
    }
    std::vector<Wanted> wanted;
    for (size_t k = first_device; k < out.devices.size(); ++k) {
      for (LiveAllocation& a : out.devices[k].live) {
        const auto& [local, name_id] = join[wanted.size()];
        wanted.push_back({&a, local, name_id});
      }
    }
    COMMPROF_RETURN_IF_ERROR(NameAllocations(reader, r.rank, wanted));
  }
  return out;
}

std::vector<size_t> DownsampleIndices(const DeviceTimeline& d, size_t max_points, int64_t start_ns, int64_t end_ns) {
  const size_t n = d.time_ns.size();
  std::vector<size_t> keep;
  if (max_points == 0 || n <= max_points) {
    keep.resize(n);
    for (size_t i = 0; i < n; ++i) {
      keep[i] = i;
    }
    return keep;
  }
  const size_t buckets = std::max<size_t>(1, max_points / 4);
  const double span = static_cast<double>(std::max<int64_t>(1, end_ns - start_ns));
  auto bucket_of = [&](int64_t t) {
    const double f = static_cast<double>(t - start_ns) / span;
    return std::min(buckets - 1, static_cast<size_t>(std::max(0.0, f) * static_cast<double>(buckets)));
  };
  size_t i = 0;
  while (i < n) {
    const size_t b = bucket_of(d.time_ns[i]);
    size_t j = i, lo = i, hi = i;
    int64_t lo_v = d.TotalAt(i), hi_v = lo_v;
    while (j + 1 < n && bucket_of(d.time_ns[j + 1]) == b) {
      ++j;
      const int64_t v = d.TotalAt(j);
      if (v < lo_v) {
        lo_v = v;
        lo = j;
      }
      if (v > hi_v) {  // strict: the first record reaching the bucket's maximum, as the peak is
        hi_v = v;
        hi = j;
      }
    }
    // i <= lo, hi <= j: the four in time order, each once.
    std::array<size_t, 4> four = {i, std::min(lo, hi), std::max(lo, hi), j};
    for (size_t x : four) {
      if (keep.empty() || keep.back() < x) {
        keep.push_back(x);
      }
    }
    i = j + 1;
  }
  return keep;
}

}  // namespace commprof
