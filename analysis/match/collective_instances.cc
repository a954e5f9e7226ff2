#include "analysis/match/collective_instances.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "analysis/match/collective_key_index.h"
#include "analysis/match/comm_membership.h"
#include "analysis/metrics/wait_metrics.h"
#include "core/schema/enums.h"

namespace commprof {
bool IsMatchableCollective(const commprof_event& e) {
  if (e.flags & (COMMPROF_FLAG_NONBLOCKING | COMMPROF_FLAG_INCOMPLETE | COMMPROF_FLAG_UNTRACKED_COMM)) {
    return false;
  }
  if (e.kind == COMMPROF_KIND_MPI_COLLECTIVE) {
    return true;
  }
  return e.kind == COMMPROF_KIND_NCCL_COLLECTIVE && e.subtype != COMMPROF_OP_SEND && e.subtype != COMMPROF_OP_RECV;
}

bool IsMatchableNonblockingCollective(const commprof_event& e) {
  return e.kind == COMMPROF_KIND_MPI_COLLECTIVE && (e.flags & COMMPROF_FLAG_NONBLOCKING) != 0 &&
         (e.flags & (COMMPROF_FLAG_INCOMPLETE | COMMPROF_FLAG_UNTRACKED_COMM)) == 0;
}

CollectiveKey KeyOf(const commprof_event& e) {
  return {e.comm_id, e.seq, e.kind == COMMPROF_KIND_NCCL_COLLECTIVE ? 0x100u + e.subtype : 0u};
}

bool IsNvtxNcclCollective(const commprof_event& e) {
  if (e.kind != COMMPROF_KIND_NCCL_API || (e.flags & COMMPROF_FLAG_FROM_NVTX) == 0) {
    return false;
  }
  return e.subtype != COMMPROF_OP_NONE && e.subtype != COMMPROF_OP_SEND && e.subtype != COMMPROF_OP_RECV;
}

bool CollectiveInstance::zero_byte() const {
  // Barrier never moves data and synchronises. Open MPI's Alltoallv with every count 0 still runs
  // its pairwise exchange of empty messages and waits for the last rank (measured: a rank 3 ms
  // late each time held the others ~3 ms in every call), while the other count-0 collectives return
  // at once.
  if (op == COMMPROF_OP_BARRIER || op == COMMPROF_OP_ALLTOALLV || bytes != 0) {
    return false;
  }
  // A datatype of size 0 gives bytes 0 for any count, and a count above 0 waits like any call: only
  // bytes 0 from a sized type is known to be count 0. Except Alltoall, which Open MPI returns from at
  // once when its type signature is empty, whatever the count (measured: 2 us against 3 ms late).
  const bool empty_signature_returns = op == COMMPROF_OP_ALLTOALL;
  return std::all_of(arrivals.begin(), arrivals.end(),
                     [&](const Arrival& a) { return a.bytes == 0 && (!a.sizeless_type || empty_signature_returns); });
}

namespace {

// A rank's Wait*/Test* call, found by (thread, exit): a non-blocking operation ends exactly when the
// call that completed it returns, on the thread that called it (docs/file-format.md). Kept in a
// vector sorted once (cheaper than a hash map of every completion call of the rank).
struct CompletionCall {
  uint32_t thread = 0;
  uint64_t end = 0;
  uint64_t start = 0;
  bool blocks = false;    // Wait*; Test* does not block
  uint64_t requests = 0;  // requests passed (the event's bytes): more than one may complete together
  bool operator<(const CompletionCall& o) const { return std::tie(thread, end) < std::tie(o.thread, o.end); }
};

}  // namespace

Result<std::vector<CollectiveInstance>> LoadCollectiveInstances(const ProfileReader& reader, bool aligned,
                                                                bool nonblocking, const ChunkObserver& observe,
                                                                bool check_nonblocking) {
  // Instances in the order first seen, numbered by the index (no node per instance).
  std::vector<CollectiveInstance> instances;
  uint64_t largest_rank = 0;  // a rank's events bound its collectives: sizes the index once
  for (const RankInfo& r : reader.info().ranks) {
    largest_rank = std::max(largest_rank, r.event_count);
  }
  CollectiveKeyIndex index(static_cast<size_t>(std::min<uint64_t>(largest_rank, uint64_t{1} << 17)));
  // Room for every arrival at once in the usual small communicator (one allocation, not several).
  const size_t arrivals_hint = std::min<size_t>(reader.info().world_size, 8);
  // Communicator membership from the MPI_COMM creation events (docs/metrics.md §1).
  CommMembership members(reader.info().world_size);
  Status bad;  // the first malformed event stops the pass (docs/metrics.md §1, rejected input)
  // check_nonblocking: the non-blocking identities seen, by their own index.
  check_nonblocking = check_nonblocking && !nonblocking;
  struct Recorded {
    uint8_t op = 0;
    uint32_t first_rank = 0;  // the rank that recorded it first, and last
    uint32_t last_rank = 0;
  };
  CollectiveKeyIndex unmatched_index;
  std::vector<Recorded> unmatched;
  uint32_t rank_index = 0;
  for (const RankInfo& r : reader.info().ranks) {
    const uint32_t this_index = rank_index++;
    ClockModel model = r.clock_model();
    uint64_t row = 0;
    auto where = [&](uint64_t at) {
      return reader.info().path + ": /ranks/" + std::to_string(r.rank) + "/events row " + std::to_string(at) + ": ";
    };
    // `e` (identity `key`) against the calls of that identity recorded before it: the same rank
    // twice, or another operation than the first rank's, is refused.
    auto check_against = [&](const commprof_event& e, CollectiveKey key, uint64_t at, const Recorded& before) {
      if (before.last_rank == r.rank) {
        // Ranks are read one after another, so a rank's earlier record of this key is the last.
        bad = Corrupt(where(at) + "a second " + schema::CollectiveOpName(e.subtype) + " with communicator " +
                      std::to_string(e.comm_id) + " sequence " + std::to_string(key.seq) +
                      " on the same rank (sequence numbers are unique per communicator)");
      } else if (before.op != e.subtype) {
        bad = Corrupt(where(at) + schema::CollectiveOpName(e.subtype) + " with communicator " +
                      std::to_string(e.comm_id) + " sequence " + std::to_string(key.seq) + ", but rank " +
                      std::to_string(before.first_rank) + " recorded " + schema::CollectiveOpName(before.op) +
                      " for the same call");
      }
    };
    auto recorded = [](const CollectiveInstance& in) {
      return Recorded{in.op, in.arrivals.front().world_rank, in.arrivals.back().world_rank};
    };
    // check_nonblocking: a non-blocking collective checked as if matched, against the blocking
    // instance of its identity and the non-blocking calls seen before it.
    auto check_unmatched = [&](const commprof_event& e, uint64_t at) {
      const CollectiveKey key = KeyOf(e);
      if (const std::optional<uint32_t> number = index.Find(key)) {
        check_against(e, key, at, recorded(instances[*number]));
        if (!bad.ok()) {
          return;
        }
      }
      const auto [number, fresh] = unmatched_index.FindOrInsert(key);
      if (fresh) {
        unmatched.push_back({e.subtype, r.rank, r.rank});
        return;
      }
      check_against(e, key, at, unmatched[number]);
      unmatched[number].last_rank = r.rank;
    };
    // One arrival of `e` (a matchable event; `key` its identity) at this rank. `block_start`: local
    // entry of the call it blocked in (the event's start for a blocking call).
    auto add = [&](const commprof_event& e, CollectiveKey key, bool nccl, uint64_t at, uint64_t block_start,
                   bool shared_completion = false) {
      auto start = static_cast<int64_t>(e.start_ns), end = static_cast<int64_t>(e.end_ns);
      auto blocked = static_cast<int64_t>(block_start);
      if (aligned) {
        start = model.ToReference(start);
        end = model.ToReference(end);
        blocked = model.ToReference(blocked);
      }
      const auto [number, fresh] = index.FindOrInsert(key);
      if (fresh) {
        instances.emplace_back().arrivals.reserve(arrivals_hint);
      }
      CollectiveInstance& in = instances[number];
      if (fresh) {
        in.comm_id = e.comm_id;
        in.seq = key.seq;
        in.nccl = nccl;
        in.op = e.subtype;
        in.root = e.peer;
        in.bytes = e.bytes;
        in.nonblocking = (e.flags & COMMPROF_FLAG_NONBLOCKING) != 0;
      } else {
        check_against(e, key, at, recorded(in));
      }
      if (bad.ok() && check_nonblocking && !unmatched.empty()) {
        if (const std::optional<uint32_t> other = unmatched_index.Find(key)) {
          check_against(e, key, at, unmatched[*other]);
        }
      }
      if (!bad.ok()) {
        return;
      }
      in.arrivals.push_back(
          {r.rank, -1, start, end, e.bytes, blocked, shared_completion, (e.flags & COMMPROF_FLAG_SIZELESS_TYPE) != 0});
    };
    // NCCL API calls decoded from NCCL's NVTX ranges, and the communicators the plugin's
    // collective records cover on this rank: the plugin's records win (docs/metrics.md §1).
    std::vector<std::pair<commprof_event, uint64_t>> nvtx_calls;
    std::unordered_set<uint64_t> plugin_comms;
    // Non-blocking collectives wait for the rank's completion calls (read in any order).
    std::vector<std::pair<commprof_event, uint64_t>> issued;
    std::vector<CompletionCall> completions;
    // The arrival about to be added, kAhead events early: each instance's arrivals are a block of
    // their own, and a rank goes from instance to instance, so the block's end is a cache miss per
    // arrival unless asked for before it is needed (it was most of this pass's time).
    constexpr size_t kAhead = 8;
    auto prefetch_arrival = [&](const commprof_event& e) {
      if (!IsMatchableCollective(e)) {
        return;
      }
      const std::optional<uint32_t> number = index.Find(KeyOf(e));
      if (number) {
        const std::vector<Arrival>& arrivals = instances[*number].arrivals;
        __builtin_prefetch(arrivals.data() + arrivals.size() - 1, 1);  // checked, then written past
      }
    };
    Status st = reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      if (observe) {
        observe(this_index, chunk);
      }
      for (size_t i = 0; i < chunk.size(); ++i) {
        if (i + kAhead < chunk.size()) {
          prefetch_arrival(chunk[i + kAhead]);
        }
        const commprof_event& e = chunk[i];
        const uint64_t at = row++;
        if (!bad.ok()) {
          return;
        }
        if (e.end_ns < e.start_ns) {
          bad = Corrupt(where(at) + schema::KindName(e.kind) + " ends before it starts (end_ns " +
                        std::to_string(e.end_ns) + " < start_ns " + std::to_string(e.start_ns) + ")");
          return;
        }
        if (members.Add(e, r.rank)) {
          continue;
        }
        if (e.kind == COMMPROF_KIND_NCCL_COLLECTIVE) {
          plugin_comms.insert(e.comm_id);
        }
        if (IsNvtxNcclCollective(e)) {
          nvtx_calls.emplace_back(e, at);
          continue;
        }
        if (nonblocking && e.kind == COMMPROF_KIND_MPI_WAIT) {
          completions.push_back({e.thread_id, e.end_ns, e.start_ns, e.subtype != COMMPROF_OP_TEST, e.bytes});
          continue;
        }
        if (nonblocking && IsMatchableNonblockingCollective(e)) {
          issued.emplace_back(e, at);
          continue;
        }
        if (check_nonblocking && IsMatchableNonblockingCollective(e)) {
          check_unmatched(e, at);
          continue;
        }
        if (!IsMatchableCollective(e)) {
          continue;
        }
        add(e, KeyOf(e), e.kind == COMMPROF_KIND_NCCL_COLLECTIVE, at, e.start_ns);
      }
    });
    COMMPROF_RETURN_IF_ERROR(st);
    COMMPROF_RETURN_IF_ERROR(bad);
    std::sort(completions.begin(), completions.end());
    for (const auto& [e, at] : issued) {
      const CompletionCall key{e.thread_id, e.end_ns, 0, false, 0};
      auto c = std::lower_bound(completions.begin(), completions.end(), key);
      const bool found = c != completions.end() && c->thread == key.thread && c->end == key.end;
      // Completed by a Wait*: blocked from its entry. By a Test*, or out of sight: never blocked.
      const uint64_t blocked = found && c->blocks ? c->start : e.end_ns;
      add(e, KeyOf(e), false, at, std::max(e.start_ns, std::min(blocked, e.end_ns)), found && c->requests > 1);
      COMMPROF_RETURN_IF_ERROR(bad);
    }
    // Without the plugin's records for a communicator, its NVTX-decoded calls are the instances:
    // arrival = host API entry, sequence = the call's place among this rank's calls of that type
    // on that communicator, in time order (rows are in arrival order, not time order).
    std::stable_sort(nvtx_calls.begin(), nvtx_calls.end(),
                     [](const auto& a, const auto& b) { return a.first.start_ns < b.first.start_ns; });
    std::unordered_map<CollectiveKey, uint64_t, CollectiveKeyHash> next_seq;  // (comm, 0, type) -> count
    for (const auto& [e, at] : nvtx_calls) {
      if (plugin_comms.contains(e.comm_id)) {
        continue;
      }
      const uint32_t type = 0x100u + e.subtype;
      uint64_t& n = next_seq[CollectiveKey{e.comm_id, 0, type}];
      add(e, CollectiveKey{e.comm_id, n++, type}, true, at, e.start_ns);
      COMMPROF_RETURN_IF_ERROR(bad);
    }
  }
  for (CollectiveInstance& in : instances) {
    in.comm_size = members.Size(in.comm_id);
    // A v2 NCCL plugin (NCCL 2.24/2.25) is told nothing about the communicator: without its init
    // record, an NCCL communicator is taken to span the job (docs/metrics.md §1).
    const bool assume_world = in.nccl && in.comm_size == 0;
    if (assume_world) {
      in.comm_size = static_cast<uint32_t>(reader.info().world_size);
    }
    for (auto& a : in.arrivals) {
      a.local_rank =
          assume_world ? static_cast<int32_t>(a.world_rank) : members.LocalRank(in.comm_id, a.world_rank).value_or(-1);
      if (in.root >= 0 && a.local_rank == in.root) {
        in.bytes = a.bytes;  // the root holds the whole buffer
      }
    }
    std::sort(in.arrivals.begin(), in.arrivals.end(),
              [](const Arrival& a, const Arrival& b) { return a.world_rank < b.world_rank; });
  }
  std::vector<CollectiveInstance>& out = instances;
  // Order by earliest entry, computed once per instance rather than in every comparison.
  std::vector<std::pair<int64_t, size_t>> order(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t m = INT64_MAX;
    for (const auto& a : out[i].arrivals) {
      m = std::min(m, a.start);
    }
    order[i] = {m, i};
  }
  std::sort(order.begin(), order.end(), [&](const auto& x, const auto& y) {
    if (x.first != y.first) {
      return x.first < y.first;
    }
    // Last, the order first seen: equal keys of different types (NCCL and MPI) sort the same every time.
    return std::tie(out[x.second].comm_id, out[x.second].seq, x.second) <
           std::tie(out[y.second].comm_id, out[y.second].seq, y.second);
  });
  std::vector<CollectiveInstance> sorted;
  sorted.reserve(out.size());
  for (const auto& [start, i] : order) {
    sorted.push_back(std::move(out[i]));
  }
  out.swap(sorted);
  return out;
}

}  // namespace commprof
