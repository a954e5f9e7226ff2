#!/usr/bin/env python3
"""Faults of the output side of `commprof run` and `commprof aggregate` (issue 16, items 1, 2, 11),
done for real and read back with h5py.

Usage: output_faults.py CASE --build BUILD_DIR --work WORK_DIR

Cases:
  bad_targets  -o in a missing directory, -o a directory, --listen not an IP, --listen an address
               of no interface (192.0.2.1, TEST-NET-1): for run and aggregate, one line naming
               the path or address and why, exit 1 (2 for a listen address that is not an IP),
               no crash, nothing created (no output, no secret file). run with --library or
               $COMMPROF_LIBRARY naming a missing file: exit 1 at once, naming it, nothing created.
  keep_existing  an existing good file survives `run` of a command that cannot start (127) and of
               a job in which no rank records (its own exit code); a job that records replaces it
               and leaves no temporary file.
  disk_full    a 2 MiB tmpfs: a 4-rank 420-event job fits (complete, every event); a job that
               cannot fit, exiting 0 and then 5: commprof returns 1 and 5, no SIGSEGV, no
               HDF5-DIAG line, one error naming the file, the reason and the events not stored,
               no "wrote" line, and the file says so in `write_status` while the rows it holds
               are exact. Exits 77 (skipped) where a tmpfs cannot be mounted.
  disk_full_spools  the file's disk fills while the spool directory is on a healthy one: the ranks
               spool what was not stored, run exits 1, keeps every spool (says so, naming the
               directory) and `commprof merge` of them gives, with what the failed file holds,
               every allreduce of every rank. With relays (--relay node) whose shard directory is
               a full tmpfs: the relay's spools are merged into the job file, which holds every
               event of every rank, run exits 0 with a warning naming the relay; with the spools
               on the full disk too, nothing can be recovered: run exits 1 with the relay's error
               and without the "no rank recorded anything" checklist. A relay whose disk fills
               after some flushes: its ranks linked as far as it stored them, their spools kept,
               exit 1; `commprof merge` of the spools gives each rank's tail through its last allreduce.
  footprint    128 ranks x 55 events written by the real writer (make_synthetic_profile) are
               under 5 MB and read back whole by h5py.
"""
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import time

import h5py
import numpy as np

from e2e_support import case_arguments, expect, mpirun
from e2e_support import run as run_with_env

SKIP = 77


def run(cmd, cwd=None, timeout=180):
    """The job and the CLI as a user runs them: no COMMPROF_SECRET inherited from the test runner."""
    return run_with_env(cmd, cwd=cwd, timeout=timeout, unset=("COMMPROF_SECRET",))


def expect_rc(p, rc, what):
    expect(p.returncode == rc, f"{what}: exit code {p.returncode}, expected {rc}\nstderr:\n{p.stderr}")


def write_status(path):
    with h5py.File(path, "r") as f:
        return bytes(f["write_status"][()]).decode()


def case_bad_targets(ctx):
    d = ctx.path("targets")
    os.makedirs(d)
    os.makedirs(os.path.join(d, "adir"))
    bad = [
        (["-o", "/nonexistent-commprof-dir/x.h5"], 1, "cannot write /nonexistent-commprof-dir/x.h5: directory "
                                                      "/nonexistent-commprof-dir does not exist"),
        (["-o", "adir"], 1, "cannot write adir: it is a directory"),
        (["--listen", "notanip", "-o", "x.h5"], 2,
         "--listen notanip: not an IP address (give a literal such as 127.0.0.1 or 0.0.0.0, not a host name)"),
        (["--listen", "192.0.2.1", "-o", "x.h5"], 1, "cannot listen on 192.0.2.1:0: Cannot assign requested address"),
    ]
    for args, rc, message in bad:
        p = run([ctx.commprof, "run", *args, "--", "true"], cwd=d)
        expect_rc(p, rc, f"run {args}")
        lines = p.stderr.strip().splitlines()
        expect(lines == [f"commprof run: {message}"], f"run {args}: stderr {lines!r}, expected the one line "
                                                       f"'commprof run: {message}'")
        # aggregate takes HOST:PORT.
        agg = [a + ":0" if a in ("notanip", "192.0.2.1") else a for a in args]
        p = run([ctx.commprof, "aggregate", "--expect", "1", "--secret-file", "secret", *agg], cwd=d)
        expect_rc(p, rc, f"aggregate {agg}")
        lines = p.stderr.strip().splitlines()
        expect(lines == [f"commprof aggregate: {message}"],
               f"aggregate {agg}: stderr {lines!r}, expected 'commprof aggregate: {message}'")
        if args[0] == "-o":
            # merge checks its output before it reads a spool (here none to read: the output's
            # fault is the one named, as run names it before the job starts).
            p = run([ctx.commprof, "merge", "adir", *args], cwd=d)
            expect_rc(p, rc, f"merge {args}")
            lines = p.stderr.strip().splitlines()
            expect(lines == [f"commprof merge: {message}"],
                   f"merge {args}: stderr {lines!r}, expected 'commprof merge: {message}'")
            # import checks it before it reads a trace (here none: the output's fault comes first).
            p = run([ctx.commprof, "import", "kineto", "adir", *args], cwd=d)
            expect_rc(p, rc, f"import kineto {args}")
            lines = p.stderr.strip().splitlines()
            expect(lines == [f"commprof import kineto: {message}"],
                   f"import kineto {args}: stderr {lines!r}, expected 'commprof import kineto: {message}'")
        left = sorted(os.listdir(d))
        expect(left == ["adir"] and os.listdir(os.path.join(d, "adir")) == [],
               f"{args}: a failed start left files behind: {left}")
    # An output that is a FIFO (a reader waiting on it, or a mistake): refused, left a FIFO (a
    # file renamed over it would replace it).
    fifo_dir = ctx.path("targets-fifo")
    os.makedirs(os.path.join(fifo_dir, "spools"))
    os.mkfifo(os.path.join(fifo_dir, "pipe"))
    for cmd in (["run", "-o", "pipe", "--", "true"], ["merge", "spools", "-o", "pipe"],
                ["import", "kineto", "spools", "-o", "pipe"]):
        p = run([ctx.commprof, *cmd], cwd=fifo_dir)
        expect_rc(p, 1, f"{cmd} to a FIFO")
        name = "import kineto" if cmd[0] == "import" else cmd[0]
        expect(p.stderr.strip().splitlines() == [f"commprof {name}: cannot write pipe: it exists and is not a "
                                                 "regular file"], f"{cmd} to a FIFO: {p.stderr!r}")
        expect(stat.S_ISFIFO(os.lstat(os.path.join(fifo_dir, "pipe")).st_mode) and
               sorted(os.listdir(fifo_dir)) == ["pipe", "spools"], f"{cmd} to a FIFO: left {os.listdir(fifo_dir)}")
    # A library named that is not there: refused before the job runs (it would only show as
    # "nothing recorded" after the whole job), nothing created.
    for args, env in ((["--library", "/nonexistent-commprof/libcommprof.so"], {}),
                      ([], {"COMMPROF_LIBRARY": "/nonexistent-commprof/libcommprof.so"})):
        p = run_with_env([ctx.commprof, "run", *args, "-o", "lib.h5", "--", "true"], cwd=d, env=env,
                         unset=("COMMPROF_SECRET",))
        expect_rc(p, 1, f"run with a missing library {args or env}")
        expect("/nonexistent-commprof/libcommprof.so: no such file (nothing was written)" in p.stderr,
               f"missing library {args or env}: {p.stderr}")
        expect(sorted(os.listdir(d)) == ["adir"], f"missing library {args or env}: files left {os.listdir(d)}")
    print("bad_targets: 17 refusals, one line each, nothing created")


def case_keep_existing(ctx):
    out = ctx.path("good.h5")
    p = run([ctx.commprof, "run", "-q", "-o", out, "--", *mpirun(2), ctx.test_program("output_faults_program"), "10", "0"])
    expect_rc(p, 0, "the first, good run")
    with h5py.File(out, "r") as f:
        first_job = f.attrs["job_id"]
    before = open(out, "rb").read()

    p = run([ctx.commprof, "run", "-o", out, "./nonexistent-program"], cwd=ctx.work)
    expect_rc(p, 127, "run of a program that does not exist")
    expect("cannot start './nonexistent-program': No such file or directory" in p.stderr, p.stderr)
    expect(open(out, "rb").read() == before, "a command that cannot start replaced the existing file")
    p = run([ctx.commprof, "run", "-o", out, "no-such-command-commprof"], cwd=ctx.work)
    expect_rc(p, 127, "run of a command not on PATH")
    expect("cannot start 'no-such-command-commprof': command not found on PATH" in p.stderr, p.stderr)
    expect(open(out, "rb").read() == before, "a command not on PATH replaced the existing file")

    # The job starts but no rank records: its exit code, the old file kept, no temporary left.
    p = run([ctx.commprof, "run", "-o", out, "--", "sh", "-c", "exit 3"])
    expect_rc(p, 3, "a job in which no rank records")
    expect(f"{out} is left as it was" in p.stderr, p.stderr)
    expect(open(out, "rb").read() == before, "a job that recorded nothing replaced the existing file")
    expect(sorted(os.listdir(ctx.work)) == ["good.h5"], f"left behind: {os.listdir(ctx.work)}")

    p = run([ctx.commprof, "run", "-q", "-o", out, "--", *mpirun(2), ctx.test_program("output_faults_program"), "20", "0"])
    expect_rc(p, 0, "a second good run")
    with h5py.File(out, "r") as f:
        expect(f.attrs["job_id"] != first_job, "the file of a job that recorded must replace the old one")
        expect([f["ranks"][r]["events"].shape[0] for r in sorted(f["ranks"])] == [22, 22],
               "the new file holds the new job: 20 allreduces + init + finalize per rank")
        expect(bytes(f["write_status"][()]).decode() == "complete", "write_status of a clean run")
    expect(sorted(os.listdir(ctx.work)) == ["good.h5"], f"left behind: {os.listdir(ctx.work)}")
    print("keep_existing: kept on 127, 127 and a job recording nothing; replaced by a job that recorded")


def mount_tmpfs(d, size):
    os.makedirs(d)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", d], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        return p.stdout.strip() or f"mount exited {p.returncode}"
    return None


def case_disk_full(ctx):
    d = ctx.path("tmpfs")
    why = mount_tmpfs(d, "2m")
    if why is not None:
        print(f"SKIPPED: cannot mount a 2 MiB tmpfs at {d} ({why}); the disk-full case needs root or "
              f"CAP_SYS_ADMIN (tests/unit/aggregator/writer_faults_test.cc simulates it with RLIMIT_FSIZE)")
        return SKIP
    try:
        # A 4-rank job of 420 events fits in 2 MiB (1 MiB chunks per rank did not).
        out = os.path.join(d, "fits.h5")
        p = run([ctx.commprof, "run", "-q", "-o", out, "--", *mpirun(4), ctx.test_program("output_faults_program"), "103", "0"])
        expect_rc(p, 0, "the 420-event job on a 2 MiB tmpfs")
        size = os.path.getsize(out)
        expect(size < 2 * 1024 * 1024, f"420 events took {size} bytes")
        with h5py.File(out, "r") as f:
            counts = [f["ranks"][r]["events"].shape[0] for r in sorted(f["ranks"])]
            expect(counts == [105] * 4, f"events per rank {counts}, expected 4 x 105")
            expect(bytes(f["write_status"][()]).decode() == "complete", "write_status")
            expect(f.attrs["finalized"] == 1, "finalized")
        os.remove(out)
        print(f"disk_full: 4 ranks x 105 events fit, {size} bytes")

        # 2 ranks x 40002 events = 5.1 MB of records, stored uncompressed (compressed they would
        # fit: 6-8 bytes each): the disk fills. The job's code is kept.
        for job_rc, want_rc in ((0, 1), (5, 5)):
            out = os.path.join(d, f"full{job_rc}.h5")
            # Flushes every 20 ms and pauses of 50 ms every 2000 iterations: part of the job is
            # flushed before the disk fills, and must be found exactly as recorded.
            p = run([ctx.commprof, "run", "--compression", "none", "--flush-ms", "20", "-o", out, "--", *mpirun(2), ctx.test_program("output_faults_program"), "40000",
                     str(job_rc), "50"], timeout=300)
            expect(p.returncode not in (139, -11), f"commprof crashed (exit code {p.returncode})\n{p.stderr}")
            expect_rc(p, want_rc, f"disk full, job exit code {job_rc}")
            expect("HDF5-DIAG" not in p.stderr and "#000" not in p.stderr,
                   f"HDF5's own error stack was printed:\n{p.stderr[:2000]}")
            expect("commprof: wrote" not in p.stderr, "a 'wrote' line for a file that could not be written")
            lines = [l for l in p.stderr.splitlines() if l.startswith("commprof run: error: writing")]
            expect(len(lines) == 1, f"one error line expected, got {lines}\n{p.stderr}")
            prefix = f"commprof run: error: writing {out} failed: No space left on device; "
            expect(lines[0].startswith(prefix) and lines[0].endswith(" events not stored"), lines[0])
            lost = int(lines[0][len(prefix):].split()[0])
            expect(0 < lost <= 2 * 40002, f"events not stored: {lost}")
            expect(f"job exit code {job_rc}" in p.stderr, p.stderr)
            # Nobody waits for what can no longer be stored: the aggregator closes each rank's
            # connection after its bye instead of leaving it to wait out COMMPROF_BYE_ACK_MS (5 s),
            # and so sees every connection end rather than waiting out its 10 s grace.
            closed = [l for l in p.stderr.splitlines() if "closed the connection without confirming" in l]
            expect(len(closed) == 2 and "COMMPROF_BYE_ACK_MS" not in p.stderr,
                   f"the ranks did not learn at once that their streams could not be stored:\n{p.stderr}")
            expect("still open after" not in p.stderr, f"connections outlived the job:\n{p.stderr}")
            # The spools are on the same full disk: they could not take even their first bytes. Such
            # empty files hold nothing: removed, and said, rather than left to look like kept events.
            spool_dir = out + ".spool"
            left = os.listdir(spool_dir) if os.path.isdir(spool_dir) else []
            expect(not left, f"empty spools left behind in {spool_dir}: {left}")
            expect(f"commprof run: removed 2 empty spool file(s) from {spool_dir}: their ranks could not spool "
                   "there either" in p.stderr and "kept the" not in p.stderr,
                   f"no line saying the empty spools were removed:\n{p.stderr}")
            status = write_status(out)
            expect(status == f"failed: No space left on device; {lost} events not stored",
                   f"write_status {status!r} does not match the error line")
            with h5py.File(out, "r") as f:
                expect(f.attrs["finalized"] == 0, "a file that could not be written is not finalized")
                stored = 0
                for r in f["ranks"]:
                    ev = f["ranks"][r]["events"][...]
                    stored += len(ev)
                    # Every row the file holds is a real record: the allreduces are in order with
                    # their per-communicator sequence numbers; no rows of zeros.
                    expect(not np.any(ev["end_ns"] == 0), f"rank {r}: rows of zeros in a failed file")
                    coll = ev[ev["kind"] == 3]
                    expect(np.array_equal(coll["seq"], np.arange(len(coll), dtype=coll["seq"].dtype)),
                           f"rank {r}: the stored collectives are not the job's first {len(coll)}")
                expect(stored > 0, "nothing was flushed before the disk filled: the case checks no stored row")
                expect(stored + lost == 2 * 40002,
                       f"stored {stored} + not stored {lost} != the 80004 events the job recorded")
            info = json.loads(run([ctx.commprof, "info", "--json", out]).stdout)
            expect(info["events_not_stored"] == lost and info["missing_events"] >= lost,
                   f"info --json: events_not_stored {info['events_not_stored']}, missing {info['missing_events']}, "
                   f"write_status says {lost}")
            gate = run([ctx.commprof, "check", out, "--max", "dropped_events=0", "--max", "unreadable_ranks=2"])
            expect(gate.returncode == 1 and "FAIL dropped_events" in gate.stdout,
                   f"check --max dropped_events=0 passes a file whose write failed:\n{gate.stdout}{gate.stderr}")
            os.remove(out)
            print(f"disk_full: job exit code {job_rc} -> {p.returncode}; stored {stored}, not stored {lost}")
    finally:
        subprocess.run(["umount", d], check=False)
    return 0


def allreduce_seqs(path, rank):
    """The sequence numbers of the allreduces a file holds for `rank` (empty when it holds none)."""
    with h5py.File(path, "r") as f:
        if "ranks" not in f or str(rank) not in f["ranks"]:
            return set()
        ev = f["ranks"][str(rank)]["events"][...]
        return set(int(q) for q in ev[ev["kind"] == 3]["seq"])


def readable_allreduce_seqs(path, info, rank):
    """The allreduce sequence numbers of `rank` in a job file, in the rows commprof reads (`info
    --json` as `info`), and how many rows at its end it reads around (a last chunk a failed writer
    left damaged, docs/reliability.md). commprof's own decoder judges the damage: h5py's LZ4 plugin
    may decode another rank's chunk written into the freed space as rows."""
    ri = next(r for r in info["ranks"] if r["rank"] == rank)
    with h5py.File(path, "r") as f:
        ev = f["ranks"][str(rank)]["events"][:ri["event_count"]]
    expect(ri["damaged_tail"] < 1024, f"rank {rank}: {ri['damaged_tail']} damaged rows, more than a chunk")
    return set(int(q) for q in ev[ev["kind"] == 3]["seq"]), ri["damaged_tail"]


def case_disk_full_spools(ctx):
    full = ctx.path("tmpfs")
    why = mount_tmpfs(full, "1m")
    if why is not None:
        print(f"SKIPPED: cannot mount a 1 MiB tmpfs at {full} ({why}); needs root or CAP_SYS_ADMIN")
        return SKIP
    iters, ranks = 20000, 4
    job = [*mpirun(ranks), ctx.test_program("output_faults_program"), str(iters), "0", "50"]
    try:
        # 1. The file's disk is full, the spools' is not: nothing is lost, the spools stay.
        spools = ctx.path("spools")
        out = os.path.join(full, "o.h5")
        p = run([ctx.commprof, "run", "--compression", "none", "--flush-ms", "20", "--spool-dir", spools, "-o", out,
                 "--", *job], timeout=300)
        expect_rc(p, 1, "the file's disk full, the job exiting 0")
        kept = sorted(n for n in os.listdir(spools) if n.endswith(".cpspool")) if os.path.isdir(spools) else []
        expect(len(kept) == ranks, f"{len(kept)} spool files kept in {spools}, expected {ranks}\n{p.stderr}")
        line = f"commprof run: kept the {ranks} spool file(s) in {spools}: their events are not all in {out}"
        expect(line in p.stderr, f"no line saying the spools were kept ({line!r}):\n{p.stderr}")
        rest = ctx.path("rest.h5")
        m = run([ctx.commprof, "merge", spools, "-o", rest])
        expect_rc(m, 0, "commprof merge of the kept spools")
        for r in range(ranks):
            got = allreduce_seqs(out, r) | allreduce_seqs(rest, r)
            expect(got == set(range(iters)),
                   f"rank {r}: the failed file and the merged spools hold {len(got)} of the {iters} allreduces")
        print(f"disk_full_spools: {ranks} spools kept; failed file + merged spools hold every allreduce")
        for n in os.listdir(full):
            os.remove(os.path.join(full, n))

        # 2. Relays whose shard directory is full: the relay keeps its ranks' spools, the job's
        # aggregator merges them into the job file, which is whole.
        work = ctx.path("relayed")
        os.makedirs(work)
        out = os.path.join(work, "o.h5")
        shards = out + ".shards"
        subprocess.run(["umount", full], check=False)
        os.rmdir(full)
        why = mount_tmpfs(shards, "200k")
        expect(why is None, f"cannot mount a tmpfs at {shards}: {why}")
        p = run([ctx.commprof, "run", "--relay", "node", "--compression", "none", "-o", out, "--", *job],
                timeout=300)
        expect_rc(p, 0, "the relay's shard directory full, its ranks' spools merged")
        warn = [ln for ln in p.stderr.splitlines() if ln.startswith("commprof run: warning: relay on ")]
        expect(len(warn) == 1 and "No space left on device" in warn[0] and
               warn[0].endswith("its ranks' spools were merged into the job's file instead"),
               f"expected one warning naming the relay's full disk:\n{p.stderr}")
        expect(f"commprof: wrote {out}: {ranks} rank(s)" in p.stderr, f"no 'wrote' line with {ranks} ranks:\n{p.stderr}")
        for r in range(ranks):
            got = allreduce_seqs(out, r)
            expect(got == set(range(iters)), f"rank {r}: the job file holds {len(got)} of the {iters} allreduces")
        print(f"disk_full_spools: a relay's full shard directory: the job file holds every allreduce of {ranks} ranks")

        # 3. The spools cannot be written either: the ranks' events are lost, and run says the
        # relays failed (exit 1) rather than that nothing was recorded. Two relays (two ranks each):
        # the job file counts what both could not store, still knows the job's four ranks (listed
        # missing where a relay failed before storing them), and `check` fails on it.
        for n in os.listdir(work):
            path = os.path.join(work, n)
            if os.path.isfile(path):
                os.remove(path)
        for n in os.listdir(shards):
            os.remove(os.path.join(shards, n))
        p = run([ctx.commprof, "run", "--relay", "2", "--compression", "none", "--spool-dir",
                 os.path.join(shards, "spool"), "-o", out, "--", *job], timeout=300)
        expect_rc(p, 1, "the relays' shards and the spools on a full disk")
        err = [ln for ln in p.stderr.splitlines() if ln.startswith("commprof run: error: relay on ")]
        expect(len(err) == 2 and all("No space left on device" in e for e in err),
               f"expected both relays' errors:\n{p.stderr}")
        # Where a relay linked ranks from a first flush, the rest of their events is not claimed to
        # be in spools that the same full disk left empty.
        for e in err:
            expect("are linked as its last good flush left them" not in e or
                   e.endswith("the rest of their events is lost: their spools are empty or missing"),
                   f"the relay's error claims spools the full disk left empty:\n{e}")
        expect("no rank recorded anything" not in p.stderr, f"the nothing-recorded checklist for a full disk:\n{p.stderr}")
        lost = sum(int(e.split(" events not stored")[0].split()[-1]) for e in err)
        status = write_status(out)
        expect(status.startswith("failed: 2 relays' shards failed, the first relay on ") and
               f"; {lost} events not stored (lost: their ranks' spools are empty)" in status,
               f"write_status {status!r}: both relays' {lost} events not stored, and no spool claimed")
        info = json.loads(run([ctx.commprof, "info", "--json", out]).stdout)
        expect(info["world_size"] == ranks and sorted(r["rank"] for r in info["ranks"]) == list(range(ranks)),
               f"the job file knows its {ranks} ranks: world size {info['world_size']}, "
               f"ranks {[(r['rank'], r['status']) for r in info['ranks']]}")
        gate = run([ctx.commprof, "check", out])
        expect(gate.returncode == 1 and f"FAIL events_not_stored = {lost} (max 0)" in gate.stdout,
               f"check passes a file whose relays could not store {lost} events:\n{gate.stdout}{gate.stderr}")
        print(f"disk_full_spools: shards and spools on a full disk: exit 1 with both relays' errors, "
              f"{lost} events not stored, check fails")

        # 4. The relay's disk fills after some flushes went through: its ranks are linked as its
        # last good flush left them, the rest of their events stays in their spools (not merged,
        # not deleted), run exits 1 saying so, and the job file with the merged spools holds
        # every allreduce. (1 s flushes; 400 ms pauses every 2000 iterations: the first flush
        # holds part of the job, well under the 300 KiB the shard directory has.)
        subprocess.run(["umount", shards], check=False)
        for n in os.listdir(work):
            path = os.path.join(work, n)
            if os.path.isfile(path):
                os.remove(path)
            else:
                shutil.rmtree(path, ignore_errors=True)
        why = mount_tmpfs(shards, "300k")
        expect(why is None, f"cannot mount a tmpfs at {shards}: {why}")
        slow = [*mpirun(ranks), ctx.test_program("output_faults_program"), str(iters), "0", "400"]
        p = run([ctx.commprof, "run", "--relay", "node", "-o", out, "--", *slow], timeout=300)
        err = [ln for ln in p.stderr.splitlines() if ln.startswith("commprof run: error: relay on ")]
        spools = out + ".spool"
        kept = sorted(n for n in os.listdir(spools) if n.endswith(".cpspool")) if os.path.isdir(spools) else []
        if p.returncode == 0 and not err:
            print("disk_full_spools: the whole job fit in the relay's 300 KiB this time; part 4 checks nothing")
        else:
            expect(p.returncode == 1 and len(err) == 1 and "No space left on device" in err[0] and
                   "are linked as its last good flush left them" in err[0] and
                   err[0].endswith("the rest of their events is in their spools"),
                   f"expected exit 1 and the relay's error naming its linked ranks and their spools:\n{p.stderr}")
            expect(len(kept) == ranks, f"{len(kept)} spools kept in {spools}, expected {ranks}:\n{p.stderr}")
            rest = ctx.path("relay_rest.h5")
            expect_rc(run([ctx.commprof, "merge", spools, "-o", rest]), 0, "commprof merge of the relay's kept spools")
            # Each spool holds its rank's tail: the allreduces after the relay's last good flush,
            # through the last one; the job file holds the rest, but for the shard's last stored
            # chunk where the failed write left it unreadable (HDF5 may give a rewritten chunk the
            # space its old copy freed, docs/reliability.md): commands read the rank without it,
            # naming its records, and count them as missing.
            linked = 0
            report = run([ctx.commprof, "report", "--format", "json", out])
            info = json.loads(run([ctx.commprof, "info", "--json", out]).stdout)
            damaged_ranks = 0
            for r in range(ranks):
                tail = allreduce_seqs(rest, r)
                expect(tail and tail == set(range(min(tail), iters)),
                       f"rank {r}: the merged spool holds {len(tail)} allreduces, not a tail through {iters - 1}")
                mine, damaged = readable_allreduce_seqs(out, info, r)
                gap = set(range(iters)) - mine - tail
                if damaged == 0:
                    expect(not gap, f"rank {r}: {len(gap)} allreduces in neither the job file nor the spool")
                else:
                    damaged_ranks += 1
                    expect((not gap or max(gap) < min(tail) and
                                               gap == set(range(min(gap), max(gap) + 1))),
                           f"rank {r}: {damaged} damaged rows; allreduces in neither: {sorted(gap)[:5]}...")
                    expect(f"/ranks/{r}/events records " in report.stderr and "cannot be read (the last chunk" in
                           report.stderr, f"rank {r}'s damaged last chunk not named:\n{report.stderr}")
                linked += min(tail)
            expect(linked > 0, "the relay's first flush stored nothing: the case checks no linked rank")
            # the job file, written whole, says its events are not all there (info shows it)
            status = write_status(out)
            expect(status.startswith("failed: relay on ") and "(in its ranks' kept spools)" in status,
                   f"the job file's write_status {status!r} does not say a relay failed")
            info_text = run([ctx.commprof, "info", out]).stdout
            expect("(writing failed: relay on " in info_text, f"info does not show the relay's failure:\n{info_text}")
            gate = run([ctx.commprof, "check", out, "--max", "dropped_events=0", "--max", "unreadable_ranks=4"])
            expect(gate.returncode == 1 and "FAIL dropped_events" in gate.stdout,
                   f"check --max dropped_events=0 passes a job file a relay could not store whole:\n{gate.stdout}")
            expect(report.returncode == (1 if damaged_ranks else 0) and
                   len(json.loads(report.stdout)["ranks"]) == ranks,
                   f"report of the job file: rc {report.returncode}, {damaged_ranks} damaged rank(s)\n{report.stderr}")
            print(f"disk_full_spools: a relay's disk full mid-job: {linked} allreduces before the spools' tails, "
                  f"the rest in {len(kept)} kept spools; {damaged_ranks} rank(s) read without a damaged last chunk")
    finally:
        for d in (full, os.path.join(ctx.path("relayed"), "o.h5.shards")):
            subprocess.run(["umount", d], check=False, stderr=subprocess.DEVNULL)
    return 0


def case_analysis_disk_full(ctx):
    """A disk with room for the events but not for /analysis: `report --save` (and `run`'s own
    final analysis) says the analysis was not stored, naming ENOSPC, never crashes (HDF5 1.10's
    exit handler did, exit 139, when a sec2 file could not be closed), keeps the job's exit code,
    and leaves the file readable with no /analysis link (a half-written one could neither be read
    nor replaced); copied to a disk with room, `report --save` then stores it."""
    d = ctx.path("tmpfs")
    big = ctx.path("events.h5")
    job = [*mpirun(4), ctx.test_program("output_faults_program"), "20000", "0"]
    expect_rc(run([ctx.commprof, "run", "-q", "--analysis", "off", "-o", big, "--", *job], timeout=300), 0,
              "the job on a disk with room")
    size = os.path.getsize(big)
    why = mount_tmpfs(d, str(size + 64 * 1024))
    if why is not None:
        print(f"SKIPPED: cannot mount a tmpfs at {d} ({why}); needs root or CAP_SYS_ADMIN")
        return SKIP
    try:
        tight = os.path.join(d, "tight.h5")
        shutil.copyfile(big, tight)
        p = run([ctx.commprof, "report", "--save", tight])
        expect(p.returncode == 1, f"report --save on a full disk: exit code {p.returncode}\n{p.stderr[-2000:]}")
        expect("No space left on device" in p.stderr and "/analysis" in p.stderr and "HDF5-DIAG" not in p.stderr,
               f"report --save on a full disk:\n{p.stderr[-2000:]}")
        with h5py.File(tight, "r") as f:
            expect("analysis" not in f and sorted(f["ranks"]) == ["0", "1", "2", "3"],
                   f"the file after the failed save: {list(f)}")
        expect_rc(run([ctx.commprof, "info", tight]), 0, "info of the file after the failed save")
        roomy = ctx.path("roomy.h5")
        shutil.copyfile(tight, roomy)
        expect_rc(run([ctx.commprof, "report", "--save", roomy]), 0, "report --save with room")
        with h5py.File(roomy, "r") as f:
            expect(int(f["analysis"].attrs["matched"]) >= 20000, "the saved /analysis")
        print(f"analysis_disk_full: report --save of a {size}-byte file with 64 KiB to spare: exit 1, "
              f"file unchanged; saved with room")
        # run's own final analysis on a disk with room for the events written live (their chunks
        # rewritten as they fill) but not for /analysis (1.1 MB more here)
        subprocess.run(["umount", d], check=False)
        os.rmdir(d)
        why = mount_tmpfs(d, str(size + 600 * 1024))
        expect(why is None, f"cannot mount the second tmpfs: {why}")
        out = os.path.join(d, "run.h5")
        p = run([ctx.commprof, "run", "-o", out, "--", *job], timeout=300)
        expect(p.returncode not in (139, -11), f"commprof run crashed (exit code {p.returncode})\n{p.stderr[-2000:]}")
        if "commprof run: error: writing" in p.stderr:  # the events did not fit either: disk_full's case
            expect(p.returncode == 1, f"run whose events did not fit: exit code {p.returncode}")
            print("analysis_disk_full: run's events did not fit this time (exit 1, as case disk_full checks)")
            return 0
        expect(p.returncode == 0, f"run on a disk without room for /analysis: exit code {p.returncode} "
                                  f"(the job's is 0)\n{p.stderr[-2000:]}")
        if "analysis not stored" in p.stderr:
            expect("No space left on device" in p.stderr, f"why the analysis was not stored:\n{p.stderr[-2000:]}")
            with h5py.File(out, "r") as f:
                expect("analysis" not in f, "a failed run analysis left an /analysis link")
            print("analysis_disk_full: run kept the job's exit code 0 and said the analysis was not stored")
        else:
            print("analysis_disk_full: run's file and analysis fit this time (its events compressed better)")
        # The same in the background: its log names the reason (written once its copy of the file is
        # gone; the disk is full until then, and the log is on it).
        os.remove(out)
        p = run([ctx.commprof, "run", "--analysis", "background", "-o", out, "--", *job], timeout=300)
        expect(p.returncode not in (139, -11), f"commprof run crashed (exit code {p.returncode})")
        log = out + ".analysis.log"
        deadline = time.time() + 120
        text = ""
        while time.time() < deadline:
            text = open(log).read() if os.path.exists(log) else ""
            if "analysis not stored" in text:
                break
            with h5py.File(out, "r") as f:
                if "analysis" in f:
                    break
            time.sleep(0.5)
        if "analysis not stored" in text:
            expect("No space left on device" in text, f"the background analysis's log does not say why:\n{text}")
            print("analysis_disk_full: the background analysis's log names the full disk")
        else:
            print("analysis_disk_full: the background analysis fit this time")
    finally:
        subprocess.run(["umount", d], check=False, stderr=subprocess.DEVNULL)
    return 0


def case_file_size_limit(ctx):
    """Past `ulimit -f` a write fails (EFBIG) instead of SIGXFSZ ending the command without a word:
    exit 1, one message naming the output, no partial file. The job
    `run` starts keeps the signal as commprof found it (a rank past the limit still gets SIGXFSZ)."""
    import resource
    d = ctx.path("fsize")
    os.makedirs(d)
    job = os.path.join(d, "job.h5")
    p = run([ctx.commprof, "run", "-q", "-o", job, "--", *mpirun(2), ctx.test_program("output_faults_program"), "3000", "0"])
    expect_rc(p, 0, "the job")
    limit = 16 * 1024  # the Chrome trace of 6000 allreduces and the HTML report are larger

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    def run_limited(cmd):
        return subprocess.run(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180,
                              preexec_fn=limited)

    cases = [
        ("export", [ctx.commprof, "export", "-q", job, "-o", "t.json"], "t.json"),
        ("report", [ctx.commprof, "report", "--format", "html", job, "-o", "r.html"], "r.html"),
    ]
    # (Not under mpirun: the limit applies to Open MPI's own files too, and its PMIx server then
    # deadlocks in mpirun's finalize with a limit this small.)
    for what, cmd, name in cases:
        q = run_limited(cmd)
        expect(q.returncode == 1, f"{what} past the file-size limit: exit {q.returncode} (a signal is "
                                  f"{128 + 25}), expected 1\nstderr:\n{q.stderr}")
        expect(f"{name}: write failed (disk full, past the file-size limit" in q.stderr
               or f"{name}: write failed (disk full, or past the file-size limit?)" in q.stderr,
               f"{what}: the message names {name} and the limit:\n{q.stderr}")
        left = sorted(x for x in os.listdir(d) if x.startswith(name))
        expect(left == [], f"{what}: partial files left: {left}")
    # The job under `run` gets SIGXFSZ as the shell gave it (default: the rank dies of it).
    writer = os.path.join(d, "big.sh")
    with open(writer, "w") as f:
        f.write("#!/bin/sh\nhead -c 200000 /dev/zero > big.out\necho \"head=$?\"\n")
    os.chmod(writer, 0o755)
    q = run_limited([ctx.commprof, "run", "-q", "-o", "sh.h5", "--", writer])
    expect("head=153" in q.stdout, f"the job's writer past the limit dies of SIGXFSZ (128 + 25), as it would "
                                   f"without commprof: {q.returncode}\n{q.stdout}\n{q.stderr}")
    expect(os.path.getsize(os.path.join(d, "big.out")) == limit, "the job's write stopped at the limit")

    # `run -o` and `merge -o` whose output cannot take even HDF5's first bytes: exit 1, no 0- or
    # 96-byte file left where the output was to be.
    spool = os.path.join(d, "spool")
    env = {"COMMPROF_AGGREGATOR": "", "COMMPROF_SPOOL_DIR": spool, "COMMPROF_JOB_ID": "limitjob"}
    cmd = mpirun(2)
    for k in list(env) + ["LD_PRELOAD"]:
        cmd += ["-x", k]
    env["LD_PRELOAD"] = ctx.library
    run_with_env(cmd + [ctx.test_program("output_faults_program"), "3000", "0"], env=env, check_rc=0)

    def run_past(cmd, fsize):
        return subprocess.run(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180,
                              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize)))

    for fsize in (0, 64):
        for what, cmd in (("run", [ctx.commprof, "run", "-q", "-o", "new.h5", "--", "true"]),
                          ("merge", [ctx.commprof, "merge", spool, "-o", "new.h5"])):
            q = run_past(cmd, fsize)
            expect(q.returncode == 1 and "new.h5" in q.stderr and "File too large" in q.stderr,
                   f"{what} -o under a {fsize}-byte limit: exit {q.returncode}, expected 1 naming the file:\n{q.stderr}")
            left = sorted(x for x in os.listdir(d) if x.startswith("new.h5"))
            expect(left == [], f"{what} under a {fsize}-byte limit left {left}")
    # `merge -o` over an existing file that the merge outgrows: the old file is left as it was.
    before = open(job, "rb").read()
    q = run_past([ctx.commprof, "merge", spool, "-o", job], limit)
    expect(q.returncode == 1 and f"{job} is left as it was; what could be written is in {job}.tmp-" in q.stderr,
           f"merge over an existing file past the limit: exit {q.returncode}\n{q.stderr}")
    expect(open(job, "rb").read() == before, "merge past the limit changed the existing output")
    for x in os.listdir(d):
        if x.startswith("job.h5.tmp-"):
            os.remove(os.path.join(d, x))
    q = run([ctx.commprof, "merge", spool, "-o", job])
    expect_rc(q, 0, "merge over an existing file without a limit")
    with h5py.File(job, "r") as f:
        job_id = f.attrs["job_id"]
        job_id = job_id.decode() if isinstance(job_id, bytes) else str(job_id)
        expect(job_id == "limitjob", f"the merged file replaced the old: job_id {job_id!r}")
        counts = sorted(f["ranks"][r]["events"].shape[0] for r in f["ranks"])
    expect(counts == [3002, 3002], f"the merged file's ranks hold {counts} events, expected 3000 allreduces + 2 each")
    # `import kineto -o` the same: over an existing file that the import outgrows, the old file is
    # left as it was and nothing beside it; a new output past the limit leaves no file.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
    import make_kineto_seeds
    traces = os.path.join(d, "kineto")
    os.makedirs(traces)
    for r in (0, 1):
        with open(os.path.join(traces, f"rank{r}.json"), "w") as f:
            f.write(make_kineto_seeds.trace(r, iters=400))
    for target in (job, "imported.h5"):
        before = open(job, "rb").read()
        q = run_past([ctx.commprof, "import", "kineto", "-q", traces, "-o", target], limit)
        expect(q.returncode == 1 and "File too large" in q.stderr,
               f"import -o {target} past the limit: exit {q.returncode}, expected 1:\n{q.stderr}")
        expect(open(job, "rb").read() == before, f"import -o {target} past the limit changed {job}")
        if target == job:
            expect(f"{job} is left as it was" in q.stderr, f"import over {job}: {q.stderr}")
        left = sorted(x for x in os.listdir(d) if x.startswith(("imported.h5", "job.h5.tmp-")))
        expect(left == [], f"import -o {target} past the limit left {left}")
    q = run([ctx.commprof, "import", "kineto", "-q", traces, "-o", job])
    expect_rc(q, 0, "import over an existing file without a limit")
    with h5py.File(job, "r") as f:
        job_id = f.attrs["job_id"]
        job_id = job_id.decode() if isinstance(job_id, bytes) else str(job_id)
        expect(job_id == "kineto-import", f"the import replaced the old file: job_id {job_id!r}")
    print(f"file_size_limit: {len(cases)} commands past a {limit}-byte limit exit 1 with a message, no partial file; "
          f"run and merge leave no file when they cannot start one, merge and import keep an older output whole")
    return 0


def case_run_killed_spools(ctx):
    """`commprof run` killed (SIGKILL) while its job runs on: the ranks lose the aggregator and write
    the rest of their events to FILE.spool; the file holds what was stored before the kill.
    `info` names the spools and how to make a file of them (and `info --json` lists them), reading
    commands warn, and the file plus the merged spools hold every allreduce of both ranks."""
    import signal
    d = ctx.path("killed")
    os.makedirs(d)
    out = os.path.join(d, "k.h5")
    iters = 300
    job = subprocess.Popen([ctx.commprof, "run", "-o", out, "--", *mpirun(2), ctx.test_program("fault_program"),
                            str(iters), "0", "none", "0", "10000"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and not os.path.exists(out):
        time.sleep(0.05)
    time.sleep(0.5)
    os.kill(job.pid, signal.SIGKILL)
    job.wait()
    while time.time() < deadline + 60:  # the job (mpirun, the ranks) goes on in the run's session
        try:
            os.killpg(job.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    spools = sorted(glob.glob(out + ".spool/*.cpspool"))
    expect(len(spools) == 2, f"each rank spooled the rest of its events: {spools}")
    p = run([ctx.commprof, "info", out])
    expect(f"spools:      2 spool file(s) in {out}.spool hold events of its ranks that are not in this file; "
           f"`commprof merge {out}.spool -o REST.h5`" in p.stdout, f"info names the spools:\n{p.stdout}{p.stderr}")
    j = json.loads(run([ctx.commprof, "info", "--json", out]).stdout)
    expect(j["kept_spools"] == spools, f"info --json lists the spools: {j.get('kept_spools')}")
    p = run([ctx.commprof, "report", out])
    expect(f"commprof report: warning: {out}: 2 spool file(s) in {out}.spool hold events" in p.stderr,
           f"report warns of the spools:\n{p.stderr}")
    rest = os.path.join(d, "rest.h5")
    expect_rc(run([ctx.commprof, "merge", out + ".spool", "-o", rest]), 0, "commprof merge of the spools")
    for r in range(2):
        got = allreduce_seqs(out, r) | allreduce_seqs(rest, r)
        expect(got == set(range(iters)), f"rank {r}: the file and the merged spools hold {len(got)} of {iters}")
    print(f"run_killed_spools: 2 spools named by info and report; file + spools hold all {iters} allreduces")
    return 0


def case_footprint(ctx):
    maker = os.path.join(ctx.build, "bench", "make_synthetic_profile")
    if not os.path.exists(maker):
        print(f"SKIPPED: {maker} is not built (COMMPROF_BUILD_BENCH=OFF); "
              f"tests/unit/aggregator/writer_faults_test.cc bounds the same footprint")
        return SKIP
    out = ctx.path("small.h5")
    p = run([maker, "--ranks", "128", "--events", str(128 * 55), "--out", out])
    expect_rc(p, 0, "make_synthetic_profile")
    size = os.path.getsize(out)
    expect(size < 5_000_000, f"128 ranks x 55 events took {size} bytes")
    with h5py.File(out, "r") as f:
        counts = [f["ranks"][str(r)]["events"].shape[0] for r in range(128)]
        expect(sum(counts) == 128 * 55, f"{sum(counts)} events read back, expected {128 * 55}")
    print(f"footprint: 128 ranks x 55 events in {size} bytes")
    return 0


def main():
    a, ctx = case_arguments()
    fn = globals().get("case_" + a.case)
    if fn is None:
        sys.exit(f"unknown case {a.case}")
    rc = fn(ctx)
    sys.exit(rc or 0)


if __name__ == "__main__":
    main()
