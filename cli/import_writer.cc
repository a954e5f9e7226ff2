#include "cli/import_writer.h"

#include <filesystem>
#include <span>

#include "aggregator/hdf5/hdf5_writer.h"

namespace commprof::cli {

Status WriteImportedJob(const kineto::ImportedJob& job, const std::string& path, const std::string& command_line) {
  JobMeta meta;
  meta.job_id = "kineto-import";
  meta.command_line = command_line;
  meta.world_size = job.world_size;
  meta.start_epoch_ns = job.start_epoch_ns;
  auto writer = Hdf5Writer::Create(path, meta, WriterOptions{});
  if (!writer.ok()) {
    return writer.status();
  }
  Hdf5Writer& w = *writer.value();
  for (const auto& r : job.ranks) {
    const kineto::RankTrace& t = r.trace;
    RankDescription d;
    d.rank = r.rank;
    d.world_size = job.world_size;
    // A Kineto file names no host reliably: the file name stands in for it.
    d.host = std::filesystem::path(t.path).filename().string();
    d.start_steady_ns = 0;                // local time 0 is the job's time base ...
    d.start_utc_ns = job.start_epoch_ns;  // ... at this UTC
    COMMPROF_RETURN_IF_ERROR(w.OpenRank(d));
    constexpr size_t kStringBatch = 4096;
    for (size_t i = 0; i < t.strings.size(); i += kStringBatch) {
      StringBatch s;
      s.first_id = static_cast<uint32_t>(i);
      s.strings.assign(t.strings.begin() + static_cast<std::ptrdiff_t>(i),
                       t.strings.begin() + static_cast<std::ptrdiff_t>(std::min(t.strings.size(), i + kStringBatch)));
      COMMPROF_RETURN_IF_ERROR(w.AppendStrings(r.rank, s));
    }
    constexpr size_t kEventBatch = 1u << 16;
    std::span<const commprof_event> all(t.events);
    for (size_t i = 0; i < all.size(); i += kEventBatch) {
      COMMPROF_RETURN_IF_ERROR(w.AppendEvents(r.rank, all.subspan(i, std::min(kEventBatch, all.size() - i))));
    }
    RankClock clock;
    clock.method = kineto::ImportedClockMethod(job.align);
    clock.anchor_local_ns = 0;
    clock.offset_ns = r.offset_ns;
    clock.error_bound_ns = r.spread_ns;
    if (r.spread_ns >= 0) {
      clock.points.push_back({0, r.offset_ns, r.spread_ns});
    }
    COMMPROF_RETURN_IF_ERROR(w.SetClock(r.rank, clock));
    std::vector<std::pair<std::string, uint64_t>> counters = {
        {"kineto_events_read", t.counts.events_read},
        {"kineto_flows_skipped", t.counts.flows_skipped},
        {"kineto_metadata_skipped", t.counts.metadata_skipped},
        {"kineto_counters_skipped", t.counts.counters_skipped},
        {"kineto_trace_spans_skipped", t.counts.trace_spans_skipped},
        {"kineto_unknown_category", t.counts.unknown_category},
        {"kineto_comm_kernels", t.counts.comm_kernels},
        {"kineto_comm_kernels_without_metadata", t.counts.comm_kernels_without_metadata},
        // Refused events are lost: the dropped_ prefix adds them to the rank's dropped_events.
        {"dropped_kineto_refused_events", t.counts.rejected},
    };
    const bool broken = !t.read_status.ok();
    COMMPROF_RETURN_IF_ERROR(w.CloseRank(r.rank, broken ? RankEnd::kCorrupt : RankEnd::kComplete, counters, 0,
                                         broken ? t.read_status.message() : "imported from " + t.path));
  }
  return w.Finalize();
}

}  // namespace commprof::cli
