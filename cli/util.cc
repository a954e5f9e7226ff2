#include <malloc.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"
#include "analysis/load/profile_reader.h"
#include "analysis/load/stack_table.h"
#include "analysis/report/analysis_group.h"
#include "analysis/report/job_report.h"
#include "cli/commands.h"

namespace commprof::cli {

bool ParseRankList(const std::string& spec, std::vector<uint32_t>& out) {
  std::set<uint32_t> ranks;
  size_t pos = 0;
  auto number = [](const std::string& s, uint32_t& v) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    v = static_cast<uint32_t>(std::stoul(s));
    return true;
  };
  while (true) {
    const size_t comma = spec.find(',', pos);
    const std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t dash = item.find('-');
    uint32_t lo = 0, hi = 0;
    if (dash == std::string::npos) {
      if (!number(item, lo)) {
        return false;
      }
      hi = lo;
    } else if (!number(item.substr(0, dash), lo) || !number(item.substr(dash + 1), hi) || hi < lo ||
               hi - lo > 1000000) {
      return false;
    }
    for (uint32_t r = lo; r <= hi; ++r) {
      ranks.insert(r);
    }
    if (comma == std::string::npos) {
      break;
    }
    pos = comma + 1;
  }
  out.assign(ranks.begin(), ranks.end());
  return !out.empty();
}

std::string FormatUtc(uint64_t epoch_ns) {
  time_t secs = static_cast<time_t>(epoch_ns / 1000000000ull);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%09lluZ", static_cast<unsigned long long>(epoch_ns % 1000000000ull));
  return buf;
}

void AddCompressionOptions(CLI::App* sub, CompressionChoice& choice) {
  auto* codec = sub->add_option("--compression", choice.codec,
                                "events tables: lz4 (shuffle + LZ4, the default), deflate, deflate:N (N = 1-9) "
                                "or none (docs/file-format.md#compression)")
                    ->check(CLI::Validator(
                        [](const std::string& value) -> std::string {
                          return ParseCompression(value) ? std::string()
                                                         : "'" + value + "' is not lz4, deflate, deflate:N or none";
                        },
                        "CODEC", "compression"))
                    ->type_name("CODEC")
                    ->capture_default_str();
  sub->add_option("--deflate", choice.deflate, "the older spelling: --deflate N = --compression deflate:N, 0 = none")
      ->check(CLI::Range(0, 9))
      ->excludes(codec);
}

WriterOptions ResolveCompression(const CompressionChoice& choice) {
  if (choice.deflate == 0) {
    return *ParseCompression("none");
  }
  if (choice.deflate > 0) {
    return *ParseCompression("deflate:" + std::to_string(choice.deflate));
  }
  auto parsed = ParseCompression(choice.codec);
  return parsed ? *parsed : WriterOptions{};
}

namespace {

// A whole number in [lo, hi], or a message naming the option, the value and the range (CLI11's own
// Range says "not in range" of a value that is not a number at all).
CLI::Validator WholeNumberIn(uint64_t lo, uint64_t hi, const std::string& what) {
  return CLI::Validator(
      [lo, hi, what](const std::string& value) -> std::string {
        const bool digits =
            !value.empty() && value.size() <= 19 && value.find_first_not_of("0123456789") == std::string::npos;
        const uint64_t v = digits ? std::stoull(value) : 0;
        return digits && v >= lo && v <= hi
                   ? std::string()
                   : "'" + value + "' is not " + what + " from " + std::to_string(lo) + " to " + std::to_string(hi);
      },
      "N", what);
}

}  // namespace

void AddQueueOption(CLI::App* sub, uint64_t& queue_mb) {
  sub->add_option("--queue-mb", queue_mb,
                  "events received and not yet written, at most (MiB); beyond it the aggregator reads no more "
                  "until the writer catches up (docs/scale.md#back-pressure)")
      ->check(WholeNumberIn(1, uint64_t{1} << 20, "a number of MiB"))
      ->capture_default_str();
}

void AddFlushOption(CLI::App* sub, uint32_t& flush_ms, const char* help) {
  sub->add_option("--flush-ms", flush_ms, help)
      ->check(WholeNumberIn(1, kMaxFlushMs, "a number of milliseconds"))
      ->type_name("MS")
      ->capture_default_str();
}

void AddGraceOption(CLI::App* sub, double& grace_s, const char* help) {
  sub->add_option("--grace", grace_s, help)
      ->check(CLI::Validator(
          [](const std::string& value) -> std::string {
            // Decimal only: strtod would also take " 5", "0x10" and "inf".
            char* end = nullptr;
            const double v = std::strtod(value.c_str(), &end);
            const bool decimal = !value.empty() && value.find_first_not_of("0123456789.eE+-") == std::string::npos &&
                                 (std::isdigit(static_cast<unsigned char>(value[0])) != 0 || value[0] == '.');
            const bool number = decimal && end != nullptr && *end == '\0' && std::isfinite(v);
            return number && v >= 0 && v <= kMaxGraceS
                       ? std::string()
                       : "'" + value + "' is not a number of seconds from 0 to " + std::to_string(kMaxGraceS);
          },
          "SECONDS", "grace"))
      ->type_name("SECONDS")
      ->capture_default_str();
}

void AddWindowOption(CLI::App* sub, int64_t& window) {
  sub->add_option("--window", window,
                  "only capture window K of each rank (run --schedule/--delay/--duration; docs/cli.md)")
      // Our own check: CLI11's NonNegativeNumber prints its range as 0 to DBL_MAX, 300 digits.
      ->check(CLI::Validator(
          [](const std::string& value) -> std::string {
            const bool digits = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
            return digits && value.size() <= 18 ? std::string()
                                                : "'" + value + "' is not a window index (0, 1, 2, ...)";
          },
          "K", "window index"))
      ->type_name("K");
}

std::unique_ptr<ProfileReader> OpenOrSay(const std::string& path, const char* command) {
  auto reader = ProfileReader::Open(path);
  if (!reader.ok()) {
    std::fprintf(stderr, "commprof %s: %s\n", command, reader.status().message().c_str());
    return nullptr;
  }
  if (std::string_view(command) != "info") {  // info shows them in its own listing
    SayUnlinkedShards(command, reader.value()->info());
  }
  return std::move(reader.value());
}

std::string FaultOfFile(const std::string& path, const std::string& fault) {
  return fault.starts_with(path + ": ") ? fault : path + ": " + fault;
}

void SayIf(bool tell, const char* format, ...) {
  if (!tell) {
    return;
  }
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
}

bool SelectWindowIfAsked(ProfileReader& reader, int64_t window, const char* command) {
  if (window < 0) {
    return true;
  }
  Status st = reader.SelectWindow(static_cast<uint64_t>(window));
  if (!st.ok()) {
    std::fprintf(stderr, "commprof %s: %s\n", command, st.message().c_str());
    return false;
  }
  return true;
}

namespace {

// The file itself, a symbolic link to it followed (absolute; as given when it cannot be resolved):
// what lies beside it (FILE.shards, FILE.spool) lies beside the file the link leads to.
std::filesystem::path RealFileOf(const std::string& path) {
  std::error_code ec;
  std::filesystem::path real = std::filesystem::canonical(path, ec);
  return ec ? std::filesystem::absolute(path, ec) : real;
}

}  // namespace

std::string ShardDirOf(const ProfileInfo& info) {
  namespace fs = std::filesystem;
  const fs::path real = RealFileOf(info.path);
  for (const RankInfo& r : info.ranks) {
    if (!r.shard.empty()) {
      const fs::path target(r.shard);
      return (target.is_absolute() ? target.parent_path() : real.parent_path() / target.parent_path()).string();
    }
  }
  return real.string() + ".shards";
}

std::vector<std::string> UnlinkedShards(const ProfileInfo& info) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  const std::string dir = ShardDirOf(info);
  if (info.finalized) {
    // The writer named the shards whose part of a rank it did not join (unjoined_shards).
    for (const std::string& name : info.unjoined_shards) {
      out.push_back((fs::path(dir) / name).string());
    }
    return out;
  }
  std::set<std::string> linked;
  for (const RankInfo& r : info.ranks) {
    if (!r.shard.empty()) {
      linked.insert(fs::path(r.shard).filename().string());
    }
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".h5") && linked.count(name) == 0) {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> KeptSpools(const ProfileInfo& info) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(RealFileOf(info.path).string() + ".spool", ec)) {
    if (e.path().extension() == ".cpspool") {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void SayUnlinkedShards(const char* command, const ProfileInfo& info) {
  if (const std::vector<std::string> spools = KeptSpools(info); !spools.empty()) {
    const std::string dir = std::filesystem::path(spools.front()).parent_path().string();
    std::fprintf(stderr,
                 "commprof %s: warning: %s: %zu spool file(s) in %s hold events of its ranks that are not in it "
                 "(ranks that could not reach a relay or the aggregator); `commprof merge %s -o REST.h5` makes a "
                 "file of them\n",
                 command, info.path.c_str(), spools.size(), dir.c_str(), dir.c_str());
  }
  const std::vector<std::string> loose = UnlinkedShards(info);
  const std::string dir = ShardDirOf(info);
  if (!loose.empty() && info.finalized) {
    std::fprintf(stderr,
                 "commprof %s: warning: %s: %zu shard file(s) in %s hold a part of ranks that this file takes "
                 "from elsewhere (their relay ended mid-run), not joined here; each is a commprof file of its "
                 "node's ranks, e.g. %s\n",
                 command, info.path.c_str(), loose.size(), dir.c_str(), loose.front().c_str());
  } else if (!loose.empty()) {
    std::fprintf(stderr,
                 "commprof %s: warning: %s: %zu shard file(s) in %s hold ranks not linked into this file (its "
                 "writer ended before the relays finished); each is a commprof file of its node's ranks, e.g. %s\n",
                 command, info.path.c_str(), loose.size(), dir.c_str(), loose.front().c_str());
  }
}

namespace {
struct sigaction g_xfsz_at_start {};
bool g_xfsz_saved = false;
}  // namespace

void IgnoreFileSizeSignal() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  g_xfsz_saved = ::sigaction(SIGXFSZ, &ignore, &g_xfsz_at_start) == 0;
}

void RestoreStartSignals() {
  if (g_xfsz_saved) {
    ::sigaction(SIGXFSZ, &g_xfsz_at_start, nullptr);
  }
}

// Async-signal-safe (it runs between fork and exec in a multi-threaded process).
void CloseDescriptorsAbove2() {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 3u, ~0u, 0u) == 0) {
    return;
  }
#endif
  for (int fd = 3; fd < 65536; ++fd) {
    ::close(fd);
  }
}

// `--stacks` frames are symbolized once, into /stacks, before the analysis reads them. A failure
// leaves the analysis with the collector's own names; it never fails the command.
void StoreStacks(const std::string& path, const char* command) {
  auto reader = ProfileReader::Open(path);
  if (!reader.ok() || !HasStacks(reader.value()->info())) {
    return;
  }
  auto symbolized = SymbolizeStacks(*reader.value());
  reader.value().reset();  // the writer below opens the file read-write
  if (!symbolized.ok()) {
    std::fprintf(stderr, "%s: call stacks not symbolized: %s\n", command, symbolized.status().message().c_str());
    return;
  }
  for (const std::string& note : symbolized.value().notes) {
    std::fprintf(stderr, "%s: call stacks: %s\n", command, note.c_str());
  }
  if (Status st = WriteStacksTable(path, symbolized.value().rows); !st.ok()) {
    std::fprintf(stderr, "%s: call stacks not stored: %s\n", command, st.message().c_str());
  }
}

// The analysis builds and drops large tables (decoded chunks, instances, per-rank passes), each up
// to some MiB. glibc serves those from fresh mmap()s and unmaps them when freed, so the next one
// faults its pages in again (about a microsecond a page on a VM): a tenth of a report went there.
// Kept in the heap instead, freed memory is reused; what is free above 256 MiB still goes back.
void KeepFreedMemoryForReuse() {
  (void)mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the largest glibc takes; bigger blocks are still mapped
  (void)mallopt(M_TRIM_THRESHOLD, 256 << 20);
  (void)mallopt(M_TOP_PAD, 16 << 20);
}

Status StoreAnalysisOrSayWhyNot(const std::string& path, const char* command, const std::string& shown_path) {
  KeepFreedMemoryForReuse();  // collection is over
  StoreStacks(path, command);
  auto reader = ProfileReader::Open(path);
  if (!reader.ok()) {
    return reader.status();
  }
  auto report = AnalyzeJob(*reader.value());
  reader.value().reset();  // the writer below opens the file read-write
  if (!report.ok()) {
    return report.status();
  }
  if (!shown_path.empty()) {
    report.value().info.path = shown_path;  // a copy stands in for it (background_analysis.h)
  }
  return WriteAnalysisGroup(path, report.value());
}

bool StoreAnalysis(const std::string& path, const char* command, const std::string& shown_path) {
  Status st = StoreAnalysisOrSayWhyNot(path, command, shown_path);
  if (!st.ok()) {
    std::fprintf(stderr, "%s: analysis not stored: %s\n", command, st.message().c_str());
  }
  return st.ok();
}

}  // namespace commprof::cli
