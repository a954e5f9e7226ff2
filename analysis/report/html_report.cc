// HTML report (html_report.h): the page assembler. It writes the document around the sections:
// the head with the embedded style sheet, the header cards and the verdict, the point-to-point
// cards, the footer and the embedded script; the charts are html_charts.cc, the tables
// html_tables.cc, the assets assets/report.css and assets/report.js (report_assets.h). The page is
// built in a string and written only when complete. Strings from the report go through
// HtmlEscape() on every path into the page, never into the script or style elements.
#include "analysis/report/html_report.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <string>

#include "analysis/hang/hang_json.h"
#include "analysis/metrics/comm_label.h"
#include "analysis/report/html_format.h"
#include "analysis/report/html_page.h"
#include "analysis/report/report_assets.h"
#include "analysis/report/report_json.h"

namespace commprof {
namespace html {

Page::Page(const ReportModel& model) : r(model) {
  for (const ReportModel::Straggler& s : List(r.stragglers)) {
    stragglers.insert(s.rank.value_or(-1));
  }
  // A rank that never connected has no data (its figures would be zeros): the page leaves it out
  // of every table and chart; the ranks card and the completeness section count it.
  for (const ReportModel::Rank& rk : List(r.ranks)) {
    if (rk.status.value_or("") != "missing") {
      ranks.push_back(&rk);
    }
  }
  std::stable_sort(ranks.begin(), ranks.end(),
                   [](const ReportModel::Rank* a, const ReportModel::Rank* b) { return RankOf(*a) < RankOf(*b); });
}

const ReportModel::Rank* Page::RankEntry(int64_t rank) const {
  for (const ReportModel::Rank* rr : ranks) {
    if (RankOf(*rr) == rank) {
      return rr;
    }
  }
  return nullptr;
}

namespace {

void Card(Page& p, const std::string& key, const std::string& value, const std::string& detail, bool warn) {
  p.out += std::string("<div class=\"card") + (warn ? " warn" : "") + "\"><div class=\"k\">" + key +
           "</div><div class=\"v\">" + value + "</div>";
  if (!detail.empty()) {
    p.out += "<div class=\"d\">" + detail + "</div>";
  }
  p.out += "</div>\n";
}

void ClockCard(Page& p) {
  if (!p.r.clock) {
    Card(p, "clock alignment", kDash, "no clock section in this report", false);
    return;
  }
  const ReportModel::Clock& clock = *p.r.clock;
  std::optional<double> worst_bound;
  bool unmeasured = false;
  for (const ReportModel::ClockRank& cr : List(clock.ranks)) {
    const std::optional<double> b = Num(cr.clock_error_bound_ns);
    if (!b || *b < 0) {
      unmeasured = true;
      continue;
    }
    worst_bound = std::max(worst_bound.value_or(0), *b);
  }
  const double violations = NumOr(clock.violations, 0);
  std::string value = worst_bound ? "\xc2\xb1" + Dur(*worst_bound) : std::string("unmeasured");
  std::string detail = "largest error bound";
  if (unmeasured && worst_bound) {
    detail += " (some ranks unmeasured)";
  }
  detail += "; " + Count(violations) + " clock-condition violation(s)";
  if (Num(clock.instances_checked)) {
    detail += " in " + Count(*Num(clock.instances_checked)) + " instances";
  }
  Card(p, "clock alignment", value, detail, violations > 0 || unmeasured);
}

// Only when the figures cannot cover the whole job: ranks that never connected, parts of the file
// that could not be read, events recorded but not in the file (docs/file-format.md#reading-rules).
void CompletenessCard(Page& p) {
  if (!p.r.completeness) {
    return;
  }
  const ReportModel::Completeness& c = *p.r.completeness;
  std::vector<std::string> parts;
  int64_t never = 0;
  for (const ReportModel::RankRange& rr : List(c.never_connected)) {
    never += rr.last.value_or(0) - rr.first.value_or(0) + 1;
  }
  if (never > 0) {
    parts.push_back(std::to_string(never) + " rank(s) never connected");
  }
  const auto& unreadable = List(c.unreadable);
  const auto partly = std::count_if(unreadable.begin(), unreadable.end(), [](const auto& u) { return u.damaged_rows; });
  if (unreadable.size() > static_cast<size_t>(partly)) {
    parts.push_back(std::to_string(unreadable.size() - static_cast<size_t>(partly)) + " part(s) unreadable, left out");
  }
  if (partly > 0) {
    parts.push_back(std::to_string(partly) + " rank(s) read without a damaged last chunk");
  }
  if (c.missing_events.value_or(0) > 0 || c.lost_batches.value_or(0) > 0) {
    parts.push_back(Count(static_cast<double>(c.missing_events.value_or(0))) + " event(s) not in the file, " +
                    Count(static_cast<double>(c.lost_batches.value_or(0))) + " events frame(s) lost");
  }
  if (parts.empty()) {
    return;
  }
  std::string detail;
  for (const std::string& s : parts) {
    detail += (detail.empty() ? "" : "; ") + s;
  }
  Card(p, "data", "incomplete", HtmlEscape(detail), true);
}

void Header(Page& p) {
  const ReportModel& r = p.r;
  p.out += "<header>\n<h1>commprof report</h1>\n<p class=\"sub\">";
  const std::string path = r.path.value_or("");
  p.out += path.empty() ? std::string("file not named") : "<code>" + HtmlEscape(path) + "</code>";
  p.out += "</p>\n<div class=\"cards\" id=\"summary\">\n";
  const std::string job = r.job_id.value_or("");
  Card(p, "job", job.empty() ? kDash : HtmlEscape(job), "", false);

  std::set<std::string> hosts;
  for (const ReportModel::Rank* rr : p.ranks) {
    if (rr->host) {
      hosts.insert(*rr->host);
    }
  }
  const int64_t world = r.world_size.value_or(0);
  std::string rank_detail = std::to_string(p.ranks.size()) + " in this report";
  if (!hosts.empty()) {
    rank_detail += ", on " + std::to_string(hosts.size()) + (hosts.size() == 1 ? " host" : " hosts");
  }
  Card(p, "ranks", std::to_string(world), rank_detail, static_cast<int64_t>(p.ranks.size()) != world);

  const ReportModel::Instances inst = r.instances.value_or(ReportModel::Instances());
  const std::optional<double> matched = Num(inst.matched);
  const std::optional<double> incomplete = Num(inst.incomplete);
  Card(p, "matched collective instances", matched ? Count(*matched) : kDash,
       incomplete ? Count(*incomplete) + " incomplete" +
                        (*incomplete > 0 ? std::string(" (a rank missing; not measured)") : std::string())
                  : std::string(),
       incomplete.value_or(0) > 0);
  ClockCard(p);
  CompletenessCard(p);
  if (Num(r.skew_threshold_ns)) {
    Card(p, "attribution threshold", Dur(*Num(r.skew_threshold_ns)),
         "smaller arrival skews name no straggler (metrics.md &sect;3)", false);
  }
  p.out += "</div>\n</header>\n";
}

void NoStraggler(Page& p, double matched) {
  const ReportModel::Delay d = p.r.delay.value_or(ReportModel::Delay{});
  const double matched_p2p = p.r.p2p ? NumOr(p.r.p2p->matched, 0) : 0;
  if (matched == 0 && matched_p2p == 0) {
    // Not a clean bill of health: nothing was there to judge.
    p.out +=
        "<section class=\"verdict na\"><h2>Nothing to judge</h2><p>No matched collective instance and no "
        "matched point-to-point message: the file holds no communication whose waiting could be charged to a "
        "rank.</p></section>\n";
    return;
  }
  p.out += "<section class=\"verdict ok\"><h2>No straggler</h2><p>";
  p.out +=
      "No rank's delay cost (the waiting whose root cause it is) is a material share of the job's waiting while "
      "standing out from the other ranks' (metrics.md &sect;9.3).";
  p.out += "</p>";
  // The nearest candidate, so "none" can be checked against the numbers.
  const ReportModel::Rank* most = nullptr;
  for (const ReportModel::Rank* rr : p.ranks) {
    if (NumOr(rr->delay_cost_ns, 0) > (most ? NumOr(most->delay_cost_ns, 0) : 0)) {
      most = rr;
    }
  }
  const double attributed = NumOr(d.attributed_ns, 0);
  if (most != nullptr && attributed > 0) {
    const double cost = NumOr(most->delay_cost_ns, 0);
    p.out += "<ul><li>Largest delay cost: rank " + std::to_string(Page::RankOf(*most)) + ", " + Dur(cost) + " (" +
             Pct(cost / attributed) + " of the " + Dur(attributed) + " of waiting charged to a rank).</li></ul>";
  }
  p.out += "</section>\n";
}

void Straggler(Page& p, const ReportModel::Straggler& s) {
  const int64_t rank = s.rank.value_or(0);
  const ReportModel::Rank* re = p.RankEntry(rank);
  std::string host = s.host.value_or("");
  if (host.empty() && re != nullptr) {
    host = re->host.value_or("");
  }
  p.out += "<section class=\"verdict bad\"><h2>Rank " + std::to_string(rank) +
           (host.empty() ? std::string() : " on " + HtmlEscape(host)) +
           (s.device ? " (GPU " + std::to_string(*s.device) + ")" : std::string()) + " is a straggler</h2><ul>";
  const std::string pattern = s.pattern.value_or("");
  if (pattern == "periodic" && s.period) {
    p.out += "<li><b>Periodic</b>: late every " + Count(NumOr(s.period->every, 0)) + "th call, typically by " +
             Dur(NumOr(s.period->typical_lateness_ns, 0)) + ".</li>";
  } else if (pattern == "transient" && s.window) {
    const double start = p.r.lateness ? NumOr(p.r.lateness->start_ns, 0) : 0;
    p.out += "<li><b>Transient</b>: late from " + Dur(NumOr(s.window->start_ns, 0) - start) + " to " +
             Dur(NumOr(s.window->end_ns, 0) - start) + " into the run.</li>";
  } else if (pattern == "persistent") {
    p.out += "<li><b>Persistent</b>: late in most of its calls, typically by " + Dur(NumOr(s.typical_lateness_ns, 0)) +
             ".</li>";
  }
  if (Num(s.delay_cost_ns)) {
    p.out += "<li>Delay cost (the waiting whose root cause it is): <b>" + Dur(*Num(s.delay_cost_ns)) + "</b>";
    if (Num(s.share)) {
      p.out += ", " + Pct(*Num(s.share)) + " of the job's waiting";
    }
    p.out += " (direct " + Dur(NumOr(s.direct_ns, 0)) + ", propagated " + Dur(NumOr(s.propagated_ns, 0)) + ").</li>";
  }
  if (Num(s.saving_ns)) {
    p.out += "<li>Had it been on time, the job would have ended about <b>" + Dur(*Num(s.saving_ns)) +
             "</b> earlier (replay, metrics.md &sect;9.4).</li>";
  }
  for (const ReportModel::StragglerCommunicator& c : List(s.communicators)) {
    p.out += "<li>Late on " + HtmlEscape(c.name.value_or("?")) + " (" + MemberRanks(List(c.members), 8) +
             "): " + Dur(NumOr(c.delay_cost_ns, 0)) + " of waiting.</li>";
  }
  const std::string cause = s.cause.value_or("");
  if (!cause.empty()) {
    p.out += "<li>Cause hint: <b>";
    p.out += cause == "compute"    ? "longer compute before its calls"
             : cause == "transfer" ? "time inside communication (slow transfer)"
                                   : HtmlEscape(cause);
    p.out += "</b>.</li>";
  }
  p.out += "</ul></section>\n";
}

void Verdict(Page& p) {
  const double matched = p.r.instances ? NumOr(p.r.instances->matched, 0) : 0;
  if (!p.r.stragglers) {
    p.out +=
        "<section class=\"verdict na\"><h2>No verdict in this report</h2>"
        "<p>The report has no <code>stragglers</code> section.</p></section>\n";
    return;
  }
  if (p.r.stragglers->empty()) {
    NoStraggler(p, matched);
    return;
  }
  for (const ReportModel::Straggler& s : *p.r.stragglers) {
    Straggler(p, s);
  }
}

// The hang diagnosis (docs/hangs.md), first on the page when the job hung.
void HangSection(Page& p) {
  if (!p.r.hang || !*p.r.hang) {
    return;
  }
  auto parsed = hang::HangReportFromJson(**p.r.hang, "hang");
  if (!parsed.ok()) {
    p.out += "<section id=\"hang\" class=\"verdict bad\"><h2>Hang</h2><p>Unreadable: " +
             HtmlEscape(parsed.status().message()) + "</p></section>\n";
    return;
  }
  const hang::HangReport& h = parsed.value();
  if (!h.hang) {
    return;
  }
  auto ranks = [](const std::vector<uint32_t>& v) {
    std::string s;
    for (uint32_t r : v) {
      s += (s.empty() ? "" : ", ") + std::to_string(r);
    }
    return s;
  };
  p.out += "<section id=\"hang\" class=\"verdict bad\"><h2>Hang";
  if (!h.culprits.empty()) {
    p.out += ": rank" + std::string(h.culprits.size() > 1 ? "s " : " ") + ranks(h.culprits);
  }
  p.out += "</h2>\n<p>" + HtmlEscape(h.verdict) + "</p>\n<p>Found " +
           (h.source == "live" ? std::string("live, by the aggregator's hang timeout")
                               : std::string("after the fact, from the calls the ranks were in when they ended")) +
           ".</p>\n";
  if (!h.consequences.empty()) {
    p.out += "<p>Held up behind them (blamed by a finding, but waiting in another stuck call): rank" +
             std::string(h.consequences.size() > 1 ? "s " : " ") + ranks(h.consequences) + ".</p>\n";
  }
  for (const hang::CommFinding& f : h.comms) {
    p.out += "<h3>" + HtmlEscape(f.comm_name) + ": " + HtmlEscape(f.op) + " #" + std::to_string(f.seq) + " (" +
             HtmlEscape(f.kind) + ")</h3>\n<ul>";
    for (const hang::Waiter& w : f.waiting) {
      char age[32];
      std::snprintf(age, sizeof age, "%.1f s", w.waiting_s);
      p.out += "<li>rank " + std::to_string(w.rank) + " waits in " + HtmlEscape(w.op) + " for " + age +
               (w.call_site.empty() ? "" : " at <code>" + HtmlEscape(w.call_site) + "</code>") + "</li>";
    }
    for (const hang::Absent& a : f.not_entered) {
      p.out += "<li><b>rank " + std::to_string(a.rank) + " never entered it</b>: " + HtmlEscape(a.where) + "</li>";
    }
    if (!f.completed.empty()) {
      p.out += "<li>already completed it: ranks " + ranks(f.completed) + "</li>";
    }
    for (const hang::Mismatch& m : f.mismatches) {
      std::string sides;
      for (const hang::MismatchSide& s : m.sides) {
        sides += (sides.empty() ? "" : "; ") + std::string("ranks ") + ranks(s.ranks) + ": " + HtmlEscape(s.value);
      }
      p.out += "<li><b>" + HtmlEscape(m.kind) + " mismatch</b>: " + sides + "</li>";
    }
    p.out += "</ul>\n";
  }
  if (!h.p2p.empty()) {
    p.out += "<h3>Point-to-point waits</h3>\n<ul>";
    for (const hang::P2pWait& w : h.p2p) {
      p.out += "<li>rank " + std::to_string(w.rank) + ": " + HtmlEscape(w.op) + " on " + HtmlEscape(w.comm_name) +
               (w.peer_world >= 0 ? ", peer rank " + std::to_string(w.peer_world) + " is " + HtmlEscape(w.peer_doing)
                                  : std::string()) +
               "</li>";
    }
    p.out += "</ul>\n";
  }
  p.out += "<table><thead><tr><th>rank</th><th>condition</th><th>doing</th></tr></thead><tbody>";
  for (const hang::RankPosition& r : h.ranks) {
    p.out += "<tr><td>" + std::to_string(r.rank) + "</td><td>" + HtmlEscape(r.condition) + "</td><td>" +
             HtmlEscape(r.doing) + "</td></tr>";
  }
  p.out += "</tbody></table></section>\n";
}

void P2pSummary(Page& p) {
  if (!p.r.p2p) {
    return;
  }
  const ReportModel::P2p& m = *p.r.p2p;
  p.out += "<section id=\"p2p\"><h2>Point-to-point</h2>\n<div class=\"cards\">";
  Card(p, "matched messages", Num(m.matched) ? Count(*Num(m.matched)) : kDash, "", false);
  const double us = NumOr(m.unmatched_sends, 0), ur = NumOr(m.unmatched_recvs, 0);
  Card(p, "unmatched", Count(us + ur), Count(us) + " send(s), " + Count(ur) + " receive(s)", us + ur > 0);
  Card(p, "late sender wait", Num(m.late_sender_wait_ns) ? Dur(*Num(m.late_sender_wait_ns)) : kDash,
       "receivers blocked before the send was posted", false);
  Card(p, "late receiver wait", Num(m.late_receiver_wait_ns) ? Dur(*Num(m.late_receiver_wait_ns)) : kDash,
       "senders blocked before the receive was posted", false);
  p.out += "</div></section>\n";
}

std::string Render(const ReportModel& model) {
  Page p(model);
  const std::string job = model.job_id.value_or("");
  p.out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  p.out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  p.out += "<meta name=\"generator\" content=\"commprof report --format html\">\n";
  p.out += "<title>commprof report" + (job.empty() ? std::string() : " \xc2\xb7 job " + HtmlEscape(job)) + "</title>\n";
  p.out += "<style>\n";
  p.out += ReportCss();
  p.out += "</style>\n</head>\n<body>\n<main>\n";
  Header(p);
  HangSection(p);
  p.out += "<div id=\"verdict\">\n";
  Verdict(p);
  p.out += "</div>\n";
  RankTimeChart(p);
  LatenessHeatMap(p);
  BreakdownChart(p);
  StepTimeChart(p);
  CollectivesTable(p);
  RanksTable(p);
  WorstInstancesTable(p);
  IncompleteTable(p);
  CommunicatorsTable(p);
  P2pSummary(p);
  ClockTable(p);
  CallSitesTable(p);
  p.out += "<footer>Generated by commprof from a report of schema_version " +
           (model.schema_version ? std::to_string(*model.schema_version) : std::string("(unstated)")) +
           ". All times are on the aligned job time base (rank 0's clock); the metrics are defined in "
           "docs/metrics.md. This file is self-contained: it loads nothing from the network.</footer>\n";
  p.out += "</main>\n<script>\n";
  p.out += ReportJs();
  p.out += "</script>\n</body>\n</html>\n";
  return std::move(p.out);
}

}  // namespace
}  // namespace html

Status WriteHtmlReport(const ReportModel& report, std::ostream& out) {
  std::string page;
  try {
    page = html::Render(report);
  } catch (const std::exception& e) {  // allocation: turned into a Status at the edge
    return Internal(std::string("html report: ") + e.what());
  }
  out.write(page.data(), static_cast<std::streamsize>(page.size()));
  out.flush();
  if (!out) {
    return IoError("html report: write failed");
  }
  return Status::Ok();
}

Status WriteHtmlReport(const nlohmann::ordered_json& report, std::ostream& out) {
  Result<ReportModel> model = ReportModelFromJson(report);
  if (!model.ok()) {
    return model.status();
  }
  return WriteHtmlReport(model.value(), out);
}

}  // namespace commprof
