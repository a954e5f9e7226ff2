"""The numbers of the `kind` and `subtype` (operation) fields of the events table and their names,
as docs/file-format.md gives them (include/commprof/event.h and core/schema/enums.cc in the
source tree are the authority; tests/python checks that these agree with them)."""

KINDS = {
    1: "mpi_init",  # COMMPROF_KIND_MPI_INIT
    2: "mpi_finalize",  # COMMPROF_KIND_MPI_FINALIZE
    3: "mpi_collective",  # COMMPROF_KIND_MPI_COLLECTIVE
    4: "mpi_p2p",  # COMMPROF_KIND_MPI_P2P
    5: "mpi_wait",  # COMMPROF_KIND_MPI_WAIT
    6: "mpi_comm",  # COMMPROF_KIND_MPI_COMM
    7: "user_range",  # COMMPROF_KIND_USER_RANGE
    8: "user_mark",  # COMMPROF_KIND_USER_MARK
    9: "step",  # COMMPROF_KIND_STEP
    10: "compute_kernel",  # COMMPROF_KIND_COMPUTE_KERNEL
    11: "comm_kernel",  # COMMPROF_KIND_COMM_KERNEL
    12: "memcpy",  # COMMPROF_KIND_MEMCPY
    13: "memset",  # COMMPROF_KIND_MEMSET
    14: "mem_alloc",  # COMMPROF_KIND_MEM_ALLOC
    15: "mem_free",  # COMMPROF_KIND_MEM_FREE
    16: "nccl_api",  # COMMPROF_KIND_NCCL_API
    17: "nccl_collective",  # COMMPROF_KIND_NCCL_COLLECTIVE
    18: "nvtx_range",  # COMMPROF_KIND_NVTX_RANGE
    19: "nvtx_mark",  # COMMPROF_KIND_NVTX_MARK
    20: "sync",  # COMMPROF_KIND_SYNC
    21: "nccl_proxy_op",  # COMMPROF_KIND_NCCL_PROXY_OP
    22: "nccl_proxy_step",  # COMMPROF_KIND_NCCL_PROXY_STEP
    23: "gpu_overhead",  # COMMPROF_KIND_GPU_OVERHEAD
    24: "cuda_api",  # COMMPROF_KIND_CUDA_API
    25: "host_op",  # COMMPROF_KIND_HOST_OP
    26: "host_annotation",  # COMMPROF_KIND_HOST_ANNOTATION
    27: "gpu_annotation",  # COMMPROF_KIND_GPU_ANNOTATION
    28: "python_function",  # COMMPROF_KIND_PYTHON_FUNCTION
    29: "imported_other",  # COMMPROF_KIND_IMPORTED_OTHER
    30: "window",  # COMMPROF_KIND_WINDOW
    31: "call_site",  # COMMPROF_KIND_CALL_SITE
    32: "stack_frame",  # COMMPROF_KIND_STACK_FRAME
}

OPS = {
    1: "barrier",  # COMMPROF_OP_BARRIER
    2: "bcast",  # COMMPROF_OP_BCAST
    3: "reduce",  # COMMPROF_OP_REDUCE
    4: "allreduce",  # COMMPROF_OP_ALLREDUCE
    5: "gather",  # COMMPROF_OP_GATHER
    6: "gatherv",  # COMMPROF_OP_GATHERV
    7: "scatter",  # COMMPROF_OP_SCATTER
    8: "scatterv",  # COMMPROF_OP_SCATTERV
    9: "allgather",  # COMMPROF_OP_ALLGATHER
    10: "allgatherv",  # COMMPROF_OP_ALLGATHERV
    11: "alltoall",  # COMMPROF_OP_ALLTOALL
    12: "alltoallv",  # COMMPROF_OP_ALLTOALLV
    13: "reduce_scatter",  # COMMPROF_OP_REDUCE_SCATTER
    14: "reduce_scatter_block",  # COMMPROF_OP_REDUCE_SCATTER_BLOCK
    15: "scan",  # COMMPROF_OP_SCAN
    16: "exscan",  # COMMPROF_OP_EXSCAN
    32: "send",  # COMMPROF_OP_SEND
    33: "recv",  # COMMPROF_OP_RECV
    34: "sendrecv",  # COMMPROF_OP_SENDRECV
    48: "wait",  # COMMPROF_OP_WAIT
    49: "waitall",  # COMMPROF_OP_WAITALL
    50: "waitany",  # COMMPROF_OP_WAITANY
    51: "test",  # COMMPROF_OP_TEST
    64: "comm_dup",  # COMMPROF_OP_COMM_DUP
    65: "comm_split",  # COMMPROF_OP_COMM_SPLIT
    66: "comm_create",  # COMMPROF_OP_COMM_CREATE
    67: "nccl_comm_init",  # COMMPROF_OP_NCCL_COMM_INIT
}

# Kinds whose `subtype` is an operation of OPS (docs/file-format.md, the events table by kind).
OP_KINDS = {"mpi_collective", "mpi_p2p", "mpi_wait", "mpi_comm", "comm_kernel", "nccl_api", "nccl_collective",
            "nccl_proxy_op", "nccl_proxy_step"}
