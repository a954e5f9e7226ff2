#include "cli/analysis_open.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/h5/damage_guard.h"

namespace commprof::cli {
namespace {

// Opens the file and selects the window: the same on every process of a distributed command.
// `fail_code`: the exit code of a failure (kExitUnreadable: the file cannot be read; 1: no such window).
Result<std::unique_ptr<ProfileReader>> OpenWindow(const std::string& path, int64_t window, int& fail_code) {
  fail_code = kExitUnreadable;
  auto reader = ProfileReader::Open(path);
  if (!reader.ok()) {
    return reader.status();
  }
  fail_code = 1;
  if (window >= 0) {
    COMMPROF_RETURN_IF_ERROR(reader.value()->SelectWindow(static_cast<uint64_t>(window)));
  }
  return std::move(reader.value());
}

// What a process of a distributed command sees in the file, one line per fact: the job, each
// readable rank (status, rows, shard) and each part left out. The processes split the work by
// position, so they must see the same: a node with another file at the same path, or without the
// relays' shards, would otherwise mix two views into one report without a word.
std::vector<std::string> ViewOf(const ProfileReader& reader) {
  const ProfileInfo& info = reader.info();
  std::vector<std::string> lines;
  lines.push_back("job " + info.job_id + ", world size " + std::to_string(info.world_size) + ", format version " +
                  std::to_string(info.format_version) + ", incarnation " + std::to_string(info.incarnation) +
                  (info.finalized ? ", finalized" : ", not finalized"));
  for (const RankInfo& r : info.ranks) {
    lines.push_back("rank " + std::to_string(r.rank) + ": " + r.status + ", " + std::to_string(r.event_count) +
                    " events, pid " + std::to_string(r.pid) + ", started " + std::to_string(r.start_steady_ns) +
                    (r.shard.empty() ? "" : ", in shard " + r.shard));
  }
  for (const RankFault& f : info.faults) {
    lines.push_back((f.partial ? "partly read: " : "left out: ") + f.message);
  }
  return lines;
}

std::string JoinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) {
    out += l;
    out += '\n';
  }
  return out;
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  for (std::string l; std::getline(is, l);) {
    out.push_back(l);
  }
  return out;
}

// Where two texts of lines first differ: the line's index, and that line of each (`none` past the
// end of one), for a process to name what it has that the first process has not.
struct FirstDifference {
  size_t line = 0;
  std::string here;
  std::string there;
};
FirstDifference FirstDifferenceOf(const std::string& mine, const std::string& firsts, const char* none) {
  const std::vector<std::string> a = SplitLines(mine);
  const std::vector<std::string> b = SplitLines(firsts);
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) {
    ++i;
  }
  return {i, i < a.size() ? a[i] : none, i < b.size() ? b[i] : none};
}

// True on every process when every process sees what the first does. A process that sees
// something else names the first fact that differs; the first process then says that the
// processes disagree.
bool SameViewEverywhere(const char* command, AnalysisWorld& world, const ProfileReader& reader,
                        const std::string& path) {
  const std::string mine_text = JoinLines(ViewOf(reader));
  const std::string firsts_text = world.TextFromFirst(mine_text);
  const bool same = mine_text == firsts_text;  // the text itself: a fact may hold a newline
  if (!same) {
    const FirstDifference d = FirstDifferenceOf(mine_text, firsts_text, "(nothing more)");
    std::fprintf(stderr,
                 "commprof %s (process %d of %d): %s is not what the first process reads: here \"%s\", there "
                 "\"%s\"\n",
                 command, world.rank(), world.size(), path.c_str(), d.here.c_str(), d.there.c_str());
  }
  if (world.AllOk(same)) {
    return true;
  }
  if (world.first()) {
    std::fprintf(stderr,
                 "commprof %s: the processes of this distributed %s do not read the same %s (another file at that "
                 "path, or shards some node cannot see; each such process names itself): every process must see the "
                 "same file and shards\n",
                 command, command, path.c_str());
  }
  return false;
}

// This process's arguments after the program's path, one per line ("" where /proc cannot say).
std::string OwnArguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  size_t at = raw.find('\0');  // past argv[0]: the same program may be named differently per node
  while (at != std::string::npos && at + 1 < raw.size()) {
    const size_t end = raw.find('\0', at + 1);
    out += raw.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    out += '\n';
    at = end;
  }
  return out;
}

// True on every process when every process was started with the first one's arguments. The
// processes split one piece of work, so an MPMD launch with other options on some processes
// (`mpirun -np 1 commprof stats F --ranks 0-3 : -np 2 commprof stats F`) would mix two outputs
// into one; each process that differs names itself and its first differing argument.
bool SameArgumentsEverywhere(const char* command, AnalysisWorld& world) {
  const std::string mine = OwnArguments();
  const std::string firsts = world.TextFromFirst(mine);
  const bool same = mine == firsts;
  if (!same) {
    const FirstDifference d = FirstDifferenceOf(mine, firsts, "(none)");
    std::fprintf(stderr,
                 "commprof %s (process %d of %d): started with other arguments than the first process: argument %zu "
                 "is \"%s\" here, \"%s\" there\n",
                 command, world.rank(), world.size(), d.line + 1, d.here.c_str(), d.there.c_str());
  }
  if (world.AllOk(same)) {
    return true;
  }
  if (world.first()) {
    std::fprintf(stderr,
                 "commprof %s: the processes of this distributed %s were not started with the same arguments (each "
                 "such process names itself): start every process with the same command line\n",
                 command, command);
  }
  return false;
}

}  // namespace

std::unique_ptr<AnalysisWorld> JoinAnalysis(const char* command, std::optional<int>& exit_code) {
  std::string mpi_error;
  int mpi_exit = 0;
  std::unique_ptr<AnalysisWorld> world = AnalysisWorld::JoinIfLaunched(mpi_error, mpi_exit);
  if (world != nullptr) {
    h5::EnableDamageGuards();  // MPI_Init replaced the crash handlers with its own
  }
  if (!mpi_error.empty()) {
    if (mpi_exit != 0) {  // several srun tasks without MPI: told once, by the task that exits 2
      std::fprintf(stderr, "commprof %s: %s\n", command, mpi_error.c_str());
    }
    exit_code = mpi_exit;
  }
  return world;
}

int RunAnalysisCommand(const char* command, const std::function<int(AnalysisWorld* world, bool tell)>& body) {
  std::optional<int> join_exit;
  std::unique_ptr<AnalysisWorld> world = JoinAnalysis(command, join_exit);
  if (join_exit) {
    return *join_exit;
  }
  if (world != nullptr && !SameArgumentsEverywhere(command, *world)) {
    return 2;  // bad usage (docs/cli.md#exit-codes)
  }
  const int code = body(world.get(), world == nullptr || world->first());
  return world != nullptr ? world->FromFirst(code) : code;
}

std::unique_ptr<ProfileReader> OpenEverywhere(const char* command, AnalysisWorld* world, const std::string& path,
                                              int64_t window, const std::string& output, OutputKind output_kind,
                                              int& exit_code) {
  const bool first = world == nullptr || world->first();
  // An output that cannot be written is found before the work, not after it (the first process
  // writes it: its answer is every process's).
  exit_code = 0;
  std::error_code ec;
  if (first && !output.empty() && output != "-" && std::filesystem::equivalent(path, output, ec)) {
    // `-o job.h5` (or a link to it) would destroy the profile about to be read: bad usage.
    std::fprintf(stderr, "commprof %s: -o %s is the input file; it would be overwritten\n", command, output.c_str());
    exit_code = 2;
  } else if (first && !output.empty()) {
    if (Status st = CheckOutputTarget(output, output_kind); !st.ok()) {
      std::fprintf(stderr, "commprof %s: %s\n", command, st.message().c_str());
      exit_code = 1;
    }
  }
  if (world != nullptr) {
    exit_code = world->FromFirst(exit_code);
  }
  if (exit_code != 0) {
    return nullptr;
  }
  int fail_code = 0;
  auto reader = OpenWindow(path, window, fail_code);
  if (world == nullptr) {
    if (!reader.ok()) {
      std::fprintf(stderr, "commprof %s: %s\n", command, reader.status().message().c_str());
      exit_code = fail_code;
      return nullptr;
    }
    SayUnlinkedShards(command, reader.value()->info());
    return std::move(reader.value());
  }
  // Every process read the file, or none goes on. An error every process met is told once (by the
  // first); one only some met (a file not visible on every node) by each of them.
  if (!world->AllOk(reader.ok())) {
    // The first process's code when it failed; otherwise the file cannot be read elsewhere.
    const int code = world->FromFirst(reader.ok() ? 0 : fail_code);
    const bool first_ok = code == 0;
    if (!reader.ok() && (first || first_ok)) {
      const std::string who =
          first ? "" : " (process " + std::to_string(world->rank()) + " of " + std::to_string(world->size()) + ")";
      std::fprintf(stderr, "commprof %s%s: %s\n", command, who.c_str(), reader.status().message().c_str());
    } else if (reader.ok() && first) {
      std::fprintf(stderr,
                   "commprof %s: another process of this distributed %s could not read %s (its own message, with its "
                   "process number, says why)\n",
                   command, command, path.c_str());
    }
    exit_code = first_ok ? kExitUnreadable : code;
    return nullptr;
  }
  if (!SameViewEverywhere(command, *world, *reader.value(), path)) {
    exit_code = kExitUnreadable;
    return nullptr;
  }
  if (first) {
    SayUnlinkedShards(command, reader.value()->info());
  }
  return std::move(reader.value());
}

}  // namespace commprof::cli
