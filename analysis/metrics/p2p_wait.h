// Point-to-point wait states of one matched message (docs/metrics.md §5, after Scalasca's
// MPI_LATESENDER and MPI_LATERECEIVER patterns). All times on the aligned time base.
//
// A rank *waits* for a message only inside the call in which it blocks to complete it: the
// blocking MPI_Send / MPI_Recv / MPI_Sendrecv itself, or the MPI_Wait* call that completed an
// Isend / Irecv. That call is the BlockedCall below; an operation completed by MPI_Test*, never completed
// (INCOMPLETE) or completed out of sight has none, and is charged no wait.
#pragma once

#include <algorithm>
#include <cstdint>

namespace commprof {

struct BlockedCall {
  int64_t start = 0;  // entry of the completing call
  int64_t end = 0;    // its exit
};

// Late Sender (§5.2): the receiver entered its completing call at c.start, before the matching
// send was posted at send_post; it could not have had the message before then. Charged to the
// receiver: max(0, min(send_post, c.end) - c.start). The min keeps a clock error (a send "posted"
// after the receive returned) from charging more than the time spent in the call.
inline int64_t LateSenderWait(int64_t send_post, const BlockedCall& recv) {
  return std::max<int64_t>(0, std::min(send_post, recv.end) - recv.start);
}

// Late Receiver (§5.3): the sender entered its completing call at c.start, before the matching
// receive was posted at recv_post, and was still inside when it was posted (a send that returned
// first, e.g. an eager one, did not wait for the receiver). Charged to the sender:
// recv_post - c.start when c.start < recv_post < c.end, else 0.
inline int64_t LateReceiverWait(int64_t recv_post, const BlockedCall& send) {
  if (send.end <= recv_post) {
    return 0;
  }
  return std::max<int64_t>(0, recv_post - send.start);
}

}  // namespace commprof
