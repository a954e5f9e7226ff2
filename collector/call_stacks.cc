#include "collector/call_stacks.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>
#include <unwind.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/config.h"

namespace commprof {
namespace {

static_assert(sizeof(uintptr_t) == 8, "the return-address slot is CFA - 8 (x86-64, aarch64)");

std::string BaseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

struct LoadContext {
  const StackOptions* options;
  uintptr_t self;
  std::vector<ModuleRange>* out;
};

// The main program's path (dl_iterate_phdr names it "").
std::string SelfExe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("??");
}

int AddModule(dl_phdr_info* info, size_t /*size*/, void* arg) {
  auto* c = static_cast<LoadContext*>(arg);
  const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  const std::string base = BaseName(name[0] != '\0' ? name : SelfExe().c_str());
  bool skip = false;
  for (const std::string& prefix : c->options->skip_prefixes) {
    skip = skip || (!base.empty() && base.rfind(prefix, 0) == 0);
  }
  const size_t first = c->out->size();
  bool holds_self = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) {
      continue;
    }
    ModuleRange r;
    r.begin = info->dlpi_addr + ph.p_vaddr;
    r.end = r.begin + ph.p_memsz;
    holds_self = holds_self || (c->self >= r.begin && c->self < r.end);
    c->out->push_back(r);
  }
  skip = skip || (c->options->skip_self && holds_self);
  for (size_t i = first; i < c->out->size(); ++i) {
    (*c->out)[i].skip = skip;
  }
  return 0;
}

uint64_t HashPcs(const uintptr_t* pcs, uint32_t depth) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ depth;
  for (uint32_t i = 0; i < depth; ++i) {
    h = (h ^ pcs[i]) * 0x100000001B3ull;
    h ^= h >> 29;
  }
  return h;
}

// Re-reads the cached return-address slots. They lie between the capturing frame and the
// thread's stack base (the key fixes the capturing frame), so they are mapped; they may be a
// caller's locals when the chain differs, hence no address-sanitizer check here.
__attribute__((no_sanitize("address"))) bool StillValid(const StackCache::Entry& e) {
  for (uint32_t i = 0; i < e.checks; ++i) {
    // The unwinder gives stack addresses as integers.
    if (*reinterpret_cast<const uintptr_t*>(e.slot[i]) != e.value[i]) {  // NOLINT(performance-no-int-to-ptr)
      return false;
    }
  }
  return true;
}

}  // namespace

StackOptions CollectorStackOptions(uint32_t depth) {
  StackOptions o;
  o.depth = depth;
  o.skip_prefixes = {"libcommprof", "libmpi", "libopen-pal", "libopen-rte", "libpmpi", "libnccl", "libgcc_s"};
  o.skip_self = true;
  return o;
}

std::unique_ptr<ModuleMap> ModuleMap::Load(const StackOptions& options) {
  auto m = std::make_unique<ModuleMap>();
  LoadContext c{&options, reinterpret_cast<uintptr_t>(&AddModule), &m->ranges_};
  dl_iterate_phdr(AddModule, &c);
  std::sort(m->ranges_.begin(), m->ranges_.end(),
            [](const ModuleRange& a, const ModuleRange& b) { return a.begin < b.begin; });
  return m;
}

const ModuleRange* ModuleMap::Find(uintptr_t pc) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), pc,
                             [](uintptr_t v, const ModuleRange& r) { return v < r.begin; });
  if (it == ranges_.begin()) {
    return nullptr;
  }
  --it;
  return pc < it->end ? &*it : nullptr;
}

CallStacks::CallStacks(StackOptions options) : options_(std::move(options)) {
  uint32_t slots = 64;
  while (slots < options_.max_stacks * 2) {
    slots <<= 1;
  }
  mask_ = slots - 1;
  table_ = std::make_unique<std::atomic<const Record*>[]>(slots);
  module_maps_.push_back(ModuleMap::Load(options_));
  modules_.store(module_maps_.back().get(), std::memory_order_release);
}

CallStacks::~CallStacks() {
  for (const Record* r : records_) {
    delete r;
  }
}

const ModuleRange* CallStacks::FindModule(uintptr_t pc) {
  if (const ModuleRange* r = modules_.load(std::memory_order_acquire)->Find(pc)) {
    return r;
  }
  // A module loaded since the last snapshot (dlopen): take a new one, once per unknown pc.
  std::lock_guard<std::mutex> lock(mu_);
  if (const ModuleRange* r = modules_.load(std::memory_order_acquire)->Find(pc)) {
    return r;
  }
  module_maps_.push_back(ModuleMap::Load(options_));
  modules_.store(module_maps_.back().get(), std::memory_order_release);
  return module_maps_.back()->Find(pc);
}

uint32_t CallStacks::Capture(StackCache& cache) {
  const auto ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  const auto fp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  StackCache::Entry& e = cache.entries_[((ra ^ (fp >> 4)) * 0x9E3779B97F4A7C15ull) >> 59];
  if (e.ra == ra && e.fp == fp && e.id != 0 && StillValid(e)) {
    return e.id;
  }
  const uint32_t id = Unwind(e, ra, fp);
  // Not a tail call: Unwind counts on finding this frame between its own and the caller's.
  asm volatile("" ::: "memory");
  return id;
}

// The frames _Unwind_Backtrace reports, up to the last one kept: frame 0 is Unwind, frame 1
// Capture, frame 2 Capture's caller, the first one considered; `first` is the first frame outside
// the skipped modules (0 until found). The walk stops once `depth` frames from it are in, so a
// deep stack (an interpreter's) costs no more than a shallow one.
struct CallStacks::UnwindState {
  CallStacks* self = nullptr;
  uint32_t depth = 0;
  uint32_t n = 0;
  uint32_t first = 0;
  uintptr_t pcs[StackCache::kMaxRaw];
  uintptr_t cfas[StackCache::kMaxRaw];
};

_Unwind_Reason_Code CallStacks::CollectFrame(_Unwind_Context* ctx, void* arg) {
  auto* s = static_cast<UnwindState*>(arg);
  const uintptr_t ip = _Unwind_GetIP(ctx);
  if (ip == 0 || s->n >= StackCache::kMaxRaw) {
    return _URC_END_OF_STACK;
  }
  s->pcs[s->n] = ip;
  s->cfas[s->n] = _Unwind_GetCFA(ctx);
  if (s->first == 0 && s->n >= 2) {
    const ModuleRange* m = s->self->FindModule(ip);
    if (m == nullptr || !m->skip) {
      s->first = s->n;
    }
  }
  ++s->n;
  return s->first != 0 && s->n >= s->first + s->depth ? _URC_END_OF_STACK : _URC_NO_REASON;
}

uint32_t CallStacks::Unwind(StackCache::Entry& entry, uintptr_t ra, uintptr_t fp) {
  misses_.fetch_add(1, std::memory_order_relaxed);
  UnwindState s;
  s.self = this;
  s.depth = options_.depth;
  _Unwind_Backtrace(CollectFrame, &s);
  const uint32_t first = s.first != 0 ? s.first : s.n;
  const uint32_t depth = std::min(s.n > first ? s.n - first : 0u, options_.depth);
  entry.id = 0;
  if (depth == 0) {
    return 0;
  }
  const uint32_t id = Intern(&s.pcs[first], depth);
  // The context _Unwind_Backtrace reports for frame i holds the CFA of its callee, so frame i's
  // pc (its callee's return address) sits just below it. Checked from Capture's caller (2, whose
  // return address is in Capture's own frame, still live on a hit) to the last kept frame.
  uint32_t checks = 0;
  for (uint32_t i = 2; i < first + depth; ++i) {
    entry.slot[checks] = s.cfas[i] - sizeof(uintptr_t);
    entry.value[checks] = s.pcs[i];
    ++checks;
  }
  entry.ra = ra;
  entry.fp = fp;
  entry.checks = checks;
  entry.id = id;
  return id;
}

uint32_t CallStacks::Intern(const uintptr_t* pcs, uint32_t depth) {
  const uint64_t h = HashPcs(pcs, depth);
  auto same = [&](const Record* r) {
    return r->hash == h && r->depth == depth && std::memcmp(r->pcs, pcs, depth * sizeof(uintptr_t)) == 0;
  };
  for (uint32_t i = 0; i <= mask_; ++i) {
    const Record* r = table_[(h + i) & mask_].load(std::memory_order_acquire);
    if (r == nullptr) {
      break;
    }
    if (same(r)) {
      return r->id;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t i = 0; i <= mask_; ++i) {
    std::atomic<const Record*>& slot = table_[(h + i) & mask_];
    const Record* r = slot.load(std::memory_order_acquire);
    if (r != nullptr) {
      if (same(r)) {
        return r->id;
      }
      continue;
    }
    if (records_.size() >= options_.max_stacks) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
    auto* rec = new Record;
    rec->hash = h;
    rec->depth = depth;
    std::memcpy(rec->pcs, pcs, depth * sizeof(uintptr_t));
    rec->id = next_id_.fetch_add(1, std::memory_order_relaxed);
    records_.push_back(rec);
    slot.store(rec, std::memory_order_release);
    return rec->id;
  }
  dropped_.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

FrameOrigin ResolveFrame(uintptr_t return_address) {
  FrameOrigin out;
  const uintptr_t pc = return_address > 0 ? return_address - 1 : 0;  // inside the call instruction
  Dl_info info{};
  link_map* map = nullptr;
  void* const where = reinterpret_cast<void*>(pc);  // NOLINT(performance-no-int-to-ptr): a code address
  if (dladdr1(where, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 || map == nullptr) {
    out.module = "??";
    out.offset = pc;
    return out;
  }
  out.offset = pc - map->l_addr;
  if (map->l_name != nullptr && map->l_name[0] != '\0') {
    out.module = map->l_name;
  } else {
    out.module = SelfExe();
  }
  if (info.dli_sname != nullptr) {
    out.symbol = info.dli_sname;
  }
  return out;
}

std::string CallSiteText(std::span<const uintptr_t> pcs, size_t max_len) {
  std::string text;
  for (uintptr_t pc : pcs) {
    const FrameOrigin where = ResolveFrame(pc);
    const size_t slash = where.module.rfind('/');
    char offset[32];
    std::snprintf(offset, sizeof offset, "+0x%llx", static_cast<unsigned long long>(where.offset));
    if (!text.empty()) {
      text += " <- ";
    }
    text += where.symbol.empty() ? std::string("?") : where.symbol;
    text += " (";
    text += slash == std::string::npos ? where.module : where.module.substr(slash + 1);
    text += offset;
    text += ")";
    if (text.size() >= max_len) {
      break;
    }
  }
  if (text.size() > max_len) {
    text.resize(max_len);  // the innermost frames are kept
  }
  return text;
}

}  // namespace commprof
