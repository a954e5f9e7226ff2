#include "analysis/metrics/step_table.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "analysis/metrics/nearest_rank.h"

namespace commprof {

void AddStepMarks(std::span<const commprof_event> chunk, RankStepMarks& marks) {
  for (const commprof_event& e : chunk) {
    switch (e.kind) {
      case COMMPROF_KIND_STEP:
        marks.steps.push_back(e);
        continue;
      case COMMPROF_KIND_WINDOW:
        marks.windows.push_back(e);
        continue;
      case COMMPROF_KIND_STACK_FRAME:  // written at process end, not an activity of the program
        continue;
      case COMMPROF_KIND_MPI_FINALIZE:
        // Not the program's work: the collector synchronizes clocks just before it (§10.1).
        if (marks.finalize_start < 0 || static_cast<int64_t>(e.start_ns) < marks.finalize_start) {
          marks.finalize_start = static_cast<int64_t>(e.start_ns);
        }
        continue;
      default:
        break;
    }
    marks.last_end = std::max(marks.last_end, static_cast<int64_t>(e.end_ns));
  }
}

uint32_t StepModel::SlotAt(uint32_t rank, int64_t t) const {
  if (rank >= ranks.size()) {
    return UINT32_MAX;
  }
  const auto& v = ranks[rank];
  // The last interval that starts at or before t, if it still runs at t.
  auto it = std::upper_bound(v.begin(), v.end(), t, [](int64_t x, const RankStep& s) { return x < s.start_ns; });
  if (it == v.begin()) {
    return UINT32_MAX;
  }
  --it;
  // [start, end), and an instantaneous interval holds its own instant
  return (t < it->end_ns || t == it->start_ns) ? it->slot : UINT32_MAX;
}

StepModel BuildStepModel(const ProfileInfo& info, const std::vector<RankStepMarks>& marks) {
  StepModel model;
  model.ranks.resize(info.ranks.size());
  std::vector<uint64_t> numbers;
  for (size_t i = 0; i < info.ranks.size() && i < marks.size(); ++i) {
    const RankStepMarks& m = marks[i];
    if (m.steps.empty()) {
      continue;
    }
    const ClockModel clock = info.ranks[i].clock_model();
    std::vector<commprof_event> steps = m.steps;
    std::sort(steps.begin(), steps.end(), [](const commprof_event& a, const commprof_event& b) {
      return a.start_ns < b.start_ns || (a.start_ns == b.start_ns && a.seq < b.seq);
    });
    for (size_t k = 0; k < steps.size(); ++k) {
      const commprof_event& s = steps[k];
      const auto start = static_cast<int64_t>(s.start_ns);
      int64_t window = -1;
      int64_t window_end = -1;
      for (const commprof_event& w : m.windows) {
        if (s.start_ns >= w.start_ns && s.start_ns <= w.end_ns) {
          window = static_cast<int64_t>(w.seq);
          window_end = static_cast<int64_t>(w.end_ns);
          break;
        }
      }
      int64_t end = 0;
      if (s.end_ns > s.start_ns) {
        end = static_cast<int64_t>(s.end_ns);
      } else {
        // The first of: the next mark, its window's end; else the end of the last event (before
        // MPI_Finalize, which no other event follows).
        end = INT64_MAX;
        if (k + 1 < steps.size()) {
          end = static_cast<int64_t>(steps[k + 1].start_ns);
        }
        if (window_end >= start) {
          end = std::min(end, window_end);
        }
        if (end == INT64_MAX) {
          end = std::max(start, m.last_end);
          if (m.finalize_start >= start) {
            end = std::min(end, m.finalize_start);
          }
        }
      }
      RankStep rs;
      rs.step = s.seq;
      rs.start_ns = clock.ToReference(start);
      rs.end_ns = clock.ToReference(end);
      rs.duration_ns = end - start;
      rs.window = window;
      rs.source = s.subtype;
      model.ranks[i].push_back(rs);
      numbers.push_back(s.seq);
    }
  }
  std::sort(numbers.begin(), numbers.end());
  numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
  model.numbers = std::move(numbers);
  for (auto& rank : model.ranks) {
    for (RankStep& s : rank) {
      s.slot = static_cast<uint32_t>(std::lower_bound(model.numbers.begin(), model.numbers.end(), s.step) -
                                     model.numbers.begin());
    }
    std::stable_sort(rank.begin(), rank.end(),
                     [](const RankStep& a, const RankStep& b) { return a.start_ns < b.start_ns; });
  }
  return model;
}

namespace {

double Median(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

StepTable BuildStepTable(const ProfileInfo& info, const StepModel& model,
                         const std::vector<CollectiveInstance>& instances, const std::vector<InstanceMetrics>& measured,
                         const DelayAnalysis& delay) {
  StepTable table;
  if (model.empty()) {
    return table;
  }
  const size_t nslots = model.numbers.size();
  const size_t nranks = info.ranks.size();
  // Per slot and rank index: figures, and whether the rank marked the step.
  std::vector<std::vector<StepRankFigures>> cells(nslots, std::vector<StepRankFigures>(nranks));
  std::vector<std::vector<char>> marked(nslots, std::vector<char>(nranks, 0));
  std::vector<int64_t> window(nslots, -1);
  std::vector<int64_t> start(nslots, INT64_MAX);
  for (size_t r = 0; r < nranks && r < model.ranks.size(); ++r) {
    for (const RankStep& s : model.ranks[r]) {
      StepRankFigures& c = cells[s.slot][r];
      c.rank = info.ranks[r].rank;
      c.duration_ns += s.duration_ns;
      marked[s.slot][r] = 1;
      if (s.start_ns < start[s.slot]) {
        start[s.slot] = s.start_ns;
        window[s.slot] = s.window;
      }
    }
  }
  // Collective time and waiting, on each rank in the step containing its arrival (complete
  // instances only, as §4).
  std::map<uint32_t, uint32_t> index;  // world rank -> rank index
  for (size_t r = 0; r < nranks; ++r) {
    index[info.ranks[r].rank] = static_cast<uint32_t>(r);
  }
  for (size_t i = 0; i < instances.size() && i < measured.size(); ++i) {
    const CollectiveInstance& in = instances[i];
    if (!in.complete()) {
      continue;
    }
    const InstanceMetrics& m = measured[i];
    for (size_t k = 0; k < in.arrivals.size(); ++k) {
      const Arrival& a = in.arrivals[k];
      auto it = index.find(a.world_rank);
      if (it == index.end()) {
        continue;
      }
      const uint32_t slot = model.SlotAt(it->second, a.start);
      if (slot == UINT32_MAX) {
        continue;
      }
      StepRankFigures& c = cells[slot][it->second];
      c.comm_ns += std::max<int64_t>(0, a.end - BlockStart(in, a));
      c.wait_ns += k < m.waits.size() ? m.waits[k] : 0;
    }
  }
  for (const StepCost& sc : delay.step_costs) {
    if (sc.slot < nslots && sc.rank < nranks) {
      cells[sc.slot][sc.rank].delay_cost_ns += sc.ns;
      cells[sc.slot][sc.rank].rank = info.ranks[sc.rank].rank;
    }
  }
  // The noise of each rank's rule (§10.3): per slot, the largest cost of a rank other than r.
  // Computed from each slot's two largest costs.
  std::vector<std::pair<double, uint32_t>> top1(nslots, {0.0, UINT32_MAX});
  std::vector<double> top2(nslots, 0.0);
  for (size_t s = 0; s < nslots; ++s) {
    for (size_t r = 0; r < nranks; ++r) {
      const double c = cells[s][r].delay_cost_ns;
      if (c > top1[s].first) {
        top2[s] = top1[s].first;
        top1[s] = {c, static_cast<uint32_t>(r)};
      } else if (c > top2[s]) {
        top2[s] = c;
      }
    }
  }
  std::map<uint32_t, double> noise;  // rank index -> median over slots of the others' largest cost
  for (size_t s = 0; s < nslots; ++s) {
    const uint32_t r = top1[s].second;
    if (r == UINT32_MAX || noise.count(r) != 0) {
      continue;
    }
    std::vector<double> others(nslots);
    for (size_t q = 0; q < nslots; ++q) {
      others[q] = top1[q].second == r ? top2[q] : top1[q].first;
    }
    noise[r] = Median(std::move(others));
  }

  std::vector<int64_t> times;
  for (size_t s = 0; s < nslots; ++s) {
    StepRow row;
    row.step = model.numbers[s];
    row.window = window[s];
    row.start_ns = start[s] == INT64_MAX ? 0 : start[s];
    double sum = 0;
    row.min_ns = INT64_MAX;
    for (size_t r = 0; r < nranks; ++r) {
      const StepRankFigures& c = cells[s][r];
      row.attributed_ns += c.delay_cost_ns;
      if (!marked[s][r]) {
        continue;
      }
      row.ranks.push_back(c);
      row.min_ns = std::min(row.min_ns, c.duration_ns);
      row.max_ns = std::max(row.max_ns, c.duration_ns);
      sum += static_cast<double>(c.duration_ns);
      row.comm_ns += c.comm_ns;
      row.wait_ns += c.wait_ns;
    }
    if (row.ranks.empty()) {
      row.min_ns = 0;
    } else {
      row.mean_ns = sum / static_cast<double>(row.ranks.size());
      row.imbalance =
          row.max_ns > 0 ? (static_cast<double>(row.max_ns) - row.mean_ns) / static_cast<double>(row.max_ns) : 0.0;
    }
    const auto [cost, top] = top1[s];
    if (top != UINT32_MAX) {
      row.top_rank = info.ranks[top].rank;
      row.straggler_cost_ns = cost;
      // §10.3: the main cause of the step's waiting, material for the step, and standing out from
      // the job's usual per-step noise.
      const bool dominant = cost >= kStepDominantShare * row.attributed_ns;
      const bool material = cost >= kStepMaterialShare * sum && cost > 0;
      const bool stands_out = cost >= kStepStandOut * noise[top];
      if (dominant && material && stands_out) {
        row.straggler = info.ranks[top].rank;
        ++table.summary.with_straggler;
      }
    }
    times.push_back(row.max_ns);
    table.steps.push_back(std::move(row));
  }
  StepSummary& sum = table.summary;
  sum.steps = table.steps.size();
  sum.p50_ns = NearestRank(times, 0.50);
  sum.p99_ns = NearestRank(times, 0.99);
  double total = 0;
  sum.slowest_step = table.steps.front().step;
  for (const StepRow& row : table.steps) {
    total += static_cast<double>(row.max_ns);
    if (row.max_ns > sum.max_ns) {
      sum.max_ns = row.max_ns;
      sum.slowest_step = row.step;
    }
  }
  sum.mean_ns = total / static_cast<double>(table.steps.size());
  return table;
}

}  // namespace commprof
