// The replay driver of the fuzz targets in builds without libFuzzer (release, asan, gcc): it runs
// every seed file, then a deterministic set of mutations of them, through LLVMFuzzerTestOneInput,
// so every configuration runs the decoders and readers over hostile input
// (tests/fuzz/CMakeLists.txt, tests/fuzz/README.md). Each target brings its own mutator (the frame
// decoder's knows length prefixes; fuzz_replay_main.cc's serves the text and HDF5 readers).
//
//   <program> [--mutations N] [--seed S] DIR_OR_FILE...
//
// Exit 0 when every input ran, 2 on bad arguments or unreadable seeds; a crash or a sanitizer
// report ends the program as it would end libFuzzer.
#pragma once

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

namespace commprof::fuzz {

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

using Seeds = std::vector<std::vector<uint8_t>>;

struct ReplayTarget {
  const char* name;    // the program, for its messages
  uint64_t mutations;  // default of --mutations
  size_t max_edits;    // each mutated input is 1..max_edits edits of one seed
  void (*mutate)(std::vector<uint8_t>& bytes, const Seeds& seeds, Rng& rng);
  void (*summary)(const char* name, size_t seeds, uint64_t mutations, size_t bytes);
};

inline int ReplayUsage(const ReplayTarget& t) {
  std::fprintf(stderr, "usage: %s [--mutations N] [--seed S] DIR_OR_FILE...\n", t.name);
  return 2;
}

inline int ReplayMain(int argc, char** argv, const ReplayTarget& t) {
  uint64_t mutations = t.mutations;
  uint64_t seed = 0x636F6D6D70726F66ull;  // "commprof"
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if ((a == "--mutations" || a == "--seed") && i + 1 < argc) {
      uint64_t v = std::strtoull(argv[++i], nullptr, 0);
      (a == "--mutations" ? mutations : seed) = v;
    } else if (a.starts_with("--")) {
      return ReplayUsage(t);
    } else {
      inputs.emplace_back(a);
    }
  }
  if (inputs.empty()) return ReplayUsage(t);
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
      std::fprintf(stderr, "%s: %s: no such file or directory\n", t.name, in.c_str());
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  Seeds seeds;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: cannot read %s\n", t.name, f.c_str());
      return 2;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    seeds.push_back(std::move(bytes));
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "%s: no seed files found\n", t.name);
    return 2;
  }
  Rng rng{seed};
  size_t total = 0;
  for (uint64_t i = 0; i < mutations; ++i) {
    std::vector<uint8_t> b = seeds[rng.Below(seeds.size())];
    for (size_t edits = 1 + rng.Below(t.max_edits); edits > 0; --edits) t.mutate(b, seeds, rng);
    total += b.size();
    LLVMFuzzerTestOneInput(b.data(), b.size());
  }
  t.summary(t.name, seeds.size(), mutations, total);
  return 0;
}

}  // namespace commprof::fuzz
