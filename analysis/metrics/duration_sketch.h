// Nearest-rank percentiles of one stats row's call durations in bounded memory
// (docs/metrics.md §12.3). Up to `exact_limit` samples are kept as they are and the percentile is
// exact (analysis/metrics/nearest_rank.h); past that every sample goes into a log-bucketed
// histogram whose buckets grow by kGrowth, and a percentile is the geometric middle of the
// bucket holding the ⌈q·n⌉-th smallest sample, clamped to [min, max]: within kRelativeError of
// the exact value. Memory: exact_limit × 8 bytes, then at most ~1600 counters (ns up to 1e13).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/part_bytes.h"

namespace commprof {

class DurationSketch {
 public:
  static constexpr double kGrowth = 1.02;
  // sqrt(kGrowth) - 1: the farthest a value of a bucket is from the bucket's geometric middle.
  static constexpr double kRelativeError = 0.01;
  static constexpr size_t kDefaultExactLimit = 4096;

  explicit DurationSketch(size_t exact_limit = kDefaultExactLimit) : exact_limit_(exact_limit) {}

  void Add(int64_t ns);
  // The ⌈q·n⌉-th smallest duration (0 when empty); exact while exact() holds.
  int64_t Quantile(double q) const;
  bool exact() const { return !overflowed_; }
  uint64_t count() const { return count_; }
  // Adds the samples `other` holds, as if they had been added here after this one's own: the
  // result is the sketch that one pass over both would give (the same regime, samples and counts),
  // so partial statistics of blocks of ranks merge into exactly the whole's (`commprof stats` as an
  // MPI job). Both must have the same exact_limit.
  void Merge(const DurationSketch& other);
  void Encode(PartWriter& w) const;
  bool Decode(PartReader& r);  // false on malformed bytes

 private:
  static size_t BucketOf(int64_t ns);
  void AddToHistogram(int64_t ns);
  void MoveSamplesToHistogram();

  size_t exact_limit_;
  uint64_t count_ = 0;
  int64_t min_ = 0, max_ = 0;
  std::vector<int64_t> samples_;     // the exact regime
  bool overflowed_ = false;          // samples_ moved into the histogram
  uint64_t zeros_ = 0;               // histogram regime: durations <= 0 (instants)
  std::vector<uint64_t> histogram_;  // histogram regime: count per bucket
};

}  // namespace commprof
