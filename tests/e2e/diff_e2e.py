#!/usr/bin/env python3
"""`commprof diff` and `commprof check --baseline` (docs/metrics.md §13, docs/cli.md) on real
4-rank Open MPI jobs of tests/e2e/diff_program.c: 30 iterations of 10 ms of sleep, MPI_Allreduce,
then MPI_Bcast from rank 0. The plant: COMMPROF_TEST_BCAST_DELAY_MS=50 makes the root sleep 50 ms
before each MPI_Bcast, so ranks 1-3 wait about 50 ms in each Bcast; Allreduce is unchanged.
Every comparison of two real runs uses --noise-floor 10ms (FLOOR below says why).

Truth and margins (a loaded 2-core machine wakes sleepers late, so only what the plant makes
certain is asserted):
- planted: the only collective type (and the only name) with a regressed row is the Bcast, and
  its total_time, mean_duration and wait_time all regressed; its mean duration grew by at least
  0.8 x 3/4 x 50 ms (3 of 4 ranks wait for the root; the 20 % margin is for a rank that reaches
  the Bcast late itself, descheduled) and by no more than 2 x 50 ms; ranks 1-3 each waited at
  least 0.8 x 30 x 50 ms more; the regression lines name it; `diff --max-regression 10%` and
  `check --baseline` exit 1, and the JSON agrees with the text; the reverse diff (slow as the
  base) regresses no Bcast time;
- steady: two runs without the plant pass `diff --max-regression 10%` (exit 0; what moved is
  within the noise guard or under 10 %) and so does `check --baseline`; a file against itself has
  every row unchanged (change exactly 0);
- errors: a missing file, a file that is not a commprof file, a bad --max-regression, an unknown
  metric, a bad --format or --noise-floor, a window the files do not have: each one line naming the file or option,
  with its exit code (2 for both, in diff and in check);
- kineto: a shipped torch.profiler trace imported twice diffs with no regression (skipped, exit 77,
  naming the path, without <repo>/../shared/data/kineto).
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_support import case_arguments, expect, mpirun, run  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402

ITERS, COMPUTE_MS, DELAY_MS = 30, 10, 50
# The noise floor for this machine: 4 ranks on 2 cores, often with a build running, so a call's
# time includes waiting for a core: whole scheduler time slices, up to ~12 ms on 2 cores (CFS:
# 6 ms x (1 + log2 2)). Two unchanged runs differ by that much per call; a 50 ms plant stands far
# above it. The default floor (100 us) is for a machine with a core per rank.
FLOOR = ["--noise-floor", "10ms"]
ENV = {"OMPI_MCA_mpi_yield_when_idle": "1"}  # waiting ranks yield: 4 ranks on 2 cores


def record(ctx, out, delay_ms=0):
    env = dict(ENV)
    if delay_ms:
        env["COMMPROF_TEST_BCAST_DELAY_MS"] = str(delay_ms)
    cmd = [ctx.commprof, "run", "-o", out, "--"] + mpirun(4) + [
        ctx.test_program("diff_program"), "--iters", str(ITERS), "--compute-ms", str(COMPUTE_MS)]
    run(cmd, env=env, check_rc=0, timeout=180)


def diff_json(ctx, base, new, *extra, rc=None):
    p = run([ctx.commprof, "diff", "--format", "json", base, new, *extra], check_rc=rc)
    doc = json.loads(p.stdout)
    expect(doc["schema"] == "commprof-diff" and doc["schema_version"] == 1, f"schema {doc['schema']}")
    return doc, p


def rows_of(doc, group):
    return [r for r in doc["rows"] if r["group"] == group]


def row(doc, group, name, metric):
    for r in doc["rows"]:
        if (r["group"], r["row"], r["metric"]) == (group, name, metric):
            return r
    raise AssertionError(f"no row {group} {name} {metric}")


def lines_fit(text):
    for line in text.splitlines():
        expect(len(line) <= 100, f"line over 100 columns: {line!r}")


def case_planted(ctx):
    base, slow = ctx.path("base.h5"), ctx.path("slow.h5")
    record(ctx, base)
    record(ctx, slow, DELAY_MS)
    doc, p = diff_json(ctx, base, slow, "--max-regression", "10%", *FLOOR, rc=1)
    expect(doc["noise_rule"]["floor_ns"] == 10e6, f"floor {doc['noise_rule']}")
    regressed_types = {r["row"] for r in rows_of(doc, "type") if r["status"] == "regressed"}
    expect(regressed_types == {"bcast"}, f"regressed types {regressed_types}, expected only bcast\n"
           + json.dumps(rows_of(doc, "type"), indent=1))
    for metric in ("total_time", "mean_duration", "wait_time"):
        r = row(doc, "type", "bcast", metric)
        expect(r["status"] == "regressed", f"bcast {metric}: {r}")
        expect(r["noise_guard"]["basis"] == "calls" and r["noise_guard"]["base_n"] >= 5, f"guard {r}")
        expect(r["noise_guard"]["new_p50"] > r["noise_guard"]["base_p90"], f"outside the spread: {r}")
    # By name (the `commprof stats` rows): the same verdict; MPI_Init and MPI_Finalize (4 calls,
    # fewer than the guard needs) are never gated by the blanket limit.
    regressed_names = {r["row"] for r in rows_of(doc, "name") if r["status"] == "regressed"}
    expect(regressed_names == {"mpi/MPI_Bcast"}, f"regressed names {regressed_names}")
    expect(row(doc, "name", "mpi/MPI_Init", "total")["limit"] is None, "MPI_Init is unguarded: no blanket limit")
    mean = row(doc, "type", "bcast", "mean_duration")
    grew = mean["new"] - mean["base"]
    expect(0.75 * DELAY_MS * 1e6 * 0.8 <= grew <= 2 * DELAY_MS * 1e6,
           f"Bcast mean duration grew {grew / 1e6:.2f} ms, expected about 3/4 x {DELAY_MS} ms")
    expect(abs(mean["change"] - grew) < 1e-6 * max(1.0, abs(grew)), "change = new - base")
    expect(abs(mean["relative_change"] - grew / mean["base"]) < 1e-9 * max(1.0, grew / mean["base"]),
           "relative change = change / base")
    expect(row(doc, "type", "bcast", "count")["status"] == "unchanged", "same number of Bcasts")
    expect(row(doc, "type", "bcast", "count")["base"] == ITERS, "one Bcast per iteration")
    expect(doc["regressions"] == sum(r["status"] == "regressed" for r in doc["rows"]), "regressions count")
    # Ranks 1-3 waited for the root in every Bcast (the rank rows' verdict is not asserted: a
    # rank's calls are judged all together, half of them unchanged Allreduces, §13.2).
    for rank in ("1", "2", "3"):
        r = row(doc, "rank", rank, "wait_time")
        expect(r["change"] >= 0.8 * ITERS * DELAY_MS * 1e6, f"rank {rank} waited {r['change'] / 1e6:.1f} ms more")
    # The text: the same verdict, one line per regression naming the row, every line in 100 columns.
    p = run([ctx.commprof, "diff", base, slow, "--max-regression", "10%", *FLOOR], check_rc=1)
    lines_fit(p.stdout)
    reg = [ln.strip() for ln in p.stdout.split("regressions:\n")[1].split("\n\n")[0].splitlines()]
    expect(any(ln.startswith("type bcast total_time:") and "max +10.0%" in ln for ln in reg), "\n".join(reg))
    expect(not any(ln.startswith("type allreduce") for ln in reg), "\n".join(reg))
    # A per-metric limit: only the metric named is gated.
    run([ctx.commprof, "diff", base, slow, "--max-regression", "count=10%"], check_rc=2)
    doc, _ = diff_json(ctx, base, slow, "--max-regression", "transfer_time=10%", *FLOOR)
    expect(all(r["limit"] is None for r in doc["rows"] if r["metric"] != "transfer_time"), "limit only where named")
    # Without a gate nothing is a regression: exit 0, the Bcast shown as worse.
    doc, _ = diff_json(ctx, base, slow, *FLOOR, rc=0)
    expect(row(doc, "type", "bcast", "total_time")["status"] == "worse", "worse without a gate")
    # check --baseline: the same machinery, FAIL lines in check's style.
    p = run([ctx.commprof, "check", slow, "--baseline", base, *FLOOR], check_rc=1)
    expect("FAIL baseline type bcast total_time:" in p.stdout, p.stdout)
    expect("allreduce" not in p.stdout.replace("rank", ""), p.stdout)
    p = run([ctx.commprof, "check", slow, "--baseline", base, "--max", "incomplete=0", *FLOOR], check_rc=1)
    expect(p.stdout.startswith("ok   incomplete = 0"), p.stdout)
    # The other way round, the Bcast got better: no regression.
    doc, _ = diff_json(ctx, slow, base, "--max-regression", "10%", *FLOOR)
    # (the slow run's own spread covers the fast calls too: its root's, so "noise" is possible)
    for metric in ("total_time", "mean_duration", "wait_time"):
        r = row(doc, "type", "bcast", metric)
        expect(r["status"] in ("better", "noise"), f"the reverse improves bcast {metric}: {r}")
    expect(row(doc, "type", "bcast", "wait_time")["status"] in ("better", "noise"), "the reverse waits less")


def case_steady(ctx):
    a, b = ctx.path("a.h5"), ctx.path("b.h5")
    record(ctx, a)
    record(ctx, b)
    doc, p = diff_json(ctx, a, b, "--max-regression", "10%", *FLOOR)
    expect(p.returncode == 0, "two runs without a change fail the gate:\n" + "\n".join(
        f"{r['group']} {r['row']} {r['metric']}: {r['base']} -> {r['new']} guard {r['noise_guard']}"
        for r in doc["rows"] if r["status"] == "regressed"))
    run([ctx.commprof, "check", b, "--baseline", a, *FLOOR], check_rc=0)
    run([ctx.commprof, "check", b, "--baseline", a, "--max-regression", "10%", "--max", "incomplete=0", *FLOOR],
        check_rc=0)
    # The repeatable options take one value each, wherever they stand: a file after one is the file,
    # not a second value of it (`check --max M=V FILE --max ...` said "file is required").
    p = run([ctx.commprof, "check", "--max", "incomplete=0", b, "--max", "clock_violations=1000000",
             "--max-regression", "10%", "--baseline", a, *FLOOR], check_rc=0)
    expect("ok   incomplete = 0" in p.stdout and "ok   clock_violations" in p.stdout, p.stdout)
    run([ctx.commprof, "diff", "--max-regression", "10%", a, b, "--format", "json", *FLOOR], check_rc=0)
    p = run([ctx.commprof, "stats", "--by", "rank", b, "--kinds", "mpi", "--top", "0", "--format", "csv"], check_rc=0)
    expect(len(p.stdout.splitlines()) > 4, f"stats --by before the file:\n{p.stdout}")
    doc, _ = diff_json(ctx, a, a, "--max-regression", "0%", rc=0)
    expect(all(r["status"] == "unchanged" and r["change"] == 0 and r["relative_change"] in (0, None)
               for r in doc["rows"]), "a file against itself changes nothing")
    expect({r["row"] for r in rows_of(doc, "type")} == {"allreduce", "bcast"}, "both types compared")
    expect({r["row"] for r in rows_of(doc, "rank")} == {str(i) for i in range(4)}, "every rank compared")
    p = run([ctx.commprof, "diff", a, a], check_rc=0)
    lines_fit(p.stdout)


def case_errors(ctx):
    a = ctx.path("a.h5")
    record(ctx, a)
    missing, junk = ctx.path("missing.h5"), ctx.path("junk.h5")
    with open(junk, "w") as f:
        f.write("not an HDF5 file\n")

    def fails(cmd, rc, *needles):
        p = run([ctx.commprof] + cmd, check_rc=rc)
        err = p.stderr.strip()
        expect(err.count("\n") == 0 and err, f"{cmd}: one line expected on stderr, got {err!r}")
        for n in needles:
            expect(n in err, f"{cmd}: {n!r} not in {err!r}")

    fails(["diff", a, missing], 2, "missing.h5")
    fails(["diff", missing, a], 2, "missing.h5")
    fails(["diff", a, junk], 2, "junk.h5")
    fails(["diff", a, a, "--max-regression", "ten%"], 2, "--max-regression ten%")
    fails(["diff", a, a, "--max-regression", "-5%"], 2, "--max-regression -5%")
    fails(["diff", a, a, "--max-regression", "latency=5%"], 2, "unknown metric 'latency'", "comm_time")
    fails(["diff", a, a, "--format", "xml"], 2, "--format xml")
    fails(["diff", a, a, "--noise-floor", "5parsecs"], 2, "--noise-floor 5parsecs")
    fails(["check", a, "--baseline", a, "--noise-floor", "-1ms"], 2, "--noise-floor -1ms")
    fails(["diff", a, a, "--window", "3"], 2, "a.h5")
    fails(["check", a, "--baseline", missing], 2, "missing.h5")
    fails(["check", a, "--baseline", junk], 2, "junk.h5")
    fails(["check", a, "--max-regression", "5%"], 2, "--baseline")
    fails(["check", a, "--baseline", a, "--max-regression", "x=5%"], 2, "unknown metric 'x'")
    # A file of which a rank cannot be read: compared on the rest, but a gate gives no verdict on it
    # (the rank's rows read as removed, the totals as changed).
    bad = ctx.path("bad.h5")
    shutil.copy(a, bad)
    with h5py.File(bad, "r+") as f:
        del f["ranks"]["1"]["events"]
        f["ranks"]["1"].create_dataset("events", data=np.arange(3))  # not event records
    run([ctx.commprof, "diff", a, bad], check_rc=0)
    for pair in ((a, bad), (bad, a)):
        p = run([ctx.commprof, "diff", *pair, "--max-regression", "10%"], check_rc=2)
        expect("1 part(s) of the files could not be read and were left out (above): the --max-regression gate "
               "cannot judge" in p.stderr and "bad.h5" in p.stderr, p.stderr)
    p = run([ctx.commprof, "check", a, "--baseline", bad], check_rc=1)
    expect(f"FAIL baseline unreadable: 1 part(s) of {bad} could not be read" in p.stdout, p.stdout + p.stderr)
    p = run([ctx.commprof, "diff", a], check_rc=2)  # usage: NEW missing
    p = run([ctx.commprof, "diff", "--help"], check_rc=0)
    for opt in ("--max-regression", "--format", "--top", "--window", "--noise-floor"):
        expect(opt in p.stdout, f"--help lacks {opt}")


def case_kineto(ctx):
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data", "kineto")
    trace = os.path.join(data, "hta-single-rank-nccl", "nccl_data.json.gz")
    if not os.path.isfile(trace):
        print(f"diff kineto: {os.path.abspath(trace)} not found: skipped")
        sys.exit(77)
    one, two = ctx.path("one.h5"), ctx.path("two.h5")
    run([ctx.commprof, "import", "kineto", trace, "-o", one, "-q"], check_rc=0, timeout=120)
    run([ctx.commprof, "import", "kineto", trace, "-o", two, "-q"], check_rc=0, timeout=120)
    doc, _ = diff_json(ctx, one, two, "--max-regression", "1%", rc=0)
    expect(doc["regressions"] == 0 and doc["rows"], f"{doc['regressions']} regressions of {len(doc['rows'])} rows")
    expect(all(r["status"] == "unchanged" for r in doc["rows"]), "the same trace twice changes nothing")


CASES = {"planted": case_planted, "steady": case_steady, "errors": case_errors, "kineto": case_kineto}

if __name__ == "__main__":
    args, ctx = case_arguments(CASES)
    CASES[args.case](ctx)
    print(f"diff_e2e {args.case}: ok")
