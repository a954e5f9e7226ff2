// The aggregator side of a profiled job, as `commprof run` embeds it and `commprof aggregate`
// runs it standalone: an Ingest (the HDF5 writer thread) fed by an Asio server on its own thread,
// and the end of collection (grace for the last frames, spools merged, file finalized, analysis
// stored). One implementation so the two commands cannot drift apart.
#pragma once

// Boost 1.74 asio/awaitable.hpp uses std::exchange without including <utility> under C++20, so
// <utility> comes first, kept there against clang-format's include sorting.
// clang-format off
#include <utility>
// clang-format on
#include <boost/asio.hpp>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/hang_watch.h"
#include "aggregator/hdf5/hdf5_writer.h"
#include "aggregator/ingest.h"
#include "aggregator/rank_stream.h"
#include "aggregator/server.h"
#include "aggregator/spool_reader.h"
#include "cli/restart_files.h"
#include "core/status.h"

namespace commprof::cli {

struct CollectionOptions {
  std::string output;    // the HDF5 file (replaced only if the collection records a rank)
  JobMeta meta;          // job id, command line, start
  std::string secret;    // the ranks' hello proof
  std::string listen;    // IP literal
  uint16_t port = 0;     // 0: any free port
  WriterOptions writer;  // how the events tables are compressed
  uint32_t flush_ms = 1000;
  // --queue-mb: the bound on events received and not yet written (docs/scale.md#back-pressure).
  uint64_t queue_mb = 256;
  // A relay merges only the spools of ranks it took itself (it can resume their streams); the job's
  // aggregator merges the rest (docs/scale.md#relays).
  bool own_spools_only = false;
  // --hang-timeout (0: off) and --on-hang (docs/hangs.md): the aggregator's hang watchdog.
  double hang_timeout_s = 0;
  OnHang on_hang = OnHang::kReport;
  // Workers of a torch elastic restart (hello incarnation K > 0) to OUTPUT.restart-K.h5, beside the
  // first incarnation's file (docs/torchrun.md#elastic-restarts). Off for a relay, whose shards
  // hold the first incarnation only.
  bool keep_restarts = true;
};

// --hang-timeout SECONDS and --on-hang report|abort as given, checked into `options`: SECONDS is a
// number, 0 (off) or from kMinHangTimeoutS to kMaxHangTimeoutS. On a bad value, `error` is the
// usage error naming the option and the value.
inline constexpr double kMinHangTimeoutS = 1;
inline constexpr double kMaxHangTimeoutS = 7 * 24 * 3600;
bool ParseHangOptions(const std::string& timeout, const std::string& on_hang, CollectionOptions& options,
                      std::string& error);
// The --help text of the two options, shared by run and aggregate.
extern const char* const kHangTimeoutHelp;
extern const char* const kOnHangHelp;

struct CollectionSummary {
  Status status;  // the file's final write status
  uint32_t accepted = 0;
  uint32_t refused = 0;
  uint32_t ranks = 0;               // ranks in the file: connected, merged from a spool, or linked from a shard
  std::vector<uint32_t> rank_list;  // those ranks, in order
  uint32_t world_size = 0;          // the largest world size a rank's hello or a linked shard said
  uint32_t relays = 0;              // relays whose shards are linked in
  std::string shard_dir;            // where the first of those shards is
  uint64_t events = 0;
  // A write error (a full disk): events the file does not hold; `status` says why.
  uint64_t events_not_stored = 0;
  bool write_failed = false;
  // The output existed before and was kept (nothing recorded, or the new file failed).
  bool previous_kept = false;
  // Elastic restarts: the files of incarnations above 0, by incarnation; a failure to create or
  // write one (the command then exits 1, as for its own file).
  std::vector<std::string> restart_files;
  Status restart_error;
  // A relay that could not write its shard whole (a full disk there): the first one's reason. The
  // command exits 1, as for its own file.
  Status shard_error;
};

// What a finished collection wrote, for `run` and `aggregate` to print after "COMMAND: ": the file,
// its ranks (through relays and directly when relays took part), those refused and the events. Empty
// after a failed write, a failed shard or a kept previous file, whose error lines stand in for it.
std::string WroteLine(const std::string& output, const CollectionSummary& sum);

// What Start checks before it creates anything, so that a bad argument leaves no file behind
// and starts nothing: the listen address is an IP literal (kInvalidArgument otherwise: a usage
// error) that can be bound (kUnavailable), and the output can be created: not a directory, in
// an existing directory we may write in (kIoError). Messages name the address or path and why,
// prefixed with `command`.
Status CheckCollectionTargets(const CollectionOptions& options, const char* command);

class Collection {
 public:
  // `command` prefixes error messages ("commprof run"). Checks CheckCollectionTargets first.
  // A new output file is written in place (readable while the job runs, and what a killed
  // `commprof run` leaves). An existing one is not touched until the end: the new file is
  // written next to it (OUTPUT.tmp-PID) and renamed over it only once a rank was recorded and
  // the file was written without error; otherwise the old file stays (Finish says so).
  static Result<std::unique_ptr<Collection>> Start(const CollectionOptions& options, const char* command);
  ~Collection();

  uint16_t port() const { return server_->port(); }
  const ServerStats& stats() const { return server_->stats(); }
  // --hang-timeout: a hang was found and reported (printed, stored in /hang); with --on-hang abort,
  // the ranks were told to end (hang_aborted).
  bool hang_reported() const { return hang_watch_ != nullptr && hang_watch_->reports() > 0; }
  bool hang_aborted() const { return hang_watch_ != nullptr && hang_watch_->aborted(); }

  // Ranks done: their bye arrived over TCP, or their spool in `spool_dir` ends with one.
  uint32_t RanksDone(const std::string& spool_dir);

  // Waits up to `grace_s` for open connections, closes the server (sessions still open are marked
  // disconnected), merges this job's spools from `spool_dir` (removing those merged, and the
  // directory if it ends empty), finalizes the file and, with `analyze`, stores /analysis.
  // Progress and problems go to stderr prefixed "commprof".
  CollectionSummary Finish(double grace_s, const std::string& spool_dir, bool analyze);

 private:
  Collection() = default;
  // Tells every relay the job is over and waits for their shards (grace_s plus a margin).
  void FinishRelays(double grace_s);
  // Folds this job's spools into the file; the paths of those merged (none once the file cannot be
  // written), for Finish to remove when the file is written whole.
  std::vector<std::string> MergeSpools(const std::string& spool_dir);
  // The job file's write_status when relays could not write their shards (empty when none failed).
  std::string RelayFailureStatus() const;
  // Links the relays' shards' ranks into the file.
  void LinkRelayShards(CollectionSummary& sum);
  // Removes the shards (and relay logs) the replaced file linked from the shard directory, keeps and
  // tells any other, and writes the manifest of this file's shards.
  void TidyShardDirectory();
  // The hang watchdog's handler (io thread): diagnose, print, store /hang; returns the verdict.
  std::string ReportHang(const hang::HangInput& input);
  CollectionOptions options_;
  std::string command_;
  std::string write_path_;  // options_.output, or the temporary name beside an existing output
  // The shard files (names) the output this run replaces linked or named: removed with it once this
  // run's file takes its place. Any other shard beside it (a killed run's, one still being written)
  // is kept.
  std::set<std::string> replaced_shards_;
  std::unique_ptr<Ingest> ingest_;
  // Elastic restarts' files; null for a relay. Before io_, so that sessions (whose routers point
  // here) go first.
  std::unique_ptr<RestartFiles> restarts_;
  boost::asio::io_context io_;
  std::shared_ptr<HangWatch> hang_watch_;  // null without --hang-timeout
  std::unique_ptr<Server> server_;
  std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  std::thread io_thread_;
  bool finished_ = false;
  SpoolScanCache spool_scan_;
  std::vector<std::shared_ptr<RelayLink>> server_relays_;  // the relays, kept past the server's end
  std::vector<std::string> shards_;                        // shard files linked into the file
  // Shards holding a part of a rank this file takes from elsewhere (its relay ended mid-run and the
  // rank went on through another relay or directly): the job file's `unjoined_shards`.
  std::vector<std::string> unjoined_shards_;
  std::vector<std::string> relay_failures_;       // relays that could not write their shards, and why
  std::vector<std::string> relay_failure_notes_;  // those relays, "relay on HOST (pid P)"
  uint64_t relay_events_not_stored_ = 0;          // the events they could not store, summed
  bool relay_spooled_ = true;                     // whether the rest of their ranks is in spools
  std::vector<uint32_t> relay_failed_rank_list_;  // ranks linked from those relays' partial shards (sorted)
  uint64_t relay_failed_spool_bytes_ = 0;         // the bytes of those ranks' kept spools
};

// What a shard file holds, as a relay reports it (relay-done): its ranks with their event rows and
// the largest world size among them. Read by the relay for its report, and by the job's aggregator
// from the shard of a relay that ended without one (docs/scale.md#relays).
Result<wire::RelayDone> ReadShardRanks(const std::string& shard);

// 2 x `bytes` random hex digits from /dev/urandom (a time/pid fallback on a broken system).
std::string RandomHex(size_t bytes);
// $SLURM_JOB_ID, or YYYYmmdd-HHMMSS-<pid>.
std::string DefaultJobId();

}  // namespace commprof::cli
