// The terminal report (text_report.h), rendered from the report model.
#include "analysis/report/text_report.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "analysis/hang/hang_json.h"
#include "analysis/metrics/comm_label.h"
#include "analysis/report/job_report.h"
#include "commprof/event.h"

namespace commprof {
namespace {

// A model built from an analysis has every value; a missing one prints as zero or empty.
template <class T>
T V(const Opt<T>& v) {
  return v.value_or(T());
}

template <class T>
const std::vector<T>& List(const Opt<std::vector<T>>& v) {
  static const std::vector<T> kEmpty;
  return v ? *v : kEmpty;
}

unsigned long long Ull(const Opt<uint64_t>& v) { return static_cast<unsigned long long>(V(v)); }

std::string Ms(int64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", static_cast<double>(ns) / 1e6);
  return b;
}

std::string Bandwidth(double gbps) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", gbps);
  return b;
}

double Percent(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// A rank that never connected has no data: its rows would be zeros. The tables list the others and
// the rank table names these in one line (the header says so too).
bool NoData(const ReportModel::Rank& r) { return r.status.value_or("") == "missing"; }

// "3-5,9": the ranks that never connected, or empty.
std::string NeverConnected(const ReportModel& m) {
  RankRanges ranges;
  if (m.completeness) {
    for (const auto& r : List(m.completeness->never_connected)) {
      ranges.emplace_back(static_cast<uint32_t>(V(r.first)), static_cast<uint32_t>(V(r.last)));
    }
  }
  return FormatRankRanges(ranges);
}

std::vector<const ReportModel::Rank*> Listed(const ReportModel& m) {
  std::vector<const ReportModel::Rank*> out;
  for (const auto& r : List(m.ranks)) {
    if (!NoData(r)) {
      out.push_back(&r);
    }
  }
  return out;
}

void Header(const ReportModel& m, std::ostream& os) {
  const ReportModel::Instances in = V(m.instances);
  os << "commprof report: " << V(m.path) << "\n";
  os << "job " << V(m.job_id) << ", " << V(m.world_size) << " ranks, " << V(in.matched)
     << " matched collective instances (" << V(in.incomplete) << " incomplete)\n";
  const ReportModel::Clock clock = V(m.clock);
  int64_t worst_bound = -1;
  for (const auto& r : List(clock.ranks)) {
    worst_bound = std::max(worst_bound, r.clock_error_bound_ns.value_or(-1));
  }
  os << "clock: largest error bound "
     << (worst_bound < 0 ? std::string("unmeasured") : std::to_string(worst_bound) + " ns") << ", "
     << V(clock.violations) << " clock-condition violation(s)\n"
     << "       skews under " << V(m.skew_threshold_ns) << " ns are not attributed to a straggler\n";
  // What the figures below cannot include: said before them, so nobody reads them as the whole job.
  if (m.completeness) {
    const ReportModel::Completeness& c = *m.completeness;
    const std::string never = NeverConnected(m);
    if (!never.empty()) {
      os << "missing: rank(s) " << never << " never connected (no data)\n";
    }
    for (const auto& u : List(c.unreadable)) {
      os << (u.damaged_rows ? "partly unreadable: " : "unreadable, left out: ") << V(u.reason) << "\n";
    }
    if (V(c.missing_events) > 0 || V(c.lost_batches) > 0) {
      os << "loss: " << V(c.missing_events) << " event(s) recorded but not in the file; " << V(c.lost_batches)
         << " events frame(s) lost on the way\n";
    }
  }
  os << "\n";
}

void Collectives(const ReportModel& m, std::ostream& os) {
  char line[256];
  std::snprintf(line, sizeof line, "%-20s %6s %10s %9s %9s %9s %9s %9s %8s\n", "collective", "count", "bytes",
                "dur (ms)", "wait (ms)", "xfer (ms)", "skew p50", "skew p99", "busbw");
  os << line;
  std::snprintf(line, sizeof line, "%-20s %6s %10s %9s %9s %9s %9s %9s %8s\n", "", "", "(mean)", "(mean)", "(mean)",
                "(mean)", "(ms)", "(ms)", "(GB/s)");
  os << line;
  for (const auto& t : List(m.collectives)) {
    std::snprintf(line, sizeof line, "%-20s %6llu %10llu %9s %9s %9s %9s %9s %8s\n", V(t.type).c_str(), Ull(t.count),
                  Ull(t.bytes), Ms(static_cast<int64_t>(V(t.mean_duration_ns))).c_str(),
                  Ms(static_cast<int64_t>(V(t.mean_wait_ns))).c_str(),
                  Ms(static_cast<int64_t>(V(t.mean_transfer_ns))).c_str(), Ms(V(t.skew_p50_ns)).c_str(),
                  Ms(V(t.skew_p99_ns)).c_str(), Bandwidth(V(t.busbw_gbps)).c_str());
    os << line;
  }
  os << "\n";
}

void Ranks(const ReportModel& m, std::ostream& os) {
  char line[256];
  std::snprintf(line, sizeof line, "%-5s %-15s %13s %13s %7s %10s %15s %15s\n", "rank", "host", "comm (ms)",
                "wait (ms)", "wait %", "times last", "delay caused", "wait imposed");
  os << line;
  for (const ReportModel::Rank* rp : Listed(m)) {
    const ReportModel::Rank& r = *rp;
    std::snprintf(line, sizeof line, "%-5u %-15.15s %13s %13s %6.1f%% %10llu %12s ms %12s ms\n",
                  static_cast<unsigned>(V(r.rank)), V(r.host).c_str(), Ms(V(r.comm_time_ns)).c_str(),
                  Ms(V(r.wait_time_ns)).c_str(), 100.0 * V(r.wait_share), Ull(r.times_last),
                  Ms(V(r.delay_caused_ns)).c_str(), Ms(V(r.wait_imposed_ns)).c_str());
    os << line;
  }
  // The ranks without data, as the header names them (groups marked missing, or none at all).
  if (const std::string never = NeverConnected(m); !never.empty()) {
    os << "rank(s) " << never << ": never connected, no data (not listed here or below)\n";
  }
}

void Worst(const ReportModel& m, int64_t run_start, std::ostream& os) {
  const auto& worst = List(m.worst_instances);
  if (worst.empty()) {
    return;
  }
  char line[256];
  os << "\nworst instances (largest total wait):\n";
  std::snprintf(line, sizeof line, "%-20s %-18s %8s %10s %9s %5s %10s %10s\n", "collective", "communicator", "seq",
                "at (ms)", "skew (ms)", "last", "delay (ms)", "waits (ms)");
  os << line;
  for (const auto& w : worst) {
    const std::string comm = CommIdText(V(w.comm_id));
    const int64_t last_rank = w.last_rank.value_or(-1);
    std::string last = last_rank >= 0 ? std::to_string(last_rank) : "-";
    std::snprintf(line, sizeof line, "%-20s %-18s %8llu %10s %9s %5s %10s %10s\n", V(w.type).c_str(), comm.c_str(),
                  Ull(w.seq), Ms(V(w.start_ns) - run_start).c_str(), Ms(V(w.skew_ns)).c_str(), last.c_str(),
                  Ms(V(w.delay_caused_ns)).c_str(), Ms(V(w.total_wait_ns)).c_str());
    os << line;
  }
}

void Incomplete(const ReportModel& m, std::ostream& os) {
  const ReportModel::Instances in = V(m.instances);
  const auto& list = List(in.incomplete_list);
  if (list.empty()) {
    return;
  }
  char line[256];
  os << "\nincomplete instances (a member missing; not measured): " << V(in.incomplete) << "\n";
  size_t shown = 0;
  for (const auto& ii : list) {
    if (shown++ == 5) {
      os << "  ... (all listed in --format json)\n";
      break;
    }
    const auto& ranks = List(ii.ranks_present);
    std::string present;
    for (int64_t r : ranks) {
      present += (present.empty() ? "" : ",") + std::to_string(r);
    }
    std::snprintf(line, sizeof line, "  %s comm %s seq %llu: %zu of %u ranks (%s)\n", V(ii.type).c_str(),
                  CommIdText(V(ii.comm_id)).c_str(), Ull(ii.seq), ranks.size(), static_cast<unsigned>(V(ii.comm_size)),
                  present.substr(0, 40).c_str());
    os << line;
  }
}

// "0x1  MPI_COMM_WORLD: 48 ranks (ranks 0-47)", or "…: 128 ranks, 2 in this file (ranks 0-1)" when
// the file holds only some members; within `width` columns (as many member ranges as fit).
std::string CommunicatorLine(const ReportModel::Communicator& c, size_t width) {
  const size_t seen = List(c.members).size();
  std::string head = CommIdText(V(c.comm_id)) + "  " + V(c.name) + ": " + std::to_string(V(c.size)) +
                     (V(c.size) == 1 ? " rank" : " ranks");
  if (seen != V(c.size)) {
    head += ", " + std::to_string(seen) + " in this file";
  }
  std::string members = MemberRanks(V(c.members));
  for (size_t ranges = 16; head.size() + members.size() + 3 > width && ranges > 1; --ranges) {
    members = MemberRanks(V(c.members), ranges - 1);
  }
  return head + " (" + members + ")";
}

// The communicators named above (worst and incomplete instances) and in the verdict: id, name,
// size and members, as the HTML report's table shows them.
void Communicators(const ReportModel& m, std::ostream& os) {
  const auto& comms = List(m.communicators);
  if (comms.empty()) {
    return;
  }
  os << "\ncommunicators named in this report:\n";
  for (const auto& c : comms) {
    os << "  " << CommunicatorLine(c, 98) << "\n";
  }
}

void Overlap(const ReportModel& m, std::ostream& os) {
  const std::vector<const ReportModel::Rank*> ranks = Listed(m);
  if (std::none_of(ranks.begin(), ranks.end(), [](const auto* r) { return r->overlap_basis.has_value(); })) {
    return;
  }
  char line[256];
  os << "\noverlap of communication with computation, and where each rank's time went:\n";
  std::snprintf(line, sizeof line, "%-5s %-15s %8s %13s %10s %10s %10s %10s\n", "rank", "basis", "overlap",
                "exposed (ms)", "span (ms)", "compute %", "memory %", "idle %");
  os << line;
  for (const ReportModel::Rank* rp : ranks) {
    const ReportModel::Rank& r = *rp;
    if (!r.overlap_basis) {
      continue;
    }
    const ReportModel::Breakdown b = V(r.breakdown);
    const int64_t span = V(b.span_ns);
    std::snprintf(line, sizeof line, "%-5u %-15s %7.1f%% %13s %10s %9.1f%% %9.1f%% %9.1f%%\n",
                  static_cast<unsigned>(V(r.rank)), r.overlap_basis->c_str(), 100.0 * V(r.overlap),
                  Ms(V(r.exposed_comm_ns)).c_str(), Ms(span).c_str(), Percent(V(b.compute_ns), span),
                  Percent(V(b.memory_ns), span), Percent(V(b.idle_ns), span));
    os << line;
  }
}

void Memory(const ReportModel& m, int64_t run_start, std::ostream& os) {
  const auto& memory = List(m.memory);
  if (memory.empty()) {
    return;
  }
  char line[256];
  os << "\nmemory in use (from allocation and free records):\n";
  std::snprintf(line, sizeof line, "%-5s %6s %-14s %14s %12s %14s %8s %8s\n", "rank", "device", "kind", "peak (MiB)",
                "at (ms)", "at end (MiB)", "allocs", "frees");
  os << line;
  for (const auto& s : memory) {
    // Host memory (device 0xFFFF: an imported trace's CPU allocations) reads "host", not 65535.
    const unsigned device = static_cast<unsigned>(V(s.device));
    const std::string where = device == COMMPROF_HOST_DEVICE ? std::string("host") : std::to_string(device);
    std::snprintf(line, sizeof line, "%-5u %6s %-14s %14.1f %12s %14.1f %8llu %8llu\n",
                  static_cast<unsigned>(V(s.rank)), where.c_str(), V(s.memory_kind).c_str(),
                  static_cast<double>(V(s.peak_bytes)) / (1 << 20), Ms(V(s.peak_time_ns) - run_start).c_str(),
                  static_cast<double>(V(s.final_bytes)) / (1 << 20), Ull(s.allocs), Ull(s.frees));
    os << line;
  }
}

void PointToPoint(const ReportModel& m, std::ostream& os) {
  const ReportModel::P2p p2p = V(m.p2p);
  if (V(p2p.sends) + V(p2p.recvs) == 0) {
    return;
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "\npoint-to-point: %llu messages matched, %llu sends and %llu receives unmatched"
                " (%llu of them Sendrecv)\n",
                Ull(p2p.matched), Ull(p2p.unmatched_sends), Ull(p2p.unmatched_recvs), Ull(p2p.unmatched_sendrecv));
  os << line;
  std::snprintf(line, sizeof line, "%-5s %9s %9s %13s %18s %20s\n", "rank", "sent", "received", "p2p (ms)",
                "late sender (ms)", "late receiver (ms)");
  os << line;
  for (const ReportModel::Rank* rp : Listed(m)) {
    const ReportModel::Rank& r = *rp;
    if (!r.p2p) {
      continue;
    }
    const ReportModel::RankP2p& p = *r.p2p;
    std::snprintf(line, sizeof line, "%-5u %9llu %9llu %13s %18s %20s\n", static_cast<unsigned>(V(r.rank)), Ull(p.sent),
                  Ull(p.received), Ms(V(p.p2p_time_ns)).c_str(), Ms(V(p.late_sender_wait_ns)).c_str(),
                  Ms(V(p.late_receiver_wait_ns)).c_str());
    os << line;
  }
}

std::string PatternText(const ReportModel::Straggler& v, int64_t run_start) {
  std::string p = V(v.pattern);
  if (p == "periodic" && v.period) {
    return "periodic: late every " + std::to_string(Ull(v.period->every)) + "th call (typically " +
           Ms(V(v.period->typical_lateness_ns)) + " ms late)";
  }
  if (p == "transient" && v.window) {
    return "transient: late from " + Ms(V(v.window->start_ns) - run_start) + " to " +
           Ms(V(v.window->end_ns) - run_start) + " ms into the run";
  }
  if (p == "persistent") {
    return "persistent: late in most of its calls (typically " + Ms(V(v.typical_lateness_ns)) + " ms)";
  }
  return p;
}

void TimeCategories(const ReportModel& m, std::ostream& os) {
  bool any = false;
  for (const auto& r : List(m.ranks)) {
    any = any || r.time.has_value();
  }
  if (!any) {
    return;
  }
  char line[256];
  os << "\ntime per rank (ms; adds up to the span, docs/metrics.md §9.5):\n";
  std::snprintf(line, sizeof line, "%-5s %10s %10s %9s %9s %9s %9s %9s %7s %8s\n", "rank", "span", "compute", "startup",
                "shutdown", "transfer", "wait", "unattrib", "idle", "culprit");
  os << line;
  for (const ReportModel::Rank* rp : Listed(m)) {
    const ReportModel::Rank& r = *rp;
    if (!r.time) {
      continue;
    }
    const ReportModel::TimeCategories& t = *r.time;
    const auto& culprits = List(t.wait_by_culprit);
    std::string top = culprits.empty() ? "-" : std::to_string(V(culprits.front().rank));
    std::snprintf(line, sizeof line, "%-5u %10s %10s %9s %9s %9s %9s %9s %7s %8s\n", static_cast<unsigned>(V(r.rank)),
                  Ms(V(t.span_ns)).c_str(), Ms(V(t.compute_ns)).c_str(), Ms(V(t.startup_ns)).c_str(),
                  Ms(V(t.shutdown_ns)).c_str(), Ms(V(t.transfer_ns)).c_str(), Ms(V(t.wait_ns)).c_str(),
                  Ms(V(t.unattributed_ns)).c_str(), Ms(V(t.idle_ns)).c_str(), top.c_str());
    os << line;
  }
}

// The step table (§10): a summary line, then the slowest steps (at most kTextSteps), slowest first.
constexpr size_t kTextSteps = 10;

void Steps(const ReportModel& m, std::ostream& os) {
  const auto& steps = List(m.steps);
  if (steps.empty()) {
    return;
  }
  const ReportModel::StepTime t = V(m.step_time);
  char line[256];
  std::snprintf(line, sizeof line,
                "\nsteps: %llu (step time p50 %s ms, p99 %s ms, max %s ms at step %llu); %llu with a straggler\n",
                Ull(t.steps), Ms(V(t.p50_ns)).c_str(), Ms(V(t.p99_ns)).c_str(), Ms(V(t.max_ns)).c_str(),
                Ull(t.slowest_step), Ull(t.with_straggler));
  os << line;
  std::vector<const ReportModel::Step*> order;
  order.reserve(steps.size());
  for (const auto& s : steps) {
    order.push_back(&s);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const ReportModel::Step* a, const ReportModel::Step* b) { return V(a->max_ns) > V(b->max_ns); });
  if (order.size() > kTextSteps) {
    order.resize(kTextSteps);
    os << "the " << kTextSteps << " slowest, slowest first:\n";
  }
  std::snprintf(line, sizeof line, "%8s %6s %5s %9s %9s %9s %9s %9s  %s\n", "step", "window", "ranks", "min (ms)",
                "max (ms)", "imbalance", "comm (ms)", "wait (ms)", "straggler (delay cost)");
  os << line;
  for (const ReportModel::Step* s : order) {
    const std::string window = s->Window() ? std::to_string(*s->Window()) : "-";
    std::string straggler = "none";
    if (s->Straggler()) {
      straggler = "rank " + std::to_string(*s->Straggler());
      if (s->TopCause()) {
        straggler += " (" + Ms(V(s->TopCause()->ns)) + " ms)";
      }
    }
    std::snprintf(line, sizeof line, "%8llu %6s %5zu %9s %9s %8.1f%% %9s %9s  %s\n", Ull(s->step), window.c_str(),
                  List(s->duration_ns).size(), Ms(V(s->min_ns)).c_str(), Ms(V(s->max_ns)).c_str(),
                  100.0 * V(s->imbalance), Ms(V(s->comm_ns)).c_str(), Ms(V(s->wait_ns)).c_str(), straggler.c_str());
    os << line;
  }
}

void Verdict(const ReportModel& m, int64_t run_start, std::ostream& os) {
  os << "\nverdict: ";
  const auto& stragglers = List(m.stragglers);
  const ReportModel::Delay d = m.delay.value_or(ReportModel::Delay{});
  if (stragglers.empty()) {
    os << "no straggler: no rank's delay cost is a material share of the job's waiting\n"
          "  and stands out from the other ranks' (docs/metrics.md §9.3)\n";
    return;
  }
  char line[512];
  std::snprintf(line, sizeof line, "%zu straggler%s, by the waiting they caused (%s ms attributed of %s ms waited)\n",
                stragglers.size(), stragglers.size() == 1 ? "" : "s", Ms(V(d.attributed_ns)).c_str(),
                Ms(V(d.total_wait_ns)).c_str());
  os << line;
  for (const auto& v : stragglers) {
    std::snprintf(line, sizeof line,
                  "  rank %u on %s is a straggler\n"
                  "    %s\n"
                  "    delay cost %s ms (%.0f%% of the waiting; direct %s, propagated %s)\n",
                  static_cast<unsigned>(V(v.rank)), V(v.host).c_str(), PatternText(v, run_start).c_str(),
                  Ms(V(v.delay_cost_ns)).c_str(), 100.0 * V(v.share), Ms(V(v.direct_ns)).c_str(),
                  Ms(V(v.propagated_ns)).c_str());
    os << line;
    if (v.saving_ns) {
      os << "    on time, it would have saved about " << Ms(*v.saving_ns) << " ms of job time (replay)\n";
    }
    for (const auto& c : List(v.communicators)) {
      std::snprintf(line, sizeof line, "    late on %s (%s): %s ms of waiting\n", V(c.name).c_str(),
                    MemberRanks(V(c.members), 8).c_str(), Ms(V(c.delay_cost_ns)).c_str());
      os << line;
    }
    os << "    cause hint: "
       << (V(v.cause) == "compute" ? "longer compute before its calls" : "time inside communication (slow transfer)")
       << "\n";
  }
}
// The top call sites by wait (`commprof run --stacks`, docs/metrics.md §11).
void CallSites(const ReportModel& m, std::ostream& os) {
  constexpr size_t kTop = 10;
  const auto& sites = List(m.call_sites);
  if (sites.empty()) {
    return;
  }
  os << "\ncall sites (top " << std::min(kTop, sites.size()) << " of " << sites.size() << " by wait):\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-40s %-16s %8s %10s %10s %12s %5s\n", "call site", "operation", "calls",
                "time (ms)", "wait (ms)", "bytes", "ranks");
  os << line;
  for (size_t i = 0; i < sites.size() && i < kTop; ++i) {
    const auto& c = sites[i];
    std::string where = V(c.function);
    if (!V(c.file).empty()) {
      std::string file = V(c.file);
      file = file.substr(file.rfind('/') == std::string::npos ? 0 : file.rfind('/') + 1);
      where += " " + file + ":" + std::to_string(V(c.line));
    }
    std::snprintf(line, sizeof line, "%-40s %-16s %8llu %10s %10s %12llu %5llu\n", where.c_str(), V(c.op).c_str(),
                  Ull(c.calls), Ms(V(c.time_ns)).c_str(), Ms(V(c.wait_ns)).c_str(), Ull(c.bytes), Ull(c.ranks));
    os << line;
  }
}

void Hang(const ReportModel& m, std::ostream& os) {
  if (!m.hang || !*m.hang) {
    return;
  }
  auto h = hang::HangReportFromJson(**m.hang, "hang");
  if (!h.ok()) {
    os << "hang: unreadable (" << h.status().message() << ")\n\n";
    return;
  }
  os << hang::RenderText(h.value()) << "\n";
}

}  // namespace

void WriteTextReport(const ReportModel& model, std::ostream& os) {
  const int64_t run_start = V(V(model.lateness).start_ns);
  Hang(model, os);  // first: when the job hung, nothing else matters as much
  Header(model, os);
  Collectives(model, os);
  Ranks(model, os);
  Worst(model, run_start, os);
  Incomplete(model, os);
  Communicators(model, os);
  Overlap(model, os);
  Memory(model, run_start, os);
  PointToPoint(model, os);
  TimeCategories(model, os);
  Steps(model, os);
  Verdict(model, run_start, os);
  CallSites(model, os);
}

void WriteTextReport(const JobReport& report, std::ostream& os) { WriteTextReport(BuildReportModel(report), os); }

}  // namespace commprof
