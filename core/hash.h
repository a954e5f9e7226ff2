// A string hash that is the same in every process, build and run (std::hash need not be): ids that
// several processes compute independently and must agree on (a clock domain, an imported process
// group's communicator id) are derived from it.
#pragma once

#include <cstdint>
#include <string_view>

namespace commprof {

// 64-bit FNV-1a.
constexpr uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// A final mix (MurmurHash3's) over Fnv1a64, so that keys from similar strings differ in every bit.
constexpr uint64_t MixBits(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

}  // namespace commprof
