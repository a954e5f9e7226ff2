// `commprof export FILE.h5 [--format chrome|perfetto|memory-html|memory-json] [-o OUT] [--ranks LIST]
// [--time-range FROM:TO | --steps A-B] [-q]`: one merged timeline of the job as Chrome JSON
// (docs/chrome-trace.md) or Perfetto protobuf (docs/perfetto-trace.md), or its memory timeline as a
// page or JSON (docs/memory-timeline.md). The output is written
// to a temporary file next to OUT and renamed over it only when complete, so a failed export never
// leaves a truncated trace behind (OUT that is a device, FIFO or symlink is written directly).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <set>

#include "analysis/export/memory_html.h"
#include "analysis/export/memory_json.h"
#include "analysis/load/event_screen.h"
#include "analysis/load/profile_reader.h"
#include "analysis/metrics/memory_timeline.h"
#include "cli/analysis_open.h"
#include "cli/commands.h"
#include "cli/output_file.h"
#include "cli/trace_parts.h"
#include "commprof/event.h"
#include "core/schema/enums.h"

namespace commprof::cli {
namespace {

constexpr int64_t kDefaultMaxPoints =
    std::numeric_limits<int64_t>::min();  // --max-points not given: the format's default

struct Options {
  std::string path;
  std::string format = "chrome";
  std::string output;
  std::string ranks;
  bool ranks_given = false;  // an empty --ranks "" is an error, not every rank
  std::string time_range;
  std::string steps;
  bool quiet = false;
  int64_t window = -1;
  int64_t max_points = kDefaultMaxPoints;
};

std::string DefaultOutput(const std::string& input, const std::string& format) {
  std::filesystem::path p(input);
  if (p.extension() == ".h5") {
    p.replace_extension();
  }
  if (format == "memory-html") {
    return p.string() + ".memory.html";
  }
  if (format == "memory-json") {
    return p.string() + ".memory.json";
  }
  if (format == "perfetto") {
    return p.string() + ".pftrace";
  }
  return p.string() + ".trace.json";
}

// A cut's end as the user would write it back (ns, us, ms or s).
std::string FormatCutTime(int64_t ns) {
  if (ns == INT64_MAX) {
    return "the end";
  }
  char buf[48];
  if (ns % 1000000000 == 0) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(ns / 1000000000));
  } else if (ns % 1000000 == 0) {
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ns / 1000000));
  } else if (ns % 1000 == 0) {
    std::snprintf(buf, sizeof buf, "%lldus", static_cast<long long>(ns / 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%lldns", static_cast<long long>(ns));
  }
  return buf;
}

// --format memory-html / memory-json: the memory timeline of the selected ranks.
int RunMemoryExport(const Options& o, const ProfileReader& reader, const std::vector<uint32_t>& ranks) {
  const ProfileInfo& info = reader.info();
  MemoryTimelineOptions topts;
  topts.ranks = ranks;
  auto timeline = BuildMemoryTimeline(reader, topts);
  if (!timeline.ok()) {
    std::fprintf(stderr, "commprof export: %s\n", timeline.status().message().c_str());
    return 1;
  }
  const MemoryTimeline& t = timeline.value();
  if (t.devices.empty()) {
    // Nothing to draw: say so and write nothing, rather than an empty page a script would take
    // for a job that used no memory.
    std::fprintf(stderr,
                 "commprof export: %s has no allocation or free records (kinds 14, 15) in the ranks selected: "
                 "nothing to plot (commprof run records them on a GPU job with --activities memory, part of all; "
                 "torch.profiler with profile_memory=True)\n",
                 o.path.c_str());
    return 1;
  }
  for (const DeviceTimeline& d : t.devices) {
    if (d.unaddressed_allocs > 1) {
      const std::string label =
          d.device == COMMPROF_HOST_DEVICE ? std::string("host") : "cuda:" + std::to_string(d.device);
      // Every such allocation replaces the one before it (§7): the chart would look plausible
      // and be wrong, so say it, once per chart.
      std::fprintf(stderr,
                   "commprof export: warning: %s rank %u %s: %llu allocation records carry no address, so their "
                   "blocks cannot be told apart and the bytes in use shown are wrong (a torch trace without "
                   "\"Addr\", or a file imported before commprof kept it: import the trace again)\n",
                   o.path.c_str(), d.rank, label.c_str(), static_cast<unsigned long long>(d.unaddressed_allocs));
    }
  }
  MemoryExportOptions eopts;
  eopts.file = o.path;
  for (const RankFault& f : info.faults) {
    if (f.rank && !f.partial) {  // a selected rank that cannot be read stops the export before this
      eopts.unreadable_ranks.push_back(*f.rank);
    }
  }
  std::sort(eopts.unreadable_ranks.begin(), eopts.unreadable_ranks.end());
  if (reader.window()) {
    eopts.window = *reader.window();
  }
  const bool html = o.format == "memory-html";
  eopts.max_points =
      o.max_points != kDefaultMaxPoints ? static_cast<size_t>(o.max_points) : (html ? kMemoryHtmlDefaultMaxPoints : 0);
  const std::string output = o.output.empty() ? DefaultOutput(o.path, o.format) : o.output;
  const std::string display = output == "-" ? std::string("<stdout>") : output;
  const Status st = WriteOutput(output, [&](std::ostream& out) {
    html ? WriteMemoryTimelineHtml(t, eopts, out) : WriteMemoryTimelineJson(t, eopts, out);
    return Status::Ok();
  });
  if (!st.ok()) {
    std::fprintf(stderr, "commprof export: %s\n", st.message().c_str());
    return 1;
  }
  if (!o.quiet) {
    const std::string without =
        t.ranks_without_records.empty()
            ? std::string()
            : ", " + std::to_string(t.ranks_without_records.size()) + " rank(s) without records";
    std::fprintf(stderr, "commprof export: wrote %s: memory timeline of %zu chart(s) (rank x device)%s\n",
                 display.c_str(), t.devices.size(), without.c_str());
  }
  return info.faults.empty() ? 0 : 1;
}

// The whole command on one process of `world` (nullptr: alone); returns its exit code. Only the
// first process (`tell`) prints, and it writes the output.
int ExportOf(const Options& o, AnalysisWorld* world, bool tell) {
  if (o.format != "chrome" && o.format != "perfetto" && o.format != "memory-html" && o.format != "memory-json") {
    SayIf(tell, "commprof export: --format %s is not supported (chrome, perfetto, memory-html, memory-json)\n",
          o.format.c_str());
    return 2;
  }
  const bool timeline = o.format == "chrome" || o.format == "perfetto";
  if (o.max_points != kDefaultMaxPoints && timeline) {
    SayIf(tell, "commprof export: --max-points applies to --format memory-html and memory-json only\n");
    return 2;
  }
  if (o.max_points != kDefaultMaxPoints && (o.max_points < 0 || (o.max_points > 0 && o.max_points < 4))) {
    // A time bucket keeps 4 points (first, last, lowest, highest): fewer could not keep the peak.
    SayIf(tell, "commprof export: --max-points %lld: give 0 (every record) or at least 4\n",
          static_cast<long long>(o.max_points));
    return 2;
  }
  if (o.output == "-" && o.format == "memory-html") {
    SayIf(tell, "commprof export: -o - (standard output) is for the JSON formats; name an .html file\n");
    return 2;
  }
  TraceExportOptions opts;
  if (o.ranks_given && !ParseRankList(o.ranks, opts.ranks)) {
    SayIf(tell, "commprof export: --ranks '%s' is not a list like 0,3 or 0-3,8\n", o.ranks.c_str());
    return 2;
  }
  if ((!o.time_range.empty() || !o.steps.empty()) && !timeline) {
    SayIf(tell, "commprof export: --time-range and --steps apply to --format chrome and perfetto only\n");
    return 2;
  }
  if (!o.time_range.empty() && !o.steps.empty()) {
    SayIf(tell, "commprof export: give --time-range or --steps, not both\n");
    return 2;
  }
  std::string why;
  if (!o.time_range.empty() && !ParseTimeRange(o.time_range, opts.time_range.emplace(), why)) {
    SayIf(tell, "commprof export: --time-range '%s': %s\n", o.time_range.c_str(), why.c_str());
    return 2;
  }
  if (!o.steps.empty() && !ParseStepRange(o.steps, opts.steps.emplace(), why)) {
    SayIf(tell, "commprof export: --steps '%s': %s\n", o.steps.c_str(), why.c_str());
    return 2;
  }
  const std::string output = o.output.empty() ? DefaultOutput(o.path, o.format) : o.output;
  int open_exit = 0;
  std::unique_ptr<ProfileReader> reader =
      OpenEverywhere("export", world, o.path, o.window, output, OutputKind::kStream, open_exit);
  if (reader == nullptr) {
    return open_exit;
  }
  // A rank with a row the analyses cannot take is left out like an unreadable group, and named.
  // The timeline's own read of the file refuses every such row (ReadTimeline): the rows are
  // screened only when it does, so a sound file is read once before the walk instead of twice.
  std::shared_ptr<const TimelineRead> read;
  if (timeline && UnreadableStringTables(*reader) == 0) {
    auto made = ReadTimeline(*reader, !o.steps.empty());
    if (made.ok()) {
      read = std::move(made.value());
    }
  }
  if (read == nullptr) {
    ScreenEventRows(*reader);
  }
  const ProfileInfo& info = reader->info();
  for (const RankFault& f : info.faults) {
    SayIf(tell, "commprof export: %s\n", f.message.c_str());
  }
  for (uint32_t want : opts.ranks) {
    bool found = false;
    bool never_connected = false;  // listed, but the writer marked it missing: no event of it
    for (const RankInfo& r : info.ranks) {
      found = found || r.rank == want;
      never_connected =
          never_connected || (r.rank == want && r.status == schema::RankStatusName(schema::RankStatus::kMissing));
    }
    if (std::any_of(info.faults.begin(), info.faults.end(),
                    [&](const RankFault& f) { return f.rank == want && !f.partial; })) {
      SayIf(tell, "commprof export: --ranks: rank %u of %s cannot be read (above)\n", want, o.path.c_str());
      return 1;
    }
    if (!found && want >= info.world_size) {
      SayIf(tell, "commprof export: --ranks: %s has no rank %u (world size %llu)\n", o.path.c_str(), want,
            static_cast<unsigned long long>(info.world_size));
      return 2;
    }
    if (!found || never_connected) {  // as `stats --ranks` says it (no group: a rank that never connected)
      SayIf(tell, "commprof export: --ranks: %s has no events of rank %u (it never connected)\n", o.path.c_str(), want);
      return 2;
    }
  }
  if (!timeline) {
    return tell ? RunMemoryExport(o, *reader, opts.ranks) : 0;  // made by the first process alone
  }

  const std::string display = output == "-" ? std::string("<stdout>") : output;
  opts.output_name = display;
  opts.read = std::move(read);  // null after a screening: the walk reads the screened file again
  const bool tty = world == nullptr && !o.quiet && isatty(STDERR_FILENO) != 0;
  const auto t0 = std::chrono::steady_clock::now();
  if (tty) {
    opts.progress = [](const TraceExportProgress& p) {
      std::fprintf(stderr, "\rcommprof export: %u/%u ranks written, %llu events, %.1f MB   ", p.ranks_done,
                   p.ranks_total, static_cast<unsigned long long>(p.events_written),
                   static_cast<double>(p.bytes_written) / 1e6);
      std::fflush(stderr);
    };
  }

  TraceExportStats stats;
  const TraceFormat format = o.format == "perfetto" ? TraceFormat::kPerfetto : TraceFormat::kChrome;
  const Status st =
      world != nullptr
          ? WriteTraceTogether(*world, *reader, opts, format, output, stats)
          : WriteOutput(output, [&](std::ostream& out) { return WriteTrace(format, *reader, out, opts, &stats); });
  if (!tell) {
    return 0;  // the first process reports this block's fault with the others'
  }
  if (tty) {
    std::fprintf(stderr, "\n");
  }
  if (!st.ok()) {
    std::fprintf(stderr, "commprof export: %s\n", st.message().c_str());
    return 1;
  }
  if (!o.quiet) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr,
                 "commprof export: wrote %s: %u rank(s), %llu events (%llu slices, %llu instants), %llu flows, "
                 "%llu extra lane(s), %.1f MB in %.2f s\n",
                 display.c_str(), stats.ranks, static_cast<unsigned long long>(stats.events),
                 static_cast<unsigned long long>(stats.slices), static_cast<unsigned long long>(stats.instants),
                 static_cast<unsigned long long>(stats.flows), static_cast<unsigned long long>(stats.lanes_added),
                 static_cast<double>(stats.bytes) / 1e6, secs);
    if (stats.cut) {
      std::fprintf(stderr,
                   "commprof export: the cut kept %s to %s after the origin; %llu event(s) outside it left out\n",
                   FormatCutTime(stats.cut_from_ns).c_str(), FormatCutTime(stats.cut_to_ns).c_str(),
                   static_cast<unsigned long long>(stats.events_cut));
    }
  }
  // Exit 1 when some ranks could not be read, although the trace of the others was written.
  return info.faults.empty() ? 0 : 1;
}

}  // namespace

Runner AddExportCommand(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "export",
      "Write one merged timeline of the job as a Chrome/Perfetto JSON trace (--format chrome) or a Perfetto "
      "protobuf trace (--format perfetto: about a quarter of the bytes, written faster), or its memory timeline. "
      "The timeline has one process per rank, one track "
      "per thread or GPU stream (split into lanes where slices overlap partially), times aligned across ranks "
      "(microseconds, ns precision, from the earliest event), flow arrows from the last rank to arrive at each "
      "matched blocking collective to every other participant, and wait/sequence/bytes args on collectives. "
      "Open the file in https://ui.perfetto.dev or chrome://tracing. Memory: one rank's events at a time. "
      "--ranks, --time-range and --steps cut a job too large to view whole. "
      "Layout: docs/chrome-trace.md, docs/perfetto-trace.md. With --format memory-html or memory-json, the memory "
      "timeline instead: "
      "per rank and device the bytes in use over time from the allocation/free records, stacked by memory "
      "kind, every rank on one time axis, each peak with the allocations live then (largest 10 named); "
      "memory: one rank's alloc/free records at a time plus the series (docs/memory-timeline.md).");
  sub->add_option("file", o->path, "commprof HDF5 file")->required();
  sub->add_option("--format", o->format,
                  "chrome: the Trace Event Format JSON trace; perfetto: Perfetto's protobuf trace (.pftrace); "
                  "memory-html: the memory timeline page (per rank and "
                  "device, bytes in use stacked by memory kind, peaks with what was live); memory-json: the same "
                  "as JSON (docs/memory-timeline.md)")
      ->type_name("chrome|perfetto|memory-html|memory-json")
      ->capture_default_str();
  sub->add_option(
      "-o,--output", o->output,
      "output file (default: FILE without .h5 + .trace.json, .pftrace, .memory.html or .memory.json; '-' for "
      "standard output, not for memory-html); overwritten");
  sub->add_option("--max-points", o->max_points,
                  "memory formats: at most N points per chart, keeping each time bucket's first, last, lowest and "
                  "highest (0: every record, else at least 4; default 1000 for memory-html, 0 for memory-json)");
  sub->add_option("--ranks", o->ranks,
                  "export only these ranks, e.g. 0,3 or 0-3,8 (flows to ranks left out are "
                  "dropped; the time origin is the earliest event of the ranks exported)")
      ->each([o](const std::string&) { o->ranks_given = true; });
  sub->add_option("--time-range", o->time_range,
                  "chrome, perfetto: keep only what overlaps FROM:TO, in ns since the trace's time 0 (the earliest "
                  "event of the ranks exported) with units ns, us, ms or s, e.g. 2s:3.5s, 120ms: or :500ms; times "
                  "stay those of the whole trace");
  sub->add_option("--steps", o->steps,
                  "chrome, perfetto: keep only steps A to B (e.g. 5 or 5-8): from the earliest start of step A on "
                  "an exported rank to the latest end of step B (not with --time-range)");
  sub->add_flag("-q,--quiet", o->quiet, "no progress or summary on stderr");
  AddWindowOption(sub, o->window);
  return [o] {
    return RunAnalysisCommand("export", [&o](AnalysisWorld* world, bool tell) { return ExportOf(*o, world, tell); });
  };
}

}  // namespace commprof::cli
