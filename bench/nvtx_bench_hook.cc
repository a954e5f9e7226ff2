// NVTX load step 4 for commprof_bench_nvtx: a strong InitializeInjectionNvtx2_fnptr overrides the
// nvtx3 headers' weak one, so the headers' own init hands our injection its export table. In a
// file of its own because, in C++, the headers' weak declaration is itself a definition.
#include "collector/nvtx_injection.h"

extern "C" {
int (*InitializeInjectionNvtx2_fnptr)(commprof::nvtx_abi::GetExportTableFunc) = &InitializeInjectionNvtx2;
}
