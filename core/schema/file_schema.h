// The layout of a commprof HDF5 file, stated once: the names and types of every group, dataset
// and attribute the writer (aggregator/hdf5/hdf5_writer.cc, analysis/report/analysis_group.cc)
// creates and the reader (analysis/load/profile_reader.cc) opens. Neither spells a name itself.
// docs/file-format.md describes the same layout; schema_doc_test fails when the two differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "commprof/event.h"
#include "core/clock_model.h"
#include "core/schema/columns.h"

namespace commprof::schema {

inline constexpr const char* kFormatName = "commprof";
inline constexpr uint32_t kFormatVersion = 1;

// ---- attributes -------------------------------------------------------------------------------

enum class AttrType : uint8_t { kString, kUint64, kInt64, kFloat64 };
const char* AttrTypeName(AttrType type);  // the docs' spelling: str, uint64, int64, float64

template <typename T>
constexpr AttrType AttrTypeOf() {
  if constexpr (std::is_same_v<T, std::string>) {
    return AttrType::kString;
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return AttrType::kUint64;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return AttrType::kInt64;
  } else {
    static_assert(std::is_same_v<T, double>, "attributes are str, uint64, int64 or float64");
    return AttrType::kFloat64;
  }
}

// A scalar attribute of value type T (core/h5/h5_util.h reads and writes it).
template <typename T>
struct Attr {
  using Value = T;
  const char* name;
};

struct AttrInfo {
  const char* name;
  AttrType type;
  const char* doc;  // nullptr: documented in prose in docs/file-format.md, not checked word for word
};

#define COMMPROF_SCHEMA_ATTR(id, name, type, doc) inline constexpr Attr<type> id{name};
#define COMMPROF_SCHEMA_ATTR_INFO(id, name, type, doc) AttrInfo{name, AttrTypeOf<type>(), doc},

// The root group's attributes (the job).
#define COMMPROF_ROOT_ATTRS(X)                                           \
  X(kFormat, "format", std::string, nullptr)                             \
  X(kFormatVersion, "format_version", uint64_t, nullptr)                 \
  X(kJobId, "job_id", std::string, nullptr)                              \
  X(kCommandLine, "command_line", std::string, nullptr)                  \
  X(kWorldSize, "world_size", uint64_t, nullptr)                         \
  X(kStartEpochNs, "start_epoch_ns", uint64_t, nullptr)                  \
  X(kFinalized, "finalized", uint64_t, nullptr)                          \
  X(kRanksMissing, "ranks_missing", std::string, nullptr)                \
  X(kIngestQueuePeakBytes, "ingest_queue_peak_bytes", uint64_t, nullptr) \
  X(kIngestReadPauses, "ingest_read_pauses", uint64_t, nullptr)          \
  X(kIncarnation, "incarnation", uint64_t, nullptr)                      \
  X(kRestartFiles, "restart_files", std::string, nullptr)                \
  X(kShard, "shard", uint64_t, nullptr)                                  \
  X(kUnjoinedShards, "unjoined_shards", std::string, nullptr)

// The attributes the writer itself gives /ranks/<rank>; the collector's counters (stored under
// the names its bye sent) come on top and are not part of the schema.
#define COMMPROF_RANK_ATTRS(X)                                       \
  X(kRank, "rank", uint64_t, nullptr)                                \
  X(kHost, "host", std::string, nullptr)                             \
  X(kPid, "pid", uint64_t, nullptr)                                  \
  X(kStartSteadyNs, "start_steady_ns", uint64_t, nullptr)            \
  X(kStartUtcNs, "start_utc_ns", uint64_t, nullptr)                  \
  X(kStatus, "status", std::string, nullptr)                         \
  X(kClockOffsetNs, "clock_offset_ns", int64_t, nullptr)             \
  X(kClockDriftPpm, "clock_drift_ppm", double, nullptr)              \
  X(kClockErrorBoundNs, "clock_error_bound_ns", int64_t, nullptr)    \
  X(kClockMethod, "clock_method", std::string, nullptr)              \
  X(kClockAnchorLocalNs, "clock_anchor_local_ns", uint64_t, nullptr) \
  X(kEndReason, "end_reason", std::string, nullptr)                  \
  X(kDroppedEvents, "dropped_events", uint64_t, nullptr)             \
  X(kBatchesLost, "batches_lost", uint64_t, nullptr)                 \
  X(kEventsWritten, "events_written", uint64_t, nullptr)

namespace root_attr {
COMMPROF_ROOT_ATTRS(COMMPROF_SCHEMA_ATTR)
}
namespace rank_attr {
COMMPROF_RANK_ATTRS(COMMPROF_SCHEMA_ATTR)
}
inline constexpr AttrInfo kRootAttrs[] = {COMMPROF_ROOT_ATTRS(COMMPROF_SCHEMA_ATTR_INFO)};
inline constexpr AttrInfo kRankAttrs[] = {COMMPROF_RANK_ATTRS(COMMPROF_SCHEMA_ATTR_INFO)};

// Rank attributes that identify the rank or describe its clock; every other integer attribute of
// a rank group is a counter (a newer collector's counters then show up without a reader change).
inline constexpr const char* kRankMetadataAttrs[] = {
    rank_attr::kRank.name,
    rank_attr::kPid.name,
    rank_attr::kStartSteadyNs.name,
    rank_attr::kStartUtcNs.name,
    rank_attr::kClockOffsetNs.name,
    rank_attr::kClockErrorBoundNs.name,
    rank_attr::kClockAnchorLocalNs.name,
};

// ---- groups and datasets ----------------------------------------------------------------------

inline constexpr const char* kRanksGroup = "ranks";                   // /ranks/<decimal rank>
inline constexpr const char* kEventsDataset = "events";               // 1-D, commprof_event records
inline constexpr const char* kStringsDataset = "strings";             // 1-D, variable-length UTF-8
inline constexpr const char* kClockPointsDataset = "clock_points";    // [n, 3] int64: ClockPoint
inline constexpr const char* kClockSamplesDataset = "clock_samples";  // [m, 3] uint64: ClockSample
inline constexpr const char* kAnalysisGroup = "analysis";             // core/schema/analysis_tables.h
// Scalar, fixed-size NUL-terminated string, contiguous, allocated when the file is created:
// "writing" until the writer finishes, then "complete", or "failed: REASON; N events not stored"
// when a write failed (docs/file-format.md, Write status).
inline constexpr const char* kWriteStatusDataset = "write_status";
inline constexpr size_t kWriteStatusSize = 256;
inline constexpr const char* kWriteStatusWriting = "writing";
inline constexpr const char* kWriteStatusComplete = "complete";
inline constexpr const char* kWriteStatusFailedPrefix = "failed: ";
// The N of "...; N events not stored" in a failure message (a failed write_status, a relay's
// failure); 0 without one.
inline uint64_t EventsNotStoredIn(const std::string& text) {
  const size_t end = text.find(" events not stored");
  if (end == std::string::npos) {
    return 0;
  }
  size_t begin = end;
  while (begin > 0 && text[begin - 1] >= '0' && text[begin - 1] <= '9') {
    --begin;
  }
  if (end - begin > 19) {  // more digits than a uint64_t surely holds: not a count we wrote
    return 0;
  }
  uint64_t n = 0;
  for (size_t i = begin; i < end; ++i) {
    n = n * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  return n;
}
// Groups for ranks that never said hello are created while there are at most this many of them,
// or as many as the ranks present; beyond that only `ranks_missing` lists them.
inline constexpr uint64_t kMissingRankGroups = 1024;

// Records per chunk. HDF5 allocates a whole chunk as soon as one record is in it. The events
// table is compressed by default, and the zero tail of a partly filled chunk compresses to almost
// nothing, so its 64 KiB chunk (1024 records) costs a rank little on disk (uncompressed, 64 KiB);
// it compressed recorded MPI events to 6.1 bytes each against 7.7 with 256 records, at the same
// writer speed (bench/README.md#compression). The writer holds one such chunk per rank in memory
// until it fills. Strings and clock samples stay uncompressed: small chunks keep them small.
inline constexpr uint64_t kEventChunk = 1024;
inline constexpr uint64_t kStringChunk = 64;        // 1 KiB of string references
inline constexpr uint64_t kClockSampleChunk = 128;  // 3 KiB

// A column of a struct that is not declared by an X-macro (the event record, the clock rows): the
// type comes from the member's declaration.
#define COMMPROF_SCHEMA_FIELD(Struct, name, doc)                                                \
  ::commprof::schema::Column {                                                                  \
#name, ::commprof::schema::ColumnTypeOf < std::remove_cvref_t < decltype(Struct::name)>>(), \
        offsetof(Struct, name), sizeof(Struct::name), doc                                       \
  }

// The `events` compound type: exactly the bytes of struct commprof_event.
inline constexpr Column kEventColumns[] = {
    COMMPROF_SCHEMA_FIELD(commprof_event, start_ns, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, end_ns, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, bytes, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, comm_id, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, seq, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, correlation, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, name_id, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, thread_id, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, peer, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, device, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, kind, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, subtype, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, datatype, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, reduce_op, nullptr),
    COMMPROF_SCHEMA_FIELD(commprof_event, flags, nullptr),
};

// The columns of the two clock tables: 2-D arrays of one integer type, a row per struct.
inline constexpr Column kClockPointColumns[] = {
    COMMPROF_SCHEMA_FIELD(ClockPoint, local_ns, "the rank's local time of the epoch"),
    COMMPROF_SCHEMA_FIELD(ClockPoint, offset_ns, "reference clock minus local clock there"),
    COMMPROF_SCHEMA_FIELD(ClockPoint, half_rtt_ns, "half the round trip of the sample taken: the error bound"),
};
inline constexpr Column kClockSampleColumns[] = {
    COMMPROF_SCHEMA_FIELD(ClockSample, local_send_ns, "local time the ping left"),
    COMMPROF_SCHEMA_FIELD(ClockSample, reference_ns, "the reference clock when it answered"),
    COMMPROF_SCHEMA_FIELD(ClockSample, local_recv_ns, "local time the pong arrived"),
};

}  // namespace commprof::schema
