#!/usr/bin/env python3
"""The fault suite's delivery cases (docs/reliability.md), for real: Open MPI jobs, the real
aggregator over TCP, files read back with h5py.

Usage: delivery_faults.py CASE --build BUILD_DIR --work WORK_DIR

Ground truth: fault_program runs ITER MPI_Allreduce calls per rank and, just before call AT, its
victim rank fails; the others then block in call AT and are torn down by mpirun. So every rank
completed exactly AT allreduces (ITER when nothing fails), and the file must hold exactly that
many MPI_Allreduce events per rank whenever the rank could ship them (a bye). Counts add up: a rank
with a bye has events_written == events_recorded (nothing recorded is missing) and dropped 0.
Nothing here depends on timing except where a case says so, with its margin.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import h5py
import numpy as np

from e2e_support import case_arguments, expect, mpirun

SIGNALS = {"segv": (11, "SIGSEGV"), "fault": (11, "SIGSEGV"), "abort": (6, "SIGABRT"), "term": (15, "SIGTERM")}


INCOMPLETE = 1 << 1  # COMMPROF_FLAG_INCOMPLETE


def allreduces(f, rank, incomplete=False):
    """The rank's completed MPI_Allreduce events (with `incomplete`: those it was inside when it was
    ended, stored INCOMPLETE by the signal's flush)."""
    g = f["ranks"][str(rank)]
    names = g["strings"].asstr()[...]
    ids = [i for i, s in enumerate(names) if s == "MPI_Allreduce"]
    ev = g["events"][...]
    if not ids:
        return ev[:0]
    flagged = (ev["flags"] & INCOMPLETE) != 0
    return ev[np.isin(ev["name_id"], ids) & (flagged if incomplete else ~flagged)]


def attr(g, name, default=None):
    v = g.attrs.get(name, default)
    return v.decode() if isinstance(v, bytes) else v


def check_counts_add_up(g, rank):
    """A rank that said bye: every event it recorded is in the file, none dropped."""
    recorded = int(attr(g, "events_recorded", -1))
    written = int(attr(g, "events_written", -2))
    expect(recorded == written, f"rank {rank}: events_recorded {recorded} != events_written {written}")
    expect(int(attr(g, "dropped_events", 0)) == 0, f"rank {rank}: dropped {attr(g, 'dropped_events')}")
    expect(int(attr(g, "batches_lost", 0)) == 0, f"rank {rank}: batches_lost {attr(g, 'batches_lost')}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_profiled(ctx, out, args, env=None, timeout=240):
    cmd = [ctx.commprof, "run", "-o", out, "--"] + mpirun(4) + [ctx.test_program("fault_program")] + [str(a) for a in args]
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(cmd, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)


# ---------------------------------------------------------------------------------------------
def case_signal(ctx, action):
    """Rank 2 dies of a fatal signal before its allreduce number AT: it ships every event (exactly AT
    allreduces) and its end reason names the signal; the job's exit code says it failed."""
    iters, at = 400, 150
    signo, name = SIGNALS[action]
    out = ctx.path("signal.h5")
    p = run_profiled(ctx, out, [iters, 2, action, at])
    expect(p.returncode != 0, f"the job failed, its exit code must say so (got 0)\n{p.stderr}")
    with h5py.File(out, "r") as f:
        g = f["ranks"]["2"]
        reason = attr(g, "end_reason")
        expect(reason == f"killed by signal {signo} ({name})", f"victim end_reason {reason!r}")
        expect(attr(g, "status") == "complete", f"victim status {attr(g, 'status')} (its stream ended with a bye)")
        expect(int(attr(g, "fatal_signal")) == signo, "fatal_signal counter")
        n = len(allreduces(f, 2))
        expect(n == at, f"victim holds {n} allreduce events, it completed exactly {at}")
        # It was between two calls (the fault is raised outside MPI): nothing in flight.
        expect(len(allreduces(f, 2, incomplete=True)) == 0, "victim has an INCOMPLETE allreduce")
        expect(int(attr(g, "calls_in_flight_at_exit", 0)) == 0, "victim calls_in_flight_at_exit")
        check_counts_add_up(g, 2)
        # The others were torn down by mpirun: whatever they shipped is whole and exact.
        for rank in (0, 1, 3):
            g = f["ranks"][str(rank)]
            n = len(allreduces(f, rank))
            if attr(g, "status") == "complete":
                expect(n == at, f"rank {rank} ({attr(g, 'end_reason')}): {n} allreduces, completed {at}")
                check_counts_add_up(g, rank)
                if attr(g, "fatal_signal") is not None:
                    # Torn down inside allreduce AT: it is stored, INCOMPLETE, right after the others.
                    stuck = allreduces(f, rank, incomplete=True)
                    done = allreduces(f, rank)
                    expect(len(stuck) == 1 and int(stuck["seq"][0]) == int(done["seq"].max()) + 1,
                           f"rank {rank}: in-flight allreduce {stuck['seq'].tolist()} after {done['seq'].max()}")
                    expect(int(attr(g, "calls_in_flight_at_exit")) == 1, f"rank {rank}: calls_in_flight_at_exit")
            else:
                expect(n <= at, f"rank {rank}: {n} allreduces, more than the {at} it completed")
    print(f"signal {name}: victim shipped {at}/{at} allreduces; reason {reason!r}")


def case_rank_sigkill(ctx):
    """SIGKILL cannot be caught: the file stays readable, the rank is marked as a lost connection,
    it holds at most what it completed, and the others are unaffected."""
    iters, at = 400, 150
    out = ctx.path("kill.h5")
    p = run_profiled(ctx, out, [iters, 1, "kill", at])
    expect(p.returncode != 0, "a killed rank must make the job fail")
    with h5py.File(out, "r") as f:
        g = f["ranks"]["1"]
        expect(attr(g, "status") == "disconnected", f"killed rank status {attr(g, 'status')}")
        reason = attr(g, "end_reason")
        expect(reason and reason != "bye" and "signal" not in reason, f"killed rank end_reason {reason!r}")
        n = len(allreduces(f, 1))
        expect(0 < n <= at, f"killed rank holds {n} allreduces; it completed {at}")
        for rank in (0, 2, 3):
            n = len(allreduces(f, rank))
            expect(n <= at, f"rank {rank}: {n} allreduces")
    info = subprocess.run([ctx.commprof, "info", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    expect(info.returncode in (0, 1) and "disconnected" in info.stdout, f"commprof info:\n{info.stdout}{info.stderr}")
    print(f"SIGKILL: killed rank kept {len(allreduces(h5py.File(out, 'r'), 1))} of {at} allreduces")


class Aggregate:
    """A standalone `commprof aggregate` on a fixed port, as a Slurm job would run it."""

    def __init__(self, ctx, out, port, expect_ranks=4, extra=()):
        self.log = open(out + ".log", "w")
        cmd = [ctx.commprof, "aggregate", "--expect", str(expect_ranks), "--listen", f"127.0.0.1:{port}",
               "-o", out, "--job-id", "faultjob", "--secret-file", ctx.path("secret"),
               "--spool-dir", ctx.path("spool"), "--flush-ms", "200"] + list(extra)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"aggregate did not listen on {port}")

    def wait(self, timeout):
        rc = self.proc.wait(timeout=timeout)
        self.log.close()
        return rc


def job_env(ctx, port, extra=None):
    secret = open(ctx.path("secret")).read().strip()
    env = {"COMMPROF_AGGREGATOR": f"127.0.0.1:{port}", "COMMPROF_SECRET": secret, "COMMPROF_JOB_ID": "faultjob",
           "COMMPROF_SPOOL_DIR": ctx.path("spool")}
    env.update(extra or {})
    return env


def start_job(ctx, env, args):
    cmd = mpirun(4)
    for k in list(env) + ["LD_PRELOAD"]:
        cmd += ["-x", k]
    full = dict(os.environ)
    full.update(env)
    full["LD_PRELOAD"] = ctx.library
    log = open(ctx.path("job.log"), "w")
    return subprocess.Popen(cmd + [ctx.test_program("fault_program")] + [str(a) for a in args], env=full, stdout=log,
                            stderr=subprocess.STDOUT), log


def seqs_in(path, rank):
    """Allreduce sequence numbers of `rank` in a file, or an empty set when the file cannot be read."""
    try:
        with h5py.File(path, "r") as f:
            if str(rank) not in f["ranks"] or "events" not in f["ranks"][str(rank)]:
                return set()
            return set(allreduces(f, rank)["seq"].tolist())
    except (OSError, KeyError) as e:
        print(f"note: {path} unreadable for rank {rank}: {e}")
        return set()


def every_call(seqs, iters):
    """The allreduces of `iters` calls missing from `seqs`: MPI_COMM_WORLD's sequence numbers of one
    rank's consecutive calls are consecutive, so the union must be one run of `iters` numbers."""
    if not seqs:
        return set(range(iters))
    first = min(seqs)
    return set(range(first, first + iters)) - seqs | {s for s in seqs if s >= first + iters}


def case_aggregator_restart(ctx):
    """SIGKILL of the aggregator mid-run, restarted on the same port: the ranks reconnect and resend
    what it had not confirmed; the two files together hold every allreduce of every rank."""
    iters = 1500
    port = free_port()
    first, second = ctx.path("first.h5"), ctx.path("second.h5")
    agg = Aggregate(ctx, first, port)
    job, log = start_job(ctx, job_env(ctx, port, {"COMMPROF_RECONNECT_MS": "30000"}), [iters, 0, "none", -1, 2000])
    time.sleep(2.0)
    agg.proc.send_signal(signal.SIGKILL)
    agg.wait(10)
    time.sleep(0.5)
    agg2 = Aggregate(ctx, second, port)
    rc = job.wait(timeout=200)
    log.close()
    expect(rc == 0, f"job exit code {rc}:\n{open(ctx.path('job.log')).read()}")
    rc2 = agg2.wait(60)
    expect(rc2 == 0, f"restarted aggregate exit code {rc2}:\n{open(second + '.log').read()}")
    with h5py.File(second, "r") as f:
        for rank in range(4):
            g = f["ranks"][str(rank)]
            expect(attr(g, "status") == "complete", f"rank {rank} in the second file: {attr(g, 'status')}")
            expect(int(attr(g, "reconnects", 0)) >= 1, f"rank {rank}: reconnects {attr(g, 'reconnects')}")
            expect(int(attr(g, "batches_lost", 0)) == 0, f"rank {rank}: batches_lost {attr(g, 'batches_lost')}")
    for rank in range(4):
        s1, s2 = seqs_in(first, rank), seqs_in(second, rank)
        missing = every_call(s1 | s2, iters)
        expect(not missing, f"rank {rank}: {len(missing)} allreduces in neither file (first {len(s1)}, "
                            f"second {len(s2)}), e.g. {sorted(missing)[:5]}")
        expect(len(s2) > 0, f"rank {rank}: nothing in the second file")
    print(f"aggregator restart: all {iters} allreduces of 4 ranks are in first.h5 + second.h5")


def case_aggregator_gone(ctx):
    """SIGKILL of the aggregator for good: after COMMPROF_RECONNECT_MS the ranks spool everything it
    had not confirmed; the partial file and the merged spools together hold every allreduce."""
    iters = 800
    port = free_port()
    first = ctx.path("first.h5")
    agg = Aggregate(ctx, first, port)
    job, log = start_job(ctx, job_env(ctx, port, {"COMMPROF_RECONNECT_MS": "1000"}), [iters, 0, "none", -1, 2000])
    time.sleep(1.5)
    agg.proc.send_signal(signal.SIGKILL)
    agg.wait(10)
    rc = job.wait(timeout=200)
    log.close()
    joblog = open(ctx.path("job.log")).read()
    expect(rc == 0, f"job exit code {rc}:\n{joblog}")
    expect("spooling to" in joblog, f"ranks announce their spools:\n{joblog}")
    spools = [x for x in os.listdir(ctx.path("spool")) if x.endswith(".cpspool")]
    expect(len(spools) == 4, f"spool files {spools}")
    merged = ctx.path("spools.h5")
    p = subprocess.run([ctx.commprof, "merge", ctx.path("spool"), "-o", merged], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    expect(p.returncode == 0, f"merge: {p.returncode}\n{p.stderr}")
    with h5py.File(merged, "r") as f:
        for rank in range(4):
            g = f["ranks"][str(rank)]
            expect(attr(g, "status") == "complete", f"rank {rank} from its spool: {attr(g, 'status')}")
            expect(int(attr(g, "batches_lost", 0)) == 0, f"rank {rank}: batches_lost {attr(g, 'batches_lost')}")
    for rank in range(4):
        s1, s2 = seqs_in(first, rank), seqs_in(merged, rank)
        missing = every_call(s1 | s2, iters)
        expect(not missing, f"rank {rank}: {len(missing)} allreduces in neither the partial file ({len(s1)}) "
                            f"nor the spool ({len(s2)})")
    print(f"aggregator gone: all {iters} allreduces of 4 ranks are in the partial file + spools")


def case_run_killed(ctx):
    """SIGKILL of `commprof run` itself (its aggregator and writer) mid-job: the file its last
    flush left is analysed as the job it is: world_size from the ranks' hellos (it was 0 until
    the writer finalized, so every collective read as incomplete), its allreduces matched across
    the 4 ranks."""
    out = ctx.path("killed.h5")
    log = open(ctx.path("run_killed.log"), "w")
    env = dict(os.environ)
    env.pop("COMMPROF_SECRET", None)
    p = subprocess.Popen([ctx.commprof, "run", "--flush-ms", "200", "-o", out, "--", *mpirun(4),
                          ctx.test_program("fault_program"), "3000", "0", "none", "-1", "2000"],
                         stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and (not os.path.exists(out) or os.path.getsize(out) < 100_000):
        time.sleep(0.2)  # some flushes of every rank: about 1 s of the 6 s job
    time.sleep(1.0)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    try:
        os.killpg(p.pid, signal.SIGKILL)  # the job itself (mpirun and its ranks, same session)
    except ProcessLookupError:
        pass
    log.close()
    info = json.loads(subprocess.run([ctx.commprof, "info", "--json", out], stdout=subprocess.PIPE,
                                     text=True).stdout)
    expect(not info["finalized"] and info["world_size"] == 4 and len(info["ranks"]) == 4,
           f"killed run's file: finalized {info['finalized']}, world_size {info['world_size']}, "
           f"{len(info['ranks'])} ranks")
    r = subprocess.run([ctx.commprof, "report", "--format", "json", out], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    expect(r.returncode in (0, 1), f"report of the killed run's file: exit code {r.returncode}\n{r.stderr}")
    rep = json.loads(r.stdout)
    # the rows commprof reads: a kill during a flush may leave a rank's last chunk unreadable
    readable = {ri["rank"]: ri["event_count"] for ri in info["ranks"]}
    with h5py.File(out, "r") as f:
        stored = min(int((f["ranks"][str(rank)]["events"][:readable[rank]]["kind"] == 3).sum()) for rank in range(4))
    matched = rep["instances"]["matched"]
    # every allreduce the 4 ranks all have is matched; those some rank's last flush lacks are not
    expect(rep["world_size"] == 4 and matched >= stored > 100,
           f"report of the killed run's file: world_size {rep['world_size']}, matched {matched}, "
           f"allreduces every rank holds {stored}, incomplete {rep['instances'].get('incomplete')}")
    print(f"run killed: {matched} instances matched in the file its last flush left ({stored} allreduces on "
          f"every rank)")


def case_aggregator_late(ctx):
    """The aggregator answers hellos late (stopped for 2 s while the ranks start, each waiting only
    300 ms for the hello-ack): no rank is lost, none is refused, every allreduce is in the one
    file, and aggregate ends by itself once every rank said bye."""
    iters = 2000  # 2 ms apart: the job outlives the pause, so the ranks really reconnect
    port = free_port()
    out = ctx.path("late.h5")
    agg = Aggregate(ctx, out, port)
    agg.proc.send_signal(signal.SIGSTOP)
    job, log = start_job(ctx, job_env(ctx, port, {"COMMPROF_CONNECT_TIMEOUT_MS": "300"}),
                         [iters, 0, "none", -1, 2000])
    time.sleep(2.0)
    agg.proc.send_signal(signal.SIGCONT)
    rc = job.wait(timeout=200)
    log.close()
    expect(rc == 0, f"job exit code {rc}:\n{open(ctx.path('job.log')).read()}")
    rc2 = agg.wait(60)  # no --timeout: it must end by itself
    agglog = open(out + ".log").read()
    expect(rc2 == 0, f"aggregate exit code {rc2}:\n{agglog}")
    expect("refused connection" not in agglog, f"no rank may be refused:\n{agglog}")
    left = os.listdir(ctx.path("spool")) if os.path.isdir(ctx.path("spool")) else []
    expect(not left, f"the ranks reconnected, so no spool is left: {left}")
    with h5py.File(out, "r") as f:
        for rank in range(4):
            g = f["ranks"][str(rank)]
            expect(attr(g, "status") == "complete", f"rank {rank}: {attr(g, 'status')} ({attr(g, 'end_reason')})")
            n = len(allreduces(f, rank))
            expect(n == iters, f"rank {rank}: {n} allreduces, ran {iters}")
            check_counts_add_up(g, rank)
    print(f"late hello-ack: 4 ranks complete with {iters} allreduces each")


def case_many_ranks(ctx):
    """256 simulated ranks (processes without MPI, rank from PMI_RANK) on one aggregator: all are
    complete, each holds exactly its N marks, counts add up."""
    ranks, marks = 256, 200
    port = free_port()
    out = ctx.path("many.h5")
    agg = Aggregate(ctx, out, port, expect_ranks=ranks)
    base = job_env(ctx, port, {"PMI_SIZE": str(ranks), "COMMPROF_CLOCK_SYNC": "off"})
    procs = []
    for r in range(ranks):
        env = dict(os.environ)
        env.update(base)
        env["PMI_RANK"] = str(r)
        env["LD_PRELOAD"] = ctx.library
        procs.append(subprocess.Popen([ctx.test_program("mark_program"), str(marks), "100"], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True))
        if len(procs) % 32 == 0:
            time.sleep(0.2)
    failed = [(i, p.wait(timeout=240), p.stderr.read()) for i, p in enumerate(procs)]
    failed = [x for x in failed if x[1] != 0]
    expect(not failed, f"{len(failed)} simulated ranks failed, first: {failed[:1]}")
    rc = agg.wait(120)
    expect(rc == 0, f"aggregate exit code {rc}:\n{open(out + '.log').read()[-3000:]}")
    with h5py.File(out, "r") as f:
        expect(int(f.attrs["world_size"]) == ranks, f"world_size {f.attrs['world_size']}")
        for r in range(ranks):
            g = f["ranks"][str(r)]
            expect(attr(g, "status") == "complete", f"rank {r}: {attr(g, 'status')}")
            names = g["strings"].asstr()[...]
            tick = [i for i, s in enumerate(names) if s == "tick"]
            n = int(np.isin(g["events"]["name_id"], tick).sum())
            expect(n == marks, f"rank {r}: {n} marks, recorded {marks}")
            check_counts_add_up(g, r)
    print(f"{ranks} simulated ranks: all complete with {marks} marks each")


def case_foreign_spool(ctx):
    """A spool another job left in `run`'s spool directory is left alone (named once), not merged
    or refused, and the job's own ranks are all stored."""
    out = ctx.path("own.h5")
    spool = out + ".spool"
    env = dict(os.environ, COMMPROF_AGGREGATOR="", COMMPROF_SPOOL_DIR=spool, COMMPROF_JOB_ID="otherjob",
               LD_PRELOAD=ctx.library)
    subprocess.run([ctx.test_program("mark_program"), "5"], env=env, check=True)
    foreign = [x for x in os.listdir(spool) if x.endswith(".cpspool")]
    expect(len(foreign) == 1, f"the other job's spool: {foreign}")
    p = run_profiled(ctx, out, [40, 0, "none", -1, 0])
    expect(p.returncode == 0, f"job exit code {p.returncode}\n{p.stderr}")
    expect(f"left {os.path.join(spool, foreign[0])} alone: it is a spool of job 'otherjob'" in p.stderr
           and "not merged" not in p.stderr, f"stderr:\n{p.stderr}")
    expect(os.path.exists(os.path.join(spool, foreign[0])), "the other job's spool is kept")
    with h5py.File(out, "r") as f:
        for rank in range(4):
            expect(attr(f["ranks"][str(rank)], "status") == "complete", f"rank {rank}")
            expect(len(allreduces(f, rank)) == 40, f"rank {rank}: {len(allreduces(f, rank))} allreduces")
    print("foreign spool left alone; 4 own ranks complete")


def case_term_inflight(ctx):
    """A job ended by SIGTERM while every rank is stuck in a different call (inflight_program.c):
    each rank's file part holds the call it was inside as an INCOMPLETE event with its kind, op,
    communicator, sequence number, peer and tag, ending at the signal's flush (not before its start),
    its completed allreduces unflagged, and the counter calls_in_flight_at_exit."""
    port = free_port()
    out = ctx.path("inflight.h5")
    agg = Aggregate(ctx, out, port)
    cmd = mpirun(4)
    env = job_env(ctx, port)
    for k in list(env) + ["LD_PRELOAD"]:
        cmd += ["-x", k]
    full = dict(os.environ)
    full.update(env)
    full["LD_PRELOAD"] = ctx.library
    job = subprocess.Popen(cmd + [ctx.test_program("inflight_program")], env=full, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    seen = set()
    deadline = time.time() + 120
    try:
        while len(seen) < 4 and time.time() < deadline:
            line = job.stdout.readline()
            if not line:
                break
            if line.startswith("rank ") and line.strip().endswith("blocking"):
                seen.add(int(line.split()[1]))
        expect(len(seen) == 4, f"only ranks {sorted(seen)} reached their last call")
        time.sleep(1.0)  # every rank is inside its call by now (it printed just before entering it)
        job.send_signal(signal.SIGTERM)
        rest, _ = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    rc = agg.wait(120)
    expect(rc == 0, f"aggregate exit code {rc}:\n{open(out + '.log').read()[-3000:]}\njob:\n{rest}")
    want = {  # rank: [(kind, subtype, comm is world, seq or None, peer, tag, bytes, extra flags)]
        0: [(3, 4, False, 0, -1, 0, 16, 0)],
        1: [(5, 48, None, None, -1, 0, 1, 0), (4, 33, True, None, 3, 6, 16, 1)],
        2: [(4, 33, True, None, 3, 5, 4, 0)],
        3: [(3, 1, True, 3, -1, 0, 0, 0)],
    }
    with h5py.File(out, "r") as f:
        for rank in range(4):
            g = f["ranks"][str(rank)]
            expect(attr(g, "status") == "complete", f"rank {rank}: status {attr(g, 'status')}")
            expect(attr(g, "end_reason") == "killed by signal 15 (SIGTERM)", f"rank {rank}: {attr(g, 'end_reason')!r}")
            expect(int(attr(g, "calls_in_flight_at_exit", -1)) == len(want[rank]),
                   f"rank {rank}: calls_in_flight_at_exit {attr(g, 'calls_in_flight_at_exit')}")
            check_counts_add_up(g, rank)
            done = allreduces(f, rank)
            expect(sorted(done["seq"].tolist()) == [0, 1, 2] and all(done["comm_id"] == 1),
                   f"rank {rank}: completed allreduces {done['seq'].tolist()}")
            ev = g["events"][...]
            stuck = ev[(ev["flags"] & INCOMPLETE) != 0]
            got = sorted((int(e["kind"]), int(e["subtype"])) for e in stuck)
            expect(got == sorted((w[0], w[1]) for w in want[rank]), f"rank {rank}: INCOMPLETE events {got}")
            for kind, sub, world, seq, peer, tag, nbytes, nonblocking in want[rank]:
                e = stuck[(stuck["kind"] == kind) & (stuck["subtype"] == sub)][0]
                if world is not None:
                    expect((int(e["comm_id"]) == 1) == world, f"rank {rank} kind {kind}: comm {e['comm_id']}")
                if seq is not None:
                    expect(int(e["seq"]) == seq, f"rank {rank} kind {kind}: seq {e['seq']} != {seq}")
                expect(int(e["peer"]) == peer, f"rank {rank} kind {kind}: peer {e['peer']} != {peer}")
                if kind == 4:
                    expect(int(e["correlation"]) == tag, f"rank {rank}: tag {e['correlation']} != {tag}")
                expect(int(e["bytes"]) == nbytes, f"rank {rank} kind {kind}: bytes {e['bytes']} != {nbytes}")
                expect(bool(int(e["flags"]) & 1) == bool(nonblocking), f"rank {rank} kind {kind}: flags {e['flags']}")
                expect(int(e["end_ns"]) >= int(e["start_ns"]) > 0, f"rank {rank} kind {kind}: span {e['start_ns']}..{e['end_ns']}")
                expect(int(e["start_ns"]) >= int(done["end_ns"].max()), f"rank {rank}: stuck call starts before the last allreduce ended")
        # Rank 0's allreduce is on the evens' communicator, which rank 0 created (rank 2 joined).
        e0 = f["ranks"]["0"]["events"][...]
        comm = e0[(e0["kind"] == 6)]["comm_id"]
        stuck0 = e0[(e0["flags"] & INCOMPLETE) != 0][0]
        expect(int(stuck0["comm_id"]) in set(int(c) for c in comm), f"rank 0's allreduce comm {stuck0['comm_id']}")
    print("SIGTERM: every rank's in-flight call stored INCOMPLETE with its identity")


def case_nccl_inflight(ctx):
    """The NCCL plugin's in-flight collectives take part (tests/nccl/nccl_profiler_driver, v5): rank 2's
    ncclAllReduce of iteration 3 is enqueued but its kernel never runs; the others go on to the next
    iteration's MPI_Barrier and wait there. The job is ended by SIGTERM: rank 2's file part holds that
    allreduce as a kind 17 INCOMPLETE event with its seq, communicator and bytes (and its 3 finished
    ones unflagged); the others hold the barrier they were in, INCOMPLETE, with the next seq."""
    plugin = os.path.join(ctx.build, "nccl_hooks", "libnccl-profiler-commprof.so")
    driver = os.path.join(ctx.build, "tests", "nccl", "nccl_profiler_driver")
    if not os.path.exists(plugin) or not os.path.exists(driver):
        print(f"nccl_inflight: SKIPPED: {plugin} or {driver} is not built")
        return
    hang_rank, hang_iter, count = 2, 3, 4096
    port = free_port()
    out = ctx.path("nccl_inflight.h5")
    agg = Aggregate(ctx, out, port)
    cmd = mpirun(4)
    env = job_env(ctx, port)
    for k in list(env) + ["LD_PRELOAD"]:
        cmd += ["-x", k]
    full = dict(os.environ)
    full.update(env)
    full["LD_PRELOAD"] = ctx.library
    args = [driver, "--plugin", plugin, "--abi", "v5", "--iters", "10", "--count", str(count),
            "--hang-rank", str(hang_rank), "--hang-iter", str(hang_iter)]
    job = subprocess.Popen(cmd + args, env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            line = job.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith(f"rank {hang_rank} hung"):
                break
        expect(any(l.startswith(f"rank {hang_rank} hung") for l in lines), "the driver never hung:\n" + "".join(lines))
        time.sleep(1.5)  # the others reach the next barrier meanwhile
        job.send_signal(signal.SIGTERM)
        rest, _ = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    rc = agg.wait(120)
    expect(rc == 0, f"aggregate exit code {rc}:\n{open(out + '.log').read()[-3000:]}\njob:\n{rest}")
    with h5py.File(out, "r") as f:
        for rank in range(4):
            g = f["ranks"][str(rank)]
            expect(attr(g, "end_reason") == "killed by signal 15 (SIGTERM)", f"rank {rank}: {attr(g, 'end_reason')!r}")
            check_counts_add_up(g, rank)
            ev = g["events"][...]
            flagged = (ev["flags"] & INCOMPLETE) != 0
            nccl_ar = ev[(ev["kind"] == 17) & (ev["subtype"] == 4)]  # COMMPROF_OP_ALLREDUCE
            stuck = ev[flagged]
            expect(int(attr(g, "calls_in_flight_at_exit", -1)) == 1, f"rank {rank}: calls_in_flight_at_exit "
                   f"{attr(g, 'calls_in_flight_at_exit')}, INCOMPLETE {[(int(e['kind']), int(e['subtype'])) for e in stuck]}")
            expect(len(stuck) == 1, f"rank {rank}: {len(stuck)} INCOMPLETE events")
            e = stuck[0]
            expect(int(e["end_ns"]) >= int(e["start_ns"]) > 0, f"rank {rank}: span {e['start_ns']}..{e['end_ns']}")
            if rank == hang_rank:
                done = nccl_ar[(nccl_ar["flags"] & INCOMPLETE) == 0]
                expect(sorted(done["seq"].tolist()) == list(range(hang_iter)), f"finished allreduces {done['seq'].tolist()}")
                expect(int(e["kind"]) == 17 and int(e["subtype"]) == 4 and int(e["seq"]) == hang_iter,
                       f"rank {rank}: in flight kind {e['kind']} op {e['subtype']} seq {e['seq']}")
                expect(int(e["comm_id"]) == int(done["comm_id"][0]), f"rank {rank}: comm {e['comm_id']}")
                expect(int(e["bytes"]) == count * 4, f"rank {rank}: bytes {e['bytes']}")
                expect(int(e["start_ns"]) >= int(done["end_ns"].max()), f"rank {rank}: started before the last one ended")
            else:
                world = ev[(ev["kind"] == 3) & (ev["comm_id"] == 1) & ~flagged]
                expect(int(e["kind"]) == 3 and int(e["subtype"]) == 1 and int(e["comm_id"]) == 1,
                       f"rank {rank}: in flight kind {e['kind']} op {e['subtype']} comm {e['comm_id']}")
                expect(int(e["seq"]) == int(world["seq"].max()) + 1, f"rank {rank}: barrier seq {e['seq']}")
                done = nccl_ar[(nccl_ar["flags"] & INCOMPLETE) == 0]
                expect(len(done) == hang_iter + 1, f"rank {rank}: {len(done)} finished allreduces")
    print("NCCL: the enqueued allreduce whose kernel never ran is stored INCOMPLETE on the hung rank")


def main():
    a, ctx = case_arguments()
    if a.case.startswith("signal_"):
        case_signal(ctx, a.case[len("signal_"):])
    else:
        globals()["case_" + a.case](ctx)
    print("PASS")


if __name__ == "__main__":
    sys.exit(main())
