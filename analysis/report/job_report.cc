#include "analysis/report/job_report.h"

#include <cmath>
#include <cstdio>

#include "core/schema/enums.h"

namespace commprof {

Result<JobReport> AnalyzeJob(const ProfileReader& reader) {
  JobReport rep;
  rep.info = reader.info();
  auto instances = LoadCollectiveInstances(reader, true);
  if (!instances.ok()) return instances.status();
  rep.instances = std::move(instances.value());
  rep.clock = CountClockViolations(rep.instances);
  rep.wait = ComputeWaitMetrics(rep.info, rep.instances);
  auto p2p = MatchP2PMessages(reader);
  if (!p2p.ok()) return p2p.status();
  rep.p2p = std::move(p2p.value());
  auto overlap = ComputeOverlap(reader);
  if (!overlap.ok()) return overlap.status();
  rep.overlap = std::move(overlap.value());
  auto memory = ComputeMemoryUsage(reader);
  if (!memory.ok()) return memory.status();
  rep.memory = std::move(memory.value());
  return rep;
}

namespace {

using Json = nlohmann::ordered_json;

// NaN (no data) becomes null: JSON has no NaN.
Json NumberOrNull(double v) { return std::isnan(v) ? Json(nullptr) : Json(v); }

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

Json BreakdownJson(const TimeBreakdown& b) {
  return {{"span_ns", b.span_ns},
          {"compute_ns", b.compute_ns},
          {"exposed_comm_ns", b.exposed_comm_ns},
          {"memory_ns", b.memory_ns},
          {"idle_ns", b.idle_ns}};
}

double Percent(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

Json P2PToJson(const P2PMatchResult& p) {
  Json by_reason = Json::object();
  for (size_t r = 0; r < kP2PUnmatchedReasons; ++r) {
    by_reason[P2PUnmatchedReasonName(static_cast<P2PUnmatchedReason>(r))] = p.unmatched_by_reason[r];
  }
  Json unmatched = Json::array();
  for (const auto& u : p.unmatched) {
    unmatched.push_back({{"rank", u.rank},
                         {"kind", u.is_send ? "send" : "recv"},
                         {"comm_id", u.comm_id},
                         {"peer", u.peer},
                         {"tag", u.tag},
                         {"bytes", u.bytes},
                         {"start_ns", u.start},
                         {"reason", P2PUnmatchedReasonName(u.reason)}});
  }
  Json worst = Json::array();
  for (const auto& m : p.worst) {
    worst.push_back({{"comm_id", m.comm_id},
                     {"src", m.src},
                     {"dst", m.dst},
                     {"tag", m.tag},
                     {"bytes", m.bytes},
                     {"send_start_ns", m.send_start},
                     {"recv_start_ns", m.recv_start},
                     {"late_sender_ns", m.late_sender_ns},
                     {"late_receiver_ns", m.late_receiver_ns}});
  }
  return {{"sends", p.sends},
          {"recvs", p.recvs},
          {"matched", p.matched},
          {"unmatched_sends", p.unmatched_sends},
          {"unmatched_recvs", p.unmatched_recvs},
          {"unmatched_sendrecv", p.unmatched_sendrecv},
          {"proc_null", p.proc_null},
          {"bytes", p.bytes},
          {"late_sender_wait_ns", p.late_sender_wait_ns},
          {"late_receiver_wait_ns", p.late_receiver_wait_ns},
          {"unmatched_by_reason", by_reason},
          {"unmatched_list", unmatched},
          {"worst_messages", worst}};
}

}  // namespace

nlohmann::ordered_json ReportToJson(const JobReport& report) {
  const ProfileInfo& info = report.info;
  const WaitReport& rep = report.wait;
  Json j;
  j["schema"] = "commprof-report";
  j["schema_version"] = kReportSchemaVersion;
  j["path"] = info.path;
  j["job_id"] = info.job_id;
  j["world_size"] = info.world_size;
  Json incomplete = Json::array();
  for (const auto& ii : rep.incomplete_list) {
    incomplete.push_back({{"comm_id", ii.comm_id},
                          {"seq", ii.seq},
                          {"type", schema::CollectiveOpName(ii.op)},
                          {"comm_size", ii.comm_size},
                          {"ranks_present", ii.ranks_present}});
  }
  j["instances"] = {{"matched", rep.matched}, {"incomplete", rep.incomplete}, {"incomplete_list", incomplete}};
  j["skew_threshold_ns"] = rep.skew_threshold_ns;
  j["ranks"] = Json::array();
  for (size_t i = 0; i < rep.ranks.size(); ++i) {
    const auto& m = rep.ranks[i];
    const RankInfo& ri = info.ranks[i];
    j["ranks"].push_back({{"rank", m.rank},
                          {"host", m.host},
                          {"pid", ri.pid},
                          {"comm_time_ns", m.comm_time_ns},
                          {"wait_time_ns", m.wait_time_ns},
                          {"wait_share", m.wait_share},
                          {"times_last", m.times_last},
                          {"delay_caused_ns", m.delay_caused_ns},
                          {"wait_imposed_ns", m.wait_imposed_ns},
                          {"instances", m.instances},
                          {"transfer_time_ns", m.transfer_time_ns}});
    if (i < report.overlap.size()) {
      const RankOverlap& o = report.overlap[i];
      Json& jr = j["ranks"].back();
      jr["overlap"] = o.overlap;
      jr["exposed_comm_ns"] = o.exposed_comm_ns;
      jr["overlap_basis"] = OverlapBasisName(o.basis);
      jr["comm_union_ns"] = o.comm_ns;
      jr["breakdown"] = BreakdownJson(o.breakdown);
      jr["incomplete_events"] = o.incomplete_events;
      Json devices = Json::array();
      for (const auto& d : o.devices) {
        devices.push_back({{"device", d.device},
                           {"comm_union_ns", d.comm_ns},
                           {"overlap", d.overlap},
                           {"exposed_comm_ns", d.exposed_comm_ns},
                           {"breakdown", BreakdownJson(d.breakdown)}});
      }
      jr["devices"] = devices;
    }
    if (i < report.p2p.ranks.size()) {
      const P2PRankStats& p = report.p2p.ranks[i];
      j["ranks"].back()["p2p"] = {{"sent", p.sent},
                                  {"received", p.received},
                                  {"bytes_sent", p.bytes_sent},
                                  {"bytes_received", p.bytes_received},
                                  {"p2p_time_ns", p.p2p_time_ns},
                                  {"late_sender_wait_ns", p.late_sender_wait_ns},
                                  {"late_receiver_wait_ns", p.late_receiver_wait_ns},
                                  {"unmatched_sends", p.unmatched_sends},
                                  {"unmatched_recvs", p.unmatched_recvs}};
    }
  }
  j["collectives"] = Json::array();
  for (const auto& t : rep.types) {
    j["collectives"].push_back({{"type", schema::CollectiveOpName(t.op)},
                                {"count", t.count},
                                {"bytes", t.bytes},
                                {"mean_duration_ns", t.mean_duration_ns},
                                {"mean_wait_ns", t.mean_wait_ns},
                                {"mean_transfer_ns", t.mean_transfer_ns},
                                {"skew_p50_ns", t.skew_p50_ns},
                                {"skew_p99_ns", t.skew_p99_ns},
                                {"algbw_gbps", t.algbw_gbps},
                                {"busbw_gbps", t.busbw_gbps}});
  }
  j["worst_instances"] = Json::array();
  for (const auto& w : rep.worst) {
    j["worst_instances"].push_back({{"comm_id", w.comm_id},
                                    {"seq", w.seq},
                                    {"type", schema::CollectiveOpName(w.op)},
                                    {"bytes", w.bytes},
                                    {"start_ns", w.start_ns},
                                    {"skew_ns", w.skew_ns},
                                    {"last_rank", w.last_rank},
                                    {"delay_caused_ns", w.delay_caused_ns},
                                    {"total_wait_ns", w.total_wait_ns}});
  }
  j["p2p"] = P2PToJson(report.p2p);
  j["stragglers"] = Json::array();
  if (rep.verdict.found) {
    j["stragglers"].push_back({{"rank", rep.verdict.rank},
                               {"host", rep.verdict.host},
                               {"share_last", rep.verdict.share_last},
                               {"p_chance", rep.verdict.p_chance},
                               {"delay_caused_ns", rep.verdict.delay_caused_ns},
                               {"persistent", rep.verdict.persistent},
                               {"cause", rep.verdict.cause}});
  }
  const LatenessMap& lm = rep.lateness;
  Json lateness = {{"start_ns", lm.start_ns}, {"bin_ns", lm.bin_ns}, {"bins", lm.bins}, {"ranks", Json::array()}};
  for (size_t i = 0; i < rep.ranks.size() && lm.bins > 0; ++i) {
    Json mean = Json::array();
    for (double v : lm.mean_lateness_ns[i]) mean.push_back(NumberOrNull(v));
    lateness["ranks"].push_back(
        {{"rank", rep.ranks[i].rank}, {"mean_lateness_ns", mean}, {"times_last", lm.times_last[i]}});
  }
  j["lateness"] = lateness;
  Json clock;
  clock["violations"] = report.clock.violations;
  clock["instances_checked"] = report.clock.instances_checked;
  clock["ranks"] = Json::array();
  for (const auto& r : info.ranks) {
    clock["ranks"].push_back({{"rank", r.rank},
                              {"clock_offset_ns", r.clock_offset_ns},
                              {"clock_drift_ppm", r.clock_drift_ppm},
                              {"clock_error_bound_ns", r.clock_error_bound_ns},
                              {"clock_method", r.clock_method}});
  }
  j["clock"] = clock;
  j["memory"] = Json::array();
  for (const MemorySeries& m : report.memory) {
    j["memory"].push_back({{"rank", m.rank},
                           {"device", m.device},
                           {"memory_kind", schema::MemoryKindName(m.memory_kind)},
                           {"peak_bytes", m.peak_bytes},
                           {"peak_time_ns", m.peak_time_ns},
                           {"final_bytes", m.final_bytes},
                           {"allocs", m.allocs},
                           {"frees", m.frees},
                           {"unmatched_frees", m.unmatched_frees},
                           {"points", m.points.size()}});
  }
  return j;
}

void WriteTextReport(const JobReport& report, std::ostream& os) {
  const ProfileInfo& info = report.info;
  const WaitReport& rep = report.wait;
  char line[256];
  os << "commprof report: " << info.path << "\n";
  os << "job " << info.job_id << ", " << info.world_size << " ranks, " << rep.matched
     << " matched collective instances (" << rep.incomplete << " incomplete)\n";
  int64_t worst_bound = -1;
  for (const auto& r : info.ranks) worst_bound = std::max(worst_bound, r.clock_error_bound_ns);
  os << "clock: largest error bound "
     << (worst_bound < 0 ? std::string("unmeasured") : std::to_string(worst_bound) + " ns") << ", "
     << report.clock.violations << " clock-condition violation(s)\n"
     << "       skews under " << rep.skew_threshold_ns << " ns are not attributed to a straggler\n\n";
  std::snprintf(line, sizeof line, "%-20s %6s %10s %9s %9s %9s %9s %9s %8s\n", "collective", "count", "bytes",
                "dur (ms)", "wait (ms)", "xfer (ms)", "skew p50", "skew p99", "busbw");
  os << line;
  std::snprintf(line, sizeof line, "%-20s %6s %10s %9s %9s %9s %9s %9s %8s\n", "", "", "(mean)", "(mean)", "(mean)",
                "(mean)", "(ms)", "(ms)", "(GB/s)");
  os << line;
  for (const auto& t : rep.types) {
    std::snprintf(line, sizeof line, "%-20s %6llu %10llu %9s %9s %9s %9s %9s %8s\n", schema::CollectiveOpName(t.op),
                  static_cast<unsigned long long>(t.count), static_cast<unsigned long long>(t.bytes),
                  Ms(static_cast<int64_t>(t.mean_duration_ns)).c_str(),
                  Ms(static_cast<int64_t>(t.mean_wait_ns)).c_str(),
                  Ms(static_cast<int64_t>(t.mean_transfer_ns)).c_str(), Ms(t.skew_p50_ns).c_str(),
                  Ms(t.skew_p99_ns).c_str(), Bandwidth(t.busbw_gbps).c_str());
    os << line;
  }
  os << "\n";
  std::snprintf(line, sizeof line, "%-5s %-15s %13s %13s %7s %10s %15s %15s\n", "rank", "host", "comm (ms)",
                "wait (ms)", "wait %", "times last", "delay caused", "wait imposed");
  os << line;
  for (const auto& m : rep.ranks) {
    std::snprintf(line, sizeof line, "%-5u %-15.15s %13s %13s %6.1f%% %10llu %12s ms %12s ms\n", m.rank, m.host.c_str(),
                  Ms(m.comm_time_ns).c_str(), Ms(m.wait_time_ns).c_str(), 100.0 * m.wait_share,
                  static_cast<unsigned long long>(m.times_last), Ms(m.delay_caused_ns).c_str(),
                  Ms(m.wait_imposed_ns).c_str());
    os << line;
  }
  if (!rep.worst.empty()) {
    os << "\nworst instances (largest total wait):\n";
    std::snprintf(line, sizeof line, "%-20s %-18s %8s %10s %9s %5s %10s %10s\n", "collective", "communicator", "seq",
                  "at (ms)", "skew (ms)", "last", "delay (ms)", "waits (ms)");
    os << line;
    for (const auto& w : rep.worst) {
      char comm[32];
      std::snprintf(comm, sizeof comm, "0x%llx", static_cast<unsigned long long>(w.comm_id));
      std::string last = w.last_rank >= 0 ? std::to_string(w.last_rank) : "-";
      std::snprintf(line, sizeof line, "%-20s %-18s %8llu %10s %9s %5s %10s %10s\n", schema::CollectiveOpName(w.op),
                    comm, static_cast<unsigned long long>(w.seq), Ms(w.start_ns - rep.lateness.start_ns).c_str(),
                    Ms(w.skew_ns).c_str(), last.c_str(), Ms(w.delay_caused_ns).c_str(), Ms(w.total_wait_ns).c_str());
      os << line;
    }
  }
  if (!rep.incomplete_list.empty()) {
    os << "\nincomplete instances (a member missing; not measured): " << rep.incomplete << "\n";
    size_t shown = 0;
    for (const auto& ii : rep.incomplete_list) {
      if (shown++ == 5) {
        os << "  ... (all listed in --format json)\n";
        break;
      }
      std::string present;
      for (uint32_t r : ii.ranks_present) present += (present.empty() ? "" : ",") + std::to_string(r);
      std::snprintf(line, sizeof line, "  %s comm 0x%llx seq %llu: %zu of %u ranks (%s)\n",
                    schema::CollectiveOpName(ii.op), static_cast<unsigned long long>(ii.comm_id),
                    static_cast<unsigned long long>(ii.seq), ii.ranks_present.size(), ii.comm_size,
                    present.substr(0, 40).c_str());
      os << line;
    }
  }
  if (!report.overlap.empty()) {
    os << "\noverlap of communication with computation, and where each rank's time went:\n";
    std::snprintf(line, sizeof line, "%-5s %-15s %8s %13s %10s %10s %10s %10s\n", "rank", "basis", "overlap",
                  "exposed (ms)", "span (ms)", "compute %", "memory %", "idle %");
    os << line;
    for (const auto& o : report.overlap) {
      const TimeBreakdown& b = o.breakdown;
      std::snprintf(line, sizeof line, "%-5u %-15s %7.1f%% %13s %10s %9.1f%% %9.1f%% %9.1f%%\n", o.rank,
                    OverlapBasisName(o.basis), 100.0 * o.overlap, Ms(o.exposed_comm_ns).c_str(), Ms(b.span_ns).c_str(),
                    Percent(b.compute_ns, b.span_ns), Percent(b.memory_ns, b.span_ns), Percent(b.idle_ns, b.span_ns));
      os << line;
    }
  }
  if (!report.memory.empty()) {
    os << "\nmemory in use (from allocation and free records):\n";
    std::snprintf(line, sizeof line, "%-5s %6s %-14s %14s %12s %14s %8s %8s\n", "rank", "device", "kind", "peak (MiB)",
                  "at (ms)", "at end (MiB)", "allocs", "frees");
    os << line;
    for (const MemorySeries& m : report.memory) {
      std::snprintf(line, sizeof line, "%-5u %6u %-14s %14.1f %12s %14.1f %8llu %8llu\n", m.rank, m.device,
                    schema::MemoryKindName(m.memory_kind), static_cast<double>(m.peak_bytes) / (1 << 20),
                    Ms(m.peak_time_ns - rep.lateness.start_ns).c_str(), static_cast<double>(m.final_bytes) / (1 << 20),
                    static_cast<unsigned long long>(m.allocs), static_cast<unsigned long long>(m.frees));
      os << line;
    }
  }
  const P2PMatchResult& p2p = report.p2p;
  if (p2p.sends + p2p.recvs > 0) {
    std::snprintf(line, sizeof line,
                  "\npoint-to-point: %llu messages matched, %llu sends and %llu receives unmatched"
                  " (%llu of them Sendrecv)\n",
                  static_cast<unsigned long long>(p2p.matched), static_cast<unsigned long long>(p2p.unmatched_sends),
                  static_cast<unsigned long long>(p2p.unmatched_recvs),
                  static_cast<unsigned long long>(p2p.unmatched_sendrecv));
    os << line;
    std::snprintf(line, sizeof line, "%-5s %9s %9s %13s %18s %20s\n", "rank", "sent", "received", "p2p (ms)",
                  "late sender (ms)", "late receiver (ms)");
    os << line;
    for (const auto& r : p2p.ranks) {
      std::snprintf(line, sizeof line, "%-5u %9llu %9llu %13s %18s %20s\n", r.rank,
                    static_cast<unsigned long long>(r.sent), static_cast<unsigned long long>(r.received),
                    Ms(r.p2p_time_ns).c_str(), Ms(r.late_sender_wait_ns).c_str(), Ms(r.late_receiver_wait_ns).c_str());
      os << line;
    }
  }
  os << "\nverdict: ";
  const StragglerVerdict& v = rep.verdict;
  if (!v.found) {
    os << "no straggler: no rank was last in half or more of the matched instances,\n"
          "  far more often than chance and by enough to matter (docs/metrics.md §4)\n";
    return;
  }
  std::snprintf(line, sizeof line,
                "rank %u on %s is the straggler\n"
                "  last in %.0f%% of %llu instances (%s; by chance: p = %.1e)\n"
                "  delay it alone caused: %s ms in all\n"
                "  cause hint: %s\n",
                v.rank, v.host.c_str(), 100.0 * v.share_last, static_cast<unsigned long long>(rep.matched),
                v.persistent ? "persistent" : "transient", v.p_chance, Ms(v.delay_caused_ns).c_str(),
                v.cause == "compute" ? "longer compute before the collective" : "slow transfer");
  os << line;
}

}  // namespace commprof
