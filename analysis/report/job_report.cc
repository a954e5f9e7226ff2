#include "analysis/report/job_report.h"

#include <cmath>
#include <cstdio>
#include <thread>

namespace commprof {

namespace {

// One read of each rank's events feeds the incremental builders: overlap and breakdown (§6),
// memory in use (§7) and the parts of the time categories the events give on their own (§9.5).
Status ComputeOverlapAndMemory(const ProfileReader& reader, JobReport& rep, std::vector<RankTimeBuilder::Parts>& time) {
  rep.overlap.reserve(reader.info().ranks.size());
  for (const RankInfo& r : reader.info().ranks) {
    const ClockModel clock = r.clock_model();
    RankOverlapBuilder overlap(clock);
    MemoryUsageBuilder memory(r.rank, clock);
    RankTimeBuilder parts(clock);
    Status st = reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      overlap.Add(chunk);
      memory.Add(chunk);
      parts.Add(chunk);
    });
    if (!st.ok()) {
      return Status(st.code(), "overlap of rank " + std::to_string(r.rank) + ": " + st.message());
    }
    rep.overlap.push_back(overlap.Finish(r.rank));
    time.push_back(parts.Summarize());
    for (MemorySeries& s : memory.Finish()) {
      rep.memory.push_back(std::move(s));
    }
  }
  return Status::Ok();
}

// Call sites (§10): a fourth read of the ranks that recorded stacks, none otherwise.
Status AnalyzeCallSites(const ProfileReader& reader, JobReport& rep) {
  auto stacks = LoadStacks(reader);
  if (!stacks.ok()) {
    return stacks.status();
  }
  auto sites = ComputeCallSites(reader, stacks.value(), rep.instances, rep.measured);
  if (!sites.ok()) {
    return sites.status();
  }
  rep.call_sites = std::move(sites.value());
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
  // The step marks (§10) ride on the collective-matching read.
  std::vector<RankStepMarks> step_marks(rep.info.ranks.size());
  auto instances = LoadCollectiveInstances(reader, true, /*nonblocking=*/true,
                                           [&](uint32_t rank_index, std::span<const commprof_event> chunk) {
                                             if (rank_index < step_marks.size()) {
                                               AddStepMarks(chunk, step_marks[rank_index]);
                                             }
                                           });
  if (!instances.ok()) {
    return instances.status();
  }
  rep.instances = std::move(instances.value());
  rep.clock = CountClockViolations(rep.instances);
  rep.measured = MeasureInstances(rep.instances, SkewThresholdNs(rep.info));
  rep.wait = ComputeWaitMetrics(rep.info, rep.instances, rep.measured);
  // The third read of the file (overlap, memory, time parts) runs while the delay costs are
  // computed: only that thread touches the file (HDF5 is not thread-safe here), and the two write
  // different members of `rep` until the join.
  std::vector<RankTimeBuilder::Parts> time_parts;
  Status overlap_status;
  std::jthread third_read([&] { overlap_status = ComputeOverlapAndMemory(reader, rep, time_parts); });
  const StepModel step_model = BuildStepModel(rep.info, step_marks);
  step_marks.clear();
  StepOf step_of;
  if (!step_model.empty()) {
    step_of = [&step_model](uint32_t rank_index, int64_t t) { return step_model.SlotAt(rank_index, t); };
  }
  rep.delay =
      ComputeDelayCosts(rep.info, rep.instances, rep.measured, rep.p2p.messages, rep.wait.skew_threshold_ns, step_of);
  rep.p2p.messages.clear();
  rep.p2p.messages.shrink_to_fit();
  rep.stragglers = JudgeStragglers(rep.info, rep.instances, rep.delay);
  rep.delay.graph = SyncGraph();  // the replay is done: free the job's calls
  rep.steps = BuildStepTable(rep.info, step_model, rep.instances, rep.measured, rep.delay);
  rep.delay.step_costs.clear();
  rep.delay.step_costs.shrink_to_fit();
  third_read.join();
  COMMPROF_RETURN_IF_ERROR(overlap_status);
  for (size_t i = 0; i < rep.overlap.size() && i < rep.delay.ranks.size(); ++i) {
    rep.time.push_back(ComposeRankTime(time_parts[i], rep.overlap[i], rep.delay.ranks[i]));
  }
  COMMPROF_RETURN_IF_ERROR(AnalyzeCallSites(reader, rep));
  auto hang = hang::DiagnoseFile(reader);
  if (!hang.ok()) {
    return hang.status();
  }
  rep.hang = std::move(hang.value());
  return rep;
}

}  // namespace commprof
