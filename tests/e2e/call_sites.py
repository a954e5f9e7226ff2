#!/usr/bin/env python3
"""Call sites (`commprof run --stacks`, issue 17 item 4): a real 4-rank Open MPI job of
call_sites_program.c, whose truth is planted in the source.

slow_site: two MPI_Allreduce call sites in two functions; rank 1 sleeps 40 ms before the one marked
  SLOW_ALLREDUCE every iteration, so the other ranks wait there ~40 ms each time. The report's
  call_sites must put exactly that line of call_sites_program.c first by wait, with calls =
  ITERS x 4 (the fast site, MPI_Iallreduce and its MPI_Wait likewise ITERS x 4 each, at their
  marked lines); the file's /stacks table names the program's source with the same line at depth 0
  and slow_sum at depth 0 / main further out; the Chrome trace's MPI_Allreduce slices carry the
  stack, the call site first.
off: without --stacks no CALL_SITE (31) or STACK_FRAME (32) event exists, no /stacks table and no
  call_sites in the report.
missing_module: the ranks spool with COMMPROF_STACKS=8 running a copy of the program that is
  deleted before `commprof merge`: the merge succeeds, says once that a module file is not
  readable, and the /stacks rows of that module keep its path and a non-zero address (no file,
  line 0), as do the report's call sites.
nccl: NCCL API calls through the real profiler plugin (driven by tests/nccl/nccl_profiler_driver):
  each kind 16 event joins one CALL_SITE; depth 0 is the driver's code, not the plugin's.

    call_sites.py CASE --build build/release --work DIR
"""
import json
import os
import re
import shutil
import sys

import h5py
import numpy as np

from e2e_support import case_arguments, expect, mpirun, run

ITERS = 12
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "call_sites_program.c")
KIND_CALL_SITE = 31
KIND_STACK_FRAME = 32


def marker_line(marker):
    with open(SOURCE) as f:
        for i, text in enumerate(f, start=1):
            if f"/* {marker} */" in text:
                return i
    raise AssertionError(f"marker {marker} not in {SOURCE}")


def text(b):
    return b.decode() if isinstance(b, bytes) else str(b)


def report_json(ctx, out):
    p = run([ctx.commprof, "report", "--format", "json", out], check_rc=0)
    return json.loads(p.stdout)


def site(sites, op, line):
    found = [s for s in sites if s["op"] == op and s["line"] == line and s["file"].endswith("call_sites_program.c")]
    expect(len(found) == 1, f"one {op} call site at line {line}: {json.dumps(sites, indent=1)}")
    return found[0]


def case_slow_site(ctx):
    out = ctx.path("stacks.h5")
    exe = ctx.test_program("call_sites_program")
    p = run([ctx.commprof, "run", "--stacks", "-o", out, "--"] + mpirun(4) + [exe, str(ITERS)], check_rc=0,
            timeout=170)
    expect("call stacks:" not in p.stderr, f"symbolization had nothing to say:\n{p.stderr}")
    slow, fast = marker_line("SLOW_ALLREDUCE"), marker_line("FAST_ALLREDUCE")
    ireduce, wait = marker_line("IALLREDUCE"), marker_line("WAIT")

    rep = report_json(ctx, out)
    sites = rep["call_sites"]
    top = sites[0]
    expect(top["op"] == "MPI_Allreduce" and top["line"] == slow and top["file"].endswith("call_sites_program.c")
           and top["function"] == "slow_sum", f"top call site by wait is the slow MPI_Allreduce line {slow}: {top}")
    expect(top["calls"] == ITERS * 4 and top["ranks"] == 4, f"slow site calls {top['calls']}, ranks {top['ranks']}")
    # Ranks 0, 2 and 3 wait ~40 ms per iteration for rank 1: at least half of that on a loaded machine.
    expect(top["wait_ns"] >= 3 * ITERS * 20_000_000, f"slow site wait {top['wait_ns']} ns")
    expect(top["bytes"] == ITERS * 4 * 8, f"slow site bytes {top['bytes']}")
    for op, line, fn in (("MPI_Allreduce", fast, "fast_sum"), ("MPI_Iallreduce", ireduce, "overlapped_sum"),
                         ("MPI_Wait", wait, "overlapped_sum")):
        s = site(sites, op, line)
        expect(s["calls"] == ITERS * 4 and s["function"] == fn, f"{op} line {line}: {s}")
        expect(s["wait_ns"] < top["wait_ns"], f"{op} line {line} waits less than the slow site: {s}")
    expect(any("main (" in fr and "call_sites_program.c" in fr for fr in top["stack"]),
           f"the slow site's stack reaches main: {top['stack']}")

    # The text and HTML reports rank the same site first.
    p = run([ctx.commprof, "report", out], check_rc=0)
    section = p.stdout[p.stdout.index("call sites (top"):]
    first = section.splitlines()[2]
    expect(f"call_sites_program.c:{slow}" in first and "MPI_Allreduce" in first, f"text report:\n{section}")
    html = ctx.path("report.html")
    run([ctx.commprof, "report", "--format", "html", "-o", html, out], check_rc=0)
    page = open(html).read()
    expect('id="call-sites"' in page and f"call_sites_program.c:{slow}" in page, "HTML call-site table")

    with h5py.File(out, "r") as f:
        expect("stacks" in f, "the file has /stacks")
        rows = f["stacks"][...]
        for rank in range(4):
            ev = f["ranks"][str(rank)]["events"][...]
            sites_ev = ev[ev["kind"] == KIND_CALL_SITE]
            # 3 MPI_Allreduce-like calls + 1 MPI_Wait per iteration
            expect(len(sites_ev) == ITERS * 4, f"rank {rank}: {len(sites_ev)} CALL_SITE events")
            ids = set(sites_ev["seq"].tolist())
            mine = rows[rows["rank"] == rank]
            expect(ids == set(mine["stack_id"].tolist()), f"rank {rank}: every stack id has frames")
            expect(len(ids) == 4, f"rank {rank}: 4 unique stacks, got {sorted(ids)}")
            top0 = mine[(mine["depth"] == 0) & (mine["line"] == slow)]
            expect(len(top0) == 1 and text(top0[0]["function"]) == "slow_sum"
                   and text(top0[0]["file"]).endswith("call_sites_program.c")
                   and text(top0[0]["module"]) == os.path.realpath(exe), f"rank {rank}: /stacks slow frame {top0}")
            frames = ev[ev["kind"] == KIND_STACK_FRAME]
            expect(len(frames) == len(mine), f"rank {rank}: one /stacks row per STACK_FRAME event")

    trace = ctx.path("trace.json")
    run([ctx.commprof, "export", "-q", "-o", trace, out], check_rc=0)
    events = json.load(open(trace))["traceEvents"]
    allreduce = [e for e in events if e.get("ph") == "X" and e.get("name") == "MPI_Allreduce"]
    expect(len(allreduce) == ITERS * 2 * 4, f"{len(allreduce)} MPI_Allreduce slices")
    with_slow = [e for e in allreduce if f"call_sites_program.c:{slow})" in e["args"].get("stack", [""])[0]]
    expect(len(with_slow) == ITERS * 4, f"{len(with_slow)} slices carry the slow call site first")
    expect(all("stack" in e["args"] for e in allreduce), "every MPI_Allreduce slice carries its stack")
    expect(not any(e.get("cat") in ("call_site", "stack_frame") for e in events), "no CALL_SITE/STACK_FRAME slices")


def case_off(ctx):
    out = ctx.path("plain.h5")
    exe = ctx.test_program("call_sites_program")
    run([ctx.commprof, "run", "-o", out, "--"] + mpirun(4) + [exe, "3"], check_rc=0)
    with h5py.File(out, "r") as f:
        expect("stacks" not in f, "no /stacks without --stacks")
        for rank in range(4):
            ev = f["ranks"][str(rank)]["events"][...]
            expect(not np.isin(ev["kind"], [KIND_CALL_SITE, KIND_STACK_FRAME]).any(), f"rank {rank}: no stack events")
    expect(report_json(ctx, out)["call_sites"] == [], "no call sites in the report")
    p = run([ctx.commprof, "run", "--stacks=65", "-o", ctx.path("bad.h5"), "--", exe, "1"])
    expect(p.returncode == 2 and "--stacks" in p.stderr, f"--stacks=65 refused: rc {p.returncode}\n{p.stderr}")


def case_missing_module(ctx):
    exe = ctx.path("gone_program")
    shutil.copy(ctx.test_program("call_sites_program"), exe)
    spool = ctx.path("spool")
    env = {"COMMPROF_AGGREGATOR": "", "COMMPROF_SPOOL_DIR": spool, "COMMPROF_JOB_ID": "stacksjob",
           "COMMPROF_SECRET": "s3cret", "COMMPROF_STACKS": "8"}
    cmd = mpirun(4)
    for k in list(env) + ["LD_PRELOAD"]:
        cmd += ["-x", k]
    env["LD_PRELOAD"] = ctx.library
    run(cmd + [exe, "2"], env=env, check_rc=0)
    os.remove(exe)
    out = ctx.path("merged.h5")
    p = run([ctx.commprof, "merge", spool, "-o", out], check_rc=0)
    notes = [ln for ln in p.stderr.splitlines() if "not readable here" in ln]
    expect(len(notes) == 1 and "gone_program" in notes[0], f"said once:\n{p.stderr}")
    with h5py.File(out, "r") as f:
        rows = f["stacks"][...]
        gone = rows[np.array([text(m).endswith("/gone_program") for m in rows["module"]])]
        expect(len(gone) > 0, "frames of the deleted program are stored")
        expect(all(text(r["file"]) == "" and r["line"] == 0 and r["address"] > 0 for r in gone),
               f"module + offset kept: {gone[:3]}")
        expect(set(gone[gone["depth"] == 0]["rank"].tolist()) == {0, 1, 2, 3}, "every rank's call sites")
    sites = report_json(ctx, out)["call_sites"]
    expect(len(sites) > 0 and all(s["module"].endswith("/gone_program") and s["address"] > 0 and s["file"] == ""
                                  for s in sites), f"call sites by module + offset: {sites}")


def case_nccl(ctx):
    """NCCL API calls through the real profiler plugin, driven as NCCL 2.28 does (tests/nccl): every
    kind 16 event has its CALL_SITE, and the report's ncclAllReduce site is the driver's own
    function that called the plugin (the plugin and libcommprof frames are skipped)."""
    plugin = os.path.join(ctx.build, "nccl_hooks", "libnccl-profiler-commprof.so")
    driver = os.path.join(ctx.build, "tests", "nccl", "nccl_profiler_driver")
    if not (os.path.exists(plugin) and os.path.exists(driver)):
        print(f"nccl: SKIPPED: {plugin} or {driver} is not built")
        sys.exit(77)
    iters = 5
    out = ctx.path("nccl.h5")
    run([ctx.commprof, "run", "-q", "--stacks=4", "-o", out, "--"] + mpirun(4) +
        [driver, "--plugin", plugin, "--abi", "v5", "--iters", str(iters), "--count", "1024"], check_rc=0)
    with h5py.File(out, "r") as f:
        for rank in range(4):
            ev = f["ranks"][str(rank)]["events"][...]
            api = ev[ev["kind"] == 16]
            sites = ev[(ev["kind"] == KIND_CALL_SITE) & (ev["subtype"] == 16)]
            expect(len(api) > 0 and len(sites) == len(api), f"rank {rank}: {len(api)} NCCL API, {len(sites)} sites")
            joined = set(zip(sites["start_ns"].tolist(), sites["comm_id"].tolist()))
            expect(all((int(a["start_ns"]), int(a["comm_id"])) in joined for a in api), f"rank {rank}: every join")
    sites = [s for s in report_json(ctx, out)["call_sites"] if s["op"] == "ncclAllReduce"]
    expect(len(sites) == 1 and sites[0]["calls"] == iters * 4 and sites[0]["file"].endswith("nccl_profiler_driver.c")
           and len(sites[0]["stack"]) == 4, f"ncclAllReduce call site: {sites}")


CASES = {"slow_site": case_slow_site, "off": case_off, "missing_module": case_missing_module, "nccl": case_nccl}

if __name__ == "__main__":
    args, ctx = case_arguments(CASES)
    try:
        CASES[args.case](ctx)
    except AssertionError as e:
        print(f"FAIL {args.case}: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"PASS {args.case}")
