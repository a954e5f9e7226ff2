#include "analysis/load/kineto_import.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "analysis/load/kineto_classify.h"
#include "core/schema/enums.h"

namespace commprof::kineto {
namespace fs = std::filesystem;

Result<Align> ParseAlign(const std::string& text) {
  if (text == "none") {
    return Align::kNone;
  }
  if (text == "collective-ends") {
    return Align::kCollectiveEnds;
  }
  return InvalidArgument("--align: '" + text + "' is neither 'none' nor 'collective-ends'");
}

const char* AlignName(Align align) { return align == Align::kNone ? "none" : "collective-ends"; }

std::string ImportedClockMethod(Align align) { return std::string("imported (--align ") + AlignName(align) + ")"; }

std::optional<uint32_t> RankFromFileName(const std::string& file_name) {
  static const std::regex kRank(R"((?:rank|worker)[-_]?(\d+))", std::regex::icase);
  std::smatch m;
  if (!std::regex_search(file_name, m, kRank)) {
    return std::nullopt;
  }
  try {
    unsigned long v = std::stoul(m[1].str());
    if (v > UINT32_MAX) {
      return std::nullopt;
    }
    return static_cast<uint32_t>(v);
  } catch (...) {
    return std::nullopt;
  }
}

namespace {

bool IsTraceFileName(const std::string& name) {
  auto ends = [&](const char* s) {
    std::string suffix(s);
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends(".json") || ends(".gz");
}

// "2-5,7" for a sorted list.
std::string Ranges(const std::vector<uint32_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) {
      ++j;
    }
    if (!out.empty()) {
      out += ",";
    }
    out += std::to_string(v[i]);
    if (j > i) {
      out += "-" + std::to_string(v[j]);
    }
    i = j + 1;
  }
  return out;
}

bool IsPointToPoint(uint8_t op) { return op == COMMPROF_OP_SEND || op == COMMPROF_OP_RECV; }

// The members of every process group any rank described (pg_config or Process Group Ranks).
std::map<uint64_t, std::pair<std::string, std::vector<uint32_t>>> Groups(const std::vector<ImportedRank>& ranks) {
  std::map<uint64_t, std::pair<std::string, std::vector<uint32_t>>> out;
  for (const auto& r : ranks) {
    for (const auto& g : r.trace.groups) {
      out.emplace(ProcessGroupId(g.name), std::make_pair(g.name, g.ranks));
    }
  }
  return out;
}

void AddMembership(ImportedRank& r) {
  std::vector<commprof_event> members;
  const uint64_t at = r.trace.events.empty() ? 0 : r.trace.events.front().start_ns;
  for (const auto& g : r.trace.groups) {
    auto it = std::find(g.ranks.begin(), g.ranks.end(), r.rank);
    if (it == g.ranks.end()) {
      continue;
    }
    commprof_event e{};
    e.kind = COMMPROF_KIND_MPI_COMM;
    e.subtype = COMMPROF_OP_NCCL_COMM_INIT;
    e.start_ns = e.end_ns = at;
    e.comm_id = ProcessGroupId(g.name);
    e.peer = static_cast<int32_t>(it - g.ranks.begin());
    e.bytes = g.ranks.size();
    e.device = COMMPROF_HOST_DEVICE;
    e.name_id = static_cast<uint32_t>(r.trace.strings.size());
    r.trace.strings.push_back("process group " + g.name + (g.desc.empty() ? "" : " (" + g.desc + ")"));
    members.push_back(e);
  }
  r.trace.events.insert(r.trace.events.begin(), members.begin(), members.end());
}

// Matching figures and the count check (incomplete instances are counted, never dropped
// silently: docs/metrics.md §1), and the collective-ends alignment.
void MatchAndAlign(ImportedJob& job) {
  auto groups = Groups(job.ranks);
  using Key = std::tuple<uint64_t, uint8_t, uint64_t>;            // group, op, seq
  std::map<Key, std::vector<std::pair<uint32_t, int64_t>>> ends;  // -> (rank, end)
  std::map<std::pair<uint64_t, uint8_t>, std::map<uint32_t, uint64_t>> counts;
  for (const auto& r : job.ranks) {
    for (const auto& e : r.trace.events) {
      if (e.kind != COMMPROF_KIND_NCCL_COLLECTIVE || IsPointToPoint(e.subtype)) {
        continue;
      }
      ends[{e.comm_id, e.subtype, e.seq}].push_back({r.rank, static_cast<int64_t>(e.end_ns)});
      ++counts[{e.comm_id, e.subtype}][r.rank];
    }
  }
  auto size_of = [&](uint64_t comm) -> size_t {
    auto g = groups.find(comm);
    return g != groups.end() ? g->second.second.size() : job.world_size;
  };
  auto name_of = [&](uint64_t comm) -> std::string {
    auto g = groups.find(comm);
    return g != groups.end() ? "process group '" + g->second.first + "'" : std::string(kUnknownProcessGroup);
  };
  for (const auto& [key, list] : ends) {
    ++job.matching.instances;
    if (list.size() == size_of(std::get<0>(key))) {
      ++job.matching.complete;
    }
  }
  for (const auto& [key, per_rank] : counts) {
    // Members that recorded none count as 0 when the group's members are known.
    std::map<uint32_t, uint64_t> c = per_rank;
    auto g = groups.find(key.first);
    if (g != groups.end()) {
      for (uint32_t m : g->second.second) {
        bool imported =
            std::any_of(job.ranks.begin(), job.ranks.end(), [&](const ImportedRank& r) { return r.rank == m; });
        if (imported) {
          c.emplace(m, 0);
        }
      }
    } else {
      for (const auto& r : job.ranks) {
        c.emplace(r.rank, 0);
      }
    }
    uint64_t lo = UINT64_MAX, hi = 0;
    for (const auto& [rank, n] : c) {
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    if (lo == hi) {
      continue;
    }
    ++job.matching.count_mismatches;
    std::string detail;
    for (const auto& [rank, n] : c) {
      detail += (detail.empty() ? "" : ", ") + ("rank " + std::to_string(rank) + ": " + std::to_string(n));
    }
    job.warnings.push_back(name_of(key.first) + ", " + schema::CanonicalOpName(key.second) +
                           ": the ranks recorded different counts (" + detail +
                           "); the instances past the shortest are incomplete");
  }
  if (job.ranks.size() < 2) {
    return;
  }
  if (job.align == Align::kNone) {
    return;
  }
  const uint32_t ref = job.ranks.front().rank;
  std::map<uint32_t, std::vector<int64_t>> diffs;
  for (const auto& [key, list] : ends) {
    auto r0 = std::find_if(list.begin(), list.end(), [&](const auto& p) { return p.first == ref; });
    if (r0 == list.end()) {
      continue;
    }
    for (const auto& [rank, end] : list) {
      if (rank != ref) {
        diffs[rank].push_back(r0->second - end);
      }
    }
  }
  for (auto& r : job.ranks) {
    if (r.rank == ref) {
      r.spread_ns = 0;
      continue;
    }
    auto& d = diffs[r.rank];
    if (d.empty()) {
      job.warnings.push_back("--align collective-ends: rank " + std::to_string(r.rank) +
                             " shares no collective with rank " + std::to_string(ref) +
                             ": its times are kept as written");
      continue;
    }
    std::sort(d.begin(), d.end());
    const int64_t median = d.size() % 2 == 1 ? d[d.size() / 2] : (d[d.size() / 2 - 1] + d[d.size() / 2]) / 2;
    r.offset_ns = median;
    r.spread_ns = std::max(median - d.front(), d.back() - median);
    r.anchors = d.size();
    job.alignment.push_back("--align collective-ends: rank " + std::to_string(r.rank) + " offset " +
                            std::to_string(median) + " ns to rank " + std::to_string(ref) + " (spread " +
                            std::to_string(r.spread_ns) + " ns over " + std::to_string(d.size()) + " collective ends)");
  }
}

}  // namespace

Result<ImportedJob> ImportKineto(const ImportOptions& options) {
  std::vector<std::string> files;
  for (const auto& in : options.inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(in, ec)) {
        if (entry.is_regular_file() && IsTraceFileName(entry.path().filename().string())) {
          found.push_back(entry.path().string());
        }
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(in, ec)) {
      files.push_back(in);
    } else if (fs::exists(in, ec)) {
      // A FIFO would block the read until something wrote into it, a device read forever.
      return InvalidArgument(in + ": not a regular file or directory");
    } else {
      return InvalidArgument(in + ": no such file or directory");
    }
  }
  if (files.empty()) {
    return InvalidArgument("no trace files (*.json, *.json.gz) in the inputs");
  }
  uint64_t total = 0;
  for (const auto& f : files) {
    std::error_code ec;
    total += fs::file_size(f, ec);
  }

  ImportedJob job;
  job.align = options.align;
  uint64_t done_before = 0;
  std::map<uint32_t, std::string> owner;
  for (const auto& path : files) {
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    auto progress = [&](uint64_t n) {
      if (options.progress) {
        options.progress(done_before + std::min(n, size), total);
      }
    };
    auto trace = ReadKinetoTrace(path, progress);
    done_before += size;
    if (options.progress) {
      options.progress(done_before, total);
    }
    if (!trace.ok()) {
      job.errors.push_back(trace.status().message() + " (file skipped)");
      continue;
    }
    RankTrace& t = trace.value();
    std::optional<uint32_t> rank = t.rank;
    if (!rank) {
      rank = RankFromFileName(fs::path(path).filename().string());
      if (!rank) {
        job.errors.push_back(path + ": no distributedInfo.rank, and the file name holds no rank number (file skipped)");
        continue;
      }
      if (*rank >= kMaxImportWorldSize) {
        job.errors.push_back(path + ": no distributedInfo.rank, and the rank in the file name, " +
                             std::to_string(*rank) + ", is above the largest rank the importer takes (" +
                             std::to_string(kMaxImportWorldSize - 1) + ") (file skipped)");
        continue;
      }
      job.warnings.push_back(path + ": no distributedInfo.rank; rank " + std::to_string(*rank) +
                             " taken from the file name");
    }
    if (auto o = owner.find(*rank); o != owner.end()) {
      job.errors.push_back(path + ": rank " + std::to_string(*rank) + " again (already read from " + o->second +
                           "): file skipped");
      continue;
    }
    owner[*rank] = path;
    for (const auto& p : t.problems) {
      job.errors.push_back(p);
    }
    if (t.counts.rejected > t.problems.size()) {
      job.errors.push_back(path + ": " + std::to_string(t.counts.rejected - t.problems.size()) +
                           " more events refused");
    }
    if (!t.read_status.ok()) {
      job.errors.push_back(t.read_status.message() + "; the " + std::to_string(t.counts.events_read) +
                           " events before it are kept");
    }
    for (const auto& [cat, n] : t.unknown_categories) {
      std::string warning = path + ": ";
      warning += std::to_string(n);
      warning += " events of unknown category '";
      warning += cat;
      warning += "' kept as kind other";
      job.warnings.push_back(std::move(warning));
    }
    job.world_size = std::max({job.world_size, t.world_size, *rank + 1});
    ImportedRank r;
    r.rank = *rank;
    r.trace = std::move(t);
    job.ranks.push_back(std::move(r));
  }
  if (job.ranks.empty()) {
    std::string why = job.errors.empty() ? "" : ": " + job.errors.front();
    return InvalidArgument("no trace could be imported" + why);
  }
  std::sort(job.ranks.begin(), job.ranks.end(),
            [](const ImportedRank& a, const ImportedRank& b) { return a.rank < b.rank; });

  // Gaps: every rank below the world size that no file holds.
  std::vector<uint32_t> missing;
  for (uint32_t r = 0, i = 0; r < job.world_size; ++r) {
    while (i < job.ranks.size() && job.ranks[i].rank < r) {
      ++i;
    }
    if (i == job.ranks.size() || job.ranks[i].rank != r) {
      missing.push_back(r);
    }
  }
  if (!missing.empty()) {
    job.warnings.push_back("no trace file for rank(s) " + Ranges(missing) + " (" + std::to_string(missing.size()) +
                           " of " + std::to_string(job.world_size) + " ranks)");
  }

  // One time base: the earliest absolute time of any record.
  int64_t base = INT64_MAX;
  for (const auto& r : job.ranks) {
    if (r.trace.min_ns != INT64_MAX) {
      base = std::min(base, r.trace.min_ns + r.trace.base_ns.value_or(0));
    }
  }
  if (base == INT64_MAX) {
    base = 0;
  }
  job.start_epoch_ns = static_cast<uint64_t>(std::max<int64_t>(base, 0));
  for (auto& r : job.ranks) {
    const int64_t shift = r.trace.base_ns.value_or(0) - base;
    for (auto& e : r.trace.events) {
      e.start_ns = static_cast<uint64_t>(static_cast<int64_t>(e.start_ns) + shift);
      e.end_ns = static_cast<uint64_t>(static_cast<int64_t>(e.end_ns) + shift);
    }
    job.notes.push_back("rank " + std::to_string(r.rank) + ": " + r.trace.path + ": " +
                        std::to_string(r.trace.counts.records) + " records from " +
                        std::to_string(r.trace.counts.events_read) + " events, times " +
                        (r.trace.base_ns ? "in µs on baseTimeNanoseconds" : "in epoch µs") + ", " +
                        std::to_string(r.trace.counts.comm_kernels) + " communication kernels");
    AddMembership(r);
  }
  MatchAndAlign(job);
  if (job.ranks.size() == 1) {
    job.notes.push_back("only rank " + std::to_string(job.ranks.front().rank) +
                        " was imported: cross-rank analyses (wait, stragglers, matching) need traces of more ranks; "
                        "the per-rank figures stand on their own");
  }
  return job;
}

}  // namespace commprof::kineto
