// A plain main() for the fuzz targets other than frame_decoder_fuzz (which carries its own), for
// builds without libFuzzer (release, asan, gcc): it replays every seed file and a deterministic set
// of mutations of them through LLVMFuzzerTestOneInput, so every configuration runs the readers over
// hostile input (tests/fuzz/CMakeLists.txt, tests/fuzz/README.md).
//
//   <target>_replay [--mutations N] [--seed S] DIR_OR_FILE...
//
// The mutations are the byte-level edits that matter to both a text format and a binary container
// (bit flips, edge bytes, edge integers, truncation, erased/inserted/duplicated ranges, splices of
// another seed) plus a few JSON tokens (the Kineto importer's language). Exit 0 when every input
// ran; a crash or a sanitizer report ends the program as it would end libFuzzer.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// splitmix64: a fixed, portable sequence, so every run replays the very same inputs.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }
};

constexpr uint64_t kInteresting[] = {0,          1,          2,          0x7F,       0x80,       0xFF,
                                     0x100,      0xFFFF,     0x10000,    0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                                     1ull << 32, 1ull << 40, 1ull << 62, ~0ull >> 1, ~0ull};
constexpr std::string_view kTokens[] = {
    "{",  "}",     "[",          "]",    "\"",      ":",       ",",        "null",         "true",
    "-1", "1e308", "4294967296", "1e-9", "\\u0000", "\"ts\":", "\"dur\":", "\"ph\":\"X\"", "99999999999999999999"};

void Mutate(std::vector<uint8_t>& b, const std::vector<std::vector<uint8_t>>& seeds, Rng& rng) {
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

int Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--mutations N] [--seed S] DIR_OR_FILE...\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mutations = 2000;
  uint64_t seed = 0x636F6D6D70726F66ull;  // "commprof"
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if ((a == "--mutations" || a == "--seed") && i + 1 < argc) {
      uint64_t v = std::strtoull(argv[++i], nullptr, 0);
      (a == "--mutations" ? mutations : seed) = v;
    } else if (a.starts_with("--")) {
      return Usage(argv[0]);
    } else {
      inputs.emplace_back(a);
    }
  }
  if (inputs.empty()) return Usage(argv[0]);
  std::vector<std::filesystem::path> files;  // every file of every directory, in name order
  for (const auto& in : inputs) {
    std::error_code ec;
    if (std::filesystem::is_directory(in, ec)) {
      for (const auto& e : std::filesystem::directory_iterator(in, ec)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else if (std::filesystem::is_regular_file(in, ec)) {
      files.push_back(in);
    } else {
      std::fprintf(stderr, "%s: %s: no such file or directory\n", argv[0], in.c_str());
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<std::vector<uint8_t>> seeds;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], f.c_str());
      return 2;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    seeds.push_back(std::move(bytes));
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "%s: no seed files found\n", argv[0]);
    return 2;
  }
  Rng rng{seed};
  size_t total = 0;
  for (uint64_t i = 0; i < mutations; ++i) {
    std::vector<uint8_t> b = seeds[rng.Below(seeds.size())];
    for (size_t edits = 1 + rng.Below(4); edits > 0; --edits) Mutate(b, seeds, rng);
    total += b.size();
    LLVMFuzzerTestOneInput(b.data(), b.size());
  }
  std::printf("%s: %zu seed file(s) and %llu mutated input(s) (%zu bytes), no failure\n", argv[0], seeds.size(),
              static_cast<unsigned long long>(mutations), total);
  return 0;
}
