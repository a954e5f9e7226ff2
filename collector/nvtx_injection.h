// The NVTX injection entry points libcommprof.so exports (collector/exports.map), and the C++
// functions behind them that tests call directly.
#pragma once

#include "collector/nvtx_abi.h"

#define COMMPROF_NVTX_EXPORT __attribute__((visibility("default")))

namespace commprof {

// Installs our handlers into the CORE and CORE2 tables of the module whose export table this is;
// 1 on success (NVTX's convention), 0 when the table is unusable.
int InstallNvtxHandlers(nvtx_abi::GetExportTableFunc get_export_table);
// Fills the payload extension's slots (schema/enum registration, payload push/pop); 1 on success,
// 0 for other extension modules.
int InstallNvtxPayloadExtension(nvtx_abi::ExtModuleInfo* info);

}  // namespace commprof

extern "C" {
COMMPROF_NVTX_EXPORT int InitializeInjectionNvtx2(commprof::nvtx_abi::GetExportTableFunc get_export_table);
COMMPROF_NVTX_EXPORT int InitializeInjectionNvtxExtension(commprof::nvtx_abi::ExtModuleInfo* info);
}
