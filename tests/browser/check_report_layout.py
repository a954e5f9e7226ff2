#!/usr/bin/env python3
"""The HTML report's layout at two window widths, in headless Chromium (docs/cli.md#html-report).

At 1400 px every table fits its box (no table wider than the space it is given, no horizontal
scroll of the page). At 800 px the page itself does not scroll sideways (a wide table scrolls
inside its own box), and every chart label is drawn at 10 px or more (a chart keeps its drawn size
and scrolls in its panel rather than shrinking its text), and every table cell's text is at least
11 px.

Usage: check_report_layout.py --render BIN --chromium CHROMIUM --fixture F.json --work DIR
"""
import argparse
import os
import subprocess

from chromium_probe import check, probe_page

PROBE_SCRIPT = r"""<pre id="probe"></pre><script>(function(){
var out={errors:window.__errors,width:window.innerWidth,
  pageOverflow:document.documentElement.scrollWidth-window.innerWidth,tables:[],labels:[],cells:1e9};
document.querySelectorAll('table').forEach(function(t){var box=t.parentNode;
  out.tables.push({id:t.id||'(no id)',table:Math.round(t.getBoundingClientRect().width),
    box:Math.round(box.clientWidth),scroll:box.scrollWidth-box.clientWidth});
  t.querySelectorAll('td,th').forEach(function(c){
    out.cells=Math.min(out.cells,parseFloat(getComputedStyle(c).fontSize));});});
document.querySelectorAll('svg.chart').forEach(function(s){var scale=s.getScreenCTM().a;
  var least=1e9;s.querySelectorAll('text').forEach(function(t){
    least=Math.min(least,parseFloat(getComputedStyle(t).fontSize)*scale);});
  out.labels.push({id:s.id,px:least===1e9?null:Math.round(least*10)/10});});
document.getElementById('probe').textContent=JSON.stringify(out);
})();</script>"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--render", required=True)
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    page = os.path.join(a.work, "report.html")
    r = subprocess.run([a.render, a.fixture, page], capture_output=True, text=True)
    check(r.returncode == 0, "render failed: " + r.stderr)
    with open(page, encoding="utf-8") as f:
        src = f.read()

    wide = probe_page(a.chromium, src, PROBE_SCRIPT, a.work, ["--window-size=1400,1000"])
    check(not wide["errors"], "script errors: %s" % wide["errors"])
    check(wide["width"] == 1400, "the window is %s px wide, not 1400" % wide["width"])
    check(len(wide["tables"]) > 0, "no table on the page")
    for t in wide["tables"]:
        check(t["scroll"] <= 0 and t["table"] <= t["box"] + 1,
              "at 1400 px table %s is %d px in a %d px box (scrolls %d px)" % (t["id"], t["table"], t["box"], t["scroll"]))
    check(wide["pageOverflow"] <= 0, "at 1400 px the page scrolls sideways by %d px" % wide["pageOverflow"])

    narrow = probe_page(a.chromium, src, PROBE_SCRIPT, a.work, ["--window-size=800,1000"])
    check(narrow["width"] == 800, "the window is %s px wide, not 800" % narrow["width"])
    check(narrow["pageOverflow"] <= 0, "at 800 px the page scrolls sideways by %d px" % narrow["pageOverflow"])
    check(len(narrow["labels"]) > 0, "no chart on the page")
    for c in narrow["labels"]:
        check(c["px"] is None or c["px"] >= 10, "at 800 px chart %s draws labels at %s px" % (c["id"], c["px"]))
    check(narrow["cells"] >= 11, "at 800 px table text is %s px" % narrow["cells"])
    print("layout: 1400 px: %d tables fit; 800 px: smallest chart label %s px, table text %s px" %
          (len(wide["tables"]), min(c["px"] for c in narrow["labels"] if c["px"]), narrow["cells"]))


if __name__ == "__main__":
    main()
