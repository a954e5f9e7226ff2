// The enums stored in a commprof file, each stated once with its names: the value, the C name
// from include/commprof/event.h and the short name that reports, traces and `commprof info` print.
// docs/file-format.md lists the same tables; schema_doc_test fails when the two differ.
#pragma once

#include <cstdint>
#include <span>

namespace commprof::schema {

struct EnumEntry {
  uint32_t value;
  const char* c_name;  // the identifier in include/commprof/event.h (or CUPTI's, for memory kinds)
  const char* name;    // the short name; nullptr where the file format gives none
};

// `subtype` values (enum commprof_op_type) carry two more names.
struct OpEntry {
  uint32_t value;
  const char* c_name;
  const char* name;       // lower case: report, trace and JSON
  const char* canonical;  // NCCL's spelling, given to imported collectives; nullptr: "Collective"
  bool collective;        // a collective operation (the report's per-type tables list only these)
};

std::span<const EnumEntry> Kinds();         // enum commprof_kind, without the bound COUNT_
std::span<const OpEntry> OpTypes();         // enum commprof_op_type
std::span<const EnumEntry> Datatypes();     // enum commprof_datatype
std::span<const EnumEntry> ReduceOps();     // enum commprof_reduce_op
std::span<const EnumEntry> EventFlags();    // enum commprof_event_flags (values are bits)
std::span<const EnumEntry> MemoryKinds();   // CUpti_ActivityMemoryKind as stored in subtype/datatype/reduce_op
std::span<const EnumEntry> RankStatuses();  // the rank groups' `status` attribute

// Short names; values the schema does not know get the fallback in the comment.
const char* KindName(uint8_t kind);               // "unknown"
const char* OpName(uint8_t op);                   // any op type; "other"
const char* CollectiveOpName(uint8_t op);         // collectives only; "other" for every other value
const char* CanonicalOpName(uint8_t op);          // "Collective"
const char* MemoryKindName(uint8_t memory_kind);  // "unknown"

// How a rank's stream stands; stored by name in the `status` attribute of /ranks/<rank>.
enum class RankStatus : uint8_t { kConnected, kComplete, kDisconnected, kCorrupt, kMissing };
const char* RankStatusName(RankStatus status);

}  // namespace commprof::schema
