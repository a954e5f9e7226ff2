// A guard for reading files whose HDF5 metadata may be damaged. Debian's libhdf5 (1.10) can crash
// (SIGSEGV in H5O_attr_exists_cb, H5T__conv_vlen; an abort in glibc's free() of a pointer a damaged
// global heap gave it) or loop forever (H5HG__cache_heap_deserialize)
// on a corrupt object header or global heap, below any error return we could check
// (tests/fuzz/README.md, "Findings"). Once EnableDamageGuards() ran, a crash inside a ReadScope, or
// a ReadScope that stays open COMMPROF_READ_STALL_S seconds (default 60) without a new scope
// beginning anywhere, ends the process with exit code 2 and one line naming the file, instead of a
// bare "Segmentation fault" or a command that never returns. A crash outside every ReadScope stays
// an ordinary crash (the default action: exit 139, a core dump where enabled).
//
// Off until EnableDamageGuards(): the commprof command turns it on at start; tests and fuzz targets,
// which must see a crash as a crash, leave it off.
#pragma once

#include <string>

namespace commprof::h5 {

// Installs the SIGSEGV/SIGBUS/SIGABRT handlers (again: MPI_Init replaces them; a crash outside every
// ReadScope goes to the handler that was there before) and, the first time, starts the stall
// watchdog (a thread that looks once a second) for this process.
void EnableDamageGuards();

// The lines a damaged file is reported with, made once per file (a signal handler only writes).
struct DamageMessages {
  std::string crash;
  std::string stall;
  std::string crash_closing;  // a crash while the file is closed, after everything was read
};
// Those of `path`, made at the first call and kept for the life of the process (a signal handler or
// the watchdog may read them at any time).
const DamageMessages& DamageMessagesOf(const std::string& path);

// HDF5 reads of one file on this thread from construction to destruction. Cheap: atomic stores,
// no system call (the readers open one per chunk read).
class ReadScope {
 public:
  // `closing`: the scope closes the file after its reads. A crash there (libhdf5 flushing a damaged
  // metadata cache) comes after the command read what it needed and wrote its output: told with
  // crash_closing and exit code 1 (a part of the file could not be read), not 2.
  explicit ReadScope(const DamageMessages& messages, bool closing = false);
  ~ReadScope();
  ReadScope(const ReadScope&) = delete;
  ReadScope& operator=(const ReadScope&) = delete;

 private:
  const DamageMessages* previous_;
  bool previous_closing_;
};

// COMMPROF_READ_STALL_S: seconds a read may stall before it is called a damaged file (default 60,
// 0: never; at most 86400), read once per process.
unsigned ReadStallSeconds();

}  // namespace commprof::h5
