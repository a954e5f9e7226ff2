// Who a process is by its launcher's environment (core/launcher_env.h): MPI and Slurm variables,
// and a torch launcher's, which win when a worker has them (docs/torchrun.md).
#include "core/launcher_env.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace commprof {
namespace {

// Sets the variables for one test and clears every launcher variable afterwards.
class LauncherEnv : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* v :
         {"PMIX_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
          "SLURM_NTASKS", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK", "MPI_LOCALRANKID", "RANK",
          "WORLD_SIZE", "MASTER_ADDR", "GROUP_RANK", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"}) {
      ::unsetenv(v);
    }
  }
  static void Set(const char* name, const char* value) { ::setenv(name, value, 1); }
};

TEST_F(LauncherEnv, NothingSetSaysNothing) {
  EXPECT_FALSE(TorchLaunched());
  EXPECT_FALSE(LauncherRank().has_value());
  EXPECT_FALSE(LauncherWorldSize().has_value());
  EXPECT_EQ(LauncherLocalRank(), 0u);
  EXPECT_FALSE(TorchGroupRank().has_value());
}

TEST_F(LauncherEnv, MpiAndSlurmVariablesInTheirOrder) {
  Set("SLURM_PROCID", "7");
  Set("SLURM_NTASKS", "16");
  EXPECT_EQ(LauncherRank(), std::optional<uint32_t>(7));
  EXPECT_EQ(LauncherWorldSize(), std::optional<uint32_t>(16));
  Set("OMPI_COMM_WORLD_RANK", "3");
  Set("OMPI_COMM_WORLD_SIZE", "4");
  EXPECT_EQ(LauncherRank(), std::optional<uint32_t>(3));
  EXPECT_EQ(LauncherWorldSize(), std::optional<uint32_t>(4));
  Set("PMIX_RANK", "x");  // not a number: the next one
  EXPECT_EQ(LauncherRank(), std::optional<uint32_t>(3));
  Set("SLURM_LOCALID", "6");
  EXPECT_EQ(LauncherLocalRank(), 6u);
  Set("OMPI_COMM_WORLD_LOCAL_RANK", "2");
  EXPECT_EQ(LauncherLocalRank(), 2u);
}

// torchrun started by srun: the worker inherits its agent's SLURM_PROCID (the node's task) and
// SLURM_LOCALID, and gets its own RANK, WORLD_SIZE and LOCAL_RANK: those are the worker's.
TEST_F(LauncherEnv, ATorchWorkersOwnVariablesWinOverAnOuterLaunchers) {
  Set("SLURM_PROCID", "1");
  Set("SLURM_NTASKS", "2");
  Set("SLURM_LOCALID", "0");
  Set("PMIX_RANK", "1");
  Set("RANK", "5");
  Set("WORLD_SIZE", "8");
  Set("LOCAL_RANK", "1");
  Set("GROUP_RANK", "1");
  Set("TORCHELASTIC_RESTART_COUNT", "2");
  Set("MASTER_ADDR", "node0");
  EXPECT_TRUE(TorchLaunched());
  EXPECT_EQ(LauncherRank(), std::optional<uint32_t>(5));
  EXPECT_EQ(LauncherWorldSize(), std::optional<uint32_t>(8));
  EXPECT_EQ(LauncherLocalRank(), 1u);
  EXPECT_EQ(TorchGroupRank(), std::optional<uint32_t>(1));
  EXPECT_EQ(TorchRestartCount(), std::optional<uint32_t>(2));
}

TEST_F(LauncherEnv, RankAloneIsNotATorchLauncher) {
  Set("RANK", "3");  // a variable many scripts set for their own reasons
  Set("WORLD_SIZE", "4");
  Set("SLURM_PROCID", "1");
  EXPECT_FALSE(TorchLaunched());
  EXPECT_EQ(LauncherRank(), std::optional<uint32_t>(1));
  EXPECT_FALSE(TorchRestartCount().has_value());
  Set("TORCHELASTIC_RUN_ID", "job-1");  // torchrun's own mark
  EXPECT_TRUE(TorchLaunched());
  EXPECT_EQ(LauncherRank(), std::optional<uint32_t>(3));
  Set("RANK", "-1");  // not a rank
  EXPECT_FALSE(TorchLaunched());
}

}  // namespace
}  // namespace commprof
