/* commprof event schema, shared by the collector, the wire codec, the HDF5 file and the analysis.
 *
 * One fixed-size, trivially-copyable 64-byte record per event. The same bytes
 * travel on the wire (little-endian) and land in the HDF5 `events` table, so the layout below is
 * a user-facing contract documented in docs/file-format.md and docs/wire-protocol.md: append
 * fields only by bumping the format version. */
#ifndef COMMPROF_EVENT_H
#define COMMPROF_EVENT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What happened. Values are stored in files; never renumber. */
enum commprof_kind {
  COMMPROF_KIND_NONE = 0,
  COMMPROF_KIND_MPI_INIT = 1, /* MPI_Init / MPI_Init_thread */
  COMMPROF_KIND_MPI_FINALIZE = 2,
  COMMPROF_KIND_MPI_COLLECTIVE = 3, /* blocking collective, or a non-blocking one from issue to completion */
  COMMPROF_KIND_MPI_P2P =
      4, /* Send/Recv/Sendrecv (two: send and receive half), or Isend/Irecv from post to completion */
  COMMPROF_KIND_MPI_WAIT = 5,   /* time inside Wait/Waitall/Waitany/Test */
  COMMPROF_KIND_MPI_COMM = 6,   /* communicator creation (MPI dup/split/create, NCCL init): comm_id = new id */
  COMMPROF_KIND_USER_RANGE = 7, /* commprof_range_push/pop */
  COMMPROF_KIND_USER_MARK = 8,  /* commprof_mark */
  COMMPROF_KIND_STEP = 9,       /* a step begins: seq = step number, subtype = enum commprof_step_source */
  COMMPROF_KIND_COMPUTE_KERNEL = 10,
  COMMPROF_KIND_COMM_KERNEL = 11,
  COMMPROF_KIND_MEMCPY = 12,
  COMMPROF_KIND_MEMSET = 13,
  COMMPROF_KIND_MEM_ALLOC = 14,
  COMMPROF_KIND_MEM_FREE = 15,
  COMMPROF_KIND_NCCL_API = 16,
  COMMPROF_KIND_NCCL_COLLECTIVE = 17,
  COMMPROF_KIND_NVTX_RANGE = 18,
  COMMPROF_KIND_NVTX_MARK = 19,
  COMMPROF_KIND_SYNC = 20,
  COMMPROF_KIND_NCCL_PROXY_OP = 21,   /* NCCL proxy op (network progress of one channel), COMMPROF_NCCL_DETAIL=proxy */
  COMMPROF_KIND_NCCL_PROXY_STEP = 22, /* one step of a proxy op, COMMPROF_NCCL_DETAIL=proxy */
  COMMPROF_KIND_GPU_OVERHEAD = 23,    /* the tracer's own cost reported by CUPTI (OVERHEAD records) */
  COMMPROF_KIND_CUDA_API = 24,        /* a CUDA runtime/driver API call (launches by default) */
  /* Kinds 25-29 come only from `commprof import kineto` (docs/kineto-import.md). */
  COMMPROF_KIND_HOST_OP = 25,         /* a torch.profiler CPU operator (cat cpu_op) */
  COMMPROF_KIND_HOST_ANNOTATION = 26, /* a CPU-side user annotation (cat user_annotation) */
  COMMPROF_KIND_GPU_ANNOTATION = 27,  /* a GPU-side user annotation (cat gpu_user_annotation): device, stream */
  COMMPROF_KIND_PYTHON_FUNCTION = 28, /* a Python frame (cat python_function, with_stack) */
  COMMPROF_KIND_IMPORTED_OTHER = 29,  /* any other imported event: seq = string id of its category */
  /* Capture controls and call sites (docs/file-format.md, docs/profiling-a-training-loop.md). */
  COMMPROF_KIND_WINDOW = 30,      /* one active capture window: seq = window index, bytes = first step */
  COMMPROF_KIND_CALL_SITE = 31,   /* the stack of the API event with the same start, kind, comm: seq = stack id */
  COMMPROF_KIND_STACK_FRAME = 32, /* one frame of stack `seq`: peer = depth, bytes = module-relative address */
  COMMPROF_KIND_COUNT_ = 33
};

/* What marked a step (STEP events' `subtype`). */
enum commprof_step_source {
  COMMPROF_STEP_C_API = 0,      /* commprof_step(n) */
  COMMPROF_STEP_PCONTROL = 1,   /* MPI_Pcontrol(2): the next step, numbered by the collector */
  COMMPROF_STEP_NVTX = 2,       /* an NVTX range named ProfilerStep#N or --step-range NAME */
  COMMPROF_STEP_COLLECTIVE = 3, /* every N-th collective on a communicator (--step-every) */
  COMMPROF_STEP_IMPORTED = 4    /* a torch.profiler ProfilerStep#N range (commprof import kineto) */
};

/* Which operation, for MPI_COLLECTIVE / MPI_P2P / MPI_WAIT (stored in `subtype`). */
enum commprof_op_type {
  COMMPROF_OP_NONE = 0,
  COMMPROF_OP_BARRIER = 1,
  COMMPROF_OP_BCAST = 2,
  COMMPROF_OP_REDUCE = 3,
  COMMPROF_OP_ALLREDUCE = 4,
  COMMPROF_OP_GATHER = 5,
  COMMPROF_OP_GATHERV = 6,
  COMMPROF_OP_SCATTER = 7,
  COMMPROF_OP_SCATTERV = 8,
  COMMPROF_OP_ALLGATHER = 9,
  COMMPROF_OP_ALLGATHERV = 10,
  COMMPROF_OP_ALLTOALL = 11,
  COMMPROF_OP_ALLTOALLV = 12,
  COMMPROF_OP_REDUCE_SCATTER = 13,
  COMMPROF_OP_REDUCE_SCATTER_BLOCK = 14,
  COMMPROF_OP_SCAN = 15,
  COMMPROF_OP_EXSCAN = 16,
  COMMPROF_OP_SEND = 32,
  COMMPROF_OP_RECV = 33,
  COMMPROF_OP_SENDRECV = 34,
  COMMPROF_OP_WAIT = 48,
  COMMPROF_OP_WAITALL = 49,
  COMMPROF_OP_WAITANY = 50,
  COMMPROF_OP_TEST = 51,
  COMMPROF_OP_COMM_DUP = 64,
  COMMPROF_OP_COMM_SPLIT = 65,
  COMMPROF_OP_COMM_CREATE = 66,
  COMMPROF_OP_NCCL_COMM_INIT = 67 /* kind MPI_COMM: an NCCL communicator's init (comm_id = commHash) */
};

/* Element datatype (stored in `datatype`). */
enum commprof_datatype {
  COMMPROF_DT_NONE = 0,
  COMMPROF_DT_BYTE = 1,
  COMMPROF_DT_CHAR = 2,
  COMMPROF_DT_INT8 = 3,
  COMMPROF_DT_UINT8 = 4,
  COMMPROF_DT_INT16 = 5,
  COMMPROF_DT_UINT16 = 6,
  COMMPROF_DT_INT32 = 7,
  COMMPROF_DT_UINT32 = 8,
  COMMPROF_DT_INT64 = 9,
  COMMPROF_DT_UINT64 = 10,
  COMMPROF_DT_FLOAT16 = 11,
  COMMPROF_DT_BFLOAT16 = 12,
  COMMPROF_DT_FLOAT32 = 13,
  COMMPROF_DT_FLOAT64 = 14,
  COMMPROF_DT_LONG_DOUBLE = 15,
  COMMPROF_DT_DERIVED = 254,
  COMMPROF_DT_OTHER = 255
};

/* Reduction operation (stored in `reduce_op`). */
enum commprof_reduce_op {
  COMMPROF_RED_NONE = 0,
  COMMPROF_RED_SUM = 1,
  COMMPROF_RED_PROD = 2,
  COMMPROF_RED_MAX = 3,
  COMMPROF_RED_MIN = 4,
  COMMPROF_RED_LAND = 5,
  COMMPROF_RED_LOR = 6,
  COMMPROF_RED_BAND = 7,
  COMMPROF_RED_BOR = 8,
  COMMPROF_RED_MAXLOC = 9,
  COMMPROF_RED_MINLOC = 10,
  COMMPROF_RED_AVG = 11, /* ncclAvg (NCCL API events decoded from NCCL's NVTX ranges) */
  COMMPROF_RED_USER = 255
};

/* Bits of `flags`. */
enum commprof_event_flags {
  COMMPROF_FLAG_NONBLOCKING = 1u << 0,    /* issued by an I-call; start = issue, end = completion */
  COMMPROF_FLAG_INCOMPLETE = 1u << 1,     /* never completed (request lost or process ended) */
  COMMPROF_FLAG_UNTRACKED_COMM = 1u << 2, /* communicator made by a call we do not wrap: comm_id is local only */
  COMMPROF_FLAG_FROM_NVTX = 1u << 3,      /* an NCCL API event decoded from NCCL's own NVTX range (docs/nvtx.md) */
  COMMPROF_FLAG_RECV_HALF = 1u << 4, /* the receive half of an MPI_Sendrecv(_replace): peer, tag, bytes as received */
  COMMPROF_FLAG_SIZELESS_TYPE =
      1u << 5 /* an MPI collective of bytes 0 whose datatype has size 0: its count may not be 0 */
};

/* comm_id 0: the event is not about a communicator. MPI_COMM_WORLD is 1; a communicator created
 * by a wrapped call gets ((world rank of its rank 0 + 1) << 32) | that rank's creation counter
 * (from 1); one we did not see created gets a rank-local id with the top bit set. */
#define COMMPROF_NO_COMM_ID 0ull
#define COMMPROF_COMM_WORLD_ID 1ull
#define COMMPROF_NO_PEER (-1)

typedef struct commprof_event {
  uint64_t start_ns;    /* local steady clock */
  uint64_t end_ns;      /* == start_ns for instantaneous events */
  uint64_t bytes;       /* payload size, see docs/file-format.md for each operation */
  uint64_t comm_id;     /* job-unique communicator id */
  uint64_t seq;         /* per-communicator collective sequence number (from 0), step number, ... */
  uint32_t correlation; /* request / launch correlation id, 0 if none */
  uint32_t name_id;     /* index into the rank's string table */
  uint32_t thread_id;   /* small per-process thread index (or stream for GPU events) */
  int32_t peer;         /* root of a rooted collective, peer of a p2p op, or COMMPROF_NO_PEER */
  uint16_t device;      /* GPU ordinal, 0xFFFF for host events */
  uint8_t kind;         /* enum commprof_kind */
  uint8_t subtype;      /* enum commprof_op_type */
  uint8_t datatype;     /* enum commprof_datatype */
  uint8_t reduce_op;    /* enum commprof_reduce_op */
  uint16_t flags;       /* enum commprof_event_flags */
} commprof_event;

#define COMMPROF_HOST_DEVICE 0xFFFFu

#ifdef __cplusplus
}
static_assert(sizeof(commprof_event) == 64, "the event record is a 64-byte file/wire contract");
#endif

#endif /* COMMPROF_EVENT_H */
