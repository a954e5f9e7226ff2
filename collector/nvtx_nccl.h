// NCCL's own NVTX ranges (docs/nvtx.md): every NCCL API call pushes a range in the
// "NCCL" domain, named by a registered string of its function name, with one extended payload, a
// C struct in natural alignment: u64 commHash @0, size_t bytes @8, then an int @16 (reduction op,
// root or peer, by function) and, for ncclReduce, the op @20. This module turns the name and that
// payload into the fields of an NCCL API event (docs/nvtx.md). Pure functions: no state, no
// allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace commprof {

// What the int fields after (commHash, bytes) mean for one NCCL function.
enum class NcclPayloadTail : uint8_t { kNone, kRedOp, kRoot, kPeer, kRootThenRedOp };

struct NcclApiFunction {
  uint8_t op = 0;  // enum commprof_op_type; 0 = not a collective or point-to-point call
  NcclPayloadTail tail = NcclPayloadTail::kNone;
};

// The operation of an NCCL range name ("ncclAllReduce", "ncclSend", ...); op 0 for the others
// (ncclGroupStart, ncclCommInitRank, ...).
NcclApiFunction NcclFunctionFromName(std::string_view name);

struct NcclCallFields {
  uint64_t comm_hash = 0;
  uint64_t bytes = 0;
  int32_t peer = -1;      // root of a rooted collective, peer of Send/Recv, else -1
  uint8_t reduce_op = 0;  // enum commprof_reduce_op
};

// Decodes one payload of `size` bytes for `fn`; false (and `out` untouched) when it is too short
// for the fields the function carries.
bool DecodeNcclPayload(NcclApiFunction fn, const void* payload, size_t size, NcclCallFields& out);

// ncclRedOp_t (ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4, user-created ops above) to
// enum commprof_reduce_op.
uint8_t ReduceOpFromNccl(int32_t nccl_op);

}  // namespace commprof
