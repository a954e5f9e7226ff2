// Fatal signals in a rank: on SIGSEGV, SIGBUS, SIGABRT and SIGTERM the collector ships what its
// rings hold and records the signal (the bye counter `fatal_signal`, shown as the rank's end
// reason "killed by signal N"), then lets the program's own behaviour proceed unchanged: the
// handler that was installed before ours runs, or the default action (the process dies of the
// same signal, with the same exit status and core dump as without commprof).
//
// A SIGTERM handled by the program's own function may be a graceful shutdown the process survives:
// then the shipment is an ordinary flush and the stream goes on (its exit sends the bye). Faults
// and aborts end the process whoever handles them next, so their shipment ends with the bye.
//
// Everything the handler does is async-signal-safe: atomics, write() to the shipper's wake-up
// pipe, nanosleep() while the shipper works (at most 3 s), sigaction() and raise().
#pragma once

namespace commprof {

class Runtime;

// Installs the handlers for `rt` (idempotent: a handler another library installed since the last
// call is chained to, not lost). Does nothing when COMMPROF_SIGNALS is off.
void InstallFatalSignalHandlers(Runtime* rt);

// Forgets the runtime (it is shut down): the handlers then only chain.
void ForgetFatalSignalRuntime();

}  // namespace commprof
