// The output files of the commands: checked before the work that fills them, written whole or not
// at all. Shared by `run`/`aggregate` (the HDF5 file) and `report`, `stats`, `export` (text,
// JSON, HTML, traces), so every command names the same faults the same way.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "core/status.h"

namespace commprof::cli {

enum class OutputKind {
  kRegularFile,  // must be a regular file or not exist yet (an HDF5 file)
  kStream,       // also a device, FIFO or symlink to one (/dev/null, /dev/stdout): written directly
};

// Whether `output` can be created or replaced, checked before any work is done: an empty name, a
// directory, a directory that does not exist or cannot be written in, and (kRegularFile) an
// existing file that is not a regular file. The message starts "cannot write OUTPUT: ".
Status CheckOutputTarget(const std::string& output, OutputKind kind);

// Where `run`, `aggregate` and `merge` write their HDF5 file: the output itself when nothing is
// there yet, else OUTPUT.tmp-PID beside it, renamed over the output only once written whole (so a
// failed run or merge leaves the file that was there as it was).
std::string HdfWritePath(const std::string& output);

// Writes `write`'s output to `output` ('-': stdout). A new or regular file is written beside
// itself and renamed into place when complete, so a failed write never leaves a truncated file.
// Anything else (a device such as /dev/null, a FIFO, a symlink) is written directly: renaming over
// it would replace the device or the link itself. An existing file in a directory where nothing can
// be created beside it is written in place.
Status WriteOutput(const std::string& output, const std::function<Status(std::ostream&)>& write);

// WriteOutput, telling `write` the path of the regular file its stream writes from the start
// (the file beside the output, or the output itself), which other processes may write parts of
// too; empty for stdout, a device, a FIFO or a symlink.
Status WriteOutputFile(const std::string& output,
                       const std::function<Status(std::ostream&, const std::string& file)>& write);

}  // namespace commprof::cli
