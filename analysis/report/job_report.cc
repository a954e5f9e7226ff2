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
    Status st = reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      overlap.Add(chunk);
      memory.Add(chunk);
    });
    if (!st.ok()) {
      return Status(st.code(), "overlap of rank " + std::to_string(r.rank) + ": " + st.message());
    }
    rep.overlap.push_back(overlap.Finish(r.rank));
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
  auto p2p = MatchP2PMessages(reader);
  if (!p2p.ok()) {
    return p2p.status();
  }
  rep.p2p = std::move(p2p.value());
  auto instances = LoadCollectiveInstances(reader, true);
  if (!instances.ok()) {
    return instances.status();
  }
  rep.instances = std::move(instances.value());
  rep.clock = CountClockViolations(rep.instances);
  rep.measured = MeasureInstances(rep.instances, SkewThresholdNs(rep.info));
  rep.wait = ComputeWaitMetrics(rep.info, rep.instances, rep.measured);
  COMMPROF_RETURN_IF_ERROR(ComputeOverlapAndMemory(reader, rep));
  return rep;
}

}  // namespace commprof
