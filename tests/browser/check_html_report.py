#!/usr/bin/env python3
"""Browser test of the HTML report: renders a report JSON with html_report_render, loads the page
in headless Chromium from disk (no network) and checks what the browser built.

A copy of the page gets two scripts added: one at the top of <head> that records script errors
and alert() calls, one at the end of <body> that measures the rendered page (element counts, bar
and cell geometry, computed fill colours, labels inside their charts, horizontal overflow, the
visible text) and clicks a table header to exercise the sort script. It writes the results as
JSON into a <pre id="probe">, and `chromium --dump-dom` hands back the DOM after the scripts ran.
The expected values are computed here from the fixture, not taken from the page.

Usage: check_html_report.py --render BIN --chromium CHROMIUM --fixture F.json --work DIR
                            [--hostile] [--screenshot OUT.png]
"""
import argparse
import json
import os
import re
import subprocess

from chromium_probe import check, probe_page, run_chromium

PROBE_SCRIPT = r"""<pre id="probe"></pre><script>(function(){
var out={errors:window.__errors,js:document.documentElement.getAttribute('data-js')};
function rects(sel){return Array.prototype.map.call(document.querySelectorAll(sel),function(e){
  var b=e.getBoundingClientRect();return {w:b.width,h:b.height,x:b.left,v:e.getAttribute('data-v'),
  rank:e.getAttribute('data-rank')||(e.parentNode&&e.parentNode.getAttribute('data-rank')),
  bin:e.getAttribute('data-bin'),fill:getComputedStyle(e).fill,
  title:(e.querySelector('title')||{}).textContent||null};});}
out.svgs=Array.prototype.map.call(document.querySelectorAll('svg'),function(s){return s.id;});
out.bars={};
['chart-rank-time','chart-breakdown'].forEach(function(id){
  var bars=document.querySelectorAll('#'+id+' g.bar');
  out.bars[id]=Array.prototype.map.call(bars,function(g){return {rank:g.getAttribute('data-rank'),
    title:g.querySelector('title').textContent,
    segs:Array.prototype.map.call(g.querySelectorAll('rect.seg'),function(r){var b=r.getBoundingClientRect();
      return {cls:r.getAttribute('class'),w:b.width,v:parseFloat(r.getAttribute('data-v'))};})};});});
out.stepCols=Array.prototype.map.call(document.querySelectorAll('#chart-step-time g.bar'),function(g){
  return {step:g.getAttribute('data-step'),straggler:g.getAttribute('data-straggler'),
    title:g.querySelector('title').textContent,
    segs:Array.prototype.map.call(g.querySelectorAll('rect.seg'),function(r){var b=r.getBoundingClientRect();
      return {cls:r.getAttribute('class'),h:b.height,w:b.width,v:parseFloat(r.getAttribute('data-v'))};})};});
out.cells=rects('#chart-lateness rect.cell[data-bin]');
out.heatRows=document.querySelectorAll('#chart-lateness g.heat-row').length;
// Every text of every chart lies inside its chart's box (nothing clipped or spilling).
out.clipped=[];
document.querySelectorAll('svg.chart').forEach(function(s){var sb=s.getBoundingClientRect();
  s.querySelectorAll('text').forEach(function(t){var b=t.getBoundingClientRect();
    if(b.left<sb.left-1||b.right>sb.right+1||b.top<sb.top-1||b.bottom>sb.bottom+1)
      out.clipped.push(s.id+': '+t.textContent);});});
out.overflowX=document.documentElement.scrollWidth-window.innerWidth;
out.verdict=(document.getElementById('verdict')||{}).innerText||null;
out.text=document.body.innerText;
out.scripts=document.querySelectorAll('script').length;
out.foreign=document.querySelectorAll(
  'img,iframe,object,embed,link,svg:not(.chart),[src],[href],[srcset],[onerror],[onload]').length;
// Sort the rank table by its "wait" column, twice (ascending, then descending).
var t=document.getElementById('tbl-ranks');
if(t){var ths=t.tHead.rows[0].cells,col=-1;
  for(var i=0;i<ths.length;i++){if(ths[i].textContent==='wait')col=i;}
  function order(){return Array.prototype.map.call(t.tBodies[0].rows,function(r){
    return parseFloat(r.cells[col].getAttribute('data-v'));});}
  if(col>=0){ths[col].click();out.sortAsc=order();out.sortAttr=ths[col].getAttribute('aria-sort');
    ths[col].click();out.sortDesc=order();}}
document.getElementById('probe').textContent=JSON.stringify(out);
})();</script>"""


def luminance(css):
    m = re.match(r"rgb\((\d+), (\d+), (\d+)\)", css or "")
    check(m, "computed fill %r is not an rgb() colour" % css)
    r, g, b = (int(x) for x in m.groups())
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--render", required=True)
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--hostile", action="store_true", help="the fixture holds markup in its strings")
    ap.add_argument("--screenshot", help="also save a screenshot of the page (for people to look at)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    with open(a.fixture) as f:
        rep = json.load(f)

    page = os.path.join(a.work, "report.html")
    r = subprocess.run([a.render, a.fixture, page], capture_output=True, text=True)
    check(r.returncode == 0, "render failed: " + r.stderr)
    with open(page, encoding="utf-8") as f:
        src = f.read()
    # Self-contained: no URL and no CSS url() but the page's own #fragments (the DOM is checked for
    # src/href attributes below).
    check("http://" not in src.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in src,
          "the page contains a URL")
    check(not re.search(r"url\((?!#)", src), "the page loads something through CSS url()")

    out = probe_page(a.chromium, src, PROBE_SCRIPT, a.work)

    check(out["errors"] == [], "script errors or alerts in the page: %s" % out["errors"])
    check(out["js"] == "ready", "the page's own script did not finish (data-js=%r)" % out["js"])
    check(out["overflowX"] <= 0, "the page is %d px wider than the 1280 px window" % out["overflowX"])
    check(out["clipped"] == [], "chart text outside its chart: %s" % out["clipped"][:5])
    for bad in ("NaN", "undefined", "Infinity", "[object", "null"):
        check(bad not in out["text"], "the page shows %r" % bad)
    # Our own three scripts (head probe, page, end probe) and nothing injected by the input.
    check(out["scripts"] == 3, "%d script elements in the DOM, expected 3" % out["scripts"])
    check(out["foreign"] == 0, "%d elements in the DOM that load something or carry a handler" % out["foreign"])

    ranks = sorted(rep["ranks"], key=lambda x: x["rank"])
    stragglers = rep.get("stragglers")
    # Verdict names the straggler (or says there is none).
    if stragglers:
        for s in stragglers:
            check(("Rank %d " % s["rank"]) in out["verdict"], "verdict %r does not name rank %d" %
                  (out["verdict"], s["rank"]))
            check("is a straggler" in out["verdict"], "verdict lacks 'is a straggler'")
    elif stragglers == []:
        check(out["verdict"].startswith("No straggler"), "verdict %r is not 'No straggler'" % out["verdict"])

    # Per-rank comm vs wait bars: one per rank, widths proportional to the values.
    if any(x.get("comm_time_ns", 0) > 0 for x in ranks):
        check("chart-rank-time" in out["svgs"], "no per-rank time chart")
        bars = out["bars"]["chart-rank-time"]
        check([int(b["rank"]) for b in bars] == [x["rank"] for x in ranks],
              "rank-time bars %s, expected one per rank in order" % [b["rank"] for b in bars])
        scale = None
        for b, x in zip(bars, ranks):
            comm = x.get("comm_time_ns") or 0
            wait = min(x.get("wait_time_ns") or 0, comm)
            segs = {s["cls"]: s for s in b["segs"]}
            check(set(segs) == {"seg seg-wait", "seg seg-rest"}, "rank %s bar segments %s" % (b["rank"], list(segs)))
            check(segs["seg seg-wait"]["v"] == wait and segs["seg seg-rest"]["v"] == comm - wait,
                  "rank %s bar values differ from the fixture" % b["rank"])
            if comm > 0:
                px_per_ns = (segs["seg seg-wait"]["w"] + segs["seg seg-rest"]["w"]) / comm
                scale = scale or px_per_ns
                # Same scale for every bar, to well under a pixel over the longest bar.
                check(abs(px_per_ns - scale) * comm < 0.5, "rank %s bar length is off the common scale" % b["rank"])
                check(abs(segs["seg seg-wait"]["w"] - wait * scale) < 0.5, "rank %s wait segment length" % b["rank"])
            check(("rank %d" % x["rank"]) in b["title"], "rank %s bar title %r" % (b["rank"], b["title"]))

    # Breakdown bars: one per rank that has a breakdown or an overlap.
    with_bd = [x for x in ranks if x.get("breakdown") is not None or x.get("overlap") is not None]
    if with_bd:
        bars = out["bars"]["chart-breakdown"]
        check([int(b["rank"]) for b in bars] == [x["rank"] for x in with_bd], "breakdown bars per rank")
        for b, x in zip(bars, with_bd):
            bd = x.get("breakdown") or {}
            want = [bd.get(k) or 0 for k in ("compute_ns", "exposed_comm_ns", "memory_ns", "idle_ns")]
            check([s["v"] for s in b["segs"]] == [v for v in want if v > 0],
                  "rank %s breakdown segments %s, want %s" % (b["rank"], [s["v"] for s in b["segs"]], want))
            if x.get("overlap") is not None:
                check(("overlap %.1f%%" % (100 * x["overlap"])) in b["title"], "rank %s overlap title" % b["rank"])
    else:
        check("chart-breakdown" not in out["svgs"], "a breakdown chart without breakdown data")

    # Lateness heat map: rows x bins cells, values from the fixture, colour darkening with the value.
    late = rep.get("lateness")
    if late and late.get("bins") and late.get("ranks"):
        bins = late["bins"]
        rows = sorted(late["ranks"], key=lambda x: x["rank"])
        band = -(-len(rows) // 256)
        nrows = -(-len(rows) // band)
        check(out["heatRows"] == nrows, "%d heat map rows, expected %d" % (out["heatRows"], nrows))
        check(len(out["cells"]) == nrows * bins, "%d heat map cells, expected %d x %d" %
              (len(out["cells"]), nrows, bins))
        for c in out["cells"]:
            check(c["w"] > 0 and c["h"] > 0, "a heat map cell is not visible: %s" % c)
            check(c["title"], "heat map cell without a title")
        if band == 1:
            for c in out["cells"]:
                row = next(x for x in rows if x["rank"] == int(c["rank"]))
                v = row["mean_lateness_ns"][int(c["bin"])]
                if v is None:
                    check(c["v"] is None and "no instance" in c["title"], "null cell shown as a value: %s" % c)
                else:
                    check(float(c["v"]) == v, "cell rank %s bin %s holds %s, fixture %s" % (c["rank"], c["bin"],
                                                                                        c["v"], v))
                    check(c["title"].startswith("rank %s " % c["rank"]), "cell title %r" % c["title"])
        valued = sorted((float(c["v"]), luminance(c["fill"])) for c in out["cells"] if c["v"] is not None)
        # The ideal (unrounded) colour darkens monotonically, but each 8-bit channel is rounded by up
        # to 0.5, which moves luminance by at most 0.5 x (0.2126 + 0.7152 + 0.0722) = 0.5; two nearly
        # equal values may therefore come out up to 1.0 apart in the wrong order (seen in CI: blue
        # rises between YlOrRd's 7th and 8th stops). Anything beyond that is a real inversion.
        for (v1, l1), (v2, l2) in zip(valued, valued[1:]):
            check(l2 <= l1 + 1.0 + 1e-6, "a larger lateness (%g) is drawn lighter than a smaller one (%g)" % (v2, v1))
        if len(valued) > 1 and valued[-1][0] > valued[0][0]:
            check(valued[-1][1] < valued[0][1] - 50, "the colour scale barely changes")
    else:
        check("chart-lateness" not in out["svgs"], "a heat map without lateness data")

    # Step-time chart (metrics.md §10): one column per step in order, heights on one scale (the
    # step's time, split into the mean wait and the rest), the steps with a straggler marked.
    steps = rep.get("steps") or []
    if steps and len(steps) <= 240:
        check("chart-step-time" in out["svgs"], "no step-time chart")
        cols = out["stepCols"]
        check([int(c["step"]) for c in cols] == [s["step"] for s in steps],
              "step columns %s, expected one per step in order" % [c["step"] for c in cols])
        scale = None
        for c, s in zip(cols, steps):
            want = s.get("straggler")
            check((c["straggler"] is None and want is None) or (want is not None and int(c["straggler"]) == want),
                  "step %s column straggler %s, fixture %s" % (c["step"], c["straggler"], want))
            segs = {g["cls"]: g for g in c["segs"]}
            check(set(segs) == {"seg seg-wait", "seg seg-rest"}, "step %s segments %s" % (c["step"], list(segs)))
            total = s["max_ns"]
            wait = min(s["wait_ns"] / len(s["duration_ns"]), total)
            check(abs(segs["seg seg-wait"]["v"] - wait) < 1e-6 * max(1, wait) and
                  abs(segs["seg seg-rest"]["v"] - (total - wait)) < 1e-6 * max(1, total),
                  "step %s column values differ from the fixture" % c["step"])
            px_per_ns = (segs["seg seg-wait"]["h"] + segs["seg seg-rest"]["h"]) / total
            scale = scale or px_per_ns
            check(abs(px_per_ns - scale) * total < 0.5, "step %s column height is off the common scale" % c["step"])
            check(segs["seg seg-wait"]["w"] > 0, "step %s column is not visible" % c["step"])
            check(c["title"].startswith("step %d: " % s["step"]), "step %s title %r" % (c["step"], c["title"]))
        marked = [s for s in steps if s.get("straggler") is not None]
        for s in marked:
            check(("rank %d" % s["straggler"]) in out["text"], "the straggler of step %d is not labelled" % s["step"])
    elif not steps:
        check("chart-step-time" not in out["svgs"], "a step-time chart without steps")

    # Sortable rank table: ascending, then descending, by wait (missing values last).
    if ranks and "sortAsc" in out:
        # Empty cells come back as null (NaN in JSON); they must sort after every value.
        for key, rev in (("sortAsc", False), ("sortDesc", True)):
            vals = out[key]
            got = [v for v in vals if v is not None]
            check(vals[:len(got)] == got, "%s: empty cells not last: %s" % (key, vals))
            check(got == sorted(got, reverse=rev), "%s by wait gave %s" % (key, got))
        check(out["sortAttr"] == "ascending", "aria-sort not set")

    if a.hostile:
        # The markup in the input shows as text.
        for s in ("<script>alert(1)</script>", "evil&co</title>", "<b>allreduce</b>"):
            check(s in out["text"], "hostile string %r is not shown as text" % s)

    if a.screenshot:
        p = run_chromium(a.chromium, "file://" + os.path.abspath(page),
                         ["--screenshot=" + os.path.abspath(a.screenshot), "--window-size=1280,2400"], a.work)
        check(p.returncode == 0 and os.path.getsize(a.screenshot) > 0, "screenshot failed")
    print("ok: %s (%d rank bars, %d heat map cells)" % (os.path.basename(a.fixture),
                                                         len(out["bars"].get("chart-rank-time", [])),
                                                         len(out["cells"])))


if __name__ == "__main__":
    main()
