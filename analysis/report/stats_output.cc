#include "analysis/report/stats_output.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "analysis/load/profile_reader.h"
#include "analysis/metrics/duration_sketch.h"

namespace commprof {
namespace {

std::string Printf(const char* fmt, double v) {
  std::array<char, 48> buf{};
  std::snprintf(buf.data(), buf.size(), fmt, v);
  return buf.data();
}

// 3 significant digits in `unit`, at most 6 characters of number.
std::string Scaled(double v, const char* unit) {
  const char* fmt = v < 9.995 ? "%.2f%s" : v < 99.95 ? "%.1f%s" : "%.0f%s";
  std::array<char, 48> buf{};
  std::snprintf(buf.data(), buf.size(), fmt, v, unit);
  return buf.data();
}

std::string Count(uint64_t n) {
  if (n <= 9'999'999) {
    return std::to_string(n);
  }
  return n < 9'999'500'000ull ? Scaled(static_cast<double>(n) / 1e6, "M") : Scaled(static_cast<double>(n) / 1e9, "G");
}

// A byte count as a power-of-two unit when it is one ("1K", "512", "2M").
std::string ShortBytes(uint64_t b) {
  static constexpr std::array<const char*, 7> kUnits = {"", "K", "M", "G", "T", "P", "E"};
  size_t u = 0;
  while (b >= 1024 && b % 1024 == 0 && u + 1 < kUnits.size()) {
    b /= 1024;
    ++u;
  }
  return std::to_string(b) + kUnits[u];
}

std::string SizeShort(int bucket) {
  if (bucket <= 0) {
    return "0";
  }
  return ShortBytes(SizeBucketLow(bucket)) + "-" +
         (bucket >= 64 ? std::string("16E") : ShortBytes(SizeBucketHigh(bucket)));
}

// Communicator ids as `commprof info` shows them: "world", "<rank+1>.<n>" for one created by a
// wrapped call, else (NCCL commHash, untracked) the first 8 hex digits.
std::string CommShort(uint64_t comm) {
  if (comm == COMMPROF_NO_COMM_ID) {
    return "-";
  }
  if (comm == COMMPROF_COMM_WORLD_ID) {
    return "world";
  }
  std::array<char, 32> buf{};
  if ((comm >> 63) == 0 && (comm >> 32) < (uint64_t{1} << 24)) {
    std::snprintf(buf.data(), buf.size(), "%" PRIu64 ".%" PRIu64, comm >> 32, comm & 0xFFFFFFFFu);
  } else {
    std::snprintf(buf.data(), buf.size(), "%08" PRIx64 "..", comm >> 32);
  }
  return buf.data();
}

std::string Gbps(const std::optional<double>& g) {
  if (!g) {
    return "-";
  }
  if (*g < 0.00995) {
    return "<0.01";  // csv and json hold the figure
  }
  // At most the column's 6 characters: "%.1e" would be 7 ("1.2e+06") and lose its last digit.
  return *g < 999.5 ? Scaled(*g, "") : *g < 999'999.5 ? Printf("%.0f", *g) : Printf("%.0e", *g);
}

// At most the column's 5 characters: with 100 ranks or more an operation of one rank has an
// imbalance of 100 or more, which "%.2f" would print as "128.00" and the column cut to "128.0".
std::string Imbalance(double v) {
  return v < 9.995 ? Printf("%.2f", v) : v < 99.95 ? Printf("%.1f", v) : Printf("%.0f", v);
}

// Names are UTF-8 (NVTX messages, Python frames): the table counts and cuts them by code point, so
// a cut never splits a character and a name of multi-byte characters is padded to its column.
size_t CodePoints(const std::string& s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// The byte offset of code point `n` of `s` (s.size() past its last).
size_t ByteOffset(const std::string& s, size_t n) {
  size_t i = 0;
  for (; i < s.size() && n > 0; --n) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) {
      ++i;
    }
  }
  return i;
}

// One sortable figure of a row; names sort apart.
using NumberOf = std::function<double(const OpStatsRow&)>;
const std::map<std::string, NumberOf>& NumericKeys() {
  static const std::map<std::string, NumberOf> kKeys = {
      {"calls", [](const OpStatsRow& r) { return static_cast<double>(r.calls); }},
      {"total", [](const OpStatsRow& r) { return static_cast<double>(r.total_ns); }},
      {"self", [](const OpStatsRow& r) { return static_cast<double>(r.self_ns); }},
      {"mean", [](const OpStatsRow& r) { return r.mean_ns; }},
      {"p50", [](const OpStatsRow& r) { return static_cast<double>(r.p50_ns); }},
      {"p99", [](const OpStatsRow& r) { return static_cast<double>(r.p99_ns); }},
      {"max", [](const OpStatsRow& r) { return static_cast<double>(r.max_ns); }},
      {"min", [](const OpStatsRow& r) { return static_cast<double>(r.min_ns); }},
      {"bytes", [](const OpStatsRow& r) { return static_cast<double>(r.bytes); }},
      {"gbps", [](const OpStatsRow& r) { return r.bandwidth_gbps.value_or(-1.0); }},
      {"imbal", [](const OpStatsRow& r) { return r.imbalance.value_or(-1.0); }},
  };
  return kKeys;
}

const std::map<std::string, std::string>& Aliases() {
  static const std::map<std::string, std::string> kAliases = {
      {"category", "kind"}, {"bandwidth", "gbps"}, {"imbalance", "imbal"}, {"max_rank", "maxrk"}};
  return kAliases;
}

struct Column {
  const char* header;
  size_t width;
  bool left;
  std::function<std::string(const OpStatsRow&)> cell;
};

}  // namespace

const std::vector<std::string>& StatsSortKeys() {
  static const std::vector<std::string> kKeys = {
      "name", "kind",  "calls", "total", "self", "mean", "p50",      "p99",       "max",       "min",     "bytes",
      "gbps", "imbal", "maxrk", "comm",  "size", "rank", "category", "bandwidth", "imbalance", "max_rank"};
  return kKeys;
}

bool SortStatsRows(std::vector<OpStatsRow>& rows, const std::string& asked) {
  const auto& keys = StatsSortKeys();
  if (std::find(keys.begin(), keys.end(), asked) == keys.end()) {
    return false;
  }
  const auto alias = Aliases().find(asked);
  const std::string key = alias == Aliases().end() ? asked : alias->second;
  auto tie = [](const OpStatsRow& x, const OpStatsRow& y) {
    return x.total_ns != y.total_ns ? x.total_ns > y.total_ns
                                    : std::tie(x.name, x.category, x.comm, x.size_bucket, x.rank) <
                                          std::tie(y.name, y.category, y.comm, y.size_bucket, y.rank);
  };
  const auto numeric = NumericKeys().find(key);
  std::function<bool(const OpStatsRow&, const OpStatsRow&)> less;
  if (numeric != NumericKeys().end()) {
    const NumberOf& f = numeric->second;
    less = [&f, tie](const OpStatsRow& x, const OpStatsRow& y) {
      const double a = f(x), b = f(y);
      return a != b ? a > b : tie(x, y);
    };
  } else {
    // Names alphabetically; communicators, sizes and ranks ascending (absent first).
    less = [&key, tie](const OpStatsRow& x, const OpStatsRow& y) {
      if (key == "name" && x.name != y.name) {
        return x.name < y.name;
      }
      if (key == "kind" && x.category != y.category) {
        return x.category < y.category;
      }
      if (key == "comm" && x.comm != y.comm) {
        return x.comm < y.comm;
      }
      if (key == "size" && x.size_bucket != y.size_bucket) {
        return x.size_bucket < y.size_bucket;
      }
      if (key == "rank" && x.rank != y.rank) {
        return x.rank < y.rank;
      }
      if (key == "maxrk" && x.max_rank != y.max_rank) {
        return x.max_rank < y.max_rank;
      }
      return tie(x, y);
    };
  }
  std::stable_sort(rows.begin(), rows.end(), less);
  return true;
}

std::string FormatStatsTime(double ns) {
  if (ns < 999.5) {
    return Printf("%.0fns", ns);
  }
  if (ns < 999'500.0) {
    return Scaled(ns / 1e3, "us");
  }
  if (ns < 999'500'000.0) {
    return Scaled(ns / 1e6, "ms");
  }
  if (ns < 999.5e9) {
    return Scaled(ns / 1e9, "s");
  }
  return Printf("%.0fs", ns / 1e9);
}

std::string ElideMiddle(const std::string& s, size_t width) {
  const size_t length = CodePoints(s);
  if (length <= width) {
    return s;
  }
  if (width <= 3) {
    return s.substr(0, ByteOffset(s, width));
  }
  const size_t keep = width - 3;
  const size_t head = (keep + 1) / 2;
  return s.substr(0, ByteOffset(s, head)) + "..." + s.substr(ByteOffset(s, length - (keep - head)));
}

std::vector<std::string> ElideDistinct(const std::vector<std::string>& names, size_t width) {
  width = std::max<size_t>(width, 16);
  std::vector<std::string> out;
  out.reserve(names.size());
  std::map<std::string, std::vector<size_t>> shown;  // printed form -> rows
  for (size_t i = 0; i < names.size(); ++i) {
    out.push_back(ElideMiddle(names[i], width));
    shown[out.back()].push_back(i);
  }
  // Code points two names share from their start.
  auto common = [](const std::string& a, const std::string& b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) {
      ++i;
    }
    return CodePoints(a.substr(0, i));
  };
  constexpr size_t kHead = 8;  // code points of the start kept before "..."
  for (const auto& [form, rows] : shown) {
    std::set<std::string> distinct;
    for (size_t i : rows) {
      distinct.insert(names[i]);
    }
    if (distinct.size() < 2) {
      continue;
    }
    const size_t window = width - kHead - 3;
    for (size_t i : rows) {
      size_t differs = 0;  // where names[i] first differs from the closest other name of the group
      for (const std::string& other : distinct) {
        if (other != names[i]) {
          differs = std::max(differs, common(names[i], other));
        }
      }
      const std::string& n = names[i];
      const size_t length = CodePoints(n);
      if (length <= width) {
        continue;  // printed whole already
      }
      // The window shows the first differing character, with some context before it.
      size_t start = differs > window / 3 ? differs - window / 3 : 0;
      start = std::clamp(start, kHead, length > window ? length - window : kHead);
      out[i] = n.substr(0, ByteOffset(n, kHead)) + "..." +
               n.substr(ByteOffset(n, start), ByteOffset(n, start + window) - ByteOffset(n, start));
    }
  }
  // Still equal for different names (they differ only outside every window): number them.
  std::map<std::string, std::vector<size_t>> again;
  for (size_t i = 0; i < names.size(); ++i) {
    again[out[i]].push_back(i);
  }
  for (auto& [form, rows] : again) {
    std::map<std::string, size_t> number;  // full name -> its number in this group
    for (size_t i : rows) {
      number.emplace(names[i], number.size() + 1);
    }
    if (number.size() < 2) {
      continue;
    }
    for (size_t i : rows) {
      const std::string tag = "#" + std::to_string(number[names[i]]);
      out[i] = out[i].substr(0, ByteOffset(out[i], width - tag.size())) + tag;
    }
  }
  return out;
}

void WriteStatsText(const OpStats& stats, const std::vector<OpStatsRow>& shown, const StatsContext& ctx,
                    std::ostream& os) {
  auto time = [](int64_t ns) { return FormatStatsTime(static_cast<double>(ns)); };
  size_t kind_width = 4;
  for (const OpStatsRow& r : shown) {
    kind_width = std::max(kind_width, r.category.size());
  }
  std::vector<Column> cols;
  cols.push_back({"kind", kind_width, true, [](const OpStatsRow& r) { return r.category; }});
  if (ctx.options.by_comm) {
    cols.push_back({"comm", 10, true, [](const OpStatsRow& r) { return CommShort(r.comm.value_or(0)); }});
  }
  if (ctx.options.by_size) {
    cols.push_back({"size", 9, false,
                    [](const OpStatsRow& r) { return r.size_bucket ? SizeShort(*r.size_bucket) : std::string("-"); }});
  }
  if (ctx.options.by_rank) {
    cols.push_back({"rank", 5, false, [](const OpStatsRow& r) { return r.rank ? std::to_string(*r.rank) : "-"; }});
  }
  cols.push_back({"calls", 7, false, [](const OpStatsRow& r) { return Count(r.calls); }});
  cols.push_back({"total", 6, false, [&](const OpStatsRow& r) { return time(r.total_ns); }});
  cols.push_back({"self", 6, false, [&](const OpStatsRow& r) { return time(r.self_ns); }});
  cols.push_back({"mean", 6, false, [](const OpStatsRow& r) { return FormatStatsTime(r.mean_ns); }});
  cols.push_back({"p50", 6, false, [&](const OpStatsRow& r) { return time(r.p50_ns); }});
  cols.push_back({"p99", 6, false, [&](const OpStatsRow& r) { return time(r.p99_ns); }});
  cols.push_back({"max", 6, false, [&](const OpStatsRow& r) { return time(r.max_ns); }});
  cols.push_back({"gbps", 6, false, [](const OpStatsRow& r) { return Gbps(r.bandwidth_gbps); }});
  if (!ctx.options.by_rank) {
    cols.push_back(
        {"imbal", 5, false, [](const OpStatsRow& r) { return r.imbalance ? Imbalance(*r.imbalance) : "-"; }});
    cols.push_back(
        {"maxrk", 5, false, [](const OpStatsRow& r) { return r.max_rank ? std::to_string(*r.max_rank) : "-"; }});
  }
  // The name takes what is left of 100 columns; below 24, the columns CSV and JSON still hold
  // (mean, self, p50) give way first.
  constexpr size_t kMinName = 24;
  auto rest = [&] {
    size_t used = 0;
    for (const Column& c : cols) {
      used += c.width + 1;
    }
    return used >= kStatsTextWidth ? 0 : kStatsTextWidth - used;
  };
  for (const char* drop : {"mean", "self", "p50"}) {
    if (rest() >= kMinName) {
      break;
    }
    cols.erase(
        std::remove_if(cols.begin(), cols.end(), [drop](const Column& c) { return std::string(c.header) == drop; }),
        cols.end());
  }
  const size_t name_width = rest();

  std::string what = std::to_string(stats.ranks.size()) + (stats.ranks.size() == 1 ? " rank, " : " ranks, ") +
                     std::to_string(stats.events_counted) + " events in " + std::to_string(ctx.rows_total) + " rows";
  if (ctx.window) {
    what += ", window " + std::to_string(*ctx.window);
  }
  what += ", sorted by " + ctx.sort;
  os << ElideMiddle(ctx.path, kStatsTextWidth - what.size() - 2) << ": " << what << "\n";

  auto pad = [](const std::string& s, size_t w, bool left) {
    const std::string cut = CodePoints(s) > w ? s.substr(0, ByteOffset(s, w)) : s;
    const std::string fill(w - CodePoints(cut), ' ');
    return left ? cut + fill : fill + cut;
  };
  std::string line = pad("name", name_width, true);
  for (const Column& c : cols) {
    line += " " + pad(c.header, c.width, c.left);
  }
  os << line << "\n";
  bool approximate = false;
  std::vector<std::string> names;
  names.reserve(shown.size());
  for (const OpStatsRow& r : shown) {
    names.push_back(r.name);
  }
  const std::vector<std::string> printed = ElideDistinct(names, name_width);
  for (size_t row = 0; row < shown.size(); ++row) {
    const OpStatsRow& r = shown[row];
    line = pad(printed[row], name_width, true);
    for (const Column& c : cols) {
      line += " " + pad(c.cell(r), c.width, c.left);
    }
    // Trailing blanks of a left-aligned last column are noise.
    line.erase(line.find_last_not_of(' ') + 1);
    os << line << "\n";
    approximate = approximate || !r.percentiles_exact;
  }
  if (shown.size() < ctx.rows_total) {
    os << (ctx.rows_total - shown.size()) << " more rows not shown (--top 0 shows every row)\n";
  }
  if (approximate) {
    os << "p50/p99 of rows of more than " << ctx.options.exact_samples << " calls are within "
       << static_cast<int>(DurationSketch::kRelativeError * 100) << " % (docs/metrics.md §12.3)\n";
  }
  if (stats.missing_events > 0) {
    os << stats.missing_events << " events the ranks recorded are not in the file (dropped or lost): the figures "
       << "are short of them\n";
  }
  if (stats.incomplete_skipped > 0) {
    os << stats.incomplete_skipped << " incomplete operations (never completed) are not counted\n";
  }
}

void WriteStatsCsv(const std::vector<OpStatsRow>& shown, std::ostream& os) {
  auto quote = [](const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) {
      return s;
    }
    std::string q = "\"";
    for (char c : s) {
      q += c == '"' ? std::string("\"\"") : std::string(1, c);
    }
    return q + "\"";
  };
  auto opt = [](const auto& v) { return v ? std::to_string(*v) : std::string(); };
  os << "category,name,comm,size_bucket,size_low,size_high,rank,calls,total_ns,self_ns,mean_ns,min_ns,p50_ns,"
        "p99_ns,max_ns,percentiles_exact,bytes,bandwidth_gbps,imbalance,max_rank\n";
  for (const OpStatsRow& r : shown) {
    os << quote(r.category) << "," << quote(r.name) << "," << opt(r.comm) << "," << opt(r.size_bucket) << ","
       << (r.size_bucket ? std::to_string(SizeBucketLow(*r.size_bucket)) : "") << ","
       << (r.size_bucket ? std::to_string(SizeBucketHigh(*r.size_bucket)) : "") << "," << opt(r.rank) << "," << r.calls
       << "," << r.total_ns << "," << r.self_ns << "," << Printf("%.3f", r.mean_ns) << "," << r.min_ns << ","
       << r.p50_ns << "," << r.p99_ns << "," << r.max_ns << "," << (r.percentiles_exact ? 1 : 0) << "," << r.bytes
       << "," << (r.bandwidth_gbps ? Printf("%.6g", *r.bandwidth_gbps) : "") << ","
       << (r.imbalance ? Printf("%.6g", *r.imbalance) : "") << "," << opt(r.max_rank) << "\n";
  }
}

nlohmann::ordered_json StatsToJson(const OpStats& stats, const std::vector<OpStatsRow>& shown,
                                   const StatsContext& ctx) {
  using J = nlohmann::ordered_json;
  auto opt = [](const auto& v) { return v ? J(*v) : J(nullptr); };
  auto bucket = [](int b) { return J{{"bucket", b}, {"low", SizeBucketLow(b)}, {"high", SizeBucketHigh(b)}}; };
  J doc;
  doc["schema"] = "commprof-stats";
  doc["schema_version"] = kStatsJsonVersion;
  doc["path"] = ctx.path;
  doc["window"] = opt(ctx.window);
  J by = J::array({"name"});
  if (ctx.options.by_comm) {
    by.push_back("comm");
  }
  if (ctx.options.by_size) {
    by.push_back("size");
  }
  if (ctx.options.by_rank) {
    by.push_back("rank");
  }
  doc["options"] = {{"by", by},
                    {"sort", ctx.sort},
                    {"top", ctx.top},
                    {"kinds", ctx.options.kinds.empty() ? J(nullptr) : J(ctx.options.kinds)},
                    {"ranks", ctx.options.ranks.empty() ? J(nullptr) : J(ctx.options.ranks)}};
  doc["percentiles"] = {{"method", "nearest-rank"},
                        {"exact_up_to_calls", ctx.options.exact_samples},
                        {"relative_error", DurationSketch::kRelativeError}};
  doc["ranks_read"] = stats.ranks;
  doc["faults"] = ctx.faults;
  doc["events_read"] = stats.events_read;
  doc["events_counted"] = stats.events_counted;
  doc["incomplete_skipped"] = stats.incomplete_skipped;
  doc["missing_events"] = stats.missing_events;
  doc["rows_total"] = ctx.rows_total;
  doc["rows_left_out"] = ctx.rows_total - shown.size();
  J rows = J::array();
  for (const OpStatsRow& r : shown) {
    J j;
    j["category"] = r.category;
    j["name"] = r.name;
    if (ctx.options.by_comm) {
      j["comm"] = opt(r.comm);
    }
    if (ctx.options.by_size) {
      j["size"] = r.size_bucket ? bucket(*r.size_bucket) : J(nullptr);
    }
    if (ctx.options.by_rank) {
      j["rank"] = opt(r.rank);
    }
    j["calls"] = r.calls;
    j["total_ns"] = r.total_ns;
    j["self_ns"] = r.self_ns;
    j["mean_ns"] = r.mean_ns;
    j["min_ns"] = r.min_ns;
    j["p50_ns"] = r.p50_ns;
    j["p99_ns"] = r.p99_ns;
    j["max_ns"] = r.max_ns;
    j["percentiles_exact"] = r.percentiles_exact;
    j["bytes"] = r.bytes;
    j["bandwidth_gbps"] = opt(r.bandwidth_gbps);
    j["imbalance"] = opt(r.imbalance);
    j["max_rank"] = opt(r.max_rank);
    J per_rank = J::array();
    for (const RankTotal& t : r.per_rank) {
      per_rank.push_back(
          {{"rank", t.rank}, {"calls", t.calls}, {"total_ns", t.total_ns}, {"self_ns", t.self_ns}, {"bytes", t.bytes}});
    }
    j["per_rank"] = std::move(per_rank);
    rows.push_back(std::move(j));
  }
  doc["rows"] = std::move(rows);
  J hist = J::array();
  for (const SizeHistogram& h : stats.size_histograms) {
    J buckets = J::array();
    for (const auto& [b, calls] : h.buckets) {
      J e = bucket(b);
      e["calls"] = calls;
      buckets.push_back(std::move(e));
    }
    hist.push_back({{"category", h.category}, {"name", h.name}, {"buckets", std::move(buckets)}});
  }
  doc["size_histograms"] = std::move(hist);
  return doc;
}

}  // namespace commprof
