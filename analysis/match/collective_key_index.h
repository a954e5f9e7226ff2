#pragma once
// CollectiveKeyIndex: the collective identities (communicator, sequence, type) of a job, each given
// a dense number in the order first seen (a FlatNumbering: the matching, the screening and the
// exporters look up one key per collective event).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "analysis/match/collective_instances.h"
#include "analysis/match/flat_numbering.h"

namespace commprof {

// Where a key sits and where its probe starts (see Home).
struct CollectiveKeyTraits {
  using Key = CollectiveKey;
  // 24 bytes: the number sits where CollectiveKey would pad.
  struct Slot {
    uint64_t comm_id = 0;
    uint64_t seq = 0;
    uint32_t type = 0;
    uint32_t number = kFlatNumberingEmpty;
  };
  static_assert(sizeof(Slot) == 24);

  static Slot Make(const CollectiveKey& k, uint32_t number) { return Slot{k.comm_id, k.seq, k.type, number}; }
  static bool Holds(const Slot& s, const CollectiveKey& k) {
    return s.comm_id == k.comm_id && s.seq == k.seq && s.type == k.type;
  }

  // Sequence numbers are consecutive, so the low bits of the key alone would fill runs of slots:
  // the key is mixed (a 64-bit finalizer) before the table's bits are taken. But every rank reads
  // its collectives in sequence order, one lookup each: a home anywhere in the table would be a
  // cache miss per lookup (a large job's table is tens of MB; the misses were a quarter of an
  // export's time). So only the page, 16 consecutive sequence numbers of one communicator and type,
  // is mixed; the low 4 bits of the sequence pick the slot within the page's 16 slots (6 cache
  // lines), and consecutive lookups stay on the same lines. Pages are aligned, so two pages either
  // share their slots or not at all; a page that finds its slots taken probes on into the next.
  static constexpr size_t kPageBits = 4;
  static constexpr uint64_t kPageMask = (uint64_t{1} << kPageBits) - 1;
  static size_t Home(const CollectiveKey& k) { return Home(k.comm_id, k.seq, k.type); }
  static size_t HomeOf(const Slot& s) { return Home(s.comm_id, s.seq, s.type); }
  static size_t Home(uint64_t comm_id, uint64_t seq, uint32_t type) {
    uint64_t h = comm_id * 0x9E3779B97F4A7C15ull + (seq >> kPageBits);
    h ^= static_cast<uint64_t>(type) * 0xD6E8FEB86659FD93ull;
    return (static_cast<size_t>(SpreadBits(h)) << kPageBits) | static_cast<size_t>(seq & kPageMask);
  }
};

using CollectiveKeyIndex = FlatNumbering<CollectiveKeyTraits>;

}  // namespace commprof
