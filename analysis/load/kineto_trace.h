// One Kineto trace file turned into commprof records (docs/kineto-import.md).
//
// Purpose: read a torch.profiler Chrome trace in one streaming pass (kineto_json_stream.h) and
// produce the rank's commprof_event records, its string table and what the file says about the
// rank (distributedInfo, process groups, time base), plus counts of everything skipped or refused.
// Concepts:
//   - *file time*: ns as written, exactly: `ts` µs text parsed digit by digit into integer ns (no
//     double, no HTA ceil/floor rounding). Old files hold Unix-epoch µs (base 0); new ones µs
//     relative to `baseTimeNanoseconds`, which Kineto writes after the events, so the base is
//     only applied by the importer once the whole file is read (`base_ns`).
//   - *communication kernel*: a GPU kernel classified as communication (kineto_classify.h); each
//     gets a kind-11 record and a kind-17 NCCL_COLLECTIVE record whose metadata comes from the
//     kernel's own args, then from the enclosing `record_param_comms` op or `nccl:*` annotation
//     (found through the kernel's `External id`, or its launch's `correlation` and the launching
//     thread), then from the kernel name.
// Operation: events are mapped one by one while the text streams by (no event text is kept);
// communication kernels and the CPU spans that may describe them are remembered (a few per
// collective), and Finish() resolves their metadata, numbers each (process group, collective
// type) in GPU start order (or takes `Seq` when the trace has it), adds the membership records of
// the rank's process groups and sorts the records by start.
// A bad event (missing ph/name/ts/dur, negative duration, wrong type) is refused with a message
// naming the file, the traceEvents index and the field; the rest of the file is still read.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "commprof/event.h"
#include "core/status.h"

namespace commprof::kineto {

struct ProcessGroup {
  std::string name;  // pg_name ("0"): the id every rank agrees on
  std::string desc;  // pg_desc ("default_pg")
  std::vector<uint32_t> ranks;
};

struct TraceCounts {
  uint64_t events_read = 0;          // elements of traceEvents
  uint64_t records = 0;              // commprof records made (collective and membership records included)
  uint64_t flows_skipped = 0;        // ph s/f/t: CPU->GPU links come from `correlation` instead
  uint64_t metadata_skipped = 0;     // ph M (process/thread names and sort order)
  uint64_t counters_skipped = 0;     // ph C
  uint64_t trace_spans_skipped = 0;  // cat Trace: the profiler's own window
  uint64_t unknown_category = 0;     // kept as kind OTHER, listed in unknown_categories
  uint64_t rejected = 0;             // refused events (problems holds the first messages)
  uint64_t comm_kernels = 0;
  uint64_t comm_kernels_without_metadata = 0;  // collective type from the kernel name only
};

// The largest world size the importer takes. Every rank below the world size that no file holds
// becomes a `missing` group in the output file (about 1 KB and a millisecond each), so a world size
// or rank from a damaged or hostile trace (1000000, 4e9) would cost minutes and gigabytes for
// nothing: such a file is refused, naming the field.
inline constexpr uint32_t kMaxImportWorldSize = 65536;

struct RankTrace {
  std::string path;
  std::optional<uint32_t> rank;                    // distributedInfo.rank
  uint32_t world_size = 0;                         // distributedInfo.world_size (0: not given)
  std::vector<ProcessGroup> groups;                // distributedInfo.pg_config
  std::optional<int64_t> base_ns;                  // baseTimeNanoseconds (new dialect)
  std::vector<commprof_event> events;              // start_ns/end_ns: file time (see above) as int64 bits
  std::vector<std::string> strings;                // name_id indexes this
  int64_t min_ns = INT64_MAX, max_ns = INT64_MIN;  // file time span of the records
  TraceCounts counts;
  std::map<std::string, uint64_t> unknown_categories;
  std::vector<std::string> problems;  // refused events, first kMaxProblems
  Status read_status;                 // not Ok: the file's text broke off (truncated, ...); events before it are kept
};

inline constexpr size_t kMaxProblems = 20;

// Reads one file. Fails only when nothing usable came out of it (cannot open, not a Kineto trace
// object); a file that breaks off later is returned with read_status set.
Result<RankTrace> ReadKinetoTrace(const std::string& path,
                                  const std::function<void(uint64_t compressed_bytes)>& progress = {});

// Exact µs text -> ns ("12.3456" -> 12346, half-up on the fourth decimal). False on text that is
// not a JSON number or whose value overflows int64 ns.
bool ParseMicrosToNs(std::string_view text, int64_t& ns);

}  // namespace commprof::kineto
