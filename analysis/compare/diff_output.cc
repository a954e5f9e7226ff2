#include "analysis/compare/diff_output.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace commprof {
namespace {

std::string Printf(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// A change with its sign: "+24.0 ms", "-3 calls".
std::string Signed(double v, const std::string& unit) {
  return (v > 0 ? "+" : v < 0 ? "-" : "") + FormatDiffValue(std::fabs(v), unit);
}

std::string Percent(const std::optional<double>& f) {
  if (!f) {
    return "n/a";
  }
  // Past 5 digits the exact figure says no more than "enormous" and would break the columns.
  if (std::fabs(*f) >= 1000) {
    return *f > 0 ? ">+99999%" : "<-99999%";
  }
  return Printf("%+.1f%%", *f * 100.0);
}

// `s` cut to `w` columns, a cut marked with '~' at its end (row names can be long).
std::string Fit(const std::string& s, size_t w) { return s.size() <= w ? s : s.substr(0, w - 1) + "~"; }

nlohmann::ordered_json Optional(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

const char* WorseName(Worse w) {
  switch (w) {
    case Worse::kHigher:
      return "higher";
    case Worse::kLower:
      return "lower";
    case Worse::kNeither:
      break;
  }
  return "neither";
}

}  // namespace

std::string FormatDiffValue(double v, const std::string& unit) {
  if (unit == "ns") {
    const double a = std::fabs(v);
    if (a >= 1e9) {
      return Printf("%.3g s", v / 1e9);
    }
    if (a >= 1e6) {
      return Printf("%.3g ms", v / 1e6);
    }
    if (a >= 1e3) {
      return Printf("%.3g us", v / 1e3);
    }
    return Printf("%.0f ns", v);
  }
  if (unit == "calls") {
    return Printf("%.0f", v);
  }
  if (unit == "GB/s") {
    // Small messages have bandwidths of KB/s: "1.68e-05 GB/s" would not fit its 12 columns.
    const double a = std::fabs(v);
    if (a > 0 && a < 1e-3) {
      return a >= 1e-6 ? Printf("%.3g KB/s", v * 1e6) : Printf("%.3g B/s", v * 1e9);
    }
    if (a > 0 && a < 1) {
      return Printf("%.3g MB/s", v * 1e3);
    }
  }
  return Printf("%.3g ", v) + unit;
}

std::string FormatRegression(const DiffRow& r) {
  std::string s = r.group + " " + r.row + " " + r.metric + ": ";
  s += r.base ? FormatDiffValue(*r.base, r.unit) : "-";
  s += " -> ";
  s += r.next ? FormatDiffValue(*r.next, r.unit) : "-";
  s += " (" + Signed(r.change, r.unit) + ", " + Percent(r.relative);
  if (r.limit) {
    // The limit in the direction that is worse: +10% for a time, -10% for a bandwidth.
    s += Printf(r.worse == Worse::kLower ? "; max -%.1f%%" : "; max +%.1f%%", *r.limit * 100.0);
  }
  return s + ")";
}

void WriteDiffText(const RunDiff& d, size_t top, std::ostream& os) {
  os << "base: " << d.base_path << "\n";
  os << "new:  " << d.next_path << "\n";
  size_t counts[8] = {};
  for (const DiffRow& r : d.rows) {
    ++counts[static_cast<size_t>(r.status)];
  }
  os << "rows: " << d.rows.size() << " compared; " << counts[static_cast<size_t>(DiffStatus::kRegressed)]
     << " regressed, " << counts[static_cast<size_t>(DiffStatus::kWorse)] << " worse, "
     << counts[static_cast<size_t>(DiffStatus::kBetter)] << " better, "
     << counts[static_cast<size_t>(DiffStatus::kNoise)] << " within noise, "
     << counts[static_cast<size_t>(DiffStatus::kAdded)] << " added, "
     << counts[static_cast<size_t>(DiffStatus::kRemoved)] << " removed\n";
  os << "noise guard: noise when the new median is in the base's [p10, p90] +- "
     << FormatDiffValue(d.noise_floor_ns, "ns") << " (floor) and,\n"
     << "  for a type, the mean of its middle half moved by at most p90 - p10 + the floor\n"
     << "  repetitions: " << (d.steps_compared ? "steps (both runs have steps)" : "calls")
     << "; one step: the base's range of steps\n";
  if (d.regressions > 0) {
    os << "\nregressions:\n";
    for (const DiffRow& r : d.rows) {
      if (r.status == DiffStatus::kRegressed) {
        os << "  " << Fit(FormatRegression(r), 98) << "\n";
      }
    }
  }
  char line[160];
  std::snprintf(line, sizeof line, "\n%-9s %-5s %-16s %-14s %12s %12s %13s %10s\n", "status", "group", "row", "metric",
                "base", "new", "change", "relative");
  os << line;
  size_t shown = 0;
  for (const DiffRow& r : d.rows) {
    if (top > 0 && shown == top) {
      os << "(" << d.rows.size() - shown << " more rows: --top 0 shows all, --format json has every row)\n";
      break;
    }
    ++shown;
    // A name row's category is in its group's JSON and regression lines; the 16 columns go to the
    // name itself, where the rows differ.
    const size_t slash = r.group == "name" ? r.row.find('/') : std::string::npos;
    const std::string row = slash == std::string::npos ? r.row : r.row.substr(slash + 1);
    std::snprintf(line, sizeof line, "%-9s %-5s %-16s %-14s %12s %12s %13s %10s\n", DiffStatusName(r.status),
                  r.group.c_str(), Fit(row, 16).c_str(), r.metric.c_str(),
                  Fit(r.base ? FormatDiffValue(*r.base, r.unit) : "-", 12).c_str(),
                  Fit(r.next ? FormatDiffValue(*r.next, r.unit) : "-", 12).c_str(),
                  Fit(r.base && r.next ? Signed(r.change, r.unit) : "-", 13).c_str(), Percent(r.relative).c_str());
    os << line;
  }
}

nlohmann::ordered_json DiffToJson(const RunDiff& d, const RegressionGate& gate) {
  nlohmann::ordered_json j;
  j["schema"] = kDiffSchemaName;
  j["schema_version"] = kDiffSchemaVersion;
  j["base"] = d.base_path;
  j["new"] = d.next_path;
  j["steps_compared"] = d.steps_compared;
  nlohmann::ordered_json limits = nlohmann::ordered_json::object();
  for (const auto& [metric, limit] : gate.per_metric) {
    limits[metric] = limit;
  }
  j["gate"] = {{"all", Optional(gate.all)}, {"per_metric", limits}};
  j["noise_rule"] = {
      {"min_repetitions", kMinRepetitions}, {"low", "p10"}, {"high", "p90"}, {"floor_ns", d.noise_floor_ns}};
  j["regressions"] = d.regressions;
  auto& rows = j["rows"] = nlohmann::ordered_json::array();
  for (const DiffRow& r : d.rows) {
    nlohmann::ordered_json o;
    o["group"] = r.group;
    o["row"] = r.row;
    o["metric"] = r.metric;
    o["unit"] = r.unit;
    o["worse"] = WorseName(r.worse);
    o["status"] = DiffStatusName(r.status);
    o["base"] = Optional(r.base);
    o["new"] = Optional(r.next);
    o["change"] = r.base && r.next ? nlohmann::ordered_json(r.change) : nlohmann::ordered_json(nullptr);
    o["relative_change"] = Optional(r.relative);
    o["limit"] = Optional(r.limit);
    nlohmann::ordered_json g;
    g["basis"] = GuardBasisName(r.basis);
    if (r.basis != GuardBasis::kNone) {
      g["base_n"] = r.base_reps.n;
      g["base_p10"] = r.base_reps.p10;
      g["base_p90"] = r.base_reps.p90;
      g["base_min"] = r.base_reps.min;
      g["base_max"] = r.base_reps.max;
      g["new_n"] = r.next_reps.n;
      g["new_p50"] = r.next_reps.p50;
      // null where not used (the rows other than `type`): those are judged on their median alone.
      const bool mid = !std::isnan(r.next_reps.mid_mean) && !std::isnan(r.base_reps.mid_mean);
      g["base_mid_mean"] = mid ? nlohmann::ordered_json(r.base_reps.mid_mean) : nlohmann::ordered_json(nullptr);
      g["new_mid_mean"] = mid ? nlohmann::ordered_json(r.next_reps.mid_mean) : nlohmann::ordered_json(nullptr);
    }
    o["noise_guard"] = std::move(g);
    rows.push_back(std::move(o));
  }
  return j;
}

}  // namespace commprof
