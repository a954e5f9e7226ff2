// The `/analysis` group (docs/file-format.md "The analysis group"), stated once: each table is
// one X-macro list of its columns (type, name, meaning), which expands into the row struct the
// writer fills and into the column list the HDF5 compound type and the docs check derive from.
// Adding a column is one line here plus its row in docs/file-format.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/schema/columns.h"
#include "core/schema/file_schema.h"

namespace commprof::schema {

inline constexpr uint64_t kAnalysisVersion = 2;

// Fixed-length, NUL-terminated text of the `collectives` table.
using OpTypeText = char[24];

#define COMMPROF_ANALYSIS_RANK_COLUMNS(X, S)                                                                       \
  X(S, uint32_t, rank, "world rank")                                                                               \
  X(S, uint64_t, instances, "complete collective instances (blocking and non-blocking) it took part in")           \
  X(S, int64_t, comm_time_ns, "time inside those collectives")                                                     \
  X(S, int64_t, wait_time_ns, "of which waiting for the last arriver")                                             \
  X(S, double, wait_share, "`wait_time_ns / comm_time_ns` (0 without collectives)")                                \
  X(S, uint64_t, times_last, "instances in which it arrived last (the straggler)")                                 \
  X(S, double, expected_last, "instances it would arrive last in by chance: the sum of 1 / participants")          \
  X(S, int64_t, delay_caused_ns, "delay it alone caused in the instances where it was last")                       \
  X(S, int64_t, wait_imposed_ns, "the others' waits in the instances where it was last")                           \
  X(S, int64_t, transfer_time_ns, "its time in those collectives after the last arrival")                          \
  X(S, uint64_t, p2p_sent, "send operations to a real peer (Send, Isend, Sendrecv)")                               \
  X(S, uint64_t, p2p_received, "receive operations from a real peer (Recv, Irecv)")                                \
  X(S, int64_t, p2p_time_ns, "blocking point-to-point calls plus the Wait/Test calls that completed its requests") \
  X(S, int64_t, late_sender_wait_ns, "Late Sender wait charged to it as a receiver")                               \
  X(S, int64_t, late_receiver_wait_ns, "Late Receiver wait charged to it as a sender")                             \
  X(S, double, overlap, "share of its communication time overlapped by computation (0 without communication)")     \
  X(S, int64_t, exposed_comm_ns, "its communication time not overlapped by computation")                           \
  X(S, int64_t, span_ns, "from its first to its last event of any kind")                                           \
  X(S, int64_t, compute_ns, "of the span, time computing ([metrics.md](metrics.md))")                              \
  X(S, int64_t, memory_ns, "of the span, time in memory operations")                                               \
  X(S, int64_t, idle_ns, "of the span, time in none of these")

#define COMMPROF_ANALYSIS_COLLECTIVE_COLUMNS(X, S)                              \
  X(S, OpTypeText, type, "the collective type's short name (`allreduce`, ...)") \
  X(S, uint8_t, op, "its `subtype` value")                                      \
  X(S, uint64_t, count, "complete instances")                                   \
  X(S, uint64_t, bytes, "mean bytes per instance")                              \
  X(S, double, mean_duration_ns, "mean time from first arrival to last end")    \
  X(S, double, mean_wait_ns, "mean wait per rank")                              \
  X(S, double, mean_transfer_ns, "mean time after the last arrival")            \
  X(S, int64_t, skew_p50_ns, "median arrival skew")                             \
  X(S, int64_t, skew_p99_ns, "99th percentile of the arrival skew")             \
  X(S, double, algbw_gbps, "mean algorithm bandwidth, GB/s")                    \
  X(S, double, busbw_gbps, "mean bus bandwidth, GB/s")

#define COMMPROF_ANALYSIS_INSTANCE_COLUMNS(X, S)                                         \
  X(S, uint64_t, comm_id, "communicator id")                                             \
  X(S, uint64_t, seq, "collective sequence number on it")                                \
  X(S, uint8_t, op, "its `subtype` value")                                               \
  X(S, uint8_t, complete, "1: every member arrived; 0: incomplete")                      \
  X(S, uint32_t, participants, "ranks seen (its rows in `arrivals`)")                    \
  X(S, uint32_t, comm_size, "communicator size (0: unknown)")                            \
  X(S, uint64_t, bytes, "bytes of the operation")                                        \
  X(S, int64_t, first_arrival_ns, "earliest start")                                      \
  X(S, int64_t, last_arrival_ns, "latest start")                                         \
  X(S, int64_t, skew_ns, "`last_arrival_ns - first_arrival_ns`")                         \
  X(S, int64_t, last_end_ns, "latest end")                                               \
  X(S, int64_t, straggler_rank, "world rank of the straggler (-1: none, or incomplete)") \
  X(S, int64_t, delay_caused_ns, "delay the straggler alone caused (0 when incomplete)") \
  X(S, int64_t, total_wait_ns, "sum of the ranks' waits")                                \
  X(S, int64_t, transfer_ns, "time from the last arrival to the last end")               \
  X(S, double, algbw_gbps, "algorithm bandwidth, GB/s")                                  \
  X(S, double, busbw_gbps, "bus bandwidth, GB/s")                                        \
  X(S, uint64_t, first_arrival_row, "row in `arrivals` of its first participant")

#define COMMPROF_ANALYSIS_ARRIVAL_COLUMNS(X, S)                       \
  X(S, uint64_t, instance, "row in `instances`")                      \
  X(S, uint32_t, rank, "world rank")                                  \
  X(S, int32_t, local_rank, "rank in the communicator (-1: unknown)") \
  X(S, int64_t, start_ns, "its start")                                \
  X(S, int64_t, end_ns, "its end")                                    \
  X(S, int64_t, wait_ns, "its wait for the last arriver")             \
  X(S, int64_t, transfer_ns, "its time after the last arrival")

#define COMMPROF_ANALYSIS_MEMORY_COLUMNS(X, S)                                    \
  X(S, uint32_t, rank, "world rank")                                              \
  X(S, uint16_t, device, "GPU ordinal")                                           \
  X(S, uint8_t, memory_kind, "`memory_kind` value (see Enum values)")             \
  X(S, int64_t, time_ns, "time of the allocation or free record (aligned clock)") \
  X(S, int64_t, bytes_in_use, "bytes in use after the record")                    \
  X(S, int64_t, delta_bytes, "the record's change: positive for an allocation, negative for a free")

#define COMMPROF_ANALYSIS_STEP_COLUMNS(X, S)                                                               \
  X(S, uint64_t, step, "step number (the `STEP` events' `seq`)")                                           \
  X(S, uint32_t, rank, "world rank")                                                                       \
  X(S, int64_t, window, "capture window the step began in, on the rank that began it first (-1: none)")    \
  X(S, int64_t, start_ns, "the step's earliest start over its ranks")                                      \
  X(S, int64_t, duration_ns, "the step's duration on this rank (its own clock)")                           \
  X(S, int64_t, comm_ns, "this rank's blocked time in the complete collectives it arrived at in the step") \
  X(S, int64_t, wait_ns, "of which waiting for other ranks")                                               \
  X(S, int64_t, delay_cost_ns, "delay cost charged to this rank as root cause in the step")                \
  X(S, int64_t, straggler_rank, "the step's straggler (-1: none; the same on every row of the step)")
// The `/stacks` table (docs/file-format.md "The stacks table"): the call-site stacks of
// `commprof run --stacks`, symbolized when the file is finalized. A root dataset, not part of
// `/analysis`; text columns are fixed-length and NUL-terminated (longer text is cut).
using FrameText = char[256];
#define COMMPROF_STACK_COLUMNS(X, S)                                                                          \
  X(S, uint32_t, rank, "world rank")                                                                          \
  X(S, uint32_t, stack_id, "the stack's id in the rank (CALL_SITE `seq`)")                                    \
  X(S, uint32_t, depth, "0: the call site (innermost frame outside commprof, MPI, NCCL); 1: its caller, ...") \
  X(S, FrameText, function, "function name (demangled), or `??`")                                             \
  X(S, FrameText, file, "source file, empty without debug information")                                       \
  X(S, uint32_t, line, "source line (0: unknown)")                                                            \
  X(S, FrameText, module, "path of the executable or shared library")                                         \
  X(S, uint64_t, address, "address in the module relative to its load bias (`addr2line -e MODULE` takes it)")

// The row structs: exactly the members listed above, in that order.
struct RankRow {
  COMMPROF_ANALYSIS_RANK_COLUMNS(COMMPROF_SCHEMA_MEMBER, RankRow)
};
struct CollectiveRow {
  COMMPROF_ANALYSIS_COLLECTIVE_COLUMNS(COMMPROF_SCHEMA_MEMBER, CollectiveRow)
};
struct InstanceRow {
  COMMPROF_ANALYSIS_INSTANCE_COLUMNS(COMMPROF_SCHEMA_MEMBER, InstanceRow)
};
struct ArrivalRow {
  COMMPROF_ANALYSIS_ARRIVAL_COLUMNS(COMMPROF_SCHEMA_MEMBER, ArrivalRow)
};
struct MemoryRow {
  COMMPROF_ANALYSIS_MEMORY_COLUMNS(COMMPROF_SCHEMA_MEMBER, MemoryRow)
};
struct StepRankRow {
  COMMPROF_ANALYSIS_STEP_COLUMNS(COMMPROF_SCHEMA_MEMBER, StepRankRow)
};
struct StackRow {
  COMMPROF_STACK_COLUMNS(COMMPROF_SCHEMA_MEMBER, StackRow)
};

// One `/analysis` table: its dataset name, what a row is, and its columns.
struct TableInfo {
  const char* name;
  const char* row;  // one row per ...
  size_t row_size;
  std::span<const Column> columns;
};

template <typename Row>
struct TableOf;  // specialized below: TableOf<RankRow>::kColumns, ...

#define COMMPROF_SCHEMA_TABLE(Row, LIST, dataset, row_doc)                    \
  template <>                                                                 \
  struct TableOf<Row> {                                                       \
    static constexpr const char* kName = dataset;                             \
    static constexpr const char* kRowDoc = row_doc;                           \
    static constexpr Column kColumns[] = {LIST(COMMPROF_SCHEMA_COLUMN, Row)}; \
  };

COMMPROF_SCHEMA_TABLE(RankRow, COMMPROF_ANALYSIS_RANK_COLUMNS, "ranks", "rank")
COMMPROF_SCHEMA_TABLE(CollectiveRow, COMMPROF_ANALYSIS_COLLECTIVE_COLUMNS, "collectives", "collective type")
COMMPROF_SCHEMA_TABLE(InstanceRow, COMMPROF_ANALYSIS_INSTANCE_COLUMNS, "instances",
                      "collective instance (blocking or non-blocking), complete or not, by first arrival")
COMMPROF_SCHEMA_TABLE(ArrivalRow, COMMPROF_ANALYSIS_ARRIVAL_COLUMNS, "arrivals", "rank in an instance")
COMMPROF_SCHEMA_TABLE(MemoryRow, COMMPROF_ANALYSIS_MEMORY_COLUMNS, "memory",
                      "allocation or free record, by rank, device, memory kind, then time")
COMMPROF_SCHEMA_TABLE(StepRankRow, COMMPROF_ANALYSIS_STEP_COLUMNS, "steps",
                      "rank in a step (the ranks that marked it), by step number, then rank")
COMMPROF_SCHEMA_TABLE(StackRow, COMMPROF_STACK_COLUMNS, "stacks", "frame of a unique stack, by rank, stack, depth")

#undef COMMPROF_SCHEMA_TABLE

template <typename Row>
constexpr TableInfo TableInfoOf() {
  return {TableOf<Row>::kName, TableOf<Row>::kRowDoc, sizeof(Row), TableOf<Row>::kColumns};
}

// Every table, in the order the group lists them.
inline constexpr TableInfo kAnalysisTables[] = {
    TableInfoOf<RankRow>(),    TableInfoOf<CollectiveRow>(), TableInfoOf<InstanceRow>(),
    TableInfoOf<ArrivalRow>(), TableInfoOf<MemoryRow>(),     TableInfoOf<StepRankRow>(),
};

inline constexpr const char* kReportJsonDataset = "report_json";  // scalar string: the JSON report

// The group's attributes: the report's headline figures.
#define COMMPROF_ANALYSIS_ATTRS(X)                                                                          \
  X(kAnalysisVersionAttr, "analysis_version", uint64_t, "version of this group's layout (2)")               \
  X(kReportSchemaVersion, "report_schema_version", uint64_t, "the JSON schema version of `report_json`")    \
  X(kMatched, "matched", uint64_t, "complete collective instances, blocking and non-blocking")              \
  X(kIncomplete, "incomplete", uint64_t, "instances missing a rank")                                        \
  X(kSkewThresholdNs, "skew_threshold_ns", int64_t, "skew under which an instance has no straggler")        \
  X(kClockViolations, "clock_violations", uint64_t, "instances violating the clock condition")              \
  X(kStragglers, "stragglers", uint64_t, "ranks the verdict names")                                         \
  X(kStragglerRank, "straggler_rank", int64_t, "the named rank with the largest delay cost (-1: none)")     \
  X(kStragglerShare, "straggler_share", double, "its share of the job's attributed waiting")                \
  X(kStragglerDelayCostNs, "straggler_delay_cost_ns", int64_t, "its delay cost")                            \
  X(kStragglerPattern, "straggler_pattern", std::string, "`persistent`, `periodic`, `transient`, or empty") \
  X(kStragglerCause, "straggler_cause", std::string, "`compute`, `transfer`, or empty")                     \
  X(kP2pMatched, "p2p_matched", uint64_t, "matched point-to-point messages")                                \
  X(kP2pUnmatchedSends, "p2p_unmatched_sends", uint64_t, "sends without a matching receive")                \
  X(kP2pUnmatchedRecvs, "p2p_unmatched_recvs", uint64_t, "receives without a matching send")                \
  X(kP2pLateSenderWaitNs, "p2p_late_sender_wait_ns", int64_t, "Late Sender wait of the whole job")          \
  X(kP2pLateReceiverWaitNs, "p2p_late_receiver_wait_ns", int64_t, "Late Receiver wait of the whole job")

namespace analysis_attr {
COMMPROF_ANALYSIS_ATTRS(COMMPROF_SCHEMA_ATTR)
}
inline constexpr AttrInfo kAnalysisAttrs[] = {COMMPROF_ANALYSIS_ATTRS(COMMPROF_SCHEMA_ATTR_INFO)};

}  // namespace commprof::schema
