#include "analysis/report/report_model.h"

#include <cmath>
#include <map>
#include <set>

#include "analysis/hang/hang_json.h"
#include "analysis/metrics/comm_label.h"
#include "core/schema/enums.h"

namespace commprof {
namespace {

ReportModel::Breakdown BreakdownOf(const TimeBreakdown& b) {
  return {b.span_ns, b.compute_ns, b.exposed_comm_ns, b.memory_ns, b.idle_ns};
}

ReportModel::P2p P2pOf(const P2PMatchResult& p) {
  ReportModel::P2p m;
  m.sends = p.sends;
  m.recvs = p.recvs;
  m.matched = p.matched;
  m.unmatched_sends = p.unmatched_sends;
  m.unmatched_recvs = p.unmatched_recvs;
  m.unmatched_sendrecv = p.unmatched_sendrecv;
  m.proc_null = p.proc_null;
  m.bytes = p.bytes;
  m.late_sender_wait_ns = p.late_sender_wait_ns;
  m.late_receiver_wait_ns = p.late_receiver_wait_ns;
  NamedCounts by_reason;
  for (size_t r = 0; r < kP2PUnmatchedReasons; ++r) {
    by_reason.emplace_back(P2PUnmatchedReasonName(static_cast<P2PUnmatchedReason>(r)), p.unmatched_by_reason[r]);
  }
  m.unmatched_by_reason = std::move(by_reason);
  auto& unmatched = m.unmatched_list.emplace();
  for (const auto& u : p.unmatched) {
    unmatched.push_back({u.rank, u.is_send ? "send" : "recv", u.comm_id, u.peer, u.tag, u.bytes, u.start,
                         P2PUnmatchedReasonName(u.reason)});
  }
  auto& worst = m.worst_messages.emplace();
  for (const auto& w : p.worst) {
    worst.push_back(
        {w.comm_id, w.src, w.dst, w.tag, w.bytes, w.send_start, w.recv_start, w.late_sender_ns, w.late_receiver_ns});
  }
  return m;
}

ReportModel::Rank RankOf(const RankWaitMetrics& m, const RankInfo& info) {
  ReportModel::Rank r;
  r.rank = m.rank;
  r.host = m.host;
  r.pid = info.pid;
  r.status = info.status;
  r.end_reason = info.end_reason;
  r.batches_lost = info.batches_lost;
  r.missing_events = info.missing_events();
  r.comm_time_ns = m.comm_time_ns;
  r.wait_time_ns = m.wait_time_ns;
  r.wait_share = m.wait_share;
  r.times_last = m.times_last;
  r.delay_caused_ns = m.delay_caused_ns;
  r.wait_imposed_ns = m.wait_imposed_ns;
  r.instances = m.instances;
  r.transfer_time_ns = m.transfer_time_ns;
  return r;
}

void AddOverlap(const RankOverlap& o, ReportModel::Rank& r) {
  r.overlap = o.overlap;
  r.exposed_comm_ns = o.exposed_comm_ns;
  r.overlap_basis = OverlapBasisName(o.basis);
  r.comm_union_ns = o.comm_ns;
  r.breakdown = BreakdownOf(o.breakdown);
  r.incomplete_events = o.incomplete_events;
  auto& devices = r.devices.emplace();
  for (const auto& d : o.devices) {
    devices.push_back({d.device, d.comm_ns, d.overlap, d.exposed_comm_ns, BreakdownOf(d.breakdown)});
  }
}

ReportModel::RankP2p RankP2pOf(const P2PRankStats& p) {
  return {p.sent,
          p.received,
          p.bytes_sent,
          p.bytes_received,
          p.p2p_time_ns,
          p.late_sender_wait_ns,
          p.late_receiver_wait_ns,
          p.unmatched_sends,
          p.unmatched_recvs};
}

ReportModel::Lateness LatenessOf(const WaitReport& rep) {
  const LatenessMap& lm = rep.lateness;
  ReportModel::Lateness l;
  l.start_ns = lm.start_ns;
  l.bin_ns = lm.bin_ns;
  l.bins = lm.bins;
  auto& ranks = l.ranks.emplace();
  for (size_t i = 0; i < rep.ranks.size() && lm.bins > 0; ++i) {
    ReportModel::LatenessRank lr;
    lr.rank = rep.ranks[i].rank;
    auto& mean = lr.mean_lateness_ns.emplace();
    for (double v : lm.mean_lateness_ns[i]) {
      mean.push_back(std::isnan(v) ? Opt<double>() : Opt<double>(v));  // NaN: no instance in the bin
    }
    auto& last = lr.times_last.emplace();
    for (uint64_t n : lm.times_last[i]) {
      last.push_back(static_cast<int64_t>(n));
    }
    ranks.push_back(std::move(lr));
  }
  return l;
}

ReportModel::Straggler StragglerOf(const Straggler& s) {
  ReportModel::Straggler m;
  m.rank = s.rank;
  m.host = s.host;
  if (s.device >= 0) {
    m.device = s.device;
  }
  m.delay_cost_ns = std::llround(s.delay_cost_ns);
  m.direct_ns = std::llround(s.direct_ns);
  m.propagated_ns = std::llround(s.propagated_ns);
  m.share = s.share;
  if (s.saving_ns >= 0) {
    m.saving_ns = s.saving_ns;
  }
  m.pattern = s.pattern;
  if (s.pattern == "periodic") {
    m.period = ReportModel::Period{s.period_every, s.typical_lateness_ns};
  }
  if (s.pattern == "transient") {
    m.window = ReportModel::Window{s.window_start_ns, s.window_end_ns};
  }
  auto& comms = m.communicators.emplace();
  for (const StragglerCommunicator& c : s.communicators) {
    comms.push_back({c.comm_id, c.name, c.size, std::vector<int64_t>(c.members.begin(), c.members.end()),
                     std::llround(c.delay_cost_ns)});
  }
  m.cause = s.cause;
  m.late_instances = s.late_instances;
  m.typical_lateness_ns = s.typical_lateness_ns;
  return m;
}

// The communicators the report names, by id (ReportModel::communicators).
template <class T>
const std::vector<T>& Listed(const std::optional<std::vector<T>>& v) {
  static const std::vector<T> kEmpty;
  return v ? *v : kEmpty;
}

void AddCommunicators(const JobReport& report, ReportModel& m) {
  std::set<uint64_t> named;
  for (const auto& w : Listed(m.worst_instances)) {
    named.insert(w.comm_id.value_or(0));
  }
  if (m.instances) {
    for (const auto& i : Listed(m.instances->incomplete_list)) {
      named.insert(i.comm_id.value_or(0));
    }
  }
  for (const auto& s : Listed(m.stragglers)) {
    for (const auto& c : Listed(s.communicators)) {
      named.insert(c.comm_id.value_or(0));
    }
  }
  auto& out = m.communicators.emplace();
  // Two passes over the instances at most, however many communicators are named: the first
  // instance of each says whether it is NCCL and its size; the ranks seen are gathered only for
  // those the delay analysis has no members of (none of their instances was complete).
  std::map<uint64_t, std::pair<bool, uint64_t>> kind_size;  // comm -> (nccl, comm_size)
  for (const CollectiveInstance& in : report.instances) {
    if (named.contains(in.comm_id)) {
      kind_size.try_emplace(in.comm_id, in.nccl, in.comm_size);
    }
  }
  std::map<uint64_t, std::vector<int64_t>> members;
  for (const auto& [comm, ranks] : report.delay.members) {
    if (named.contains(comm)) {
      members[comm].assign(ranks.begin(), ranks.end());
    }
  }
  std::map<uint64_t, std::set<int64_t>> seen;  // comms without delay members, not MPI_COMM_WORLD
  for (uint64_t id : named) {
    const bool nccl = kind_size.contains(id) && kind_size[id].first;
    if ((nccl || id != COMMPROF_COMM_WORLD_ID) && members[id].empty()) {
      seen[id];
    }
  }
  if (!seen.empty()) {
    for (const CollectiveInstance& in : report.instances) {
      if (auto it = seen.find(in.comm_id); it != seen.end()) {
        for (const Arrival& a : in.arrivals) {
          it->second.insert(a.world_rank);
        }
      }
    }
  }
  for (uint64_t id : named) {
    const auto [nccl, recorded_size] = kind_size.contains(id) ? kind_size[id] : std::pair<bool, uint64_t>{false, 0};
    uint64_t size = recorded_size;
    std::vector<int64_t> list;
    if (!nccl && id == COMMPROF_COMM_WORLD_ID) {
      size = report.info.world_size;  // every rank is a member; those with data are in this file
      for (const RankInfo& r : report.info.ranks) {
        list.push_back(r.rank);
      }
    } else if (auto it = seen.find(id); it != seen.end()) {
      list.assign(it->second.begin(), it->second.end());
    } else {
      list = std::move(members[id]);
    }
    if (size == 0) {
      size = list.size();
    }
    out.push_back({id, CommName(id, nccl), size, std::move(list)});
  }
}

ReportModel::TimeCategories TimeOf(const RankTime& t) {
  ReportModel::TimeCategories m;
  m.span_ns = t.span_ns;
  m.compute_ns = t.compute_ns;
  m.startup_ns = t.startup_ns;
  m.shutdown_ns = t.shutdown_ns;
  m.transfer_ns = t.transfer_ns;
  m.wait_ns = t.wait_ns;
  m.unattributed_ns = t.unattributed_ns;
  m.idle_ns = t.idle_ns;
  auto& culprits = m.wait_by_culprit.emplace();
  for (const auto& [rank, ns] : t.wait_by_culprit) {
    culprits.push_back({rank, ns});
  }
  return m;
}

// The step table (§10): every step, and the summary of their times.
void AddSteps(const StepTable& t, ReportModel& m) {
  ReportModel::StepTime& time = m.step_time.emplace();
  time.steps = t.summary.steps;
  time.p50_ns = t.summary.p50_ns;
  time.p99_ns = t.summary.p99_ns;
  time.max_ns = t.summary.max_ns;
  time.mean_ns = t.summary.mean_ns;
  time.slowest_step = t.summary.slowest_step;
  time.with_straggler = t.summary.with_straggler;
  auto& steps = m.steps.emplace();
  steps.reserve(t.steps.size());
  for (const StepRow& row : t.steps) {
    ReportModel::Step s;
    s.step = row.step;
    s.window = row.window >= 0 ? Opt<int64_t>(row.window) : std::nullopt;
    s.start_ns = row.start_ns;
    auto& durations = s.duration_ns.emplace();
    auto& waits = s.wait_by_rank.emplace();
    for (const StepRankFigures& f : row.ranks) {
      durations.push_back({f.rank, f.duration_ns});
      waits.push_back({f.rank, f.wait_ns});
    }
    s.min_ns = row.min_ns;
    s.max_ns = row.max_ns;
    s.mean_ns = row.mean_ns;
    s.imbalance = row.imbalance;
    s.comm_ns = row.comm_ns;
    s.wait_ns = row.wait_ns;
    s.attributed_ns = std::llround(row.attributed_ns);
    s.top_cause =
        row.top_rank >= 0
            ? Opt<ReportModel::StepRankNs>(ReportModel::StepRankNs{row.top_rank, std::llround(row.straggler_cost_ns)})
            : std::nullopt;
    s.straggler = row.straggler >= 0 ? Opt<int64_t>(row.straggler) : std::nullopt;
    steps.push_back(std::move(s));
  }
}

// Every call site, largest wait first (the JSON has them all; text and HTML show the top ones).
void AddCallSites(const CallSiteReport& sites, ReportModel& m) {
  auto& out = m.call_sites.emplace();
  for (const CallSite& c : sites.sites) {
    out.push_back({c.function, c.file, c.line, c.module, c.address, c.op, c.calls, c.time_ns, c.wait_ns, c.bytes,
                   c.ranks, c.stack});
  }
}

}  // namespace

ReportModel BuildReportModel(const JobReport& report) {
  const ProfileInfo& info = report.info;
  const WaitReport& rep = report.wait;
  ReportModel m;
  m.schema = kReportSchemaName;
  m.schema_version = kReportSchemaVersion;
  m.path = info.path;
  m.job_id = info.job_id;
  m.world_size = static_cast<int64_t>(info.world_size);

  ReportModel::Instances& in = m.instances.emplace();
  in.matched = rep.matched;
  in.incomplete = rep.incomplete;
  auto& incomplete = in.incomplete_list.emplace();
  for (const auto& ii : rep.incomplete_list) {
    incomplete.push_back({ii.comm_id, ii.seq, schema::CollectiveOpName(ii.op), ii.comm_size,
                          std::vector<int64_t>(ii.ranks_present.begin(), ii.ranks_present.end())});
  }
  m.skew_threshold_ns = rep.skew_threshold_ns;

  ReportModel::Completeness& whole = m.completeness.emplace();
  auto& never = whole.never_connected.emplace();
  for (const auto& [first, last] : info.NeverConnected()) {
    never.push_back({first, last});
  }
  auto& unreadable = whole.unreadable.emplace();
  for (const RankFault& f : info.faults) {
    ReportModel::Unreadable u;
    if (f.rank) {
      u.rank = *f.rank;
    }
    u.reason = f.message;
    if (f.partial) {
      for (const RankInfo& r : info.ranks) {
        if (f.rank && r.rank == *f.rank) {
          u.damaged_rows = r.damaged_tail;
        }
      }
    }
    unreadable.push_back(std::move(u));
  }
  whole.lost_batches = info.lost_batches();
  whole.missing_events = info.missing_events();

  auto& ranks = m.ranks.emplace();
  for (size_t i = 0; i < rep.ranks.size(); ++i) {
    ReportModel::Rank r = RankOf(rep.ranks[i], info.ranks[i]);
    if (i < report.overlap.size()) {
      AddOverlap(report.overlap[i], r);
    }
    if (i < report.p2p.ranks.size()) {
      r.p2p = RankP2pOf(report.p2p.ranks[i]);
    }
    if (i < report.delay.ranks.size()) {
      const RankDelay& d = report.delay.ranks[i];
      r.delay_cost_ns = std::llround(d.cost());
      r.delay_direct_ns = std::llround(d.direct_ns);
      r.delay_propagated_ns = std::llround(d.propagated_ns);
    }
    if (i < report.time.size()) {
      r.time = TimeOf(report.time[i]);
    }
    ranks.push_back(std::move(r));
  }

  auto& collectives = m.collectives.emplace();
  for (const auto& t : rep.types) {
    collectives.push_back({schema::CollectiveOpName(t.op), t.count, t.bytes, t.mean_duration_ns, t.mean_wait_ns,
                           t.mean_transfer_ns, t.skew_p50_ns, t.skew_p99_ns, t.algbw_gbps, t.busbw_gbps});
  }
  auto& worst = m.worst_instances.emplace();
  for (const auto& w : rep.worst) {
    worst.push_back({w.comm_id, w.seq, schema::CollectiveOpName(w.op), w.bytes, w.start_ns, w.skew_ns, w.last_rank,
                     w.delay_caused_ns, w.total_wait_ns});
  }
  m.p2p = P2pOf(report.p2p);

  ReportModel::Delay& delay = m.delay.emplace();
  delay.total_wait_ns = std::llround(report.delay.total_wait_ns);
  delay.attributed_ns = std::llround(report.delay.attributed_ns);
  delay.unattributed_ns = std::llround(report.delay.unattributed_ns);
  auto& stragglers = m.stragglers.emplace();
  for (const Straggler& s : report.stragglers) {
    stragglers.push_back(StragglerOf(s));
  }
  m.lateness = LatenessOf(rep);

  ReportModel::Clock& clock = m.clock.emplace();
  clock.violations = report.clock.violations;
  clock.instances_checked = report.clock.instances_checked;
  auto& clock_ranks = clock.ranks.emplace();
  for (const auto& r : info.ranks) {
    clock_ranks.push_back({r.rank, r.clock_offset_ns, r.clock_drift_ppm, r.clock_error_bound_ns, r.clock_method});
  }

  auto& memory = m.memory.emplace();
  for (const MemorySeries& s : report.memory) {
    memory.push_back({s.rank, s.device, schema::MemoryKindName(s.memory_kind), s.peak_bytes, s.peak_time_ns,
                      s.final_bytes, s.allocs, s.frees, s.unmatched_frees, s.points.size()});
  }
  AddSteps(report.steps, m);
  AddCallSites(report.call_sites, m);
  AddCommunicators(report, m);
  m.hang = report.hang ? Opt<nlohmann::ordered_json>(hang::HangReportToJson(report.hang->report))
                       : Opt<nlohmann::ordered_json>();
  return m;
}

}  // namespace commprof
