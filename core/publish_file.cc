#include "core/publish_file.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace commprof {

bool PublishLine(const std::string& path, std::string_view line) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!(out << line << "\n")) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace commprof
