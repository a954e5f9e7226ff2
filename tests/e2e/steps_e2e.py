#!/usr/bin/env python3
"""The step table (docs/metrics.md §10) and `--window K` (docs/cli.md) on a real 4-rank Open MPI
job: tests/e2e/step_program.c marks 10 steps with commprof_step(n), each 60 ms of sleep then an
MPI_Allreduce, and rank 2 sleeps 80 ms more before its allreduce in step 7 only.

Truth and tolerances (a loaded 2-core machine wakes sleepers late, so only facts the plant makes
certain are asserted):
- steps: exactly 0..9, each marked by the 4 ranks; every step lasts at least its 60 ms of sleep;
- step 7 is the slowest, at least 60 + 80 ms, and its straggler is rank 2, charged at least
  3 x 80 ms x 0.85 of delay cost (3 ranks waited for it);
- no other step names a straggler (their lateness is the scheduler's jitter: a rank would have to
  be about 8 ms late, 3 x 8 ms of 4 x 60 rank-ms, to reach the rule's 10 %);
- `commprof check --max step_time_p99=…`: the p99 of 10 steps is the slowest step's time, so a
  limit under it fails (exit 1) and one above it passes (exit 0), in ns and with a unit;
- `--window K`: with two WINDOW records added to the file (h5py, as a --schedule run writes them,
  kind 30), `report --window 1` sees only window 1's steps and its collectives; a window the file
  does not have, or a file without windows, is an error naming the file (exit 1; check: 2).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_support import case_arguments, expect, mpirun, run  # noqa: E402

try:
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"steps_e2e: needs h5py and numpy for /usr/bin/python3: {e}")
    sys.exit(1)

STEPS, COMPUTE_MS, SLOW_RANK, SLOW_STEP, SLOW_MS = 10, 60, 2, 7, 80
# Yielding waits: 4 ranks on 2 cores do not steal each other's CPU while they wait.
ENV = {"OMPI_MCA_mpi_yield_when_idle": "1"}
KIND_WINDOW, KIND_STEP = 30, 9


def record(ctx, out):
    cmd = [ctx.commprof, "run", "-o", out, "--"] + mpirun(4) + [
        ctx.test_program("step_program"), "--steps", str(STEPS), "--compute-ms", str(COMPUTE_MS), "--slow-rank",
        str(SLOW_RANK), "--slow-step", str(SLOW_STEP), "--slow-ms", str(SLOW_MS)]
    run(cmd, env=ENV, check_rc=0, timeout=180)


def report(ctx, out, *extra, rc=0):
    p = run([ctx.commprof, "report", "--format", "json", out, *extra], check_rc=rc)
    return json.loads(p.stdout) if rc == 0 else p


def case_mpi(ctx):
    out = ctx.path("steps.h5")
    record(ctx, out)
    rep = report(ctx, out)
    steps = {s["step"]: s for s in rep["steps"]}
    expect(sorted(steps) == list(range(STEPS)), f"steps {sorted(steps)}")
    for n, s in steps.items():
        expect([d["rank"] for d in s["duration_ns"]] == [0, 1, 2, 3], f"step {n}: ranks {s['duration_ns']}")
        expect(s["min_ns"] >= COMPUTE_MS * 1e6, f"step {n}: min {s['min_ns']} under the {COMPUTE_MS} ms slept")
        expect(s["window"] is None, f"step {n}: window {s['window']} without capture windows")
    slow = steps[SLOW_STEP]
    slowest = max(steps.values(), key=lambda s: s["max_ns"])
    expect(slowest["step"] == SLOW_STEP, f"slowest step {slowest['step']} ({slowest['max_ns']} ns), planted "
           f"{SLOW_STEP} ({slow['max_ns']} ns)")
    expect(rep["step_time"]["slowest_step"] == SLOW_STEP, f"{rep['step_time']}")
    expect(slow["max_ns"] >= (COMPUTE_MS + SLOW_MS) * 1e6, f"step {SLOW_STEP}: {slow['max_ns']} ns")
    expect(slow["straggler"] == SLOW_RANK, f"step {SLOW_STEP}: straggler {slow['straggler']}, "
           f"top cause {slow['top_cause']}")
    expect(slow["top_cause"]["ns"] >= 0.85 * 3 * SLOW_MS * 1e6, f"step {SLOW_STEP}: {slow['top_cause']}")
    expect(slow["wait_ns"] >= 0.85 * 3 * SLOW_MS * 1e6, f"step {SLOW_STEP}: wait {slow['wait_ns']}")
    others = {n: (s["straggler"], s["top_cause"]) for n, s in steps.items() if n != SLOW_STEP and s["straggler"] is not None}
    expect(not others, f"steps without a planted late rank name a straggler: {others}")
    # The text table: the slowest first, naming the rank.
    text = run([ctx.commprof, "report", out], check_rc=0).stdout
    head = text[text.index("straggler (delay cost)"):].splitlines()[1].split()
    wide = [line for line in text.splitlines()[1:] if len(line) > 100]
    expect(not wide, f"text report lines over 100 columns: {wide[:3]}")
    expect(head[0] == str(SLOW_STEP) and "rank" in head and head[head.index("rank") + 1] == str(SLOW_RANK),
           f"first step row {head}")

    # The gate: p99 of 10 steps (nearest rank) is the slowest step's time.
    p99 = rep["step_time"]["p99_ns"]
    expect(p99 == slow["max_ns"], f"p99 {p99}, slowest {slow['max_ns']}")
    p = run([ctx.commprof, "check", out, "--max", f"step_time_p99={p99 - 1}"], check_rc=1)
    expect(p.stdout.startswith("FAIL step_time_p99 = "), p.stdout)
    p = run([ctx.commprof, "check", out, "--max", f"step_time_p99={p99}"], check_rc=0)
    expect(p.stdout.startswith("ok   step_time_p99 = "), p.stdout)
    run([ctx.commprof, "check", out, "--max", "step_time_p99=10s"], check_rc=0)
    run([ctx.commprof, "check", out, "--max", f"step_time_p99={COMPUTE_MS}ms"], check_rc=1)
    p = run([ctx.commprof, "check", out, "--max", "step_time_p99=5parsecs"], check_rc=2)
    expect("step_time_p99=5parsecs" in p.stderr, p.stderr)

    # No capture windows in this file: --window is an error naming it, for every command.
    for cmd, rc in (("report", 1), ("info", 1), ("export", 1), ("hta", 1), ("check", 2)):
        args = [ctx.commprof, cmd, out, "--window", "0"]
        if cmd == "check":
            args += ["--max", "incomplete=0"]
        if cmd == "export":
            args += ["-o", ctx.path("w.json")]
        p = run(args, check_rc=rc)
        expect(out in p.stderr and "has no capture windows" in p.stderr, f"{cmd}: {p.stderr}")

    # Two windows, as a --schedule run records them: window 0 = steps 1-2, window 1 = steps 5-8
    # (each from its first step's mark to the next window-less step's mark, on every rank).
    with h5py.File(out, "r+") as f:
        for r in range(4):
            ds = f[f"ranks/{r}/events"]
            ev = ds[:]
            marks = np.sort(ev[ev["kind"] == KIND_STEP], order="start_ns")
            start = {int(m["seq"]): int(m["start_ns"]) for m in marks}
            rows = np.zeros(2, dtype=ds.dtype)
            for i, (k, first, last) in enumerate(((0, 1, 2), (1, 5, 8))):
                rows[i]["kind"] = KIND_WINDOW
                rows[i]["seq"] = k
                rows[i]["start_ns"] = start[first]
                rows[i]["end_ns"] = start[last + 1] - 1
                rows[i]["bytes"] = first
                rows[i]["correlation"] = last - first + 1
                rows[i]["subtype"] = 1
                rows[i]["peer"] = -1
                rows[i]["device"] = 0xFFFF
            n = ds.shape[0]
            ds.resize((n + 2,))
            ds[n:] = rows
    w1 = report(ctx, out, "--window", "1")
    expect([s["step"] for s in w1["steps"]] == [5, 6, 7, 8], f"window 1 steps {[s['step'] for s in w1['steps']]}")
    expect(all(s["window"] == 1 for s in w1["steps"]), f"{[s['window'] for s in w1['steps']]}")
    # One allreduce per step in the window (the barrier before the loop is outside it).
    expect(w1["instances"]["matched"] == 4, f"window 1: {w1['instances']}")
    expect({s["step"]: s["straggler"] for s in w1["steps"]}[SLOW_STEP] == SLOW_RANK, "window 1's step 7")
    w0 = report(ctx, out, "--window", "0")
    expect([s["step"] for s in w0["steps"]] == [1, 2] and w0["instances"]["matched"] == 2, f"window 0: {w0['steps']}")
    info = json.loads(run([ctx.commprof, "info", "--json", out, "--window", "0"], check_rc=0).stdout)
    expect(info["window"] == 0, f"{info['window']}")
    for r in info["ranks"]:
        # its window record, 2 step marks, 2 allreduces
        expect(r["events_by_kind"] == {"mpi_collective": 2, "step": 2, "window": 1}, f"rank {r['rank']}: "
               f"{r['events_by_kind']}")
        expect(r["events_selected"] == 5, f"{r}")
    p = run([ctx.commprof, "report", out, "--window", "4"], check_rc=1)
    expect(out in p.stderr and "no rank has window 4 (the file's windows: 0, 1)" in p.stderr, p.stderr)
    run([ctx.commprof, "check", out, "--window", "1", "--max", f"step_time_p99={p99}"], check_rc=0)
    run([ctx.commprof, "check", out, "--window", "0", "--max", f"step_time_p99={COMPUTE_MS + SLOW_MS}ms"],
        check_rc=0)
    run([ctx.commprof, "check", out, "--window", "1", "--max", f"step_time_p99={COMPUTE_MS + SLOW_MS}ms"],
        check_rc=1)
    run([ctx.commprof, "report", out, "--window", "-1"], check_rc=2)


CASES = {"mpi": case_mpi}

if __name__ == "__main__":
    args, ctx = case_arguments(CASES)
    CASES[args.case](ctx)
    print(f"steps_e2e {args.case}: ok")
