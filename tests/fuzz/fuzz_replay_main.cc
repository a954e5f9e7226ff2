// The replay programs of the readers' fuzz targets (kineto_import_replay, profile_reader_replay):
// their main() and their mutator, for builds without libFuzzer; the driver is fuzz_replay.h.
//
// The mutations are the byte-level edits that matter to both a text format and a binary container
// (bit flips, edge bytes, edge integers, truncation, erased/inserted/duplicated ranges, splices of
// another seed) plus a few JSON tokens (the Kineto importer's language).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

#include "fuzz_replay.h"

namespace {

using commprof::fuzz::Rng;
using commprof::fuzz::Seeds;

constexpr uint64_t kInteresting[] = {0,          1,          2,          0x7F,       0x80,       0xFF,
                                     0x100,      0xFFFF,     0x10000,    0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                                     1ull << 32, 1ull << 40, 1ull << 62, ~0ull >> 1, ~0ull};
constexpr std::string_view kTokens[] = {
    "{",  "}",     "[",          "]",    "\"",      ":",       ",",        "null",         "true",
    "-1", "1e308", "4294967296", "1e-9", "\\u0000", "\"ts\":", "\"dur\":", "\"ph\":\"X\"", "99999999999999999999"};

void Mutate(std::vector<uint8_t>& b, const Seeds& seeds, Rng& rng) {
  switch (rng.Below(9)) {
    case 0:  // flip one bit
      if (!b.empty()) b[rng.Below(b.size())] ^= static_cast<uint8_t>(1u << rng.Below(8));
      break;
    case 1:  // one byte to an edge value or a random one
      if (!b.empty()) {
        static const uint8_t kBytes[] = {0x00, 0x01, 0x7F, 0x80, 0xFF};
        b[rng.Below(b.size())] = rng.Below(2) ? kBytes[rng.Below(5)] : static_cast<uint8_t>(rng.Next());
      }
      break;
    case 2:  // an integer field (1, 2, 4 or 8 bytes, little-endian) to an edge value
      if (!b.empty()) {
        size_t width = size_t{1} << rng.Below(4);
        size_t at = rng.Below(b.size());
        uint64_t v = kInteresting[rng.Below(std::size(kInteresting))];
        for (size_t i = 0; i < width && at + i < b.size(); ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
      }
      break;
    case 3:  // truncate
      b.resize(rng.Below(b.size() + 1));
      break;
    case 4: {  // erase a range
      if (b.empty()) break;
      size_t at = rng.Below(b.size());
      size_t n = 1 + rng.Below(std::min<size_t>(64, b.size() - at));
      b.erase(b.begin() + static_cast<ptrdiff_t>(at), b.begin() + static_cast<ptrdiff_t>(at + n));
      break;
    }
    case 5: {  // insert random bytes
      size_t at = rng.Below(b.size() + 1);
      std::vector<uint8_t> ins(1 + rng.Below(16));
      for (auto& x : ins) x = static_cast<uint8_t>(rng.Next());
      b.insert(b.begin() + static_cast<ptrdiff_t>(at), ins.begin(), ins.end());
      break;
    }
    case 6: {  // duplicate a chunk
      if (b.empty()) break;
      size_t at = rng.Below(b.size());
      size_t n = 1 + rng.Below(std::min<size_t>(256, b.size() - at));
      std::vector<uint8_t> chunk(b.begin() + static_cast<ptrdiff_t>(at), b.begin() + static_cast<ptrdiff_t>(at + n));
      b.insert(b.begin() + static_cast<ptrdiff_t>(rng.Below(b.size() + 1)), chunk.begin(), chunk.end());
      break;
    }
    case 7: {  // splice part of another seed in
      const auto& other = seeds[rng.Below(seeds.size())];
      if (other.empty()) break;
      size_t from = rng.Below(other.size());
      size_t n = rng.Below(other.size() - from + 1);
      b.insert(b.begin() + static_cast<ptrdiff_t>(rng.Below(b.size() + 1)),
               other.begin() + static_cast<ptrdiff_t>(from), other.begin() + static_cast<ptrdiff_t>(from + n));
      break;
    }
    case 8: {  // a JSON token in place of a few bytes
      std::string_view t = kTokens[rng.Below(std::size(kTokens))];
      size_t at = rng.Below(b.size() + 1);
      size_t n = std::min(b.size() - at, rng.Below(4));
      b.erase(b.begin() + static_cast<ptrdiff_t>(at), b.begin() + static_cast<ptrdiff_t>(at + n));
      b.insert(b.begin() + static_cast<ptrdiff_t>(at), t.begin(), t.end());
      break;
    }
  }
}

void Summary(const char* name, size_t seeds, uint64_t mutations, size_t bytes) {
  std::printf("%s: %zu seed file(s) and %llu mutated input(s) (%zu bytes), no failure\n", name, seeds,
              static_cast<unsigned long long>(mutations), bytes);
}

}  // namespace

int main(int argc, char** argv) { return commprof::fuzz::ReplayMain(argc, argv, {argv[0], 2000, 4, Mutate, Summary}); }
