// mpi_straggler — demo / test workload for commprof.
//
// A plain MPI program (only <mpi.h> and the C++ standard library, no commprof
// headers) that runs a fixed, countable sequence of MPI calls with a
// configurable compute phase (busy or sleeping) before each collective. One rank can be
// made a "planted straggler" (--slow-rank / --slow-us): it computes longer,
// so every other rank waits inside the collective. commprof should attribute
// that wait time to the straggler.
//
// Exact call sequence (tests count these calls, do not add collectives):
//   MPI_Init
//   MPI_Barrier(MPI_COMM_WORLD)                      x1
//   loop iters times:
//     blocking:     compute, then the collective on MPI_COMM_WORLD
//     --nonblocking: MPI_Iallreduce, compute polling MPI_Test about
//                    every 100 us, then MPI_Wait (always)
//   MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank)   x1
//   MPI_Barrier(sub)                                 x1
//   MPI_Comm_free(sub)                               x1
//   MPI_Finalize
//
// Test hooks (environment variables):
//   MPI_STRAGGLER_EXIT_CODE=<int>   every rank returns this code after
//                                   MPI_Finalize (exit-code propagation).
//   MPI_STRAGGLER_ABORT_RANK=<int>  that rank raise(SIGKILL)s itself at the
//                                   start of iteration iters/2 (killed rank).
//
// Exit codes: 0 ok, 2 bad command line, 3 wrong allreduce result.

// Only the MPI C API is used. Skip the deprecated MPI C++ bindings, whose
// headers (Open MPI on Debian ships them) trip -Wcast-function-type -Werror.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace {

enum class Collective { kAllreduce, kAllgather, kBcast, kAlltoall, kReduceScatter };

struct Options {
  long long iters = 100;
  long long bytes = 8;
  long long compute_us = 1000;
  long long slow_rank = -1;
  long long slow_us = 0;
  Collective collective = Collective::kAllreduce;
  std::string collective_name = "allreduce";
  bool nonblocking = false;
  bool sleep_compute = false;  // --compute sleep: "compute" sleeps instead of spinning
};

constexpr int kExitUsage = 2;
constexpr int kExitWrongResult = 3;

void PrintUsage(std::FILE* out, const char* argv0) {
  std::fprintf(out,
               "usage: %s [options]\n"
               "\n"
               "Demo/test MPI workload with a planted straggler for commprof.\n"
               "\n"
               "options:\n"
               "  --iters N           number of iterations (default 100)\n"
               "  --bytes B           message size in bytes per rank buffer (default 8;\n"
               "                      rounded up to a multiple of 4 for float collectives)\n"
               "  --compute-us U      compute per iteration in microseconds (default 1000)\n"
               "  --slow-rank R       rank that computes longer; -1 = none (default -1)\n"
               "  --slow-us S         extra compute on the slow rank in us (default 0)\n"
               "  --collective C      allreduce|allgather|bcast|alltoall|reduce_scatter\n"
               "                      (default allreduce)\n"
               "  --compute MODE      busy (default): spin on the CPU; sleep: sleep instead, so\n"
               "                      ranks oversubscribing cores do not slow each other and\n"
               "                      the planted lateness is exact\n"
               "  --nonblocking       use MPI_Iallreduce + MPI_Test polling + MPI_Wait\n"
               "                      (only valid with --collective allreduce)\n"
               "  --help              print this help and exit\n"
               "\n"
               "environment:\n"
               "  MPI_STRAGGLER_EXIT_CODE=<int>   return this exit code after MPI_Finalize\n"
               "  MPI_STRAGGLER_ABORT_RANK=<int>  that rank raises SIGKILL at iteration iters/2\n",
               argv0);
}

std::optional<long long> ParseInt(std::string_view s) {
  if (s.empty()) return std::nullopt;
  if (s.front() == '+') s.remove_prefix(1);
  long long v = 0;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (ec != std::errc() || ptr != last) return std::nullopt;
  return v;
}

[[noreturn]] void UsageError(const char* argv0, const std::string& msg) {
  std::fprintf(stderr, "%s: %s (try --help)\n", argv0, msg.c_str());
  std::exit(kExitUsage);
}

// Parses argv; exits 0 for --help and 2 on any error (before MPI_Init).
Options ParseArgs(int argc, char** argv) {
  Options o;
  const char* argv0 = argc > 0 ? argv[0] : "mpi_straggler";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> inline_value;
    if (arg.rfind("--", 0) == 0) {
      auto eq = arg.find('=');
      if (eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      }
    }

    auto take_value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) UsageError(argv0, "missing value for " + arg);
      return argv[++i];
    };
    auto take_int = [&](long long min, long long max) -> long long {
      std::string v = take_value();
      auto parsed = ParseInt(v);
      if (!parsed || *parsed < min || *parsed > max) {
        UsageError(argv0, "bad value '" + v + "' for " + arg + " (expected integer in [" + std::to_string(min) + ", " +
                              std::to_string(max) + "])");
      }
      return *parsed;
    };

    if (arg == "--help" || arg == "-h") {
      if (inline_value) UsageError(argv0, arg + " takes no value");
      PrintUsage(stdout, argv0);
      std::exit(0);
    } else if (arg == "--iters") {
      o.iters = take_int(0, INT_MAX);
    } else if (arg == "--bytes") {
      // Keep headroom so that rounding and *size stay within int counts.
      o.bytes = take_int(1, INT_MAX / 1024);
    } else if (arg == "--compute-us") {
      o.compute_us = take_int(0, LLONG_MAX / 4);
    } else if (arg == "--slow-rank") {
      o.slow_rank = take_int(-1, INT_MAX);
    } else if (arg == "--slow-us") {
      o.slow_us = take_int(0, LLONG_MAX / 4);
    } else if (arg == "--collective") {
      std::string v = take_value();
      if (v == "allreduce") {
        o.collective = Collective::kAllreduce;
      } else if (v == "allgather") {
        o.collective = Collective::kAllgather;
      } else if (v == "bcast") {
        o.collective = Collective::kBcast;
      } else if (v == "alltoall") {
        o.collective = Collective::kAlltoall;
      } else if (v == "reduce_scatter") {
        o.collective = Collective::kReduceScatter;
      } else {
        UsageError(argv0, "bad value '" + v +
                              "' for --collective (expected "
                              "allreduce|allgather|bcast|alltoall|reduce_scatter)");
      }
      o.collective_name = v;
    } else if (arg == "--compute") {
      std::string v = take_value();
      if (v != "busy" && v != "sleep") UsageError(argv0, "bad value '" + v + "' for --compute (expected busy|sleep)");
      o.sleep_compute = v == "sleep";
    } else if (arg == "--nonblocking") {
      if (inline_value) UsageError(argv0, arg + " takes no value");
      o.nonblocking = true;
    } else {
      UsageError(argv0, "unknown flag '" + arg + "'");
    }
  }
  if (o.nonblocking && o.collective != Collective::kAllreduce) {
    UsageError(argv0, "--nonblocking is only valid with --collective allreduce (got " + o.collective_name + ")");
  }
  return o;
}

std::optional<long long> EnvInt(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  auto parsed = ParseInt(v);
  if (!parsed) {
    std::fprintf(stderr, "mpi_straggler: ignoring %s='%s' (not an integer)\n", name, v);
  }
  return parsed;
}

using Clock = std::chrono::steady_clock;

// Spins (or, with `sleep`, sleeps) until `until`.
void ComputeUntil(Clock::time_point until, bool sleep) {
  if (sleep) {
    std::this_thread::sleep_until(until);
    return;
  }
  while (Clock::now() < until) {
  }
}

// Computes for `us` microseconds (busy: the rank stays on-CPU).
void Compute(long long us, bool sleep) {
  if (us <= 0) return;
  ComputeUntil(Clock::now() + std::chrono::microseconds(us), sleep);
}

// Computes for `us` microseconds, calling MPI_Test on `req` roughly every
// 100 us of compute. Polling continues after completion (MPI_Test on
// MPI_REQUEST_NULL is legal), so the number of MPI_Test calls depends only on
// the compute time.
void ComputePolling(long long us, MPI_Request* req, bool sleep) {
  if (us <= 0) return;
  const auto start = Clock::now();
  const auto end = start + std::chrono::microseconds(us);
  for (auto next_poll = start + std::chrono::microseconds(100); next_poll < end;
       next_poll += std::chrono::microseconds(100)) {
    ComputeUntil(next_poll, sleep);
    int flag = 0;
    MPI_Test(req, &flag, MPI_STATUS_IGNORE);
  }
  ComputeUntil(end, sleep);
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = ParseArgs(argc, argv);
  const std::optional<long long> env_exit = EnvInt("MPI_STRAGGLER_EXIT_CODE");
  const std::optional<long long> env_abort_rank = EnvInt("MPI_STRAGGLER_ABORT_RANK");

  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  if (opt.slow_rank >= size) {
    if (rank == 0) {
      std::fprintf(stderr, "%s: bad value '%lld' for --slow-rank (only %d ranks)\n", argv[0], opt.slow_rank, size);
    }
    MPI_Finalize();
    return kExitUsage;
  }

  // Buffers. Float collectives use the byte size rounded up to sizeof(float).
  const long long float_bytes = (opt.bytes + static_cast<long long>(sizeof(float)) - 1) /
                                static_cast<long long>(sizeof(float)) * static_cast<long long>(sizeof(float));
  const int float_count = static_cast<int>(float_bytes / static_cast<long long>(sizeof(float)));
  const int byte_count = static_cast<int>(opt.bytes);

  std::vector<float> fsend;
  std::vector<float> frecv;
  std::vector<unsigned char> bsend;
  std::vector<unsigned char> brecv;
  int per_peer = 0;  // alltoall bytes per destination / reduce_scatter floats per rank

  switch (opt.collective) {
    case Collective::kAllreduce:
      fsend.assign(static_cast<size_t>(float_count), 1.0f);
      fsend[0] = static_cast<float>(rank + 1);
      frecv.assign(static_cast<size_t>(float_count), 0.0f);
      break;
    case Collective::kAllgather:
      bsend.assign(static_cast<size_t>(byte_count), static_cast<unsigned char>(rank));
      brecv.assign(static_cast<size_t>(byte_count) * static_cast<size_t>(size), 0);
      break;
    case Collective::kBcast:
      bsend.assign(static_cast<size_t>(byte_count), static_cast<unsigned char>(rank));
      break;
    case Collective::kAlltoall:
      per_peer = std::max(1, byte_count / size);
      bsend.assign(static_cast<size_t>(per_peer) * static_cast<size_t>(size), static_cast<unsigned char>(rank));
      brecv.assign(static_cast<size_t>(per_peer) * static_cast<size_t>(size), 0);
      break;
    case Collective::kReduceScatter:
      per_peer = std::max(1, float_count / size);
      fsend.assign(static_cast<size_t>(per_peer) * static_cast<size_t>(size), 1.0f);
      frecv.assign(static_cast<size_t>(per_peer), 0.0f);
      break;
  }

  MPI_Barrier(MPI_COMM_WORLD);

  const long long abort_iter = opt.iters / 2;
  const bool i_am_slow = opt.slow_rank >= 0 && rank == opt.slow_rank;
  const long long compute_us = opt.compute_us + (i_am_slow ? opt.slow_us : 0);
  bool wrong_result = false;

  double t0 = 0.0;
  if (rank == 0) t0 = MPI_Wtime();

  for (long long it = 0; it < opt.iters; ++it) {
    if (env_abort_rank && *env_abort_rank == rank && it == abort_iter) {
      std::fprintf(stderr, "mpi_straggler: rank %d raising SIGKILL at iteration %lld\n", rank, it);
      std::fflush(stderr);
      std::raise(SIGKILL);
    }

    if (opt.nonblocking) {
      MPI_Request req = MPI_REQUEST_NULL;
      MPI_Iallreduce(fsend.data(), frecv.data(), float_count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
      ComputePolling(compute_us, &req, opt.sleep_compute);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
      Compute(compute_us, opt.sleep_compute);
      switch (opt.collective) {
        case Collective::kAllreduce:
          MPI_Allreduce(fsend.data(), frecv.data(), float_count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          break;
        case Collective::kAllgather:
          MPI_Allgather(bsend.data(), byte_count, MPI_BYTE, brecv.data(), byte_count, MPI_BYTE, MPI_COMM_WORLD);
          break;
        case Collective::kBcast:
          MPI_Bcast(bsend.data(), byte_count, MPI_BYTE, 0, MPI_COMM_WORLD);
          break;
        case Collective::kAlltoall:
          MPI_Alltoall(bsend.data(), per_peer, MPI_BYTE, brecv.data(), per_peer, MPI_BYTE, MPI_COMM_WORLD);
          break;
        case Collective::kReduceScatter:
          MPI_Reduce_scatter_block(fsend.data(), frecv.data(), per_peer, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          break;
      }
    }

    if (opt.collective == Collective::kAllreduce && it == opt.iters - 1) {
      const double expected = static_cast<double>(size) * (size + 1) / 2.0;
      if (static_cast<double>(frecv[0]) != expected) {
        std::fprintf(stderr, "mpi_straggler: rank %d: wrong allreduce result %g (expected %g)\n", rank,
                     static_cast<double>(frecv[0]), expected);
        wrong_result = true;
      }
    }
  }

  double elapsed = 0.0;
  if (rank == 0) elapsed = MPI_Wtime() - t0;

  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &sub);
  MPI_Barrier(sub);
  MPI_Comm_free(&sub);

  if (rank == 0) {
    std::printf(
        "mpi_straggler: ranks=%d iters=%lld collective=%s nonblocking=%d slow_rank=%lld "
        "slow_us=%lld elapsed_s=%.3f\n",
        size, opt.iters, opt.collective_name.c_str(), opt.nonblocking ? 1 : 0, opt.slow_rank, opt.slow_us, elapsed);
    std::fflush(stdout);
  }

  MPI_Finalize();

  if (wrong_result) return kExitWrongResult;
  if (env_exit) return static_cast<int>(*env_exit);
  return 0;
}
