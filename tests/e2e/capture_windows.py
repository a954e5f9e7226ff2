#!/usr/bin/env python3
"""Steps and capture windows end to end (docs/cli.md "Steps and capture windows"): a real 4-rank
Open MPI job (capture_steps_program.c) marks its steps one way per case and does CALLS
MPI_Allreduce per step (plus PAUSED more inside MPI_Pcontrol(0)/(1)); the HDF5 file is read back
with h5py.

Truth per case (every rank, exactly, unless said otherwise):
- the WINDOW events (kind 30) are the windows torch.profiler.schedule gives for the steps, written
  out by hand below: window index, first step, number of steps, subtype 1;
- the STEP events (kind 9) are exactly the active steps, with the mode's source as subtype;
- the allreduces are exactly CALLS per active step, each inside its window, with the sequence
  numbers s * (CALLS + PAUSED) + 0 .. CALLS - 1 of step s: numbering went on while nothing was
  recorded, so the same instance has the same number on every rank;
- clock alignment ran (its first and last epoch lie outside every window);
- nothing else lies outside the windows but the job's structure (MPI_Init, MPI_Finalize,
  communicator creation: kinds 1, 2, 6), which is kept whole;
- without a schedule, no WINDOW event at all.
The timed case (--delay 0.5 --duration 0.5, 50 ms per step) checks one window of the asked span
within loose bounds (+250 ms for a loaded 2-core machine) and that every recorded call lies in it.
The errors case checks that each malformed option stops `commprof run` with exit code 2 and one
line naming the option (or variable) and the bad part, before the job starts.
"""
import os
import sys

import h5py
import numpy as np

from e2e_support import case_arguments, expect, mpirun, run

SKIP = 77
RANKS = 4
STEP, WINDOW, NVTX_RANGE = 9, 30, 18
COLLECTIVE, OP_ALLREDUCE, OP_BARRIER = 3, 4, 1
STRUCTURAL = (1, 2, 6)  # MPI_Init, MPI_Finalize, communicator creation
SOURCE = {"c_api": 0, "pcontrol": 1, "nvtx": 2, "nvtx_named": 2, "every_world": 3, "every_named": 3}
WORLD = 1


def load_rank(f, rank):
    g = f["ranks"][str(rank)]
    return g, g["events"][...], g["strings"].asstr()[...]


def profile(ctx, name, mode, steps, calls, sleep_ms, paused=0, opts=()):
    out = ctx.path(name + ".h5")
    program = [ctx.test_program("capture_steps_program"), mode, str(steps), str(calls), str(sleep_ms), str(paused)]
    run([ctx.commprof, "run", "-q", "-o", out] + list(opts) + ["--"] + mpirun(RANKS) + program, check_rc=0)
    return out


def check_windows(out, mode, windows, calls, paused=0, step_comm=None):
    """`windows`: [(index, first step, steps)] as torch's schedule gives them (consecutive steps)."""
    per_step = calls + paused
    active = [s for _, first, n in windows for s in range(first, first + n)]
    with h5py.File(out, "r") as f:
        expect(int(f.attrs["world_size"]) == RANKS, f"{RANKS} ranks")
        for r in range(RANKS):
            g, ev, names = load_rank(f, r)
            expect(g.attrs["status"] == "complete", f"rank {r}: status {g.attrs['status']}")
            # Clock alignment ran at MPI_Init and MPI_Finalize, outside every window (one host: the
            # other ranks take rank 0's model as it is).
            method = g.attrs["clock_method"]
            expect(method == ("mpi-reference" if r == 0 else "mpi-same-host") and g["clock_points"].shape[0] >= 2,
                   f"rank {r}: clock alignment {method}, {g['clock_points'].shape[0]} epochs")
            w = np.sort(ev[ev["kind"] == WINDOW], order="seq")
            got = [(int(x["seq"]), int(x["bytes"]), int(x["correlation"]), int(x["subtype"])) for x in w]
            want = [(i, first, n, 1) for i, first, n in windows]
            expect(got == want, f"rank {r}: windows (index, first step, steps, subtype) {got}, expected {want}")
            steps = ev[ev["kind"] == STEP]
            expect(sorted(steps["seq"].tolist()) == active, f"rank {r}: steps {sorted(steps['seq'].tolist())}, "
                   f"expected the active steps {active}")
            expect(np.all(steps["subtype"] == SOURCE[mode]), f"rank {r}: step sources {set(steps['subtype'].tolist())}")
            coll = ev[(ev["kind"] == COLLECTIVE) & (ev["subtype"] == OP_ALLREDUCE)]
            if step_comm is not None:
                coll = coll[step_comm(coll["comm_id"])]
            expect(len(coll) == len(active) * calls, f"rank {r}: {len(coll)} allreduces, expected {len(active) * calls}")
            for x, (i, first, n) in zip(w, windows):
                inside = coll[(coll["start_ns"] >= x["start_ns"]) & (coll["end_ns"] <= x["end_ns"])]
                want_seq = sorted(s * per_step + j for s in range(first, first + n) for j in range(calls))
                expect(sorted(inside["seq"].tolist()) == want_seq,
                       f"rank {r}: window {i}: allreduce sequence numbers {sorted(inside['seq'].tolist())}, "
                       f"expected {want_seq}")
                first_step = steps[steps["seq"] == first]
                expect(len(first_step) == 1 and int(first_step["start_ns"][0]) == int(x["start_ns"]),
                       f"rank {r}: window {i} opens when its first step begins")
            # Nothing but the job's structure outside the windows.
            other = ev[~np.isin(ev["kind"], STRUCTURAL + (WINDOW,))]
            inside_any = np.zeros(len(other), dtype=bool)
            for x in w:
                inside_any |= (other["start_ns"] >= x["start_ns"]) & (other["end_ns"] <= x["end_ns"])
            stray = other[~inside_any]
            expect(len(stray) == 0, f"rank {r}: {len(stray)} events outside every window: "
                   f"{[(int(k), names[int(n)]) for k, n in zip(stray['kind'][:5], stray['name_id'][:5])]}")
            for kind in (1, 2):
                expect(int(np.sum(ev["kind"] == kind)) == 1, f"rank {r}: kind {kind} (MPI_Init/Finalize) kept once")
            if mode == "every_named":
                expect(int(np.sum(ev["kind"] == 6)) == 1, f"rank {r}: the named communicator's creation is kept")
                barriers = ev[(ev["kind"] == COLLECTIVE) & (ev["subtype"] == OP_BARRIER) & (ev["comm_id"] == WORLD)]
                expect(len(barriers) == len(active), f"rank {r}: {len(barriers)} world barriers, one per active step")
            if mode.startswith("nvtx"):
                label = "train_step" if mode == "nvtx_named" else None
                ranges = ev[ev["kind"] == NVTX_RANGE]
                got_names = sorted(names[int(n)] for n in ranges["name_id"])
                want_names = sorted(label or f"ProfilerStep#{s}" for s in active)
                expect(got_names == want_names, f"rank {r}: NVTX ranges {got_names}, expected {want_names}")


def nvtx_available(ctx):
    p = run([ctx.test_program("capture_steps_program"), "nvtx", "0", "0", "0"])
    return p.returncode != SKIP


# wait=1, warmup=1, active=2, repeat=2 over 10 steps: N W R S N W R S N N.
TWO_WINDOWS = "wait=1,warmup=1,active=2,repeat=2"
TWO_WINDOWS_TRUTH = [(0, 2, 2), (1, 6, 2)]


def case_c_api(ctx):
    out = profile(ctx, "c_api", "c_api", 10, 3, 5, opts=["--schedule", TWO_WINDOWS])
    check_windows(out, "c_api", TWO_WINDOWS_TRUTH, 3)


def case_pcontrol(ctx):
    # skip_first=1, then cycles of 2 idle + 3 active steps until the end: steps 3-5 and 8-9 (the
    # second window is still open when the job ends and closes with it).
    out = profile(ctx, "pcontrol", "pcontrol", 10, 2, 5, opts=["--schedule", "wait=2,warmup=0,active=3,repeat=0,skip_first=1"])
    check_windows(out, "pcontrol", [(0, 3, 3), (1, 8, 2)], 2)


def case_nvtx(ctx, mode="nvtx", opts=()):
    if not nvtx_available(ctx):
        print(f"{mode}: SKIP: capture_steps_program built without the nvtx3 headers")
        return SKIP
    out = profile(ctx, mode, mode, 10, 2, 5, opts=["--schedule", TWO_WINDOWS] + list(opts))
    check_windows(out, mode, TWO_WINDOWS_TRUTH, 2)


def case_nvtx_named(ctx):
    return case_nvtx(ctx, "nvtx_named", ["--step-range", "train_step"])


# wait=1, warmup=0, active=2, repeat=2 over 8 steps: N R S N R S N N.
EVERY_SCHEDULE = "wait=1,warmup=0,active=2,repeat=2"
EVERY_TRUTH = [(0, 1, 2), (1, 4, 2)]


def fortran_pcontrol(ctx, binding):
    """fortran_pcontrol.F90: 6 steps begun by MPI_Pcontrol(2), 3 recorded allreduces and 2 paused
    ones each, under wait=1,warmup=1,active=2,repeat=1: steps 2-3 only, as from C."""
    exe = ctx.test_program(f"fortran_pcontrol_{binding}")
    if not os.path.exists(exe):
        print(f"fortran_{binding}: SKIP: {exe} not built (no MPI Fortran compiler or binding)")
        return SKIP
    out = ctx.path("fortran.h5")
    run([ctx.commprof, "run", "-q", "-o", out, "--schedule", "wait=1,warmup=1,active=2,repeat=1", "--"] + mpirun(RANKS)
        + [exe], check_rc=0)
    check_windows(out, "pcontrol", [(0, 2, 2)], 3, paused=2)


def case_fortran_use_mpi(ctx):
    return fortran_pcontrol(ctx, "use_mpi")


def case_fortran_f08(ctx):
    return fortran_pcontrol(ctx, "f08")


def case_every_world(ctx):
    out = profile(ctx, "every_world", "every_world", 8, 3, 5, opts=["--schedule", EVERY_SCHEDULE, "--step-every", "3"])
    check_windows(out, "every_world", EVERY_TRUTH, 3, step_comm=lambda c: c == WORLD)


def case_every_named(ctx):
    out = profile(ctx, "every_named", "every_named", 8, 3, 5,
                  opts=["--schedule", EVERY_SCHEDULE, "--step-every", "3:train"])
    check_windows(out, "every_named", EVERY_TRUTH, 3, step_comm=lambda c: c != WORLD)


def case_pause(ctx):
    """No schedule: MPI_Pcontrol(0) ... (1) leaves out exactly the PAUSED calls of every step, and
    their sequence numbers stay taken; no WINDOW event."""
    steps, calls, paused = 6, 3, 2
    out = profile(ctx, "pause", "c_api", steps, calls, 2, paused=paused)
    with h5py.File(out, "r") as f:
        for r in range(RANKS):
            _, ev, _ = load_rank(f, r)
            expect(int(np.sum(ev["kind"] == WINDOW)) == 0, f"rank {r}: WINDOW events without a capture option")
            coll = ev[(ev["kind"] == COLLECTIVE) & (ev["subtype"] == OP_ALLREDUCE)]
            want = [s * (calls + paused) + j for s in range(steps) for j in range(calls)]
            expect(sorted(coll["seq"].tolist()) == want,
                   f"rank {r}: allreduce sequence numbers {sorted(coll['seq'].tolist())}, expected {want}")
            st = ev[ev["kind"] == STEP]
            expect(sorted(st["seq"].tolist()) == list(range(steps)) and np.all(st["subtype"] == 0), f"rank {r}: steps")


def case_pause_schedule(ctx):
    out = profile(ctx, "pause_schedule", "c_api", 6, 3, 2, paused=2,
                  opts=["--schedule", "wait=1,warmup=1,active=2,repeat=1"])
    check_windows(out, "c_api", [(0, 2, 2)], 3, paused=2)


def case_timed(ctx):
    """--delay 0.5 --duration 0.5 over 30 steps of 50 ms: one window (subtype 2) opening 0.5 s after
    each rank's collector started and closing 0.5 s later (each within +250 ms), the recorded steps
    being those that began in it, and every recorded call inside it."""
    steps, calls = 30, 2
    out = ctx.path("timed.h5")
    program = [ctx.test_program("capture_steps_program"), "c_api", str(steps), str(calls), "50"]
    run([ctx.commprof, "run", "-q", "-o", out, "--delay", "0.5", "--duration", "0.5", "--"] + mpirun(RANKS) + program,
        check_rc=0)
    slack = 250_000_000
    with h5py.File(out, "r") as f:
        for r in range(RANKS):
            g, ev, _ = load_rank(f, r)
            origin = int(g.attrs["start_steady_ns"])
            w = ev[ev["kind"] == WINDOW]
            expect(len(w) == 1 and int(w["seq"][0]) == 0 and int(w["subtype"][0]) == 2, f"rank {r}: windows {w}")
            start, end = int(w["start_ns"][0]) - origin, int(w["end_ns"][0]) - origin
            expect(500_000_000 <= start <= 500_000_000 + slack, f"rank {r}: window opens {start / 1e6:.1f} ms after start")
            expect(1_000_000_000 <= end <= 1_000_000_000 + slack, f"rank {r}: window closes {end / 1e6:.1f} ms after start")
            st = np.sort(ev[ev["kind"] == STEP], order="seq")
            n = len(st)
            expect(3 <= n <= 11, f"rank {r}: {n} steps began in a 0.5 s window of 50 ms steps")
            expect(st["seq"].tolist() == list(range(int(st["seq"][0]), int(st["seq"][0]) + n)), f"rank {r}: consecutive steps")
            expect(int(w["bytes"][0]) == int(st["seq"][0]) and int(w["correlation"][0]) == n,
                   f"rank {r}: window's first step {int(w['bytes'][0])} and count {int(w['correlation'][0])}, "
                   f"steps seen {st['seq'].tolist()}")
            coll = ev[(ev["kind"] == COLLECTIVE) & (ev["subtype"] == OP_ALLREDUCE)]
            # The step under way when the window opened may add up to CALLS more; the last step that began
            # in it may lose calls to the window's end (a loaded machine stretches a step past it). Every
            # other step's calls all fall inside: the next step began inside the window after them.
            expect((n - 1) * calls <= len(coll) <= (n + 1) * calls, f"rank {r}: {len(coll)} allreduces for {n} steps")
            other = ev[~np.isin(ev["kind"], STRUCTURAL + (WINDOW,))]
            # 2 ms: an event may take its end time just before the gate opens and be recorded just after.
            expect(np.all(other["end_ns"] >= int(w["start_ns"][0]) - 2_000_000) and np.all(other["end_ns"] <= int(w["end_ns"][0])),
                   f"rank {r}: events outside the window")


def case_errors(ctx):
    marker = ctx.path("job-ran")
    job = ["sh", "-c", f"touch {marker}"]
    bad = [
        (["--schedule", "wait=1,active=x"], {}, "--schedule 'wait=1,active=x': active=x: not a whole number"),
        (["--schedule", "wait=1,warmup=1"], {}, "--schedule 'wait=1,warmup=1': active=A is missing"),
        (["--schedule", "wait=1,sleep=1,active=1"], {}, "unknown key 'sleep'"),
        (["--delay=-1"], {}, "--delay '-1': '-1' is not a number of seconds"),
        (["--duration", "0"], {}, "--duration '0': '0' must be more than 0 seconds"),
        (["--step-every", "0:train"], {}, "--step-every '0:train': N='0' is not a whole number"),
        (["--step-every", "4:"], {}, "--step-every '4:': the communicator name after ':' is empty"),
        (["--step-range", "step#1"], {}, "--step-range 'step#1': 'step#1' contains '#'"),
        (["--schedule", "active=1", "--delay", "2"], {}, "--schedule cannot be combined with --delay"),
        ([], {"COMMPROF_SCHEDULE": "active=0"}, "COMMPROF_SCHEDULE 'active=0': active=0: a window needs at least one"),
        ([], {"COMMPROF_DURATION": "soon"}, "COMMPROF_DURATION 'soon': 'soon' is not a number of seconds"),
    ]
    for opts, env, message in bad:
        out = ctx.path("never.h5")
        p = run([ctx.commprof, "run", "-o", out] + opts + ["--"] + job, env=env)
        lines = p.stderr.strip().splitlines()
        expect(p.returncode == 2, f"{opts} {env}: exit code {p.returncode}, expected 2\n{p.stderr}")
        expect(len(lines) == 1 and message in lines[0] and lines[0].startswith("commprof run: "),
               f"{opts} {env}: stderr {p.stderr!r}, expected one line with {message!r}")
        expect(not os.path.exists(marker) and not os.path.exists(out), f"{opts} {env}: the job ran or a file was made")
    # An option given wins over the variable: a good --schedule with a bad COMMPROF_SCHEDULE is fine.
    p = run([ctx.commprof, "run", "-q", "-o", ctx.path("ok.h5"), "--schedule", "active=1", "--"] + job,
            env={"COMMPROF_SCHEDULE": "bad"})
    expect(os.path.exists(marker), f"the job with a good --schedule did not run: {p.stderr}")


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    a, ctx = case_arguments(CASES)
    rc = CASES[a.case](ctx)
    return rc if rc is not None else 0


if __name__ == "__main__":
    sys.exit(main())
