#include "analysis/compare/run_summary.h"

#include <map>
#include <optional>
#include <utility>

#include "analysis/load/event_screen.h"
#include "core/schema/enums.h"

namespace commprof {
namespace {

Repetitions RepsOf(std::vector<double> values) { return SummarizeRepetitions(values); }

MetricValue Metric(std::string group, std::string row, std::string metric, std::string unit, Worse worse, double value,
                   bool total) {
  MetricValue m;
  m.group = std::move(group);
  m.row = std::move(row);
  m.metric = std::move(metric);
  m.unit = std::move(unit);
  m.worse = worse;
  m.value = value;
  m.total = total;
  return m;
}

// Per collective type: the per-call values the type's figures are made of (§13.1). Only complete
// instances count, as in the wait metrics (§4).
struct TypeSamples {
  std::vector<double> durations, waits;  // per arrival
  std::vector<double> transfers;         // per instance
  double total_time = 0, total_wait = 0, total_transfer = 0;
};

void AddTypes(const JobReport& report, RunSummary& out) {
  std::map<std::string, TypeSamples> samples;
  for (size_t k = 0; k < report.instances.size(); ++k) {
    const CollectiveInstance& in = report.instances[k];
    if (!in.complete()) {
      continue;
    }
    const InstanceMetrics& im = report.measured[k];
    TypeSamples& t = samples[schema::CollectiveOpName(in.op)];
    for (size_t i = 0; i < in.arrivals.size(); ++i) {
      const auto d = static_cast<double>(in.arrivals[i].end - BlockStart(in, in.arrivals[i]));
      t.durations.push_back(d);
      t.waits.push_back(static_cast<double>(im.waits[i]));
      t.total_time += d;
      t.total_wait += static_cast<double>(im.waits[i]);
    }
    t.transfers.push_back(static_cast<double>(im.transfer_ns));
    t.total_transfer += static_cast<double>(im.transfer_ns);
  }
  for (const TypeWaitMetrics& tm : report.wait.types) {
    const std::string name = schema::CollectiveOpName(tm.op);
    TypeSamples& t = samples[name];
    out.metrics.push_back(
        Metric("type", name, "count", "calls", Worse::kNeither, static_cast<double>(tm.count), /*total=*/false));
    const Repetitions durations = RepsOf(std::move(t.durations));
    MetricValue m = Metric("type", name, "total_time", "ns", Worse::kHigher, t.total_time, true);
    m.per_call = durations;
    out.metrics.push_back(m);
    m = Metric("type", name, "mean_duration", "ns", Worse::kHigher, tm.mean_duration_ns, false);
    m.per_call = durations;
    out.metrics.push_back(m);
    m = Metric("type", name, "wait_time", "ns", Worse::kHigher, t.total_wait, true);
    m.per_call = RepsOf(std::move(t.waits));
    out.metrics.push_back(m);
    m = Metric("type", name, "transfer_time", "ns", Worse::kHigher, t.total_transfer, true);
    m.per_call = RepsOf(t.transfers);
    out.metrics.push_back(m);
    // Bandwidth is bytes over transfer time: its repetitions are the instances' transfer times
    // (those with a transfer), so the noise floor, a time, applies to it too.
    m = Metric("type", name, "busbw", "GB/s", Worse::kLower, tm.busbw_gbps, false);
    std::erase(t.transfers, 0.0);
    m.per_call = RepsOf(std::move(t.transfers));
    out.metrics.push_back(m);
  }
}

// Per rank: its blocked time and waiting in collectives (§4) and its exposed communication (§6),
// with its per-call values (all its calls together, whatever their type: §13.2) and, where the
// run has steps, its per-step figures (§10).
std::vector<double> Scaled(std::vector<double> v, double scale) {
  for (double& x : v) {
    x *= scale;
  }
  return v;
}

void AddRanks(const JobReport& report, RunSummary& out) {
  const size_t n = report.wait.ranks.size();
  std::map<uint32_t, size_t> index;
  for (size_t i = 0; i < n; ++i) {
    index[report.wait.ranks[i].rank] = i;
  }
  std::vector<std::vector<double>> comm(n), wait(n), step_comm(n), step_wait(n);
  for (size_t k = 0; k < report.instances.size(); ++k) {
    const CollectiveInstance& in = report.instances[k];
    if (!in.complete()) {
      continue;
    }
    for (size_t i = 0; i < in.arrivals.size(); ++i) {
      auto it = index.find(in.arrivals[i].world_rank);
      if (it == index.end()) {
        continue;
      }
      comm[it->second].push_back(static_cast<double>(in.arrivals[i].end - BlockStart(in, in.arrivals[i])));
      wait[it->second].push_back(static_cast<double>(report.measured[k].waits[i]));
    }
  }
  for (const StepRow& row : report.steps.steps) {
    for (const StepRankFigures& f : row.ranks) {
      auto it = index.find(f.rank);
      if (it != index.end()) {
        step_comm[it->second].push_back(static_cast<double>(f.comm_ns));
        step_wait[it->second].push_back(static_cast<double>(f.wait_ns));
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const RankWaitMetrics& w = report.wait.ranks[i];
    const std::string row = std::to_string(w.rank);
    std::optional<MetricValue> e;
    if (i < report.overlap.size()) {
      // Exposed communication has no per-call figure of its own: its repetitions are the rank's
      // communication repetitions scaled by the rank's exposed share (exposed / communication
      // union), so a change of overlap moves them and a steady overlap does not.
      const RankOverlap& o = report.overlap[i];
      const double share =
          o.comm_ns > 0 ? static_cast<double>(o.exposed_comm_ns) / static_cast<double>(o.comm_ns) : 0.0;
      e = Metric("rank", row, "exposed_comm", "ns", Worse::kHigher, static_cast<double>(o.exposed_comm_ns), true);
      e->per_call = RepsOf(Scaled(comm[i], share));
      e->per_step = RepsOf(Scaled(step_comm[i], share));
    }
    MetricValue c = Metric("rank", row, "comm_time", "ns", Worse::kHigher, static_cast<double>(w.comm_time_ns), true);
    c.per_call = RepsOf(std::move(comm[i]));
    c.per_step = RepsOf(std::move(step_comm[i]));
    out.metrics.push_back(std::move(c));
    MetricValue m = Metric("rank", row, "wait_time", "ns", Worse::kHigher, static_cast<double>(w.wait_time_ns), true);
    m.per_call = RepsOf(std::move(wait[i]));
    m.per_step = RepsOf(std::move(step_wait[i]));
    out.metrics.push_back(std::move(m));
    if (e) {
      out.metrics.push_back(std::move(*e));
    }
  }
}

// Per step number its time (the slowest rank's, §10), and the summary of the step times. A step's
// repetitions are all the run's step times: one step is judged against the spread of the steps.
void AddSteps(const JobReport& report, RunSummary& out) {
  const StepTable& t = report.steps;
  if (t.steps.empty()) {
    return;
  }
  out.has_steps = true;
  std::vector<double> times;
  times.reserve(t.steps.size());
  for (const StepRow& row : t.steps) {
    times.push_back(static_cast<double>(row.max_ns));
  }
  const Repetitions all = RepsOf(times);
  for (const StepRow& row : t.steps) {
    MetricValue m = Metric("step", std::to_string(row.step), "step_time", "ns", Worse::kHigher,
                           static_cast<double>(row.max_ns), false);
    m.per_step = all;
    out.metrics.push_back(std::move(m));
  }
  MetricValue p50 =
      Metric("steps", "all", "step_time_p50", "ns", Worse::kHigher, static_cast<double>(t.summary.p50_ns), false);
  p50.per_step = all;
  out.metrics.push_back(std::move(p50));
  // A tail (p99, max) is one value per run: it has no repetitions, so no guard (§13.2).
  out.metrics.push_back(
      Metric("steps", "all", "step_time_p99", "ns", Worse::kHigher, static_cast<double>(t.summary.p99_ns), false));
  out.metrics.push_back(
      Metric("steps", "all", "step_time_max", "ns", Worse::kHigher, static_cast<double>(t.summary.max_ns), false));
}

}  // namespace

Result<JobReport> AnalyzeForDiff(const ProfileReader& reader) {
  JobReport rep;
  rep.info = reader.info();
  std::vector<RankStepMarks> marks(rep.info.ranks.size());
  auto instances = LoadCollectiveInstances(reader, true, /*nonblocking=*/true,
                                           [&](uint32_t rank_index, std::span<const commprof_event> chunk) {
                                             if (rank_index < marks.size()) {
                                               AddStepMarks(chunk, marks[rank_index]);
                                             }
                                           });
  if (!instances.ok()) {
    return instances.status();
  }
  rep.instances = std::move(instances.value());
  rep.measured = MeasureInstances(rep.instances, SkewThresholdNs(rep.info));
  rep.wait = ComputeWaitMetrics(rep.info, rep.instances, rep.measured);
  const StepModel model = BuildStepModel(rep.info, marks);
  marks.clear();
  rep.steps = BuildStepTable(rep.info, model, rep.instances, rep.measured, DelayAnalysis{});
  rep.overlap.reserve(rep.info.ranks.size());
  for (const RankInfo& r : rep.info.ranks) {
    RankOverlapBuilder overlap(r.clock_model());
    Status st = reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) { overlap.Add(chunk); });
    if (!st.ok()) {
      return Status(st.code(), "overlap of rank " + std::to_string(r.rank) + ": " + st.message());
    }
    rep.overlap.push_back(overlap.Finish(r.rank));
  }
  return rep;
}

void AddNameRows(const OpStats& stats, RunSummary& out) {
  for (const OpStatsRow& r : stats.rows) {
    if (r.comm || r.size_bucket || r.rank) {
      continue;  // only the by-name rows: a diff compares names
    }
    const std::string row = r.category + "/" + r.name;
    // The spread of a name's calls as the stats keep it: [min, p99] stands for [p10, p90].
    Repetitions calls;
    calls.n = r.calls;
    calls.p10 = static_cast<double>(r.min_ns);
    calls.p50 = static_cast<double>(r.p50_ns);
    calls.p90 = static_cast<double>(r.p99_ns);
    calls.min = static_cast<double>(r.min_ns);
    calls.max = static_cast<double>(r.max_ns);
    MetricValue total = Metric("name", row, "total", "ns", Worse::kHigher, static_cast<double>(r.total_ns), true);
    total.per_call = calls;
    out.metrics.push_back(std::move(total));
    MetricValue mean = Metric("name", row, "mean", "ns", Worse::kHigher, r.mean_ns, false);
    mean.per_call = calls;
    out.metrics.push_back(std::move(mean));
  }
}

RunSummary SummarizeRun(const JobReport& report) {
  RunSummary s;
  s.path = report.info.path;
  for (const RankFault& f : report.info.faults) {
    (f.partial ? s.partly_read : s.faults).push_back(f.message);
  }
  AddTypes(report, s);
  AddRanks(report, s);
  AddSteps(report, s);
  return s;
}

Result<RunSummary> SummarizeProfile(const std::string& path, int64_t window) {
  auto reader = ProfileReader::Open(path);
  if (!reader.ok()) {
    return reader.status();
  }
  return SummarizeProfile(*reader.value(), window);
}

Result<RunSummary> SummarizeProfile(ProfileReader& reader, int64_t window) {
  if (window >= 0) {
    if (Status st = reader.SelectWindow(static_cast<uint64_t>(window)); !st.ok()) {
      return st;
    }
  }
  ScreenEventRows(reader);
  auto report = AnalyzeForDiff(reader);
  if (!report.ok()) {
    return report.status();
  }
  RunSummary s = SummarizeRun(report.value());
  s.path = reader.info().path;
  report = JobReport{};  // one analysis held at a time
  StatsOptions options;
  options.screen_rows = false;  // screened above
  auto stats = ComputeOpStats(reader, options);
  if (!stats.ok()) {
    return stats.status();
  }
  AddNameRows(stats.value(), s);
  return s;
}

}  // namespace commprof
