#include "core/h5/damage_guard.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "core/config.h"

namespace commprof::h5 {
namespace {

// The scope this thread is in (nullptr: none): what a crash on this thread reports.
thread_local const DamageMessages* t_scope = nullptr;
thread_local bool t_closing = false;  // the scope is a close (ReadScope's `closing`)
// Scopes open in the process, the last one begun (for the stall message), and a count of scopes
// begun: the watchdog calls it a stall when scopes stay open and none begins for the limit.
std::atomic<int> g_open{0};
std::atomic<const DamageMessages*> g_last{nullptr};
std::atomic<uint64_t> g_begun{0};
std::atomic<bool> g_enabled{false};

void WriteAll(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) {
      return;
    }
    done += static_cast<size_t>(n);
  }
}

// The handlers that were there before ours (Open MPI's backtrace printer, say).
struct sigaction g_previous_segv {};
struct sigaction g_previous_bus {};
struct sigaction g_previous_abrt {};

void OnCrash(int signal) {
  const DamageMessages* scope = t_scope;
  if (scope == nullptr) {
    // Not a read of a file: an ordinary crash. The handler before ours takes it when the faulting
    // instruction runs again; an abort is raised again (delivered to it once this handler returns;
    // glibc's abort() also ends the process itself should that handler return).
    ::sigaction(signal,
                signal == SIGBUS    ? &g_previous_bus
                : signal == SIGABRT ? &g_previous_abrt
                                    : &g_previous_segv,
                nullptr);
    if (signal == SIGABRT) {
      ::raise(SIGABRT);
    }
    return;
  }
  if (t_closing) {
    WriteAll(scope->crash_closing);
    ::_exit(1);  // what was read is complete: a part of the file could not be (docs/cli.md#exit-codes)
  }
  WriteAll(scope->crash);
  ::_exit(2);  // an unreadable input (docs/cli.md#exit-codes)
}

void Watch(unsigned stall_s) {
  uint64_t seen = g_begun.load();
  unsigned still = 0;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const uint64_t now = g_begun.load();
    if (g_open.load() == 0 || now != seen) {
      seen = now;
      still = 0;
      continue;
    }
    if (++still >= stall_s) {
      if (const DamageMessages* last = g_last.load(std::memory_order_acquire); last != nullptr) {
        WriteAll(last->stall);
      }
      ::_exit(2);
    }
  }
}

}  // namespace

unsigned ReadStallSeconds() {
  // Read once (the watchdog and every file's messages use it); the default (60) is the variable's
  // declared one (core/config.cc).
  static const unsigned seconds = [] {
    const uint32_t v = EnvNumber("COMMPROF_READ_STALL_S", 0);
    return v <= 86400 ? v : 60u;
  }();
  return seconds;
}

void EnableDamageGuards() {
  struct sigaction crash {};
  crash.sa_handler = OnCrash;
  sigemptyset(&crash.sa_mask);
  ::sigaction(SIGSEGV, &crash, &g_previous_segv);
  ::sigaction(SIGBUS, &crash, &g_previous_bus);
  // glibc aborts ("free(): invalid pointer") when libhdf5 frees a pointer a damaged global heap gave it.
  ::sigaction(SIGABRT, &crash, &g_previous_abrt);
  if (g_enabled.exchange(true)) {
    return;  // the handlers again (MPI_Init installs its own), the watchdog once
  }
  if (const unsigned stall_s = ReadStallSeconds(); stall_s > 0) {
    std::thread(Watch, stall_s).detach();
  }
}

const DamageMessages& DamageMessagesOf(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<DamageMessages>>* kept =
      new std::map<std::string, std::unique_ptr<DamageMessages>>();  // never freed: handlers read them
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<DamageMessages>& m = (*kept)[path];
  if (m == nullptr) {
    m = std::make_unique<DamageMessages>();
    m->crash =
        "commprof: " + path +
        ": damaged: reading it crashed (SIGSEGV, SIGBUS or an abort), most likely inside the HDF5 library on damaged "
        "metadata; restore the file from a good copy (`h5dump -H " +
        path + "` shows what HDF5 can read of it)\n";
    m->crash_closing = "commprof: " + path +
                       ": damaged: closing it crashed inside the HDF5 library (damaged metadata); what was read "
                       "and written before is complete; restore the file from a good copy (`h5dump -H " +
                       path + "`)\n";
    m->stall = "commprof: " + path + ": damaged: reading it made no progress for " +
               std::to_string(ReadStallSeconds()) +
               " s (a damaged file can make the HDF5 library loop forever, a hung file system stall it; "
               "COMMPROF_READ_STALL_S sets the limit); restore the file from a good copy (`h5dump -H " +
               path + "`)\n";
  }
  return *m;
}

ReadScope::ReadScope(const DamageMessages& messages, bool closing) : previous_(t_scope), previous_closing_(t_closing) {
  t_scope = &messages;
  t_closing = closing;
  g_last.store(&messages, std::memory_order_release);
  g_begun.fetch_add(1, std::memory_order_relaxed);
  g_open.fetch_add(1, std::memory_order_relaxed);
}

ReadScope::~ReadScope() {
  g_open.fetch_sub(1, std::memory_order_relaxed);
  t_scope = previous_;
  t_closing = previous_closing_;
}

}  // namespace commprof::h5
