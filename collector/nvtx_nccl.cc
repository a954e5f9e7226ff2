#include "collector/nvtx_nccl.h"

#include <cstring>

#include "commprof/event.h"

namespace commprof {

NcclApiFunction NcclFunctionFromName(std::string_view name) {
  struct Entry {
    std::string_view name;
    NcclApiFunction fn;
  };
  static constexpr Entry kFunctions[] = {
      {"ncclAllReduce", {COMMPROF_OP_ALLREDUCE, NcclPayloadTail::kRedOp}},
      {"ncclReduceScatter", {COMMPROF_OP_REDUCE_SCATTER, NcclPayloadTail::kRedOp}},
      {"ncclAllGather", {COMMPROF_OP_ALLGATHER, NcclPayloadTail::kNone}},
      {"ncclAlltoAll", {COMMPROF_OP_ALLTOALL, NcclPayloadTail::kNone}},
      {"ncclBroadcast", {COMMPROF_OP_BCAST, NcclPayloadTail::kRoot}},
      {"ncclBcast", {COMMPROF_OP_BCAST, NcclPayloadTail::kRoot}},
      {"ncclGather", {COMMPROF_OP_GATHER, NcclPayloadTail::kRoot}},
      {"ncclScatter", {COMMPROF_OP_SCATTER, NcclPayloadTail::kRoot}},
      {"ncclReduce", {COMMPROF_OP_REDUCE, NcclPayloadTail::kRootThenRedOp}},
      {"ncclSend", {COMMPROF_OP_SEND, NcclPayloadTail::kPeer}},
      {"ncclRecv", {COMMPROF_OP_RECV, NcclPayloadTail::kPeer}},
  };
  for (const auto& e : kFunctions) {
    if (e.name == name) {
      return e.fn;
    }
  }
  return {};
}

uint8_t ReduceOpFromNccl(int32_t nccl_op) {
  switch (nccl_op) {
    case 0:
      return COMMPROF_RED_SUM;
    case 1:
      return COMMPROF_RED_PROD;
    case 2:
      return COMMPROF_RED_MAX;
    case 3:
      return COMMPROF_RED_MIN;
    case 4:
      return COMMPROF_RED_AVG;
    default:
      return COMMPROF_RED_USER;  // ncclRedOpCreatePreMulSum and other created ops
  }
}

bool DecodeNcclPayload(NcclApiFunction fn, const void* payload, size_t size, NcclCallFields& out) {
  // The payload struct in natural alignment: offsets fixed by the C layout.
  constexpr size_t kHash = 0, kBytes = 8, kFirstInt = 16, kSecondInt = 20;
  size_t need = kFirstInt;
  if (fn.tail == NcclPayloadTail::kRedOp || fn.tail == NcclPayloadTail::kRoot || fn.tail == NcclPayloadTail::kPeer) {
    need = kFirstInt + sizeof(int32_t);
  } else if (fn.tail == NcclPayloadTail::kRootThenRedOp) {
    need = kSecondInt + sizeof(int32_t);
  }
  if (payload == nullptr || size < need) {
    return false;
  }
  const auto* p = static_cast<const unsigned char*>(payload);
  NcclCallFields f;
  uint64_t bytes = 0;
  int32_t first = 0, second = 0;
  std::memcpy(&f.comm_hash, p + kHash, sizeof(uint64_t));
  std::memcpy(&bytes, p + kBytes, sizeof(uint64_t));  // size_t: 8 bytes on every supported host
  f.bytes = bytes;
  if (need > kFirstInt) {
    std::memcpy(&first, p + kFirstInt, sizeof(int32_t));
  }
  if (need > kSecondInt) {
    std::memcpy(&second, p + kSecondInt, sizeof(int32_t));
  }
  switch (fn.tail) {
    case NcclPayloadTail::kNone:
      break;
    case NcclPayloadTail::kRedOp:
      f.reduce_op = ReduceOpFromNccl(first);
      break;
    case NcclPayloadTail::kRoot:
    case NcclPayloadTail::kPeer:
      f.peer = first;
      break;
    case NcclPayloadTail::kRootThenRedOp:
      f.peer = first;
      f.reduce_op = ReduceOpFromNccl(second);
      break;
  }
  out = f;
  return true;
}

}  // namespace commprof
