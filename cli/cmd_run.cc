// `commprof run [-o FILE.h5] [--] LAUNCHER ARGS...`: profile a job.
//
// Starts the embedded aggregator (an Ingest writer thread plus an Asio server on a free port),
// makes a per-job secret, hands the ranks COMMPROF_* variables and LD_PRELOAD (`-x` for Open MPI's
// mpirun/mpiexec, the environment otherwise), waits for the job, lets the ranks' last frames
// arrive, ingests any spool files the ranks left, finalizes the file and returns the job's code.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "cli/background_analysis.h"
#include "cli/collection.h"
#include "cli/commands.h"
#include "core/capture_options.h"
#include "core/clock.h"
#include "core/clock_domain.h"
#include "core/config.h"
#include "core/log.h"

extern char** environ;

namespace commprof::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string output;
  std::vector<std::string> command;
  std::string listen = "127.0.0.1";
  std::string advertise;
  std::string spool_dir;
  std::string library;
  CompressionChoice compression;
  uint64_t queue_mb = 256;
  double grace_s = 10.0;
  uint32_t flush_ms = 1000;
  bool quiet = false;
  AnalysisOptions analysis;  // --analysis, --no-analysis
  std::string activities = "all";
  uint32_t activity_mask = kActivityAll;
  CaptureTexts capture;            // --schedule, --delay, --duration, --step-range, --step-every as given
  int stacks = 0;                  // --stacks[=DEPTH]: call-site frames per API call (0: off)
  std::string hang_timeout = "0";  // --hang-timeout, checked by ParseHangOptions
  std::string on_hang = "report";
  std::string relay = "off";  // --relay off|node|N (docs/scale.md#relays)
};

// --relay as COMMPROF_RELAY's value: "" for off, "node", or N >= 1; false for anything else.
bool ParseRelay(const std::string& text, std::string& env_value) {
  if (text == "off" || text == "0") {
    env_value.clear();
    return true;
  }
  if (text == "node") {
    env_value = text;
    return true;
  }
  // Decimal digits only (no sign, no space): "00" is off like "0"; N is 1 to 4294967295.
  if (text.empty() || text.size() > 10 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  const unsigned long long n = std::stoull(text);
  if (n == 0) {
    env_value.clear();
    return true;
  }
  if (n > 0xffffffffULL) {
    return false;
  }
  env_value = std::to_string(n);
  return true;
}

// The --compression a relay gets: the same as this run's.
std::string CompressionArgument(const CompressionChoice& c) {
  if (c.deflate == 0) {
    return "none";
  }
  if (c.deflate > 0) {
    return "deflate:" + std::to_string(c.deflate);
  }
  return c.codec;
}

std::vector<std::string> g_after_dash_dash;

// SIGINT/SIGTERM sent to `commprof run` are passed on to the job by the waiting loop
// (WaitForJob), not here: a terminal's Ctrl-C, `timeout`, or Slurm signal the whole process group,
// so the launcher got the signal itself, and a second copy from us makes Open MPI's mpirun kill its
// ranks at once, before their collectors store what they were blocked in (docs/hangs.md).
volatile sig_atomic_t g_signal = 0;        // the last one received
volatile sig_atomic_t g_signal_count = 0;  // how many
void NoteSignal(int sig) {
  g_signal = sig;
  g_signal_count = g_signal_count + 1;
}

std::string FindLibrary(const Options& o) {
  if (!o.library.empty()) {
    return fs::absolute(o.library).string();
  }
  if (const char* env = std::getenv("COMMPROF_LIBRARY")) {
    return env;
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    // An install (cmake --install: <prefix>/bin and <prefix>/<libdir>), then the build tree.
    candidates = {exe.parent_path() / ".." / COMMPROF_INSTALL_LIBDIR / "libcommprof.so",
                  exe.parent_path() / "../lib/libcommprof.so", exe.parent_path() / "libcommprof.so",
                  exe.parent_path() / "../collector/libcommprof.so"};
  }
  candidates.emplace_back(COMMPROF_BUILD_LIBRARY);
  for (const auto& c : candidates) {
    if (fs::exists(c, ec)) {
      return fs::canonical(c, ec).string();
    }
  }
  return {};
}

bool IsOpenMpiLauncher(const std::string& arg0) {
  std::string base = fs::path(arg0).filename().string();
  return base == "mpirun" || base == "mpiexec" || base == "orterun" || base == "oshrun";
}

std::string JoinCommand(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) {
      s += ' ';
    }
    bool plain = !a.empty() && a.find_first_of(" \t\"'\\$") == std::string::npos;
    s += plain ? a : "'" + a + "'";
  }
  return s;
}

// The NCCL profiler plugin that goes with `library`: next to it (an install) or in the build
// tree's nccl_hooks/ beside collector/. Empty when there is none.
std::string FindNcclPlugin(const std::string& library) {
  std::error_code ec;
  fs::path dir = fs::path(library).parent_path();
  for (const fs::path& c : {dir / "libnccl-profiler-commprof.so", dir / "../nccl_hooks/libnccl-profiler-commprof.so"}) {
    if (fs::exists(c, ec)) {
      return fs::canonical(c, ec).string();
    }
  }
  return {};
}

// `commprof run`'s exit code when the job ended and no rank reached the aggregator or left a spool
// (docs/cli.md, Exit codes): the file holds no rank, which must not pass for a profile.
constexpr int kExitNothingRecorded = 4;
// --on-hang abort ended the job after a hang was found (docs/cli.md, Exit codes): the job's own code
// is then a signal's, which would hide why it ended.
constexpr int kExitHangAborted = 5;
// After a hang-abort the ranks end themselves; a job still there after this long is terminated.
constexpr auto kHangAbortGrace = std::chrono::seconds(10);
constexpr auto kHangKillGrace = std::chrono::seconds(5);
constexpr auto kSignalForwardDelay = std::chrono::seconds(5);
// The command could not be started (not found, not executable): the shell's code for it.
constexpr int kExitCannotStart = 127;

// No rank connected (none was refused either: a refusal is reported as it happens): says what was
// preloaded into the job and what to check, since a job that does not load or call us otherwise
// looks exactly like a successful one.
void ReportNothingRecorded(const Options& o, const std::string& library, const std::string& preload,
                           const std::vector<std::pair<std::string, std::string>>& vars, bool openmpi, int job_rc,
                           bool previous_kept) {
  std::string names;
  for (const auto& kv : vars) {
    names += (names.empty() ? "" : " ") + kv.first;
  }
  std::string unreadable;
  if (::access(library.c_str(), R_OK) != 0) {
    unreadable = std::string(" (it cannot be read now: ") + std::strerror(errno) + ")";
  }
  if (job_rc != 0 && unreadable.empty()) {
    // A failed job that recorded nothing most often never started its ranks (a launcher refusing
    // root, too few slots, a program not found): its own messages above say why, and the
    // checklist below would point away from them.
    std::fprintf(stderr,
                 "commprof run: error: no rank recorded anything and the job exited %d: it most likely failed "
                 "before its ranks started (its own messages are above); %s %s.\n"
                 "  If the ranks did run, see docs/cli.md, \"When nothing is recorded\", for what to check.\n",
                 job_rc, o.output.c_str(), previous_kept ? "is left as it was" : "holds no rank (world size 0)");
    return;
  }
  std::fprintf(stderr,
               "commprof run: error: no rank recorded anything: %s %s%s.\n"
               "  The job ran with LD_PRELOAD=%s%s\n"
               "  and %s %s.\n"
               "  Check that:\n"
               "  - the program calls MPI (C, or Fortran through mpif.h, `use mpi` or `use mpi_f08`:\n"
               "    Fortran needs a libcommprof.so built with these bindings, see docs/mpi-bindings.md)\n"
               "    or the commprof C API; a program with neither records nothing;\n"
               "  - the launcher passes the environment to every rank (%s);\n"
               "  - the program is dynamically linked: a static binary cannot be preloaded;\n"
               "  - libcommprof.so loads in the ranks: if it does not, their stderr shows\n"
               "    \"ERROR: ld.so: object '%s' from LD_PRELOAD cannot be preloaded\".\n",
               o.output.c_str(), previous_kept ? "is left as it was" : "holds no rank (world size 0)",
               job_rc != 0 ? " and the job failed" : "", preload.c_str(), unreadable.c_str(), names.c_str(),
               openmpi ? "(passed with mpirun -x)" : "(set in the launched command's environment)",
               openmpi ? "commprof run gave mpirun -x for each; check that mpirun reaches the ranks with it"
                       : "mpirun is given -x by commprof run; another launcher must export LD_PRELOAD and "
                         "COMMPROF_*, e.g. srun --export=ALL",
               library.c_str());
}

// The program execvp would start for `name`: itself when it holds a '/', else the first match
// on $PATH. Checked before anything is created, so that a command that cannot start leaves no
// file and replaces none; `error` says why it cannot.
bool ResolveCommand(const std::string& name, std::string& error) {
  auto executable = [](const fs::path& p, int& err) {
    std::error_code ec;
    if (!fs::exists(p, ec)) {
      err = ENOENT;
      return false;
    }
    if (fs::is_directory(p, ec)) {
      err = EISDIR;
      return false;
    }
    if (::access(p.c_str(), X_OK) != 0) {
      err = errno;
      return false;
    }
    return true;
  };
  int err = 0;
  if (name.find('/') != std::string::npos) {
    if (executable(name, err)) {
      return true;
    }
    error = std::strerror(err);
    return false;
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  int first_err = 0;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (executable(fs::path(dir.empty() ? "." : dir) / name, err)) {
      return true;
    }
    if (err != ENOENT && first_err == 0) {
      first_err = err;  // found but not runnable: say why, as execvp would
    }
    if (end == std::string::npos) {
      break;
    }
    start = end + 1;
  }
  error = first_err != 0 ? std::strerror(first_err) : "command not found on PATH";
  return false;
}

// The capture controls: each option given, or else the COMMPROF_* variable the user set, checked
// here so that a bad value stops the job before it starts (the error names the option or variable).
Status CheckCapture(CaptureTexts& given) {
  const CaptureTexts options = CaptureOptionNames(), env = CaptureEnvironmentNames();
  CaptureTexts names = options;
  auto pick = [](std::string& value, std::string& name, const std::string& var) {
    if (const char* v = std::getenv(var.c_str()); value.empty() && v != nullptr) {
      value = v;
      name = var;
    }
  };
  pick(given.schedule, names.schedule, env.schedule);
  pick(given.delay, names.delay, env.delay);
  pick(given.duration, names.duration, env.duration);
  pick(given.step_range, names.step_range, env.step_range);
  pick(given.step_every, names.step_every, env.step_every);
  CapturePlan plan;
  std::string error;
  if (!ParseCapturePlan(given, names, plan, error)) {
    return InvalidArgument("commprof run: " + error + " (nothing was started)");
  }
  return Status::Ok();
}

void AddCaptureVariables(const CaptureTexts& given, std::vector<std::pair<std::string, std::string>>& vars) {
  const CaptureTexts env = CaptureEnvironmentNames();
  for (const auto& [value, name] :
       {std::pair{&given.schedule, &env.schedule}, std::pair{&given.delay, &env.delay},
        std::pair{&given.duration, &env.duration}, std::pair{&given.step_range, &env.step_range},
        std::pair{&given.step_every, &env.step_every}}) {
    if (!value->empty()) {
      vars.emplace_back(*name, *value);
    }
  }
}

// Waits for the job. A SIGINT or SIGTERM received by `commprof run` is forwarded to the launcher
// only if the job has not ended kSignalForwardDelay later (the launcher usually got the same signal
// from the terminal or the process group, and is already ending the ranks); one more, a second or
// more after the first, is forwarded at once. With the hang watchdog, after a hang-abort the ranks end themselves
// (their collectors flush and exit); a job still there after kHangAbortGrace gets SIGTERM, and SIGKILL kHangKillGrace
// later. The launcher is signalled, not a process group: it stays in ours so that it keeps the terminal (mpirun reads
// stdin for rank 0), and mpirun ends its ranks on SIGTERM.
// The job's end is seen at once through a pidfd (Linux 5.3+), which poll() reports readable when
// the child exits (a 50 ms sleep between checks cost a short job 25 ms on average); the 50 ms
// timeout paces the signal and hang-abort checks. Signals arriving within kSignalBurst of the first
// count as one: `timeout`, Slurm and a terminal signal us and our process group together, and
// woken at once by the first we must not take the group's copy for a second Ctrl-C.
void WaitForJob(pid_t child, const Collection& collection, int& wstatus) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kSignalBurst = std::chrono::milliseconds(200);
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  std::optional<Clock::time_point> aborted_at;
  std::optional<Clock::time_point> signal_at;
  sig_atomic_t forwarded_count = 0;
  sig_atomic_t first_count = 0;
  int signalled = 0;
  for (;;) {
    pid_t r = ::waitpid(child, &wstatus, WNOHANG);
    if (r == child || (r < 0 && errno != EINTR)) {
      if (pidfd >= 0) {
        ::close(pidfd);
      }
      return;
    }
    auto now = Clock::now();
    if (const sig_atomic_t count = g_signal_count; count != forwarded_count) {
      if (!signal_at.has_value()) {
        signal_at = now;
      }
      if (now - *signal_at < kSignalBurst) {
        first_count = count;  // `timeout` sends one to us and one to the group: they come as one
      }
      const bool insisted = count > first_count && now - *signal_at >= std::chrono::seconds(1);  // a second Ctrl-C
      if (insisted || now - *signal_at >= kSignalForwardDelay) {
        ::kill(child, g_signal);
        forwarded_count = count;
        signal_at.reset();
      }
    }
    if (!aborted_at.has_value() && collection.hang_aborted()) {
      aborted_at = now;
    }
    if (aborted_at.has_value()) {
      if (signalled == 0 && now - *aborted_at >= kHangAbortGrace) {
        std::fprintf(stderr, "commprof run: the job is still running %lld s after the hang-abort; sending SIGTERM\n",
                     static_cast<long long>(kHangAbortGrace.count()));
        ::kill(child, SIGTERM);
        signalled = SIGTERM;
      } else if (signalled == SIGTERM && now - *aborted_at >= kHangAbortGrace + kHangKillGrace) {
        std::fprintf(stderr, "commprof run: the job ignored SIGTERM; sending SIGKILL\n");
        ::kill(child, SIGKILL);
        signalled = SIGKILL;
      }
    }
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      (void)::poll(&p, 1, 50);  // a signal ends it early (EINTR), as it should
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

int RunJob(Options o) {
  if (o.command.empty()) {
    std::fprintf(stderr, "commprof run: no command given (usage: commprof run [-o FILE.h5] -- mpirun -np 4 ./app)\n");
    return 2;
  }
  if (o.command[0].size() > 1 && o.command[0][0] == '-') {
    std::fprintf(stderr, "commprof run: unknown option '%s' (see commprof run --help)\n", o.command[0].c_str());
    return 2;
  }
  std::string job_id = DefaultJobId();
  if (o.output.empty()) {
    o.output = "commprof-" + job_id + ".h5";
  }
  CollectionOptions copts;
  copts.output = o.output;
  copts.meta.job_id = job_id;
  copts.meta.command_line = JoinCommand(o.command);
  copts.listen = o.listen;
  copts.writer = ResolveCompression(o.compression);
  copts.queue_mb = o.queue_mb;
  copts.flush_ms = o.flush_ms;
  if (std::string error; !ParseHangOptions(o.hang_timeout, o.on_hang, copts, error)) {
    std::fprintf(stderr, "commprof run: %s\n", error.c_str());
    return 2;
  }
  AnalysisMode analysis_mode = AnalysisMode::kNow;
  if (std::string error; !ResolveAnalysisMode(o.analysis, analysis_mode, error)) {
    std::fprintf(stderr, "commprof run: %s\n", error.c_str());
    return 2;
  }
  std::string relay_env;
  if (!ParseRelay(o.relay, relay_env)) {
    std::fprintf(stderr, "commprof run: --relay %s: expected off (or 0), node, or a number of ranks per relay\n",
                 o.relay.c_str());
    return 2;
  }
  if (!relay_env.empty() && copts.hang_timeout_s > 0) {
    std::fprintf(stderr,
                 "commprof run: --hang-timeout does not reach ranks behind relays; use one or the other "
                 "(docs/scale.md#relays)\n");
    return 2;
  }
  // Everything that can be checked is, before anything is created or started.
  if (Status st = CheckCollectionTargets(copts, "commprof run"); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return st.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (std::string why; !ResolveCommand(o.command[0], why)) {
    std::fprintf(stderr, "commprof run: cannot start '%s': %s (nothing was written)\n", o.command[0].c_str(),
                 why.c_str());
    return kExitCannotStart;
  }
  std::string library = FindLibrary(o);
  if (library.empty()) {
    std::fprintf(stderr, "commprof run: cannot find libcommprof.so (pass --library or set COMMPROF_LIBRARY)\n");
    return 1;
  }
  // One that was named must be there: a preload that cannot load would only show as "nothing
  // recorded" after the whole job ran.
  if (std::error_code ec; !fs::is_regular_file(library, ec) || ::access(library.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "commprof run: cannot use %s %s: %s (nothing was written)\n",
                 o.library.empty() ? "$COMMPROF_LIBRARY" : "--library", library.c_str(),
                 fs::exists(library, ec) ? (fs::is_directory(library, ec) ? "it is a directory" : std::strerror(errno))
                                         : "no such file");
    return 1;
  }
  if (o.spool_dir.empty()) {
    o.spool_dir = o.output + ".spool";
  }
  o.spool_dir = fs::absolute(o.spool_dir).string();
  std::string shard_dir;
  std::string self_exe;
  if (!relay_env.empty()) {
    shard_dir = fs::absolute(o.output + ".shards").string();
    std::error_code ec;
    std::string why;
    const char* cannot = "create";
    if (fs::exists(shard_dir, ec) && !fs::is_directory(shard_dir, ec)) {
      why = "it exists and is not a directory";
    } else if (fs::create_directories(shard_dir, ec); ec) {
      why = ec.message();
    } else if (::access(shard_dir.c_str(), W_OK | X_OK) != 0) {
      why = std::strerror(errno);
      cannot = "write in";  // it is there (made now or before), but not writable
    }
    if (!why.empty()) {
      std::fprintf(stderr, "commprof run: cannot %s the relays' shard directory %s: %s\n", cannot, shard_dir.c_str(),
                   why.c_str());
      return 1;
    }
    std::error_code exe_ec;
    self_exe = fs::canonical("/proc/self/exe", exe_ec).string();
  }
  std::string secret = RandomHex(32);
  copts.meta.start_epoch_ns = UtcNowNs();
  copts.secret = secret;
  auto collection = Collection::Start(copts, "commprof run");
  if (!collection.ok()) {
    std::fprintf(stderr, "%s\n", collection.status().message().c_str());
    return collection.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::string advertise = o.advertise;
  if (advertise.empty()) {
    advertise = o.listen == "0.0.0.0" ? boost::asio::ip::host_name() : o.listen;
  }
  std::string address = advertise + ":" + std::to_string(collection.value()->port());

  // The variables every rank needs; the user's own COMMPROF_* settings travel with them.
  std::vector<std::pair<std::string, std::string>> vars = {
      {"COMMPROF_AGGREGATOR", address},
      {"COMMPROF_SECRET", secret},
      {"COMMPROF_JOB_ID", job_id},
      {"COMMPROF_SPOOL_DIR", o.spool_dir},
      // Ranks without MPI that read this very clock take it exactly instead of measuring it.
      {"COMMPROF_AGGREGATOR_CLOCK", FormatClockDomain(SystemClockDomain())},
      {"COMMPROF_ACTIVITIES", ActivitiesToString(o.activity_mask)}};
  AddCaptureVariables(o.capture, vars);
  if (o.stacks > 0) {
    vars.emplace_back("COMMPROF_STACKS", std::to_string(o.stacks));
  }
  if (!relay_env.empty()) {
    vars.emplace_back("COMMPROF_RELAY", relay_env);
    vars.emplace_back("COMMPROF_RELAY_COMMAND", self_exe);
    vars.emplace_back("COMMPROF_SHARD_DIR", shard_dir);
    vars.emplace_back("COMMPROF_RELAY_OPTIONS", "--queue-mb " + std::to_string(o.queue_mb) + " --compression " +
                                                    CompressionArgument(o.compression) + " --flush-ms " +
                                                    std::to_string(o.flush_ms));
  }
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    std::string name = kv.substr(0, eq);
    if (name.rfind("COMMPROF_", 0) == 0 && name != "COMMPROF_LIBRARY") {
      bool ours = false;
      for (const auto& v : vars) {
        ours = ours || v.first == name;
      }
      if (!ours) {
        vars.emplace_back(name, kv.substr(eq + 1));
      }
    }
  }
  // The loaders of the GPU-side sources: NCCL loads our profiler plugin by absolute path, NVTX and
  // the CUDA driver load libcommprof.so itself (it exports InitializeInjectionNvtx2 and
  // InitializeInjection). A value the user set is forwarded unchanged (their tool wins; ours is
  // then off for that source), and a source left out of --activities gets no variable at all.
  auto injection = [&](const char* name, uint32_t activity, const std::string& ours) {
    if (const char* user = std::getenv(name); user != nullptr) {
      vars.emplace_back(name, user);
      if ((o.activity_mask & activity) != 0 && !o.quiet) {
        std::fprintf(stderr, "commprof: %s is set (%s); passing it on, so commprof does not load itself there\n", name,
                     user);
      }
    } else if ((o.activity_mask & activity) != 0 && !ours.empty()) {
      vars.emplace_back(name, ours);
    }
  };
  // OMPI_MCA_odls_base_sigkill_timeout is left as the user has it: Open MPI's mpirun sleeps that
  // long twice (SIGCONT, sleep, SIGTERM, sleep, SIGKILL) whenever it ends a job early, so a larger
  // value made every failed job seconds slower, while a rank stores its in-flight calls in
  // milliseconds of its 1 s (the hang and fault e2e cases hold on a loaded 2-core machine).
  injection("NCCL_PROFILER_PLUGIN", kActivityNccl, FindNcclPlugin(library));
  injection("NVTX_INJECTION64_PATH", kActivityNvtx, library);
  injection("CUDA_INJECTION64_PATH", kActivityCuda | kActivityMemory, library);
  std::string preload = library;
  if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && *old != '\0') {
    preload += std::string(":") + old;
  }

  std::vector<std::string> argv;
  argv.push_back(o.command[0]);
  bool openmpi = IsOpenMpiLauncher(o.command[0]);
  if (openmpi) {
    // -x NAME forwards mpirun's value (set below in its environment), so the secret never shows
    // in a process listing; LD_PRELOAD goes as NAME=VALUE so that mpirun itself is not profiled.
    for (const auto& kv : vars) {
      argv.push_back("-x");
      argv.push_back(kv.first);
    }
    argv.push_back("-x");
    argv.push_back("LD_PRELOAD=" + preload);
  }
  argv.insert(argv.end(), o.command.begin() + 1, o.command.end());

  if (!o.quiet) {
    std::fprintf(stderr, "commprof: job %s, aggregator on %s, writing %s\n", job_id.c_str(), address.c_str(),
                 o.output.c_str());
  }
  std::fflush(stderr);
  pid_t child = ::fork();
  if (child == 0) {
    // The job must not inherit our descriptors: an inherited HDF5 file handle would keep the
    // output locked against readers for as long as any job process lives.
    CloseDescriptorsAbove2();
    RestoreStartSignals();
    for (const auto& [k, v] : vars) {
      ::setenv(k.c_str(), v.c_str(), 1);
    }
    if (!openmpi) {
      ::setenv("LD_PRELOAD", preload.c_str(), 1);
    }
    std::vector<char*> cargv;
    cargv.reserve(argv.size() + 1);
    for (auto& a : argv) {
      cargv.push_back(a.data());
    }
    cargv.push_back(nullptr);
    ::execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "commprof run: cannot start '%s': %s\n", cargv[0], std::strerror(errno));
    ::_exit(kExitCannotStart);
  }
  if (child < 0) {
    std::fprintf(stderr, "commprof run: fork failed: %s\n", std::strerror(errno));
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = NoteSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  int wstatus = 0;
  WaitForJob(child, *collection.value(), wstatus);
  int job_rc = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);

  // The job is gone: the ranks' last frames, their spools, the file and its analysis.
  CollectionSummary sum = collection.value()->Finish(o.grace_s, o.spool_dir, analysis_mode == AnalysisMode::kNow);
  const Status& st = sum.status;
  // After a write error the error line (Collection::Finish) stands in for "wrote", which the
  // file would belie.
  if (const std::string wrote = WroteLine(o.output, sum); !o.quiet && !wrote.empty()) {
    std::fprintf(stderr, "commprof: %s; job exit code %d\n", wrote.c_str(), job_rc);
  } else if (!o.quiet && !sum.write_failed && (sum.relays > 0 || !sum.shard_error.ok())) {
    // Its ranks came (or were to come) through relays. After a failed write the file holds what
    // its last flush stored, not these ranks: the connection count below is what is true.
    std::fprintf(
        stderr, "commprof: %u rank(s) in the file, through %u relay(s) and %u directly, %u refused; job exit code %d\n",
        sum.ranks, sum.relays, sum.accepted, sum.refused, job_rc);
  } else if (!o.quiet) {
    std::fprintf(stderr, "commprof: %u rank(s) connected, %u refused; job exit code %d\n", sum.accepted, sum.refused,
                 job_rc);
  }
  if (analysis_mode == AnalysisMode::kBackground) {
    StoreAnalysisLater(o.output, sum, "commprof");
  }
  if (sum.ranks == 0 && sum.refused == 0 && sum.shard_error.ok()) {
    ReportNothingRecorded(o, library, preload, vars, openmpi, job_rc, sum.previous_kept);
  }
  if (collection.value()->hang_aborted()) {
    std::fprintf(stderr, "commprof run: the job was ended for a hang (--on-hang abort; the diagnosis is in %s /hang)\n",
                 o.output.c_str());
    return kExitHangAborted;
  }
  // The job's own failure comes first, then a file that could not be written, then no rank at all.
  if (job_rc != 0) {
    return job_rc;
  }
  if (!st.ok() || !sum.restart_error.ok() || !sum.shard_error.ok()) {
    return 1;
  }
  return sum.ranks == 0 && sum.refused == 0 ? kExitNothingRecorded : 0;
}

}  // namespace

void SetRunArgsAfterDashDash(std::vector<std::string> args) { g_after_dash_dash = std::move(args); }

Runner AddRunCommand(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub =
      app.add_subcommand("run",
                         "Profile a job: commprof run [-o FILE.h5] [--] LAUNCHER ARGS... where LAUNCHER is\n"
                         "mpirun/mpiexec (e.g. -- mpirun -np 4 ./app) or the program itself.\n"
                         "Everything from the first argument that is not a run option belongs to the job.\n"
                         "Returns the job's exit code (128+signal if it was killed); 4 if it exited 0 but no rank\n"
                         "recorded anything; 5 if --on-hang abort ended it for a hang.");
  sub->add_option("-o,--output", o->output, "output HDF5 file (default: commprof-<jobid>.h5)");
  sub->add_option("--listen", o->listen, "address the aggregator listens on")->capture_default_str();
  sub->add_option("--advertise", o->advertise,
                  "address ranks connect to (default: the listen address; "
                  "the host name when listening on 0.0.0.0)");
  sub->add_option("--spool-dir", o->spool_dir, "where ranks spool if they cannot connect (default: OUTPUT.spool)");
  sub->add_option("--library", o->library,
                  "libcommprof.so to preload (default: the one installed with this commprof, else the build tree's)");
  AddCompressionOptions(sub, o->compression);
  AddQueueOption(sub, o->queue_mb);
  sub->add_option("--relay", o->relay,
                  "relay aggregators (docs/scale.md#relays): off; node (one per node, started by its first rank, "
                  "writing a shard under OUTPUT.shards/ that the output file links); or N (one per N ranks of a "
                  "node)")
      ->type_name("MODE")
      ->capture_default_str();
  AddGraceOption(sub, o->grace_s, "seconds to wait for ranks' last frames after the job exits");
  AddFlushOption(sub, o->flush_ms, "how often the file (and each relay's shard) is flushed to disk");
  sub->add_option("--activities", o->activities,
                  "event sources to record, comma-separated: cpu (C API ranges, marks, steps), mpi, nccl, cuda "
                  "(kernels, copies, memsets, syncs, launches), memory (allocations), nvtx; or all")
      ->capture_default_str();
  sub->add_option("--schedule", o->capture.schedule,
                  "record only the steps torch.profiler.schedule selects: wait=W,warmup=U,active=A,repeat=R"
                  "[,skip_first=S] (repeat 0: until the job ends; warmup steps are not recorded)");
  sub->add_option("--delay", o->capture.delay, "seconds after each rank's collector starts before recording begins");
  sub->add_option("--duration", o->capture.duration, "seconds of recording from then on (default: until the end)");
  sub->add_option("--step-range", o->capture.step_range,
                  "NVTX ranges named NAME begin auto-numbered steps, NAME#N begins step N (as ProfilerStep#N)");
  sub->add_option("--step-every", o->capture.step_every,
                  "N[:COMM]: collective 0, N, 2N, ... of COMM (world, or a name given with MPI_Comm_set_name) "
                  "begins step 0, 1, 2, ...");
  sub->add_flag("--stacks{16}", o->stacks,
                "record the calling stack of every MPI and NCCL API call, at most DEPTH frames (1-64) from the "
                "user's call site (--stacks alone: 16; written --stacks=DEPTH); the report then ranks call sites")
      ->check(CLI::Range(1, static_cast<int>(kMaxStackDepth)))
      ->type_name("DEPTH");
  sub->add_option("--hang-timeout", o->hang_timeout, kHangTimeoutHelp)->type_name("SECONDS")->capture_default_str();
  sub->add_option("--on-hang", o->on_hang, kOnHangHelp)->type_name("report|abort")->capture_default_str();
  sub->add_flag("-q,--quiet", o->quiet, "no progress lines on stderr");
  AddAnalysisOptions(sub, o->analysis);
  sub->footer("Environment read by the ranks (set them before `commprof run`; they are forwarded):\n" + []() {
    std::string s;
    for (const auto& opt : ConfigOptions()) {
      s += "  " + std::string(opt.env) + " (default '" + opt.default_value + "'): " + opt.description + "\n";
    }
    return s;
  }());
  sub->prefix_command();  // everything from the first positional on belongs to the job
  return [o, sub] {
    // prefix_command(): the first positional starts the job's command line; CLI11 leaves the
    // rest (which may look like our options, e.g. mpirun's -x) in remaining().
    Options opts = *o;
    if (std::string error; !ParseActivities(opts.activities, opts.activity_mask, error)) {
      std::fprintf(stderr, "commprof run: --activities %s: %s\n", opts.activities.c_str(), error.c_str());
      return 2;
    }
    if (Status st = CheckCapture(opts.capture); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 2;
    }
    opts.command = sub->remaining();
    if (!g_after_dash_dash.empty()) {
      // "--" inside the job's own arguments (commprof run mpirun -np 2 -- ./app) stays there.
      if (!opts.command.empty()) {
        opts.command.push_back("--");
      }
      opts.command.insert(opts.command.end(), g_after_dash_dash.begin(), g_after_dash_dash.end());
    }
    return RunJob(std::move(opts));
  };
}

}  // namespace commprof::cli
