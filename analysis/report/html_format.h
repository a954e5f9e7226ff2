// Formatting shared by the parts of the HTML report: values as the page prints them (durations,
// bytes, shares, counts), sort keys, SVG coordinates and axis steps, and the heat-map colours.
#pragma once

#include <cmath>
#include <optional>
#include <string>

namespace commprof::html {

// "–": no value.
inline constexpr const char* kDash = "\xe2\x80\x93";

__attribute__((format(printf, 1, 2))) std::string Fmt(const char* fmt, ...);

// A model value as the page reads it: absent or not finite is no value.
template <class T>
std::optional<double> Num(const std::optional<T>& v) {
  if (!v) {
    return std::nullopt;
  }
  const double d = static_cast<double>(*v);
  return std::isfinite(d) ? std::optional<double>(d) : std::nullopt;
}
template <class T>
double NumOr(const std::optional<T>& v, double fallback) {
  return Num(v).value_or(fallback);
}

std::string Dur(double ns);   // a duration in the unit that keeps 3-4 significant digits
std::string Bytes(double b);  // B, KiB, MiB, GiB, TiB
std::string Pct(double share);
std::string Count(double n);
std::string SortKey(double v);  // data-v: round-trips a double without locale surprises
std::string Px(double v);       // SVG coordinates: two decimals are well below a pixel

// A round step for about `target` ticks over [0, max] (1, 2 or 5 times a power of ten).
double NiceStep(double max, int target);
// The smallest number of decimals (0-6) that shows multiples of `step` exactly.
int DecimalsFor(double step);

struct TimeUnit {
  double div;
  const char* suffix;
};
// One unit for a whole time axis, chosen by its span.
TimeUnit AxisUnit(double span_ns);

// ColorBrewer YlOrRd (9 classes), interpolated over t in [0, 1].
inline constexpr unsigned kHeatStops[] = {0xffffcc, 0xffeda0, 0xfed976, 0xfeb24c, 0xfd8d3c,
                                          0xfc4e2a, 0xe31a1c, 0xbd0026, 0x800026};
inline constexpr int kHeatStopCount = sizeof kHeatStops / sizeof kHeatStops[0];
std::string HeatColour(double t);

}  // namespace commprof::html
