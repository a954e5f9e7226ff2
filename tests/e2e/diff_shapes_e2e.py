#!/usr/bin/env python3
"""`commprof diff` with its DEFAULT options (--noise-floor 100us) and `--max-regression 10%` on
real Open MPI jobs of several shapes (tests/e2e/diff_shapes_program.c), recorded back to back on
the machine as it is (2 cores, shared): docs/metrics.md §13.2 states the guard these check.

- steady: two runs of each shape without a change pass the gate both ways (exit 0): 4 ranks, a
  tight loop of small Allreduce + Bcast with no compute (300 iterations), and with 5 ms of sleep
  per iteration (100): Allreduce on two sub-communicators + a world Barrier, a Sendrecv halo +
  Allreduce, Isend/Irecv + Waitall, Iallreduce + Wait, Bcast.
- planted_two_ranks: 2 ranks of the non-blocking shape, the root 5 ms late to every MPI_Bcast
  (COMMPROF_TEST_PLANT=bcast:5), so the other rank waits about 5 ms in each: half of the Bcast's
  calls, which leaves the nearest-rank median on a fast root call; the guard's mid-mean (§13.2)
  must find it: a `type bcast` time row regressed, no `type allreduce` row did, exit 1.
- planted_four_ranks: the same plant (3 ms) in 4 ranks: 3 calls of 4 wait, the median moves.

Margins: what is asserted is what the plant makes certain: the Bcast's figures grow by about
(ranks-1)/ranks x 5 ms per call against calls of tens of us; the Allreduce is not planted. Under
heavy load (more busy processes than cores) a few-ms plant hides in the scheduler's time slices
(§13.2 says so); the ranks sleep rather than spin, so the jobs leave the cores free between calls.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_support import case_arguments, expect, mpirun, run  # noqa: E402

ENV = {"OMPI_MCA_mpi_yield_when_idle": "1"}  # waiting ranks yield: more ranks than cores
GATE = ["--max-regression", "10%"]


def record(ctx, out, ranks, shape, iters, compute_ms, plant=None):
    env = dict(ENV)
    if plant:
        env["COMMPROF_TEST_PLANT"] = plant
    cmd = [ctx.commprof, "run", "-o", out, "--"] + mpirun(ranks) + [
        ctx.test_program("diff_shapes_program"), "--shape", shape, "--iters", str(iters),
        "--compute-ms", str(compute_ms)]
    run(cmd, env=env, check_rc=0, timeout=180, unset=() if plant else ("COMMPROF_TEST_PLANT",))


def diff(ctx, base, new):
    """`commprof diff --format json BASE NEW --max-regression 10%` with every other option at its
    default: (exit code, document)."""
    p = run([ctx.commprof, "diff", "--format", "json", base, new, *GATE])
    expect(p.returncode in (0, 1), f"diff {base} {new}: exit {p.returncode}: {p.stderr}")
    doc = json.loads(p.stdout)
    expect(doc["noise_rule"]["floor_ns"] == 100e3, f"default floor: {doc['noise_rule']}")
    return p.returncode, doc


def regressed(doc):
    return [f"{r['group']} {r['row']} {r['metric']} {r['relative_change']}" for r in doc["rows"]
            if r["status"] == "regressed"]


def case_steady(ctx):
    shapes = [("tight", 300, 0), ("subcomm", 100, 5), ("halo", 100, 5), ("nonblock", 100, 5)]
    for shape, iters, compute in shapes:
        a, b = ctx.path(f"{shape}_a.h5"), ctx.path(f"{shape}_b.h5")
        record(ctx, a, 4, shape, iters, compute)
        record(ctx, b, 4, shape, iters, compute)
        for x, y in ((a, b), (b, a)):
            rc, doc = diff(ctx, x, y)
            expect(rc == 0 and doc["regressions"] == 0,
                   f"{shape}: unchanged runs {os.path.basename(x)} -> {os.path.basename(y)} failed the gate: "
                   f"{regressed(doc)}")


def planted(ctx, ranks, plant_ms):
    base, again, slow = ctx.path("base.h5"), ctx.path("again.h5"), ctx.path("slow.h5")
    record(ctx, base, ranks, "nonblock", 100, 5)
    record(ctx, again, ranks, "nonblock", 100, 5)
    record(ctx, slow, ranks, "nonblock", 100, 5, plant=f"bcast:{plant_ms}")
    rc, doc = diff(ctx, base, again)
    expect(rc == 0, f"unchanged runs failed the gate: {regressed(doc)}")
    for b in (base, again):
        rc, doc = diff(ctx, b, slow)
        rows = {(r["group"], r["row"], r["metric"]): r for r in doc["rows"]}
        bcast = [m for m in ("total_time", "mean_duration", "wait_time")
                 if rows[("type", "bcast", m)]["status"] == "regressed"]
        expect(rc == 1 and bcast, f"{os.path.basename(b)} -> slow: the {plant_ms} ms Bcast plant was not found "
               f"(exit {rc}; bcast rows {[(m, rows[('type', 'bcast', m)]) for m in ('mean_duration', 'wait_time')]})")
        # The truth: the other ranks wait about plant_ms per call; the mean grows by at least half
        # of (ranks-1)/ranks of it (a margin for a rank that is itself late, descheduled).
        grew = rows[("type", "bcast", "mean_duration")]["change"]
        expect(grew >= 0.5 * (ranks - 1) / ranks * plant_ms * 1e6, f"Bcast mean grew by {grew} ns only")
        allreduce = [r for r in doc["rows"] if r["group"] == "type" and r["row"] == "allreduce"
                     and r["status"] == "regressed"]
        expect(not allreduce, f"the Allreduce was not planted: {allreduce}")


def case_planted_two_ranks(ctx):
    planted(ctx, 2, 5)


def case_planted_four_ranks(ctx):
    planted(ctx, 4, 3)


CASES = {"steady": case_steady, "planted_two_ranks": case_planted_two_ranks,
         "planted_four_ranks": case_planted_four_ranks}

if __name__ == "__main__":
    args, ctx = case_arguments(CASES)
    CASES[args.case](ctx)
    print(f"diff_shapes_e2e {args.case}: ok")
