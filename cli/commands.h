// The `commprof` subcommands. Each registers its options on a CLI11 app and runs when chosen.
// Exit codes (docs/cli.md): 0 success; 1 the command failed (message on stderr); 2 bad usage;
// `run` returns the job's own exit code (128 + signal when it was killed).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace commprof {
class ProfileReader;
struct ProfileInfo;
struct WriterOptions;
}  // namespace commprof

namespace commprof::cli {

using Runner = std::function<int()>;

Runner AddRunCommand(CLI::App& app);
// `commprof run ... -- JOB...`: main() hands the words after the first "--" here, because
// CLI11 would otherwise try to parse the job's own options.
void SetRunArgsAfterDashDash(std::vector<std::string> args);
Runner AddInfoCommand(CLI::App& app);
Runner AddMergeCommand(CLI::App& app);
Runner AddReportCommand(CLI::App& app);
Runner AddCheckCommand(CLI::App& app);
Runner AddExportCommand(CLI::App& app);
Runner AddImportCommand(CLI::App& app);
Runner AddAggregateCommand(CLI::App& app);
Runner AddRelayCommand(CLI::App& app);  // commprof relay (docs/scale.md#relays)
Runner AddHtaCommand(CLI::App& app);
Runner AddStatsCommand(CLI::App& app);  // commprof stats (docs/cli.md)
Runner AddDiffCommand(CLI::App& app);

// Exit code of a command whose input file cannot be read at all (missing, not HDF5, not a commprof
// file, locked, damaged beyond its metadata): 2 for every command (docs/cli.md#exit-codes), as
// check and diff always had it, so that 1 keeps meaning "it ran: something failed, or parts of the
// file were left out".
inline constexpr int kExitUnreadable = 2;
// ProfileReader::Open for `command`; on failure prints "commprof COMMAND: <error naming the file>"
// and returns nullptr (exit with kExitUnreadable).
std::unique_ptr<ProfileReader> OpenOrSay(const std::string& path, const char* command);

// A fault of a file's reading, named by the file once: as it is when it begins with `path`, else
// "PATH: FAULT".
std::string FaultOfFile(const std::string& path, const std::string& fault);

// One message on stderr when `tell`: the first process of a distributed command speaks for all of
// them (they meet the same usage errors), the others keep quiet.
void SayIf(bool tell, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Computes the cross-rank analysis of a finished file and stores it in the file's /analysis group
// (docs/file-format.md). A failure is reported on stderr as "<command>: ..." and returned; callers
// that produced a good file keep their own exit code. `shown_path`, when given, is the path the
// stored report names instead of `path` (a copy analysed in its file's stead).
bool StoreAnalysis(const std::string& path, const char* command, const std::string& shown_path = "");
// The same, returning why not instead of saying it (the background analysis says it once its
// copy is gone: on a full disk its log has room only then).
Status StoreAnalysisOrSayWhyNot(const std::string& path, const char* command, const std::string& shown_path);
// For the analysis: freed memory stays in the heap for reuse (see util.cc). Not for the collecting
// commands while they collect (their memory is bounded by --queue-mb).
void KeepFreedMemoryForReuse();

// Closes every descriptor above stderr; async-signal-safe (for a child between fork and exec).
void CloseDescriptorsAbove2();

// SIGXFSZ ignored: a write past the file-size limit (`ulimit -f`) then fails with EFBIG and is
// told like a full disk (a message naming the output, exit 1, no partial file) instead of the
// signal ending the command without a word. RestoreStartSignals gives a child about to exec (the
// job `run` starts) the disposition commprof itself was started with; async-signal-safe.
void IgnoreFileSizeSignal();
void RestoreStartSignals();

// Where a job file's shards are: the directory its links name, beside the file itself (a symbolic
// link to it followed), else FILE.shards beside it.
std::string ShardDirOf(const ProfileInfo& info);
// The shard files a job file lacks a part of: for a file whose `commprof run --relay` ended before
// it linked its relays' shards (not finalized), those in its shard directory that none of its ranks
// links to, sorted; for a finalized file, those its unjoined_shards attribute names.
std::vector<std::string> UnlinkedShards(const ProfileInfo& info);
// Spool files left beside a file (FILE.spool/*.cpspool; a symbolic link to it followed): events of
// its ranks that are not in it (its run killed, or a write that failed), sorted.
std::vector<std::string> KeptSpools(const ProfileInfo& info);
// The unlinked shards and the kept spools, told on stderr as warnings of `command` when there are any.
void SayUnlinkedShards(const char* command, const ProfileInfo& info);

// A --ranks list: "0,3,5-7" -> {0, 3, 5, 6, 7} (sorted, no duplicates); false on anything else,
// an empty list included.
bool ParseRankList(const std::string& spec, std::vector<uint32_t>& out);

// `--window K` of every command that reads a profile (docs/cli.md): -1 when not given.
void AddWindowOption(CLI::App* sub, int64_t& window);
// Selects window K of `reader` when `window` >= 0 (ProfileReader::SelectWindow); on failure prints
// "commprof COMMAND: <error naming the file>" and returns false.
bool SelectWindowIfAsked(ProfileReader& reader, int64_t window, const char* command);

// `--compression CODEC` (and the older `--deflate N`, which excludes it) of the commands that write
// a file (docs/cli.md); both are validated while parsing, so resolving them cannot fail.
struct CompressionChoice {
  std::string codec = "lz4";
  int deflate = -1;  // -1: not given; 0: none; 1-9: deflate at that level
};
void AddCompressionOptions(CLI::App* sub, CompressionChoice& choice);
WriterOptions ResolveCompression(const CompressionChoice& choice);
// `--queue-mb N` of run and aggregate: the aggregator's back-pressure bound (docs/scale.md).
void AddQueueOption(CLI::App* sub, uint64_t& queue_mb);
// `--flush-ms MS` (1 to an hour) and `--grace SECONDS` (0 to a day, a finite number) of run,
// aggregate and relay.
inline constexpr uint32_t kMaxFlushMs = 3600000;
inline constexpr int kMaxGraceS = 86400;
void AddFlushOption(CLI::App* sub, uint32_t& flush_ms, const char* help);
void AddGraceOption(CLI::App* sub, double& grace_s, const char* help);

// Steady "YYYY-mm-ddTHH:MM:SS.nnnnnnnnnZ" for a UTC epoch in ns.
std::string FormatUtc(uint64_t epoch_ns);

}  // namespace commprof::cli
