#!/usr/bin/env python3
"""`commprof export --format memory-html|memory-json` from the command line (docs/cli.md,
docs/memory-timeline.md): the planted allocation pattern of make_memory_profile recovered through
the CLI, the options (--ranks, --window, --max-points, -o -, default names), every error path with
its message and exit code, and a real torch.profiler trace whose peak is checked against an
independent computation from the raw JSON.

    memory_timeline_cli.py CASE --build build/release --work DIR      (CASE: cli | kineto)
"""
import gzip
import json
import os
import shutil
import sys

import h5py

from e2e_support import case_arguments, expect, run

MS = 1_000_000
GIB = 1 << 30


def planted_peak(r):
    """make_memory_profile's truth: rank r's peak time (aligned ns) and bytes."""
    return (5 + 3 * r) * MS, (r % 4 + 1) * GIB + 4096


def load_json(path):
    with open(path) as f:
        return json.load(f)


def case_cli(ctx):
    writer = ctx.test_program("make_memory_profile")
    h5 = ctx.path("mem.h5")
    run([writer, h5, "--ranks", "4", "--churn", "40"], check_rc=0)

    # Default name beside the input; the planted peaks, categories and live sets.
    run([ctx.commprof, "export", h5, "--format", "memory-json", "-q"], check_rc=0)
    doc = load_json(ctx.path("mem.memory.json"))
    expect(doc["schema"] == "commprof-memory-timeline" and doc["schema_version"] == 1, f"schema {doc['schema']}")
    expect(doc["start_ns"] == 1 * MS, f"start_ns {doc['start_ns']}, planted 1 ms")
    expect(doc["end_ns"] == (10 + 12) * MS + 39 * 10 * MS // 40 + 50_000, f"end_ns {doc['end_ns']}")
    expect([d["rank"] for d in doc["devices"]] == [0, 1, 2, 3], f"charts {[d['rank'] for d in doc['devices']]}")
    for d in doc["devices"]:
        r = d["rank"]
        t, b = planted_peak(r)
        expect(d["peak"]["time_ns"] == t and d["peak"]["bytes"] == b,
               f"rank {r}: peak {d['peak']['bytes']} B at {d['peak']['time_ns']} ns, planted {b} B at {t} ns")
        # rank 1: its big block pinned; its unknown free and churn are device memory, as on every rank
        want_cats = ["pinned", "device", "device_static"] if r == 1 else ["device", "device_static"]
        expect(d["categories"] == want_cats, f"rank {r}: categories {d['categories']}")
        live = d["peak"]["live"]
        expect([a["bytes"] for a in live] == [b - 4096, 4096] and live[1]["name"] == "static_weights",
               f"rank {r}: live {live}")
        expect(d["unmatched_frees"] == 1 and d["allocs"] == 42 and d["frees"] == 42, f"rank {r}: counts")
        expect(d["points"]["records"] == 84 and not d["points"]["downsampled"], f"rank {r}: points {d['points']}")

    # -o - (stdout), --ranks, --max-points.
    p = run([ctx.commprof, "export", h5, "--format", "memory-json", "-o", "-", "--ranks", "1,3", "--max-points", "8"],
            check_rc=0)
    sel = json.loads(p.stdout)
    expect([d["rank"] for d in sel["devices"]] == [1, 3], "--ranks 1,3: charts of other ranks")
    expect(sel["start_ns"] == 1 * MS, "--ranks: the axis starts at the selected ranks' first record")
    for d in sel["devices"]:
        t, b = planted_peak(d["rank"])
        pts = d["points"]
        expect(pts["downsampled"] and len(pts["time_ns"]) <= 8, f"--max-points 8: {len(pts['time_ns'])} points")
        expect(any(tt == t and v == b for tt, v in zip(pts["time_ns"], pts["total"])),
               f"rank {d['rank']}: the peak is not among the downsampled points")

    # --window 0 (0 to 6.5 ms on every rank): rank 0's block is in it (its free is not), rank 1's
    # block (8 ms) is not: its peak is the static block at 1 ms.
    p = run([ctx.commprof, "export", h5, "--format", "memory-json", "-o", "-", "--window", "0"], check_rc=0)
    win = json.loads(p.stdout)
    expect(win["window"] == 0, f"window {win['window']}")
    by_rank = {d["rank"]: d for d in win["devices"]}
    expect(by_rank[0]["peak"]["bytes"] == GIB + 4096 and by_rank[0]["final_bytes"] == GIB + 4096,
           f"--window 0, rank 0: {by_rank[0]['peak']}")
    expect(by_rank[1]["peak"]["bytes"] == 4096 and by_rank[1]["peak"]["time_ns"] == 1 * MS,
           f"--window 0, rank 1: {by_rank[1]['peak']}")

    # A rank without records next to ranks with them: listed in the JSON and named on the page.
    bare = ctx.path("bare.h5")
    run([writer, bare, "--ranks", "4", "--bare", "2"], check_rc=0)
    p = run([ctx.commprof, "export", bare, "--format", "memory-json", "-o", "-", "-q"], check_rc=0)
    doc = json.loads(p.stdout)
    expect(doc["ranks_without_records"] == [2] and [d["rank"] for d in doc["devices"]] == [0, 1, 3],
           f"--bare 2: without {doc['ranks_without_records']}, charts {[d['rank'] for d in doc['devices']]}")
    run([ctx.commprof, "export", bare, "--format", "memory-html", "-o", ctx.path("bare.html")], check_rc=0)
    with open(ctx.path("bare.html"), encoding="utf-8") as f:
        expect("1 rank(s) without any: 2</p>" in f.read(), "the page does not name rank 2 as without records")

    # A torch trace whose [memory] events have no Addr: every block is at address 0, each
    # allocation replacing the one before; the export says the chart is wrong (and still writes it).
    trace = {"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": [
        {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
         "args": {"Device Type": 1, "Device Id": 0, "Bytes": b}} for ts, b in ((10, 100), (20, 200), (30, -100))]}
    with open(ctx.path("noaddr.json"), "w") as f:
        json.dump(trace, f)
    run([ctx.commprof, "import", "kineto", ctx.path("noaddr.json"), "-o", ctx.path("noaddr.h5")], check_rc=0)
    p = run([ctx.commprof, "export", ctx.path("noaddr.h5"), "--format", "memory-json", "-o", "-"], check_rc=0)
    expect("rank 0 cuda:0: 2 allocation records carry no address" in p.stderr, f"no-Addr warning: {p.stderr}")
    p = run([ctx.commprof, "export", h5, "--format", "memory-json", "-o", "-"], check_rc=0)
    expect("no address" not in p.stderr, f"a warning on records with addresses: {p.stderr}")

    # A rank whose events table is damaged: named on stderr, exit 1, the others exported, and the
    # document and page say which rank is not shown.
    dmg = ctx.path("damaged.h5")
    shutil.copy(h5, dmg)
    with h5py.File(dmg, "a") as f:
        del f["ranks/2/events"]
        f["ranks/2/events"] = [1, 2, 3]
    p = run([ctx.commprof, "export", dmg, "--format", "memory-json", "-o", "-"])
    expect(p.returncode == 1 and "/ranks/2/events" in p.stderr, f"damaged rank 2: exit {p.returncode}: {p.stderr}")
    doc = json.loads(p.stdout)
    expect([d["rank"] for d in doc["devices"]] == [0, 1, 3] and doc["unreadable_ranks"] == [2]
           and doc["ranks_without_records"] == [], f"damaged rank 2: {doc['unreadable_ranks']}")
    p = run([ctx.commprof, "export", dmg, "--format", "memory-html", "-o", ctx.path("damaged.html")])
    with open(ctx.path("damaged.html"), encoding="utf-8") as f:
        expect(p.returncode == 1 and "1 rank(s) that could not be read: 2</p>" in f.read(),
               "the page does not name the unreadable rank 2")

    # The page: default name, the same truth in its peak table.
    p = run([ctx.commprof, "export", h5, "--format", "memory-html"], check_rc=0)
    page = ctx.path("mem.memory.html")
    expect(os.path.exists(page) and "memory timeline of 4 chart(s)" in p.stderr, f"html: {p.stderr}")
    expect(not [f for f in os.listdir(ctx.work) if ".tmp-" in f], "a temporary file was left behind")

    # Errors: usage (2) and failures (1), each naming what is at fault; nothing written.
    def error(args, rc, words):
        p = run([ctx.commprof, "export"] + args)
        line = p.stderr.strip()
        expect(p.returncode == rc, f"{args}: exit {p.returncode}, expected {rc}: {line}")
        for w in words:
            expect(w in line, f"{args}: message {line!r} lacks {w!r}")
    error([h5, "--format", "memory-svg"], 2, ["--format memory-svg", "memory-html"])
    error([h5, "--format", "memory-json", "--ranks", "1-"], 2, ["--ranks '1-'"])
    error([h5, "--format", "memory-json", "--ranks", "9"], 2, [h5, "no rank 9"])
    error([h5, "--format", "chrome", "--max-points", "10"], 2, ["--max-points"])
    error([h5, "--format", "memory-json", "--max-points", "-3"], 2, ["--max-points -3", "at least 4"])
    # A bucket keeps 4 points: fewer than 4 could not be honoured (it gave 4 points per chart).
    error([h5, "--format", "memory-json", "--max-points", "2", "-o", ctx.path("mp2.json")], 2,
          ["--max-points 2", "at least 4"])
    expect(not os.path.exists(ctx.path("mp2.json")), "an output was written for --max-points 2")
    error([h5, "--format", "memory-html", "-o", "-"], 2, ["-o -"])
    error([ctx.path("absent.h5"), "--format", "memory-json"], 2, ["absent.h5"])  # unreadable input: 2
    junk = ctx.path("junk.h5")
    with open(junk, "w") as f:
        f.write("not hdf5\n")
    error([junk, "--format", "memory-json"], 2, ["junk.h5"])
    error([h5, "--format", "memory-json", "--window", "7", "-o", ctx.path("w7.json")], 1, ["window 7"])
    expect(not os.path.exists(ctx.path("w7.json")), "an output was written for a missing window")
    empty = ctx.path("empty.h5")
    run([writer, empty, "--ranks", "2", "--no-memory"], check_rc=0)
    error([empty, "--format", "memory-html", "-o", ctx.path("empty.html")], 1,
          [empty, "no allocation or free records"])
    expect(not os.path.exists(ctx.path("empty.html")), "a page was written for a file without records")
    unwritable = os.path.join(ctx.path("no-such-dir"), "x.json")
    # The output asked for and why (found before the work), not the temporary file written beside it.
    error([h5, "--format", "memory-json", "-o", unwritable], 1,
          ["cannot write " + unwritable, "directory " + ctx.path("no-such-dir") + " does not exist"])
    p = run([ctx.commprof, "export", h5, "--format", "memory-json", "-o", unwritable])
    expect(".tmp-" not in p.stderr, f"the message names the temporary file: {p.stderr.strip()}")


def case_kineto(ctx):
    here = os.path.dirname(os.path.abspath(__file__))
    trace = os.path.join(here, "..", "..", "..", "shared", "data", "kineto", "hta-single-rank-nccl",
                         "df_index_resolver.json.gz")
    if not os.path.exists(trace):
        print(f"kineto: {os.path.abspath(trace)} not found: skipped")
        sys.exit(77)
    h5 = ctx.path("k.h5")
    run([ctx.commprof, "import", "kineto", trace, "-o", h5], check_rc=0)
    run([ctx.commprof, "export", h5, "--format", "memory-json", "-o", ctx.path("k.json")], check_rc=0)
    doc = load_json(ctx.path("k.json"))

    # Independently: the raw [memory] instants per device (CUDA: Device Id; CPU: host), in file
    # order sorted stably by ts, each allocation live at its Addr until freed there.
    with gzip.open(trace, "rt") as f:
        raw = json.load(f)
    per_dev = {}
    for e in raw["traceEvents"]:
        if e.get("ph") != "i" or e.get("name") != "[memory]" or "Bytes" not in e.get("args", {}):
            continue
        a = e["args"]
        dev = a["Device Id"] if a.get("Device Type") == 1 else None
        per_dev.setdefault(dev, []).append((float(e["ts"]), a["Addr"], a["Bytes"], a.get("Total Allocated")))
    expect(per_dev, "the trace has no [memory] events")
    for dev, recs in sorted(per_dev.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        recs.sort(key=lambda x: x[0])
        live, now, peak, peak_ts = {}, 0, 0, None
        for ts, addr, b, _ in recs:
            if b >= 0:
                now += b - live.get(addr, 0)
                live[addr] = b
            elif addr in live:
                now -= live.pop(addr)
            if now > peak:
                peak, peak_ts = now, ts
        first_ts, _, first_b, first_total = recs[0]
        charts = [d for d in doc["devices"] if d["device"] == dev]
        expect(len(charts) == 1, f"device {dev}: {len(charts)} charts")
        d = charts[0]
        expect(d["peak"]["bytes"] == peak, f"device {dev}: peak {d['peak']['bytes']} B, independently {peak} B")
        expect(d["allocs"] + d["frees"] == len(recs), f"device {dev}: {d['allocs']}+{d['frees']} records, raw {len(recs)}")
        # Times: the import puts the trace on its own origin; compare the peak's distance from the
        # device's first record, in ns (Kineto ts are us with ns decimals).
        got = d["peak"]["time_ns"] - d["points"]["time_ns"][0]
        want = round((peak_ts - first_ts) * 1000)
        expect(abs(got - want) <= 1, f"device {dev}: peak {got} ns after the first record, independently {want} ns")
        if first_total:
            expect(d["baseline_bytes"] == first_total - first_b,
                   f"device {dev}: baseline {d['baseline_bytes']}, Total Allocated says {first_total - first_b}")
    print(f"kineto: {sum(len(r) for r in per_dev.values())} [memory] events on {len(per_dev)} device(s) agree")


CASES = {"cli": case_cli, "kineto": case_kineto}

if __name__ == "__main__":
    args, ctx = case_arguments(CASES)
    try:
        CASES[args.case](ctx)
    except AssertionError as e:
        print(f"FAIL {args.case}: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"PASS {args.case}")
