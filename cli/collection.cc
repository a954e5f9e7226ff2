#include "cli/collection.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include "aggregator/spool_reader.h"
#include "analysis/hang/hang_diagnosis.h"
#include "analysis/hang/hang_store.h"
#include "analysis/load/profile_reader.h"
#include "cli/commands.h"
#include "cli/output_file.h"
#include "core/clock.h"
#include "core/h5/h5_util.h"
#include "core/schema/file_schema.h"

namespace commprof::cli {

namespace fs = std::filesystem;

// In OUTPUT.shards: the names of the shards the finished OUTPUT links or names, one per line.
constexpr const char* kShardManifest = "linked-shards.txt";

std::string RandomHex(size_t bytes) {
  std::string out;
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  std::vector<unsigned char> buf(bytes);
  if (fd < 0 || ::read(fd, buf.data(), bytes) != static_cast<ssize_t>(bytes)) {
    // No urandom is a broken system; fall back to time and pid rather than refuse to run.
    uint64_t seed = SteadyNowNs() ^ (static_cast<uint64_t>(::getpid()) << 32);
    for (auto& b : buf) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      b = static_cast<unsigned char>(seed >> 56);
    }
  }
  if (fd >= 0) {
    ::close(fd);
  }
  static const char* kHex = "0123456789abcdef";
  for (unsigned char b : buf) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::string DefaultJobId() {
  if (const char* j = std::getenv("SLURM_JOB_ID")) {
    return j;
  }
  time_t now = ::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return std::string(buf) + "-" + std::to_string(::getpid());
}

const char* const kHangTimeoutHelp =
    "when no rank has completed a communication call for SECONDS while some rank is blocked in one, ask "
    "every rank what it is in, print the diagnosis and store it in the file's /hang group (docs/hangs.md); "
    "0: off (the default); otherwise 1 to 604800";
const char* const kOnHangHelp =
    "what follows a reported hang: report (keep waiting) or abort (tell every rank to end, exit code 5)";

bool ParseHangOptions(const std::string& timeout, const std::string& on_hang, CollectionOptions& options,
                      std::string& error) {
  char* end = nullptr;
  errno = 0;
  double v = timeout.empty() ? NAN : std::strtod(timeout.c_str(), &end);
  if (timeout.empty() || end == nullptr || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
    error = "--hang-timeout " + timeout + ": not a number of seconds";
    return false;
  }
  if (v < 0) {
    error = "--hang-timeout " + timeout + ": must not be negative (0 turns the watchdog off)";
    return false;
  }
  if (v != 0 && (v < kMinHangTimeoutS || v > kMaxHangTimeoutS)) {
    error = "--hang-timeout " + timeout + ": out of range (0 for off, or 1 to 604800 seconds: a shorter timeout " +
            "would take ordinary waits for hangs)";
    return false;
  }
  if (on_hang != "report" && on_hang != "abort") {
    error = "--on-hang " + on_hang + ": expected report or abort";
    return false;
  }
  options.hang_timeout_s = v;
  options.on_hang = on_hang == "abort" ? OnHang::kAbort : OnHang::kReport;
  return true;
}

Status CheckCollectionTargets(const CollectionOptions& options, const char* command) {
  const std::string prefix = std::string(command) + ": ";
  // The listen address first: a usage error is reported as one whatever else is wrong.
  boost::system::error_code ec;
  auto addr = boost::asio::ip::make_address(options.listen, ec);
  if (ec) {
    return InvalidArgument(prefix + "--listen " + options.listen + ": not an IP address (give a literal such as " +
                           "127.0.0.1 or 0.0.0.0, not a host name)");
  }
  {
    // Bound and released again: Server::Listen binds it for real once the file exists (with
    // SO_REUSEADDR, like this probe).
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor probe(io);
    boost::asio::ip::tcp::endpoint ep(addr, options.port);
    probe.open(ep.protocol(), ec);
    if (!ec) {
      probe.set_option(boost::asio::ip::tcp::acceptor::reuse_address(true), ec);
    }
    if (!ec) {
      probe.bind(ep, ec);
    }
    if (ec) {
      return Unavailable(prefix + "cannot listen on " + options.listen + ":" + std::to_string(options.port) + ": " +
                         ec.message());
    }
  }
  if (Status st = CheckOutputTarget(options.output, OutputKind::kRegularFile); !st.ok()) {
    return Status(st.code(), prefix + st.message());
  }
  return Status::Ok();
}

Result<std::unique_ptr<Collection>> Collection::Start(const CollectionOptions& options, const char* command) {
  COMMPROF_RETURN_IF_ERROR(CheckCollectionTargets(options, command));
  std::unique_ptr<Collection> c(new Collection());
  c->options_ = options;
  c->command_ = command;
  std::error_code ec;
  c->write_path_ = HdfWritePath(options.output);
  if (c->write_path_ != options.output) {
    // Read now: by the end the manifest is this run's. (Not from the output itself: reading a
    // damaged file could end this command, which is to replace it.)
    std::ifstream manifest(options.output + ".shards/" + kShardManifest);
    for (std::string name; std::getline(manifest, name);) {
      if (!name.empty()) {
        c->replaced_shards_.insert(name);
      }
    }
  }
  auto ingest = Ingest::Start(c->write_path_, options.meta, options.writer, options.flush_ms);
  if (!ingest.ok()) {
    // What the failed start made (a file-size limit can stop HDF5 after its first bytes) is not a
    // file: it goes. write_path_ is a path that did not exist before (the output, or its .tmp-PID).
    fs::remove(c->write_path_, ec);
    return Status(ingest.status().code(), std::string(command) + ": " + ingest.status().message());
  }
  c->ingest_ = std::move(ingest.value());
  c->ingest_->SetQueueLimit(options.queue_mb << 20);
  // Test aid: a slow disk, so that the back-pressure can be seen working (tests/e2e), and small
  // receive buffers, so that it stops the ranks' sends after little data.
  ServerLimits limits;
  if (const char* delay = std::getenv("COMMPROF_TEST_WRITER_DELAY_US"); delay != nullptr && *delay != '\0') {
    c->ingest_->SetWriterDelayForTests(std::chrono::microseconds(std::strtoll(delay, nullptr, 10)));
    limits.receive_buffer_bytes = 64 << 10;
  }
  StreamPolicy policy{options.secret, options.meta.job_id, !options.keep_restarts};
  if (options.hang_timeout_s > 0) {
    HangWatchOptions hw;
    hw.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::llround(options.hang_timeout_s * 1000)));
    hw.on_hang = options.on_hang;
    c->hang_watch_ =
        std::make_shared<HangWatch>(c->io_, hw, [p = c.get()](const hang::HangInput& in) { return p->ReportHang(in); });
  }
  auto server = Server::Listen(c->io_, *c->ingest_, policy, options.listen, options.port, limits, c->hang_watch_);
  if (!server.ok()) {
    // Possible only if the address was taken since the check: what was created goes again.
    (void)c->ingest_->Finish();
    c->ingest_.reset();
    fs::remove(c->write_path_, ec);
    c->finished_ = true;
    return Status(server.status().code(), std::string(command) + ": " + server.status().message());
  }
  c->server_ = std::move(server.value());
  if (options.keep_restarts) {
    c->restarts_ = std::make_unique<RestartFiles>(options.output, options.meta, options.writer, options.flush_ms,
                                                  options.queue_mb << 20, command);
    c->server_->RouteIncarnations(c->restarts_->Router());
  }
  c->guard_ = std::make_unique<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
      boost::asio::make_work_guard(c->io_));
  c->io_thread_ = std::thread([io = &c->io_] { io->run(); });
  return c;
}

// On the io thread: the diagnosis, printed at once (the user may be watching the job hang), then
// stored through the writer thread, which flushes it, so that a job killed next still leaves it.
std::string Collection::ReportHang(const hang::HangInput& input) {
  hang::HangReport report = hang::Diagnose(input);
  std::string text = hang::RenderText(report);
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    out += "commprof: hang: " + line + "\n";
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  if (options_.on_hang == OnHang::kAbort) {
    out += "commprof: hang: --on-hang abort: telling every rank to end\n";
  } else {
    out += "commprof: hang: --on-hang report: still waiting for the job\n";
  }
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
  ingest_->RunOnWriter("storing the hang diagnosis (/hang)",
                       [input, report](hid_t file) { return hang::WriteHangGroup(file, input, report); });
  return report.verdict;
}

uint32_t Collection::RanksDone(const std::string& spool_dir) {
  std::set<uint32_t> done = ingest_->ranks_done();
  if (restarts_ != nullptr) {
    done.merge(restarts_->RanksDone());  // done in a later incarnation: the first's was stopped by the restart
  }
  std::error_code ec;
  if (!spool_dir.empty() && fs::is_directory(spool_dir, ec)) {
    done.merge(SpooledRanksDone(spool_dir, options_.meta.job_id, spool_scan_));
  }
  // Ranks done at relays are counted by each relay: a rank is at one relay only (a rank that fell
  // back to this aggregator after its relay failed may count twice until the end).
  uint32_t at_relays = 0;
  for (const auto& link : server_->relays()->links()) {
    at_relays += link->ranks_done();
  }
  return static_cast<uint32_t>(done.size()) + at_relays;
}

namespace {

// How long the relays may take, beyond the grace they give their own ranks, to finalize their
// shards and answer (a shard's last flush and close; generous for a slow shared file system).
constexpr auto kRelayFinishMargin = std::chrono::seconds(60);

// The shard's name as the job file links it: relative to the job file's directory when the
// shard lies under it (the job and its shards can then move together), else absolute.
std::string LinkTarget(const std::string& output, const std::string& shard) {
  std::error_code ec;
  fs::path dir = fs::absolute(output, ec).parent_path();
  fs::path rel = fs::relative(shard, dir, ec);
  if (!ec && !rel.empty() && *rel.begin() != "..") {
    return rel.string();
  }
  return shard;
}

}  // namespace

void Collection::FinishRelays(double grace_s) {
  auto links = server_->relays()->links();
  if (links.empty()) {
    return;
  }
  const auto grace_ms = static_cast<uint32_t>(std::llround(std::max(0.0, grace_s) * 1000));
  boost::asio::post(io_, [links, grace_ms] {
    for (const auto& link : links) {
      link->SendFinish(grace_ms);
    }
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms) + kRelayFinishMargin;
  auto all_finished = [&] {
    return std::all_of(links.begin(), links.end(), [](const auto& l) { return l->finished(); });
  };
  while (!all_finished() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!all_finished()) {
    boost::asio::post(io_, [links] {
      for (const auto& link : links) {
        link->Abandon("no relay-done within the grace and " + std::to_string(kRelayFinishMargin.count()) + " s");
      }
    });
  }
}

// The file now links this run's shards: the shards the file it replaced linked (OUTPUT.shards) go
// with that file. Any other shard there is not this run's to remove: a run of the same output that
// was killed before linking its shards (their only copy of its ranks), or one whose relays still
// write. Those are kept, and said.
void Collection::TidyShardDirectory() {
  std::error_code ec;
  const fs::path dir = fs::absolute(options_.output + ".shards", ec);
  if (ec || !fs::is_directory(dir, ec)) {
    return;
  }
  const std::set<std::string> ours(shards_.begin(), shards_.end());
  std::vector<std::string> kept;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string p = entry.path().string();
    if (!p.ends_with(".h5") || ours.count(p) > 0) {
      continue;
    }
    if (replaced_shards_.count(entry.path().filename().string()) > 0) {
      fs::remove(entry.path(), ec);
      fs::remove(p + ".log", ec);
    } else {
      kept.push_back(p);
    }
  }
  // The manifest of the shards this run's file links or names, for the run that replaces it.
  const fs::path manifest = dir / kShardManifest;
  if (shards_.empty()) {
    fs::remove(manifest, ec);
  } else {
    std::ofstream out(manifest, std::ios::trunc);
    for (const std::string& shard : shards_) {
      out << fs::path(shard).filename().string() << '\n';
    }
  }
  if (!kept.empty()) {
    std::sort(kept.begin(), kept.end());
    std::fprintf(stderr,
                 "%s: kept %zu shard file(s) in %s that this run did not write and the file it replaced did not "
                 "link (a run of the same output killed before linking them, or one still running), e.g. %s: each "
                 "is a commprof file of its node's ranks\n",
                 command_.c_str(), kept.size(), dir.c_str(), kept.front().c_str());
  }
}

namespace {

// What became of a shard its relay did not finish: how many of its ranks were linked.
std::string ShardOutcome(const std::string& shard, size_t ranks, size_t linked) {
  if (ranks == 0) {
    return shard + " holds no rank";
  }
  if (linked == ranks) {
    return "linked the " + std::to_string(ranks) + " rank(s) " + shard + " holds as its last flush left them";
  }
  return "of the " + std::to_string(ranks) + " rank(s) " + shard + " holds, " + std::to_string(linked) +
         " linked as its last flush left them";
}

// The warning and error lines of a relay's log, told on stderr with the relay they came from.
void ForwardRelayWarnings(const std::string& log, const std::string& host, uint32_t pid) {
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(": warning: ") != std::string::npos || line.find(": error: ") != std::string::npos) {
      std::fprintf(stderr, "%s (the relay on %s, pid %u)\n", line.c_str(), host.c_str(), pid);
    }
  }
}

}  // namespace

Result<wire::RelayDone> ReadShardRanks(const std::string& shard) {
  auto reader = ProfileReader::Open(shard);
  if (!reader.ok()) {
    return reader.status();
  }
  wire::RelayDone done;
  done.world_size = reader.value()->info().world_size;
  for (const RankInfo& ri : reader.value()->info().ranks) {
    done.ranks.push_back(wire::ShardRank{ri.rank, ri.event_count});
  }
  return done;
}

// After the relays finished (or failed): their shards' ranks become links in this file. A relay
// that ended without relay-done (killed, crashed) left a shard holding what its last flush stored:
// its ranks are read from the shard itself and linked as they are.
void Collection::LinkRelayShards(CollectionSummary& sum) {
  std::map<uint32_t, std::string> linked_from;  // rank -> the shard it is linked from
  for (const auto& link : server_relays_) {
    RelayRecord rec = link->record();
    const std::string& shard = rec.hello.shard;
    std::vector<wire::ShardRank> ranks;
    uint32_t world = rec.result.world_size;
    std::error_code ec;
    if (rec.done) {
      ranks = rec.result.ranks;
      if (!rec.result.status.empty()) {  // its shard could not be written whole: judged after the spools
        std::string failure =
            "relay on " + rec.hello.host + " (pid " + std::to_string(rec.hello.pid) + "): " + rec.result.status;
        if (!ranks.empty()) {
          // What its last good flush stored is linked; the rest of those ranks is in their spools,
          // which the merge below then leaves alone (the ranks are taken) and does not delete.
          failure += "; its " + std::to_string(ranks.size()) +
                     " rank(s) are linked as its last good flush left them, the rest of their events ";  // + where
          for (const wire::ShardRank& r : ranks) {
            relay_failed_rank_list_.push_back(r.rank);
          }
          std::sort(relay_failed_rank_list_.begin(), relay_failed_rank_list_.end());
        }
        // The job file's write_status (256 bytes) gets the short form: who, and how many events
        // (summed over the failed relays, RelayFailureStatus).
        relay_failure_notes_.push_back("relay on " + rec.hello.host + " (pid " + std::to_string(rec.hello.pid) + ")");
        relay_events_not_stored_ += schema::EventsNotStoredIn(rec.result.status);
        relay_failures_.push_back(std::move(failure));
        // A relay that failed before storing any of its ranks links none: the file still learns
        // the job's size, so that they are listed as missing rather than the job looking smaller.
        ingest_->NoteWorldSize(world);
      }
    } else if (!fs::exists(shard, ec)) {
      std::fprintf(stderr, "%s: error: relay on %s (pid %u) ended (%s) and left no shard %s: its ranks are missing\n",
                   command_.c_str(), rec.hello.host.c_str(), rec.hello.pid, rec.end_reason.c_str(), shard.c_str());
      continue;
    } else {
      auto held = ReadShardRanks(shard);
      if (!held.ok()) {
        std::fprintf(stderr, "%s: error: relay on %s (pid %u) ended (%s); its shard %s cannot be read: %s\n",
                     command_.c_str(), rec.hello.host.c_str(), rec.hello.pid, rec.end_reason.c_str(), shard.c_str(),
                     held.status().message().c_str());
        continue;
      }
      world = held->world_size;
      ranks = std::move(held->ranks);
    }
    if (rec.done && rec.result.status.empty()) {
      // A relay that finished cleanly: its log is removed, but what it warned of (a rank gone without
      // a bye, a refused connection) is told here, as the job's aggregator tells its own.
      ForwardRelayWarnings(shard + ".log", rec.hello.host, rec.hello.pid);
      fs::remove(shard + ".log", ec);
    }
    size_t linked = 0;
    std::vector<uint32_t> direct;  // ranks of the shard that reached this aggregator themselves (sorted)
    if (!ranks.empty()) {
      const std::string target = LinkTarget(options_.output, shard);
      for (const wire::ShardRank& r : ranks) {
        if (ingest_->LinkShardRank(r.rank, world, target, r.events)) {
          ++linked;
          linked_from[r.rank] = shard;
        } else {
          direct.push_back(r.rank);
        }
      }
    }
    if (!rec.done) {
      std::fprintf(stderr, "%s: warning: relay on %s (pid %u) ended without finishing its shard (%s): %s\n",
                   command_.c_str(), rec.hello.host.c_str(), rec.hello.pid, rec.end_reason.c_str(),
                   ShardOutcome(shard, ranks.size(), linked).c_str());
    }
    if (!direct.empty()) {
      // Their relay ended mid-run and they went on elsewhere: this file takes them from there, and
      // names this shard (`unjoined_shards`) so that readers and `check` know a part is not here.
      std::sort(direct.begin(), direct.end());
      std::vector<uint32_t> via_shard;
      std::vector<uint32_t> reached;
      std::string other;
      for (uint32_t rank : direct) {
        if (auto it = linked_from.find(rank); it != linked_from.end()) {
          via_shard.push_back(rank);
          other = it->second;
        } else {
          reached.push_back(rank);
        }
      }
      if (!reached.empty()) {
        std::fprintf(stderr,
                     "%s: warning: rank(s) %s are in %s and also reached this aggregator directly (their relay ended "
                     "mid-run): what they sent here is stored, the part in the shard is not joined\n",
                     command_.c_str(), FormatRankRanges(RangesOfRanks(reached)).c_str(), shard.c_str());
      }
      if (!via_shard.empty()) {
        std::fprintf(stderr,
                     "%s: warning: rank(s) %s are in %s and also in %s (their first relay ended mid-run and they "
                     "went on through another): the file links them from %s, the part in %s is not joined\n",
                     command_.c_str(), FormatRankRanges(RangesOfRanks(via_shard)).c_str(), shard.c_str(), other.c_str(),
                     other.c_str(), shard.c_str());
      }
      unjoined_shards_.push_back(fs::path(shard).filename().string());
    }
    if (ranks.empty()) {
      continue;
    }
    // Kept with the job file even when none of its ranks is linked: it holds their first part.
    shards_.push_back(shard);
    if (linked > 0) {
      sum.relays++;
    }
  }
  if (!unjoined_shards_.empty()) {
    std::string names;
    for (const std::string& n : unjoined_shards_) {
      names += (names.empty() ? "" : ",") + n;
    }
    ingest_->RunOnWriter("the unjoined shards", [names = std::move(names)](hid_t f) {
      return h5::Write(f, schema::root_attr::kUnjoinedShards, names) ? Status::Ok()
                                                                     : IoError("cannot write unjoined_shards");
    });
  }
}

// Who failed (the first by name when several did), the events they could not store in all, and
// where the rest of their ranks' events is.
std::string Collection::RelayFailureStatus() const {
  if (relay_failure_notes_.empty()) {
    return "";
  }
  std::string who = relay_failure_notes_.size() == 1
                        ? relay_failure_notes_.front() + ": its shard failed"
                        : std::to_string(relay_failure_notes_.size()) + " relays' shards failed, the first " +
                              relay_failure_notes_.front();
  const std::string whose = relay_failure_notes_.size() == 1 ? "its" : "their";
  return who + "; " + (relay_events_not_stored_ > 0 ? std::to_string(relay_events_not_stored_) : "some") +
         " events not stored" +
         (relay_spooled_ ? " (in " + whose + " ranks' kept spools)" : " (lost: " + whose + " ranks' spools are empty)");
}

Collection::~Collection() {
  if (!finished_) {
    try {
      (void)Finish(0.0, "", false);
    } catch (...) {  // a destructor does not throw: what Finish could not do stays undone
    }
  }
}

// Folds this job's spools in `spool_dir` into the file and returns the paths of those merged, for
// Finish to remove once the file is written whole. A file that can no longer be written gets none:
// the spools then stay where they are, with the events.
std::vector<std::string> Collection::MergeSpools(const std::string& spool_dir) {
  std::vector<std::string> merged;
  std::error_code ec;
  if (spool_dir.empty() || !fs::is_directory(spool_dir, ec) || !ingest_->write_error().ok()) {
    return merged;
  }
  StreamPolicy policy{options_.secret, options_.meta.job_id, !options_.keep_restarts};
  const std::vector<uint32_t> claimed = ingest_->ranks_claimed();
  for (const auto& entry : fs::directory_iterator(spool_dir, ec)) {
    if (entry.path().extension() != ".cpspool") {
      continue;
    }
    // A spool another job left in the same directory is not this job's to merge or judge.
    auto hello = ReadSpoolHello(entry.path().string());
    if (hello.ok() && hello->job_id != options_.meta.job_id) {
      std::fprintf(stderr, "commprof: left %s alone: it is a spool of job '%s'\n", entry.path().c_str(),
                   hello->job_id.c_str());
      continue;
    }
    if (options_.own_spools_only && (!hello.ok() || !std::binary_search(claimed.begin(), claimed.end(), hello->rank))) {
      continue;  // a rank this relay never took: the job's aggregator merges it
    }
    if (hello.ok() && std::binary_search(relay_failed_rank_list_.begin(), relay_failed_rank_list_.end(), hello->rank)) {
      // the rest of a rank a failed relay linked: kept as it is, and said so below
      relay_failed_spool_bytes_ += fs::file_size(entry.path(), ec);
      continue;
    }
    SpoolResult r = IngestSpoolFile(*ingest_, entry.path().string(), policy,
                                    restarts_ != nullptr ? restarts_->Router() : IncarnationRouter());
    if (r.accepted) {
      std::fprintf(stderr, "commprof: merged spool of rank %u%s from %s\n", r.rank,
                   r.incarnation > 0 ? (" (incarnation " + std::to_string(r.incarnation) + ")").c_str() : "",
                   entry.path().c_str());
      merged.push_back(entry.path().string());
    } else if (!r.status.ok()) {
      std::fprintf(stderr, "commprof: spool %s not merged: %s\n", entry.path().c_str(), r.status.message().c_str());
    }
  }
  return merged;
}

std::string WroteLine(const std::string& output, const CollectionSummary& sum) {
  if (sum.write_failed || sum.previous_kept || !sum.shard_error.ok()) {
    return "";
  }
  const std::string events = std::to_string(sum.events) + " events";
  if (sum.relays > 0) {
    return "wrote " + output + ": " + std::to_string(sum.ranks) + " rank(s), through " + std::to_string(sum.relays) +
           " relay(s) (shards in " + sum.shard_dir + ") and " + std::to_string(sum.accepted) + " directly, " +
           std::to_string(sum.refused) + " refused, " + events;
  }
  return "wrote " + output + ": " + std::to_string(sum.ranks) + " rank(s), " + std::to_string(sum.accepted) +
         " connected, " + std::to_string(sum.refused) + " refused, " + events;
}

CollectionSummary Collection::Finish(double grace_s, const std::string& spool_dir, bool analyze) {
  CollectionSummary sum;
  if (finished_ || server_ == nullptr || ingest_ == nullptr) {
    return sum;
  }
  finished_ = true;
  // Give connected ranks a moment to deliver their last frames.
  const ServerStats& live = server_->stats();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  // Polled often: the last connections usually close within a few ms of the job's end, and every
  // ms spent here is added to the job's wall time under `commprof run`.
  while (std::chrono::steady_clock::now() < deadline && live.open.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (live.open.load() > 0 && grace_s > 0) {
    std::fprintf(stderr, "commprof: %u connection(s) still open after %.1f s; marking them disconnected\n",
                 live.open.load(), grace_s);
  }
  // Relays (docs/scale.md#relays) finish their shards while the io thread still runs their links.
  FinishRelays(grace_s);
  server_relays_ = server_->relays()->links();
  boost::asio::post(io_, [this] { server_->Close(); });
  guard_.reset();
  io_.stop();
  io_thread_.join();
  sum.accepted = live.accepted.load();
  sum.refused = live.refused.load();
  const uint64_t read_pauses = live.read_pauses.load();
  server_.reset();  // closes the sessions: ranks without a bye are marked disconnected
  LinkRelayShards(sum);
  // What the back-pressure did, for whoever sizes --queue-mb (docs/file-format.md root attributes).
  ingest_->RunOnWriter("back-pressure figures", [peak = ingest_->queue_peak_bytes(), read_pauses](hid_t f) {
    bool ok = h5::Write(f, schema::root_attr::kIngestQueuePeakBytes, peak) &&
              h5::Write(f, schema::root_attr::kIngestReadPauses, uint64_t{read_pauses});
    return ok ? Status::Ok() : IoError("cannot write the ingest queue's attributes");
  });

  // Ranks that could not reach the aggregator spooled: fold their spools into the same file.
  const std::vector<std::string> merged_spools = MergeSpools(spool_dir);
  // A relay that could not write its shard (a full disk on its node) kept its ranks' spools: where
  // they were merged here the file is whole all the same; where not, the command fails.
  if (!relay_failures_.empty()) {
    const bool whole = relay_failed_rank_list_.empty() && ingest_->world_size_seen() > 0 &&
                       ingest_->ranks_claimed().size() >= ingest_->world_size_seen();
    // Where the rest of a failed relay's ranks is: in their spools, unless those are empty (the
    // spool directory's disk was full too) or gone.
    // A failed relay that linked none of its ranks: what of them is not in this file (merged from
    // their spools) is lost.
    const bool spooled = relay_failed_rank_list_.empty() ? whole : relay_failed_spool_bytes_ > 0;
    for (std::string& failure : relay_failures_) {
      if (failure.ends_with("the rest of their events ")) {
        failure += spooled ? "is in their spools" : "is lost: their spools are empty or missing";
      }
    }
    relay_spooled_ = spooled;
    for (const std::string& failure : relay_failures_) {
      std::fprintf(stderr, "%s: %s: %s%s\n", command_.c_str(), whole ? "warning" : "error", failure.c_str(),
                   whole ? "; its ranks' spools were merged into the job's file instead" : "");
    }
    if (!whole) {
      sum.shard_error = IoError(relay_failures_.front());
    }
  }
  // The later incarnations' files, named in the first's (docs/file-format.md, restart_files).
  if (restarts_ != nullptr) {
    NameRestartFiles(*ingest_, *restarts_);
    sum.restart_files = restarts_->Finish(analyze);
    sum.restart_error = restarts_->error();
  }
  // The job file is written whole, but a failed relay's events are not all in it: its
  // write_status says so, for `info` and for `check`'s dropped_events.
  sum.status = ingest_->Finish(sum.shard_error.ok() ? "" : RelayFailureStatus());
  if (!shards_.empty()) {
    sum.shard_dir = fs::path(shards_.front()).parent_path().string();
  }
  sum.events = ingest_->events_written();
  sum.events_not_stored = ingest_->events_not_stored();
  sum.rank_list = ingest_->ranks_claimed();
  sum.world_size = ingest_->world_size_seen();
  sum.ranks = static_cast<uint32_t>(sum.rank_list.size());
  Status write_error = ingest_->write_error();
  sum.write_failed = !write_error.ok();
  ingest_.reset();  // the file is closed
  if (sum.write_failed) {
    // One line for the failure, whatever number of frames hit it (a full disk: every one).
    std::fprintf(stderr, "%s: error: %s; %llu events not stored\n", command_.c_str(), write_error.message().c_str(),
                 static_cast<unsigned long long>(sum.events_not_stored));
  } else if (!sum.status.ok()) {
    std::fprintf(stderr, "%s: error: writing %s: %s\n", command_.c_str(), options_.output.c_str(),
                 sum.status.message().c_str());
  }
  // A merged spool is removed only once its events are in a file that was written whole: after a
  // failed write (a full disk) the spools are where the events are.
  std::error_code ec;
  if (sum.write_failed || !sum.status.ok() || !sum.restart_error.ok() || !sum.shard_error.ok()) {
    size_t spools = 0;
    std::vector<fs::path> empty;  // spools a full disk kept from taking even their hello: hold nothing
    if (!spool_dir.empty() && fs::is_directory(spool_dir, ec)) {
      for (const auto& entry : fs::directory_iterator(spool_dir, ec)) {
        if (entry.path().extension() != ".cpspool") {
          continue;
        }
        auto hello = ReadSpoolHello(entry.path().string());
        spools += hello.ok() && hello->job_id == options_.meta.job_id ? 1 : 0;  // this job's only
        std::error_code size_ec;
        // Only the job's own aggregator, at the very end: a relay shares the directory with ranks
        // of other relays, one of which may have just created its spool and not yet written to it.
        if (!options_.own_spools_only && !hello.ok() && fs::file_size(entry.path(), size_ec) == 0 && !size_ec) {
          empty.push_back(entry.path());
        }
      }
    }
    if (spools > 0) {
      std::fprintf(stderr,
                   "%s: kept the %zu spool file(s) in %s: their events are not all in %s; `commprof merge %s -o "
                   "REST.h5` makes a file of them where there is room\n",
                   command_.c_str(), spools, spool_dir.c_str(), options_.output.c_str(), spool_dir.c_str());
    }
    if (!empty.empty()) {
      for (const fs::path& path : empty) {
        fs::remove(path, ec);
      }
      fs::remove(spool_dir, ec);  // only succeeds when nothing else is left in it
      std::fprintf(stderr,
                   "%s: removed %zu empty spool file(s) from %s: their ranks could not spool there either (a full "
                   "disk?), so those of their events that are not stored are lost\n",
                   command_.c_str(), empty.size(), spool_dir.c_str());
    }
  } else {
    for (const std::string& path : merged_spools) {
      fs::remove(path, ec);
    }
    fs::remove(spool_dir, ec);  // only succeeds when empty
  }
  if (write_path_ != options_.output) {
    // An output that existed before is replaced only by a file that holds a rank and was
    // written whole: a command that could not start, or a full disk, keeps the old one.
    if (sum.ranks > 0 && sum.status.ok()) {
      fs::rename(write_path_, options_.output, ec);
      if (ec) {
        std::fprintf(stderr, "%s: error: cannot rename %s to %s: %s\n", command_.c_str(), write_path_.c_str(),
                     options_.output.c_str(), ec.message().c_str());
        sum.status = IoError("cannot rename " + write_path_ + " to " + options_.output + ": " + ec.message());
        return sum;
      }
    } else if (sum.ranks == 0) {
      sum.previous_kept = true;
      fs::remove(write_path_, ec);
      std::fprintf(stderr, "%s: no rank was recorded; %s is left as it was\n", command_.c_str(),
                   options_.output.c_str());
      return sum;
    } else {
      sum.previous_kept = true;
      std::fprintf(stderr, "%s: %s is left as it was; what could be written is in %s\n", command_.c_str(),
                   options_.output.c_str(), write_path_.c_str());
      return sum;
    }
  }
  if (sum.status.ok()) {
    TidyShardDirectory();
    RemoveStaleRestartFiles(options_.output, sum.restart_files);
  }
  // The analysis is part of the file (its /analysis group); failing it does not fail collection.
  if (sum.status.ok() && analyze) {
    (void)StoreAnalysis(options_.output, "commprof");
  }
  return sum;
}

}  // namespace commprof::cli
