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

// The kind 31 CALL_SITE record of API event `api` whose caller's stack is `stack`: it carries the
// API event's join key (start, kind, comm_id; docs/file-format.md).
inline commprof_event CallSiteEvent(uint32_t stack, const commprof_event& api) {
  commprof_event e = BlankEvent(COMMPROF_KIND_CALL_SITE, api.start_ns, api.start_ns);
  e.subtype = api.kind;
  e.comm_id = api.comm_id;
  e.seq = stack;
  return e;
}

}  // namespace commprof
