#!/usr/bin/env python3
"""Browser test of the memory timeline page (`commprof export --format memory-html`): writes the
planted allocation pattern with make_memory_profile (tests/e2e/make_memory_profile.cc states the
truth, restated below), exports the page, loads it from disk in headless Chromium (no network)
and checks what the browser built.

A copy of the page gets two scripts added, as check_html_report.py does: one at the top of <head>
recording script errors and alert() calls, and one at the end of <body> that measures the page
(each chart's plot box and peak marker, the axis, overflow, the visible text), moves the pointer
over each peak to read the hover read-out, and writes the results as JSON into a <pre id="probe">
that `chromium --dump-dom` hands back. Chromium is started with the network cut off
(--host-resolver-rules) and the page is checked to reference nothing outside itself.

Expected values come from the planted truth, never from the page: rank r's peak is
(r % 4 + 1) GiB + 4096 B at (5 + 3r) ms on the aligned clock; the axis spans the first record
(1 ms) to the last (the last churn block's free). A marker must sit within 1.5 px of where that
time falls on the plot (the plot is 900 px wide: 1.5 px is under 0.2 % of the span).

--bare R (repeatable) leaves rank R without any allocation record, next to ranks with them: it
has no chart and no peak row, and the page names it. --kineto TRACE instead imports a real torch
trace (commprof import kineto) and takes the truth from its raw [memory] events: per device (CUDA
Device Id, or host) the bytes in use at each Addr, the peak and its time.

Usage: check_memory_timeline.py --commprof BIN --writer BIN --chromium CHROMIUM --work DIR
                                [--ranks N] [--churn K] [--hostile] [--bare R ...] [--kineto TRACE]
                                [--screenshot OUT.png]
"""
import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys

from chromium_probe import check, probe_page, run_chromium

MS = 1_000_000
GIB = 1 << 30
TOLERANCE_PX = 1.5

# The memory page must fetch nothing: on top of the shared offline flags, every host name fails.
NO_HOSTS = ["--host-resolver-rules=MAP * ~NOTFOUND"]

PROBE_SCRIPT = r"""<pre id="probe"></pre><script>(function(){
var out={errors:window.__errors,js:document.documentElement.getAttribute('data-js'),charts:[]};
document.querySelectorAll('#charts .chart-row').forEach(function(row){
  var plot=row.querySelector('rect.plot-area').getBoundingClientRect();
  var m=row.querySelector('line.peak-marker'),c={rank:row.getAttribute('data-rank'),
    device:row.getAttribute('data-device'),left:plot.left,width:plot.width,top:plot.top,
    label:row.querySelector('.chart-label').textContent,areas:row.querySelectorAll('path.area').length,
    clipped:Array.prototype.filter.call(row.querySelectorAll('.chart-label div'),function(e){
      var l=row.querySelector('.chart-label').getBoundingClientRect(),b=e.getBoundingClientRect();
      return e.scrollWidth>e.clientWidth+1||b.bottom>l.bottom+1||b.top<l.top-1;}).map(function(e){return e.textContent;})};
  if(m){var b=m.getBoundingClientRect();c.marker=b.left+b.width/2;
    var d=row.querySelector('circle.peak-dot').getBoundingClientRect();c.dotY=d.top+d.height/2;
    var svg=row.querySelector('svg.mem-chart');
    svg.dispatchEvent(new MouseEvent('mousemove',{clientX:c.marker+1.5,clientY:plot.top+10,bubbles:true}));
    var tip=document.getElementById('tooltip');c.tip=tip.hidden?null:tip.textContent;
    svg.dispatchEvent(new MouseEvent('mouseleave',{bubbles:true}));}
  out.charts.push(c);});
var ticks=document.querySelectorAll('#axis-svg text');out.ticks=ticks.length;
out.tickText=Array.prototype.map.call(ticks,function(e){return e.textContent;});
out.overflowX=document.documentElement.scrollWidth-window.innerWidth;
out.text=document.body.innerText;
out.scripts=document.querySelectorAll('script').length;
out.foreign=document.querySelectorAll(
  'img,iframe,object,embed,link,[src],[href],[srcset],[onerror],[onload]').length;
out.resources=performance.getEntriesByType('resource').map(function(e){return e.name;});
out.peakRows=document.querySelectorAll('#tbl-peaks > tbody > tr').length;
out.title=document.title;
out.tableText=document.getElementById('tbl-peaks').textContent;
document.getElementById('probe').textContent=JSON.stringify(out);
})();</script>"""


def fmt_bytes(b):
    """memory.js's bytes(): the read-out must show this for the planted peak."""
    units, i, v = ["B", "KiB", "MiB", "GiB", "TiB"], 0, float(b)
    while abs(v) >= 1024 and i < len(units) - 1:
        v /= 1024
        i += 1
    return ("%d" % v if i == 0 else "%.2f" % v) + " " + units[i]


def kineto_truth(trace):
    """From the raw trace: the axis (first and last [memory] event) and per device its peak (time,
    bytes, one category) on the trace's clock, by allocation address, in stable ts order."""
    with gzip.open(trace, "rt") if trace.endswith(".gz") else open(trace) as f:
        raw = json.load(f)
    per_dev = {}
    for e in raw["traceEvents"]:
        if e.get("name") == "[memory]" and "Bytes" in e.get("args", {}):
            args = e["args"]
            label = "cuda:%d" % args["Device Id"] if args.get("Device Type") == 1 else "host"
            per_dev.setdefault(label, []).append((round(float(e["ts"]) * 1000), args["Addr"], args["Bytes"]))
    check(per_dev, "the trace has no [memory] events")
    first = min(t for recs in per_dev.values() for t, _, _ in recs)
    last = max(t for recs in per_dev.values() for t, _, _ in recs)
    rank = raw.get("distributedInfo", {}).get("rank", 0)
    peaks = {}
    for label, recs in per_dev.items():
        recs.sort(key=lambda x: x[0])
        live, now, peak, at = {}, 0, 0, None
        for t, addr, b in recs:
            if b >= 0:
                now += b - live.get(addr, 0)
                live[addr] = b
            elif addr in live:
                now -= live.pop(addr)
            if now > peak:
                peak, at = now, t
        peaks[(rank, label)] = (at - first, peak, 1)
    return 0, (last - first) or MS, peaks  # one instant: the page's axis is 1 ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--commprof", required=True)
    ap.add_argument("--writer", required=True)
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--churn", type=int, default=0)
    ap.add_argument("--hostile", action="store_true")
    ap.add_argument("--bare", type=int, action="append", default=[])
    ap.add_argument("--kineto")
    ap.add_argument("--one-instant", action="store_true",
                    help="import a torch trace of one [memory] event: the axis is 1 ms, not 1 ns")
    ap.add_argument("--screenshot")
    a = ap.parse_args()
    if a.one_instant:
        os.makedirs(a.work, exist_ok=True)
        a.kineto = os.path.join(a.work, "..", "one_instant.json")
        with open(a.kineto, "w") as f:
            json.dump({"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": [
                {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
                 "ts": 10, "args": {"Device Type": 1, "Device Id": 0, "Addr": 5, "Bytes": 100}}]}, f)
    if a.kineto and not os.path.exists(a.kineto):
        print("%s not found: skipped" % a.kineto)
        sys.exit(77)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    h5 = os.path.join(a.work, "mem.h5")
    if a.kineto:
        cmd = [a.commprof, "import", "kineto", a.kineto, "-o", h5]
    else:
        cmd = [a.writer, h5, "--ranks", str(a.ranks), "--churn", str(a.churn)] + (["--hostile"] if a.hostile else [])
        for b in a.bare:
            cmd += ["--bare", str(b)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    check(r.returncode == 0, "writing the file failed: " + r.stderr)
    page = os.path.join(a.work, "mem.html")
    r = subprocess.run([a.commprof, "export", h5, "--format", "memory-html", "-o", page, "-q"],
                       capture_output=True, text=True)
    check(r.returncode == 0, "export failed: " + r.stderr)
    with open(page, encoding="utf-8") as f:
        src = f.read()
    # Self-contained: the only URL is the SVG namespace name createElementNS takes (an identifier,
    # never fetched); no CSS url().
    check("https://" not in src and "http://" not in src.replace("'http://www.w3.org/2000/svg'", ""),
          "the page contains a URL")
    check(not re.search(r"url\(", src), "the page loads something through CSS url()")
    size_mb = len(src.encode()) / 1e6
    print("page: %.2f MB" % size_mb)

    # The truth, by chart (rank, label): (peak time, peak bytes, stacked categories).
    if a.kineto:
        start, end, peaks = kineto_truth(a.kineto)
    else:
        start = 1 * MS
        last = max(r for r in range(a.ranks) if r not in a.bare)
        end = ((10 + 3 * a.ranks) * MS + (a.churn - 1) * 10 * MS // a.churn + 50_000 if a.churn
               else (5 + 3 * last + 3) * MS)
        peaks = {(r, "cuda:0"): ((5 + 3 * r) * MS, (r % 4 + 1) * GIB + 4096, 3 if r == 1 else 2)
                 for r in range(a.ranks) if r not in a.bare}

    out = probe_page(a.chromium, src, PROBE_SCRIPT, a.work, NO_HOSTS)
    if a.screenshot:
        run_chromium(a.chromium, "file://" + os.path.abspath(page),
                     NO_HOSTS + ["--screenshot=" + os.path.abspath(a.screenshot)], a.work)

    check(out["errors"] == [], "script errors or alerts in the page: %s" % out["errors"])
    check(out["js"] == "ready", "the page's script did not finish (data-js=%r)" % out["js"])
    check(out["overflowX"] <= 0, "the page is %d px wider than the 1280 px window" % out["overflowX"])
    check(out["resources"] == [], "the page fetched %s" % out["resources"][:5])
    # Ours: the data, the drawing code, plus the two probes; nothing injected by the file's strings.
    check(out["scripts"] == 4, "%d script elements in the DOM, expected 4" % out["scripts"])
    check(out["foreign"] == 0, "%d elements that load something or carry a handler" % out["foreign"])
    for bad in ("NaN", "undefined", "Infinity", "[object"):
        check(bad not in out["text"], "the page shows %r" % bad)
    check(out["ticks"] >= 3, "the shared axis has %d labels" % out["ticks"])
    check(all(len(t.split(" ")[0].partition(".")[2]) <= 3 for t in out["tickText"]),
          "axis labels finer than a microsecond: %s" % out["tickText"])
    check(out["peakRows"] == len(peaks), "%d rows in the peak table, expected %d" % (out["peakRows"], len(peaks)))
    if a.bare:
        want = "without any: " + ", ".join(str(b) for b in sorted(a.bare))
        check(want in out["text"], "the page does not name the ranks without records (%r)" % want)

    charts = out["charts"]
    check([(int(c["rank"]), c["device"]) for c in charts] == sorted(peaks),
          "charts %s, expected %s" % ([(c["rank"], c["device"]) for c in charts], sorted(peaks)))
    left, width = charts[0]["left"], charts[0]["width"]
    check(abs(width - 900) < 0.5, "plot width %.1f px, expected 900" % width)
    worst = 0.0
    for c in charts:
        r = int(c["rank"])
        t, b, areas = peaks[(r, c["device"])]
        # Same x scale everywhere: every plot starts at the same x with the same width.
        check(abs(c["left"] - left) < 0.5 and abs(c["width"] - width) < 0.5, "rank %d: plot box differs" % r)
        check("marker" in c, "rank %d: no peak marker" % r)
        check(c["clipped"] == [], "rank %d: label lines cut off: %s" % (r, c["clipped"]))
        want = left + (t - start) / (end - start) * width
        worst = max(worst, abs(c["marker"] - want))
        check(abs(c["marker"] - want) <= TOLERANCE_PX,
              "rank %d: peak marker at x=%.2f, planted %d ms is at x=%.2f" % (r, c["marker"], t // MS, want))
        # The dot at the top of the chart: its own peak is its full height (4 px headroom).
        check(abs(c["dotY"] - (c["top"] + 4)) <= TOLERANCE_PX, "rank %d: peak dot at y=%.1f" % (r, c["dotY"]))
        check(c["areas"] == areas, "rank %d: %d stacked categories, expected %d" % (r, c["areas"], areas))
        tip = c["tip"] or ""
        # (A busy real trace may change within the pixel the pointer is on: its read-out is checked
        # for a time only.)
        check(a.kineto or fmt_bytes(b) + " in use" in tip, "rank %d: read-out %r lacks %s" % (r, tip, fmt_bytes(b)))
        shown = re.search(r"([0-9.]+) ms:", tip)
        check(shown, "rank %d: read-out %r has no time" % (r, tip))
        # The pointer was 1.5 px right of the marker (Chromium truncates a synthetic clientX to an
        # integer, so 0.5 to 1.5 px): the time shown is within 2 px of the planted time.
        check(abs(float(shown.group(1)) * MS - (t - start)) <= 2 * (end - start) / width,
              "rank %d: read-out time %s ms, planted %.3f ms" % (r, shown.group(1), (t - start) / MS))
        records = 4 + 2 * a.churn
        if records > 1000 and not a.kineto:  # the page's default --max-points
            check("of %d points" % records in c["label"], "rank %d: downsampling not said: %r" % (r, c["label"]))
    print("peak markers: worst %.2f px from the planted time (tolerance %.1f px)" % (worst, TOLERANCE_PX))
    if a.hostile:
        check("<img src=x onerror=alert(1)></script><script>alert(2)</script>&amp;" in out["tableText"],
              "the hostile block name is not shown as text")
        check("mem.h5" in out["title"], "title %r" % out["title"])
    print("PASS")


if __name__ == "__main__":
    main()
