// Who this process is, as its launcher says in the environment: the MPI launchers (Open MPI,
// PMIx, PMI), Slurm's srun, and the torch launchers (torchrun / torch.distributed.run, and DeepSpeed
// and Accelerate, which follow its conventions; docs/torchrun.md).
//
// A torch launcher gives each worker RANK and WORLD_SIZE, with MASTER_ADDR (torchrun also
// LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK and TORCHELASTIC_*). When a worker has them, they are the
// innermost launcher's word and win over the variables an outer launcher left in its environment
// (a torchrun started by srun inherits SLURM_PROCID: its node's task number, not the worker's rank).
#pragma once

#include <cstdint>
#include <optional>

namespace commprof {

// RANK and WORLD_SIZE are set, with MASTER_ADDR, GROUP_RANK or TORCHELASTIC_RUN_ID.
bool TorchLaunched();
// The rank: RANK when TorchLaunched, else the first set of PMIX_RANK, OMPI_COMM_WORLD_RANK,
// PMI_RANK, SLURM_PROCID; nullopt when none says.
std::optional<uint32_t> LauncherRank();
// The world size: WORLD_SIZE when TorchLaunched, else the first set of OMPI_COMM_WORLD_SIZE,
// PMI_SIZE, SLURM_NTASKS; nullopt when none says.
std::optional<uint32_t> LauncherWorldSize();
// The rank's place on its node (it picks the rank's GPU and relay): LOCAL_RANK when TorchLaunched,
// else the first set of OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, LOCAL_RANK, MPI_LOCALRANKID; 0
// when none says.
uint32_t LauncherLocalRank();
// torchrun's node index (GROUP_RANK) and the number of the worker's incarnation
// (TORCHELASTIC_RESTART_COUNT: 0 first, +1 per elastic restart), when set.
std::optional<uint32_t> TorchGroupRank();
std::optional<uint32_t> TorchRestartCount();

}  // namespace commprof
