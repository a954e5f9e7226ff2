#include "analysis/metrics/straggler_verdict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "analysis/metrics/comm_label.h"
#include "analysis/metrics/nearest_rank.h"

namespace commprof {

namespace {

int64_t MedianOf(std::vector<int64_t> v) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// §9.3 pattern of one rank from its late calls on its main communicator.
void ReadPattern(const std::vector<const CulpritEvent*>& all, std::pair<uint64_t, uint8_t> site,
                 const RankCommCalls& calls, Straggler& s) {
  std::vector<const CulpritEvent*> late;
  std::vector<int64_t> lateness;
  lateness.reserve(all.size());
  for (const CulpritEvent* e : all) {
    lateness.push_back(e->lateness_ns);
  }
  // Late calls that count: a lateness of at least a quarter of its 90th percentile (the small
  // ones are the noise every rank has).
  std::vector<double> lat_d(lateness.begin(), lateness.end());
  const double floor = 0.25 * NearestRank(lat_d, 0.9);
  std::vector<int64_t> typical;
  for (const CulpritEvent* e : all) {
    if (e->comm_id == site.first && e->op == site.second && static_cast<double>(e->lateness_ns) >= floor) {
      late.push_back(e);
      typical.push_back(e->lateness_ns);
    }
  }
  s.late_instances = late.size();
  s.typical_lateness_ns = MedianOf(typical);
  std::sort(late.begin(), late.end(),
            [](const CulpritEvent* a, const CulpritEvent* b) { return a->ordinal < b->ordinal; });
  const double fraction = calls.calls > 0 ? static_cast<double>(late.size()) / static_cast<double>(calls.calls) : 0;
  // Periodic: late calls come in episodes (a run of consecutive calls: one hiccup can make several
  // calls late, such as both sends of a halo exchange) whose starts are mostly K >= 2 calls apart.
  std::vector<uint64_t> episodes;
  for (size_t i = 0; i < late.size(); ++i) {
    if (i == 0 || late[i]->ordinal > late[i - 1]->ordinal + 1) {
      episodes.push_back(late[i]->ordinal);
    }
  }
  if (episodes.size() >= 3) {
    std::map<uint64_t, size_t> gaps;
    for (size_t i = 1; i < episodes.size(); ++i) {
      ++gaps[episodes[i] - episodes[i - 1]];
    }
    auto mode =
        std::max_element(gaps.begin(), gaps.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    // ... and recur: over at least a quarter of its calls there, with at least half the episodes
    // one every K calls gives over their span. A burst of load that makes every other call late
    // for a few calls is transient; a hiccup every 10 calls that begins halfway is periodic.
    const double k = static_cast<double>(std::max<uint64_t>(mode->first, 1));
    const double span = static_cast<double>(episodes.back() - episodes.front()) + k;
    const double site_calls = static_cast<double>(calls.last_ordinal - calls.first_ordinal + 1);
    const bool recurs = span >= 0.25 * site_calls && static_cast<double>(episodes.size()) >= 0.5 * span / k;
    if (mode->first >= 2 && static_cast<double>(mode->second) >= 0.6 * static_cast<double>(episodes.size() - 1) &&
        fraction <= 0.6 && recurs) {
      s.pattern = "periodic";
      s.period_every = mode->first;
      return;
    }
  }
  // Persistent: late in at least half of its calls there, in each half of them.
  if (!late.empty() && calls.calls > 0) {
    const uint64_t mid = calls.first_ordinal + (calls.last_ordinal - calls.first_ordinal) / 2;
    size_t first_half = 0;
    for (const CulpritEvent* e : late) {
      first_half += e->ordinal <= mid ? 1 : 0;
    }
    const double half_calls = static_cast<double>(calls.calls) / 2;
    if (static_cast<double>(first_half) >= 0.5 * half_calls &&
        static_cast<double>(late.size() - first_half) >= 0.5 * half_calls) {
      s.pattern = "persistent";
      return;
    }
  }
  s.pattern = "transient";
  s.window_start_ns = late.empty() ? 0 : INT64_MAX;
  s.window_end_ns = late.empty() ? 0 : INT64_MIN;
  for (const CulpritEvent* e : late) {
    s.window_start_ns = std::min(s.window_start_ns, e->time_ns - e->lateness_ns);
    s.window_end_ns = std::max(s.window_end_ns, e->time_ns);
  }
}

// A rank's late calls, one per (communicator, operation, ordinal): the waiters of one call of
// its are charged in groups (the waiters of a non-blocking collective or of messages call by
// call), each group giving one event.
std::map<std::tuple<uint64_t, uint8_t, uint64_t>, CulpritEvent> LateCalls(const DelayAnalysis& delay, uint32_t rank) {
  std::map<std::tuple<uint64_t, uint8_t, uint64_t>, CulpritEvent> calls_late;
  for (const CulpritEvent& e : delay.culprit_events) {
    if (e.rank != rank) {
      continue;
    }
    auto [it, fresh] = calls_late.try_emplace({e.comm_id, e.op, e.ordinal}, e);
    if (!fresh) {
      it->second.cost_ns += e.cost_ns;
      it->second.lateness_ns = std::max(it->second.lateness_ns, e.lateness_ns);
      it->second.time_ns = std::max(it->second.time_ns, e.time_ns);
    }
  }
  return calls_late;
}

}  // namespace

std::vector<Straggler> JudgeStragglers(const ProfileInfo& info, const std::vector<CollectiveInstance>& instances,
                                       const DelayAnalysis& delay) {
  std::vector<Straggler> out;
  const size_t n = delay.ranks.size();
  if (n == 0 || delay.attributed_ns <= 0) {
    return out;
  }
  std::vector<double> costs;
  double blocked_sum = 0;
  for (const RankDelay& r : delay.ranks) {
    costs.push_back(r.cost());
    blocked_sum += r.blocked_ns;
  }
  const double lower_quartile = NearestRank(costs, 0.25);
  std::set<uint64_t> nccl_comms;
  std::map<uint64_t, uint32_t> comm_size;
  for (const CollectiveInstance& in : instances) {
    if (in.nccl) {
      nccl_comms.insert(in.comm_id);
    }
    comm_size[in.comm_id] = std::max(comm_size[in.comm_id], in.comm_size);
  }
  std::vector<size_t> named;
  for (size_t i = 0; i < n; ++i) {
    const RankDelay& r = delay.ranks[i];
    const double others_blocked = n > 1 ? (blocked_sum - r.blocked_ns) / static_cast<double>(n - 1) : 0;
    const bool material = r.cost() >= kMaterialShare * delay.attributed_ns;
    const bool stands_out = r.cost() >= kStandsOutFactor * lower_quartile;
    const bool costs_the_job = r.cost() >= kJobShare * others_blocked;
    if (material && stands_out && costs_the_job && r.cost() > 0) {
      named.push_back(i);
    }
  }
  std::sort(named.begin(), named.end(), [&](size_t a, size_t b) {
    return delay.ranks[a].cost() > delay.ranks[b].cost() ||
           (delay.ranks[a].cost() == delay.ranks[b].cost() && delay.ranks[a].rank < delay.ranks[b].rank);
  });

  for (size_t k = 0; k < named.size(); ++k) {
    const size_t i = named[k];
    const RankDelay& r = delay.ranks[i];
    Straggler s;
    s.rank = r.rank;
    s.host = info.ranks[i].host;
    s.delay_cost_ns = r.cost();
    s.direct_ns = r.direct_ns;
    s.propagated_ns = r.propagated_ns;
    s.share = r.cost() / delay.attributed_ns;
    s.saving_ns = k < kMaxReplays ? EstimateSaving(delay.graph, static_cast<uint32_t>(i)) : -1;
    const auto calls_late = LateCalls(delay, r.rank);
    std::vector<const CulpritEvent*> mine;
    std::map<uint64_t, double> by_comm;
    int64_t lateness_sum = 0;
    for (const auto& [key, e] : calls_late) {
      mine.push_back(&e);
      by_comm[e.comm_id] += e.cost_ns;
    }
    for (const auto& [comm, cost] : by_comm) {
      if (cost < 0.05 * r.direct_ns) {
        continue;  // noise: a communicator where it was barely late (listed only where it mattered)
      }
      StragglerCommunicator c;
      c.comm_id = comm;
      c.delay_cost_ns = cost;
      for (const auto& [id, mem] : delay.members) {
        if (id == comm) {
          c.members = mem;
        }
      }
      auto sz = comm_size.find(comm);
      c.size = sz != comm_size.end() && sz->second > 0 ? sz->second : static_cast<uint32_t>(c.members.size());
      c.name = CommName(comm, nccl_comms.contains(comm));
      if (comm == COMMPROF_COMM_WORLD_ID && !nccl_comms.contains(comm)) {
        c.size = static_cast<uint32_t>(info.world_size);
        c.members.clear();
        for (uint32_t w = 0; w < info.world_size; ++w) {
          c.members.push_back(w);
        }
      }
      s.communicators.push_back(std::move(c));
    }
    std::sort(s.communicators.begin(), s.communicators.end(),
              [](const auto& a, const auto& b) { return a.delay_cost_ns > b.delay_cost_ns; });
    // The pattern is read on its main call site: the (communicator, operation) where it caused the
    // most waiting.
    std::map<std::pair<uint64_t, uint8_t>, double> by_site;
    for (const CulpritEvent* e : mine) {
      by_site[{e->comm_id, e->op}] += e->cost_ns;
    }
    std::pair<uint64_t, uint8_t> main_site{0, 0};
    double best = -1;
    for (const auto& [site, cost] : by_site) {
      if (cost > best) {
        best = cost;
        main_site = site;
      }
    }
    RankCommCalls calls;
    for (const RankCommCalls& c : delay.comm_calls) {
      if (c.rank == r.rank && c.comm_id == main_site.first && c.op == main_site.second) {
        calls = c;
      }
    }
    ReadPattern(mine, main_site, calls, s);
    for (const CulpritEvent* e : mine) {
      if (e->comm_id == main_site.first && e->op == main_site.second) {
        lateness_sum += e->lateness_ns;
      }
    }
    // Cause: its lateness came from compute before the call (its excess over its partners) or from
    // inside communication.
    double excess = 0;
    for (uint32_t c : delay.graph.by_rank[i]) {
      excess += static_cast<double>(delay.graph.calls[c].excess);
    }
    s.cause = excess >= 0.25 * static_cast<double>(lateness_sum) ? "compute" : "transfer";
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace commprof
