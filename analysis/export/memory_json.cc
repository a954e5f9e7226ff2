#include "analysis/export/memory_json.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "analysis/metrics/memory_usage.h"
#include "commprof/event.h"
#include "core/schema/enums.h"

namespace commprof {
namespace {

std::string Str(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

template <class T, class F>
void Array(std::ostream& out, const std::vector<T>& v, F&& each) {
  out << '[';
  for (size_t i = 0; i < v.size(); ++i) {
    out << (i ? "," : "");
    each(v[i]);
  }
  out << ']';
}

void WriteLive(std::ostream& out, const LiveAllocation& a) {
  out << "{\"address\":" << a.address << ",\"bytes\":" << a.bytes
      << ",\"category\":" << Str(MemoryCategoryName(a.memory_kind)) << ",\"allocated_ns\":" << a.allocated_ns
      << ",\"correlation\":" << a.correlation << ",\"thread_id\":" << a.thread_id << ",\"name\":" << Str(a.name)
      << ",\"allocated_by\":" << Str(a.allocated_by) << '}';
}

void WriteDevice(std::ostream& out, const DeviceTimeline& d, const MemoryTimeline& t, size_t max_points) {
  const bool host = d.device == COMMPROF_HOST_DEVICE;
  out << "{\"rank\":" << d.rank << ",\"device\":" << (host ? std::string("null") : std::to_string(d.device))
      << ",\"label\":" << Str(MemoryDeviceLabel(d.device)) << ",\"categories\":";
  Array(out, d.categories, [&](uint8_t k) { out << Str(MemoryCategoryName(k)); });
  out << ",\"memory_kinds\":";
  Array(out, d.categories, [&](uint8_t k) { out << static_cast<int>(k); });
  out << ",\"allocs\":" << d.allocs << ",\"frees\":" << d.frees << ",\"unmatched_frees\":" << d.unmatched_frees
      << ",\"final_bytes\":" << d.final_bytes
      << ",\"baseline_bytes\":" << (d.baseline_bytes ? std::to_string(*d.baseline_bytes) : std::string("null"));
  out << ",\"peak\":{\"time_ns\":" << d.peak_time_ns << ",\"bytes\":" << d.peak_bytes << ",\"by_category\":";
  Array(out, d.peak_by_category, [&](int64_t v) { out << v; });
  out << ",\"live_count\":" << d.live_count << ",\"live\":";
  Array(out, d.live, [&](const LiveAllocation& a) { WriteLive(out, a); });
  out << ",\"more_count\":" << (d.live_count - d.live.size()) << ",\"more_bytes\":" << d.more_bytes << '}';
  const std::vector<size_t> keep = DownsampleIndices(d, max_points, t.start_ns, t.end_ns);
  out << ",\"points\":{\"records\":" << d.time_ns.size()
      << ",\"downsampled\":" << (keep.size() < d.time_ns.size() ? "true" : "false") << ",\"time_ns\":";
  Array(out, keep, [&](size_t i) { out << d.time_ns[i]; });
  out << ",\"total\":";
  Array(out, keep, [&](size_t i) { out << d.TotalAt(i); });
  out << ",\"by_category\":";
  Array(out, d.in_use, [&](const std::vector<int64_t>& c) { Array(out, keep, [&](size_t i) { out << c[i]; }); });
  out << "}}";
}

}  // namespace

std::string MemoryCategoryName(uint8_t memory_kind) { return schema::MemoryKindName(memory_kind); }

void WriteMemoryTimelineJson(const MemoryTimeline& t, const MemoryExportOptions& o, std::ostream& out) {
  out << "{\"schema\":" << Str(kMemoryTimelineSchema) << ",\"schema_version\":" << kMemoryTimelineSchemaVersion
      << ",\"file\":" << Str(o.file) << ",\"window\":" << (o.window ? std::to_string(*o.window) : std::string("null"))
      << ",\"start_ns\":" << t.start_ns << ",\"end_ns\":" << t.end_ns << ",\"max_points\":" << o.max_points
      << ",\"ranks_without_records\":";
  Array(out, t.ranks_without_records, [&](uint32_t r) { out << r; });
  out << ",\"unreadable_ranks\":";
  Array(out, o.unreadable_ranks, [&](uint32_t r) { out << r; });
  out << ",\"devices\":[";
  for (size_t i = 0; i < t.devices.size(); ++i) {
    out << (i ? ",\n" : "\n");
    WriteDevice(out, t.devices[i], t, o.max_points);
  }
  out << "\n]}\n";
}

}  // namespace commprof
