// The call-site table (docs/metrics.md §11), mpiP style: for every call site (the depth-0 frame
// of a `--stacks` stack: function, file, line) and operation, the calls made there on every rank,
// their time, their wait and their bytes.
//
// Each kind 31 CALL_SITE joins its API event on (start_ns, kind, comm_id) within the rank. Wait:
// for an MPI collective (blocking or non-blocking) the rank's measured wait in the collective
// instance the call took part in (§2); for point-to-point, MPI_Wait* and NCCL API calls the time
// inside the call (what a rank spends blocked there; for a non-blocking point-to-point operation,
// issue to completion).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "analysis/load/stack_table.h"
#include "analysis/match/collective_instances.h"
#include "analysis/metrics/wait_metrics.h"

namespace commprof {

struct CallSite {
  std::string function;  // the depth-0 frame
  std::string file;      // empty without debug information
  uint32_t line = 0;
  std::string module;
  uint64_t address = 0;  // module-relative, when there is no file
  std::string op;        // the API call's name (MPI_Allreduce, ncclAllReduce, MPI_Wait, ...)
  uint64_t calls = 0;
  int64_t time_ns = 0;
  int64_t wait_ns = 0;
  uint64_t bytes = 0;              // 0 for MPI_Wait*/Test* (their events count requests, not bytes)
  uint32_t ranks = 0;              // ranks that called it
  std::vector<std::string> stack;  // one of its stacks, frame labels from depth 0 (StackFrameInfo::Label)
};

struct CallSiteReport {
  std::vector<CallSite> sites;  // largest wait first, then time
  uint64_t unjoined = 0;        // CALL_SITE events without an API event or a stack (a damaged or cut file)
};

// Reads the ranks that recorded stacks once more; nothing when none did.
Result<CallSiteReport> ComputeCallSites(const ProfileReader& reader, const StackMap& stacks,
                                        const std::vector<CollectiveInstance>& instances,
                                        const std::vector<InstanceMetrics>& measured);

}  // namespace commprof
