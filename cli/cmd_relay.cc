// `commprof relay --parent HOST:PORT --shard FILE.h5 [--rendezvous BASE]`: one node's aggregator
// (docs/scale.md#relays), started by the first rank of its group when relays are on.
//
// It takes its node's ranks exactly as the job's aggregator would (the same Collection), writing
// them into its shard, and keeps a control connection to its parent: relay-hello, proven with the
// job's secret; relay-progress while ranks end; relay-done with the shard's ranks once the parent's
// relay-finish says the job is over. The parent links the shard's ranks into the job's file. The
// secret and the job id come from the environment the rank passed on (COMMPROF_SECRET,
// COMMPROF_JOB_ID). A relay whose parent goes away finishes its shard all the same.
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "cli/collection.h"
#include "cli/commands.h"
#include "core/clock.h"
#include "core/relay_rendezvous.h"
#include "core/tcp_connect.h"
#include "core/wire.h"

namespace commprof::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string parent;
  std::string shard;
  std::string rendezvous;
  std::string listen = "127.0.0.1";
  CompressionChoice compression;
  uint64_t queue_mb = 256;
  uint32_t flush_ms = 1000;
  double grace_s = 10;  // after a signal (SIGTERM, SIGINT): how long its ranks get to say bye
};

std::atomic<int> g_signal{0};
void OnSignal(int sig) { g_signal.store(sig); }

constexpr auto kConnectTimeout = std::chrono::seconds(10);
constexpr int kProgressPollMs = 20;

// Connects to the parent and introduces this relay; the connected socket.
Result<int> JoinParent(const Options& o, const std::string& secret, const std::string& job_id) {
  auto deadline = SteadyNowNs() +
                  static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(kConnectTimeout).count());
  auto fd = ConnectTcp(o.parent, deadline, "parent aggregator");
  if (!fd.ok()) {
    return fd.status();
  }
  wire::FrameHeader h;
  std::vector<uint8_t> payload;
  Status st = ReadFrame(fd.value(), h, payload);
  auto nonce = st.ok() && h.type == wire::FrameType::kChallenge ? wire::DecodeChallenge(payload)
                                                                : Result<wire::Nonce>(Corrupt("no challenge"));
  if (!nonce.ok()) {
    ::close(fd.value());
    return Unavailable("parent aggregator " + o.parent +
                       " sent no challenge: " + (st.ok() ? nonce.status().message() : st.message()));
  }
  wire::RelayHello hello;
  hello.job_id = job_id;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  hello.host = host;
  hello.pid = static_cast<uint32_t>(::getpid());
  hello.shard = o.shard;
  std::vector<uint8_t> frame;
  wire::AppendRelayHello(frame, hello, secret, nonce.value());
  if (!SendAll(fd.value(), frame) || !ReadFrame(fd.value(), h, payload).ok() || h.type != wire::FrameType::kHelloAck) {
    ::close(fd.value());
    return Unavailable("parent aggregator " + o.parent + " did not answer the relay-hello");
  }
  auto ack = wire::DecodeHelloAck(payload);
  if (!ack.ok() || !ack->accepted) {
    ::close(fd.value());
    return Unauthenticated("parent aggregator " + o.parent +
                           " refused this relay: " + (ack.ok() ? ack->reason : ack.status().message()));
  }
  return fd.value();
}

// Waits for relay-finish (its grace in s), reporting the ranks' progress; a signal: this relay's
// own grace. The parent gone (killed, its node lost) while the job runs: no one is left to say when
// the job ends, and the ranks have nowhere better to go (a new relay could not join the parent
// either), so this relay serves them until the last one closes its connection (a rank that ends or
// dies closes it), and its shard then holds them whole: nullopt, no grace.
std::optional<double> AwaitFinish(int fd, Collection& c, const Options& o) {
  wire::RelayProgress last{~0u, ~0u};
  for (;;) {
    if (g_signal.load() != 0) {
      std::fprintf(stderr, "commprof relay: signal %d; finishing the shard\n", g_signal.load());
      return o.grace_s;
    }
    wire::RelayProgress now{c.stats().open.load(), c.RanksDone("")};
    if (now.ranks_open != last.ranks_open || now.ranks_done != last.ranks_done) {
      std::vector<uint8_t> frame;
      wire::AppendRelayProgress(frame, now);
      if (!SendAll(fd, frame)) {
        std::fprintf(stderr,
                     "commprof relay: the parent is gone; serving this node's ranks until they end, then finishing "
                     "the shard\n");
        return std::nullopt;
      }
      last = now;
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, kProgressPollMs);
    if (r <= 0) {
      continue;
    }
    wire::FrameHeader h;
    std::vector<uint8_t> payload;
    if (Status st = ReadFrame(fd, h, payload); !st.ok()) {
      std::fprintf(stderr,
                   "commprof relay: the parent aggregator's connection ended (%s); serving this node's ranks until "
                   "they end, then finishing the shard\n",
                   st.message().c_str());
      return std::nullopt;
    }
    if (h.type == wire::FrameType::kRelayFinish) {
      auto f = wire::DecodeRelayFinish(payload);
      return f.ok() ? f->grace_ms / 1000.0 : o.grace_s;
    }
  }
}

// The rank that started this relay may be bound to one core (mpirun binds small jobs' ranks); the
// relay should not compete with that rank for it, so it may run on any CPU its cgroup allows.
void UnbindFromTheStartingRank() {
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    CPU_SET(cpu, &all);
  }
  (void)::sched_setaffinity(0, sizeof all, &all);  // the kernel keeps it within the allowed CPUs
}

int Relay(Options o) {
  UnbindFromTheStartingRank();
  // The parent links the shard by the path this relay reports: absolute, whatever its directory.
  std::error_code cwd_error;
  if (fs::path absolute = fs::absolute(o.shard, cwd_error); !cwd_error) {
    o.shard = absolute.string();
  }
  // A relay never replaces a shard: another relay's (an earlier one of this node, ended while the
  // job ran) holds the first part of its ranks. The ranks that started it then go to the parent.
  if (std::error_code ec; fs::exists(o.shard, ec)) {
    std::fprintf(stderr, "commprof relay: %s exists: a relay does not replace another relay's shard\n",
                 o.shard.c_str());
    return 1;
  }
  const char* secret = std::getenv("COMMPROF_SECRET");
  const char* job_id = std::getenv("COMMPROF_JOB_ID");
  if (secret == nullptr || *secret == '\0' || job_id == nullptr) {
    std::fprintf(stderr, "commprof relay: COMMPROF_SECRET and COMMPROF_JOB_ID must be set (a rank passes them on)\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  CollectionOptions copts;
  copts.keep_restarts = false;  // a shard holds the first incarnation (docs/torchrun.md#elastic-restarts)
  copts.output = o.shard;
  copts.meta.job_id = job_id;
  copts.meta.command_line = "commprof relay (a shard of job " + std::string(job_id) + ")";
  copts.meta.start_epoch_ns = UtcNowNs();
  copts.secret = secret;
  copts.listen = o.listen;
  copts.writer = ResolveCompression(o.compression);
  copts.writer.shard = true;
  copts.queue_mb = o.queue_mb;
  copts.flush_ms = o.flush_ms;
  copts.own_spools_only = true;
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "commprof relay: %s\n", why.c_str());
    return 1;
  };
  auto collection = Collection::Start(copts, "commprof relay");
  if (!collection.ok()) {  // its messages begin with "commprof relay: "
    std::fprintf(stderr, "%s\n", collection.status().message().c_str());
    return 1;
  }
  Collection& c = *collection.value();
  auto fd = JoinParent(o, secret, job_id);
  if (!fd.ok()) {
    (void)c.Finish(0, "", false);
    std::error_code ec;
    fs::remove(o.shard, ec);
    return fail(fd.status().message());
  }
  const std::string address = o.listen + ":" + std::to_string(c.port());
  if (!o.rendezvous.empty() && !PublishRelayAddress(o.rendezvous, address)) {
    std::fprintf(stderr, "commprof relay: cannot write %s.addr; no rank will find this relay\n", o.rendezvous.c_str());
  }
  std::fprintf(stderr, "commprof relay: listening on %s, shard %s, parent %s\n", address.c_str(), o.shard.c_str(),
               o.parent.c_str());
  std::optional<double> grace = AwaitFinish(fd.value(), c, o);
  if (!grace.has_value()) {
    while (c.stats().open.load() > 0 && g_signal.load() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    grace = g_signal.load() != 0 ? o.grace_s : 0;
  }
  if (!o.rendezvous.empty()) {
    WithdrawRelay(o.rendezvous);
  }
  // A rank that went to its spool while this relay was congested (COMMPROF_SEND_TIMEOUT_MS)
  // continues its stream here: this relay resumes it, skipping what it stored.
  const char* spool_dir = std::getenv("COMMPROF_SPOOL_DIR");
  CollectionSummary sum = c.Finish(*grace, spool_dir != nullptr ? spool_dir : "", /*analyze=*/false);
  wire::RelayDone done;
  if (!sum.status.ok()) {
    // The writer's messages name the shard ("writing SHARD failed: No space left on device").
    done.status = sum.status.message().find(o.shard) != std::string::npos
                      ? sum.status.message()
                      : "writing " + o.shard + ": " + sum.status.message();
    if (sum.events_not_stored > 0) {
      done.status += "; " + std::to_string(sum.events_not_stored) + " events not stored";
    }
  }
  std::error_code ec;
  if (sum.ranks == 0) {
    fs::remove(o.shard, ec);  // no rank came: nothing to link
  } else if (auto held = ReadShardRanks(o.shard); held.ok()) {
    done.world_size = held->world_size;
    done.ranks = std::move(held->ranks);
  } else {
    // After a failed write too: the write's reason first, then why nothing can be linked.
    done.status +=
        (done.status.empty() ? "" : "; ") + std::string("its shard cannot be read back: ") + held.status().message();
    if (sum.events > 0) {
      // It stored and acknowledged events there, which are in no spool: its ranks are linked as
      // they are (readers name them unreadable), so the parent neither merges their spools as if
      // they were whole nor deletes them.
      done.world_size = 0;
      for (uint32_t rank : sum.rank_list) {
        done.ranks.push_back(wire::ShardRank{rank, 0});
      }
    }
  }
  // The job's size as its ranks' hellos said it, whatever the shard kept: a shard that failed before
  // storing a rank still lets the job's file list the ranks it lacks.
  done.world_size = std::max(done.world_size, sum.world_size);
  std::fprintf(stderr, "commprof relay: shard %s holds %zu rank(s), %llu events\n", o.shard.c_str(), done.ranks.size(),
               static_cast<unsigned long long>(sum.events));
  std::vector<uint8_t> frame;
  wire::AppendRelayDone(frame, done);
  if (!SendAll(fd.value(), frame)) {
    std::fprintf(stderr, "commprof relay: could not tell the parent; it links what the shard holds by itself\n");
  }
  ::shutdown(fd.value(), SHUT_WR);
  ::close(fd.value());
  return sum.status.ok() ? 0 : 1;
}

}  // namespace

Runner AddRelayCommand(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "relay",
      "One node's aggregator, writing its ranks into a shard of the job's file (docs/scale.md#relays). Started by\n"
      "the first rank of a node when `commprof run --relay` is on; not usually run by hand. COMMPROF_SECRET and\n"
      "COMMPROF_JOB_ID come from the environment. Exit codes: 0 shard written; 1 failure; 2 bad usage.");
  sub->add_option("--parent", o->parent, "HOST:PORT of the job's aggregator")->required();
  sub->add_option("--shard", o->shard, "the shard file to write (absolute path)")->required();
  sub->add_option(
      "--rendezvous", o->rendezvous,
      "BASE of the node's rendezvous files: the address goes to BASE.addr, BASE.lock is removed at the end");
  sub->add_option("--listen", o->listen, "IP address the node's ranks connect to")->capture_default_str();
  AddCompressionOptions(sub, o->compression);
  AddQueueOption(sub, o->queue_mb);
  AddFlushOption(sub, o->flush_ms, "how often the shard is flushed");
  return [o] { return Relay(*o); };
}

}  // namespace commprof::cli
