#include "collector/fatal_signals.h"

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "collector/runtime.h"

namespace commprof {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGTERM};
constexpr unsigned kShipWaitMs = 3000;

std::atomic<Runtime*> g_signal_runtime{nullptr};
// The action found before ours, per signal number (written before our handler is installed).
struct sigaction g_previous[NSIG];

void OnFatalSignal(int signo, siginfo_t* info, void* context);

bool IsOurs(const struct sigaction& sa) { return (sa.sa_flags & SA_SIGINFO) != 0 && sa.sa_sigaction == OnFatalSignal; }

void OnFatalSignal(int signo, siginfo_t* info, void* context) {
  int saved_errno = errno;
  const struct sigaction& prev = g_previous[signo];
  bool prev_is_function = (prev.sa_flags & SA_SIGINFO) != 0
                              ? prev.sa_sigaction != nullptr
                              : (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN);
  bool ignored = (prev.sa_flags & SA_SIGINFO) == 0 && prev.sa_handler == SIG_IGN;
  if (Runtime* rt = g_signal_runtime.load(); rt != nullptr && !ignored) {
    // A fault or an abort ends the process whoever handles it next (Open MPI's backtrace printer
    // re-raises): ship everything and the bye. SIGTERM with the program's own handler may be a
    // graceful shutdown that goes on (its exit then sends the bye): only flush.
    bool final = !prev_is_function || signo != SIGTERM;
    rt->ShipForSignal(signo, final, kShipWaitMs);
  }
  if (prev_is_function) {
    errno = saved_errno;
    if ((prev.sa_flags & SA_SIGINFO) != 0) {
      prev.sa_sigaction(signo, info, context);
    } else {
      prev.sa_handler(signo);
    }
    return;
  }
  if (ignored) {
    errno = saved_errno;
    return;
  }
  // The default action, as if we had never been here: restore it and raise the signal again
  // (blocked while this handler runs, it is delivered when we return; a fault re-executes the
  // faulting instruction and gets it anyway).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(signo, &dfl, nullptr);
  if (info == nullptr || info->si_code <= 0 || signo == SIGTERM || signo == SIGABRT) {
    ::raise(signo);  // sent by kill()/raise()/abort(): it will not come back by itself
  }
  errno = saved_errno;
}

}  // namespace

void InstallFatalSignalHandlers(Runtime* rt) {
  if (rt == nullptr || !rt->config().signal_handlers) {
    return;
  }
  g_signal_runtime.store(rt);
  for (int signo : kSignals) {
    struct sigaction current {};
    if (::sigaction(signo, nullptr, &current) != 0 || IsOurs(current)) {
      continue;
    }
    g_previous[signo] = current;
    struct sigaction ours {};
    ours.sa_sigaction = OnFatalSignal;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    ::sigaction(signo, &ours, nullptr);
  }
}

void ForgetFatalSignalRuntime() { g_signal_runtime.store(nullptr); }

}  // namespace commprof
