// A fuzz input as a file: the readers under test (the Kineto importer, the HDF5 profile reader)
// take paths, as `commprof` hands them what the user named, so each input is written to a file of
// this process in /dev/shm (memory, no disk wear at millions of inputs; $TMPDIR where /dev/shm is
// missing) and read back through the reader's real entry point.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace commprof::fuzz {

// A directory of this process, made once and removed at exit.
inline const std::filesystem::path& ScratchDir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec) ? std::filesystem::path("/dev/shm")
                                                                               : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("commprof-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    static const std::filesystem::path to_remove = d;
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(to_remove, ignored);
    });
    return d;
  }();
  return dir;
}

// Replaces `path` with exactly these bytes; false (and the input is skipped) if it cannot.
inline bool WriteBytes(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  bool ok = size == 0 || std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

}  // namespace commprof::fuzz
