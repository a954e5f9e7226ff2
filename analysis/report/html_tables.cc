// The HTML report's tables (html_page.h): sortable by the page's script, numeric cells carrying
// their raw value in data-v, absent values shown as "–", and columns no row has a value for left
// out (an older report lacks the newer keys).
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/metrics/comm_label.h"
#include "analysis/report/html_format.h"
#include "analysis/report/html_page.h"
#include "analysis/report/html_report.h"

namespace commprof::html {
namespace {

enum class CellFormat { kDur, kBytes, kPct, kCount, kGbps, kPpm };

std::string Formatted(double v, CellFormat f) {
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

std::string NumTd(std::optional<double> v, CellFormat f) {
  if (!v || !std::isfinite(*v)) {
    return "<td class=\"n na\" data-v=\"\">" + std::string(kDash) + "</td>";
  }
  return "<td class=\"n\" data-v=\"" + SortKey(*v) + "\">" + Formatted(*v, f) + "</td>";
}

std::string TextTd(const std::string& s) {
  return s.empty() ? "<td class=\"na\">" + std::string(kDash) + "</td>" : "<td>" + HtmlEscape(s) + "</td>";
}

template <class Row>
struct Column {
  const char* title;
  std::function<std::string(const Row&)> cell;
  bool numeric = true;
  std::function<bool(const Row&)> has;  // shown when some row has a value; empty: always shown
};

template <class Row, class T>
Column<Row> NumCol(const char* title, Opt<T> Row::*value, CellFormat f, bool optional = false) {
  Column<Row> c{title, [value, f](const Row& r) { return NumTd(Num(r.*value), f); }};
  if (optional) {
    c.has = [value](const Row& r) { return (r.*value).has_value(); };
  }
  return c;
}

// A communicator id as every output prints it (CommIdText: hexadecimal, exact for 64 bits), sorted
// by its value.
template <class Row>
Column<Row> CommCol(const char* title, Opt<uint64_t> Row::*value) {
  return {title, [value](const Row& r) {
            if (!(r.*value)) {
              return NumTd(std::nullopt, CellFormat::kCount);
            }
            return "<td class=\"n\" data-v=\"" + std::to_string(*(r.*value)) + "\">" + CommIdText(*(r.*value)) +
                   "</td>";
          }};
}

template <class Row>
Column<Row> TextCol(const char* title, Opt<std::string> Row::*value, bool optional = false) {
  Column<Row> c{title, [value](const Row& r) { return TextTd((r.*value).value_or("")); }, false};
  if (optional) {
    c.has = [value](const Row& r) { return (r.*value).has_value(); };
  }
  return c;
}

// A sortable table over `rows`; `row_class` may mark rows (the straggler).
template <class Row>
void Table(std::string& h, const char* id, const std::vector<Column<Row>>& all, const std::vector<const Row*>& rows,
           const std::function<std::string(const Row&)>& row_class = nullptr) {
  std::vector<const Column<Row>*> cols;
  for (const Column<Row>& c : all) {
    if (!c.has || std::any_of(rows.begin(), rows.end(), [&c](const Row* r) { return c.has(*r); })) {
      cols.push_back(&c);
    }
  }
  h += std::string("<div class=\"tablewrap\"><table class=\"sortable\" id=\"") + id + "\"><thead><tr>";
  for (const Column<Row>* c : cols) {
    h += std::string("<th") + (c->numeric ? " class=\"n\"" : "") + ">" + c->title + "</th>";
  }
  h += "</tr></thead><tbody>";
  for (const Row* r : rows) {
    const std::string cls = row_class ? row_class(*r) : "";
    h += cls.empty() ? "<tr>" : "<tr class=\"" + cls + "\">";
    for (const Column<Row>* c : cols) {
      h += c->cell(*r);
    }
    h += "</tr>";
  }
  h += "</tbody></table></div>\n";
}

template <class Row>
std::vector<const Row*> Rows(const std::vector<Row>& list) {
  std::vector<const Row*> v;
  v.reserve(list.size());
  for (const Row& e : list) {
    v.push_back(&e);
  }
  return v;
}

}  // namespace

void CollectivesTable(Page& p) {
  using C = ReportModel::Collective;
  p.out += "<section id=\"collectives\"><h2>Collectives by type</h2>\n";
  const std::vector<const C*> rows = Rows(List(p.r.collectives));
  if (rows.empty()) {
    p.out += "<p class=\"empty\">No matched collectives in this report.</p></section>\n";
    return;
  }
  Table<C>(
      p.out, "tbl-collectives",
      {TextCol("type", &C::type), NumCol("count", &C::count, CellFormat::kCount),
       NumCol("bytes (mean)", &C::bytes, CellFormat::kBytes),
       NumCol("mean duration", &C::mean_duration_ns, CellFormat::kDur),
       NumCol("mean wait", &C::mean_wait_ns, CellFormat::kDur),
       NumCol("mean transfer", &C::mean_transfer_ns, CellFormat::kDur, true),
       NumCol("skew p50", &C::skew_p50_ns, CellFormat::kDur), NumCol("skew p99", &C::skew_p99_ns, CellFormat::kDur),
       NumCol("algbw (GB/s)", &C::algbw_gbps, CellFormat::kGbps, true),
       NumCol("busbw (GB/s)", &C::busbw_gbps, CellFormat::kGbps, true)},
      rows);
  p.out +=
      "<p class=\"note\">Duration and wait are means over ranks and instances; skew is the spread of "
      "arrivals within an instance (nearest-rank percentiles); bus bandwidth applies the nccl-tests "
      "factor of each collective.</p></section>\n";
}

void RanksTable(Page& p) {
  using R = ReportModel::Rank;
  using P2p = ReportModel::RankP2p;
  p.out += "<section id=\"ranks\"><h2>Ranks</h2>\n";
  if (p.ranks.empty()) {
    p.out += "<p class=\"empty\">No ranks in this report.</p></section>\n";
    return;
  }
  auto p2p_col = [](const char* title, Opt<int64_t> P2p::*value) {
    return Column<R>{
        title, [value](const R& r) { return NumTd(r.p2p ? Num((*r.p2p).*value) : std::nullopt, CellFormat::kDur); },
        true, [value](const R& r) { return r.p2p && ((*r.p2p).*value).has_value(); }};
  };
  Column<R> sent_received{"p2p sent/recv",
                          [](const R& r) {
                            const std::optional<double> sent = r.p2p ? Num(r.p2p->sent) : std::nullopt;
                            const std::optional<double> recv = r.p2p ? Num(r.p2p->received) : std::nullopt;
                            if (!sent && !recv) {
                              return NumTd(std::nullopt, CellFormat::kCount);
                            }
                            return "<td class=\"n\" data-v=\"" + SortKey(sent.value_or(0) + recv.value_or(0)) + "\">" +
                                   (sent ? Count(*sent) : kDash) + " / " + (recv ? Count(*recv) : kDash) + "</td>";
                          },
                          true, [](const R& r) { return r.p2p && (r.p2p->sent || r.p2p->received); }};
  Table<R>(
      p.out, "tbl-ranks",
      {NumCol("rank", &R::rank, CellFormat::kCount), TextCol("host", &R::host, true),
       NumCol("pid", &R::pid, CellFormat::kCount, true), NumCol("instances", &R::instances, CellFormat::kCount, true),
       NumCol("comm", &R::comm_time_ns, CellFormat::kDur), NumCol("wait", &R::wait_time_ns, CellFormat::kDur),
       NumCol("wait %", &R::wait_share, CellFormat::kPct), NumCol("times last", &R::times_last, CellFormat::kCount),
       NumCol("delay caused", &R::delay_caused_ns, CellFormat::kDur),
       NumCol("wait imposed", &R::wait_imposed_ns, CellFormat::kDur),
       NumCol("transfer", &R::transfer_time_ns, CellFormat::kDur, true),
       NumCol("overlap", &R::overlap, CellFormat::kPct, true),
       NumCol("exposed comm", &R::exposed_comm_ns, CellFormat::kDur, true), sent_received,
       p2p_col("late sender", &P2p::late_sender_wait_ns), p2p_col("late receiver", &P2p::late_receiver_wait_ns)},
      p.ranks, [&p](const R& r) { return p.IsStraggler(r.rank.value_or(-1)) ? "straggler" : ""; });
  p.out += "</section>\n";
}

void WorstInstancesTable(Page& p) {
  using W = ReportModel::WorstInstance;
  if (!p.r.worst_instances) {
    return;  // not in a schema_version 1 report: no section
  }
  p.out += "<section id=\"worst\"><h2>Worst instances (by total wait)</h2>\n";
  const std::vector<const W*> rows = Rows(*p.r.worst_instances);
  if (rows.empty()) {
    p.out += "<p class=\"empty\">No instances.</p></section>\n";
    return;
  }
  const std::optional<double> start = p.r.lateness ? Num(p.r.lateness->start_ns) : std::nullopt;
  // Relative to the heat map's start when there is one, so the two can be read together.
  Column<W> start_col{start ? "start (since run start)" : "start", [start](const W& w) {
                        std::optional<double> s = Num(w.start_ns);
                        if (s && start) {
                          *s -= *start;
                        }
                        return NumTd(s, CellFormat::kDur);
                      }};
  Table<W>(p.out, "tbl-worst",
           {CommCol("comm", &W::comm_id), NumCol("seq", &W::seq, CellFormat::kCount), TextCol("type", &W::type),
            NumCol("bytes", &W::bytes, CellFormat::kBytes), start_col, NumCol("skew", &W::skew_ns, CellFormat::kDur),
            NumCol("last rank", &W::last_rank, CellFormat::kCount),
            NumCol("delay caused", &W::delay_caused_ns, CellFormat::kDur),
            NumCol("total wait", &W::total_wait_ns, CellFormat::kDur)},
           rows);
  p.out += "</section>\n";
}

void IncompleteTable(Page& p) {
  using I = ReportModel::Incomplete;
  static const ReportModel::Instances kNone;
  const ReportModel::Instances& instances = p.r.instances ? *p.r.instances : kNone;
  const std::vector<const I*> rows = Rows(List(instances.incomplete_list));
  if (rows.empty()) {
    return;
  }
  p.out += "<section id=\"incomplete\"><h2>Incomplete instances</h2>\n";
  Column<I> present{"ranks present",
                    [](const I& in) {
                      std::string s;
                      for (int64_t r : List(in.ranks_present)) {
                        s += (s.empty() ? "" : " ") + std::to_string(r);
                      }
                      return TextTd(s);
                    },
                    false};
  Table<I>(
      p.out, "tbl-incomplete",
      {CommCol("comm", &I::comm_id), NumCol("seq", &I::seq, CellFormat::kCount), TextCol("type", &I::type), present},
      rows);
  p.out += "<p class=\"note\">Seen on some ranks of their communicator only; counted, not measured.</p></section>\n";
}

void CommunicatorsTable(Page& p) {
  using M = ReportModel::Communicator;
  const std::vector<const M*> rows = Rows(List(p.r.communicators));
  if (rows.empty()) {
    return;
  }
  p.out += "<section id=\"communicators\"><h2>Communicators</h2>\n";
  Column<M> seen{"in this file",
                 [](const M& c) { return NumTd(static_cast<double>(List(c.members).size()), CellFormat::kCount); }};
  Column<M> members{"member ranks", [](const M& c) { return TextTd(MemberRanks(List(c.members))); }, false};
  Table<M>(p.out, "tbl-communicators",
           {CommCol("comm", &M::comm_id), TextCol("name", &M::name), NumCol("ranks", &M::size, CellFormat::kCount),
            seen, members},
           rows);
  p.out +=
      "<p class=\"note\">The communicators named in the tables above and in the verdict; members are world "
      "ranks.</p></section>\n";
}

void ClockTable(Page& p) {
  using K = ReportModel::ClockRank;
  if (!p.r.clock) {
    return;
  }
  const ReportModel::Clock& c = *p.r.clock;
  p.out += "<section id=\"clock\"><h2>Clock alignment</h2>\n";
  p.out += "<p class=\"note\">" + Count(NumOr(c.violations, 0)) + " clock-condition violation(s) after alignment";
  if (Num(c.instances_checked)) {
    p.out += " in " + Count(*Num(c.instances_checked)) + " instances checked";
  }
  p.out +=
      ". Each rank's clock is mapped onto rank 0's: reference &asymp; local + offset, with the drift; "
      "the error bound is the uncertainty of that mapping.</p>\n";
  const std::vector<const K*> rows = Rows(List(c.ranks));
  if (rows.empty()) {
    p.out += "</section>\n";
    return;
  }
  Column<K> bound{"error bound", [](const K& k) {
                    const std::optional<double> b = Num(k.clock_error_bound_ns);
                    if (b && *b < 0) {
                      return std::string("<td class=\"n na\" data-v=\"\">unmeasured</td>");
                    }
                    return NumTd(b, CellFormat::kDur);
                  }};
  Table<K>(p.out, "tbl-clock",
           {NumCol("rank", &K::rank, CellFormat::kCount), TextCol("method", &K::clock_method),
            NumCol("offset", &K::clock_offset_ns, CellFormat::kDur),
            NumCol("drift (ppm)", &K::clock_drift_ppm, CellFormat::kPpm), bound},
           rows);
  p.out += "</section>\n";
}

// The top call sites by wait (`commprof run --stacks`, docs/metrics.md §11); the JSON has them all.
void CallSitesTable(Page& p) {
  using S = ReportModel::CallSite;
  constexpr size_t kTop = 20;
  const auto& all = List(p.r.call_sites);
  if (all.empty()) {
    return;
  }
  std::vector<const S*> rows = Rows(all);
  rows.resize(std::min(rows.size(), kTop));
  p.out += "<section id=\"call-sites\"><h2>Call sites (top " + std::to_string(rows.size()) + " of " +
           std::to_string(all.size()) + " by wait)</h2>\n";
  Column<S> where{"call site",
                  [](const S& c) {
                    std::string s = c.function.value_or("??");
                    if (!c.file.value_or("").empty()) {
                      s += " (" + *c.file + ":" + std::to_string(c.line.value_or(0)) + ")";
                    }
                    return TextTd(s);
                  },
                  false};
  Table<S>(p.out, "tbl-call-sites",
           {where, TextCol("operation", &S::op), NumCol("calls", &S::calls, CellFormat::kCount),
            NumCol("time", &S::time_ns, CellFormat::kDur), NumCol("wait", &S::wait_ns, CellFormat::kDur),
            NumCol("bytes", &S::bytes, CellFormat::kBytes), NumCol("ranks", &S::ranks, CellFormat::kCount)},
           rows);
  p.out +=
      "<p class=\"note\">Per source location of the call (the innermost frame outside commprof, MPI and NCCL) "
      "and operation, summed over ranks. Wait: for a collective the rank's wait for the last arriver; for "
      "point-to-point, wait and NCCL calls the time inside the call.</p></section>\n";
}

}  // namespace commprof::html
