#include "cli/collection.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <vector>

#include "aggregator/spool_reader.h"
#include "cli/commands.h"
#include "core/clock.h"

namespace commprof::cli {

namespace fs = std::filesystem;

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

Result<std::unique_ptr<Collection>> Collection::Start(const CollectionOptions& options, const char* command) {
  std::unique_ptr<Collection> c(new Collection());
  c->options_ = options;
  auto ingest = Ingest::Start(options.output, options.meta, WriterOptions{options.deflate}, options.flush_ms);
  if (!ingest.ok()) {
    return Status(ingest.status().code(), std::string(command) + ": " + ingest.status().message());
  }
  c->ingest_ = std::move(ingest.value());
  StreamPolicy policy{options.secret, options.meta.job_id};
  auto server = Server::Listen(c->io_, *c->ingest_, policy, options.listen, options.port);
  if (!server.ok()) {
    return Status(server.status().code(), std::string(command) + ": " + server.status().message());
  }
  c->server_ = std::move(server.value());
  c->guard_ = std::make_unique<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
      boost::asio::make_work_guard(c->io_));
  c->io_thread_ = std::thread([io = &c->io_] { io->run(); });
  return c;
}

uint32_t Collection::RanksDone(const std::string& spool_dir) {
  std::set<uint32_t> done = ingest_->ranks_done();
  std::error_code ec;
  if (!spool_dir.empty() && fs::is_directory(spool_dir, ec)) {
    done.merge(SpooledRanksDone(spool_dir, options_.meta.job_id, spool_scan_));
  }
  return static_cast<uint32_t>(done.size());
}

Collection::~Collection() {
  if (!finished_) {
    (void)Finish(0.0, "", false);
  }
}

CollectionSummary Collection::Finish(double grace_s, const std::string& spool_dir, bool analyze) {
  CollectionSummary sum;
  if (finished_) {
    return sum;
  }
  finished_ = true;
  // Give connected ranks a moment to deliver their last frames.
  const ServerStats& live = server_->stats();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (std::chrono::steady_clock::now() < deadline && live.open.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (live.open.load() > 0 && grace_s > 0) {
    std::fprintf(stderr, "commprof: %u connection(s) still open after %.1f s; marking them disconnected\n",
                 live.open.load(), grace_s);
  }
  boost::asio::post(io_, [this] { server_->Close(); });
  guard_.reset();
  io_.stop();
  io_thread_.join();
  sum.accepted = live.accepted.load();
  sum.refused = live.refused.load();
  server_.reset();  // closes the sessions: ranks without a bye are marked disconnected

  // Ranks that could not reach the aggregator spooled: fold their spools into the same file.
  std::error_code ec;
  if (!spool_dir.empty() && fs::is_directory(spool_dir, ec)) {
    StreamPolicy policy{options_.secret, options_.meta.job_id};
    for (const auto& entry : fs::directory_iterator(spool_dir, ec)) {
      if (entry.path().extension() != ".cpspool") {
        continue;
      }
      SpoolResult r = IngestSpoolFile(*ingest_, entry.path().string(), policy);
      if (r.accepted) {
        std::fprintf(stderr, "commprof: merged spool of rank %u from %s\n", r.rank, entry.path().c_str());
        fs::remove(entry.path(), ec);
      } else if (!r.status.ok()) {
        std::fprintf(stderr, "commprof: spool %s not merged: %s\n", entry.path().c_str(), r.status.message().c_str());
      }
    }
    fs::remove(spool_dir, ec);  // only succeeds when empty
  }

  sum.status = ingest_->Finish();
  sum.events = ingest_->events_written();
  sum.ranks = static_cast<uint32_t>(ingest_->ranks_claimed().size());
  if (!sum.status.ok()) {
    std::fprintf(stderr, "commprof: writing %s: %s\n", options_.output.c_str(), sum.status.message().c_str());
  }
  // The analysis is part of the file (its /analysis group); failing it does not fail collection.
  if (sum.status.ok() && analyze) {
    (void)StoreAnalysis(options_.output, "commprof");
  }
  return sum;
}

}  // namespace commprof::cli
