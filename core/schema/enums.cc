#include "core/schema/enums.h"

#include "commprof/event.h"

namespace commprof::schema {
namespace {

// The value and its C identifier come from one token, so the table cannot misspell either.
#define COMMPROF_ENTRY(c_id, short_name) \
  EnumEntry { c_id, #c_id, short_name }

constexpr EnumEntry kKinds[] = {
    COMMPROF_ENTRY(COMMPROF_KIND_NONE, nullptr),  // never stored: no name
    COMMPROF_ENTRY(COMMPROF_KIND_MPI_INIT, "mpi_init"),
    COMMPROF_ENTRY(COMMPROF_KIND_MPI_FINALIZE, "mpi_finalize"),
    COMMPROF_ENTRY(COMMPROF_KIND_MPI_COLLECTIVE, "mpi_collective"),
    COMMPROF_ENTRY(COMMPROF_KIND_MPI_P2P, "mpi_p2p"),
    COMMPROF_ENTRY(COMMPROF_KIND_MPI_WAIT, "mpi_wait"),
    COMMPROF_ENTRY(COMMPROF_KIND_MPI_COMM, "mpi_comm"),
    COMMPROF_ENTRY(COMMPROF_KIND_USER_RANGE, "user_range"),
    COMMPROF_ENTRY(COMMPROF_KIND_USER_MARK, "user_mark"),
    COMMPROF_ENTRY(COMMPROF_KIND_STEP, "step"),
    COMMPROF_ENTRY(COMMPROF_KIND_COMPUTE_KERNEL, "compute_kernel"),
    COMMPROF_ENTRY(COMMPROF_KIND_COMM_KERNEL, "comm_kernel"),
    COMMPROF_ENTRY(COMMPROF_KIND_MEMCPY, "memcpy"),
    COMMPROF_ENTRY(COMMPROF_KIND_MEMSET, "memset"),
    COMMPROF_ENTRY(COMMPROF_KIND_MEM_ALLOC, "mem_alloc"),
    COMMPROF_ENTRY(COMMPROF_KIND_MEM_FREE, "mem_free"),
    COMMPROF_ENTRY(COMMPROF_KIND_NCCL_API, "nccl_api"),
    COMMPROF_ENTRY(COMMPROF_KIND_NCCL_COLLECTIVE, "nccl_collective"),
    COMMPROF_ENTRY(COMMPROF_KIND_NVTX_RANGE, "nvtx_range"),
    COMMPROF_ENTRY(COMMPROF_KIND_NVTX_MARK, "nvtx_mark"),
    COMMPROF_ENTRY(COMMPROF_KIND_SYNC, "sync"),
    COMMPROF_ENTRY(COMMPROF_KIND_NCCL_PROXY_OP, "nccl_proxy_op"),
    COMMPROF_ENTRY(COMMPROF_KIND_NCCL_PROXY_STEP, "nccl_proxy_step"),
    COMMPROF_ENTRY(COMMPROF_KIND_GPU_OVERHEAD, "gpu_overhead"),
    COMMPROF_ENTRY(COMMPROF_KIND_CUDA_API, "cuda_api"),
    COMMPROF_ENTRY(COMMPROF_KIND_HOST_OP, "host_op"),
    COMMPROF_ENTRY(COMMPROF_KIND_HOST_ANNOTATION, "host_annotation"),
    COMMPROF_ENTRY(COMMPROF_KIND_GPU_ANNOTATION, "gpu_annotation"),
    COMMPROF_ENTRY(COMMPROF_KIND_PYTHON_FUNCTION, "python_function"),
    COMMPROF_ENTRY(COMMPROF_KIND_IMPORTED_OTHER, "imported_other"),
    COMMPROF_ENTRY(COMMPROF_KIND_WINDOW, "window"),
    COMMPROF_ENTRY(COMMPROF_KIND_CALL_SITE, "call_site"),
    COMMPROF_ENTRY(COMMPROF_KIND_STACK_FRAME, "stack_frame"),
};
static_assert(std::size(kKinds) == COMMPROF_KIND_COUNT_, "every kind below COMMPROF_KIND_COUNT_ needs an entry");

#define COMMPROF_OP(c_id, short_name, canonical, collective) \
  OpEntry { c_id, #c_id, short_name, canonical, collective }

constexpr OpEntry kOps[] = {
    COMMPROF_OP(COMMPROF_OP_NONE, nullptr, nullptr, false),
    COMMPROF_OP(COMMPROF_OP_BARRIER, "barrier", "Barrier", true),
    COMMPROF_OP(COMMPROF_OP_BCAST, "bcast", "Broadcast", true),
    COMMPROF_OP(COMMPROF_OP_REDUCE, "reduce", "Reduce", true),
    COMMPROF_OP(COMMPROF_OP_ALLREDUCE, "allreduce", "AllReduce", true),
    COMMPROF_OP(COMMPROF_OP_GATHER, "gather", "Gather", true),
    COMMPROF_OP(COMMPROF_OP_GATHERV, "gatherv", nullptr, true),
    COMMPROF_OP(COMMPROF_OP_SCATTER, "scatter", "Scatter", true),
    COMMPROF_OP(COMMPROF_OP_SCATTERV, "scatterv", nullptr, true),
    COMMPROF_OP(COMMPROF_OP_ALLGATHER, "allgather", "AllGather", true),
    COMMPROF_OP(COMMPROF_OP_ALLGATHERV, "allgatherv", nullptr, true),
    COMMPROF_OP(COMMPROF_OP_ALLTOALL, "alltoall", "AllToAll", true),
    COMMPROF_OP(COMMPROF_OP_ALLTOALLV, "alltoallv", nullptr, true),
    COMMPROF_OP(COMMPROF_OP_REDUCE_SCATTER, "reduce_scatter", "ReduceScatter", true),
    COMMPROF_OP(COMMPROF_OP_REDUCE_SCATTER_BLOCK, "reduce_scatter_block", nullptr, true),
    COMMPROF_OP(COMMPROF_OP_SCAN, "scan", nullptr, true),
    COMMPROF_OP(COMMPROF_OP_EXSCAN, "exscan", nullptr, true),
    COMMPROF_OP(COMMPROF_OP_SEND, "send", "Send", false),
    COMMPROF_OP(COMMPROF_OP_RECV, "recv", "Recv", false),
    COMMPROF_OP(COMMPROF_OP_SENDRECV, "sendrecv", "SendRecv", false),
    COMMPROF_OP(COMMPROF_OP_WAIT, "wait", nullptr, false),
    COMMPROF_OP(COMMPROF_OP_WAITALL, "waitall", nullptr, false),
    COMMPROF_OP(COMMPROF_OP_WAITANY, "waitany", nullptr, false),
    COMMPROF_OP(COMMPROF_OP_TEST, "test", nullptr, false),
    COMMPROF_OP(COMMPROF_OP_COMM_DUP, "comm_dup", nullptr, false),
    COMMPROF_OP(COMMPROF_OP_COMM_SPLIT, "comm_split", nullptr, false),
    COMMPROF_OP(COMMPROF_OP_COMM_CREATE, "comm_create", nullptr, false),
    COMMPROF_OP(COMMPROF_OP_NCCL_COMM_INIT, "nccl_comm_init", nullptr, false),
};

constexpr EnumEntry kDatatypes[] = {
    COMMPROF_ENTRY(COMMPROF_DT_NONE, nullptr),     COMMPROF_ENTRY(COMMPROF_DT_BYTE, nullptr),
    COMMPROF_ENTRY(COMMPROF_DT_CHAR, nullptr),     COMMPROF_ENTRY(COMMPROF_DT_INT8, nullptr),
    COMMPROF_ENTRY(COMMPROF_DT_UINT8, nullptr),    COMMPROF_ENTRY(COMMPROF_DT_INT16, nullptr),
    COMMPROF_ENTRY(COMMPROF_DT_UINT16, nullptr),   COMMPROF_ENTRY(COMMPROF_DT_INT32, nullptr),
    COMMPROF_ENTRY(COMMPROF_DT_UINT32, nullptr),   COMMPROF_ENTRY(COMMPROF_DT_INT64, nullptr),
    COMMPROF_ENTRY(COMMPROF_DT_UINT64, nullptr),   COMMPROF_ENTRY(COMMPROF_DT_FLOAT16, nullptr),
    COMMPROF_ENTRY(COMMPROF_DT_BFLOAT16, nullptr), COMMPROF_ENTRY(COMMPROF_DT_FLOAT32, nullptr),
    COMMPROF_ENTRY(COMMPROF_DT_FLOAT64, nullptr),  COMMPROF_ENTRY(COMMPROF_DT_LONG_DOUBLE, nullptr),
    COMMPROF_ENTRY(COMMPROF_DT_DERIVED, nullptr),  COMMPROF_ENTRY(COMMPROF_DT_OTHER, nullptr),
};

constexpr EnumEntry kReduceOps[] = {
    COMMPROF_ENTRY(COMMPROF_RED_NONE, nullptr),   COMMPROF_ENTRY(COMMPROF_RED_SUM, nullptr),
    COMMPROF_ENTRY(COMMPROF_RED_PROD, nullptr),   COMMPROF_ENTRY(COMMPROF_RED_MAX, nullptr),
    COMMPROF_ENTRY(COMMPROF_RED_MIN, nullptr),    COMMPROF_ENTRY(COMMPROF_RED_LAND, nullptr),
    COMMPROF_ENTRY(COMMPROF_RED_LOR, nullptr),    COMMPROF_ENTRY(COMMPROF_RED_BAND, nullptr),
    COMMPROF_ENTRY(COMMPROF_RED_BOR, nullptr),    COMMPROF_ENTRY(COMMPROF_RED_MAXLOC, nullptr),
    COMMPROF_ENTRY(COMMPROF_RED_MINLOC, nullptr), COMMPROF_ENTRY(COMMPROF_RED_AVG, nullptr),
    COMMPROF_ENTRY(COMMPROF_RED_USER, nullptr),
};

constexpr EnumEntry kFlags[] = {
    COMMPROF_ENTRY(COMMPROF_FLAG_NONBLOCKING, nullptr),    COMMPROF_ENTRY(COMMPROF_FLAG_INCOMPLETE, nullptr),
    COMMPROF_ENTRY(COMMPROF_FLAG_UNTRACKED_COMM, nullptr), COMMPROF_ENTRY(COMMPROF_FLAG_FROM_NVTX, nullptr),
    COMMPROF_ENTRY(COMMPROF_FLAG_RECV_HALF, nullptr),      COMMPROF_ENTRY(COMMPROF_FLAG_SIZELESS_TYPE, nullptr),
};

#undef COMMPROF_OP
#undef COMMPROF_ENTRY

// CUpti_ActivityMemoryKind (cupti_activity.h, CUDA 13.0): the collector stores CUPTI's values, so
// the names are CUPTI's too, without its CUPTI_ACTIVITY_MEMORY_KIND_ prefix.
constexpr EnumEntry kMemoryKinds[] = {
    {1, "PAGEABLE", "pageable"},
    {2, "PINNED", "pinned"},
    {3, "DEVICE", "device"},
    {4, "ARRAY", "array"},
    {5, "MANAGED", "managed"},
    {6, "DEVICE_STATIC", "device_static"},
    {7, "MANAGED_STATIC", "managed_static"},
};

constexpr EnumEntry kRankStatuses[] = {
    {static_cast<uint32_t>(RankStatus::kConnected), "kConnected", "connected"},
    {static_cast<uint32_t>(RankStatus::kComplete), "kComplete", "complete"},
    {static_cast<uint32_t>(RankStatus::kDisconnected), "kDisconnected", "disconnected"},
    {static_cast<uint32_t>(RankStatus::kCorrupt), "kCorrupt", "corrupt"},
    {static_cast<uint32_t>(RankStatus::kMissing), "kMissing", "missing"},
};

template <typename Entry>
const Entry* Find(std::span<const Entry> table, uint32_t value) {
  for (const Entry& e : table) {
    if (e.value == value) {
      return &e;
    }
  }
  return nullptr;
}

}  // namespace

std::span<const EnumEntry> Kinds() { return kKinds; }
std::span<const OpEntry> OpTypes() { return kOps; }
std::span<const EnumEntry> Datatypes() { return kDatatypes; }
std::span<const EnumEntry> ReduceOps() { return kReduceOps; }
std::span<const EnumEntry> EventFlags() { return kFlags; }
std::span<const EnumEntry> MemoryKinds() { return kMemoryKinds; }
std::span<const EnumEntry> RankStatuses() { return kRankStatuses; }

const char* KindName(uint8_t kind) {
  const EnumEntry* e = Find(Kinds(), kind);
  return e != nullptr && e->name != nullptr ? e->name : "unknown";
}

const char* OpName(uint8_t op) {
  const OpEntry* e = Find(OpTypes(), op);
  return e != nullptr && e->name != nullptr ? e->name : "other";
}

const char* CollectiveOpName(uint8_t op) {
  const OpEntry* e = Find(OpTypes(), op);
  return e != nullptr && e->collective ? e->name : "other";
}

const char* CanonicalOpName(uint8_t op) {
  const OpEntry* e = Find(OpTypes(), op);
  return e != nullptr && e->canonical != nullptr ? e->canonical : "Collective";
}

const char* MemoryKindName(uint8_t memory_kind) {
  const EnumEntry* e = Find(MemoryKinds(), memory_kind);
  return e != nullptr ? e->name : "unknown";
}

const char* RankStatusName(RankStatus status) {
  const EnumEntry* e = Find(RankStatuses(), static_cast<uint32_t>(status));
  return e != nullptr ? e->name : "unknown";
}

}  // namespace commprof::schema
