"""What the browser tests share: headless Chromium started offline on a page, with a probe script
injected that writes its findings as JSON into <pre id="probe">, handed back by --dump-dom.

check_html_report.py (the report page) and check_memory_timeline.py (the memory page) each bring
their own PROBE_SCRIPT; HEAD_SCRIPT records script errors and alerts before the page's own code runs.
"""

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--window-size=1280,1000",
]

HEAD_SCRIPT = """<script>window.__errors=[];
window.addEventListener('error',function(e){window.__errors.push('error: '+e.message);});
window.alert=function(m){window.__errors.push('alert: '+m);};</script>"""


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def run_chromium(chromium, url, extra, work):
    """One Chromium run on `url` with a throw-away profile under `work`; `extra` flags go last."""
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=work)
    try:
        p = subprocess.run([chromium] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile] + extra + [url],
                           capture_output=True, text=True, timeout=90)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return p


def probe_page(chromium, src, probe_script, work, extra=()):
    """Loads the page `src` (its HTML) from disk with HEAD_SCRIPT and `probe_script` injected and
    returns what the probe wrote (parsed JSON); fails the test when Chromium or the probe did not run."""
    page = os.path.join(work, "probe.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write(src.replace("<head>", "<head>" + HEAD_SCRIPT, 1).replace("</body>", probe_script + "</body>", 1))
    p = run_chromium(chromium, "file://" + os.path.abspath(page), ["--dump-dom"] + list(extra), work)
    check(p.returncode == 0, "chromium exited %d: %s" % (p.returncode, p.stderr[-2000:]))
    m = re.search(r'<pre id="probe">(.*?)</pre>', p.stdout, re.S)
    check(m and m.group(1), "no probe output in the DOM chromium dumped (did the scripts run?)")
    return json.loads(html.unescape(m.group(1)))
