#include "analysis/metrics/gpu_launch_analysis.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <utility>

namespace commprof {

namespace {

using StreamKey = std::pair<uint16_t, uint32_t>;  // (device, stream)

// correlation -> the CUDA API call with it. When several calls share one (a runtime call and the
// driver call under it), a launch call wins, then the earliest.
class CallsByCorrelation {
 public:
  explicit CallsByCorrelation(const std::vector<ApiCall>& calls) {
    by_corr_.reserve(calls.size());
    for (const ApiCall& c : calls) {
      auto [it, inserted] = by_corr_.try_emplace(c.correlation, &c);
      if (inserted) {
        continue;
      }
      const ApiCall* have = it->second;
      if ((c.launch && !have->launch) || (c.launch == have->launch && c.start < have->start)) {
        it->second = &c;
      }
    }
  }
  const ApiCall* Find(uint32_t correlation) const {
    if (correlation == 0) {
      return nullptr;
    }
    auto it = by_corr_.find(correlation);
    return it == by_corr_.end() ? nullptr : it->second;
  }
  const ApiCall* FindLaunch(uint32_t correlation) const {
    const ApiCall* c = Find(correlation);
    return c != nullptr && c->launch ? c : nullptr;
  }

 private:
  std::unordered_map<uint32_t, const ApiCall*> by_corr_;
};

// Kernels, memcpy and memset: the records HTA's idle, queue and launch analyses look at.
bool IsKernelLike(const GpuRecord& r) { return r.type != GpuKernelType::kOther; }

std::map<StreamKey, std::vector<const GpuRecord*>> KernelLikeByStream(const RankGpuTrace& trace) {
  std::map<StreamKey, std::vector<const GpuRecord*>> out;
  for (const GpuRecord& r : trace.records) {
    if (IsKernelLike(r)) {
      out[{r.device, r.stream}].push_back(&r);
    }
  }
  for (auto& [key, v] : out) {
    std::sort(v.begin(), v.end(), [](const GpuRecord* a, const GpuRecord* b) {
      return a->start != b->start ? a->start < b->start : a->end < b->end;
    });
  }
  return out;
}

DurationSummary Summarize(std::vector<int64_t> values) {
  DurationSummary s;
  s.count = values.size();
  if (values.empty()) {
    return s;
  }
  std::sort(values.begin(), values.end());
  double sum = 0.0;
  for (int64_t v : values) {
    sum += static_cast<double>(v);
  }
  s.mean = sum / static_cast<double>(values.size());
  s.p50 = Quantile(values, 0.5);
  s.p95 = Quantile(values, 0.95);
  s.max = values.back();
  return s;
}

}  // namespace

double Quantile(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) {
    return 0.0;
  }
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return static_cast<double>(sorted[lo]) + frac * static_cast<double>(sorted[hi] - sorted[lo]);
}

std::vector<StreamIdle> ComputeIdleBreakdown(const RankGpuTrace& trace, const IdleBreakdownOptions& options) {
  const CallsByCorrelation calls(trace.api_calls);
  std::vector<StreamIdle> out;
  for (const auto& [key, recs] : KernelLikeByStream(trace)) {
    StreamIdle s;
    s.device = key.first;
    s.stream = key.second;
    s.records = recs.size();
    // prev_end is the latest end so far, so a record that starts inside an earlier one leaves no
    // gap (HTA takes the previous row's end; on a stream, records do not overlap and the two agree).
    int64_t prev_end = recs.front()->end;
    int64_t busy_begin = recs.front()->start;
    s.busy_ns = 0;
    for (size_t i = 1; i < recs.size(); ++i) {
      const GpuRecord& r = *recs[i];
      const int64_t gap = r.start - prev_end;
      if (gap > 0) {
        s.busy_ns += prev_end - busy_begin;
        busy_begin = r.start;
        const ApiCall* call = calls.Find(r.correlation);
        if (call != nullptr && call->start > prev_end) {
          s.host_wait_ns += gap;  // the CPU had not launched it yet
          ++s.host_wait_gaps;
        } else if (gap < options.consecutive_kernel_delay_ns) {
          s.kernel_wait_ns += gap;
          ++s.kernel_wait_gaps;
        } else {
          s.other_ns += gap;
          ++s.other_gaps;
        }
      }
      prev_end = std::max(prev_end, r.end);
    }
    s.busy_ns += prev_end - busy_begin;
    s.span_ns = prev_end - recs.front()->start;
    out.push_back(s);
  }
  return out;
}

std::vector<StreamQueueLength> ComputeQueueLength(const RankGpuTrace& trace) {
  const CallsByCorrelation calls(trace.api_calls);
  // Per stream, the +1 (launch call start) and -1 (GPU record start) steps of every matched pair.
  std::map<StreamKey, std::vector<std::pair<int64_t, int>>> steps;
  for (const GpuRecord& r : trace.records) {
    if (!IsKernelLike(r)) {
      continue;
    }
    const ApiCall* call = calls.FindLaunch(r.correlation);
    if (call == nullptr) {
      continue;  // unmatched records and launches leave the queue alone
    }
    auto& v = steps[{r.device, r.stream}];
    v.emplace_back(call->start, +1);
    v.emplace_back(r.start, -1);
  }
  const int64_t trace_span = trace.trace_end - trace.trace_begin;
  std::vector<StreamQueueLength> out;
  for (auto& [key, v] : steps) {
    // At equal times the -1 goes first: a record that starts as another launch is made has left
    // the queue by then.
    std::sort(v.begin(), v.end());
    std::vector<int64_t> samples;
    samples.reserve(v.size());
    int64_t q = 0;
    StreamQueueLength s;
    s.device = key.first;
    s.stream = key.second;
    for (size_t i = 0; i < v.size(); ++i) {
      q += v[i].second;
      samples.push_back(q);
      if (q >= kCudaMaxLaunchQueuePerStream && i + 1 < v.size()) {
        s.blocked_ns += v[i + 1].first - v[i].first;
      }
    }
    s.count = samples.size();
    double sum = 0.0;
    for (int64_t x : samples) {
      sum += static_cast<double>(x);
    }
    s.mean = sum / static_cast<double>(samples.size());
    std::sort(samples.begin(), samples.end());
    s.min = static_cast<double>(samples.front());
    s.p25 = Quantile(samples, 0.25);
    s.p50 = Quantile(samples, 0.5);
    s.p75 = Quantile(samples, 0.75);
    s.max = static_cast<double>(samples.back());
    s.blocked_ratio = trace_span > 0 ? static_cast<double>(s.blocked_ns) / static_cast<double>(trace_span) : 0.0;
    out.push_back(s);
  }
  return out;
}

LaunchStats ComputeLaunchStats(const RankGpuTrace& trace) {
  const CallsByCorrelation calls(trace.api_calls);
  LaunchStats st;
  std::vector<int64_t> cpu, gpu, delay;
  std::vector<bool> used(trace.api_calls.size(), false);  // by index into api_calls
  for (const GpuRecord& r : trace.records) {
    if (!IsKernelLike(r)) {
      continue;
    }
    const ApiCall* call = calls.FindLaunch(r.correlation);
    if (call == nullptr) {
      continue;
    }
    used[static_cast<size_t>(call - trace.api_calls.data())] = true;
    const int64_t c = call->end - call->start;
    const int64_t g = r.duration();
    const int64_t d = std::max<int64_t>(0, r.start - call->end);
    cpu.push_back(c);
    gpu.push_back(g);
    delay.push_back(d);
    if (d > kLaunchDelayOutlierNs) {
      ++st.launch_delay_outliers;
    }
    if (c > kRuntimeOutlierNs) {
      ++st.cpu_duration_outliers;
    }
    if (g < c) {
      ++st.short_kernels;
    }
  }
  for (size_t i = 0; i < trace.api_calls.size(); ++i) {
    if (trace.api_calls[i].launch && !used[i]) {
      ++st.launches_without_gpu;
    }
  }
  st.pairs = cpu.size();
  st.cpu_duration = Summarize(std::move(cpu));
  st.gpu_duration = Summarize(std::move(gpu));
  st.launch_delay = Summarize(std::move(delay));
  return st;
}

}  // namespace commprof
