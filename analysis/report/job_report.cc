#include "analysis/report/job_report.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "analysis/load/event_screen.h"
#include "core/log.h"

namespace commprof {

namespace {

// With COMMPROF_LOG=info, one line per stage of the analysis and the seconds it took, so a user
// waiting on a large file sees where the time goes (and which stage a hang is in).
class StageLog {
 public:
  void Done(const char* stage) {
    const auto now = std::chrono::steady_clock::now();
    COMMPROF_LOG_INFO("analysis: %s in %.3f s", stage, std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// One read of each rank's events feeds the incremental builders: overlap and breakdown (§6),
// memory in use (§7) and the parts of the time categories the events give on their own (§9.5).
Result<std::vector<RankPass>> ComputeRankPasses(const ProfileReader& reader) {
  std::vector<RankPass> passes;
  passes.reserve(reader.info().ranks.size());
  for (const RankInfo& r : reader.info().ranks) {
    auto pass = ComputeRankPass(reader, r);
    if (!pass.ok()) {
      return pass.status();
    }
    passes.push_back(std::move(pass.value()));
  }
  return passes;
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

Result<RankPass> ComputeRankPass(const ProfileReader& reader, const RankInfo& r) {
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
  return RankPass{overlap.Finish(r.rank), parts.Summarize(), memory.Finish()};
}

P2PMatchOptions ReportP2POptions() {
  P2PMatchOptions options;
  options.keep_messages = true;  // the delay costs' dependencies (§9.1)
  return options;
}

Result<JobReport> AnalyzeJob(const ProfileReader& reader, const AnalysisSources& sources) {
  JobReport rep;
  rep.info = reader.info();
  StageLog stages;
  // Point-to-point matching first: its working set (every operation of the job) is gone before the
  // collective instances and their per-instance figures are built, so the two never add up in the
  // peak memory. It rejects nothing, so a malformed file still fails in the collective matching
  // with the same message.
  // Given by `sources`, it is computed elsewhere meanwhile (take_p2p below).
  auto p2p = sources.p2p ? Result<P2PMatchResult>(P2PMatchResult{}) : MatchP2PMessages(reader, ReportP2POptions());
  if (!p2p.ok()) {
    return p2p.status();
  }
  rep.p2p = std::move(p2p.value());
  stages.Done(sources.p2p ? "point-to-point matching (given)" : "point-to-point matching");
  // The step marks (§10) ride on the collective-matching read.
  std::vector<RankStepMarks> step_marks(rep.info.ranks.size());
  auto instances = LoadCollectiveInstances(reader, true, /*nonblocking=*/true,
                                           [&](uint32_t rank_index, std::span<const commprof_event> chunk) {
                                             if (rank_index < step_marks.size()) {
                                               AddStepMarks(chunk, step_marks[rank_index]);
                                             }
                                           });
  if (sources.screened && !sources.screened()) {
    return Status(kAnalyzeAgain, "the screening left ranks out: analyse again");
  }
  // A given point-to-point part is taken when the delay costs need it; its error (as when computed
  // here, first) goes before the matching's.
  auto take_p2p = [&]() -> Status {
    if (!sources.p2p) {
      return Status::Ok();
    }
    auto given = sources.p2p();
    if (!given.ok()) {
      return given.status();
    }
    rep.p2p = std::move(given.value());
    return Status::Ok();
  };
  if (!instances.ok()) {
    COMMPROF_RETURN_IF_ERROR(take_p2p());
    return instances.status();
  }
  rep.instances = std::move(instances.value());
  stages.Done("collective matching");
  // The third read of the file (overlap, memory, time parts), then the hang diagnosis's read, run
  // while the instances are measured and the wait and delay costs computed: from here to the join
  // only that thread touches the file (HDF5 is not thread-safe here), and the two write different
  // variables until the join. (Given `sources`, both come from elsewhere instead.)
  Result<std::vector<RankPass>> passes = std::vector<RankPass>{};
  Result<std::optional<hang::FileHang>> hang = std::optional<hang::FileHang>{};
  std::jthread third_read;
  const bool third_read_here = !sources.rank_passes;
  // Whether the hang diagnosis rides on the third read; otherwise it runs after the join, when
  // `may_have_hung` (a distributed report's) does not rule it out.
  const bool hang_in_third_read = third_read_here && !sources.may_have_hung;
  if (third_read_here) {
    // A given point-to-point part is taken before the thread starts: its source may read the file.
    COMMPROF_RETURN_IF_ERROR(take_p2p());
    third_read = std::jthread([&] {
      try {
        passes = ComputeRankPasses(reader);
        if (passes.ok() && hang_in_third_read) {
          hang = hang::DiagnoseFile(reader);
        }
      } catch (const std::exception& e) {  // out of memory: an error, as on the calling thread
        passes = Internal(std::string("overlap and memory: ") + e.what());
      }
    });
  }
  rep.clock = CountClockViolations(rep.instances);
  rep.measured = MeasureInstances(rep.instances, SkewThresholdNs(rep.info));
  rep.wait = ComputeWaitMetrics(rep.info, rep.instances, rep.measured);
  stages.Done("wait metrics");
  if (!third_read_here) {
    COMMPROF_RETURN_IF_ERROR(take_p2p());  // given meanwhile by another process (distributed report)
  }
  const StepModel step_model = BuildStepModel(rep.info, step_marks);
  step_marks.clear();
  StepOf step_of;
  if (!step_model.empty()) {
    step_of = [&step_model](uint32_t rank_index, int64_t t) { return step_model.SlotAt(rank_index, t); };
  }
  rep.delay =
      ComputeDelayCosts(rep.info, rep.instances, rep.measured, rep.p2p.messages, rep.wait.skew_threshold_ns, step_of);
  stages.Done("delay costs");
  rep.p2p.messages.clear();
  rep.p2p.messages.shrink_to_fit();
  rep.stragglers = JudgeStragglers(rep.info, rep.instances, rep.delay);
  rep.delay.graph = SyncGraph();  // the replay is done: free the job's calls
  rep.steps = BuildStepTable(rep.info, step_model, rep.instances, rep.measured, rep.delay);
  rep.delay.step_costs.clear();
  rep.delay.step_costs.shrink_to_fit();
  stages.Done("stragglers and steps");
  if (sources.rank_passes) {
    passes = sources.rank_passes();
  } else {
    third_read.join();
  }
  stages.Done("overlap and memory (waited for)");
  if (!passes.ok()) {
    return passes.status();
  }
  rep.overlap.reserve(passes.value().size());
  for (size_t i = 0; i < passes.value().size(); ++i) {
    RankPass& pass = passes.value()[i];
    rep.overlap.push_back(std::move(pass.overlap));
    if (i < rep.delay.ranks.size()) {
      rep.time.push_back(ComposeRankTime(pass.time, rep.overlap.back(), rep.delay.ranks[i]));
    }
    for (MemorySeries& s : pass.memory) {
      rep.memory.push_back(std::move(s));
    }
  }
  COMMPROF_RETURN_IF_ERROR(AnalyzeCallSites(reader, rep));
  stages.Done("call sites");
  if (!hang_in_third_read && (!sources.may_have_hung || sources.may_have_hung())) {
    hang = hang::DiagnoseFile(reader);
  }
  if (!hang.ok()) {
    return hang.status();
  }
  rep.hang = std::move(hang.value());
  stages.Done("hang diagnosis");
  return rep;
}

Result<JobReport> AnalyzeReadable(ProfileReader& reader) {
  if (UnreadableStringTables(reader) == 0) {
    auto report = AnalyzeJob(reader);
    if (report.ok()) {
      return report;  // the screening would have left nothing out
    }
  }
  // Screened as it always was (the same ranks left out, their faults in the same order), then
  // analysed; an error that is not a rank's stands.
  ScreenEventRows(reader);
  return AnalyzeJob(reader);
}

}  // namespace commprof
