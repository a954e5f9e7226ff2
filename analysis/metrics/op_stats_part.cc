// OpStatsPartial's bookkeeping, merging and bytes (analysis/metrics/op_stats.h): what lets the
// processes of `commprof stats` as an MPI job each read a block of ranks and the first finish the
// rows of all of them, equal to what one process computes.
#include <utility>

#include "analysis/metrics/op_stats.h"
#include "core/part_bytes.h"

namespace commprof {
namespace {

constexpr uint32_t kMagic = 0x534F5043;  // "CPOS"
constexpr uint32_t kKind = 1;
// The record sizes both ends must agree on: a different build is refused, not misread.
constexpr uint64_t kLayout = sizeof(RankTotal) ^ (sizeof(std::array<uint64_t, 65>) << 16);
static_assert(sizeof(OpStatsPartial::Row) == 256,
              "OpStatsPartial::Row changed: update EncodeOpStatsPart, DecodeOpStatsPart and Merge");

Status Malformed() {
  return Internal(
      "distributed stats: the statistics from another process are malformed (are all processes the "
      "same commprof build?)");
}

template <typename T>
void PutOptional(PartWriter& w, const std::optional<T>& v) {
  w.Put<uint8_t>(v ? 1 : 0);
  w.Put(v.value_or(T{}));
}

template <typename T>
bool GetOptional(PartReader& r, std::optional<T>& v) {
  uint8_t has = 0;
  T value{};
  if (!r.Get(has) || !r.Get(value) || has > 1) {
    return false;
  }
  v = has != 0 ? std::optional<T>(value) : std::nullopt;
  return true;
}

}  // namespace

uint32_t OpStatsPartial::RowFor(const RowKey& key) {
  auto [it, fresh] = row_of.emplace(key, static_cast<uint32_t>(rows.size()));
  if (fresh) {
    Row& row = rows.emplace_back(exact_samples);
    row.category = std::get<0>(key);
    row.name = std::get<1>(key);
    row.comm = std::get<2>(key);
    if (std::get<3>(key) >= 0) {
      row.size_bucket = std::get<3>(key);
    }
    if (std::get<4>(key) >= 0) {
      row.rank = static_cast<uint32_t>(std::get<4>(key));
    }
  }
  return it->second;
}

size_t OpStatsPartial::HistogramFor(uint8_t category, const std::string& name) {
  auto [it, fresh] = histogram_of.emplace(std::make_pair(category, name), histograms.size());
  if (fresh) {
    histograms.emplace_back();
  }
  return it->second;
}

void OpStatsPartial::Merge(OpStatsPartial&& later) {
  for (Row& from : later.rows) {
    const size_t histogram = from.histogram == kNoHistogram ? kNoHistogram : HistogramFor(from.category, from.name);
    auto [it, fresh] = row_of.emplace(from.Key(), static_cast<uint32_t>(rows.size()));
    if (fresh) {
      Row& row = rows.emplace_back(std::move(from));
      row.histogram = histogram;
      continue;
    }
    Row& row = rows[it->second];
    row.min_ns = row.calls == 0 ? from.min_ns : std::min(row.min_ns, from.min_ns);
    row.max_ns = row.calls == 0 ? from.max_ns : std::max(row.max_ns, from.max_ns);
    row.calls += from.calls;
    row.total_ns += from.total_ns;
    row.self_ns += from.self_ns;
    row.bytes += from.bytes;
    row.sketch.Merge(from.sketch);
    row.per_rank.insert(row.per_rank.end(), from.per_rank.begin(), from.per_rank.end());
  }
  for (const auto& [key, index] : later.histogram_of) {
    std::array<uint64_t, 65>& calls = histograms[HistogramFor(key.first, key.second)];
    for (size_t b = 0; b < calls.size(); ++b) {
      calls[b] += later.histograms[index][b];
    }
  }
  events_read += later.events_read;
  events_counted += later.events_counted;
  incomplete_skipped += later.incomplete_skipped;
  faults.insert(faults.end(), std::make_move_iterator(later.faults.begin()),
                std::make_move_iterator(later.faults.end()));
}

std::string EncodeOpStatsPart(const Result<OpStatsPartial>& part) {
  PartWriter w;
  PutPartHead(w, kMagic, kKind, kLayout, part.status());
  if (!part.ok()) {
    return w.Take();
  }
  const OpStatsPartial& p = part.value();
  w.Put<uint64_t>(p.exact_samples);
  w.Put<uint64_t>(p.rows.size());
  for (const OpStatsPartial::Row& row : p.rows) {
    w.Put(row.category);
    w.PutString(row.name);
    PutOptional(w, row.comm);
    PutOptional(w, row.size_bucket);
    PutOptional(w, row.rank);
    w.Put<uint8_t>(row.bandwidth ? 1 : 0);
    w.Put<uint64_t>(row.histogram);
    w.Put(row.calls);
    w.Put(row.total_ns);
    w.Put(row.self_ns);
    w.Put(row.min_ns);
    w.Put(row.max_ns);
    w.Put(row.bytes);
    row.sketch.Encode(w);
    w.PutVector(row.per_rank);
  }
  w.Put<uint64_t>(p.histogram_of.size());
  for (const auto& [key, index] : p.histogram_of) {
    w.Put(key.first);
    w.PutString(key.second);
    w.Put<uint64_t>(index);
  }
  w.PutVector(p.histograms);
  w.Put(p.events_read);
  w.Put(p.events_counted);
  w.Put(p.incomplete_skipped);
  w.Put<uint64_t>(p.faults.size());
  for (const std::string& f : p.faults) {
    w.PutString(f);
  }
  return w.Take();
}

Result<OpStatsPartial> DecodeOpStatsPart(std::string_view bytes) {
  PartReader r(bytes);
  COMMPROF_RETURN_IF_ERROR(GetPartHead(r, kMagic, kKind, kLayout, Malformed()));
  OpStatsPartial p;
  uint64_t exact = 0, rows = 0;
  if (!r.Get(exact) || !r.GetCount(rows)) {
    return Malformed();
  }
  p.exact_samples = static_cast<size_t>(exact);
  for (uint64_t i = 0; i < rows; ++i) {
    OpStatsPartial::Row row(p.exact_samples);
    uint8_t bandwidth = 0;
    uint64_t histogram = 0;
    const bool ok = r.Get(row.category) && r.GetString(row.name) && GetOptional(r, row.comm) &&
                    GetOptional(r, row.size_bucket) && GetOptional(r, row.rank) && r.Get(bandwidth) &&
                    r.Get(histogram) && r.Get(row.calls) && r.Get(row.total_ns) && r.Get(row.self_ns) &&
                    r.Get(row.min_ns) && r.Get(row.max_ns) && r.Get(row.bytes) && row.sketch.Decode(r) &&
                    r.GetVector(row.per_rank) && bandwidth <= 1 && row.category < StatsCategories().size();
    if (!ok) {
      return Malformed();
    }
    row.bandwidth = bandwidth != 0;
    row.histogram = static_cast<size_t>(histogram);
    if (!p.row_of.emplace(row.Key(), static_cast<uint32_t>(p.rows.size())).second) {
      return Malformed();  // one row per key
    }
    p.rows.push_back(std::move(row));
  }
  uint64_t histograms = 0;
  if (!r.GetCount(histograms)) {
    return Malformed();
  }
  for (uint64_t i = 0; i < histograms; ++i) {
    uint8_t category = 0;
    std::string name;
    uint64_t index = 0;
    if (!r.Get(category) || !r.GetString(name) || !r.Get(index)) {
      return Malformed();
    }
    p.histogram_of.emplace(std::make_pair(category, std::move(name)), static_cast<size_t>(index));
  }
  uint64_t faults = 0;
  if (!r.GetVector(p.histograms) || !r.Get(p.events_read) || !r.Get(p.events_counted) || !r.Get(p.incomplete_skipped) ||
      !r.GetCount(faults)) {
    return Malformed();
  }
  for (uint64_t i = 0; i < faults; ++i) {
    std::string& f = p.faults.emplace_back();
    if (!r.GetString(f)) {
      return Malformed();
    }
  }
  // Every index must point into the tables it names: Merge and FinishOpStats index them unchecked.
  for (const OpStatsPartial::Row& row : p.rows) {
    if (row.histogram != OpStatsPartial::kNoHistogram && row.histogram >= p.histograms.size()) {
      return Malformed();
    }
  }
  for (const auto& [key, index] : p.histogram_of) {
    if (index >= p.histograms.size()) {
      return Malformed();
    }
  }
  if (!r.done()) {
    return Malformed();
  }
  return p;
}

}  // namespace commprof
