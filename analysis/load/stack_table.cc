#include "analysis/load/stack_table.h"

#include <cxxabi.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "core/h5/h5_util.h"

namespace commprof {
namespace {

using h5::Handle;
using schema::StackRow;

constexpr const char* kStacksDataset = "stacks";
constexpr size_t kAddressesPerRun = 512;  // addresses per addr2line command line

template <size_t N>
void CopyText(char (&dst)[N], const std::string& src) {
  const size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

template <size_t N>
std::string TextOf(const char (&src)[N]) {
  return std::string(src, strnlen(src, N));
}

std::string Demangle(const std::string& name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) {
    return name;
  }
  std::string s(out);
  std::free(out);
  return s;
}

// Runs `argv` with stdout captured; nullopt when it cannot be started or exits non-zero.
std::optional<std::string> RunCapture(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe(fds) != 0) {
    return std::nullopt;
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    if (FILE* null = std::fopen("/dev/null", "w")) {
      ::dup2(fileno(null), STDERR_FILENO);
    }
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) {
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return std::nullopt;
  }
  return out;
}

// One frame as recorded: module path, address, dladdr symbol.
struct RawFrame {
  uint32_t rank = 0;
  uint32_t stack = 0;
  uint32_t depth = 0;
  std::string module;
  uint64_t address = 0;
  std::string symbol;
};

Result<std::vector<RawFrame>> ReadRawFrames(const ProfileReader& reader) {
  std::vector<RawFrame> frames;
  for (const RankInfo& r : reader.info().ranks) {
    auto it = r.counters.find("stacks_unique");
    if (it == r.counters.end() || it->second == 0) {
      continue;
    }
    auto strings = reader.Strings(r.rank);
    if (!strings.ok()) {
      return strings.status();
    }
    const std::vector<std::string>& names = strings.value();
    auto text = [&](uint64_t id) { return id < names.size() ? names[id] : std::string(); };
    COMMPROF_RETURN_IF_ERROR(reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      for (const commprof_event& e : chunk) {
        if (e.kind == COMMPROF_KIND_STACK_FRAME && e.peer >= 0) {
          frames.push_back(RawFrame{r.rank, static_cast<uint32_t>(e.seq), static_cast<uint32_t>(e.peer),
                                    text(e.name_id), e.bytes, e.correlation != 0 ? text(e.correlation) : ""});
        }
      }
    }));
  }
  std::sort(frames.begin(), frames.end(), [](const RawFrame& a, const RawFrame& b) {
    return std::tie(a.rank, a.stack, a.depth) < std::tie(b.rank, b.stack, b.depth);
  });
  return frames;
}

struct Location {
  std::string function;
  std::string file;
  uint32_t line = 0;
};

// addr2line's two lines per address: FUNCTION, then FILE:LINE (`??:0`, `??:?` when unknown; a
// "(discriminator N)" suffix is dropped).
std::vector<Location> ParseAddr2line(const std::string& out, size_t expected) {
  std::vector<Location> locs;
  std::istringstream in(out);
  std::string fn;
  std::string where;
  while (locs.size() < expected && std::getline(in, fn) && std::getline(in, where)) {
    Location l;
    l.function = fn == "??" ? "" : fn;
    if (size_t sp = where.find(" ("); sp != std::string::npos) {
      where.resize(sp);
    }
    const size_t colon = where.rfind(':');
    std::string file = colon == std::string::npos ? where : where.substr(0, colon);
    std::string line = colon == std::string::npos ? "" : where.substr(colon + 1);
    if (file != "??") {
      l.file = file;
      l.line = static_cast<uint32_t>(std::strtoul(line.c_str(), nullptr, 10));
    }
    locs.push_back(std::move(l));
  }
  return locs;
}

}  // namespace

std::string StackFrameInfo::Label() const {
  char addr[32];
  std::snprintf(addr, sizeof addr, "+0x%llx", static_cast<unsigned long long>(address));
  if (!file.empty()) {
    return function + " (" + file + ":" + std::to_string(line) + ")";
  }
  const size_t slash = module.rfind('/');
  return function + " (" + (slash == std::string::npos ? module : module.substr(slash + 1)) + addr + ")";
}

bool HasStacks(const ProfileInfo& info) {
  return std::any_of(info.ranks.begin(), info.ranks.end(), [](const RankInfo& r) {
    auto it = r.counters.find("stacks_unique");
    return it != r.counters.end() && it->second > 0;
  });
}

Result<SymbolizeResult> SymbolizeStacks(const ProfileReader& reader, const SymbolizeOptions& options) {
  auto raw = ReadRawFrames(reader);
  if (!raw.ok()) {
    return raw.status();
  }
  const std::vector<RawFrame>& frames = raw.value();
  // Each unique (module, address) once.
  std::map<std::string, std::set<uint64_t>> wanted;
  for (const RawFrame& f : frames) {
    wanted[f.module].insert(f.address);
  }
  std::map<std::pair<std::string, uint64_t>, Location> found;
  SymbolizeResult result;
  std::vector<std::string> unreadable;
  std::vector<std::string> failed;  // readable, but addr2line could not read it (not ELF, damaged)
  bool run = options.run_addr2line && !wanted.empty();
  if (run && !RunCapture({options.addr2line, "--version"})) {
    run = false;
    result.notes.push_back("cannot run '" + options.addr2line +
                           "' (install binutils); frames keep their dynamic symbol and module + offset");
  }
  for (const auto& [module, addresses] : wanted) {
    if (!run) {
      break;
    }
    if (::access(module.c_str(), R_OK) != 0) {
      unreadable.push_back(module);
      continue;
    }
    std::vector<uint64_t> list(addresses.begin(), addresses.end());
    for (size_t at = 0; at < list.size(); at += kAddressesPerRun) {
      const size_t n = std::min(kAddressesPerRun, list.size() - at);
      std::vector<std::string> argv = {options.addr2line, "-f", "-C", "-e", module};
      for (size_t i = 0; i < n; ++i) {
        char hex[32];
        std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(list[at + i]));
        argv.emplace_back(hex);
      }
      auto out = RunCapture(argv);
      if (!out) {
        failed.push_back(module);
        break;
      }
      std::vector<Location> locs = ParseAddr2line(*out, n);
      for (size_t i = 0; i < locs.size(); ++i) {
        found[{module, list[at + i]}] = std::move(locs[i]);
      }
    }
  }
  if (!failed.empty()) {
    result.notes.push_back(options.addr2line + " could not read " + std::to_string(failed.size()) +
                           " module file(s) (first: " + failed.front() + "); their frames keep module + offset");
  }
  if (!unreadable.empty()) {
    result.notes.push_back(std::to_string(unreadable.size()) + " module file(s) not readable here (first: " +
                           unreadable.front() + "); their frames keep module + offset");
  }
  result.rows.reserve(frames.size());
  for (const RawFrame& f : frames) {
    StackRow row{};
    row.rank = f.rank;
    row.stack_id = f.stack;
    row.depth = f.depth;
    row.address = f.address;
    CopyText(row.module, f.module);
    std::string function = f.symbol.empty() ? "??" : Demangle(f.symbol);
    if (auto it = found.find({f.module, f.address}); it != found.end()) {
      if (!it->second.function.empty()) {
        function = it->second.function;
      }
      CopyText(row.file, it->second.file);
      row.line = it->second.line;
    }
    CopyText(row.function, function);
    result.rows.push_back(row);
  }
  return result;
}

Status WriteStacksTable(const std::string& path, const std::vector<StackRow>& rows) {
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  if (!file.valid()) {
    return IoError(path + ": cannot open for writing /stacks");
  }
  if (H5Lexists(file.get(), kStacksDataset, H5P_DEFAULT) > 0 &&
      H5Ldelete(file.get(), kStacksDataset, H5P_DEFAULT) < 0) {
    return IoError(path + ": cannot replace /stacks");
  }
  Handle type = h5::BuildCompound(sizeof(StackRow), schema::TableOf<StackRow>::kColumns);
  hsize_t dims[1] = {rows.size()};
  Handle space(H5Screate_simple(1, dims, nullptr));
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (!rows.empty()) {
    hsize_t chunk = std::min<hsize_t>(4096, rows.size());
    H5Pset_chunk(dcpl.get(), 1, &chunk);
    H5Pset_deflate(dcpl.get(), 1);  // the text columns are mostly NUL padding
  }
  Handle d(H5Dcreate2(file.get(), kStacksDataset, type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!d.valid() || (!rows.empty() && H5Dwrite(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) < 0)) {
    return IoError(path + ": writing /stacks failed");
  }
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) {
    return IoError(path + ": flushing /stacks failed");
  }
  return Status::Ok();
}

Result<std::vector<StackRow>> ReadStacksTable(const std::string& path) {
  h5::QuietErrors();
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) {
    return IoError(path + ": cannot open");
  }
  if (H5Lexists(file.get(), kStacksDataset, H5P_DEFAULT) <= 0) {
    return NotFound(path + ": /stacks does not exist");
  }
  Handle d(H5Dopen2(file.get(), kStacksDataset, H5P_DEFAULT));
  Handle space(H5Dget_space(d.get()));
  if (!d.valid() || H5Sget_simple_extent_ndims(space.get()) != 1) {
    return Corrupt(path + ": /stacks is not a 1-D table");
  }
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  std::vector<StackRow> rows(static_cast<size_t>(n));
  Handle type = h5::BuildCompound(sizeof(StackRow), schema::TableOf<StackRow>::kColumns);
  if (n > 0 && H5Dread(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) < 0) {
    return Corrupt(path + ": /stacks: cannot read");
  }
  return rows;
}

Result<StackMap> LoadStacks(const ProfileReader& reader) {
  StackMap map;
  if (!HasStacks(reader.info())) {
    return map;
  }
  std::vector<StackRow> rows;
  auto stored = ReadStacksTable(reader.info().path);
  if (stored.ok()) {
    rows = std::move(stored.value());
  } else if (stored.status().code() == StatusCode::kNotFound) {
    SymbolizeOptions plain;
    plain.run_addr2line = false;
    auto symbolized = SymbolizeStacks(reader, plain);
    if (!symbolized.ok()) {
      return symbolized.status();
    }
    rows = std::move(symbolized.value().rows);
  } else {
    return stored.status();
  }
  for (const StackRow& row : rows) {
    std::vector<StackFrameInfo>& frames = map[{row.rank, row.stack_id}];
    if (frames.size() <= row.depth) {
      frames.resize(row.depth + 1);
    }
    frames[row.depth] =
        StackFrameInfo{TextOf(row.function), TextOf(row.file), row.line, TextOf(row.module), row.address};
  }
  return map;
}

}  // namespace commprof
