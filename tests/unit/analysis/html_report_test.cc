// Golden cases for the HTML report (analysis/report/html_report.h): hand-written report JSON in
// tests/fixtures/report/, hand-computed figures and geometry, and inputs that must be rejected with
// the key at fault. The browser side (the page as Chromium lays it out) is tests/browser/.
#include "analysis/report/html_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>

namespace commprof {
namespace {

using Json = nlohmann::ordered_json;

Json LoadFixture(const std::string& name) {
  std::ifstream f(std::string(COMMPROF_TEST_FIXTURES_DIR) + "/report/" + name);
  EXPECT_TRUE(f) << name;
  return Json::parse(f);
}

std::string Render(const Json& report) {
  std::ostringstream os;
  const Status st = WriteHtmlReport(report, os);
  EXPECT_TRUE(st.ok()) << st.message();
  return os.str();
}

size_t CountOf(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

// The text between the opening of <section id="ID"> and its </section>.
std::string Section(const std::string& html, const std::string& id) {
  const size_t b = html.find("<section id=\"" + id + "\"");
  if (b == std::string::npos) return "";
  const size_t e = html.find("</section>", b);
  return html.substr(b, e - b);
}

// The heat-map cell of (rank, bin): its whole element, <title> included.
std::string Cell(const std::string& html, int rank, int bin) {
  std::smatch m;
  const std::regex re("<rect class=\"cell[^\"]*\" data-rank=\"" + std::to_string(rank) + "\" data-bin=\"" +
                      std::to_string(bin) + "\"[^>]*><title>[^<]*</title></rect>");
  return std::regex_search(html, m, re) ? m.str() : "";
}

// The rank's <g class="bar"> in the chart with this id.
std::string Bar(const std::string& html, const std::string& chart_id, int rank) {
  const size_t c = html.find("id=\"" + chart_id + "\"");
  if (c == std::string::npos) return "";
  std::smatch m;
  const std::string rest = html.substr(c);
  const std::regex re("<g class=\"bar[^\"]*\" data-rank=\"" + std::to_string(rank) + "\">.*?</g>");
  return std::regex_search(rest, m, re) ? m.str() : "";
}

Status Reject(const Json& report, std::string* written = nullptr) {
  std::ostringstream os;
  Status st = WriteHtmlReport(report, os);
  if (written != nullptr) *written = os.str();
  return st;
}

// The fixture's verdict entry in the form of schema 3 (docs/metrics.md §9.3): delay cost, pattern,
// saving, communicators.
Json SchemaThreeStraggler() {
  return Json::parse(R"({"rank": 2, "host": "node-b", "delay_cost_ns": 84000000, "direct_ns": 80000000,
    "propagated_ns": 4000000, "share": 0.9, "saving_ns": 27000000, "pattern": "persistent",
    "communicators": [{"comm_id": 1, "name": "MPI_COMM_WORLD", "size": 4, "members": [0, 1, 2, 3],
                       "delay_cost_ns": 80000000}],
    "cause": "compute", "late_instances": 90, "typical_lateness_ns": 600000})");
}

TEST(HtmlReport, StragglerVerdictNamesTheRankWithItsEvidence) {
  Json j = LoadFixture("straggler_4rank.json");
  j["stragglers"] = Json::array({SchemaThreeStraggler()});
  const std::string html = Render(j);
  const std::string verdict = html.substr(html.find("<div id=\"verdict\">"), 1500);
  EXPECT_NE(verdict.find("class=\"verdict bad\""), std::string::npos);
  EXPECT_NE(verdict.find("Rank 2 on node-b is a straggler"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("<b>Persistent</b>: late in most of its calls, typically by 600.00 \xc2\xb5s"),
            std::string::npos)
      << verdict;
  EXPECT_NE(verdict.find("<b>84.00 ms</b>, 90.0% of the job's waiting (direct 80.00 ms, propagated 4.00 ms)"),
            std::string::npos)
      << verdict;
  EXPECT_NE(verdict.find("about <b>27.00 ms</b> earlier"), std::string::npos) << verdict;  // saving_ns
  // Member ranks as the text report writes them (MemberRanks: ranges).
  EXPECT_NE(verdict.find("Late on MPI_COMM_WORLD (ranks 0-3): 80.00 ms of waiting"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("longer compute before its calls"), std::string::npos);  // cause "compute"
  // The straggler's rows are marked in the charts and the rank table.
  EXPECT_NE(Bar(html, "chart-rank-time", 2).find("class=\"bar straggler\""), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"straggler\"><td class=\"n\" data-v=\"2\">2</td>"), std::string::npos);
}

TEST(HtmlReport, HeaderShowsJobRanksInstancesAndClockQuality) {
  const std::string html = Render(LoadFixture("straggler_4rank.json"));
  EXPECT_NE(html.find("<title>commprof report \xc2\xb7 job job-4242</title>"), std::string::npos);
  EXPECT_NE(html.find("<code>/scratch/runs/job-4242.h5</code>"), std::string::npos);
  EXPECT_NE(html.find("<div class=\"v\">4</div><div class=\"d\">4 in this report, on 2 hosts</div>"),
            std::string::npos);
  EXPECT_NE(html.find("<div class=\"v\">100</div><div class=\"d\">1 incomplete (a rank missing"), std::string::npos);
  // Largest clock_error_bound_ns is rank 2's 2400 ns; 0 violations in 101 instances.
  EXPECT_NE(html.find("\xc2\xb1"
                      "2.40 \xc2\xb5s</div><div class=\"d\">largest error bound; 0 clock-condition "
                      "violation(s) in 101 instances"),
            std::string::npos);
  EXPECT_NE(html.find("<div class=\"v\">4.80 \xc2\xb5s</div>"), std::string::npos);  // skew_threshold_ns 4800
}

TEST(HtmlReport, EveryRankHasACommVersusWaitBarOnOneScale) {
  const std::string html = Render(LoadFixture("straggler_4rank.json"));
  const std::string chart = Section(html, "rank-time");
  EXPECT_EQ(CountOf(chart, "<g class=\"bar"), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_NE(Bar(html, "chart-rank-time", r), "") << "rank " << r;
  // Largest comm_time 40 ms; NiceStep(40 ms, 6 ticks) = 10 ms, so the axis ends at 40 ms over a plot
  // of 1060 - 118 - 210 = 732 px. Rows are min(24, 560/4) = 24 px, bars round(0.72 * 24) = 17 px,
  // centred: rank i at y = 30 + 24 i + 3.5.
  // Rank 0: wait 30 ms -> 732 * 30/40 = 549 px, rest 10 ms -> 183 px.
  const std::string b0 = Bar(html, "chart-rank-time", 0);
  EXPECT_NE(b0.find("class=\"seg seg-wait\" data-v=\"30000000\" x=\"118.00\" y=\"33.50\" width=\"549.00\""),
            std::string::npos)
      << b0;
  EXPECT_NE(b0.find("class=\"seg seg-rest\" data-v=\"10000000\" x=\"667.00\""), std::string::npos);
  EXPECT_NE(b0.find("width=\"183.00\""), std::string::npos);
  // Rank 2: wait 1.5 ms -> 732 * 1.5/40 = 27.45 px; rest 10.5 ms -> 192.15 px starting at 145.45.
  const std::string b2 = Bar(html, "chart-rank-time", 2);
  EXPECT_NE(b2.find("width=\"27.45\""), std::string::npos) << b2;
  EXPECT_NE(b2.find("x=\"145.45\" y=\"81.50\" width=\"192.15\""), std::string::npos) << b2;
  EXPECT_NE(b2.find("<title>rank 2 (node-b), the straggler: in collectives 12.00 ms, waiting 1.50 ms (12.5%), "
                    "rest 10.50 ms; last to arrive 90 times</title>"),
            std::string::npos)
      << b2;
}

TEST(HtmlReport, BreakdownBarsSplitEachRanksSpanAndShowTheOverlap) {
  const std::string html = Render(LoadFixture("straggler_4rank.json"));
  EXPECT_EQ(CountOf(Section(html, "breakdown"), "<g class=\"bar"), 4u);
  // Span 2.5 s on every rank; NiceStep(2.5 s, 6) = 0.5 s, axis to 2.5 s over 732 px.
  // Rank 0 compute 2.3 s -> 732 * 2.3/2.5 = 673.44 px; exposed 30 ms -> 8.784 px at x = 791.44.
  const std::string b0 = Bar(html, "chart-breakdown", 0);
  EXPECT_NE(b0.find("class=\"seg seg-compute\" data-v=\"2300000000\" x=\"118.00\" y=\"33.50\" width=\"673.44\""),
            std::string::npos)
      << b0;
  EXPECT_NE(b0.find("class=\"seg seg-exposed\" data-v=\"30000000\" x=\"791.44\" y=\"33.50\" width=\"8.78\""),
            std::string::npos);
  EXPECT_NE(b0.find(">overlap 25.0%</text>"), std::string::npos);
  EXPECT_NE(b0.find("overlap 25.0% (cpu-outside-mpi)</title>"), std::string::npos);
}

TEST(HtmlReport, HeatMapHasRanksTimesBinsCellsWithTheirValuesInTitles) {
  const std::string html = Render(LoadFixture("straggler_4rank.json"));
  const std::string map = Section(html, "lateness");
  // 4 ranks x 10 bins; bin 5 is null on every rank.
  EXPECT_EQ(CountOf(map, "data-bin=\""), 40u);
  EXPECT_EQ(CountOf(map, "<rect class=\"cell empty\" data-rank="), 4u);
  for (int r = 0; r < 4; ++r) {
    for (int b = 0; b < 10; ++b) EXPECT_NE(Cell(html, r, b), "") << r << "," << b;
  }
  // bin_ns 0.25 s: bin 3 spans 0.75-1.00 s. Colour: 290 us / 600 us (the largest) = 0.4833, i.e.
  // 0.8667 of the way from YlOrRd stop 3 (#feb24c) to stop 4 (#fd8d3c): red 254 - 0.8667 = 253
  // (fd), green 178 - 37 * 0.8667 = 145.9 (92), blue 76 - 16 * 0.8667 = 62.1 (3e).
  EXPECT_NE(Cell(html, 2, 3).find("data-v=\"290000\" fill=\"#fd923e\""), std::string::npos) << Cell(html, 2, 3);
  EXPECT_NE(Cell(html, 2, 3)
                .find("<title>rank 2 \xc2\xb7 0.75\xe2\x80\x93"
                      "1.00 s \xc2\xb7 mean lateness 290.00 \xc2\xb5s \xc2\xb7 "
                      "last to arrive 10\xc3\x97</title>"),
            std::string::npos);
  // The largest value takes the last stop, a zero the first; times_last 0 adds nothing to the title.
  EXPECT_NE(Cell(html, 2, 8).find("data-v=\"600000\" fill=\"#800026\""), std::string::npos);
  EXPECT_NE(Cell(html, 3, 0).find("fill=\"#ffffcc\""), std::string::npos);
  EXPECT_NE(Cell(html, 3, 0)
                .find("<title>rank 3 \xc2\xb7 0.00\xe2\x80\x93"
                      "0.25 s \xc2\xb7 mean lateness 0 ns</title>"),
            std::string::npos)
      << Cell(html, 3, 0);
  // A null bin is an empty cell without a value.
  const std::string empty = Cell(html, 2, 5);
  EXPECT_NE(empty.find("class=\"cell empty\""), std::string::npos);
  EXPECT_EQ(empty.find("data-v="), std::string::npos);
  EXPECT_NE(empty.find("1.25\xe2\x80\x93"
                       "1.50 s \xc2\xb7 no instance in this bin"),
            std::string::npos);
  // Legend: 0, half and the largest value; per-row totals of times_last.
  EXPECT_NE(map.find(">300.00 \xc2\xb5s</text>"), std::string::npos);
  EXPECT_NE(map.find("id=\"heat-max\">600.00 \xc2\xb5s</text>"), std::string::npos);
  EXPECT_NE(map.find(">last 90\xc3\x97</text>"), std::string::npos);  // 10+10+11+10+9+0+9+10+10+11
}

TEST(HtmlReport, TablesShowEveryCollectiveRankWorstInstanceAndClock) {
  const std::string html = Render(LoadFixture("straggler_4rank.json"));
  const std::string coll = Section(html, "collectives");
  EXPECT_EQ(CountOf(coll, "<tr>"), 3u);  // header + allreduce + barrier
  EXPECT_NE(coll.find("<td>allreduce</td><td class=\"n\" data-v=\"80\">80</td><td class=\"n\" "
                      "data-v=\"1048576\">1.00 MiB</td><td class=\"n\" data-v=\"400000\">400.00 \xc2\xb5s</td>"),
            std::string::npos);
  EXPECT_NE(coll.find(">3.93</td>"), std::string::npos);                             // busbw
  EXPECT_EQ(CountOf(coll, "<td class=\"n na\" data-v=\"\">\xe2\x80\x93</td>"), 2u);  // barrier: null bw
  EXPECT_EQ(CountOf(Section(html, "ranks"), "<tr"), 5u);
  EXPECT_NE(Section(html, "ranks").find(">10 / 10</td>"), std::string::npos);
  // Worst instances: start relative to lateness.start_ns = 1e12: 1.002e12 -> 2.000 s.
  const std::string worst = Section(html, "worst");
  EXPECT_EQ(CountOf(worst, "<tr>"), 4u);
  EXPECT_NE(worst.find("data-v=\"2000000000\">2.000 s</td>"), std::string::npos);
  EXPECT_NE(Section(html, "incomplete").find("<td>0 1 3</td>"), std::string::npos);
  EXPECT_NE(Section(html, "p2p").find("0 send(s), 1 receive(s)"), std::string::npos);
  EXPECT_NE(Section(html, "clock").find("<td>mpi-pingpong</td><td class=\"n\" data-v=\"-35000\">-35.00 \xc2\xb5s"),
            std::string::npos);
}

TEST(HtmlReport, NoStragglerSaysSoAndNamesTheNearestCandidate) {
  Json j = LoadFixture("no_straggler_2rank.json");
  // schema 3's delay costs: rank 0 caused 9 us of the 20 us charged to a rank
  j["delay"] = Json::parse(R"({"total_wait_ns": 25000, "attributed_ns": 20000, "unattributed_ns": 5000})");
  j["ranks"][0]["delay_cost_ns"] = 9000;
  j["ranks"][1]["delay_cost_ns"] = 8000;
  const std::string html = Render(j);
  EXPECT_NE(html.find("<section class=\"verdict ok\"><h2>No straggler</h2>"), std::string::npos);
  EXPECT_EQ(html.find("is a straggler"), std::string::npos);
  EXPECT_EQ(html.find("class=\"bar straggler\""), std::string::npos);
  EXPECT_NE(html.find("Largest delay cost: rank 0, 9.00 \xc2\xb5s (45.0% of the 20.00 \xc2\xb5s of waiting charged "
                      "to a rank)"),
            std::string::npos);
  EXPECT_EQ(CountOf(Section(html, "lateness"), "data-bin=\""), 8u);  // 2 ranks x 4 bins
  // bin_ns 0.5 ms, span 2 ms: the axis is in ms with one decimal.
  EXPECT_NE(Cell(html, 1, 3)
                .find("<title>rank 1 \xc2\xb7 1.5\xe2\x80\x93"
                      "2.0 ms \xc2\xb7 mean lateness 30.00 "),
            std::string::npos)
      << Cell(html, 1, 3);
  EXPECT_NE(Section(html, "clock").find(">unmeasured</td>"), std::string::npos);  // error bound -1
  EXPECT_NE(html.find("No breakdown or overlap data"), std::string::npos);
  EXPECT_NE(Section(html, "worst").find("No instances."), std::string::npos);
}

TEST(HtmlReport, OptionalKeysAbsentRenderAsAbsent) {
  const std::string html = Render(LoadFixture("minimal_v1.json"));
  EXPECT_NE(html.find("No verdict in this report"), std::string::npos);
  EXPECT_NE(html.find("No lateness data in this report."), std::string::npos);
  EXPECT_NE(html.find("No rank has time in matched collectives"), std::string::npos);
  EXPECT_NE(html.find("No matched collectives in this report."), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("id=\"worst\""), std::string::npos);
  EXPECT_EQ(html.find("id=\"clock\""), std::string::npos);
  // world_size 3 but two ranks in the report: the card warns.
  EXPECT_NE(html.find("<div class=\"card warn\"><div class=\"k\">ranks</div><div class=\"v\">3</div>"),
            std::string::npos);
  // Rows sorted by rank although the input lists rank 1 first.
  const std::string ranks = Section(html, "ranks");
  EXPECT_LT(ranks.find("data-v=\"0\">0</td>"), ranks.find("data-v=\"1\">1</td>"));
  EXPECT_NE(html.find("schema_version 1."), std::string::npos);
}

TEST(HtmlReport, ZeroRanksAndNullsRenderWithoutCrashing) {
  std::string html = Render(Json::parse(R"({"schema": "commprof-report", "world_size": 0, "ranks": []})"));
  EXPECT_NE(html.find("No ranks in this report."), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);

  Json j = LoadFixture("straggler_4rank.json");
  j["instances"] = nullptr;
  j["ranks"][0]["comm_time_ns"] = nullptr;
  j["ranks"][1]["breakdown"] = nullptr;
  j["ranks"][2]["host"] = nullptr;
  j["stragglers"][0]["host"] = nullptr;
  j["clock"]["ranks"][0]["clock_error_bound_ns"] = nullptr;
  j["stragglers"][0]["delay_cost_ns"] = nullptr;
  j["lateness"]["ranks"][3]["times_last"] = nullptr;
  j["lateness"]["bin_ns"] = nullptr;
  html = Render(j);
  EXPECT_NE(html.find("Rank 2 is a straggler"), std::string::npos);  // no host anywhere
  EXPECT_EQ(html.find("Last to arrive in"), std::string::npos);
  EXPECT_EQ(CountOf(Section(html, "rank-time"), "<g class=\"bar"), 4u);  // rank 0 at zero length
  EXPECT_EQ(CountOf(Section(html, "lateness"), "data-bin=\""), 40u);

  // NaN and infinity (possible in a report built in memory, not in JSON text) read as no value.
  j["ranks"][3]["wait_share"] = std::nan("");
  j["ranks"][3]["comm_time_ns"] = INFINITY;
  html = Render(j);
  EXPECT_EQ(html.find("nan"), std::string::npos);
  EXPECT_EQ(html.find("inf\""), std::string::npos);
  EXPECT_NE(Section(html, "ranks")
                .find("data-v=\"5202\">5202</td><td class=\"n\" data-v=\"100\">100</td><td "
                      "class=\"n na\" data-v=\"\">"),
            std::string::npos);

  j["lateness"] = nullptr;
  j["stragglers"] = Json::array();
  html = Render(j);
  EXPECT_NE(html.find("No lateness data in this report."), std::string::npos);
  EXPECT_NE(html.find("<h2>No straggler</h2>"), std::string::npos);
}

TEST(HtmlReport, ManyRanksAreBandedInTheHeatMapButKeepOneBarEach) {
  // 600 ranks, 2 bins: rank r has lateness r ns in bin 0 and none in bin 1. Bands of
  // ceil(600 / 256) = 3 ranks make 200 rows; row k holds ranks 3k..3k+2, whose largest is 3k+2.
  // The run spans 2 us, so the axis is in us, and 1 us bins need no decimals.
  Json j = {{"schema", "commprof-report"},
            {"world_size", 600},
            {"ranks", Json::array()},
            {"lateness", {{"start_ns", 0}, {"bin_ns", 1000}, {"bins", 2}, {"ranks", Json::array()}}}};
  for (int r = 0; r < 600; ++r) {
    j["ranks"].push_back({{"rank", r}, {"comm_time_ns", 1000 + r}, {"wait_time_ns", r}});
    j["lateness"]["ranks"].push_back({{"rank", r}, {"mean_lateness_ns", {r, nullptr}}});
  }
  const std::string html = Render(j);
  const std::string map = Section(html, "lateness");
  EXPECT_EQ(CountOf(map, "<g class=\"heat-row"), 200u);
  EXPECT_EQ(CountOf(map, "data-bin=\""), 400u);
  EXPECT_NE(map.find("data-ranks=\"3-5\""), std::string::npos);
  EXPECT_NE(map.find("<title>ranks 3\xe2\x80\x93"
                     "5 \xc2\xb7 0\xe2\x80\x93"
                     "1 \xc2\xb5s \xc2\xb7 largest mean "
                     "lateness 5 ns (rank 5)</title>"),
            std::string::npos);
  EXPECT_NE(map.find("one row per 3 ranks"), std::string::npos);
  EXPECT_EQ(CountOf(Section(html, "rank-time"), "<g class=\"bar"), 600u);
}

TEST(HtmlReport, HostileStringsAreEscapedEverywhere) {
  const std::string html = Render(LoadFixture("hostile_strings.json"));
  EXPECT_EQ(CountOf(html, "<script"), 1u);  // the page's own sort script only
  for (const char* raw :
       {"<img", "<iframe", "<svg onload", "</title><script", "<b>allreduce", "<i>bcast", "<u>x", "evil&co"}) {
    EXPECT_EQ(html.find(raw), std::string::npos) << raw;
  }
  for (const char* esc :
       {"&lt;script&gt;alert(1)&lt;/script&gt;", "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;",
        "/tmp/a&amp;b/&#39;x&#39;.h5", "Rank 1 on evil&amp;co&lt;/title&gt; is a straggler",
        "&lt;/td&gt;&lt;script&gt;alert(3)&lt;/script&gt;", "&lt;iframe src=x&gt;", "&lt;svg onload=alert(4)&gt;",
        "&lt;b&gt;allreduce&lt;/b&gt;", "&lt;u&gt;x&lt;/u&gt;", "&lt;i&gt;bcast&lt;/i&gt;"}) {
    EXPECT_NE(html.find(esc), std::string::npos) << esc;
  }
  // In the page <title> and in an SVG <title> as well.
  EXPECT_NE(html.find("<title>commprof report \xc2\xb7 job &quot;&gt;&lt;img"), std::string::npos);
  EXPECT_NE(html.find("<title>rank 0 (&lt;script&gt;alert(1)&lt;/script&gt;): in collectives"), std::string::npos);
}

TEST(HtmlReport, HtmlEscapeCoversMarkupQuotesAndControlCharacters) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(HtmlEscape(std::string("x\0y\x1bz\t\n", 7)), "x\xef\xbf\xbdy\xef\xbf\xbdz\t\n");
  EXPECT_EQ(HtmlEscape("n\xc3\xb6"
                       "de-\xc2\xb5"),
            "n\xc3\xb6"
            "de-\xc2\xb5");  // UTF-8 passes unchanged
}

TEST(HtmlReport, PageIsSelfContained) {
  const std::string html = Render(LoadFixture("straggler_4rank.json"));
  EXPECT_EQ(CountOf(html, "http://"), CountOf(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_FALSE(std::regex_search(html, std::regex("<[^>]*\\s(src|href)\\s*=")));
  EXPECT_EQ(html.find("url("), html.find("url(#heat-scale)"));
  EXPECT_EQ(CountOf(html, "<style>"), 1u);
  EXPECT_EQ(html.rfind("</html>\n"), html.size() - 8);
}

TEST(HtmlReport, RejectsInputLackingRequiredKeysNamingTheKey) {
  const Json good = LoadFixture("straggler_4rank.json");
  struct Case {
    std::function<void(Json&)> mutate;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](Json& j) { j.erase("schema"); }, "report key schema: missing"},
      {[](Json& j) { j["schema"] = "commprof-info"; },
       "report key schema: is \"commprof-info\", expected \"commprof-report\""},
      {[](Json& j) { j.erase("world_size"); }, "report key world_size: missing"},
      {[](Json& j) { j["world_size"] = "4"; }, "report key world_size: expected an integer, got string"},
      {[](Json& j) { j["world_size"] = -1; }, "report key world_size: is negative"},
      {[](Json& j) { j.erase("ranks"); }, "report key ranks: missing"},
      {[](Json& j) { j["ranks"] = nullptr; }, "report key ranks: is null"},
      {[](Json& j) { j["ranks"] = Json::object(); }, "report key ranks: expected an array, got object"},
      {[](Json& j) { j["ranks"][1].erase("rank"); }, "report key ranks[1].rank: missing"},
      {[](Json& j) { j["ranks"][2] = 7; }, "report key ranks[2]: expected an object, got number"},
      {[](Json& j) { j["ranks"][3]["wait_time_ns"] = "lots"; },
       "report key ranks[3].wait_time_ns: expected a number, got string"},
      {[](Json& j) { j["ranks"][0]["breakdown"]["idle_ns"] = true; },
       "report key ranks[0].breakdown.idle_ns: expected a number, got boolean"},
      {[](Json& j) { j["stragglers"][0]["pattern"] = true; },
       "report key stragglers[0].pattern: expected a string, got boolean"},
      {[](Json& j) {
         j["lateness"]["ranks"][0]["mean_lateness_ns"] = {1, 2, 3};
       },
       "report key lateness.ranks[0].mean_lateness_ns: has 3 entries, lateness.bins is 10"},
      {[](Json& j) { j["lateness"]["ranks"][1]["mean_lateness_ns"][4] = "x"; },
       "report key lateness.ranks[1].mean_lateness_ns[4]: expected a number, got string"},
      {[](Json& j) { j["lateness"]["ranks"][2]["times_last"][0] = 1.5; },
       "report key lateness.ranks[2].times_last[0]: expected an integer, got number"},
      {[](Json& j) { j["lateness"].erase("bins"); }, "report key lateness.bins: missing"},
      {[](Json& j) { j["lateness"]["ranks"][0].erase("mean_lateness_ns"); },
       "report key lateness.ranks[0].mean_lateness_ns: missing"},
      {[](Json& j) { j["instances"]["incomplete_list"][0]["ranks_present"][1] = "one"; },
       "report key instances.incomplete_list[0].ranks_present[1]: expected an integer, got string"},
      {[](Json& j) { j["clock"]["ranks"] = 3; }, "report key clock.ranks: expected an array, got number"},
      {[](Json& j) { j["collectives"][0]["type"] = 5; },
       "report key collectives[0].type: expected a string, got number"},
  };
  for (const Case& c : cases) {
    Json j = good;
    c.mutate(j);
    std::string written;
    const Status st = Reject(j, &written);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(st.message(), c.message);
    EXPECT_EQ(written, "") << "nothing is written for a rejected input: " << c.message;
  }
  const Status st = Reject(Json::array());
  EXPECT_EQ(st.message(), "report: expected a JSON object, got array");
}

TEST(HtmlReport, AFailedWriteIsAnIoError) {
  std::ostringstream os;
  os.setstate(std::ios::badbit);
  const Status st = WriteHtmlReport(LoadFixture("minimal_v1.json"), os);
  EXPECT_EQ(st.code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace commprof
