#include "analysis/metrics/gpu_breakdown.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>

#include "analysis/metrics/interval_set.h"

namespace commprof {

double Pctg(double num, double den) {
  if (den == 0.0) {
    return 0.0;
  }
  return std::round(100.0 * num / den * 100.0) / 100.0;
}

std::string KernelTypeMaskName(uint32_t mask) {
  // HTA names the overlap of several types by joining the type names with " overlapping ".
  static constexpr std::array<const char*, 3> kNames = {"COMPUTATION", "COMMUNICATION", "MEMORY"};
  std::string out;
  for (size_t bit = 0; bit < kNames.size(); ++bit) {
    if ((mask & (1u << bit)) == 0) {
      continue;
    }
    if (!out.empty()) {
      out += " overlapping ";
    }
    out += kNames[bit];
  }
  return out;
}

namespace {

// Count, sum, extremes and Welford's running mean/M2 of one name's durations; two of them
// combine exactly (Chan et al.), so the `others` bucket is the statistics of its kernels.
struct DurationStats {
  uint64_t count = 0;
  int64_t sum = 0;
  int64_t max = 0;
  int64_t min = 0;
  double mean = 0.0;
  double m2 = 0.0;

  void Add(int64_t d) {
    if (count == 0) {
      max = min = d;
    } else {
      max = std::max(max, d);
      min = std::min(min, d);
    }
    ++count;
    sum += d;
    const double delta = static_cast<double>(d) - mean;
    mean += delta / static_cast<double>(count);
    m2 += delta * (static_cast<double>(d) - mean);
  }
  void Merge(const DurationStats& o) {
    if (o.count == 0) {
      return;
    }
    if (count == 0) {
      *this = o;
      return;
    }
    const double n = static_cast<double>(count), m = static_cast<double>(o.count);
    const double delta = o.mean - mean;
    m2 += o.m2 + delta * delta * n * m / (n + m);
    mean += delta * m / (n + m);
    count += o.count;
    sum += o.sum;
    max = std::max(max, o.max);
    min = std::min(min, o.min);
  }
  KernelStats ToKernelStats(std::string name) const {
    KernelStats k;
    k.name = std::move(name);
    k.count = count;
    k.sum_ns = sum;
    k.max_ns = max;
    k.min_ns = min;
    k.mean_ns = count ? static_cast<double>(sum) / static_cast<double>(count) : 0.0;
    k.std_ns = count > 1 ? std::sqrt(std::max(0.0, m2 / static_cast<double>(count - 1))) : 0.0;
    return k;
  }
};

KernelTypeTop TopKernels(const RankGpuTrace& trace, GpuKernelType type, const KernelBreakdownOptions& options) {
  std::unordered_map<uint32_t, DurationStats> by_name;
  for (const GpuRecord& r : trace.records) {
    if (r.type == type) {
      by_name[r.name_id].Add(r.duration());
    }
  }
  struct Named {
    std::string name;
    DurationStats stats;
  };
  std::vector<Named> names;
  names.reserve(by_name.size());
  int64_t total = 0;
  for (const auto& [id, stats] : by_name) {
    std::string name = id < trace.strings.size() ? trace.strings[id] : "<unknown name " + std::to_string(id) + ">";
    names.push_back({std::move(name), stats});
    total += stats.sum;
  }
  std::sort(names.begin(), names.end(), [](const Named& a, const Named& b) {
    return a.stats.sum != b.stats.sum ? a.stats.sum > b.stats.sum : a.name < b.name;
  });
  KernelTypeTop top;
  top.type = type;
  top.distinct_names = names.size();
  // HTA folds the tail into `others` only when there are more than num_kernels names: a name is
  // kept while fewer than num_kernels are kept and the kept ones cover less than duration_ratio
  // of the type's total time (so the largest name is always kept).
  const bool fold = names.size() > options.num_kernels;
  const double cut = options.duration_ratio * static_cast<double>(total);
  DurationStats others;
  int64_t kept_sum = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const bool keep = !fold || (i < options.num_kernels && (i == 0 || static_cast<double>(kept_sum) < cut));
    if (keep) {
      top.kernels.push_back(names[i].stats.ToKernelStats(names[i].name));
      kept_sum += names[i].stats.sum;
    } else {
      others.Merge(names[i].stats);
    }
  }
  if (others.count > 0) {
    top.kernels.push_back(others.ToKernelStats("others"));
  }
  return top;
}

IntervalSet UnionOf(const RankGpuTrace& trace, bool (*keep)(const GpuRecord&)) {
  std::vector<Interval> v;
  for (const GpuRecord& r : trace.records) {
    if (keep(r)) {
      v.push_back({r.start, r.end});
    }
  }
  return IntervalSet::FromIntervals(std::move(v));
}

// HTA's union merges touching intervals and counts zero-length ones as points of activity for
// the span; IntervalSet drops empty intervals, so the span is taken from the records directly.
void SpanOf(const RankGpuTrace& trace, int64_t* begin, int64_t* end) {
  bool first = true;
  for (const GpuRecord& r : trace.records) {
    *begin = first ? r.start : std::min(*begin, r.start);
    *end = first ? r.end : std::max(*end, r.end);
    first = false;
  }
}

}  // namespace

GpuBreakdown ComputeGpuBreakdown(const RankGpuTrace& trace, const KernelBreakdownOptions& options) {
  GpuBreakdown out;
  out.gpu_records = trace.records.size();
  if (trace.records.empty()) {
    return out;
  }

  const IntervalSet compute = UnionOf(trace, [](const GpuRecord& r) { return r.type == GpuKernelType::kComputation; });
  const IntervalSet comm = UnionOf(trace, [](const GpuRecord& r) { return r.type == GpuKernelType::kCommunication; });
  const IntervalSet memory = UnionOf(trace, [](const GpuRecord& r) { return r.type == GpuKernelType::kMemory; });
  const IntervalSet all = UnionOf(trace, [](const GpuRecord&) { return true; });

  CommCompOverlap& ov = out.overlap;
  ov.comm_ns = comm.Length();
  ov.compute_ns = compute.Length();
  ov.has_comm = ov.comm_ns > 0;
  ov.overlap_ns = IntersectionLength(compute, comm);
  if (ov.has_comm) {
    ov.ratio = static_cast<double>(ov.overlap_ns) / static_cast<double>(ov.comm_ns);
    ov.pctg = std::round(100.0 * ov.ratio * 100.0) / 100.0;
  }

  TemporalBreakdown& t = out.temporal;
  int64_t begin = 0, end = 0;
  SpanOf(trace, &begin, &end);
  t.kernel_time_ns = end - begin;
  t.idle_ns = t.kernel_time_ns - all.Length();
  t.compute_ns = compute.Length();
  t.non_compute_ns = t.kernel_time_ns - t.compute_ns - t.idle_ns;
  const auto span = static_cast<double>(t.kernel_time_ns);
  t.idle_pctg = Pctg(static_cast<double>(t.idle_ns), span);
  t.compute_pctg = Pctg(static_cast<double>(t.compute_ns), span);
  t.non_compute_pctg = Pctg(static_cast<double>(t.non_compute_ns), span);

  KernelBreakdown& kb = out.kernels;
  std::array<int64_t, 8> by_mask{};
  const std::array<const IntervalSet*, 3> sets = {&compute, &comm, &memory};
  Sweep(sets, [&](Interval piece, uint32_t mask) { by_mask[mask] += piece.length(); });
  int64_t mask_total = 0;
  for (int64_t v : by_mask) {
    mask_total += v;
  }
  for (uint32_t mask = 1; mask < by_mask.size(); ++mask) {
    if (by_mask[mask] == 0) {
      continue;
    }
    kb.by_mask.push_back({mask, KernelTypeMaskName(mask), by_mask[mask],
                          Pctg(static_cast<double>(by_mask[mask]), static_cast<double>(mask_total))});
  }
  for (GpuKernelType type : {GpuKernelType::kComputation, GpuKernelType::kCommunication, GpuKernelType::kMemory}) {
    KernelTypeTop top = TopKernels(trace, type, options);
    if (top.distinct_names > 0) {
      kb.top.push_back(std::move(top));
    }
  }
  return out;
}

}  // namespace commprof
