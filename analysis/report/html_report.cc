// HTML report (html_report.h). Design:
//
// - Validate first, render second. Validate() walks every key the page uses and rejects a wrong
//   type or shape with the key's path ("lateness.ranks[1].mean_lateness_ns[3]"), so the renderer
//   below can read with lenient accessors (absent or null -> "–" or "not in this report") and
//   never meets a JSON type error. The page is built in a string and written only when complete.
// - Charts are SVG drawn here: horizontal bars (one row per rank, so thousands of ranks stay
//   legible as a column) and a rank x time-bin heat map. Each bar or cell carries a <title> (the
//   browser's hover tip, also read by screen readers) and data-* attributes with the raw values
//   (used by the tests and by anyone scripting the page).
// - The heat map draws at most kMaxHeatRows rows; a larger job is shown in bands of consecutive
//   ranks, each cell the largest mean lateness of the band's ranks, so the page stays a few MB at
//   thousands of ranks (DESIGN.md §9). The bar charts and tables keep one row per rank.
// - Strings from the input go through HtmlEscape() on every path into the page, never into the
//   script or style elements.
#include "analysis/report/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace commprof {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxHeatRows = 256;

// ---------------------------------------------------------------------------------------------
// Validation

enum class Kind { kNumber, kInteger, kString, kBool, kObject, kArray };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kNumber:
      return "a number";
    case Kind::kInteger:
      return "an integer";
    case Kind::kString:
      return "a string";
    case Kind::kBool:
      return "a boolean";
    case Kind::kObject:
      return "an object";
    case Kind::kArray:
      return "an array";
  }
  return "?";
}

bool IsKind(const Json& v, Kind k) {
  switch (k) {
    case Kind::kNumber:
      return v.is_number();
    case Kind::kInteger:
      return v.is_number_integer();
    case Kind::kString:
      return v.is_string();
    case Kind::kBool:
      return v.is_boolean();
    case Kind::kObject:
      return v.is_object();
    case Kind::kArray:
      return v.is_array();
  }
  return false;
}

Status Bad(const std::string& key, const std::string& what) {
  return InvalidArgument("report key " + key + ": " + what);
}

Status WrongType(const std::string& key, Kind k, const Json& v) {
  return Bad(key, std::string("expected ") + KindName(k) + ", got " + v.type_name());
}

struct Field {
  const char* key;
  Kind kind;
  bool required = false;
};

// Checks the listed members of obj (which must be an object); `path` is the object's own key path
// ("" at the top level). Absent or null optional members pass.
Status CheckFields(const Json& obj, const std::string& path, std::initializer_list<Field> fields) {
  const std::string prefix = path.empty() ? "" : path + ".";
  for (const Field& f : fields) {
    auto it = obj.find(f.key);
    if (it == obj.end() || it->is_null()) {
      if (f.required) {
        return Bad(prefix + f.key, it == obj.end() ? "missing" : "is null");
      }
      continue;
    }
    if (!IsKind(*it, f.kind)) {
      return WrongType(prefix + f.key, f.kind, *it);
    }
  }
  return Status::Ok();
}

// An optional member that, when present, must be an array of objects each passing `each`.
Status CheckArrayOfObjects(const Json& obj, const std::string& path, const char* key,
                           const std::function<Status(const Json&, const std::string&)>& each) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return Status::Ok();
  }
  const std::string apath = (path.empty() ? "" : path + ".") + key;
  if (!it->is_array()) {
    return WrongType(apath, Kind::kArray, *it);
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string ipath = apath + "[" + std::to_string(i) + "]";
    const Json& e = (*it)[i];
    if (!e.is_object()) {
      return WrongType(ipath, Kind::kObject, e);
    }
    COMMPROF_RETURN_IF_ERROR(each(e, ipath));
  }
  return Status::Ok();
}

// An optional member that, when present, must be an object passing `check`.
Status CheckObject(const Json& obj, const std::string& path, const char* key,
                   const std::function<Status(const Json&, const std::string&)>& check) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return Status::Ok();
  }
  const std::string opath = (path.empty() ? "" : path + ".") + key;
  if (!it->is_object()) {
    return WrongType(opath, Kind::kObject, *it);
  }
  return check(*it, opath);
}

// A per-bin array of the lateness section: exactly `bins` entries, each a number or null.
Status CheckBinArray(const Json& obj, const std::string& path, const char* key, size_t bins, bool integers) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return Status::Ok();
  }
  const std::string apath = path + "." + key;
  if (!it->is_array()) {
    return WrongType(apath, Kind::kArray, *it);
  }
  if (it->size() != bins) {
    return Bad(apath, "has " + std::to_string(it->size()) + " entries, lateness.bins is " + std::to_string(bins));
  }
  const Kind k = integers ? Kind::kInteger : Kind::kNumber;
  for (size_t b = 0; b < bins; ++b) {
    const Json& v = (*it)[b];
    if (!v.is_null() && !IsKind(v, k)) {
      return WrongType(apath + "[" + std::to_string(b) + "]", k, v);
    }
  }
  return Status::Ok();
}

Status ValidateBreakdown(const Json& b, const std::string& path) {
  return CheckFields(b, path,
                     {{"span_ns", Kind::kNumber},
                      {"compute_ns", Kind::kNumber},
                      {"exposed_comm_ns", Kind::kNumber},
                      {"memory_ns", Kind::kNumber},
                      {"idle_ns", Kind::kNumber}});
}

Status ValidateRankP2p(const Json& p2p, const std::string& path) {
  return CheckFields(p2p, path,
                     {{"sent", Kind::kNumber},
                      {"received", Kind::kNumber},
                      {"late_sender_wait_ns", Kind::kNumber},
                      {"late_receiver_wait_ns", Kind::kNumber}});
}

Status ValidateRank(const Json& r, const std::string& path) {
  COMMPROF_RETURN_IF_ERROR(CheckFields(r, path,
                                       {{"rank", Kind::kInteger, true},
                                        {"host", Kind::kString},
                                        {"pid", Kind::kInteger},
                                        {"comm_time_ns", Kind::kNumber},
                                        {"wait_time_ns", Kind::kNumber},
                                        {"wait_share", Kind::kNumber},
                                        {"times_last", Kind::kNumber},
                                        {"delay_caused_ns", Kind::kNumber},
                                        {"wait_imposed_ns", Kind::kNumber},
                                        {"instances", Kind::kNumber},
                                        {"transfer_time_ns", Kind::kNumber},
                                        {"overlap", Kind::kNumber},
                                        {"exposed_comm_ns", Kind::kNumber},
                                        {"overlap_basis", Kind::kString}}));
  COMMPROF_RETURN_IF_ERROR(CheckObject(r, path, "breakdown", ValidateBreakdown));
  return CheckObject(r, path, "p2p", ValidateRankP2p);
}

Status ValidateLateness(const Json& l, const std::string& path) {
  COMMPROF_RETURN_IF_ERROR(
      CheckFields(l, path, {{"start_ns", Kind::kNumber}, {"bin_ns", Kind::kNumber}, {"bins", Kind::kInteger, true}}));
  if (!l.at("bins").is_number_unsigned() && l.at("bins").get<int64_t>() < 0) {
    return Bad(path + ".bins", "is negative");
  }
  const size_t bins = l.at("bins").get<size_t>();
  return CheckArrayOfObjects(l, path, "ranks", [bins](const Json& r, const std::string& p) {
    Status st = CheckFields(r, p, {{"rank", Kind::kInteger, true}, {"mean_lateness_ns", Kind::kArray, true}});
    if (st.ok()) {
      st = CheckBinArray(r, p, "mean_lateness_ns", bins, false);
    }
    if (st.ok()) {
      st = CheckBinArray(r, p, "times_last", bins, true);
    }
    return st;
  });
}

Status ValidateIncompleteEntry(const Json& e, const std::string& path) {
  COMMPROF_RETURN_IF_ERROR(CheckFields(e, path,
                                       {{"comm_id", Kind::kInteger},
                                        {"seq", Kind::kInteger},
                                        {"type", Kind::kString},
                                        {"ranks_present", Kind::kArray}}));
  auto it = e.find("ranks_present");
  if (it != e.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_number_integer()) {
        return WrongType(path + ".ranks_present[" + std::to_string(i) + "]", Kind::kInteger, (*it)[i]);
      }
    }
  }
  return Status::Ok();
}

Status ValidateInstances(const Json& in, const std::string& path) {
  COMMPROF_RETURN_IF_ERROR(CheckFields(in, path, {{"matched", Kind::kNumber}, {"incomplete", Kind::kNumber}}));
  return CheckArrayOfObjects(in, path, "incomplete_list", ValidateIncompleteEntry);
}

Status ValidateCollective(const Json& c, const std::string& path) {
  return CheckFields(c, path,
                     {{"type", Kind::kString},
                      {"count", Kind::kNumber},
                      {"bytes", Kind::kNumber},
                      {"mean_duration_ns", Kind::kNumber},
                      {"mean_wait_ns", Kind::kNumber},
                      {"mean_transfer_ns", Kind::kNumber},
                      {"skew_p50_ns", Kind::kNumber},
                      {"skew_p99_ns", Kind::kNumber},
                      {"algbw_gbps", Kind::kNumber},
                      {"busbw_gbps", Kind::kNumber}});
}

Status ValidateWorstInstance(const Json& w, const std::string& path) {
  return CheckFields(w, path,
                     {{"comm_id", Kind::kInteger},
                      {"seq", Kind::kInteger},
                      {"type", Kind::kString},
                      {"bytes", Kind::kNumber},
                      {"start_ns", Kind::kNumber},
                      {"skew_ns", Kind::kNumber},
                      {"last_rank", Kind::kInteger},
                      {"delay_caused_ns", Kind::kNumber},
                      {"total_wait_ns", Kind::kNumber}});
}

Status ValidateP2p(const Json& p2p, const std::string& path) {
  return CheckFields(p2p, path,
                     {{"matched", Kind::kNumber},
                      {"unmatched_sends", Kind::kNumber},
                      {"unmatched_recvs", Kind::kNumber},
                      {"late_sender_wait_ns", Kind::kNumber},
                      {"late_receiver_wait_ns", Kind::kNumber}});
}

Status ValidateStraggler(const Json& s, const std::string& path) {
  return CheckFields(s, path,
                     {{"rank", Kind::kInteger, true},
                      {"host", Kind::kString},
                      {"share_last", Kind::kNumber},
                      {"delay_caused_ns", Kind::kNumber},
                      {"persistent", Kind::kBool},
                      {"cause", Kind::kString}});
}

Status ValidateClockRank(const Json& cr, const std::string& path) {
  return CheckFields(cr, path,
                     {{"rank", Kind::kInteger, true},
                      {"clock_offset_ns", Kind::kNumber},
                      {"clock_drift_ppm", Kind::kNumber},
                      {"clock_error_bound_ns", Kind::kNumber},
                      {"clock_method", Kind::kString}});
}

Status ValidateClock(const Json& c, const std::string& path) {
  COMMPROF_RETURN_IF_ERROR(CheckFields(c, path, {{"violations", Kind::kNumber}, {"instances_checked", Kind::kNumber}}));
  return CheckArrayOfObjects(c, path, "ranks", ValidateClockRank);
}

Status Validate(const Json& r) {
  if (!r.is_object()) {
    return InvalidArgument(std::string("report: expected a JSON object, got ") + r.type_name());
  }
  COMMPROF_RETURN_IF_ERROR(CheckFields(r, "",
                                       {{"schema", Kind::kString, true},
                                        {"schema_version", Kind::kInteger},
                                        {"path", Kind::kString},
                                        {"job_id", Kind::kString},
                                        {"world_size", Kind::kInteger, true},
                                        {"ranks", Kind::kArray, true},
                                        {"skew_threshold_ns", Kind::kNumber}}));
  if (r.at("schema") != "commprof-report") {
    return Bad("schema", "is \"" + r.at("schema").get<std::string>() + "\", expected \"commprof-report\"");
  }
  if (r.at("world_size").is_number_integer() && !r.at("world_size").is_number_unsigned() &&
      r.at("world_size").get<int64_t>() < 0) {
    return Bad("world_size", "is negative");
  }
  COMMPROF_RETURN_IF_ERROR(CheckArrayOfObjects(r, "", "ranks", ValidateRank));
  COMMPROF_RETURN_IF_ERROR(CheckObject(r, "", "instances", ValidateInstances));
  COMMPROF_RETURN_IF_ERROR(CheckArrayOfObjects(r, "", "collectives", ValidateCollective));
  COMMPROF_RETURN_IF_ERROR(CheckArrayOfObjects(r, "", "worst_instances", ValidateWorstInstance));
  COMMPROF_RETURN_IF_ERROR(CheckObject(r, "", "p2p", ValidateP2p));
  COMMPROF_RETURN_IF_ERROR(CheckArrayOfObjects(r, "", "stragglers", ValidateStraggler));
  COMMPROF_RETURN_IF_ERROR(CheckObject(r, "", "lateness", ValidateLateness));
  return CheckObject(r, "", "clock", ValidateClock);
}

// ---------------------------------------------------------------------------------------------
// Lenient accessors (the input has been validated; absent and null read as "no value")

const Json* Get(const Json& o, const char* key) {
  if (!o.is_object()) {
    return nullptr;
  }
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) {
    return nullptr;
  }
  return &*it;
}

std::optional<double> Num(const Json& o, const char* key) {
  const Json* v = Get(o, key);
  if (v == nullptr || !v->is_number()) {
    return std::nullopt;
  }
  // A report built in memory may hold NaN or infinity (JSON text cannot); they read as no value.
  const double d = v->get<double>();
  return std::isfinite(d) ? std::optional<double>(d) : std::nullopt;
}

double NumOr(const Json& o, const char* key, double fallback) { return Num(o, key).value_or(fallback); }

std::optional<int64_t> Int(const Json& o, const char* key) {
  const Json* v = Get(o, key);
  if (v == nullptr || !v->is_number()) {
    return std::nullopt;
  }
  if (v->is_number_unsigned()) {
    return static_cast<int64_t>(std::min<uint64_t>(v->get<uint64_t>(), INT64_MAX));
  }
  if (v->is_number_integer()) {
    return v->get<int64_t>();
  }
  return std::llround(v->get<double>());
}

std::string Str(const Json& o, const char* key, const std::string& fallback = "") {
  const Json* v = Get(o, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : fallback;
}

const Json& Arr(const Json& o, const char* key) {
  static const Json kEmpty = Json::array();
  const Json* v = Get(o, key);
  return v != nullptr && v->is_array() ? *v : kEmpty;
}

const Json& Obj(const Json& o, const char* key) {
  static const Json kEmpty = Json::object();
  const Json* v = Get(o, key);
  return v != nullptr && v->is_object() ? *v : kEmpty;
}

// ---------------------------------------------------------------------------------------------
// Formatting

__attribute__((format(printf, 1, 2))) std::string Fmt(const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

const char* const kDash = "\xe2\x80\x93";  // "–": no value

// A duration in the unit that keeps 3-4 significant digits.
std::string Dur(double ns) {
  if (!std::isfinite(ns)) {
    return kDash;
  }
  const double a = std::fabs(ns);
  if (a < 999.5) {
    return Fmt("%.0f ns", ns);
  }
  if (a < 999.995e3) {
    return Fmt("%.2f \xc2\xb5s", ns / 1e3);
  }
  if (a < 999.995e6) {
    return Fmt("%.2f ms", ns / 1e6);
  }
  return Fmt("%.3f s", ns / 1e9);
}

std::string Bytes(double b) {
  if (!std::isfinite(b)) {
    return kDash;
  }
  if (b < 1024) {
    return Fmt("%.0f B", b);
  }
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = b / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return Fmt("%.2f %s", v, units[u]);
}

std::string Pct(double share) { return std::isfinite(share) ? Fmt("%.1f%%", 100.0 * share) : kDash; }

std::string Count(double n) { return std::isfinite(n) ? Fmt("%.0f", n) : kDash; }

// Sort key for data-v: round-trips a double without locale surprises.
std::string SortKey(double v) { return Fmt("%.17g", v); }

// SVG coordinates: two decimals are well below a pixel.
std::string Px(double v) { return Fmt("%.2f", v); }

// A round step for about `target` ticks over [0, max] (1, 2 or 5 times a power of ten).
double NiceStep(double max, int target) {
  if (!(max > 0) || !std::isfinite(max)) {
    return 1;
  }
  const double raw = max / target;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

// The smallest number of decimals (0-6) that shows multiples of `step` exactly.
int DecimalsFor(double step) {
  for (int d = 0; d < 6; ++d) {
    const double s = step * std::pow(10.0, d);
    if (std::fabs(s - std::round(s)) < 1e-6 * std::max(1.0, s)) {
      return d;
    }
  }
  return 6;
}

struct TimeUnit {
  double div;
  const char* suffix;
};

// One unit for a whole time axis, chosen by its span.
TimeUnit AxisUnit(double span_ns) {
  if (span_ns >= 1e9) {
    return {1e9, "s"};
  }
  if (span_ns >= 1e6) {
    return {1e6, "ms"};
  }
  if (span_ns >= 1e3) {
    return {1e3, "\xc2\xb5s"};
  }
  return {1, "ns"};
}

// ColorBrewer YlOrRd (9 classes), interpolated: light yellow = no lateness, dark red = the most.
const unsigned kHeatStops[] = {0xffffcc, 0xffeda0, 0xfed976, 0xfeb24c, 0xfd8d3c,
                               0xfc4e2a, 0xe31a1c, 0xbd0026, 0x800026};
constexpr int kHeatStopCount = sizeof kHeatStops / sizeof kHeatStops[0];

std::string HeatColour(double t) {
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0);
  const double x = t * (kHeatStopCount - 1);
  const int i = std::min(static_cast<int>(x), kHeatStopCount - 2);
  const double f = x - i;
  auto ch = [&](int shift) {
    const double a = (kHeatStops[i] >> shift) & 0xff, b = (kHeatStops[i + 1] >> shift) & 0xff;
    return static_cast<int>(std::lround(a + (b - a) * f));
  };
  return Fmt("#%02x%02x%02x", ch(16), ch(8), ch(0));
}

// ---------------------------------------------------------------------------------------------
// Page pieces

constexpr const char* kStyle = R"CSS(
:root{--fg:#1d2430;--muted:#5b6472;--line:#d9dee5;--bg:#f6f7f9;--card:#fff;--bad:#b3261e;--badbg:#fdecea;
--ok:#1e7b34;--okbg:#e8f5ec;--na:#5b6472;--nabg:#eef0f3;--wait:#e4572e;--rest:#4c78a8;--compute:#59a14f;
--exposed:#e15759;--memory:#b07aa1;--idle:#bab0ac}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
"DejaVu Sans",Arial,sans-serif}
main{max-width:1240px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:22px;margin:0 0 2px}
h2{font-size:17px;margin:28px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
p.sub{margin:0 0 14px;color:var(--muted)}
code{font:12.5px/1.3 "DejaVu Sans Mono",Menlo,Consolas,monospace;overflow-wrap:anywhere}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(190px,1fr));gap:10px}
.card{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:10px 12px;min-width:0}
.card .k{font-size:11.5px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
.card .v{font-size:19px;font-weight:600;overflow-wrap:anywhere}
.card .d{font-size:12.5px;color:var(--muted);overflow-wrap:anywhere}
.card.warn{border-color:#e8a09b;background:var(--badbg)}
.verdict{margin-top:16px;border-radius:6px;padding:14px 18px;border:1px solid var(--line);border-left-width:6px}
.verdict h2{margin:0 0 6px;border:0;padding:0;font-size:19px}
.verdict ul{margin:6px 0 0;padding-left:20px}
.verdict.bad{background:var(--badbg);border-color:var(--bad)}.verdict.bad h2{color:var(--bad)}
.verdict.ok{background:var(--okbg);border-color:var(--ok)}.verdict.ok h2{color:var(--ok)}
.verdict.na{background:var(--nabg);border-color:var(--na)}
.panel{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:12px 14px;overflow-x:auto}
.note{color:var(--muted);font-size:12.5px;margin:6px 0 0}
p.empty{color:var(--muted);font-style:italic;margin:4px 0}
svg.chart{display:block;max-width:100%;height:auto;font-size:12px}
svg.chart text{fill:var(--fg)}
svg.chart .axis{fill:var(--muted);font-size:11px}
svg.chart .grid{stroke:#e6e9ee;stroke-width:1}
svg.chart .straggler text.lbl{fill:var(--bad);font-weight:700}
svg.chart .bar:hover rect,svg.chart rect.cell:hover{stroke:#111;stroke-width:1.5}
.seg-wait{fill:var(--wait)}.seg-rest{fill:var(--rest)}.seg-compute{fill:var(--compute)}
.seg-exposed{fill:var(--exposed)}.seg-memory{fill:var(--memory)}.seg-idle{fill:var(--idle)}
rect.cell.empty{fill:#eceef1}
table{border-collapse:collapse;width:100%;background:var(--card);font-size:13px}
th,td{padding:4px 7px;border-bottom:1px solid var(--line);text-align:left;white-space:nowrap}
th{background:#eef1f5;font-weight:600;position:sticky;top:0}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th[aria-sort=ascending]::after{content:" \25B2";font-size:9px}
table.sortable th[aria-sort=descending]::after{content:" \25BC";font-size:9px}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
td.na{color:#a0a7b2}
tr.straggler td{background:var(--badbg)}
.tablewrap{overflow-x:auto;border:1px solid var(--line);border-radius:6px}
.tablewrap table{border:0}
footer{margin-top:30px;color:var(--muted);font-size:12px}
)CSS";

// Sortable tables: a click on a header sorts by that column (numbers by their data-v value, empty
// cells last). The page is complete without it. data-js="ready" marks that it ran.
constexpr const char* kScript = R"JS(
(function(){
function key(td){var v=td.getAttribute('data-v');if(v===null)return td.textContent.toLowerCase();
return v===''?null:parseFloat(v);}
document.querySelectorAll('table.sortable').forEach(function(t){
var ths=t.tHead.rows[0].cells;
Array.prototype.forEach.call(ths,function(th,i){th.addEventListener('click',function(){
var asc=th.getAttribute('aria-sort')!=='ascending';
Array.prototype.forEach.call(ths,function(h){h.removeAttribute('aria-sort');});
th.setAttribute('aria-sort',asc?'ascending':'descending');
var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows);
rows.sort(function(x,y){var a=key(x.cells[i]),c=key(y.cells[i]);
if(a===null)return c===null?0:1;if(c===null)return -1;return (a<c?-1:a>c?1:0)*(asc?1:-1);});
rows.forEach(function(r){b.appendChild(r);});});});});
document.documentElement.setAttribute('data-js','ready');
})();
)JS";

// Shared chart geometry (SVG user units = CSS px at full width).
constexpr double kChartWidth = 1060;
constexpr double kLabelGutter = 118;  // "rank 12345" plus the straggler mark
constexpr double kValueGutter = 210;  // the text after each bar

// With thin rows only every k-th row is labelled (k = 1, 2, 5, 10, 20, ...: about 14 px apart).
size_t LabelEvery(double row_height) {
  if (row_height >= 10 || !(row_height > 0)) {
    return 1;
  }
  static constexpr size_t kSteps[] = {2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000};
  for (size_t k : kSteps) {
    if (static_cast<double>(k) * row_height >= 14) {
      return k;
    }
  }
  return 10000;
}

double RowHeight(size_t rows, double max_h) {
  if (rows == 0) {
    return max_h;
  }
  return std::clamp(std::floor(560.0 / static_cast<double>(rows)), 3.0, max_h);
}

struct RankRow {
  int64_t rank = 0;
  const Json* j = nullptr;
};

class Page {
 public:
  explicit Page(const Json& r) : r_(r) {
    for (const Json& s : Arr(r_, "stragglers")) {
      stragglers_.insert(Int(s, "rank").value_or(-1));
    }
    for (const Json& rk : Arr(r_, "ranks")) {
      ranks_.push_back({Int(rk, "rank").value_or(0), &rk});
    }
    std::stable_sort(ranks_.begin(), ranks_.end(), [](const RankRow& a, const RankRow& b) { return a.rank < b.rank; });
  }

  std::string Render() {
    const std::string job = Str(r_, "job_id");
    h_ += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    h_ += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    h_ += "<meta name=\"generator\" content=\"commprof report --format html\">\n";
    h_ += "<title>commprof report" + (job.empty() ? std::string() : " \xc2\xb7 job " + HtmlEscape(job)) + "</title>\n";
    h_ += "<style>";
    h_ += kStyle;
    h_ += "</style>\n</head>\n<body>\n<main>\n";
    Header();
    h_ += "<div id=\"verdict\">\n";
    Verdict();
    h_ += "</div>\n";
    RankTimeChart();
    LatenessHeatMap();
    BreakdownChart();
    CollectivesTable();
    RanksTable();
    WorstInstancesTable();
    IncompleteTable();
    P2pSummary();
    ClockTable();
    h_ += "<footer>Generated by commprof from a report of schema_version " +
          (Int(r_, "schema_version") ? std::to_string(*Int(r_, "schema_version")) : std::string("(unstated)")) +
          ". All times are on the aligned job time base (rank 0's clock); the metrics are defined in "
          "docs/metrics.md. This file is self-contained: it loads nothing from the network.</footer>\n";
    h_ += "</main>\n<script>";
    h_ += kScript;
    h_ += "</script>\n</body>\n</html>\n";
    return std::move(h_);
  }

 private:
  bool IsStraggler(int64_t rank) const { return stragglers_.count(rank) != 0; }

  const Json* RankEntry(int64_t rank) const {
    for (const RankRow& rr : ranks_) {
      if (rr.rank == rank) {
        return rr.j;
      }
    }
    return nullptr;
  }

  void Card(const std::string& key, const std::string& value, const std::string& detail, bool warn) {
    h_ += std::string("<div class=\"card") + (warn ? " warn" : "") + "\"><div class=\"k\">" + key +
          "</div><div class=\"v\">" + value + "</div>";
    if (!detail.empty()) {
      h_ += "<div class=\"d\">" + detail + "</div>";
    }
    h_ += "</div>\n";
  }

  void Header() {
    h_ += "<header>\n<h1>commprof report</h1>\n<p class=\"sub\">";
    const std::string path = Str(r_, "path");
    h_ += path.empty() ? std::string("file not named") : "<code>" + HtmlEscape(path) + "</code>";
    h_ += "</p>\n<div class=\"cards\" id=\"summary\">\n";
    const std::string job = Str(r_, "job_id");
    Card("job", job.empty() ? kDash : HtmlEscape(job), "", false);

    std::set<std::string> hosts;
    for (const RankRow& rr : ranks_) {
      if (Get(*rr.j, "host")) {
        hosts.insert(Str(*rr.j, "host"));
      }
    }
    const int64_t world = Int(r_, "world_size").value_or(0);
    std::string rank_detail = std::to_string(ranks_.size()) + " in this report";
    if (!hosts.empty()) {
      rank_detail += ", on " + std::to_string(hosts.size()) + (hosts.size() == 1 ? " host" : " hosts");
    }
    Card("ranks", std::to_string(world), rank_detail, static_cast<int64_t>(ranks_.size()) != world);

    const Json& inst = Obj(r_, "instances");
    const std::optional<double> matched = Num(inst, "matched");
    const std::optional<double> incomplete = Num(inst, "incomplete");
    Card("matched collective instances", matched ? Count(*matched) : kDash,
         incomplete ? Count(*incomplete) + " incomplete" +
                          (*incomplete > 0 ? std::string(" (a rank missing; not measured)") : std::string())
                    : std::string(),
         incomplete.value_or(0) > 0);

    const Json* clock = Get(r_, "clock");
    if (clock != nullptr) {
      std::optional<double> worst_bound;
      bool unmeasured = false;
      for (const Json& cr : Arr(*clock, "ranks")) {
        const std::optional<double> b = Num(cr, "clock_error_bound_ns");
        if (!b || *b < 0) {
          unmeasured = true;
          continue;
        }
        worst_bound = std::max(worst_bound.value_or(0), *b);
      }
      const double violations = NumOr(*clock, "violations", 0);
      std::string value = worst_bound ? "\xc2\xb1" + Dur(*worst_bound) : std::string("unmeasured");
      std::string detail = "largest error bound";
      if (unmeasured && worst_bound) {
        detail += " (some ranks unmeasured)";
      }
      detail += "; " + Count(violations) + " clock-condition violation(s)";
      if (Num(*clock, "instances_checked")) {
        detail += " in " + Count(*Num(*clock, "instances_checked")) + " instances";
      }
      Card("clock alignment", value, detail, violations > 0 || unmeasured);
    } else {
      Card("clock alignment", kDash, "no clock section in this report", false);
    }
    if (Num(r_, "skew_threshold_ns")) {
      Card("attribution threshold", Dur(*Num(r_, "skew_threshold_ns")),
           "smaller arrival skews name no straggler (metrics.md &sect;3)", false);
    }
    h_ += "</div>\n</header>\n";
  }

  // The row of the lateness heat map for `rank`, if any.
  const Json* LatenessRow(int64_t rank) const {
    for (const Json& lr : Arr(Obj(r_, "lateness"), "ranks")) {
      if (Int(lr, "rank") == rank) {
        return &lr;
      }
    }
    return nullptr;
  }

  void Verdict() {
    const Json* list = Get(r_, "stragglers");
    const double matched = NumOr(Obj(r_, "instances"), "matched", 0);
    if (list == nullptr) {
      h_ +=
          "<section class=\"verdict na\"><h2>No verdict in this report</h2>"
          "<p>The report has no <code>stragglers</code> section.</p></section>\n";
      return;
    }
    if (list->empty()) {
      h_ += "<section class=\"verdict ok\"><h2>No straggler</h2><p>";
      if (Get(Obj(r_, "instances"), "matched") && matched == 0) {
        h_ += "No matched collective instances: there is nothing to judge.";
      } else {
        h_ +=
            "No rank was last in at least half of the matched instances while causing a delay of at least a "
            "tenth of the other ranks' collective time (metrics.md &sect;4).";
      }
      h_ += "</p>";
      // The nearest candidate, so "none" can be checked against the numbers.
      const RankRow* most = nullptr;
      for (const RankRow& rr : ranks_) {
        if (NumOr(*rr.j, "times_last", 0) > (most ? NumOr(*most->j, "times_last", 0) : 0)) {
          most = &rr;
        }
      }
      if (most != nullptr && matched > 0) {
        const double last = NumOr(*most->j, "times_last", 0);
        h_ += "<ul><li>Most often last: rank " + std::to_string(most->rank) + ", in " + Count(last) + " of " +
              Count(matched) + " instances (" + Pct(last / matched) + "), causing " +
              Dur(NumOr(*most->j, "delay_caused_ns", 0)) + " of delay by itself.</li></ul>";
      }
      h_ += "</section>\n";
      return;
    }
    for (const Json& s : *list) {
      const int64_t rank = Int(s, "rank").value_or(0);
      const Json* re = RankEntry(rank);
      std::string host = Str(s, "host");
      if (host.empty() && re != nullptr) {
        host = Str(*re, "host");
      }
      h_ += "<section class=\"verdict bad\"><h2>Rank " + std::to_string(rank) +
            (host.empty() ? std::string() : " on " + HtmlEscape(host)) + " is the straggler</h2><ul>";
      if (Num(s, "share_last")) {
        h_ += "<li>Last to arrive in <b>" + Pct(*Num(s, "share_last")) + "</b> of the ";
        h_ += matched > 0 ? Count(matched) + " matched collective instances" : std::string("matched instances");
        if (re != nullptr && Num(*re, "times_last")) {
          h_ += " (" + Count(*Num(*re, "times_last")) + " times)";
        }
        h_ += ".</li>";
      }
      if (const Json* p = Get(s, "persistent"); p != nullptr && p->is_boolean()) {
        h_ += p->get<bool>() ? "<li><b>Persistent</b>: last in at least half of the instances of each half of the "
                               "run.</li>"
                             : "<li><b>Transient</b>: not last through both halves of the run.</li>";
      }
      if (Num(s, "delay_caused_ns")) {
        h_ += "<li>Delay it alone caused (its arrival minus the second-latest, summed): <b>" +
              Dur(*Num(s, "delay_caused_ns")) + "</b>.</li>";
      }
      if (re != nullptr && Num(*re, "wait_imposed_ns")) {
        h_ += "<li>Wait it imposed on the other ranks: " + Dur(*Num(*re, "wait_imposed_ns")) + ".</li>";
      }
      if (const Json* lr = LatenessRow(rank); lr != nullptr) {
        double worst = -1;
        for (const Json& v : Arr(*lr, "mean_lateness_ns")) {
          if (v.is_number()) {
            worst = std::max(worst, v.get<double>());
          }
        }
        if (worst >= 0) {
          h_ += "<li>Its largest mean lateness in a time bin: " + Dur(worst) + " (heat map below).</li>";
        }
      }
      const std::string cause = Str(s, "cause");
      if (!cause.empty()) {
        h_ += "<li>Cause hint: <b>";
        h_ += cause == "compute"    ? "longer compute before the collective"
              : cause == "transfer" ? "slow transfer"
                                    : HtmlEscape(cause);
        h_ += "</b>.</li>";
      }
      h_ += "</ul></section>\n";
    }
  }

  // A horizontal axis under a plot of width `pw` starting at x0, for [0, axis_max] in ns.
  void TimeAxis(double x0, double pw, double y, double axis_max, double step) {
    for (double t = 0; t <= axis_max * (1 + 1e-9); t += step) {
      const double x = x0 + pw * t / axis_max;
      h_ += "<line class=\"grid\" x1=\"" + Px(x) + "\" x2=\"" + Px(x) + "\" y1=\"" + Px(y - 4) + "\" y2=\"" + Px(y) +
            "\"/><text class=\"axis\" x=\"" + Px(x) + "\" y=\"" + Px(y + 13) + "\" text-anchor=\"middle\">" + Dur(t) +
            "</text>";
    }
  }

  void Legend(double x, double y, std::initializer_list<std::pair<const char*, const char*>> items) {
    for (const auto& [cls, label] : items) {
      h_ += "<rect class=\"" + std::string(cls) + "\" x=\"" + Px(x) + "\" y=\"" + Px(y - 9) +
            "\" width=\"11\" height=\"11\" rx=\"2\"/><text x=\"" + Px(x + 16) + "\" y=\"" + Px(y) + "\">" + label +
            "</text>";
      x += 30 + 7.2 * static_cast<double>(std::string(label).size());
    }
  }

  // Row i of n (rows rh high) is labelled when it falls on the label step, or marks a straggler;
  // a regular label too close to a straggler's is left out so the two do not overlap.
  static bool Labelled(size_t i, double rh, const std::vector<size_t>& straggler_rows) {
    const size_t every = LabelEvery(rh);
    if (std::find(straggler_rows.begin(), straggler_rows.end(), i) != straggler_rows.end()) {
      return true;
    }
    if (i % every != 0) {
      return false;
    }
    for (size_t sr : straggler_rows) {
      if (std::fabs(static_cast<double>(sr) - static_cast<double>(i)) * rh < 14) {
        return false;
      }
    }
    return true;
  }

  std::vector<size_t> StragglerRows(const std::vector<int64_t>& row_ranks) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < row_ranks.size(); ++i) {
      if (IsStraggler(row_ranks[i])) {
        out.push_back(i);
      }
    }
    return out;
  }

  void RankLabel(const RankRow& rr, double y) {
    h_ += "<text class=\"lbl\" x=\"" + Px(kLabelGutter - 8) + "\" y=\"" + Px(y) + "\" text-anchor=\"end\">" +
          (IsStraggler(rr.rank) ? "\xe2\x96\xb6 " : "") + "rank " + std::to_string(rr.rank) + "</text>";
  }

  // Per-rank time in matched collectives, split into waiting for other ranks and the rest.
  void RankTimeChart() {
    h_ += "<section id=\"rank-time\"><h2>Time in collectives per rank</h2>\n<div class=\"panel\">";
    if (ranks_.empty()) {
      h_ += "<p class=\"empty\">No ranks in this report.</p></div></section>\n";
      return;
    }
    double max = 0;
    for (const RankRow& rr : ranks_) {
      max = std::max(max, NumOr(*rr.j, "comm_time_ns", 0));
    }
    if (!(max > 0)) {
      h_ += "<p class=\"empty\">No rank has time in matched collectives in this report.</p></div></section>\n";
      return;
    }
    const double step = NiceStep(max, 6);
    const double axis_max = max > 0 ? std::ceil(max / step) * step : 1;
    const double rh = RowHeight(ranks_.size(), 24);
    const double bh = std::max(2.0, std::round(rh * 0.72));
    const double top = 30, pw = kChartWidth - kLabelGutter - kValueGutter;
    const double height = top + rh * static_cast<double>(ranks_.size()) + 26;
    const bool labels = rh >= 10;
    std::vector<int64_t> row_ranks;
    for (const RankRow& rr : ranks_) {
      row_ranks.push_back(rr.rank);
    }
    const std::vector<size_t> straggler_rows = StragglerRows(row_ranks);
    h_ += "<svg class=\"chart\" id=\"chart-rank-time\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
          Px(kChartWidth) + " " + Px(height) + "\" width=\"" + Px(kChartWidth) + "\" height=\"" + Px(height) +
          "\" role=\"img\" aria-label=\"time in collectives per rank, waiting versus the rest\">";
    Legend(kLabelGutter, 16,
           {{"seg-wait", "waiting for other ranks to arrive"},
            {"seg-rest", "rest of the time in the call (the transfer)"}});
    for (double t = step; t <= axis_max * (1 + 1e-9); t += step) {
      const double x = kLabelGutter + pw * t / axis_max;
      h_ += "<line class=\"grid\" x1=\"" + Px(x) + "\" x2=\"" + Px(x) + "\" y1=\"" + Px(top - 4) + "\" y2=\"" +
            Px(height - 26) + "\"/>";
    }
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const RankRow& rr = ranks_[i];
      const double comm = std::max(0.0, NumOr(*rr.j, "comm_time_ns", 0));
      const double wait = std::clamp(NumOr(*rr.j, "wait_time_ns", 0), 0.0, comm);
      const double y = top + rh * static_cast<double>(i) + (rh - bh) / 2;
      const double ww = pw * wait / axis_max, rw = pw * (comm - wait) / axis_max;
      const std::string host = Str(*rr.j, "host");
      std::string tip = "rank " + std::to_string(rr.rank) + (host.empty() ? "" : " (" + HtmlEscape(host) + ")") +
                        (IsStraggler(rr.rank) ? ", the straggler" : "") + ": in collectives " + Dur(comm) +
                        ", waiting " + Dur(wait) + " (" + Pct(comm > 0 ? wait / comm : 0) + "), rest " +
                        Dur(comm - wait);
      if (Num(*rr.j, "times_last")) {
        tip += "; last to arrive " + Count(*Num(*rr.j, "times_last")) + " times";
      }
      h_ += "<g class=\"bar" + std::string(IsStraggler(rr.rank) ? " straggler" : "") + "\" data-rank=\"" +
            std::to_string(rr.rank) + "\"><title>" + tip + "</title>";
      if (Labelled(i, rh, straggler_rows)) {
        RankLabel(rr, y + bh / 2 + 4);
      }
      h_ += "<rect class=\"seg seg-wait\" data-v=\"" + SortKey(wait) + "\" x=\"" + Px(kLabelGutter) + "\" y=\"" +
            Px(y) + "\" width=\"" + Px(ww) + "\" height=\"" + Px(bh) + "\"/>";
      h_ += "<rect class=\"seg seg-rest\" data-v=\"" + SortKey(comm - wait) + "\" x=\"" + Px(kLabelGutter + ww) +
            "\" y=\"" + Px(y) + "\" width=\"" + Px(rw) + "\" height=\"" + Px(bh) + "\"/>";
      if (labels) {
        h_ += "<text class=\"val\" x=\"" + Px(kLabelGutter + ww + rw + 6) + "\" y=\"" + Px(y + bh / 2 + 4) + "\">" +
              Dur(comm) + ", waiting " + Pct(comm > 0 ? wait / comm : 0) + "</text>";
      }
      h_ += "</g>";
    }
    TimeAxis(kLabelGutter, pw, height - 22, axis_max, step);
    h_ += "</svg>";
    h_ +=
        "<p class=\"note\">Each bar is the rank's summed time inside matched blocking collectives; the "
        "first part is its wait for other ranks (for the last arrival, or for the root of a rooted collective; "
        "metrics.md &sect;2). A rank that waits little while the others wait much is the one they wait for.";
    if (!labels) {
      h_ += " Hover a bar for its rank and values.";
    }
    h_ += "</p></div></section>\n";
  }

  struct HeatRow {
    int64_t first = 0, last = 0;           // ranks covered (first == last unless banded)
    std::vector<std::optional<double>> v;  // per bin
    std::vector<int64_t> worst_rank;       // per bin: the rank with that value (bands)
    std::vector<int64_t> times_last;       // per bin, summed over the band
    bool has_times_last = false;
    int64_t total_last = 0;
  };

  void LatenessHeatMap() {
    h_ += "<section id=\"lateness\"><h2>Lateness over time</h2>\n<div class=\"panel\">";
    const Json* l = Get(r_, "lateness");
    if (l == nullptr) {
      h_ += "<p class=\"empty\">No lateness data in this report.</p></div></section>\n";
      return;
    }
    const size_t bins = static_cast<size_t>(Int(*l, "bins").value_or(0));
    const double bin_ns = NumOr(*l, "bin_ns", 0);
    std::vector<const Json*> rows;
    for (const Json& lr : Arr(*l, "ranks")) {
      rows.push_back(&lr);
    }
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Json* a, const Json* b) { return Int(*a, "rank") < Int(*b, "rank"); });
    if (bins == 0 || rows.empty()) {
      h_ += "<p class=\"empty\">The lateness section has no bins or no ranks.</p></div></section>\n";
      return;
    }
    // Band consecutive ranks when there are too many rows to draw one each.
    const size_t band = (rows.size() + kMaxHeatRows - 1) / kMaxHeatRows;
    std::vector<HeatRow> heat;
    double vmax = 0;
    bool any_value = false;
    for (size_t i = 0; i < rows.size(); i += band) {
      HeatRow hr;
      hr.first = Int(*rows[i], "rank").value_or(0);
      hr.v.assign(bins, std::nullopt);
      hr.worst_rank.assign(bins, hr.first);
      hr.times_last.assign(bins, 0);
      for (size_t k = i; k < std::min(rows.size(), i + band); ++k) {
        const Json& lr = *rows[k];
        const int64_t rank = Int(lr, "rank").value_or(0);
        hr.last = rank;
        const Json& ml = Arr(lr, "mean_lateness_ns");
        const Json& tl = Arr(lr, "times_last");
        for (size_t b = 0; b < bins; ++b) {
          if (b < ml.size() && ml[b].is_number()) {
            const double v = ml[b].get<double>();
            if (!hr.v[b] || v > *hr.v[b]) {
              hr.v[b] = v;
              hr.worst_rank[b] = rank;
            }
            vmax = std::max(vmax, v);
            any_value = true;
          }
          if (b < tl.size() && tl[b].is_number()) {
            hr.times_last[b] += tl[b].get<int64_t>();
            hr.total_last += tl[b].get<int64_t>();
            hr.has_times_last = true;
          }
        }
      }
      heat.push_back(std::move(hr));
    }

    const double rh = RowHeight(heat.size(), 26);
    const double right = 96;  // "last N×" column
    const double pw = kChartWidth - kLabelGutter - right;
    const double cw = pw / static_cast<double>(bins);
    const double gap = cw >= 5 ? 1 : 0;
    const double top = 44;
    const double height = top + rh * static_cast<double>(heat.size()) + 40;
    const double span = bin_ns * static_cast<double>(bins);
    const TimeUnit unit = AxisUnit(span);
    // Exact for round bin widths (1 us bins: no decimals); a real run's bins (9.316 ms) get three
    // significant digits, not the six it would take to print them exactly.
    const int decimals = bin_ns > 0
                             ? std::min(DecimalsFor(bin_ns / unit.div),
                                        std::max(0, 2 - static_cast<int>(std::floor(std::log10(bin_ns / unit.div)))))
                             : 0;
    auto at = [&](size_t b) { return Fmt("%.*f", decimals, bin_ns * static_cast<double>(b) / unit.div); };
    const bool labels = rh >= 10;
    std::vector<int64_t> row_ranks;
    // A band row counts as the straggler's when the straggler is one of its ranks.
    for (const HeatRow& hr : heat) {
      int64_t marked = INT64_MIN;
      for (int64_t sr : stragglers_) {
        if (sr >= hr.first && sr <= hr.last) {
          marked = sr;
        }
      }
      row_ranks.push_back(marked);
    }
    const std::vector<size_t> straggler_rows = StragglerRows(row_ranks);

    h_ += "<svg class=\"chart\" id=\"chart-lateness\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
          Px(kChartWidth) + " " + Px(height) + "\" width=\"" + Px(kChartWidth) + "\" height=\"" + Px(height) +
          "\" role=\"img\" aria-label=\"mean lateness per rank and time bin\">";
    // Legend: the colour scale from 0 to the largest mean lateness, and the "no instance" swatch.
    h_ += "<defs><linearGradient id=\"heat-scale\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">";
    for (int s = 0; s < kHeatStopCount; ++s) {
      h_ += "<stop offset=\"" + Px(static_cast<double>(s) / (kHeatStopCount - 1)) + "\" stop-color=\"" +
            HeatColour(static_cast<double>(s) / (kHeatStopCount - 1)) + "\"/>";
    }
    h_ += "</linearGradient></defs>";
    const double lx = kLabelGutter, lw = 260;
    h_ += "<g id=\"heat-legend\"><text x=\"" + Px(lx) +
          "\" y=\"12\">mean lateness (arrival minus the first arrival)"
          "</text><rect x=\"" +
          Px(lx) + "\" y=\"17\" width=\"" + Px(lw) + "\" height=\"10\" fill=\"url(#heat-scale)\" stroke=\"#c8ccd2\"/>";
    h_ += "<text class=\"axis\" x=\"" + Px(lx) + "\" y=\"38\">0</text><text class=\"axis\" x=\"" + Px(lx + lw / 2) +
          "\" y=\"38\" text-anchor=\"middle\">" + Dur(vmax / 2) + "</text><text class=\"axis\" x=\"" + Px(lx + lw) +
          "\" y=\"38\" text-anchor=\"end\" id=\"heat-max\">" + Dur(vmax) + "</text>";
    h_ += "<rect class=\"cell empty\" x=\"" + Px(lx + lw + 24) +
          "\" y=\"17\" width=\"14\" height=\"10\"/>"
          "<text x=\"" +
          Px(lx + lw + 44) + "\" y=\"26\">no instance in the bin</text>";
    if (band > 1) {
      h_ += "<text x=\"" + Px(lx + lw + 220) + "\" y=\"26\">one row per " + std::to_string(band) +
            " ranks (largest value)</text>";
    }
    h_ += "</g>";

    for (size_t i = 0; i < heat.size(); ++i) {
      const HeatRow& hr = heat[i];
      const double y = top + rh * static_cast<double>(i);
      const bool straggler_row = row_ranks[i] != INT64_MIN;
      const std::string who = band == 1
                                  ? "rank " + std::to_string(hr.first)
                                  : "ranks " + std::to_string(hr.first) + "\xe2\x80\x93" + std::to_string(hr.last);
      h_ += "<g class=\"heat-row" + std::string(straggler_row ? " straggler" : "") + "\" data-rank=\"" +
            std::to_string(hr.first) + "\"";
      if (band > 1) {
        h_ += " data-ranks=\"" + std::to_string(hr.first) + "-" + std::to_string(hr.last) + "\"";
      }
      h_ += ">";
      if (Labelled(i, rh, straggler_rows)) {
        h_ += "<text class=\"lbl\" x=\"" + Px(kLabelGutter - 8) + "\" y=\"" + Px(y + rh / 2 + 4) +
              "\" text-anchor=\"end\">" + (straggler_row ? "\xe2\x96\xb6 " : "") + who + "</text>";
      }
      for (size_t b = 0; b < bins; ++b) {
        std::string tip = who + " \xc2\xb7 " + at(b) + "\xe2\x80\x93" + at(b + 1) + " " + unit.suffix + " \xc2\xb7 ";
        if (hr.v[b]) {
          tip += (band > 1 ? "largest mean lateness " : "mean lateness ") + Dur(*hr.v[b]);
          if (band > 1) {
            tip += " (rank " + std::to_string(hr.worst_rank[b]) + ")";
          }
        } else {
          tip += "no instance in this bin";
        }
        if (hr.has_times_last && hr.times_last[b] > 0) {
          tip += " \xc2\xb7 last to arrive " + std::to_string(hr.times_last[b]) + "\xc3\x97";
        }
        h_ += "<rect class=\"cell" + std::string(hr.v[b] ? "" : " empty") + "\" data-rank=\"" +
              std::to_string(hr.first) + "\" data-bin=\"" + std::to_string(b) + "\"";
        if (hr.v[b]) {
          h_ += " data-v=\"" + SortKey(*hr.v[b]) + "\" fill=\"" + HeatColour(vmax > 0 ? *hr.v[b] / vmax : 0) + "\"";
        }
        h_ += " x=\"" + Px(kLabelGutter + cw * static_cast<double>(b)) + "\" y=\"" + Px(y) + "\" width=\"" +
              Px(std::max(0.5, cw - gap)) + "\" height=\"" + Px(std::max(1.0, rh - (rh >= 6 ? 1 : 0))) + "\"><title>" +
              tip + "</title></rect>";
      }
      if (labels && hr.has_times_last) {
        h_ += "<text class=\"val\" x=\"" + Px(kLabelGutter + pw + 8) + "\" y=\"" + Px(y + rh / 2 + 4) + "\">last " +
              std::to_string(hr.total_last) + "\xc3\x97</text>";
      }
      h_ += "</g>";
    }
    // Time axis: about 10 labels at bin edges.
    const size_t every = std::max<size_t>(1, (bins + 9) / 10);
    const double ay = top + rh * static_cast<double>(heat.size()) + 4;
    for (size_t b = 0; b <= bins; b += every) {
      const double x = kLabelGutter + cw * static_cast<double>(b);
      h_ += "<line class=\"grid\" x1=\"" + Px(x) + "\" x2=\"" + Px(x) + "\" y1=\"" + Px(ay - 2) + "\" y2=\"" +
            Px(ay + 3) + "\" stroke=\"#9aa1ab\"/><text class=\"axis\" x=\"" + Px(x) + "\" y=\"" + Px(ay + 15) +
            "\" text-anchor=\"middle\">" + at(b) + "</text>";
    }
    h_ += "<text class=\"axis\" x=\"" + Px(kLabelGutter + pw / 2) + "\" y=\"" + Px(ay + 30) +
          "\" text-anchor=\"middle\">time since the start of the first bin (" + unit.suffix + ")</text>";
    h_ += "</svg>";
    h_ += "<p class=\"note\">Rows are ranks, columns are " + Dur(bin_ns) +
          " bins of the run; a cell's colour is the rank's mean lateness over the matched instances that started "
          "in the bin (0 for the first to arrive). A persistent straggler is a dark row; a transient one, a dark "
          "patch.";
    if (!any_value) {
      h_ += " No bin has an instance.";
    }
    if (!labels) {
      h_ += " Hover a cell for its rank, time and value.";
    }
    h_ += "</p></div></section>\n";
  }

  // Per-rank temporal breakdown of the run and the overlap of communication with computation.
  void BreakdownChart() {
    h_ += "<section id=\"breakdown\"><h2>Where each rank's time went</h2>\n<div class=\"panel\">";
    std::vector<const RankRow*> rows;
    std::set<std::string> bases;
    for (const RankRow& rr : ranks_) {
      if (Get(*rr.j, "breakdown") || Num(*rr.j, "overlap")) {
        rows.push_back(&rr);
      }
      if (Get(*rr.j, "overlap_basis")) {
        bases.insert(Str(*rr.j, "overlap_basis"));
      }
    }
    if (rows.empty()) {
      h_ +=
          "<p class=\"empty\">No breakdown or overlap data in this report (they come with report "
          "schema_version 2).</p></div></section>\n";
      return;
    }
    double max = 0;
    for (const RankRow* rr : rows) {
      max = std::max(max, NumOr(Obj(*rr->j, "breakdown"), "span_ns", 0));
    }
    const double step = NiceStep(max, 6);
    const double axis_max = max > 0 ? std::ceil(max / step) * step : 1;
    const double rh = RowHeight(rows.size(), 24);
    const double bh = std::max(2.0, std::round(rh * 0.72));
    const double top = 30, pw = kChartWidth - kLabelGutter - kValueGutter;
    const double height = top + rh * static_cast<double>(rows.size()) + 26;
    const bool labels = rh >= 10;
    std::vector<int64_t> row_ranks;
    row_ranks.reserve(rows.size());
    for (const RankRow* rr : rows) {
      row_ranks.push_back(rr->rank);
    }
    const std::vector<size_t> straggler_rows = StragglerRows(row_ranks);
    h_ += "<svg class=\"chart\" id=\"chart-breakdown\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
          Px(kChartWidth) + " " + Px(height) + "\" width=\"" + Px(kChartWidth) + "\" height=\"" + Px(height) +
          "\" role=\"img\" aria-label=\"per-rank breakdown of the run and overlap\">";
    Legend(kLabelGutter, 16,
           {{"seg-compute", "compute"},
            {"seg-exposed", "exposed communication"},
            {"seg-memory", "memory operations"},
            {"seg-idle", "idle"}});
    for (double t = step; t <= axis_max * (1 + 1e-9); t += step) {
      const double x = kLabelGutter + pw * t / axis_max;
      h_ += "<line class=\"grid\" x1=\"" + Px(x) + "\" x2=\"" + Px(x) + "\" y1=\"" + Px(top - 4) + "\" y2=\"" +
            Px(height - 26) + "\"/>";
    }
    struct Part {
      const char* key;
      const char* cls;
      const char* name;
    };
    const Part parts[] = {{"compute_ns", "seg-compute", "compute"},
                          {"exposed_comm_ns", "seg-exposed", "exposed comm"},
                          {"memory_ns", "seg-memory", "memory"},
                          {"idle_ns", "seg-idle", "idle"}};
    for (size_t i = 0; i < rows.size(); ++i) {
      const RankRow& rr = *rows[i];
      const Json& bd = Obj(*rr.j, "breakdown");
      const double span = NumOr(bd, "span_ns", 0);
      const std::optional<double> overlap = Num(*rr.j, "overlap");
      const double y = top + rh * static_cast<double>(i) + (rh - bh) / 2;
      std::string tip = "rank " + std::to_string(rr.rank) + ": span " + Dur(span);
      for (const Part& p : parts) {
        if (Num(bd, p.key)) {
          tip += "; " + std::string(p.name) + " " + Dur(*Num(bd, p.key)) +
                 (span > 0 ? " (" + Pct(*Num(bd, p.key) / span) + ")" : "");
        }
      }
      tip += "; overlap " + (overlap ? Pct(*overlap) : std::string(kDash));
      const std::string basis = Str(*rr.j, "overlap_basis");
      if (!basis.empty()) {
        tip += " (" + HtmlEscape(basis) + ")";
      }
      h_ += "<g class=\"bar" + std::string(IsStraggler(rr.rank) ? " straggler" : "") + "\" data-rank=\"" +
            std::to_string(rr.rank) + "\"><title>" + tip + "</title>";
      if (Labelled(i, rh, straggler_rows)) {
        RankLabel(rr, y + bh / 2 + 4);
      }
      double x = kLabelGutter;
      for (const Part& p : parts) {
        const double v = std::max(0.0, NumOr(bd, p.key, 0));
        const double w = std::min(pw * v / axis_max, kLabelGutter + pw - x);
        if (w <= 0) {
          continue;
        }
        h_ += "<rect class=\"seg " + std::string(p.cls) + "\" data-v=\"" + SortKey(v) + "\" x=\"" + Px(x) + "\" y=\"" +
              Px(y) + "\" width=\"" + Px(w) + "\" height=\"" + Px(bh) + "\"/>";
        x += w;
      }
      if (labels) {
        h_ += "<text class=\"val\" x=\"" + Px(x + 6) + "\" y=\"" + Px(y + bh / 2 + 4) + "\">overlap " +
              (overlap ? Pct(*overlap) : std::string(kDash)) + "</text>";
      }
      h_ += "</g>";
    }
    TimeAxis(kLabelGutter, pw, height - 22, axis_max, step);
    h_ +=
        "</svg><p class=\"note\">Each bar is the rank's span split into compute, communication not hidden "
        "behind compute (exposed), memory operations and idle time; <i>overlap</i> is the share of its "
        "communication that ran while it computed.";
    if (!bases.empty()) {
      h_ += " Overlap basis: ";
      bool first = true;
      for (const std::string& b : bases) {
        h_ += (first ? "" : ", ") + std::string("<code>") + HtmlEscape(b) + "</code>";
        first = false;
      }
      h_ += ".";
    }
    h_ += "</p></div></section>\n";
  }

  // Table helpers: numeric cells carry data-v for the sort script.
  enum class CellFormat { kDur, kBytes, kPct, kCount, kGbps, kPpm };

  static std::string Formatted(double v, CellFormat f) {
    switch (f) {
      case CellFormat::kDur:
        return Dur(v);
      case CellFormat::kBytes:
        return Bytes(v);
      case CellFormat::kPct:
        return Pct(v);
      case CellFormat::kCount:
        return Count(v);
      case CellFormat::kGbps:
        return Fmt("%.2f", v);
      case CellFormat::kPpm:
        return Fmt("%.3f", v);
    }
    return kDash;
  }

  static std::string NumTd(std::optional<double> v, CellFormat f) {
    if (!v || !std::isfinite(*v)) {
      return "<td class=\"n na\" data-v=\"\">" + std::string(kDash) + "</td>";
    }
    return "<td class=\"n\" data-v=\"" + SortKey(*v) + "\">" + Formatted(*v, f) + "</td>";
  }

  static std::string TextTd(const std::string& s) {
    return s.empty() ? "<td class=\"na\">" + std::string(kDash) + "</td>" : "<td>" + HtmlEscape(s) + "</td>";
  }

  struct Column {
    const char* title;
    std::function<std::string(const Json&)> cell;
    bool numeric = true;
  };

  // A sortable table over `rows`; `row_class` may mark rows (the straggler).
  void Table(const char* id, const std::vector<Column>& cols, const std::vector<const Json*>& rows,
             const std::function<std::string(const Json&)>& row_class = nullptr) {
    h_ += std::string("<div class=\"tablewrap\"><table class=\"sortable\" id=\"") + id + "\"><thead><tr>";
    for (const Column& c : cols) {
      h_ += std::string("<th") + (c.numeric ? " class=\"n\"" : "") + ">" + c.title + "</th>";
    }
    h_ += "</tr></thead><tbody>";
    for (const Json* r : rows) {
      const std::string cls = row_class ? row_class(*r) : "";
      h_ += cls.empty() ? "<tr>" : "<tr class=\"" + cls + "\">";
      for (const Column& c : cols) {
        h_ += c.cell(*r);
      }
      h_ += "</tr>";
    }
    h_ += "</tbody></table></div>\n";
  }

  static Column NumCol(const char* title, const char* key, CellFormat f) {
    return {title, [key, f](const Json& j) { return NumTd(Num(j, key), f); }};
  }

  static Column NestedNumCol(const char* title, const char* obj, const char* key, CellFormat f) {
    return {title, [obj, key, f](const Json& j) { return NumTd(Num(Obj(j, obj), key), f); }};
  }

  // Keeps only the columns for which some row has a value (an older report lacks the newer keys).
  static std::vector<Column> Present(std::vector<std::pair<Column, std::function<bool(const Json&)>>> cols,
                                     const std::vector<const Json*>& rows) {
    std::vector<Column> out;
    for (auto& entry : cols) {
      const std::function<bool(const Json&)>& has = entry.second;
      if (!has || std::any_of(rows.begin(), rows.end(), [&has](const Json* r) { return has(*r); })) {
        out.push_back(std::move(entry.first));
      }
    }
    return out;
  }

  static std::function<bool(const Json&)> Has(const char* key) {
    return [key](const Json& j) { return Get(j, key) != nullptr; };
  }
  static std::function<bool(const Json&)> HasIn(const char* obj, const char* key) {
    return [obj, key](const Json& j) { return Get(Obj(j, obj), key) != nullptr; };
  }

  static std::vector<const Json*> Rows(const Json& arr) {
    std::vector<const Json*> v;
    for (const Json& e : arr) {
      v.push_back(&e);
    }
    return v;
  }

  void CollectivesTable() {
    h_ += "<section id=\"collectives\"><h2>Collectives by type</h2>\n";
    const std::vector<const Json*> rows = Rows(Arr(r_, "collectives"));
    if (rows.empty()) {
      h_ += "<p class=\"empty\">No matched collectives in this report.</p></section>\n";
      return;
    }
    Table("tbl-collectives",
          Present({{{"type", [](const Json& j) { return TextTd(Str(j, "type")); }, false}, nullptr},
                   {NumCol("count", "count", CellFormat::kCount), nullptr},
                   {NumCol("bytes (mean)", "bytes", CellFormat::kBytes), nullptr},
                   {NumCol("mean duration", "mean_duration_ns", CellFormat::kDur), nullptr},
                   {NumCol("mean wait", "mean_wait_ns", CellFormat::kDur), nullptr},
                   {NumCol("mean transfer", "mean_transfer_ns", CellFormat::kDur), Has("mean_transfer_ns")},
                   {NumCol("skew p50", "skew_p50_ns", CellFormat::kDur), nullptr},
                   {NumCol("skew p99", "skew_p99_ns", CellFormat::kDur), nullptr},
                   {NumCol("algbw (GB/s)", "algbw_gbps", CellFormat::kGbps), Has("algbw_gbps")},
                   {NumCol("busbw (GB/s)", "busbw_gbps", CellFormat::kGbps), Has("busbw_gbps")}},
                  rows),
          rows);
    h_ +=
        "<p class=\"note\">Duration and wait are means over ranks and instances; skew is the spread of "
        "arrivals within an instance (nearest-rank percentiles); bus bandwidth applies the nccl-tests "
        "factor of each collective.</p></section>\n";
  }

  void RanksTable() {
    h_ += "<section id=\"ranks\"><h2>Ranks</h2>\n";
    std::vector<const Json*> rows;
    for (const RankRow& rr : ranks_) {
      rows.push_back(rr.j);
    }
    if (rows.empty()) {
      h_ += "<p class=\"empty\">No ranks in this report.</p></section>\n";
      return;
    }
    Table("tbl-ranks",
          Present({{NumCol("rank", "rank", CellFormat::kCount), nullptr},
                   {{"host", [](const Json& j) { return TextTd(Str(j, "host")); }, false}, Has("host")},
                   {NumCol("pid", "pid", CellFormat::kCount), Has("pid")},
                   {NumCol("instances", "instances", CellFormat::kCount), Has("instances")},
                   {NumCol("comm", "comm_time_ns", CellFormat::kDur), nullptr},
                   {NumCol("wait", "wait_time_ns", CellFormat::kDur), nullptr},
                   {NumCol("wait %", "wait_share", CellFormat::kPct), nullptr},
                   {NumCol("times last", "times_last", CellFormat::kCount), nullptr},
                   {NumCol("delay caused", "delay_caused_ns", CellFormat::kDur), nullptr},
                   {NumCol("wait imposed", "wait_imposed_ns", CellFormat::kDur), nullptr},
                   {NumCol("transfer", "transfer_time_ns", CellFormat::kDur), Has("transfer_time_ns")},
                   {NumCol("overlap", "overlap", CellFormat::kPct), Has("overlap")},
                   {NumCol("exposed comm", "exposed_comm_ns", CellFormat::kDur), Has("exposed_comm_ns")},
                   {{"p2p sent/recv",
                     [](const Json& j) {
                       const Json& p = Obj(j, "p2p");
                       const std::optional<double> sent = Num(p, "sent"), recv = Num(p, "received");
                       if (!sent && !recv) {
                         return NumTd(std::nullopt, CellFormat::kCount);
                       }
                       return "<td class=\"n\" data-v=\"" + SortKey(sent.value_or(0) + recv.value_or(0)) + "\">" +
                              (sent ? Count(*sent) : kDash) + " / " + (recv ? Count(*recv) : kDash) + "</td>";
                     }},
                    [](const Json& j) { return Get(Obj(j, "p2p"), "sent") || Get(Obj(j, "p2p"), "received"); }},
                   {NestedNumCol("late sender", "p2p", "late_sender_wait_ns", CellFormat::kDur),
                    HasIn("p2p", "late_sender_wait_ns")},
                   {NestedNumCol("late receiver", "p2p", "late_receiver_wait_ns", CellFormat::kDur),
                    HasIn("p2p", "late_receiver_wait_ns")}},
                  rows),
          rows, [this](const Json& j) { return IsStraggler(Int(j, "rank").value_or(-1)) ? "straggler" : ""; });
    h_ += "</section>\n";
  }

  void WorstInstancesTable() {
    const Json* list = Get(r_, "worst_instances");
    if (list == nullptr) {
      return;  // not in a schema_version 1 report: no section
    }
    h_ += "<section id=\"worst\"><h2>Worst instances (by total wait)</h2>\n";
    const std::vector<const Json*> rows = Rows(*list);
    if (rows.empty()) {
      h_ += "<p class=\"empty\">No instances.</p></section>\n";
      return;
    }
    const std::optional<double> start = Num(Obj(r_, "lateness"), "start_ns");
    Table("tbl-worst",
          {NumCol("comm", "comm_id", CellFormat::kCount),
           NumCol("seq", "seq", CellFormat::kCount),
           {"type", [](const Json& j) { return TextTd(Str(j, "type")); }, false},
           NumCol("bytes", "bytes", CellFormat::kBytes),
           // Relative to the heat map's start when there is one, so the two can be read together.
           {start ? "start (since run start)" : "start",
            [start](const Json& j) {
              std::optional<double> s = Num(j, "start_ns");
              if (s && start) {
                *s -= *start;
              }
              return NumTd(s, CellFormat::kDur);
            }},
           NumCol("skew", "skew_ns", CellFormat::kDur),
           NumCol("last rank", "last_rank", CellFormat::kCount),
           NumCol("delay caused", "delay_caused_ns", CellFormat::kDur),
           NumCol("total wait", "total_wait_ns", CellFormat::kDur)},
          rows);
    h_ += "</section>\n";
  }

  void IncompleteTable() {
    const std::vector<const Json*> rows = Rows(Arr(Obj(r_, "instances"), "incomplete_list"));
    if (rows.empty()) {
      return;
    }
    h_ += "<section id=\"incomplete\"><h2>Incomplete instances</h2>\n";
    Table("tbl-incomplete",
          {NumCol("comm", "comm_id", CellFormat::kCount),
           NumCol("seq", "seq", CellFormat::kCount),
           {"type", [](const Json& j) { return TextTd(Str(j, "type")); }, false},
           {"ranks present",
            [](const Json& j) {
              std::string s;
              for (const Json& v : Arr(j, "ranks_present")) {
                s += (s.empty() ? "" : " ") + v.dump();
              }
              return TextTd(s);
            },
            false}},
          rows);
    h_ += "<p class=\"note\">Seen on some ranks of their communicator only; counted, not measured.</p></section>\n";
  }

  void P2pSummary() {
    const Json* p = Get(r_, "p2p");
    if (p == nullptr) {
      return;
    }
    h_ += "<section id=\"p2p\"><h2>Point-to-point</h2>\n<div class=\"cards\">";
    Card("matched messages", Num(*p, "matched") ? Count(*Num(*p, "matched")) : kDash, "", false);
    const double us = NumOr(*p, "unmatched_sends", 0), ur = NumOr(*p, "unmatched_recvs", 0);
    Card("unmatched", Count(us + ur), Count(us) + " send(s), " + Count(ur) + " receive(s)", us + ur > 0);
    Card("late sender wait", Num(*p, "late_sender_wait_ns") ? Dur(*Num(*p, "late_sender_wait_ns")) : kDash,
         "receivers blocked before the send was posted", false);
    Card("late receiver wait", Num(*p, "late_receiver_wait_ns") ? Dur(*Num(*p, "late_receiver_wait_ns")) : kDash,
         "senders blocked before the receive was posted", false);
    h_ += "</div></section>\n";
  }

  void ClockTable() {
    const Json* c = Get(r_, "clock");
    if (c == nullptr) {
      return;
    }
    h_ += "<section id=\"clock\"><h2>Clock alignment</h2>\n";
    h_ += "<p class=\"note\">" + Count(NumOr(*c, "violations", 0)) + " clock-condition violation(s) after alignment";
    if (Num(*c, "instances_checked")) {
      h_ += " in " + Count(*Num(*c, "instances_checked")) + " instances checked";
    }
    h_ +=
        ". Each rank's clock is mapped onto rank 0's: reference &asymp; local + offset, with the drift; "
        "the error bound is the uncertainty of that mapping.</p>\n";
    const std::vector<const Json*> rows = Rows(Arr(*c, "ranks"));
    if (rows.empty()) {
      h_ += "</section>\n";
      return;
    }
    Table("tbl-clock",
          {NumCol("rank", "rank", CellFormat::kCount),
           {"method", [](const Json& j) { return TextTd(Str(j, "clock_method")); }, false},
           NumCol("offset", "clock_offset_ns", CellFormat::kDur),
           NumCol("drift (ppm)", "clock_drift_ppm", CellFormat::kPpm),
           {"error bound",
            [](const Json& j) {
              const std::optional<double> b = Num(j, "clock_error_bound_ns");
              if (b && *b < 0) {
                return std::string("<td class=\"n na\" data-v=\"\">unmeasured</td>");
              }
              return NumTd(b, CellFormat::kDur);
            }}},
          rows);
    h_ += "</section>\n";
  }

  const Json& r_;
  std::string h_;
  std::set<int64_t> stragglers_;
  std::vector<RankRow> ranks_;
};

}  // namespace

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') {
          out += "\xef\xbf\xbd";
        } else {
          out += c;
        }
    }
  }
  return out;
}

Status WriteHtmlReport(const nlohmann::ordered_json& report, std::ostream& out) {
  std::string page;
  try {
    COMMPROF_RETURN_IF_ERROR(Validate(report));
    page = Page(report).Render();
  } catch (const std::exception& e) {  // nlohmann or allocation: turned into a Status at the edge
    return Internal(std::string("html report: ") + e.what());
  }
  out.write(page.data(), static_cast<std::streamsize>(page.size()));
  out.flush();
  if (!out) {
    return IoError("html report: write failed");
  }
  return Status::Ok();
}

}  // namespace commprof
