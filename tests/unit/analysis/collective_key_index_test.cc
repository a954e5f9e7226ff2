#include "analysis/match/collective_key_index.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "analysis/match/flat_numbering.h"

namespace commprof {
namespace {

TEST(CollectiveKeyIndex, NumbersKeysInTheOrderFirstSeen) {
  CollectiveKeyIndex index;
  EXPECT_EQ(index.size(), 0u);
  EXPECT_FALSE(index.Find({1, 0, 0}).has_value());
  EXPECT_EQ(index.FindOrInsert({1, 0, 0}), std::make_pair(0u, true));
  EXPECT_EQ(index.FindOrInsert({1, 1, 0}), std::make_pair(1u, true));
  EXPECT_EQ(index.FindOrInsert({1, 0, 0}), std::make_pair(0u, false));
  // The same communicator and sequence under another type (an NCCL operation) is another key.
  EXPECT_EQ(index.FindOrInsert({1, 0, 0x101}), std::make_pair(2u, true));
  EXPECT_EQ(index.Find({1, 1, 0}), 1u);
  EXPECT_EQ(index.Find({1, 0, 0x101}), 2u);
  EXPECT_FALSE(index.Find({2, 0, 0}).has_value());
  EXPECT_EQ(index.size(), 3u);
}

// Far past its hint (it grows, moving every key): the numbers agree with a std::map fed the same
// keys, in the patterns a job has (consecutive sequences on a few communicators, NCCL and MPI
// keys that differ by type only, random 64-bit communicator ids), and absent keys stay absent.
TEST(CollectiveKeyIndex, AgreesWithAMapWhileGrowingFarPastItsHint) {
  CollectiveKeyIndex index(4);
  std::map<std::tuple<uint64_t, uint64_t, uint32_t>, uint32_t> truth;
  std::mt19937_64 random(7);
  std::vector<uint64_t> comms = {1, 2, 0xFFFFFFFFFFFFFFFFull, random(), random(), random()};
  for (int round = 0; round < 3; ++round) {  // the second and third rounds find what the first put in
    for (uint64_t comm : comms) {
      for (uint64_t seq = 0; seq < 20000; ++seq) {
        for (uint32_t type : {0u, 0x100u + static_cast<uint32_t>(seq % 3)}) {
          const CollectiveKey key{comm, seq, type};
          const auto [it, fresh] = truth.try_emplace({comm, seq, type}, static_cast<uint32_t>(truth.size()));
          const auto [number, inserted] = index.FindOrInsert(key);
          ASSERT_EQ(inserted, fresh) << comm << " " << seq << " " << type;
          ASSERT_EQ(number, it->second) << comm << " " << seq << " " << type;
        }
      }
    }
  }
  EXPECT_EQ(index.size(), truth.size());
  for (uint64_t comm : comms) {
    EXPECT_FALSE(index.Find({comm, 20000, 0}).has_value());
    EXPECT_FALSE(index.Find({comm, 5, 0x1FF}).has_value());
    EXPECT_EQ(index.Find({comm, 19999, 0}), truth.at({comm, 19999, 0}));
  }
}

// Sequences laid out unlike a job's (a stride of one page, of a page and one, the top of the 64-bit
// range, one sequence on each of thousands of communicators): homes are per page of 16 sequences,
// so these put keys at one slot of each page, or many pages on the same few slots; the numbers
// still agree with a map and absent keys stay absent.
TEST(CollectiveKeyIndex, AgreesWithAMapForSequencesThatFillPagesUnevenly) {
  CollectiveKeyIndex index;
  std::map<std::tuple<uint64_t, uint64_t, uint32_t>, uint32_t> truth;
  auto add = [&](uint64_t comm, uint64_t seq, uint32_t type) {
    const auto [it, fresh] = truth.try_emplace({comm, seq, type}, static_cast<uint32_t>(truth.size()));
    const auto [number, inserted] = index.FindOrInsert({comm, seq, type});
    ASSERT_EQ(inserted, fresh) << comm << " " << seq << " " << type;
    ASSERT_EQ(number, it->second) << comm << " " << seq << " " << type;
  };
  for (int round = 0; round < 2; ++round) {
    for (uint64_t i = 0; i < 5000; ++i) {
      add(1, i * 16, 0);
      add(2, i * 17, 0);
      add(3, UINT64_MAX - i, 0);
      add(1000 + i, 0, 0);
      add(1000 + i, 1, 0x101);
    }
  }
  EXPECT_EQ(index.size(), truth.size());
  EXPECT_FALSE(index.Find({1, 17, 0}).has_value());
  EXPECT_FALSE(index.Find({3, 0, 0}).has_value());
  EXPECT_FALSE(index.Find({1000, 1, 0}).has_value());
  EXPECT_EQ(index.Find({2, 17 * 4999, 0}), truth.at({2, 17 * 4999, 0}));
  EXPECT_EQ(index.Find({3, UINT64_MAX, 0}), truth.at({3, UINT64_MAX, 0}));
}

// FlatSums (the delay costs' sums per pair of ranks and per step and rank): every key's sum is the
// same double, to the bit, as adding the same values in the same order into a std::map, whether
// the adds come in runs on one key (its last-key shortcut) or alternate between keys (its table,
// grown far past its start), and entries() lists the keys in the order first seen.
TEST(FlatSums, SumsToTheBitAsAMapDoesAndListsKeysInTheOrderFirstSeen) {
  FlatSums sums;
  std::map<uint64_t, double> truth;
  std::vector<uint64_t> first_seen;
  std::mt19937_64 random(11);
  std::uniform_real_distribution<double> value(0.0, 1e6);
  auto add = [&](uint64_t key, double v) {
    if (truth.find(key) == truth.end()) {
      first_seen.push_back(key);
    }
    truth[key] += v;
    sums[key] += v;
  };
  for (uint64_t i = 0; i < 30000; ++i) {
    const uint64_t run_key = (i / 7) << 32 | (i % 5);  // runs of one key, then another
    for (int k = 0; k < 3; ++k) {
      add(run_key, value(random));
    }
    add(random() % 4096, value(random));  // a key anywhere among many, seen again and again
    add(uint64_t{UINT32_MAX} << 32 | i, 1e-9 * static_cast<double>(i));
  }
  ASSERT_EQ(sums.entries().size(), truth.size());
  for (size_t n = 0; n < first_seen.size(); ++n) {
    ASSERT_EQ(sums.entries()[n].first, first_seen[n]) << n;
    ASSERT_EQ(sums.entries()[n].second, truth.at(first_seen[n])) << first_seen[n];  // the same bits
  }
}

}  // namespace
}  // namespace commprof
