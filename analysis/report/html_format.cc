#include "analysis/report/html_format.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string_view>

#include "analysis/report/html_report.h"

namespace commprof {
namespace html {

__attribute__((format(printf, 1, 2))) std::string Fmt(const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

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

// Light yellow = no lateness, dark red = the most.
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

}  // namespace html

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

}  // namespace commprof
