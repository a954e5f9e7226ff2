/* Our own declarations of the NCCL profiler-plugin ABI (v5 and v4 as in NCCL 2.28, v2 as in
 * NCCL 2.24/2.25), written from the facts in docs/nccl-plugin.md §2a-§2c. No NCCL
 * header is included or copied: names are ours, layouts are checked against NCCL's measured
 * x86-64 offsets by the static assertions at the end. Used by the test driver and the stub plugin. */
#ifndef COMMPROF_TESTS_NCCL_NCCL_ABI_DRIVER_H
#define COMMPROF_TESTS_NCCL_NCCL_ABI_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int drv_result_t; /* ncclResult_t: Success = 0 */
typedef void (*drv_logger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

/* Event-type bits (§2a). */
enum {
  DRV_GROUP = 1 << 0,
  DRV_COLL = 1 << 1,
  DRV_P2P = 1 << 2,
  DRV_PROXY_OP = 1 << 3,
  DRV_PROXY_STEP = 1 << 4,
  DRV_PROXY_CTRL = 1 << 5,
  DRV_KERNEL_CH = 1 << 6,
  DRV_NET_PLUGIN = 1 << 7,
  DRV_GROUP_API = 1 << 8,
  DRV_COLL_API = 1 << 9,
  DRV_P2P_API = 1 << 10,
  DRV_KERNEL_LAUNCH = 1 << 11,
};

/* States (§2a table; one enum for every version). */
enum {
  DRV_ST_PROXY_OP_SEND_POSTED = 0,
  DRV_ST_PROXY_OP_SEND_REM_FIFO_WAIT = 1,
  DRV_ST_PROXY_OP_SEND_TRANSMITTED = 2,
  DRV_ST_PROXY_OP_SEND_DONE = 3,
  DRV_ST_PROXY_OP_RECV_POSTED = 4,
  DRV_ST_PROXY_OP_RECV_RECEIVED = 5,
  DRV_ST_PROXY_OP_RECV_TRANSMITTED = 6,
  DRV_ST_PROXY_OP_RECV_DONE = 7,
  DRV_ST_STEP_SEND_GPU_WAIT = 8,
  DRV_ST_STEP_SEND_WAIT = 9,
  DRV_ST_STEP_RECV_WAIT = 10,
  DRV_ST_STEP_RECV_FLUSH_WAIT = 11,
  DRV_ST_STEP_RECV_GPU_WAIT = 12,
  DRV_ST_PROXY_OP_IN_PROGRESS = 19,
  DRV_ST_STEP_SEND_PEER_WAIT = 20,
  DRV_ST_KERNEL_CH_STOP = 22,
  DRV_ST_GROUP_START_API_STOP = 23,
  DRV_ST_GROUP_END_API_START = 24,
};
typedef int drv_state_t; /* 4-byte enum */

/* ---- v5 (NCCL 2.28) ---- */
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
} drv_descr_v5_t;

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
} drv_state_args_v5_t;

typedef struct {
  const char* name;
  drv_result_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, drv_logger_t logfn);
  drv_result_t (*startEvent)(void* context, void** eHandle, drv_descr_v5_t* eDescr);
  drv_result_t (*stopEvent)(void* eHandle);
  drv_result_t (*recordEventState)(void* eHandle, drv_state_t eState, drv_state_args_v5_t* eStateArgs);
  drv_result_t (*finalize)(void* context);
} drv_profiler_v5_t;

/* ---- v4 (NCCL 2.27; also accepted by 2.28 through its adapter) ---- */
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
} drv_descr_v4_t;

typedef drv_state_args_v5_t drv_state_args_v4_t; /* "State args are the same as v5" */

typedef struct {
  const char* name;
  drv_result_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, drv_logger_t logfn);
  drv_result_t (*startEvent)(void* context, void** eHandle, drv_descr_v4_t* eDescr);
  drv_result_t (*stopEvent)(void* eHandle);
  drv_result_t (*recordEventState)(void* eHandle, drv_state_t eState, drv_state_args_v4_t* eStateArgs);
  drv_result_t (*finalize)(void* context);
} drv_profiler_v4_t;

/* ---- v2 (NCCL 2.24/2.25) ---- */
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
} drv_descr_v2_t;

typedef union {
  struct {
    size_t transSize;
    int steps;
  } proxyOp;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
} drv_state_args_v2_t;

typedef struct {
  const char* name;
  drv_result_t (*init)(void** context, int* eActivationMask);
  drv_result_t (*startEvent)(void* context, void** eHandle, drv_descr_v2_t* eDescr);
  drv_result_t (*stopEvent)(void* eHandle);
  drv_result_t (*recordEventState)(void* eHandle, drv_state_t eState, drv_state_args_v2_t* eStateArgs);
  drv_result_t (*finalize)(void* context);
} drv_profiler_v2_t;

/* NCCL's x86-64 layouts, measured by compiling its profiler headers (§2a, §2b, §2c). */
#if defined(__x86_64__)
#ifdef __cplusplus
#define DRV_STATIC_ASSERT static_assert
#else
#define DRV_STATIC_ASSERT _Static_assert
#endif
DRV_STATIC_ASSERT(sizeof(drv_profiler_v5_t) == 48, "v5 table is 48 bytes");
DRV_STATIC_ASSERT(sizeof(drv_descr_v5_t) == 112, "v5 descriptor is 112 bytes");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, rank) == 16, "v5 rank@16");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, groupApi.groupDepth) == 28, "groupApi.groupDepth@28");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, collApi.root) == 48, "collApi.root@48");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, collApi.graphCaptured) == 64, "collApi.graphCaptured@64");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, p2pApi.graphCaptured) == 56, "p2pApi.graphCaptured@56");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, coll.seqNumber) == 24, "coll.seqNumber@24");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, coll.nChannels) == 80, "coll.nChannels@80");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, coll.algo) == 88, "coll.algo@88");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, coll.parentGroup) == 104, "coll.parentGroup@104");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, p2p.peer) == 56, "p2p.peer@56");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, p2p.nChannels) == 60, "p2p.nChannels@60");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, p2p.parentGroup) == 64, "p2p.parentGroup@64");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, proxyOp.channelId) == 28, "proxyOp.channelId@28");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, proxyOp.isSend) == 44, "proxyOp.isSend@44");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, kernelCh.pTimer) == 32, "kernelCh.pTimer@32");
DRV_STATIC_ASSERT(offsetof(drv_descr_v5_t, netPlugin.data) == 32, "netPlugin.data@32");
DRV_STATIC_ASSERT(sizeof(drv_state_args_v5_t) == 8, "v5 state args are 8 bytes");
DRV_STATIC_ASSERT(sizeof(drv_descr_v4_t) == 104, "v4 descriptor is 104 bytes");
DRV_STATIC_ASSERT(offsetof(drv_descr_v4_t, coll.proto) == 96, "v4 coll.proto@96");
DRV_STATIC_ASSERT(offsetof(drv_descr_v4_t, kernelCh.pTimer) == 32, "v4 kernelCh.pTimer@32");
DRV_STATIC_ASSERT(sizeof(drv_profiler_v4_t) == 48, "v4 table is 48 bytes");
DRV_STATIC_ASSERT(sizeof(drv_descr_v2_t) == 128, "v2 descriptor is 128 bytes");
DRV_STATIC_ASSERT(offsetof(drv_descr_v2_t, coll.commHash) == 32, "v2 coll.commHash@32");
DRV_STATIC_ASSERT(offsetof(drv_descr_v2_t, coll.trafficBytes) == 96, "v2 coll.trafficBytes@96");
DRV_STATIC_ASSERT(offsetof(drv_descr_v2_t, coll.nMaxChannels) == 104, "v2 coll.nMaxChannels@104");
DRV_STATIC_ASSERT(offsetof(drv_descr_v2_t, coll.proto) == 120, "v2 coll.proto@120");
DRV_STATIC_ASSERT(offsetof(drv_descr_v2_t, p2p.peer) == 72, "v2 p2p.peer@72");
DRV_STATIC_ASSERT(offsetof(drv_descr_v2_t, proxyOp.isSend) == 44, "v2 proxyOp.isSend@44");
DRV_STATIC_ASSERT(sizeof(drv_state_args_v2_t) == 16, "v2 state args are 16 bytes");
#endif

#ifdef __cplusplus
}
#endif

#endif
