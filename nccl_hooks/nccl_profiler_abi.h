// Our own declarations of the NCCL profiler-plugin ABI (v5: NCCL 2.28, v4: 2.27, v2: 2.24/2.25),
// written from NCCL's published profiler headers (ext-profiler/). No NCCL header is included or
// copied: only the field order, types and values matter to the loader, and the static_asserts below
// pin every offset of those headers (x86-64 LP64), so a mistake fails the build instead of
// corrupting events.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

extern "C" {

// ncclResult_t: a 4-byte enum; only Success is ever returned by the plugin.
typedef enum { kCpNcclSuccess = 0, kCpNcclSystemError = 2, kCpNcclInternalError = 3 } CpNcclResult;

// ncclDebugLogger_t: (level, flags, file, line, fmt, ...).
typedef void (*CpNcclDebugLogger)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// Event-type bits (eDescr->type and the activation mask).
enum : uint64_t {
  kCpNcclGroup = 1u << 0,
  kCpNcclColl = 1u << 1,
  kCpNcclP2p = 1u << 2,
  kCpNcclProxyOp = 1u << 3,
  kCpNcclProxyStep = 1u << 4,
  kCpNcclProxyCtrl = 1u << 5,
  kCpNcclKernelCh = 1u << 6,
  kCpNcclNetPlugin = 1u << 7,
  kCpNcclGroupApi = 1u << 8,
  kCpNcclCollApi = 1u << 9,
  kCpNcclP2pApi = 1u << 10,
  kCpNcclKernelLaunch = 1u << 11,
};

// ncclProfilerEventState_t: one 4-byte enum for every version; only the values we use are named.
typedef enum {
  kCpNcclStateProxyOpFirst = 0,  // ProxyOpSendPosted .. ProxyOpRecvDone (0-7): v2 ProxyOp states
  kCpNcclStateProxyOpLast = 7,
  kCpNcclStateProxyStepFirst = 8,  // ncclProfilerProxyStep* (8-12): SendGPUWait .. RecvGPUWait
  kCpNcclStateProxyStepLast = 12,
  kCpNcclStateProxyOpInProgress = 19,
  kCpNcclStateProxyStepSendPeerWait = 20,
  kCpNcclStateNetPluginUpdate = 21,
  kCpNcclStateKernelChStop = 22,
  kCpNcclStateGroupStartApiStop = 23,
  kCpNcclStateGroupEndApiStart = 24,
} CpNcclEventState;

// ---------------------------------------------------------------- v5 (NCCL 2.28)
typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} CpNcclEventDescrV5;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} CpNcclStateArgsV5;

typedef struct {
  const char* name;
  CpNcclResult (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, CpNcclDebugLogger logfn);
  CpNcclResult (*startEvent)(void* context, void** eHandle, CpNcclEventDescrV5* eDescr);
  CpNcclResult (*stopEvent)(void* eHandle);
  CpNcclResult (*recordEventState)(void* eHandle, CpNcclEventState eState, CpNcclStateArgsV5* eStateArgs);
  CpNcclResult (*finalize)(void* context);
} CpNcclProfilerV5;

// ---------------------------------------------------------------- v4 (NCCL 2.27)
typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} CpNcclEventDescrV4;

typedef CpNcclStateArgsV5 CpNcclStateArgsV4;  // the same 8-byte union

typedef struct {
  const char* name;
  CpNcclResult (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, CpNcclDebugLogger logfn);
  CpNcclResult (*startEvent)(void* context, void** eHandle, CpNcclEventDescrV4* eDescr);
  CpNcclResult (*stopEvent)(void* eHandle);
  CpNcclResult (*recordEventState)(void* eHandle, CpNcclEventState eState, CpNcclStateArgsV4* eStateArgs);
  CpNcclResult (*finalize)(void* context);
} CpNcclProfilerV4;

// ---------------------------------------------------------------- v2 (NCCL 2.24/2.25)
typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
  };
} CpNcclEventDescrV2;

typedef union {
  struct {
    size_t transSize;
    int steps;
  } proxyOp;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
} CpNcclStateArgsV2;

typedef struct {
  const char* name;
  CpNcclResult (*init)(void** context, int* eActivationMask);
  CpNcclResult (*startEvent)(void* context, void** eHandle, CpNcclEventDescrV2* eDescr);
  CpNcclResult (*stopEvent)(void* eHandle);
  CpNcclResult (*recordEventState)(void* eHandle, CpNcclEventState eState, CpNcclStateArgsV2* eStateArgs);
  CpNcclResult (*finalize)(void* context);
} CpNcclProfilerV2;

}  // extern "C"

// Offsets measured by compiling NCCL 2.28.9's and 2.25.1's profiler headers (x86-64).
static_assert(sizeof(CpNcclResult) == 4 && sizeof(CpNcclEventState) == 4, "4-byte enums");
static_assert(sizeof(CpNcclProfilerV5) == 48 && sizeof(CpNcclProfilerV4) == 48 && sizeof(CpNcclProfilerV2) == 48);
static_assert(sizeof(CpNcclEventDescrV5) == 112, "v5 descriptor");
static_assert(offsetof(CpNcclEventDescrV5, parentObj) == 8 && offsetof(CpNcclEventDescrV5, rank) == 16);
static_assert(offsetof(CpNcclEventDescrV5, groupApi.groupDepth) == 28);
static_assert(offsetof(CpNcclEventDescrV5, collApi.root) == 48 &&
              offsetof(CpNcclEventDescrV5, collApi.graphCaptured) == 64);
static_assert(offsetof(CpNcclEventDescrV5, p2pApi.stream) == 48 &&
              offsetof(CpNcclEventDescrV5, p2pApi.graphCaptured) == 56);
static_assert(offsetof(CpNcclEventDescrV5, coll.seqNumber) == 24 && offsetof(CpNcclEventDescrV5, coll.count) == 56);
static_assert(offsetof(CpNcclEventDescrV5, coll.root) == 64 && offsetof(CpNcclEventDescrV5, coll.datatype) == 72);
static_assert(offsetof(CpNcclEventDescrV5, coll.nChannels) == 80 && offsetof(CpNcclEventDescrV5, coll.nWarps) == 81);
static_assert(offsetof(CpNcclEventDescrV5, coll.algo) == 88 && offsetof(CpNcclEventDescrV5, coll.proto) == 96);
static_assert(offsetof(CpNcclEventDescrV5, coll.parentGroup) == 104);
static_assert(offsetof(CpNcclEventDescrV5, p2p.count) == 48 && offsetof(CpNcclEventDescrV5, p2p.peer) == 56);
static_assert(offsetof(CpNcclEventDescrV5, p2p.nChannels) == 60 && offsetof(CpNcclEventDescrV5, p2p.parentGroup) == 64);
static_assert(offsetof(CpNcclEventDescrV5, proxyOp.channelId) == 28 &&
              offsetof(CpNcclEventDescrV5, proxyOp.isSend) == 44);
static_assert(offsetof(CpNcclEventDescrV5, kernelCh.channelId) == 24 &&
              offsetof(CpNcclEventDescrV5, kernelCh.pTimer) == 32);
static_assert(offsetof(CpNcclEventDescrV5, netPlugin.data) == 32);
static_assert(sizeof(CpNcclStateArgsV5) == 8);
static_assert(sizeof(CpNcclEventDescrV4) == 104, "v4 descriptor");
static_assert(offsetof(CpNcclEventDescrV4, coll.proto) == 96 && offsetof(CpNcclEventDescrV4, p2p.nChannels) == 60);
static_assert(offsetof(CpNcclEventDescrV4, kernelCh.pTimer) == 32);
static_assert(sizeof(CpNcclEventDescrV2) == 128, "v2 descriptor");
static_assert(offsetof(CpNcclEventDescrV2, coll.commHash) == 32 && offsetof(CpNcclEventDescrV2, coll.seqNumber) == 40);
static_assert(offsetof(CpNcclEventDescrV2, coll.count) == 72 && offsetof(CpNcclEventDescrV2, coll.root) == 80);
static_assert(offsetof(CpNcclEventDescrV2, coll.trafficBytes) == 96 &&
              offsetof(CpNcclEventDescrV2, coll.nMaxChannels) == 104);
static_assert(offsetof(CpNcclEventDescrV2, coll.algo) == 112 && offsetof(CpNcclEventDescrV2, coll.proto) == 120);
static_assert(offsetof(CpNcclEventDescrV2, p2p.count) == 64 && offsetof(CpNcclEventDescrV2, p2p.peer) == 72);
static_assert(sizeof(CpNcclStateArgsV2) == 16);
