#include "collector/mpi_source.h"

#include "collector/mpi_codes.h"
#include "collector/runtime.h"

namespace commprof {

MpiSource::MpiSource(Runtime& rt, int world_rank) : rt_(rt), comms_(world_rank) {
  for (int name = 0; name < kNameEnd_; ++name) {
    const char* n = MpiCallName(static_cast<uint8_t>(name));
    names_[name] = n != nullptr ? rt_.Intern(n) : 0;
  }
  const StepEvery& every = rt_.config().capture.step_every;
  if (every.every != 0 && every.comm.empty()) {
    comms_.Lookup(MPI_COMM_WORLD)->step_every.store(every.every, std::memory_order_relaxed);
  }
}

void MpiSource::NoteCommName(MPI_Comm comm, const char* name) {
  const StepEvery& every = rt_.config().capture.step_every;
  if (every.every == 0 || every.comm.empty() || name == nullptr) {
    return;  // off, or counting MPI_COMM_WORLD whatever its name
  }
  // A renamed communicator stops counting; the one given the name starts (from its own sequence).
  comms_.Lookup(comm)->step_every.store(every.comm == name ? every.every : 0, std::memory_order_relaxed);
}

MpiSource::~MpiSource() = default;

void MpiSource::StartClockSync() {
  const Config& c = rt_.config();
  if (!c.clock_sync || clock_sync_ != nullptr) {
    return;
  }
  clock_sync_ = std::make_unique<MpiClockSync>(rt_, c.clock_sync_rounds, c.clock_sync_interval_ms);
  clock_sync_->Start();
}

MpiThreadScratch& MpiSource::Scratch() {
  ThreadState* t = rt_.Thread();
  if (t->mpi_scratch == nullptr) {
    t->mpi_scratch = std::make_unique<MpiThreadScratch>();  // once per thread
  }
  return *t->mpi_scratch;
}

}  // namespace commprof
