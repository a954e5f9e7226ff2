#include "analysis/metrics/delay_costs.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>

#include "analysis/match/flat_numbering.h"

namespace commprof {

namespace {

constexpr int kMaxDepth = 32;           // §9.2: longer chains are charged to the rank reached
constexpr double kNegligibleNs = 1e-3;  // shares under a picosecond are not followed further

// Where a dependency came from, for the culprit events (§9.3): the communicator of the call and
// the culprit's place among its calls there.
struct DepOrigin {
  uint64_t comm_id = 0;
  uint64_t ordinal = 0;  // for a message: filled when needed, from post_rank and post_time
  uint8_t op = 0;
  uint32_t post_rank = UINT32_MAX;  // a message's poster (world rank); UINT32_MAX: not a message
  int64_t post_time = 0;
};

// (world rank, communicator, operation) of a rank's posts, for their ordinals.
struct PostKey {
  uint32_t rank = 0;
  uint64_t comm = 0;
  uint8_t op = 0;
  bool operator==(const PostKey&) const = default;
};
struct PostKeyHash {
  size_t operator()(const PostKey& k) const {
    return static_cast<size_t>(k.comm * 0x9E3779B97F4A7C15ull ^ (uint64_t{k.rank} << 8 | k.op));
  }
};

// The key of a call that may complete several operations (a Wait* with non-blocking collectives
// and messages, a Sendrecv's two halves): the rank, and its blocked start and exit.
struct CallKey {
  uint32_t rank = 0;
  int64_t start = 0;
  int64_t end = 0;
  bool operator==(const CallKey&) const = default;
};
struct CallKeyHash {
  size_t operator()(const CallKey& k) const {
    return static_cast<size_t>(static_cast<uint64_t>(k.start) * 0x9E3779B97F4A7C15ull ^
                               static_cast<uint64_t>(k.end) * 0xC2B2AE3D27D4EB4Full ^ k.rank);
  }
};
// CallKeys numbered in a flat table: a message has two calls to look up (millions in a large job).
struct CallKeyTraits {
  using Key = CallKey;
  struct Slot {
    int64_t start = 0;
    int64_t end = 0;
    uint32_t rank = 0;
    uint32_t number = kFlatNumberingEmpty;
  };
  static Slot Make(const CallKey& k, uint32_t number) { return Slot{k.start, k.end, k.rank, number}; }
  static bool Holds(const Slot& s, const CallKey& k) {
    return s.start == k.start && s.end == k.end && s.rank == k.rank;
  }
  static size_t Home(const CallKey& k) { return static_cast<size_t>(SpreadBits(CallKeyHash{}(k))); }
  static size_t HomeOf(const Slot& s) { return Home(CallKey{s.rank, s.start, s.end}); }
};

// Sorts call indices by (key(c), c), comparing (key, index) pairs side by side rather than through
// the calls (random reads); nothing to do when already in order, as calls mostly are. A rank's
// calls come as a few runs already in order (its collectives by instance, then its messages'
// calls): up to kFewRuns runs are merged, in linear time, rather than sorted.
template <typename Key>
void SortByKey(std::vector<uint32_t>& v, Key key) {
  constexpr size_t kFewRuns = 8;
  std::vector<std::pair<int64_t, uint32_t>> keyed;
  keyed.reserve(v.size());
  std::vector<size_t> run_starts = {0};
  for (uint32_t c : v) {
    keyed.emplace_back(key(c), c);
    if (keyed.size() >= 2 && keyed[keyed.size() - 2] > keyed.back() && run_starts.size() <= kFewRuns) {
      run_starts.push_back(keyed.size() - 1);
    }
  }
  if (run_starts.size() == 1) {
    return;
  }
  if (run_starts.size() <= kFewRuns) {
    for (size_t r = 1; r < run_starts.size(); ++r) {  // [0, start of run r) is in order: take run r in
      const auto end =
          r + 1 < run_starts.size() ? keyed.begin() + static_cast<std::ptrdiff_t>(run_starts[r + 1]) : keyed.end();
      std::inplace_merge(keyed.begin(), keyed.begin() + static_cast<std::ptrdiff_t>(run_starts[r]), end);
    }
  } else {
    std::sort(keyed.begin(), keyed.end());
  }
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = keyed[i].second;
  }
}

int64_t Median(std::vector<int64_t>& v) {
  if (v.empty()) {
    return 0;
  }
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// The charging of §9.1-§9.2 over a built graph.
class Charger {
 public:
  Charger(const SyncGraph& g, DelayAnalysis& out) : g_(g), out_(out), cursor_(g.by_rank.size(), 0) {}

  // `amount` ns of waiting, spread evenly over [x, y], was caused by rank index m not having
  // arrived: follow it to the root causes (§9.2). Over the window, m was (a) blocked waiting for
  // others: that part propagates to them; (b) in the tail of a collective after its wait (the
  // collective's own algorithm): charged to nobody; (c) running, of which only its excess compute
  // (§9.4) stands against it. The amount is split in proportion to (a), (b) and (c); when all are
  // zero (m ran, with no measurable excess) m is charged.
  void Charge(uint32_t m, int64_t x, int64_t y, double amount, int depth) {
    if (amount <= 0) {
      return;
    }
    if (amount < kNegligibleNs || depth >= kMaxDepth || y <= x) {
      Credit(m, amount, depth);
      return;
    }
    const auto& calls = g_.by_rank[m];
    const auto& reach = g_.reach[m];
    // The first call that starts at or after y, found from where the last query on m ended
    // (queries mostly move forward in time: amortised O(1) rather than a cache-missing search).
    size_t& cur = cursor_[m];
    cur = std::min(cur, calls.size());
    constexpr int kNearSteps = 8;
    int steps = 0;
    while (cur > 0 && g_.calls[calls[cur - 1]].block_start >= y && steps++ < kNearSteps) {
      --cur;
    }
    while (cur < calls.size() && g_.calls[calls[cur]].block_start < y && steps++ < kNearSteps) {
      ++cur;
    }
    if (steps > kNearSteps) {  // far from the last query: search
      cur = static_cast<size_t>(
          std::partition_point(calls.begin(), calls.end(), [&](uint32_t c) { return g_.calls[c].block_start < y; }) -
          calls.begin());
    }
    auto it = calls.begin() + static_cast<std::ptrdiff_t>(cur);
    const auto last = static_cast<std::ptrdiff_t>(it - calls.begin());
    // Walk back from the last call that started before y while some earlier call still reaches x.
    double blocked = 0, tail = 0;
    std::ptrdiff_t first = last;
    for (auto k = last - 1; k >= 0 && reach[k] > x; --k) {
      const SyncCall& c = g_.calls[calls[k]];
      const int64_t we = g_.WaitEnd(c);
      blocked += static_cast<double>(std::max<int64_t>(0, std::min(y, we) - std::max(x, c.block_start)));
      if (c.collective) {
        tail += static_cast<double>(std::max<int64_t>(0, std::min(y, c.exit) - std::max(x, we)));
      }
      first = k;
    }
    if (blocked <= 0 && tail <= 0) {
      Credit(m, amount, depth);  // m ran all along: whether or not its excess shows, it is the cause
      return;
    }
    const double len = static_cast<double>(y - x);
    const double running = std::max(0.0, len - blocked - tail);
    // m's excess compute before the calls it arrived at in (x, y]: [lo, hi) of its calls.
    const auto& ex = g_.excess_sum[m];
    auto lo = it;
    while (lo != calls.begin() && g_.calls[*(lo - 1)].block_start > x) {
      --lo;
    }
    auto hi = it;
    while (hi != calls.end() && g_.calls[*hi].block_start <= y) {
      ++hi;
    }
    const double excess = std::min(running, static_cast<double>(ex[hi - calls.begin()] - ex[lo - calls.begin()]));
    const double weight = blocked + tail + excess;
    if (weight <= 0) {
      Credit(m, amount, depth);
      return;
    }
    for (auto k = first; k < last; ++k) {
      const SyncCall& c = g_.calls[calls[k]];
      const int64_t ov0 = std::max(x, c.block_start), ov1 = std::min(y, g_.WaitEnd(c));
      if (ov1 > ov0) {
        Distribute(c, ov0, ov1, amount * static_cast<double>(ov1 - ov0) / weight, depth + 1);
      }
    }
    // (b) is charged to nobody: it stays out of the roots, so it counts as unattributed.
    Credit(m, amount * excess / weight, depth);
  }

  // `part` ns spread over [ov0, ov1] (inside c's wait): at each instant, an equal share to each
  // dependency still missing (§9.1), each then followed (§9.2).
  void Distribute(const SyncCall& c, int64_t ov0, int64_t ov1, double part, int depth) {
    const SyncDep* d = &g_.deps[c.dep_begin];
    const uint32_t n = c.dep_count;
    uint32_t j = 0;
    while (j < n && d[j].time <= ov0) {
      ++j;
    }
    const double rate = part / static_cast<double>(ov1 - ov0);
    std::vector<double> share(n - j, 0.0);
    int64_t t = ov0;
    double acc = 0;  // running sum of len / missing: what each still-missing dependency has had
    uint32_t q = j;
    while (t < ov1 && q < n) {
      const int64_t next = std::min(d[q].time, ov1);
      acc += rate * static_cast<double>(next - t) / static_cast<double>(n - q);
      t = next;
      // every dependency arriving at `next` has had its last share
      while (q < n && d[q].time <= t) {
        share[q - j] = acc;
        ++q;
      }
    }
    for (uint32_t r = q; r < n; ++r) {
      share[r - j] = acc;  // still missing at ov1
    }
    for (uint32_t r = j; r < n; ++r) {
      if (share[r - j] > 0) {
        Charge(d[r].rank, ov0, std::min(d[r].time, ov1), share[r - j], depth);
      }
    }
  }

  std::vector<std::pair<uint32_t, double>>& roots() { return roots_; }

 private:
  void Credit(uint32_t m, double amount, int depth) {
    if (amount <= 0) {
      return;
    }
    RankDelay& r = out_.ranks[m];
    (depth == 0 ? r.direct_ns : r.propagated_ns) += amount;
    for (auto& [root, v] : roots_) {
      if (root == m) {
        v += amount;
        return;
      }
    }
    roots_.emplace_back(m, amount);
  }

  const SyncGraph& g_;
  DelayAnalysis& out_;
  std::vector<std::pair<uint32_t, double>> roots_;  // per group: root rank index -> ns
  std::vector<size_t> cursor_;                      // per rank: where its last query ended in by_rank
};

}  // namespace

int64_t SyncGraph::WaitEnd(const SyncCall& c) const {
  if (c.dep_count == 0) {
    return c.block_start;
  }
  const int64_t last = deps[c.dep_begin + c.dep_count - 1].time;
  return std::clamp(last, c.block_start, std::max(c.block_start, c.exit));
}

DelayAnalysis ComputeDelayCosts(const ProfileInfo& info, const std::vector<CollectiveInstance>& instances,
                                const std::vector<InstanceMetrics>& measured, std::span<const P2PMessage> messages,
                                int64_t skew_threshold_ns, const StepOf& step_of) {
  DelayAnalysis out;
  SyncGraph& g = out.graph;
  const size_t nranks = info.ranks.size();
  std::unordered_map<uint32_t, uint32_t> index;  // world rank -> index into info.ranks
  for (size_t i = 0; i < nranks; ++i) {
    index[info.ranks[i].rank] = static_cast<uint32_t>(i);
    RankDelay d;
    d.rank = info.ranks[i].rank;
    out.ranks.push_back(d);
  }
  auto idx = [&](uint32_t world) {
    auto it = index.find(world);
    return it == index.end() ? UINT32_MAX : it->second;
  };
  g.rank_end.assign(nranks, INT64_MIN);

  // ---- build: blocking instances (one call per participant, dependencies shared) ----
  struct InstanceGroup {
    size_t instance = 0;
    uint32_t first_call = 0;
  };
  std::vector<InstanceGroup> groups;
  std::map<std::tuple<uint32_t, uint64_t, uint8_t>, RankCommCalls> comm_calls;
  std::map<uint64_t, std::vector<uint32_t>> members;
  std::map<std::pair<uint64_t, uint8_t>, RankCommCalls> site_calls;  // instances per (comm, op)
  std::vector<SyncDep> sorted;                                       // scratch: one instance's arrivals
  // `n` calls of `world` with the ordinals first .. first + n - 1.
  auto count_call = [&](uint32_t world, uint64_t comm, uint8_t op, uint64_t first, uint64_t n) {
    RankCommCalls& c = comm_calls[{world, comm, op}];
    if (c.calls == 0) {
      c.rank = world;
      c.comm_id = comm;
      c.op = op;
      c.first_ordinal = first;
    }
    c.calls += n;
    c.first_ordinal = std::min(c.first_ordinal, first);
    c.last_ordinal = std::max(c.last_ordinal, first + n - 1);
  };
  // Calls that may complete several operations, keyed; their dependencies gathered first.
  FlatNumbering<CallKeyTraits> merged;
  std::vector<uint32_t> merged_calls;  // by the key's number: the call it is
  // The non-blocking collectives' completing calls by key: one Wait* that completed several
  // operations (Waitall over two collectives, or a collective and messages) must be one blocked
  // call with all their dependencies, not several calls each claiming the same wait.
  struct Completion {
    uint32_t call = 0;
    DepOrigin origin;
  };
  std::unordered_map<CallKey, std::vector<Completion>, CallKeyHash> completions;
  std::unordered_map<uint32_t, uint32_t> alias;  // retired call -> the merged call it became
  // The dependencies of merged calls before they are grouped per call: sorted in place by (call,
  // time, rank), without an index indirection.
  struct LooseDep {
    uint32_t call = 0;
    SyncDep dep;
    DepOrigin origin;
  };
  std::vector<LooseDep> loose;
  std::vector<std::pair<uint32_t, uint32_t>> partners;  // merged calls: (call, partner call)
  auto merged_call = [&](uint32_t ri, int64_t arrival, int64_t start, int64_t end) {
    const auto [number, fresh] = merged.FindOrInsert(CallKey{ri, start, end});
    if (fresh) {
      merged_calls.push_back(static_cast<uint32_t>(g.calls.size()));
      g.calls.push_back(SyncCall{arrival, start, end, 0, ri, 0, 0, false});
    } else {
      SyncCall& c = g.calls[merged_calls[number]];
      c.arrival = std::min(c.arrival, arrival);
    }
    return merged_calls[number];
  };
  // An instance's place among the instances of its operation on its communicator, by sequence
  // number: the ordinal of every participant's call there (§9.3).
  std::map<std::pair<uint64_t, uint8_t>, std::vector<uint64_t>> seqs;
  for (const CollectiveInstance& in : instances) {
    if (in.complete() && in.arrivals.size() >= 2) {
      seqs[{in.comm_id, in.op}].push_back(in.seq);
    }
  }
  for (auto& [key, v] : seqs) {
    std::sort(v.begin(), v.end());
  }
  auto instance_ordinal = [&](const CollectiveInstance& in) {
    const auto& v = seqs[{in.comm_id, in.op}];
    return static_cast<uint64_t>(std::lower_bound(v.begin(), v.end(), in.seq) - v.begin());
  };
  std::vector<uint64_t> ordinal_of(instances.size(), 0);
  for (size_t k = 0; k < instances.size(); ++k) {
    const CollectiveInstance& in = instances[k];
    if (!in.complete() || in.arrivals.size() < 2) {
      continue;
    }
    const InstanceMetrics& m = measured[k];
    std::vector<uint32_t>& mem = members[in.comm_id];
    if (mem.empty()) {
      for (const Arrival& a : in.arrivals) {
        mem.push_back(a.world_rank);
      }
    }
    ordinal_of[k] = instance_ordinal(in);
    {
      // Counted per (communicator, operation): every member calls each instance (expanded to the
      // members at the end, rather than a map lookup per arrival).
      RankCommCalls& c = site_calls[{in.comm_id, in.op}];
      c.first_ordinal = c.calls == 0 ? ordinal_of[k] : std::min(c.first_ordinal, ordinal_of[k]);
      c.last_ordinal = std::max(c.last_ordinal, ordinal_of[k]);
      ++c.calls;
    }
    // The instance's arrivals by time: the dependency list of every all-waiting participant.
    sorted.clear();
    sorted.reserve(in.arrivals.size());
    for (const Arrival& a : in.arrivals) {
      sorted.push_back({a.start, idx(a.world_rank)});
    }
    std::sort(sorted.begin(), sorted.end(),
              [](const SyncDep& x, const SyncDep& y) { return std::tie(x.time, x.rank) < std::tie(y.time, y.rank); });
    int32_t root_i = -1;
    for (size_t i = 0; i < in.arrivals.size(); ++i) {
      if (in.root >= 0 && in.arrivals[i].local_rank == in.root) {
        root_i = static_cast<int32_t>(i);
      }
    }
    // The dependencies of participant i, appended to `to` (sorted by time).
    auto deps_of = [&](size_t i, std::vector<SyncDep>& to) {
      const Arrival& x = in.arrivals[i];
      switch (m.deps[i]) {
        case WaitDeps::kNone:
          break;
        case WaitDeps::kAll:
          to.insert(to.end(), sorted.begin(), sorted.end());
          break;
        case WaitDeps::kRoot:
          if (root_i >= 0) {
            to.push_back({in.arrivals[root_i].start, idx(in.arrivals[root_i].world_rank)});
          }
          break;
        case WaitDeps::kPrefix:
        case WaitDeps::kPrefixExclusive:
          for (const SyncDep& s : sorted) {
            for (const Arrival& y : in.arrivals) {
              if (idx(y.world_rank) == s.rank && y.local_rank >= 0 &&
                  (y.local_rank < x.local_rank || (m.deps[i] == WaitDeps::kPrefix && y.local_rank == x.local_rank))) {
                to.push_back(s);
              }
            }
          }
          break;
      }
    };
    // Blocking or not (a non-blocking one blocks in the Wait* that completed it), one call per
    // participant, sharing the instance's dependency list. A Wait* that completed several
    // operations is made one call below (completions).
    {
      groups.push_back({k, static_cast<uint32_t>(g.calls.size())});
      const auto shared_begin = static_cast<uint32_t>(g.deps.size());
      bool shared = false;
      for (size_t i = 0; i < in.arrivals.size(); ++i) {
        const Arrival& x = in.arrivals[i];
        SyncCall c{x.start, BlockStart(in, x), x.end, 0, idx(x.world_rank), 0, 0, true};
        if (m.deps[i] == WaitDeps::kAll) {
          if (!shared) {
            g.deps.insert(g.deps.end(), sorted.begin(), sorted.end());
            shared = true;
          }
          c.dep_begin = shared_begin;
          c.dep_count = static_cast<uint32_t>(sorted.size());
        } else {
          c.dep_begin = static_cast<uint32_t>(g.deps.size());
          deps_of(i, g.deps);
          c.dep_count = static_cast<uint32_t>(g.deps.size()) - c.dep_begin;
        }
        if (in.nonblocking && x.shared_completion) {
          completions[CallKey{c.rank, c.block_start, c.exit}].push_back(
              {static_cast<uint32_t>(g.calls.size()), {in.comm_id, ordinal_of[k], in.op}});
        }
        g.calls.push_back(c);
      }
    }
  }

  // ---- build: matched messages (§9.1: Late Sender and Late Receiver as dependencies) ----
  // Ordinal of a message among its sender's sends (receiver's receives) on the communicator.
  std::unordered_map<PostKey, std::vector<int64_t>, PostKeyHash> posts;
  for (const P2PMessage& msg : messages) {
    posts[{msg.src, msg.comm_id, COMMPROF_OP_SEND}].push_back(msg.send_start);
    posts[{msg.dst, msg.comm_id, COMMPROF_OP_RECV}].push_back(msg.recv_start);
  }
  for (auto& [key, v] : posts) {
    const uint32_t rank = key.rank;
    const uint64_t comm = key.comm;
    const uint8_t op = key.op;
    std::sort(v.begin(), v.end());
    if (!v.empty()) {  // its posts have the ordinals 0 .. size - 1
      count_call(rank, comm, op, 0, v.size());
    }
    std::vector<uint32_t>& mem = members[comm];
    if (std::find(mem.begin(), mem.end(), rank) == mem.end() && comm != COMMPROF_COMM_WORLD_ID) {
      mem.push_back(rank);
    }
  }
  auto ordinal = [&](uint32_t rank, uint64_t comm, uint8_t op, int64_t t) {
    const auto& v = posts[{rank, comm, op}];
    return static_cast<uint64_t>(std::lower_bound(v.begin(), v.end(), t) - v.begin());
  };
  for (const P2PMessage& msg : messages) {
    const uint32_t si = idx(msg.src), di = idx(msg.dst);
    if (si == UINT32_MAX || di == UINT32_MAX) {
      continue;
    }
    uint32_t recv_call = UINT32_MAX, send_call = UINT32_MAX;
    if (msg.recv_call_start != INT64_MIN) {
      recv_call = merged_call(di, msg.recv_call_start, msg.recv_call_start, msg.recv_end);
      loose.push_back({recv_call,
                       SyncDep{msg.send_start, si},  // Late Sender
                       {msg.comm_id, 0, COMMPROF_OP_SEND, msg.src, msg.send_start}});
    }
    if (msg.send_call_start != INT64_MIN) {
      send_call = merged_call(si, msg.send_call_start, msg.send_call_start, msg.send_end);
      if (msg.send_call_start < msg.recv_start && msg.recv_start < msg.send_end) {  // Late Receiver
        loose.push_back(
            {send_call, SyncDep{msg.recv_start, di}, {msg.comm_id, 0, COMMPROF_OP_RECV, msg.dst, msg.recv_start}});
      }
    }
    if (recv_call != UINT32_MAX && send_call != UINT32_MAX) {
      partners.emplace_back(recv_call, send_call);
      partners.emplace_back(send_call, recv_call);
    }
  }
  // Completing calls shared by several operations: their dependencies move to one merged call (a
  // copy per participant, only where calls collide) and the separate calls are retired (rank
  // UINT32_MAX: left out of the waits, the per-rank index and the replay).
  for (auto& [key, list] : completions) {
    if (list.size() < 2 && !merged.Find(key).has_value()) {
      continue;
    }
    const SyncCall first = g.calls[list.front().call];
    const uint32_t target = merged_call(key.rank, first.arrival, key.start, key.end);
    g.calls[target].collective = true;
    for (const Completion& done : list) {
      alias[done.call] = target;
      SyncCall& c = g.calls[done.call];
      g.calls[target].arrival = std::min(g.calls[target].arrival, c.arrival);
      for (uint32_t d = c.dep_begin; d < c.dep_begin + c.dep_count; ++d) {
        loose.push_back({target, g.deps[d], done.origin});
      }
      c.rank = UINT32_MAX;
      c.dep_count = 0;
    }
  }
  completions.clear();
  // The merged calls' dependencies, grouped per call and sorted by time.
  std::sort(loose.begin(), loose.end(), [](const LooseDep& a, const LooseDep& b) {
    return std::tie(a.call, a.dep.time, a.dep.rank) < std::tie(b.call, b.dep.time, b.dep.rank);
  });
  std::vector<DepOrigin> origin_of_dep;  // for the merged calls' dependencies: index - merged_dep_base
  origin_of_dep.reserve(loose.size());
  const auto merged_dep_base = static_cast<uint32_t>(g.deps.size());
  for (const LooseDep& l : loose) {
    SyncCall& c = g.calls[l.call];
    if (c.dep_count == 0) {
      c.dep_begin = static_cast<uint32_t>(g.deps.size());
    }
    g.deps.push_back(l.dep);
    origin_of_dep.push_back(l.origin);
    ++c.dep_count;
  }
  loose.clear();
  loose.shrink_to_fit();

  // ---- per rank index, reach, job end ----
  g.by_rank.assign(nranks, {});
  for (uint32_t c = 0; c < g.calls.size(); ++c) {
    if (g.calls[c].rank != UINT32_MAX) {
      g.by_rank[g.calls[c].rank].push_back(c);
    }
  }
  g.reach.assign(nranks, {});
  for (size_t r = 0; r < nranks; ++r) {
    auto& v = g.by_rank[r];
    SortByKey(v, [&](uint32_t c) { return g.calls[c].block_start; });
    int64_t reach = INT64_MIN;
    for (uint32_t c : v) {
      reach = std::max(reach, g.calls[c].exit);
      g.reach[r].push_back(reach);
      g.rank_end[r] = std::max(g.rank_end[r], g.calls[c].exit);
    }
  }

  // ---- §9.4 excess: compute before the arrival beyond the partners' median ----
  std::vector<int64_t> gap(g.calls.size(), 0);
  for (size_t r = 0; r < nranks; ++r) {
    std::vector<uint32_t> by_arrival = g.by_rank[r];
    SortByKey(by_arrival, [&](uint32_t c) { return g.calls[c].arrival; });
    int64_t prev_exit = INT64_MIN;
    for (uint32_t c : by_arrival) {
      const SyncCall& sc = g.calls[c];
      gap[c] = prev_exit == INT64_MIN ? 0 : std::max<int64_t>(0, sc.arrival - prev_exit);
      prev_exit = std::max(prev_exit, sc.exit);
    }
  }
  std::vector<int64_t> scratch;
  for (const InstanceGroup& grp : groups) {
    const size_t n = instances[grp.instance].arrivals.size();
    // A participant's call may have been retired into a merged completing call (alias): its gap
    // and its excess are that call's.
    auto call_of = [&](size_t i) {
      const uint32_t c = grp.first_call + static_cast<uint32_t>(i);
      return g.calls[c].rank == UINT32_MAX ? alias[c] : c;
    };
    // The partners' median: of the others in small instances; of everyone in large ones (one
    // rank moves the median of many by at most one place, and this keeps it O(n)).
    int64_t everyone = 0;
    if (n > 8) {
      scratch.clear();
      for (size_t j = 0; j < n; ++j) {
        scratch.push_back(gap[call_of(j)]);
      }
      everyone = Median(scratch);
    }
    for (size_t i = 0; i < n; ++i) {
      const uint32_t c = call_of(i);
      int64_t median = everyone;
      if (n <= 8) {
        scratch.clear();
        for (size_t j = 0; j < n; ++j) {
          if (j != i) {
            scratch.push_back(gap[call_of(j)]);
          }
        }
        median = Median(scratch);
      }
      g.calls[c].excess = std::max(g.calls[c].excess, std::max<int64_t>(0, gap[c] - median));
    }
  }
  std::sort(partners.begin(), partners.end());
  for (size_t i = 0; i < partners.size();) {
    size_t j = i;
    scratch.clear();
    while (j < partners.size() && partners[j].first == partners[i].first) {
      scratch.push_back(gap[partners[j].second]);
      ++j;
    }
    const uint32_t c = partners[i].first;
    g.calls[c].excess = std::max<int64_t>(g.calls[c].excess, std::max<int64_t>(0, gap[c] - Median(scratch)));
    i = j;
  }

  g.excess_sum.assign(nranks, {});
  for (size_t r = 0; r < nranks; ++r) {
    auto& sum = g.excess_sum[r];
    sum.assign(g.by_rank[r].size() + 1, 0);
    for (size_t k = 0; k < g.by_rank[r].size(); ++k) {
      sum[k + 1] = sum[k] + g.calls[g.by_rank[r][k]].excess;
    }
  }

  // ---- §9.1-§9.3 charging, per group of waiters that share their dependencies ----
  Charger charger(g, out);
  std::vector<double> inc, amount;
  // One group: calls [first, first + count) whose waits are charged together. `origin(d)` gives
  // the communicator and ordinal of dependency index d. `host`: MPI calls (time categories).
  // Scratch reused by every group (no allocation per group once they have grown).
  std::unordered_map<uint32_t, double> by_dep_map;
  std::vector<std::pair<uint32_t, double>> by_dep;  // (dependency index, ns) of the group
  struct RootEntry {
    uint32_t dep = 0;
    uint32_t root = 0;
    double fraction = 0;
  };
  std::vector<RootEntry> root_entries;  // where each dependency's share ended up, by dependency
  std::vector<double> f_at, suffix_a, suffix_b, dense;
  std::vector<std::pair<int64_t, double>> bs;
  std::vector<uint32_t> group_roots;
  std::vector<CulpritEvent> event_of(nranks);  // per culprit rank index, within one group
  std::vector<uint32_t> first_dep_of(nranks);  // per culprit rank index: its first dependency there
  std::vector<uint32_t> touched;               // the ranks of event_of in use
  std::vector<char> in_touched(nranks, 0);
  // Per waiting rank index: its waiting by root cause rank index (RankDelay::wait_by_culprit).
  std::vector<FlatSums> culprit_acc(nranks);  // per waiting rank index: root rank index -> ns
  FlatSums step_acc;                          // (step slot << 32 | root rank index) -> ns
  // The sums of the step slot charged last, per root rank index, taken out of step_acc while
  // charges go to that slot (groups come mostly in time order, so mostly to the same slot) and put
  // back when another slot is charged: a table lookup per root and run of the slot, not per charge,
  // and the same additions in the same order.
  uint32_t slot_now = UINT32_MAX;
  std::vector<double> slot_sum(nranks, 0.0);
  std::vector<char> slot_taken(nranks, 0);
  std::vector<uint32_t> slot_roots;
  auto put_back_slot = [&] {
    for (uint32_t root : slot_roots) {
      step_acc[(uint64_t{slot_now} << 32) | root] = slot_sum[root];
      slot_taken[root] = 0;
    }
    slot_roots.clear();
  };
  auto add_step_cost = [&](uint32_t slot, uint32_t root, double v) {
    if (slot != slot_now) {
      put_back_slot();
      slot_now = slot;
    }
    if (!slot_taken[root]) {
      slot_taken[root] = 1;
      slot_roots.push_back(root);
      slot_sum[root] = step_acc[(uint64_t{slot} << 32) | root];
    }
    slot_sum[root] += v;
  };
  auto charge_group = [&](uint32_t first, uint32_t count, bool attributable, bool host, auto origin) {
    double total = 0;
    for (uint32_t c = first; c < first + count; ++c) {
      const SyncCall& sc = g.calls[c];
      if (sc.rank == UINT32_MAX) {
        continue;  // retired: its wait is charged with the merged call it became part of
      }
      const double w = static_cast<double>(g.WaitEnd(sc) - sc.block_start);
      const double blocked = static_cast<double>(std::max<int64_t>(0, sc.exit - sc.block_start));
      RankDelay& rd = out.ranks[sc.rank];
      rd.blocked_ns += blocked;
      if (host) {
        rd.host_transfer_ns += std::max(0.0, blocked - w);
      }
      total += w;
    }
    out.total_wait_ns += total;
    if (total <= 0) {
      return;
    }
    // One waiter's wait split among its dependencies (§9.1): fn(dependency index, ns) for each
    // dependency it waited for. Suffix increments: every dependency from q on is missing during
    // the piece that ends at the q-th dependency's time.
    auto per_dep = [&](const SyncCall& sc, auto fn) {
      const int64_t we = g.WaitEnd(sc);
      if (we <= sc.block_start) {
        return;
      }
      const SyncDep* d = &g.deps[sc.dep_begin];
      const uint32_t n = sc.dep_count;
      uint32_t j = 0;
      while (j < n && d[j].time <= sc.block_start) {
        ++j;
      }
      inc.assign(n + 1, 0.0);
      int64_t t = sc.block_start;
      for (uint32_t q = j; q < n && t < we;) {
        const int64_t next = std::min(d[q].time, we);
        inc[q] += static_cast<double>(next - t) / static_cast<double>(n - q);
        t = next;
        while (q < n && d[q].time <= t) {
          ++q;
        }
      }
      double run = 0;
      for (uint32_t q = j; q < n; ++q) {
        run += inc[q];
        if (run > 0) {
          fn(sc.dep_begin + q, run);
        }
      }
    };
    if (!attributable) {
      out.unattributed_ns += total;
      for (uint32_t c = first; c < first + count; ++c) {
        if (g.calls[c].rank != UINT32_MAX) {
          out.ranks[g.calls[c].rank].unattributed_wait_ns +=
              static_cast<double>(g.WaitEnd(g.calls[c]) - g.calls[c].block_start);
        }
      }
      return;
    }
    // The group's waiting per dependency (index into g.deps), each charged once from the
    // earliest blocked start; where each dependency's share ended up (its root causes).
    by_dep.clear();
    int64_t min_b = INT64_MAX;
    uint32_t min_rank = UINT32_MAX;  // the rank of the earliest waiter (its step takes the charges, §10.2)
    auto earliest = [&](const SyncCall& sc) {
      if (sc.block_start < min_b) {
        min_b = sc.block_start;
        min_rank = sc.rank;
      }
    };
    // Fast path (an instance's waiters all waiting on its one shared list until its last arrival):
    // with F(x) = the integral of 1 / missing up to x, a waiter entering at b owes dependency q
    // F(T_q) - F(b), so the group's sums come from prefix sums over the waiters sorted by b.
    uint32_t shared_begin = UINT32_MAX, shared_count = 0;
    bool shared = true;
    for (uint32_t c = first; c < first + count && shared; ++c) {
      const SyncCall& sc = g.calls[c];
      if (g.WaitEnd(sc) <= sc.block_start) {
        continue;
      }
      if (shared_begin == UINT32_MAX) {
        shared_begin = sc.dep_begin;
        shared_count = sc.dep_count;
      }
      shared = sc.dep_begin == shared_begin && sc.dep_count == shared_count;
    }
    shared = shared && shared_begin != UINT32_MAX;
    // A waiter that left before the last arrival (a clock error, a held rooted call) is "partial":
    // it is summed dependency by dependency; the others through the prefix sums.
    auto full = [&](const SyncCall& sc) { return g.WaitEnd(sc) == g.deps[shared_begin + shared_count - 1].time; };
    // f_at: F(T_q) on the shared path
    auto F = [&](int64_t x) {
      const SyncDep* d = &g.deps[shared_begin];
      const auto p = static_cast<uint32_t>(
          std::upper_bound(d, d + shared_count, x, [](int64_t v, const SyncDep& e) { return v < e.time; }) - d);
      if (p == 0) {
        return static_cast<double>(x - d[0].time) / static_cast<double>(shared_count);
      }
      return f_at[p - 1] + static_cast<double>(x - d[p - 1].time) / static_cast<double>(shared_count - p);
    };
    if (shared) {
      const SyncDep* d = &g.deps[shared_begin];
      f_at.assign(shared_count, 0.0);
      for (uint32_t q = 1; q < shared_count; ++q) {
        f_at[q] = f_at[q - 1] + static_cast<double>(d[q].time - d[q - 1].time) / static_cast<double>(shared_count - q);
      }
      bs.clear();  // (b, F(b)) of the full waiters, by b
      dense.assign(shared_count, 0.0);
      for (uint32_t c = first; c < first + count; ++c) {
        const SyncCall& sc = g.calls[c];
        if (g.WaitEnd(sc) <= sc.block_start) {
          continue;
        }
        earliest(sc);
        if (full(sc)) {
          bs.emplace_back(sc.block_start, F(sc.block_start));
        } else {
          per_dep(sc, [&](uint32_t dep, double ns) { dense[dep - shared_begin] += ns; });
        }
      }
      std::sort(bs.begin(), bs.end());
      size_t i = 0;
      double sum_f = 0;
      for (uint32_t q = 0; q < shared_count; ++q) {
        while (i < bs.size() && bs[i].first < d[q].time) {
          sum_f += bs[i].second;
          ++i;
        }
        const double amt = dense[q] + (i > 0 ? static_cast<double>(i) * f_at[q] - sum_f : 0.0);
        if (amt > 0) {
          by_dep.emplace_back(shared_begin + q, amt);
        }
      }
    } else {
      for (uint32_t c = first; c < first + count; ++c) {
        const SyncCall& sc = g.calls[c];
        if (g.WaitEnd(sc) > sc.block_start) {
          earliest(sc);
        }
        per_dep(sc, [&](uint32_t d, double ns) { by_dep_map[d] += ns; });
      }
      by_dep.assign(by_dep_map.begin(), by_dep_map.end());
      by_dep_map.clear();
      std::sort(by_dep.begin(), by_dep.end());
    }
    const double material = std::max(static_cast<double>(skew_threshold_ns), 0.25 * total);
    touched.clear();
    root_entries.clear();
    double rooted = 0;
    const uint32_t step_slot = step_of && min_rank != UINT32_MAX ? step_of(min_rank, min_b) : UINT32_MAX;
    for (const auto& [d, amt] : by_dep) {
      const SyncDep& dep = g.deps[d];
      const uint32_t ri = dep.rank;
      charger.roots().clear();
      const double direct_before = out.ranks[ri].direct_ns;
      charger.Charge(ri, min_b, std::max(min_b, dep.time), amt, 0);
      for (const auto& [root, v] : charger.roots()) {
        root_entries.push_back({d, root, v / amt});
        rooted += v;
        if (step_slot != UINT32_MAX) {
          add_step_cost(step_slot, root, v);
        }
      }
      CulpritEvent& e = event_of[ri];
      if (!in_touched[ri]) {
        in_touched[ri] = 1;
        touched.push_back(ri);
        e.rank = out.ranks[ri].rank;
        first_dep_of[ri] = d;  // where it was late: looked up only if the event is kept
      }
      e.time_ns = std::max(e.time_ns, dep.time);
      e.lateness_ns = std::max(e.lateness_ns, dep.time - min_b);
      // what it was directly charged here (its share less what passed on or went to nobody)
      e.cost_ns += out.ranks[ri].direct_ns - direct_before;
    }
    for (uint32_t ri : touched) {
      if (event_of[ri].cost_ns >= material) {
        const DepOrigin o = origin(first_dep_of[ri]);
        event_of[ri].comm_id = o.comm_id;
        event_of[ri].ordinal =
            o.post_rank == UINT32_MAX ? o.ordinal : ordinal(o.post_rank, o.comm_id, o.op, o.post_time);
        event_of[ri].op = o.op;
        out.culprit_events.push_back(event_of[ri]);
      }
      event_of[ri] = CulpritEvent();
      in_touched[ri] = 0;
    }
    out.attributed_ns += rooted;
    out.unattributed_ns += std::max(0.0, total - rooted);
    // Each waiter's own wait, through the dependencies it waited for, to their root causes. On
    // the shared path with few root causes, per root r: suffix sums over q of F(T_q) x f_q(r) and
    // of f_q(r) give a waiter entering before dependency p its sum_{q >= p} (F(T_q) - F(b)) f_q(r).
    // One waiter's own wait, dependency by dependency (in index order, as root_entries), to the
    // root causes of each.
    auto settle_one = [&](const SyncCall& sc, double w) {
      RankDelay& rd = out.ranks[sc.rank];
      FlatSums& acc = culprit_acc[sc.rank];
      double attributed = 0;
      auto entry = root_entries.begin();
      per_dep(sc, [&](uint32_t d, double ns) {
        while (entry != root_entries.end() && entry->dep < d) {
          ++entry;
        }
        for (auto e = entry; e != root_entries.end() && e->dep == d; ++e) {
          const double add = ns * e->fraction;
          attributed += add;
          acc[e->root] += add;
        }
      });
      attributed = std::min(attributed, w);
      rd.waited_ns += attributed;
      rd.unattributed_wait_ns += w - attributed;
      if (host) {
        rd.host_wait_ns += attributed;
      }
    };
    group_roots.clear();
    if (shared) {
      for (const RootEntry& r : root_entries) {
        if (std::find(group_roots.begin(), group_roots.end(), r.root) == group_roots.end()) {
          group_roots.push_back(r.root);
        }
      }
    }
    constexpr size_t kFewRoots = 4;
    if (shared && group_roots.size() <= kFewRoots) {
      const SyncDep* d = &g.deps[shared_begin];
      const size_t nr = group_roots.size();
      suffix_a.assign((shared_count + 1) * nr, 0.0);
      suffix_b.assign((shared_count + 1) * nr, 0.0);
      for (const RootEntry& r : root_entries) {
        const uint32_t q = r.dep - shared_begin;
        const auto k =
            static_cast<size_t>(std::find(group_roots.begin(), group_roots.end(), r.root) - group_roots.begin());
        suffix_a[q * nr + k] += f_at[q] * r.fraction;
        suffix_b[q * nr + k] += r.fraction;
      }
      for (uint32_t q = shared_count; q-- > 0;) {
        for (size_t k = 0; k < nr; ++k) {
          suffix_a[q * nr + k] += suffix_a[(q + 1) * nr + k];
          suffix_b[q * nr + k] += suffix_b[(q + 1) * nr + k];
        }
      }
      for (uint32_t c = first; c < first + count; ++c) {
        const SyncCall& sc = g.calls[c];
        const double w = static_cast<double>(g.WaitEnd(sc) - sc.block_start);
        if (w <= 0) {
          continue;
        }
        if (!full(sc)) {
          settle_one(sc, w);
          continue;
        }
        RankDelay& rd = out.ranks[sc.rank];
        const auto p = static_cast<size_t>(std::upper_bound(d, d + shared_count, sc.block_start,
                                                            [](int64_t v, const SyncDep& e) { return v < e.time; }) -
                                           d);
        const double fb = F(sc.block_start);
        double attributed = 0;
        for (size_t k = 0; k < nr; ++k) {
          const double add = suffix_a[p * nr + k] - fb * suffix_b[p * nr + k];
          if (add <= 0) {
            continue;
          }
          attributed += add;
          culprit_acc[sc.rank][group_roots[k]] += add;
        }
        attributed = std::min(attributed, w);
        rd.waited_ns += attributed;
        rd.unattributed_wait_ns += w - attributed;
        if (host) {
          rd.host_wait_ns += attributed;
        }
      }
      return;
    }
    for (uint32_t c = first; c < first + count; ++c) {
      const SyncCall& sc = g.calls[c];
      const double w = static_cast<double>(g.WaitEnd(sc) - sc.block_start);
      if (w > 0) {
        settle_one(sc, w);
      }
    }
  };
  for (const InstanceGroup& grp : groups) {
    const CollectiveInstance& in = instances[grp.instance];
    const InstanceMetrics& m = measured[grp.instance];
    charge_group(grp.first_call, static_cast<uint32_t>(in.arrivals.size()), m.skew_ns > skew_threshold_ns, !in.nccl,
                 [&](uint32_t) {
                   return DepOrigin{in.comm_id, ordinal_of[grp.instance], in.op};
                 });
  }
  // In time order, so that the charger's searches move forward (the map's order is random).
  std::sort(merged_calls.begin(), merged_calls.end(), [&](uint32_t a, uint32_t b) {
    return std::tie(g.calls[a].block_start, a) < std::tie(g.calls[b].block_start, b);
  });
  for (uint32_t c : merged_calls) {
    const SyncCall& sc = g.calls[c];
    const bool attributable = g.WaitEnd(sc) - sc.block_start > skew_threshold_ns;
    charge_group(c, 1, attributable, true, [&](uint32_t d) { return origin_of_dep[d - merged_dep_base]; });
  }
  put_back_slot();
  for (const auto& [key, ns] : step_acc.entries()) {
    out.step_costs.push_back({static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key & 0xffffffffu), ns});
  }
  std::sort(out.step_costs.begin(), out.step_costs.end(),
            [](const StepCost& a, const StepCost& b) { return std::tie(a.slot, a.rank) < std::tie(b.slot, b.rank); });
  // (sorted below: the order the pairs were first seen does not show)
  for (size_t r = 0; r < nranks; ++r) {
    for (const auto& [root, ns] : culprit_acc[r].entries()) {
      out.ranks[r].wait_by_culprit.emplace_back(out.ranks[root].rank, ns);
    }
  }
  for (RankDelay& r : out.ranks) {
    std::sort(r.wait_by_culprit.begin(), r.wait_by_culprit.end(), [](const auto& a, const auto& b) {
      return a.second > b.second || (a.second == b.second && a.first < b.first);
    });
  }
  std::sort(out.culprit_events.begin(), out.culprit_events.end(), [](const CulpritEvent& a, const CulpritEvent& b) {
    return std::tie(a.time_ns, a.rank) < std::tie(b.time_ns, b.rank);
  });
  for (const auto& [site, c] : site_calls) {
    for (uint32_t world : members[site.first]) {
      RankCommCalls& r = comm_calls[{world, site.first, site.second}];
      r.rank = world;
      r.comm_id = site.first;
      r.op = site.second;
      r.first_ordinal = r.calls == 0 ? c.first_ordinal : std::min(r.first_ordinal, c.first_ordinal);
      r.last_ordinal = std::max(r.last_ordinal, c.last_ordinal);
      r.calls += c.calls;
    }
  }
  for (auto& [key, c] : comm_calls) {
    out.comm_calls.push_back(c);
  }
  for (auto& [comm, mem] : members) {
    std::sort(mem.begin(), mem.end());
    out.members.emplace_back(comm, std::move(mem));
  }
  return out;
}

// §9.4 replay. Each rank's shift (replayed - recorded time) changes only at its call exits and, for
// the corrected rank, at the arrivals where its excess is removed; calls are re-timed in order of
// their recorded times, so every dependency's shift is final when it is read.
int64_t ReplayJobEnd(const SyncGraph& g, int64_t corrected) {
  const size_t nranks = g.by_rank.size();
  std::vector<std::vector<std::pair<int64_t, int64_t>>> shift(nranks);
  auto shift_at = [&](uint32_t r, int64_t t) -> int64_t {
    const auto& h = shift[r];
    if (h.empty() || h.back().first <= t) {
      return h.empty() ? 0 : h.back().second;  // the usual case: the rank's latest shift
    }
    auto it = std::upper_bound(h.begin(), h.end(), t, [](int64_t v, const auto& e) { return v < e.first; });
    return it == h.begin() ? 0 : std::prev(it)->second;
  };
  auto push = [&](uint32_t r, int64_t t, int64_t s) {
    auto& h = shift[r];
    if ((h.empty() && s == 0) || (!h.empty() && h.back().second == s)) {
      return;  // unchanged: the history holds only the changes
    }
    if (!h.empty() && h.back().first >= t) {
      t = h.back().first;  // overlapping calls (threads): keep the history ordered
    }
    h.emplace_back(t, s);
  };
  // Points: arrivals (corrections of the corrected rank) before exits at equal times; the exits'
  // order is the graph's (sorted once).
  std::vector<uint32_t> by_arrival;
  if (corrected >= 0) {
    for (uint32_t c : g.by_rank[static_cast<size_t>(corrected)]) {
      if (g.calls[c].excess > 0) {
        by_arrival.push_back(c);
      }
    }
  }
  std::sort(by_arrival.begin(), by_arrival.end(),
            [&](uint32_t a, uint32_t b) { return std::tie(g.calls[a].arrival, a) < std::tie(g.calls[b].arrival, b); });
  // Every call by exit, sorted as (exit, index) pairs side by side: no indirection in the
  // comparisons. Built here, only when a rank is judged, not for every report.
  std::vector<uint32_t> by_exit;
  {
    std::vector<std::pair<int64_t, uint32_t>> exits;
    exits.reserve(g.calls.size());
    for (uint32_t c = 0; c < g.calls.size(); ++c) {
      if (g.calls[c].rank != UINT32_MAX) {
        exits.emplace_back(g.calls[c].exit, c);
      }
    }
    std::sort(exits.begin(), exits.end());
    by_exit.reserve(exits.size());
    for (const auto& [exit, c] : exits) {
      by_exit.push_back(c);
    }
  }
  // Replayed latest dependency of each shared list, computed once (all its arrivals precede the
  // first exit of its participants).
  std::unordered_map<uint32_t, int64_t> shared_last;
  size_t ai = 0;
  for (uint32_t c : by_exit) {
    const SyncCall& sc = g.calls[c];
    while (ai < by_arrival.size() && g.calls[by_arrival[ai]].arrival <= sc.exit) {
      const SyncCall& ac = g.calls[by_arrival[ai]];
      push(ac.rank, ac.arrival, shift_at(ac.rank, ac.arrival) - ac.excess);
      ++ai;
    }
    const int64_t b2 = sc.block_start + shift_at(sc.rank, sc.block_start);
    int64_t exit2 = b2 + std::max<int64_t>(0, sc.exit - sc.block_start);
    if (sc.dep_count > 0) {
      int64_t d2 = INT64_MIN;
      auto found = sc.dep_count > 2 ? shared_last.find(sc.dep_begin) : shared_last.end();
      if (found != shared_last.end()) {
        d2 = found->second;
      } else {
        for (uint32_t d = sc.dep_begin; d < sc.dep_begin + sc.dep_count; ++d) {
          const SyncDep& dep = g.deps[d];
          d2 = std::max(d2, dep.time + shift_at(dep.rank, dep.time));
        }
        if (sc.dep_count > 2) {
          shared_last.emplace(sc.dep_begin, d2);
        }
      }
      const int64_t we = g.WaitEnd(sc);
      const int64_t transfer = std::max<int64_t>(0, sc.exit - we);
      exit2 = std::max(b2, d2) + transfer;
    }
    push(sc.rank, sc.exit, exit2 - sc.exit);
  }
  int64_t end = INT64_MIN;
  for (uint32_t r = 0; r < nranks; ++r) {
    if (g.rank_end[r] != INT64_MIN) {
      end = std::max(end, g.rank_end[r] + shift_at(r, g.rank_end[r]));
    }
  }
  return end == INT64_MIN ? 0 : end;
}

int64_t EstimateSaving(const SyncGraph& g, uint32_t rank_index) {
  // Without a correction the replay reproduces the recorded times (§9.4): the baseline is the
  // recorded end, which saves a replay of the whole job.
  int64_t recorded_end = INT64_MIN;
  for (int64_t e : g.rank_end) {
    recorded_end = std::max(recorded_end, e);
  }
  return std::max<int64_t>(0, recorded_end - ReplayJobEnd(g, rank_index));
}

}  // namespace commprof
