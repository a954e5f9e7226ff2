#include <cstdio>
#include <ctime>
#include <string>

#include "analysis/load/profile_reader.h"
#include "analysis/report/analysis_group.h"
#include "analysis/report/job_report.h"
#include "cli/commands.h"

namespace commprof::cli {

std::string FormatUtc(uint64_t epoch_ns) {
  time_t secs = static_cast<time_t>(epoch_ns / 1000000000ull);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%09lluZ", static_cast<unsigned long long>(epoch_ns % 1000000000ull));
  return buf;
}

bool StoreAnalysis(const std::string& path, const char* command) {
  auto reader = ProfileReader::Open(path);
  if (!reader.ok()) {
    std::fprintf(stderr, "%s: analysis not stored: %s\n", command, reader.status().message().c_str());
    return false;
  }
  auto report = AnalyzeJob(*reader.value());
  reader.value().reset();  // the writer below opens the file read-write
  if (!report.ok()) {
    std::fprintf(stderr, "%s: analysis not stored: %s\n", command, report.status().message().c_str());
    return false;
  }
  Status st = WriteAnalysisGroup(path, report.value());
  if (!st.ok()) {
    std::fprintf(stderr, "%s: analysis not stored: %s\n", command, st.message().c_str());
    return false;
  }
  return true;
}

}  // namespace commprof::cli
