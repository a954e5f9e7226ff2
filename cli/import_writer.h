// Writes an imported job (analysis/load/kineto_import.h) through the one HDF5 writer the
// aggregator and `commprof merge` use, so `report`, `check` and `export` read it unchanged.
#pragma once

#include <string>

#include "analysis/load/kineto_import.h"
#include "core/status.h"

namespace commprof::cli {

Status WriteImportedJob(const kineto::ImportedJob& job, const std::string& path, const std::string& command_line);

}  // namespace commprof::cli
