#include "analysis/load/kineto_trace.h"

#include <simdjson.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "analysis/load/kineto_classify.h"
#include "analysis/load/kineto_json_stream.h"
#include "core/schema/enums.h"

namespace commprof::kineto {
namespace od = simdjson::ondemand;

namespace {

// Exponent notation never comes out of Kineto's writer; it is accepted through a double.
bool ParseMicrosWithExponent(std::string_view s, int64_t& ns) {
  std::string copy(s);
  char* end = nullptr;
  double us = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(us) || std::fabs(us) > 9.2e15) {
    return false;
  }
  ns = std::llround(us * 1000.0);
  return true;
}

}  // namespace

bool ParseMicrosToNs(std::string_view s, int64_t& ns) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  if (s.empty()) {
    return false;
  }
  // Plain decimal text first; text holding an exponent always fails it and goes to the double.
  auto with_exponent = [&] {
    return s.find_first_of("eE") != std::string_view::npos && ParseMicrosWithExponent(s, ns);
  };
  bool negative = false;
  size_t i = 0;
  if (s[0] == '-') {
    negative = true;
    i = 1;
  }
  int64_t whole = 0;
  size_t digits = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
    if (whole > (INT64_MAX / 1000 - 9) / 10) {
      return with_exponent();
    }
    whole = whole * 10 + (s[i] - '0');
  }
  if (digits == 0) {
    return with_exponent();
  }
  int64_t frac = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    size_t fd = 0;
    int round_digit = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++fd) {
      if (fd < 3) {
        frac = frac * 10 + (s[i] - '0');
      } else if (fd == 3) {
        round_digit = s[i] - '0';
      }
    }
    if (fd == 0) {
      return with_exponent();
    }
    for (size_t k = fd; k < 3; ++k) {
      frac *= 10;
    }
    if (round_digit >= 5) {
      ++frac;
    }
  }
  if (i != s.size()) {
    return with_exponent();
  }
  ns = whole * 1000 + frac;
  if (negative) {
    ns = -ns;
  }
  return true;
}

namespace {

// CUpti_ActivityMemoryKind values (docs/file-format.md, memory_kind) given to imported memory events.
constexpr uint8_t kMemoryKindPageable = 1, kMemoryKindDevice = 3;

// Integer text, or a float written for an integer field ("64.0", truncated toward zero).
bool ParseInt(std::string_view s, int64_t& out) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc() && end == s.data() + s.size()) {
    return true;
  }
  int64_t ns = 0;
  if (!ParseMicrosToNs(s, ns)) {
    return false;
  }
  out = ns / 1000;
  return true;
}

// What the args of a communication kernel or of the CPU op around it say about the collective.
struct CollMeta {
  uint8_t op = COMMPROF_OP_NONE;
  std::string pg;  // Process Group Name
  bool has_pg = false;
  int64_t in_nelems = -1, out_nelems = -1;
  Dtype dtype;
  int64_t seq = -1;      // Seq
  int64_t peer = -1;     // Dst Rank / Src Rank
  std::string pg_ranks;  // Process Group Ranks, "[0, 1]"

  // Takes every field this one lacks from `o` (a lower-priority source).
  void FillFrom(const CollMeta& o) {
    if (op == COMMPROF_OP_NONE) {
      op = o.op;
    }
    if (!has_pg && o.has_pg) {
      pg = o.pg;
      has_pg = true;
    }
    if (in_nelems < 0) {
      in_nelems = o.in_nelems;
    }
    if (out_nelems < 0) {
      out_nelems = o.out_nelems;
    }
    if (dtype.size == 0) {
      dtype = o.dtype;
    }
    if (seq < 0) {
      seq = o.seq;
    }
    if (peer < 0) {
      peer = o.peer;
    }
    if (pg_ranks.empty()) {
      pg_ranks = o.pg_ranks;
    }
  }
  bool any() const { return op != COMMPROF_OP_NONE || has_pg || in_nelems >= 0 || seq >= 0; }
};

struct CommKernel {
  size_t event_index = 0;
  int64_t external_id = -1;
  CollMeta meta;
};

// record_param_comms ops and nccl:* annotations: CPU spans that may describe the kernel they launch.
struct CpuCommSpan {
  uint32_t tid = 0;
  int64_t start = 0, end = 0;
  int64_t external_id = -1;
  bool record_param_comms = false;
  CollMeta meta;
};

std::vector<uint32_t> ParseRankList(std::string_view s) {
  std::vector<uint32_t> out;
  const char* p = s.data();
  const char* end = s.data() + s.size();
  while (p < end) {
    if (*p >= '0' && *p <= '9') {
      uint32_t v = 0;
      auto r = std::from_chars(p, end, v);
      out.push_back(v);
      p = r.ptr;
    } else {
      ++p;
    }
  }
  return out;
}

// 64-bit hash of a name, 8 bytes per multiply (kernel names run to hundreds of bytes).
uint64_t HashName(std::string_view s) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = n * kMul;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * kMul;
  }
  h ^= h >> 32;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 31);
}

// Name -> id in `strings`: open addressing over (hash, id) slots, the names themselves stay in
// `strings` only (no second copy, no node per name).
class InternTable {
 public:
  uint32_t Intern(std::string_view s, std::vector<std::string>& strings) {
    if ((strings.size() + 1) * 2 > slots_.size()) {
      Grow(strings);
    }
    const uint64_t h = HashName(s);
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = static_cast<size_t>(h) & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.id == kEmpty) {
        slot = {tag, static_cast<uint32_t>(strings.size())};
        strings.emplace_back(s);
        return slot.id;
      }
      if (slot.tag == tag && strings[slot.id] == s) {
        return slot.id;
      }
    }
  }

 private:
  struct Slot {
    uint32_t tag = 0;
    uint32_t id = kEmpty;
  };
  static constexpr uint32_t kEmpty = UINT32_MAX;

  void Grow(const std::vector<std::string>& strings) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(1024, old.size() * 2), Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& o : old) {
      if (o.id == kEmpty) {
        continue;
      }
      size_t i = static_cast<size_t>(HashName(strings[o.id])) & mask_;
      while (slots_[i].id != kEmpty) {
        i = (i + 1) & mask_;
      }
      slots_[i] = o;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

void SortByStart(std::vector<commprof_event>& events);

class TraceBuilder {
 public:
  explicit TraceBuilder(RankTrace& t) : t_(t) {}

  Status Member(std::string_view key, std::string_view raw) {
    if (TextIs(key, "baseTimeNanoseconds")) {
      int64_t base = 0;
      if (!ParseInt(raw, base) || base < 0) {
        return Corrupt(t_.path +
                       ": baseTimeNanoseconds is not a non-negative integer: " + std::string(raw.substr(0, 40)));
      }
      t_.base_ns = base;
    } else if (TextIs(key, "distributedInfo")) {
      return ReadDistributedInfo(raw);
    }
    return Status::Ok();
  }

  Status Event(uint64_t index, std::string_view raw) {
    ++t_.counts.events_read;
    simdjson::padded_string_view text(raw.data(), raw.size(), raw.size() + kJsonPadding);
    std::string why;
    if (!MapEvent(text, why)) {
      Reject(index, why);
    }
    return Status::Ok();
  }

  void Finish();

 private:
  struct Fields {
    std::string_view ph, cat, name;
    bool has_ph = false, has_cat = false, has_name = false, has_ts = false, has_dur = false;
    int64_t ts = 0, dur = 0;
    int64_t pid = -1, tid = -1;
    int64_t correlation = -1, stream = -1, device = -1, external_id = -1, bytes = -1;
    int64_t mem_bytes = 0, device_type = -1, device_id = -1;
    int64_t mem_addr = 0, mem_total_allocated = 0;  // [memory] instants' Addr, Total Allocated (0: none)
    bool has_mem_bytes = false;
    CollMeta meta;
  };

  uint32_t Intern(std::string_view s) { return ids_.Intern(s, t_.strings); }

  void Reject(uint64_t index, const std::string& why) {
    ++t_.counts.rejected;
    if (t_.problems.size() < kMaxProblems) {
      t_.problems.push_back(t_.path + ": traceEvents[" + std::to_string(index) + "]: " + why);
    }
  }

  void Add(const commprof_event& e) {
    t_.events.push_back(e);
    t_.min_ns = std::min(t_.min_ns, static_cast<int64_t>(e.start_ns));
    t_.max_ns = std::max(t_.max_ns, static_cast<int64_t>(e.end_ns));
  }

  // Reads one field's number; false (with `why`) when it is not a number.
  static bool Number(od::value v, std::string_view key, int64_t& out, std::string& why) {
    if (!ParseInt(v.raw_json_token(), out)) {
      why = "field '" + std::string(key) + "' is not a number";
      return false;
    }
    return true;
  }
  static bool Micros(od::value v, std::string_view key, int64_t& out, std::string& why) {
    if (!ParseMicrosToNs(v.raw_json_token(), out)) {
      why = "field '" + std::string(key) + "' is not a number of microseconds";
      return false;
    }
    return true;
  }
  // A string value without a backslash (every one in the reference traces) is used in place,
  // the bytes between its quotes; others are unescaped by simdjson.
  static bool String(od::value v, std::string_view key, std::string_view& out, std::string& why) {
    const std::string_view tok = v.raw_json_token();
    if (!tok.empty() && tok[0] == '"') {
      const char* begin = tok.data() + 1;
      const char* end = tok.data() + tok.size();
      const char* quote = static_cast<const char*>(std::memchr(begin, '"', static_cast<size_t>(end - begin)));
      if (quote != nullptr && std::memchr(begin, '\\', static_cast<size_t>(quote - begin)) == nullptr) {
        out = std::string_view(begin, static_cast<size_t>(quote - begin));
        return true;
      }
    }
    if (v.get_string().get(out)) {
      why = "field '" + std::string(key) + "' is not a string";
      return false;
    }
    return true;
  }
  // A member name, in place when it holds no backslash (as String).
  static bool Key(od::field& field, std::string_view& key) {
    const char* begin = field.key().raw();
    const char* p = begin;
    while (*p != '"' && *p != '\\') {
      ++p;
    }
    if (*p == '"') {
      key = std::string_view(begin, static_cast<size_t>(p - begin));
      return true;
    }
    return !field.unescaped_key().get(key);
  }
  // pid/tid: numbers for real processes, strings for the profiler's own rows ("Spans", "").
  static bool IdOrName(od::value v, int64_t& out) {
    od::json_type type;
    if (v.type().get(type) || type != od::json_type::number) {
      return false;
    }
    return ParseInt(v.raw_json_token(), out);
  }

  // "Process Group Name" / "Process Group ID" / "Process Group Ranks" (other names: ignored).
  static void ReadProcessGroupArg(std::string_view key, od::value v, Fields& f) {
    std::string_view s;
    if (TextIs(key, "Process Group Name") || (TextIs(key, "Process Group ID") && !f.meta.has_pg)) {
      // The April 2024 variant names the group by an ID; a number is taken as its text.
      std::string_view tok;
      if (v.get_string().get(s) == simdjson::SUCCESS) {
        f.meta.pg = std::string(s);
      } else {
        tok = v.raw_json_token();
        f.meta.pg = std::string(tok.substr(0, tok.find_first_of(" \n\r\t")));
      }
      f.meta.has_pg = true;
    } else if (TextIs(key, "Process Group Ranks")) {
      if (v.get_string().get(s) == simdjson::SUCCESS) {
        f.meta.pg_ranks = std::string(s);
      }
    }
  }

  bool ReadArgs(od::object args, Fields& f, std::string& why) {
    for (auto field_r : args) {
      od::field field;
      std::string_view key;
      if (std::move(field_r).get(field) || !Key(field, key)) {
        why = "args is not valid JSON";
        return false;
      }
      od::value v = field.value();
      bool ok = true;
      std::string_view s;
      // Dispatch on the length first: most args (grid, block, queued, ...) match no name here.
      switch (key.size()) {
        case 3:
          if (TextIs(key, "Seq")) {
            ok = Number(v, key, f.meta.seq, why);
          }
          break;
        case 4:
          if (TextIs(key, "Addr")) {
            (void)ParseInt(v.raw_json_token(), f.mem_addr);  // optional: a block without it is still counted
          }
          break;
        case 5:
          if (TextIs(key, "bytes")) {
            ok = Number(v, key, f.bytes, why);
          } else if (TextIs(key, "Bytes")) {
            ok = f.has_mem_bytes = Number(v, key, f.mem_bytes, why);
          } else if (TextIs(key, "dtype")) {
            ok = String(v, key, s, why);
            if (ok) {
              f.meta.dtype = DtypeFromName(s);
            }
          }
          break;
        case 6:
          if (TextIs(key, "stream")) {
            (void)IdOrName(v, f.stream);  // HTA: a non-numeric stream is no stream
          } else if (TextIs(key, "device")) {
            ok = Number(v, key, f.device, why);
          }
          break;
        case 8:
          if (TextIs(key, "Dst Rank") || TextIs(key, "Src Rank")) {
            ok = Number(v, key, f.meta.peer, why);
          }
          break;
        case 9:
          if (TextIs(key, "Device Id")) {
            ok = Number(v, key, f.device_id, why);
          }
          break;
        case 11:
          if (TextIs(key, "correlation")) {
            ok = Number(v, key, f.correlation, why);
          } else if (TextIs(key, "External id")) {
            ok = Number(v, key, f.external_id, why);
          } else if (TextIs(key, "Device Type")) {
            ok = Number(v, key, f.device_type, why);
          }
          break;
        case 13:
          if (TextIs(key, "In msg nelems")) {
            ok = Number(v, key, f.meta.in_nelems, why);
          }
          break;
        case 14:
          if (TextIs(key, "Out msg nelems")) {
            ok = Number(v, key, f.meta.out_nelems, why);
          }
          break;
        case 15:
          if (TextIs(key, "Collective name")) {
            ok = String(v, key, s, why);
            if (ok) {
              f.meta.op = OpFromCollectiveName(s);
            }
          } else if (TextIs(key, "Total Allocated")) {
            (void)ParseInt(v.raw_json_token(), f.mem_total_allocated);  // optional, as Addr
          }
          break;
        case 16:
        case 18:
        case 19:
          ReadProcessGroupArg(key, v, f);
          break;
        default:
          break;
      }
      if (!ok) {
        why.insert(0, "args: ");
        return false;
      }
    }
    return true;
  }

  bool MapEvent(simdjson::padded_string_view text, std::string& why) {
    od::document doc;
    od::object obj;
    if (parser_.iterate(text).get(doc) || doc.get_object().get(obj)) {
      why = "not a valid JSON object";
      return false;
    }
    Fields f;
    for (auto field_r : obj) {
      od::field field;
      std::string_view key;
      if (std::move(field_r).get(field) || !Key(field, key)) {
        why = "not valid JSON";
        return false;
      }
      od::value v = field.value();
      bool ok = true;
      switch (key.size()) {
        case 2:
          if (TextIs(key, "ph")) {
            ok = f.has_ph = String(v, key, f.ph, why);
          } else if (TextIs(key, "ts")) {
            ok = f.has_ts = Micros(v, key, f.ts, why);
          }
          break;
        case 3:
          if (TextIs(key, "cat")) {
            ok = f.has_cat = String(v, key, f.cat, why);
          } else if (TextIs(key, "dur")) {
            ok = f.has_dur = Micros(v, key, f.dur, why);
          } else if (TextIs(key, "pid")) {
            (void)IdOrName(v, f.pid);
          } else if (TextIs(key, "tid")) {
            (void)IdOrName(v, f.tid);
          }
          break;
        case 4:
          if (TextIs(key, "name")) {
            ok = f.has_name = String(v, key, f.name, why);
          } else if (TextIs(key, "args")) {
            od::object args;
            if (v.get_object().get(args)) {
              why = "field 'args' is not an object";
              return false;
            }
            ok = ReadArgs(args, f, why);
          }
          break;
        default:
          break;
      }
      if (!ok) {
        return false;
      }
    }
    if (!f.has_ph) {
      why = "missing field 'ph'";
      return false;
    }
    if (TextIs(f.ph, "s") || TextIs(f.ph, "f") || TextIs(f.ph, "t")) {
      ++t_.counts.flows_skipped;
      return true;
    }
    if (TextIs(f.ph, "M")) {
      ++t_.counts.metadata_skipped;
      return true;
    }
    if (TextIs(f.ph, "C")) {
      ++t_.counts.counters_skipped;
      return true;
    }
    const bool complete = TextIs(f.ph, "X");
    if (!complete && f.ph != "i" && f.ph != "I") {
      why = "unsupported phase '" + std::string(f.ph) + "' (Kineto writes X, i, s, f, M)";
      return false;
    }
    if (!f.has_name) {
      why = "missing field 'name'";
      return false;
    }
    if (!f.has_ts) {
      why = "missing field 'ts'";
      return false;
    }
    if (complete && !f.has_dur) {
      why = "missing field 'dur' of a complete ('X') event";
      return false;
    }
    if (f.dur < 0) {
      why = "negative duration (dur " + std::to_string(f.dur) + " ns)";
      return false;
    }
    Category cat = f.has_cat ? CategoryOf(f.cat) : Category::kUnknown;
    if (cat == Category::kTraceSpan) {
      ++t_.counts.trace_spans_skipped;
      return true;
    }
    commprof_event e{};
    e.start_ns = static_cast<uint64_t>(f.ts);
    e.end_ns = static_cast<uint64_t>(f.ts + f.dur);
    e.peer = COMMPROF_NO_PEER;
    e.device = COMMPROF_HOST_DEVICE;
    e.thread_id = static_cast<uint32_t>(f.tid < 0 ? 0 : f.tid);
    e.correlation = static_cast<uint32_t>(f.correlation < 0 ? 0 : f.correlation);
    // GPU rows: pid = device, tid = stream (docs/kineto-import.md); args say it when present.
    auto gpu = [&] {
      int64_t dev = f.device >= 0 ? f.device : f.pid;
      e.device = static_cast<uint16_t>(dev < 0 || dev >= COMMPROF_HOST_DEVICE ? 0 : dev);
      int64_t stream = f.stream >= 0 ? f.stream : f.tid;
      e.thread_id = static_cast<uint32_t>(stream < 0 ? 0 : stream);
    };
    if (!complete) {
      if (cat == Category::kInstant && f.has_mem_bytes) {
        // The caching allocator's "[memory]" instants: Bytes > 0 allocates, < 0 frees.
        e.kind = f.mem_bytes >= 0 ? COMMPROF_KIND_MEM_ALLOC : COMMPROF_KIND_MEM_FREE;
        e.bytes = static_cast<uint64_t>(f.mem_bytes >= 0 ? f.mem_bytes : -f.mem_bytes);
        // As a CUPTI record (docs/file-format.md, kinds 14/15): seq = the block's address, so a
        // free finds its allocation; subtype = the memory kind (CUDA: device; CPU: pageable host).
        // comm_id keeps the allocator's "Total Allocated" after the event: what was in use before
        // the trace began follows from the first one (docs/metrics.md §7.3).
        e.seq = static_cast<uint64_t>(f.mem_addr < 0 ? 0 : f.mem_addr);
        e.comm_id = static_cast<uint64_t>(f.mem_total_allocated < 0 ? 0 : f.mem_total_allocated);
        e.subtype = kMemoryKindPageable;
        if (f.device_type == 1 && f.device_id >= 0) {
          e.device = static_cast<uint16_t>(f.device_id);
          e.subtype = kMemoryKindDevice;
        }
      } else {
        e.kind = COMMPROF_KIND_IMPORTED_OTHER;
        e.seq = Intern(f.has_cat ? f.cat : std::string_view("instant"));
      }
      e.name_id = Intern(f.name);
      Add(e);
      return true;
    }
    e.name_id = Intern(f.name);
    switch (cat) {
      case Category::kKernel: {
        gpu();
        KernelClass k = ClassifyKernel(f.name);
        if (k == KernelClass::kCommunication) {
          e.kind = COMMPROF_KIND_COMM_KERNEL;
          comm_kernels_.push_back({t_.events.size(), f.external_id, std::move(f.meta)});
        } else if (k == KernelClass::kMemory) {
          e.kind = f.name.find("Memset") != std::string_view::npos ? COMMPROF_KIND_MEMSET : COMMPROF_KIND_MEMCPY;
        } else if (k == KernelClass::kComputation) {
          e.kind = COMMPROF_KIND_COMPUTE_KERNEL;
        } else {
          e.kind = COMMPROF_KIND_IMPORTED_OTHER;
          e.seq = Intern(f.cat);
        }
        break;
      }
      case Category::kMemcpy:
      case Category::kMemset:
        gpu();
        e.kind = cat == Category::kMemcpy ? COMMPROF_KIND_MEMCPY : COMMPROF_KIND_MEMSET;
        e.bytes = static_cast<uint64_t>(f.bytes < 0 ? 0 : f.bytes);
        break;
      case Category::kCudaSync:
        gpu();
        e.kind = COMMPROF_KIND_SYNC;
        break;
      case Category::kRuntime:
        e.kind = COMMPROF_KIND_CUDA_API;
        break;
      case Category::kCpuOp:
        e.kind = COMMPROF_KIND_HOST_OP;
        if (TextIs(f.name, "record_param_comms")) {
          spans_.push_back({e.thread_id, f.ts, f.ts + f.dur, f.external_id, true, std::move(f.meta)});
        }
        break;
      case Category::kUserAnnotation:
        e.kind = COMMPROF_KIND_HOST_ANNOTATION;
        if (TextStartsWith(f.name, "ProfilerStep#")) {
          int64_t step = 0;
          if (ParseInt(f.name.substr(13), step) && step >= 0) {
            e.kind = COMMPROF_KIND_STEP;
            e.seq = static_cast<uint64_t>(step);
            e.subtype = COMMPROF_STEP_IMPORTED;
          }
        } else if (TextStartsWith(f.name, "nccl:")) {
          CollMeta m;
          m.op = OpFromCollectiveName(f.name);
          spans_.push_back({e.thread_id, f.ts, f.ts + f.dur, -1, false, std::move(m)});
        }
        break;
      case Category::kGpuAnnotation:
        gpu();
        e.kind = COMMPROF_KIND_GPU_ANNOTATION;
        break;
      case Category::kPythonFunction:
        e.kind = COMMPROF_KIND_PYTHON_FUNCTION;
        break;
      case Category::kUnknown:
        ++t_.counts.unknown_category;
        ++t_.unknown_categories[f.has_cat ? std::string(f.cat) : std::string("(no cat)")];
        [[fallthrough]];
      default:
        e.kind = COMMPROF_KIND_IMPORTED_OTHER;
        e.seq = Intern(f.has_cat ? f.cat : std::string_view("(no cat)"));
        break;
    }
    Add(e);
    return true;
  }

  Status ReadDistributedInfo(std::string_view raw) {
    simdjson::padded_string text(raw);
    od::parser parser;
    od::document doc;
    od::object obj;
    const std::string where = t_.path + ": distributedInfo";
    if (parser.iterate(text).get(doc) || doc.get_object().get(obj)) {
      return Corrupt(where + " is not an object");
    }
    for (auto field_r : obj) {
      od::field field;
      std::string_view key;
      if (std::move(field_r).get(field) || field.unescaped_key().get(key)) {
        return Corrupt(where + " is not valid JSON");
      }
      od::value v = field.value();
      std::string why;
      if (TextIs(key, "rank") || TextIs(key, "world_size")) {
        int64_t n = 0;
        if (!Number(v, key, n, why) || n < 0) {
          return Corrupt(where + "." + std::string(key) + " is not a non-negative integer");
        }
        const bool is_rank = TextIs(key, "rank");
        // A rank must lie below the largest world size; a world size may equal it.
        if (n > static_cast<int64_t>(kMaxImportWorldSize) - (is_rank ? 1 : 0)) {
          return Corrupt(where + "." + std::string(key) + " " + std::to_string(n) + " is above the largest " +
                         (is_rank ? "rank" : "world size") + " the importer takes (" +
                         std::to_string(kMaxImportWorldSize - (is_rank ? 1 : 0)) + ")");
        }
        if (is_rank) {
          t_.rank = static_cast<uint32_t>(n);
        } else {
          t_.world_size = static_cast<uint32_t>(n);
        }
      } else if (TextIs(key, "pg_config")) {
        od::array groups;
        if (v.get_array().get(groups)) {
          return Corrupt(where + ".pg_config is not an array");
        }
        for (auto g_r : groups) {
          od::object g;
          if (g_r.get_object().get(g)) {
            return Corrupt(where + ".pg_config has an element that is not an object");
          }
          ProcessGroup pg;
          for (auto gf_r : g) {
            od::field gf;
            std::string_view gk, s;
            if (std::move(gf_r).get(gf) || gf.unescaped_key().get(gk)) {
              return Corrupt(where + ".pg_config is not valid JSON");
            }
            od::value gv = gf.value();
            if (TextIs(gk, "pg_name") && !gv.get_string().get(s)) {
              pg.name = std::string(s);
            } else if ((TextIs(gk, "pg_desc") || TextIs(gk, "uid")) && pg.desc.empty() && !gv.get_string().get(s)) {
              pg.desc = std::string(s);
            } else if (TextIs(gk, "ranks")) {
              od::array ranks;
              if (gv.get_array().get(ranks)) {
                return Corrupt(where + ".pg_config[].ranks is not an array");
              }
              for (auto r_r : ranks) {
                int64_t r = 0;
                if (r_r.get_int64().get(r) || r < 0) {
                  return Corrupt(where + ".pg_config[].ranks holds a non-rank");
                }
                pg.ranks.push_back(static_cast<uint32_t>(r));
              }
            }
          }
          if (!pg.name.empty()) {
            t_.groups.push_back(std::move(pg));
          }
        }
      }
    }
    return Status::Ok();
  }

  RankTrace& t_;
  od::parser parser_;
  InternTable ids_;
  std::vector<CommKernel> comm_kernels_;
  std::vector<CpuCommSpan> spans_;
};

void TraceBuilder::Finish() {
  t_.counts.comm_kernels = comm_kernels_.size();
  // Launch (runtime call) of every communication kernel, by correlation id.
  std::unordered_map<uint32_t, std::pair<uint32_t, int64_t>> launch;  // correlation -> (thread, start)
  for (const auto& ck : comm_kernels_) {
    uint32_t corr = t_.events[ck.event_index].correlation;
    if (corr != 0) {
      launch.emplace(corr, std::pair<uint32_t, int64_t>{0, INT64_MIN});
    }
  }
  for (const auto& e : t_.events) {
    if (e.kind != COMMPROF_KIND_CUDA_API || e.correlation == 0) {
      continue;
    }
    auto it = launch.find(e.correlation);
    if (it != launch.end()) {
      it->second = {e.thread_id, static_cast<int64_t>(e.start_ns)};
    }
  }
  std::sort(spans_.begin(), spans_.end(), [](const CpuCommSpan& a, const CpuCommSpan& b) {
    return std::tie(a.tid, a.start) < std::tie(b.tid, b.start);
  });
  std::unordered_map<int64_t, size_t> rpc_by_external_id;
  for (size_t i = 0; i < spans_.size(); ++i) {
    if (spans_[i].record_param_comms && spans_[i].external_id >= 0) {
      rpc_by_external_id.emplace(spans_[i].external_id, i);
    }
  }

  std::sort(comm_kernels_.begin(), comm_kernels_.end(), [&](const CommKernel& a, const CommKernel& b) {
    return t_.events[a.event_index].start_ns < t_.events[b.event_index].start_ns;
  });
  std::map<std::tuple<uint64_t, uint8_t, int64_t>, uint64_t> next_seq;  // (group, op, p2p peer) -> count
  for (auto& ck : comm_kernels_) {
    commprof_event& k = t_.events[ck.event_index];
    CollMeta m = std::move(ck.meta);
    // Second source: the record_param_comms op the kernel belongs to (by External id, which in
    // 2024+ traces is the enclosing op's), then the CPU spans around its launch, innermost first.
    auto l = launch.find(k.correlation);
    const bool launched = k.correlation != 0 && l != launch.end() && l->second.second != INT64_MIN;
    auto rpc = rpc_by_external_id.find(ck.external_id);
    // In 2023 traces a kernel's External id is its correlation, a different counter: a
    // record_param_comms op that starts after the launch cannot be the one that describes it.
    if (rpc != rpc_by_external_id.end() && (!launched || spans_[rpc->second].start <= l->second.second)) {
      m.FillFrom(spans_[rpc->second].meta);
    }
    if (launched) {
      const auto [tid, at] = l->second;
      auto first = std::lower_bound(spans_.begin(), spans_.end(), tid,
                                    [](const CpuCommSpan& s, uint32_t t) { return s.tid < t; });
      auto last = std::upper_bound(first, spans_.end(), std::pair<uint32_t, int64_t>{tid, at},
                                   [](const std::pair<uint32_t, int64_t>& v, const CpuCommSpan& s) {
                                     return std::tie(v.first, v.second) < std::tie(s.tid, s.start);
                                   });
      // Comm spans nest at most record_param_comms > nccl:* (plus a coalescing op around them), so
      // the few latest-starting spans before the launch hold every enclosing one; walking further
      // back would make this quadratic in the number of collectives.
      constexpr int kMaxNesting = 4;
      int looked = 0;
      for (auto it = last; it != first && looked < kMaxNesting; ++looked) {
        --it;
        if (it->end >= at) {
          m.FillFrom(it->meta);
        }
      }
    }
    const bool described = m.any();
    if (m.op == COMMPROF_OP_NONE) {
      m.op = OpFromKernelName(t_.strings[k.name_id]);
    }
    if (!described) {
      ++t_.counts.comm_kernels_without_metadata;
    }
    if (m.has_pg && !m.pg_ranks.empty()) {
      bool known =
          std::any_of(t_.groups.begin(), t_.groups.end(), [&](const ProcessGroup& g) { return g.name == m.pg; });
      if (!known) {
        t_.groups.push_back({m.pg, "", ParseRankList(m.pg_ranks)});
      }
    }
    const uint64_t comm = ProcessGroupId(m.has_pg ? m.pg : std::string_view(kUnknownProcessGroup));
    const bool p2p = m.op == COMMPROF_OP_SEND || m.op == COMMPROF_OP_RECV;
    uint64_t& counter = next_seq[{comm, m.op, p2p ? m.peer : -1}];
    const uint64_t seq = m.seq >= 0 ? static_cast<uint64_t>(m.seq) : counter;
    ++counter;
    k.subtype = m.op;
    k.comm_id = comm;
    k.seq = seq;
    k.peer = static_cast<int32_t>(m.peer);
    commprof_event c = k;
    c.kind = COMMPROF_KIND_NCCL_COLLECTIVE;
    c.name_id = Intern(schema::CanonicalOpName(m.op));
    c.datatype = m.dtype.datatype;
    // NCCL's count: the input for all but ReduceScatter, whose count is the per-rank output.
    const int64_t nelems = m.op == COMMPROF_OP_REDUCE_SCATTER ? m.out_nelems : m.in_nelems;
    c.bytes = nelems > 0 && m.dtype.size > 0 ? static_cast<uint64_t>(nelems) * m.dtype.size : 0;
    t_.events.push_back(c);
  }
  SortByStart(t_.events);
  t_.counts.records = t_.events.size();
}

// By start (ties in file order), into a vector of exactly the records' size. The 64-byte records
// are not moved around by the sort: (start, index) keys are sorted, packed into one 64-bit word
// when the span of starts and the count leave room, and the records gathered once in that order.
void SortByStart(std::vector<commprof_event>& events) {
  const size_t n = events.size();
  auto start = [&](size_t i) { return static_cast<int64_t>(events[i].start_ns); };
  bool sorted = true;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = start(i);
    if (i > 0 && s < start(i - 1)) {
      sorted = false;
    }
    lo = std::min(lo, s);
    hi = std::max(hi, s);
  }
  if (sorted || n > UINT32_MAX) {
    if (!sorted) {
      std::stable_sort(events.begin(), events.end(), [](const commprof_event& a, const commprof_event& b) {
        return static_cast<int64_t>(a.start_ns) < static_cast<int64_t>(b.start_ns);
      });
    }
    events.shrink_to_fit();
    return;
  }
  std::vector<uint32_t> order(n);
  const int index_bits = static_cast<int>(std::bit_width(static_cast<uint64_t>(n)));
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (std::bit_width(span) + index_bits <= 64) {
    std::vector<uint64_t> keys(n);
    for (size_t i = 0; i < n; ++i) {
      keys[i] = ((static_cast<uint64_t>(start(i)) - static_cast<uint64_t>(lo)) << index_bits) | i;
    }
    std::sort(keys.begin(), keys.end());
    const uint64_t index_mask = (uint64_t{1} << index_bits) - 1;
    for (size_t i = 0; i < n; ++i) {
      order[i] = static_cast<uint32_t>(keys[i] & index_mask);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      order[i] = static_cast<uint32_t>(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return start(a) < start(b); });
  }
  std::vector<commprof_event> out;
  out.reserve(n);
  for (uint32_t i : order) {
    out.push_back(events[i]);
  }
  events = std::move(out);
}

// Records to reserve before reading: the JSON text's size (a gzip file's trailer holds it, modulo
// 4 GiB) over 128 bytes, less than any reference trace's bytes per event (≥ 199). Untouched
// reserved pages cost nothing; the vector still grows when a file has smaller events.
size_t EstimateRecords(const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec || size < 18) {
    return 0;
  }
  uint64_t text = size;
  std::ifstream in(path, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  if (!in.read(reinterpret_cast<char*>(magic), 2)) {
    return 0;
  }
  if (magic[0] == 0x1f && magic[1] == 0x8b) {
    unsigned char isize[4] = {0, 0, 0, 0};
    if (!in.seekg(-4, std::ios::end) || !in.read(reinterpret_cast<char*>(isize), 4)) {
      return 0;
    }
    const uint64_t trailer = isize[0] | isize[1] << 8 | isize[2] << 16 | static_cast<uint64_t>(isize[3]) << 24;
    // A trailer below the compressed size has wrapped (or is one member of several): guess.
    text = trailer >= size ? trailer : size * 8;
  }
  return static_cast<size_t>(std::min<uint64_t>(text / 128, uint64_t{1} << 28));
}

}  // namespace

Result<RankTrace> ReadKinetoTrace(const std::string& path, const std::function<void(uint64_t)>& progress) {
  RankTrace t;
  t.path = path;
  t.events.reserve(EstimateRecords(path));
  TraceBuilder builder(t);
  JsonStreamCallbacks cb;
  cb.member = [&](std::string_view key, std::string_view raw) { return builder.Member(key, raw); };
  cb.event = [&](uint64_t index, std::string_view raw) { return builder.Event(index, raw); };
  cb.progress = progress;
  Status st = ReadKinetoJson(path, cb);
  if (!st.ok()) {
    // Nothing read at all (not a trace, cannot open): the file is refused as a whole.
    if (t.counts.events_read == 0) {
      return st;
    }
    t.read_status = st;
  }
  builder.Finish();
  return t;
}

}  // namespace commprof::kineto
