// `commprof aggregate --expect N [--listen HOST:PORT] [-o FILE.h5] ...`: a standalone, job-level
// aggregator for jobs that `commprof run` does not start (Slurm batch jobs, `srun --commprof`).
//
// It listens, takes the ranks' streams exactly as `run`'s embedded aggregator does (one shared
// Collection), and ends when N ranks have said bye, when --timeout passes, or on SIGINT/SIGTERM;
// then it merges the job's spools, finalizes the file and stores the analysis. Scripts learn the
// chosen address from --address-file (written once listening) and the secret from --secret-file.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/background_analysis.h"
#include "cli/collection.h"
#include "cli/commands.h"
#include "core/clock.h"
#include "core/publish_file.h"

namespace commprof::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string listen = "0.0.0.0:0";
  std::string advertise;
  uint32_t expect = 0;
  std::string output;
  std::string job_id;
  std::string secret_file;
  std::string address_file;
  std::string spool_dir;
  double timeout_s = 0;
  double grace_s = 5;
  CompressionChoice compression;
  uint64_t queue_mb = 256;
  uint32_t flush_ms = 1000;
  AnalysisOptions analysis;  // --analysis, --no-analysis
  bool quiet = false;
  std::string hang_timeout = "0";  // --hang-timeout, checked by ParseHangOptions
  std::string on_hang = "report";
};

// --on-hang abort ended the job after a hang was found (docs/cli.md), as `commprof run`.
constexpr int kExitHangAborted = 5;

std::atomic<int> g_signal{0};
void OnSignal(int sig) { g_signal.store(sig); }

// HOST:PORT, HOST being an IP literal; the port may be 0 (any free one).
bool SplitHostPort(const std::string& text, std::string& host, uint16_t& port) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return false;
  }
  host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  char* end = nullptr;
  unsigned long p = std::strtoul(text.c_str() + colon + 1, &end, 10);
  if (colon + 1 == text.size() || *end != '\0' || p > 65535) {
    return false;
  }
  port = static_cast<uint16_t>(p);
  return true;
}

// The job secret: from --secret-file (created with a new secret, mode 0600, when it does not exist
// yet, so the first of several scripts to need it makes it), else $COMMPROF_SECRET.
bool LoadSecret(const Options& o, std::string& secret, std::string& error) {
  if (!o.secret_file.empty()) {
    std::ifstream in(o.secret_file);
    if (in) {
      std::getline(in, secret);
      while (!secret.empty() && (secret.back() == '\r' || secret.back() == ' ')) {
        secret.pop_back();
      }
      if (secret.empty()) {
        error = o.secret_file + ": the secret file is empty";
        return false;
      }
      return true;
    }
    secret = RandomHex(32);
    int fd = ::open(o.secret_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      error = o.secret_file + ": cannot create the secret file: " + std::strerror(errno);
      return false;
    }
    std::string line = secret + "\n";
    bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(fd);
    if (!ok) {
      error = o.secret_file + ": cannot write the secret file";
    }
    return ok;
  }
  if (const char* env = std::getenv("COMMPROF_SECRET"); env != nullptr && *env != '\0') {
    secret = env;
    return true;
  }
  error = "a job secret is needed: pass --secret-file FILE or set COMMPROF_SECRET";
  return false;
}

int Aggregate(Options o) {
  if (o.expect == 0) {
    std::fprintf(stderr, "commprof aggregate: --expect N (N >= 1 ranks) is required\n");
    return 2;
  }
  AnalysisMode mode = AnalysisMode::kNow;
  if (std::string error; !ResolveAnalysisMode(o.analysis, mode, error)) {
    std::fprintf(stderr, "commprof aggregate: %s\n", error.c_str());
    return 2;
  }
  std::string host;
  uint16_t port = 0;
  if (!SplitHostPort(o.listen, host, port)) {
    std::fprintf(stderr, "commprof aggregate: --listen %s: expected HOST:PORT with an IP address (port 0: any)\n",
                 o.listen.c_str());
    return 2;
  }
  if (o.job_id.empty()) {
    o.job_id = DefaultJobId();
  }
  if (o.output.empty()) {
    o.output = "commprof-" + o.job_id + ".h5";
  }
  CollectionOptions copts;
  copts.output = o.output;
  copts.meta.job_id = o.job_id;
  copts.meta.command_line = "commprof aggregate --expect " + std::to_string(o.expect);
  copts.listen = host;
  copts.port = port;
  copts.writer = ResolveCompression(o.compression);
  copts.queue_mb = o.queue_mb;
  copts.flush_ms = o.flush_ms;
  if (std::string error; !ParseHangOptions(o.hang_timeout, o.on_hang, copts, error)) {
    std::fprintf(stderr, "commprof aggregate: %s\n", error.c_str());
    return 2;
  }
  // The address and the output are checked before the secret file may be created.
  if (Status st = CheckCollectionTargets(copts, "commprof aggregate"); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return st.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::string secret, error;
  if (!LoadSecret(o, secret, error)) {
    std::fprintf(stderr, "commprof aggregate: %s\n", error.c_str());
    return 2;
  }
  if (o.spool_dir.empty()) {
    o.spool_dir = o.output + ".spool";
  }
  o.spool_dir = fs::absolute(o.spool_dir).string();
  copts.meta.start_epoch_ns = UtcNowNs();
  copts.secret = secret;
  auto collection = Collection::Start(copts, "commprof aggregate");
  if (!collection.ok()) {
    std::fprintf(stderr, "%s\n", collection.status().message().c_str());
    return collection.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  Collection& c = *collection.value();
  std::string advertise = o.advertise;
  if (advertise.empty()) {
    advertise = host == "0.0.0.0" ? boost::asio::ip::host_name() : host;
  }
  const std::string address = advertise + ":" + std::to_string(c.port());
  if (!o.address_file.empty() && !PublishLine(o.address_file, address)) {
    std::fprintf(stderr, "commprof aggregate: cannot write the address file %s\n", o.address_file.c_str());
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  if (!o.quiet) {
    std::fprintf(stderr, "commprof aggregate: job %s, listening on %s for %u rank(s), writing %s\n", o.job_id.c_str(),
                 address.c_str(), o.expect, o.output.c_str());
  }

  const auto t0 = std::chrono::steady_clock::now();
  uint32_t shown = 0;
  const char* why = nullptr;
  uint32_t byes = 0;
  auto next_scan = t0;
  for (;;) {
    // Done ranks: a bye over TCP, or in a spool file (a rank that could not reach us). The spool
    // directory is scanned once a second (unchanged files are not read again).
    if (auto now = std::chrono::steady_clock::now(); now >= next_scan) {
      byes = c.RanksDone(o.spool_dir);
      next_scan = now + std::chrono::seconds(1);
    } else {
      byes = std::max(byes, c.stats().byes.load());
    }
    if (!o.quiet && byes != shown) {
      std::fprintf(stderr, "commprof aggregate: %u of %u rank(s) done\n", byes, o.expect);
      shown = byes;
    }
    if (byes >= o.expect) {
      break;
    }
    if (g_signal.load() != 0) {
      why = g_signal.load() == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)";
      break;
    }
    if (o.timeout_s > 0 && std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(o.timeout_s)) {
      why = "timed out";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (why != nullptr) {
    std::fprintf(stderr, "commprof aggregate: %s with %u of %u rank(s) done; finalizing what arrived\n", why, byes,
                 o.expect);
  }
  // With every rank done, no connection should still be open: a short grace is only for ranks
  // beyond the expected count. Interrupted or timed out, the grace lets open ranks finish.
  CollectionSummary sum = c.Finish(o.grace_s, o.spool_dir, mode == AnalysisMode::kNow);
  if (const std::string wrote = WroteLine(o.output, sum); !o.quiet && !wrote.empty()) {
    std::fprintf(stderr, "commprof aggregate: %s\n", wrote.c_str());
  }
  if (mode == AnalysisMode::kBackground) {
    StoreAnalysisLater(o.output, sum, "commprof aggregate");
  }
  if (!sum.status.ok() || !sum.restart_error.ok() || !sum.shard_error.ok()) {
    return 1;
  }
  if (c.hang_aborted()) {
    return kExitHangAborted;
  }
  return why == nullptr ? 0 : 3;
}

}  // namespace

Runner AddAggregateCommand(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "aggregate",
      "Run a job-level aggregator: commprof aggregate --expect N [--listen HOST:PORT] [-o FILE.h5].\n"
      "Ranks started elsewhere (Slurm: srun --commprof, an sbatch script) connect to it with\n"
      "COMMPROF_AGGREGATOR=HOST:PORT and COMMPROF_SECRET. It ends when N ranks have said bye,\n"
      "when --timeout passes, or on SIGINT/SIGTERM, and then finalizes the file.\n"
      "Exit codes: 0 all N ranks done; 1 failure; 2 bad usage; 3 timed out or signalled (the file\n"
      "holds what arrived); 5 --on-hang abort ended the job for a hang.");
  sub->add_option("--expect", o->expect, "number of ranks to wait for")->required();
  sub->add_option("--listen", o->listen, "IP address and port to listen on (port 0: any free one)")
      ->capture_default_str();
  sub->add_option("--advertise", o->advertise,
                  "host name ranks use to connect, written to --address-file (default: the listen address; "
                  "the host name when listening on 0.0.0.0)");
  sub->add_option("-o,--output", o->output, "output HDF5 file (default: commprof-<jobid>.h5)");
  sub->add_option("--job-id", o->job_id, "job id the ranks must present (default: $SLURM_JOB_ID, else a time stamp)");
  sub->add_option("--secret-file", o->secret_file,
                  "file holding the job secret; created with a new random secret (mode 0600) if it does not exist "
                  "(default: $COMMPROF_SECRET)");
  sub->add_option("--address-file", o->address_file, "write HOST:PORT here once listening");
  sub->add_option("--spool-dir", o->spool_dir,
                  "spools of ranks that could not connect, merged at the end "
                  "(default: OUTPUT.spool)");
  sub->add_option("--timeout", o->timeout_s, "give up waiting after this many seconds (0: never)")
      ->capture_default_str();
  AddGraceOption(sub, o->grace_s, "seconds open connections get to finish at the end");
  AddCompressionOptions(sub, o->compression);
  AddQueueOption(sub, o->queue_mb);
  AddFlushOption(sub, o->flush_ms, "how often the file is flushed to disk");
  AddAnalysisOptions(sub, o->analysis);
  sub->add_option("--hang-timeout", o->hang_timeout, kHangTimeoutHelp)->type_name("SECONDS")->capture_default_str();
  sub->add_option("--on-hang", o->on_hang, kOnHangHelp)->type_name("report|abort")->capture_default_str();
  sub->add_flag("-q,--quiet", o->quiet, "no progress lines on stderr");
  return [o] { return Aggregate(*o); };
}

}  // namespace commprof::cli
