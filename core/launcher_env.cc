#include "core/launcher_env.h"

#include <cstdlib>
#include <initializer_list>

namespace commprof {
namespace {

// A decimal number below 2^32 in `name`, or nullopt (unset, empty or not a number).
std::optional<uint32_t> Number(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    return std::nullopt;
  }
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (end == nullptr || *end != '\0' || n > 0xffffffffULL || *v == '-') {
    return std::nullopt;
  }
  return static_cast<uint32_t>(n);
}

std::optional<uint32_t> First(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto n = Number(name)) {
      return n;
    }
  }
  return std::nullopt;
}

bool Set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

}  // namespace

bool TorchLaunched() {
  return Number("RANK").has_value() && Number("WORLD_SIZE").has_value() &&
         (Set("MASTER_ADDR") || Set("GROUP_RANK") || Set("TORCHELASTIC_RUN_ID"));
}

std::optional<uint32_t> LauncherRank() {
  if (TorchLaunched()) {
    return Number("RANK");
  }
  return First({"PMIX_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
}

std::optional<uint32_t> LauncherWorldSize() {
  if (TorchLaunched()) {
    return Number("WORLD_SIZE");
  }
  return First({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
}

uint32_t LauncherLocalRank() {
  if (TorchLaunched()) {
    if (auto n = Number("LOCAL_RANK")) {
      return *n;
    }
  }
  return First({"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK", "MPI_LOCALRANKID"}).value_or(0);
}

std::optional<uint32_t> TorchGroupRank() { return TorchLaunched() ? Number("GROUP_RANK") : std::nullopt; }

std::optional<uint32_t> TorchRestartCount() {
  return TorchLaunched() ? Number("TORCHELASTIC_RESTART_COUNT") : std::nullopt;
}

}  // namespace commprof
