// The starting point of every event the collector's sources build: kind and times set, no peer,
// the host as device, every other field zero (docs/file-format.md gives each kind's fields).
#pragma once

#include <cstdint>

#include "commprof/event.h"

namespace commprof {

inline commprof_event BlankEvent(uint8_t kind, uint64_t start_ns, uint64_t end_ns) {
  commprof_event e{};
  e.kind = kind;
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  e.peer = COMMPROF_NO_PEER;
  e.device = COMMPROF_HOST_DEVICE;
  return e;
}

}  // namespace commprof
