#include "analysis/metrics/call_sites.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "analysis/match/collective_key_index.h"

namespace commprof {
namespace {

struct ApiKey {
  uint64_t start = 0;
  uint8_t kind = 0;
  uint64_t comm = 0;
  bool operator<(const ApiKey& o) const { return std::tie(start, kind, comm) < std::tie(o.start, o.kind, o.comm); }
};

bool IsApiKind(uint8_t kind) {
  return kind == COMMPROF_KIND_MPI_COLLECTIVE || kind == COMMPROF_KIND_MPI_P2P || kind == COMMPROF_KIND_MPI_WAIT ||
         kind == COMMPROF_KIND_NCCL_API;
}

struct SiteKey {
  std::string function;
  std::string file;
  uint32_t line = 0;
  std::string module;
  uint64_t address = 0;
  std::string op;
  bool operator<(const SiteKey& o) const {
    return std::tie(function, file, line, module, address, op) <
           std::tie(o.function, o.file, o.line, o.module, o.address, o.op);
  }
};

struct SiteSum {
  CallSite site;
  std::vector<uint32_t> ranks;
};

}  // namespace

Result<CallSiteReport> ComputeCallSites(const ProfileReader& reader, const StackMap& stacks,
                                        const std::vector<CollectiveInstance>& instances,
                                        const std::vector<InstanceMetrics>& measured) {
  CallSiteReport out;
  if (stacks.empty()) {
    return out;
  }
  CollectiveKeyIndex instance_index(instances.size());
  std::vector<size_t> instance_at;  // by the index's number
  for (size_t i = 0; i < instances.size(); ++i) {
    if (instance_index.FindOrInsert(instances[i].key()).second) {
      instance_at.push_back(i);
    }
  }
  std::map<SiteKey, SiteSum> sums;
  for (const RankInfo& r : reader.info().ranks) {
    if (stacks.lower_bound({r.rank, 0}) == stacks.lower_bound({r.rank + 1, 0})) {
      continue;  // no stack of this rank
    }
    auto strings = reader.Strings(r.rank);
    if (!strings.ok()) {
      return strings.status();
    }
    std::map<ApiKey, uint32_t> site_of;  // CALL_SITE -> stack id
    std::vector<commprof_event> api;
    COMMPROF_RETURN_IF_ERROR(reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      for (const commprof_event& e : chunk) {
        if (e.kind == COMMPROF_KIND_CALL_SITE) {
          site_of[{e.start_ns, e.subtype, e.comm_id}] = static_cast<uint32_t>(e.seq);
        } else if (IsApiKind(e.kind) && (e.flags & COMMPROF_FLAG_RECV_HALF) == 0) {
          api.push_back(e);
        }
      }
    }));
    uint64_t joined = 0;
    for (const commprof_event& e : api) {
      auto s = site_of.find({e.start_ns, e.kind, e.comm_id});
      if (s == site_of.end()) {
        continue;
      }
      auto frames = stacks.find({r.rank, s->second});
      if (frames == stacks.end() || frames->second.empty()) {
        continue;
      }
      ++joined;
      const StackFrameInfo& top = frames->second.front();
      const std::string& op = e.name_id < strings.value().size() ? strings.value()[e.name_id] : "?";
      SiteKey key{
          top.function, top.file, top.line, top.file.empty() ? top.module : "", top.file.empty() ? top.address : 0, op};
      SiteSum& sum = sums[key];
      const int64_t time = e.end_ns > e.start_ns ? static_cast<int64_t>(e.end_ns - e.start_ns) : 0;
      int64_t wait = time;
      if (e.kind == COMMPROF_KIND_MPI_COLLECTIVE) {
        wait = 0;  // unless the instance is found
        if (const std::optional<uint32_t> number = instance_index.Find(KeyOf(e))) {
          const size_t i = instance_at[*number];
          const CollectiveInstance& ci = instances[i];
          for (size_t a = 0; a < ci.arrivals.size(); ++a) {
            if (ci.arrivals[a].world_rank == r.rank && a < measured[i].waits.size()) {
              wait = measured[i].waits[a];
            }
          }
        }
      }
      if (sum.site.calls == 0) {
        sum.site.function = top.function;
        sum.site.file = top.file;
        sum.site.line = top.line;
        sum.site.module = top.module;
        sum.site.address = top.address;
        sum.site.op = op;
        for (const StackFrameInfo& f : frames->second) {
          sum.site.stack.push_back(f.Label());
        }
      }
      ++sum.site.calls;
      sum.site.time_ns += time;
      sum.site.wait_ns += wait;
      sum.site.bytes += e.kind == COMMPROF_KIND_MPI_WAIT ? 0 : e.bytes;
      if (sum.ranks.empty() || sum.ranks.back() != r.rank) {
        sum.ranks.push_back(r.rank);
      }
    }
    out.unjoined += site_of.size() > joined ? site_of.size() - joined : 0;
  }
  for (auto& [key, sum] : sums) {
    sum.site.ranks = static_cast<uint32_t>(sum.ranks.size());
    out.sites.push_back(std::move(sum.site));
  }
  std::stable_sort(out.sites.begin(), out.sites.end(), [](const CallSite& a, const CallSite& b) {
    return std::tie(b.wait_ns, b.time_ns) < std::tie(a.wait_ns, a.time_ns);
  });
  return out;
}

}  // namespace commprof
