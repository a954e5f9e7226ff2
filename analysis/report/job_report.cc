#include "analysis/report/job_report.h"

#include <cmath>
#include <cstdio>

namespace commprof {

namespace {

// One read of each rank's events feeds both incremental builders: overlap and breakdown (§6) and
// memory in use (§7).
Status ComputeOverlapAndMemory(const ProfileReader& reader, JobReport& rep) {
  rep.overlap.reserve(reader.info().ranks.size());
  for (const RankInfo& r : reader.info().ranks) {
    const ClockModel clock = r.clock_model();
    RankOverlapBuilder overlap(clock);
    MemoryUsageBuilder memory(r.rank, clock);
    RankTimeBuilder time(clock);
    Status st = reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      overlap.Add(chunk);
      memory.Add(chunk);
      time.Add(chunk);
    });
    if (!st.ok()) {
      return Status(st.code(), "overlap of rank " + std::to_string(r.rank) + ": " + st.message());
    }
    rep.overlap.push_back(overlap.Finish(r.rank));
    rep.time.push_back(time.Finish(rep.overlap.back(), rep.delay.ranks[rep.overlap.size() - 1]));
    for (MemorySeries& s : memory.Finish()) {
      rep.memory.push_back(std::move(s));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<JobReport> AnalyzeJob(const ProfileReader& reader) {
  JobReport rep;
  rep.info = reader.info();
  // Point-to-point matching first: its working set (every operation of the job) is gone before the
  // collective instances and their per-instance figures are built, so the two never add up in the
  // peak memory. It rejects nothing, so a malformed file still fails in the collective matching
  // with the same message.
  P2PMatchOptions p2p_options;
  p2p_options.keep_messages = true;  // the delay costs' dependencies (§9.1)
  auto p2p = MatchP2PMessages(reader, p2p_options);
  if (!p2p.ok()) {
    return p2p.status();
  }
  rep.p2p = std::move(p2p.value());
  auto instances = LoadCollectiveInstances(reader, true, /*nonblocking=*/true);
  if (!instances.ok()) {
    return instances.status();
  }
  rep.instances = std::move(instances.value());
  rep.clock = CountClockViolations(rep.instances);
  rep.measured = MeasureInstances(rep.instances, SkewThresholdNs(rep.info));
  rep.wait = ComputeWaitMetrics(rep.info, rep.instances, rep.measured);
  rep.delay = ComputeDelayCosts(rep.info, rep.instances, rep.measured, rep.p2p.messages, rep.wait.skew_threshold_ns);
  rep.p2p.messages.clear();
  rep.p2p.messages.shrink_to_fit();
  rep.stragglers = JudgeStragglers(rep.info, rep.instances, rep.delay);
  rep.delay.graph = SyncGraph();  // the replay is done: free the job's calls before the last pass
  COMMPROF_RETURN_IF_ERROR(ComputeOverlapAndMemory(reader, rep));
  return rep;
}

}  // namespace commprof
