#include "analysis/compare/run_diff.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <utility>

namespace commprof {
namespace {

using Key = std::tuple<std::string, std::string, std::string>;

Key KeyOf(const MetricValue& m) { return {m.group, m.row, m.metric}; }

// "P%" or "P" (a percentage, >= 0, finite) -> P / 100.
std::optional<double> ParsePercent(const std::string& s) {
  std::string t = s;
  if (!t.empty() && t.back() == '%') {
    t.pop_back();
  }
  if (t.empty()) {
    return std::nullopt;
  }
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v) || v < 0) {
    return std::nullopt;
  }
  return v / 100.0;
}

// The guard's repetitions of a row: per step when both runs have steps and the metric has a
// per-step figure in both, else per call. A single step's new side is its own value, judged
// against the base's range of step times (§13.2).
void Guard(const MetricValue& b, const MetricValue& n, bool steps, DiffRow& row) {
  if (b.group == "step") {
    row.basis = GuardBasis::kSteps;
    row.base_reps = b.per_step;
    row.next_reps = {1, n.value, n.value, n.value, n.value, n.value, n.value};
  } else if (steps && b.per_step.n > 0 && n.per_step.n > 0) {
    row.basis = GuardBasis::kSteps;
    row.base_reps = b.per_step;
    row.next_reps = n.per_step;
  } else if (b.per_call.n > 0 && n.per_call.n > 0) {
    row.basis = GuardBasis::kCalls;
    row.base_reps = b.per_call;
    row.next_reps = n.per_call;
  }
  if (row.base_reps.n < kMinRepetitions) {
    row.basis = GuardBasis::kNone;
  }
  // The mid-mean is for the rows of one collective type, where a slowed type shows (§13.2): a
  // rank's calls pool every type, and which rank waits for a descheduled peer comes and goes with
  // the machine's load (unchanged 2-rank runs under load moved a rank's wait mid-mean by 0.6 ms).
  if (b.group != "type") {
    row.next_reps.mid_mean = std::numeric_limits<double>::quiet_NaN();
  }
}

DiffStatus Judge(const MetricValue& b, DiffRow& row, double floor_ns) {
  if (*row.base == *row.next) {
    return DiffStatus::kUnchanged;
  }
  if (row.worse == Worse::kNeither) {
    return DiffStatus::kChanged;
  }
  // A total over a different number of repetitions is doing more (or less) of the thing: a real
  // change, whatever the per-repetition values say.
  const bool same_count = !b.total || row.base_reps.n == row.next_reps.n;
  // The floor is a time: it widens only repetitions measured in ns (busbw's are its transfers).
  const double floor = b.reps_unit == "ns" ? floor_ns : 0;
  const bool noise = b.group == "step" ? SingleWithinNoise(row.base_reps, *row.next, floor)
                                       : WithinNoise(row.base_reps, row.next_reps, floor);
  if (row.basis != GuardBasis::kNone && same_count && noise) {
    return DiffStatus::kNoise;
  }
  const bool worse = row.worse == Worse::kHigher ? *row.next > *row.base : *row.next < *row.base;
  if (!worse) {
    return DiffStatus::kBetter;
  }
  if (!row.limit) {
    return DiffStatus::kWorse;
  }
  // From 0 there is no ratio: any growth passes every limit.
  if (!row.relative) {
    return DiffStatus::kRegressed;
  }
  const double bad = row.worse == Worse::kHigher ? *row.relative : -*row.relative;
  return bad > *row.limit ? DiffStatus::kRegressed : DiffStatus::kWorse;
}

// Largest relative change first; a change from 0 (no ratio) before all, rows in one run only
// after all; ties in the order of the rows' names, so the output is stable.
bool Before(const DiffRow& x, const DiffRow& y) {
  auto rank = [](const DiffRow& r) {
    if (!r.base || !r.next) {
      return 2;
    }
    return (!r.relative && r.change != 0) ? 0 : 1;
  };
  const int rx = rank(x), ry = rank(y);
  if (rx != ry) {
    return rx < ry;
  }
  const double ax = x.relative ? std::fabs(*x.relative) : 0, ay = y.relative ? std::fabs(*y.relative) : 0;
  if (ax != ay) {
    return ax > ay;
  }
  return std::tie(x.group, x.row, x.metric) < std::tie(y.group, y.row, y.metric);
}

DiffRow RowOf(const MetricValue& m) {
  DiffRow r;
  r.group = m.group;
  r.row = m.row;
  r.metric = m.metric;
  r.unit = m.unit;
  r.worse = m.worse;
  return r;
}

}  // namespace

std::optional<double> RegressionGate::LimitFor(const std::string& metric, bool guarded) const {
  auto it = per_metric.find(metric);
  if (it != per_metric.end()) {
    return it->second;
  }
  return guarded ? all : std::nullopt;
}

const std::vector<std::string>& GateMetrics() {
  static const std::vector<std::string> kMetrics = {
      "total_time", "mean_duration", "wait_time",     "transfer_time", "busbw", "comm_time", "exposed_comm",
      "step_time",  "step_time_p50", "step_time_p99", "step_time_max", "total", "mean",
  };
  return kMetrics;
}

Status ParseRegressionGate(const std::vector<std::string>& specs, RegressionGate& gate) {
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    const std::string metric = eq == std::string::npos ? "" : spec.substr(0, eq);
    const std::optional<double> limit = ParsePercent(eq == std::string::npos ? spec : spec.substr(eq + 1));
    if (!limit) {
      return InvalidArgument("--max-regression " + spec +
                             " is not P% or METRIC=P% with P a number >= 0 (a percentage: 10% or 10)");
    }
    if (eq == std::string::npos) {
      gate.all = *limit;
      continue;
    }
    const auto& known = GateMetrics();
    if (std::find(known.begin(), known.end(), metric) == known.end()) {
      std::string list;
      for (const std::string& k : known) {
        list += (list.empty() ? "" : ", ") + k;
      }
      std::string message = "--max-regression " + spec;
      message += ": unknown metric '";
      message += metric;
      message += "' (known: ";
      message += list;
      message += ")";
      return InvalidArgument(std::move(message));
    }
    gate.per_metric[metric] = *limit;
  }
  return Status::Ok();
}

std::optional<double> ParseDurationNs(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == s.c_str() || !std::isfinite(v) || v < 0) {
    return std::nullopt;
  }
  const double unit = DurationUnitNs(end);
  if (unit == 0) {
    return std::nullopt;
  }
  return v * unit;
}

double DurationUnitNs(std::string_view suffix) {
  if (suffix.empty() || suffix == "ns") {
    return 1;
  }
  if (suffix == "us") {
    return 1e3;
  }
  if (suffix == "ms") {
    return 1e6;
  }
  return suffix == "s" ? 1e9 : 0;
}

const char* DiffStatusName(DiffStatus s) {
  switch (s) {
    case DiffStatus::kUnchanged:
      return "unchanged";
    case DiffStatus::kNoise:
      return "noise";
    case DiffStatus::kBetter:
      return "better";
    case DiffStatus::kWorse:
      return "worse";
    case DiffStatus::kRegressed:
      return "regressed";
    case DiffStatus::kChanged:
      return "changed";
    case DiffStatus::kAdded:
      return "added";
    case DiffStatus::kRemoved:
      return "removed";
  }
  return "unchanged";
}

const char* GuardBasisName(GuardBasis b) {
  switch (b) {
    case GuardBasis::kCalls:
      return "calls";
    case GuardBasis::kSteps:
      return "steps";
    case GuardBasis::kNone:
      break;
  }
  return "none";
}

RunDiff DiffRuns(const RunSummary& base, const RunSummary& next, const RegressionGate& gate, double noise_floor_ns) {
  RunDiff d;
  d.noise_floor_ns = noise_floor_ns;
  d.base_path = base.path;
  d.next_path = next.path;
  d.steps_compared = base.has_steps && next.has_steps;
  std::map<Key, const MetricValue*> in_next;
  for (const MetricValue& m : next.metrics) {
    in_next[KeyOf(m)] = &m;
  }
  for (const MetricValue& b : base.metrics) {
    DiffRow row = RowOf(b);
    row.base = b.value;
    auto it = in_next.find(KeyOf(b));
    if (it == in_next.end()) {
      row.status = DiffStatus::kRemoved;
      d.rows.push_back(std::move(row));
      continue;
    }
    const MetricValue& n = *it->second;
    in_next.erase(it);
    row.next = n.value;
    row.change = n.value - b.value;
    row.relative = RelativeChange(b.value, n.value);
    Guard(b, n, d.steps_compared, row);
    row.limit = b.worse == Worse::kNeither ? std::nullopt : gate.LimitFor(b.metric, row.basis != GuardBasis::kNone);
    row.status = Judge(b, row, noise_floor_ns);
    d.regressions += row.status == DiffStatus::kRegressed ? 1 : 0;
    d.rows.push_back(std::move(row));
  }
  for (const MetricValue& n : next.metrics) {  // in the new run only, in its order
    if (in_next.count(KeyOf(n)) != 0) {
      DiffRow row = RowOf(n);
      row.next = n.value;
      row.status = DiffStatus::kAdded;
      d.rows.push_back(std::move(row));
    }
  }
  std::stable_sort(d.rows.begin(), d.rows.end(), Before);
  return d;
}

}  // namespace commprof
