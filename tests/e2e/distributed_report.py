#!/usr/bin/env python3
"""The report as an MPI job (docs/scale.md#distributed-analysis): `mpirun -np K commprof report FILE`
gives exactly what one process gives.

Usage: distributed_report.py CASE --build BUILD_DIR --work WORK_DIR

Cases and their truth:
  identical   Three files whose reports exercise every part the other processes send: a synthetic
              job of 48 ranks (bench/make_synthetic_profile: collectives on the world and on two
              halves, a non-blocking allreduce, a send/receive ring, rank 5 planted 300 us late
              before each blocking collective, clock offsets up to 2 ms), the same with GPU kernels
              and copies (devices in the overlap), and a 6-rank file with planted allocations
              (tests/e2e/make_memory_profile: memory series). For each, the JSON of
              `mpirun -np K commprof report --format json` for K = 2, 3 and 5 is byte for byte the
              one-process JSON, and the verdict names rank 5 (synthetic files); the text report for
              K = 3 is the one-process text.
  real_job    A real 4-rank Open MPI job under `commprof run` with planted Late Sender / Late
              Receiver waits (tests/e2e/mpi_p2p_late): the JSON of K = 3 equals one process's, and
              its matched messages are the program's 2 x 10 + 2.
  screened    A synthetic file with one row that ends before it starts (rank 3, written with h5py):
              process 1 screens the rows while the first matches the collectives; for K = 2 and 3
              the JSON is the one-process JSON (rank 3 left out), the exit code is 1 as for one
              process, and the line naming the file, rank and row is printed once.
  save        `mpirun -np 3 commprof report --save` stores /analysis (read back with h5py) equal,
              table by table, to what one process's `--save` stores in a copy of the file.
  errors      Under mpirun -np 3: a missing file exits 2 (unreadable input) and is told once;
              `--format xml` exits 2, told once; so do an unknown option and a missing file
              argument (CLI11's usage errors, told by the launcher's rank 0 only); `--window 7` of a file without windows exits 1,
              told once. With COMMPROF_ANALYSIS_MPI=off each process is a whole report of its own
              (three JSON documents on stdout). `export` and `stats` run under `mpirun -np 1`
              (as K processes: distributed_outputs.py).
  differing_views  Every process must read the same file and shards; here they do not. A real 4-rank
              job through `--relay node` on two simulated hosts, and a second run of it without
              relays, at the same file name in another directory. Under mpirun -np 3, process P
              (1, then 2) reads from a directory holding only the relay run's job file (its shards
              out of sight), then from the one holding the other run's file: every time the job
              exits 2, process P names itself, the file and the first fact it reads differently
              (the left-out shard, the other job id), the first process says once that the
              processes disagree, and no report is written. (Before: exit 0 and a report with no
              point-to-point part, or two jobs mixed, or an error naming neither file nor process.)
No timing is asserted: the outputs are compared with the one-process output, byte for byte.
"""
import os
import shlex
import shutil
import subprocess

import h5py
import numpy

from e2e_support import expect, mpirun, run, run_cases


def report(ctx, path, k, fmt="json", extra=(), env=None, check_rc=0):
    """`commprof report` of `path` by K processes (K = 1: alone, no mpirun); returns the output."""
    out = ctx.path(f"{os.path.basename(path)}.{k}.{fmt}")
    cmd = [ctx.commprof, "report", "--format", fmt, path, "-o", out, *extra]
    if k > 1:
        cmd = mpirun(k) + cmd
    run(cmd, env=env, timeout=280, check_rc=check_rc)
    with open(out) as f:
        return f.read()


def synthetic(ctx, name, gpu):
    maker = os.path.join(ctx.build, "bench", "make_synthetic_profile")
    out = ctx.path(name)
    cmd = [maker, "--ranks", "48", "--events", "240000", "--out", out, "--slow-rank", "5", "--slow-us", "300",
           "--clock-offset-us", "2000"] + (["--gpu"] if gpu else [])
    run(cmd, check_rc=0)
    return out


def same_for_every_k(ctx, path, ks=(2, 3, 5)):
    one = report(ctx, path, 1)
    for k in ks:
        got = report(ctx, path, k)
        expect(got == one, f"{path}: the JSON of {k} processes differs from one process's "
                           f"({len(got)} against {len(one)} characters; see {ctx.work})")
    return one


def case_identical(ctx):
    import json
    for name, gpu in (("synthetic.h5", False), ("synthetic_gpu.h5", True)):
        path = synthetic(ctx, name, gpu)
        rep = json.loads(same_for_every_k(ctx, path))
        culprits = [s["rank"] for s in rep.get("stragglers", [])]
        expect(culprits[:1] == [5], f"{name}: stragglers {culprits}, expected rank 5 first")
        expect(len(rep["ranks"]) == 48, f"{name}: {len(rep['ranks'])} ranks in the report")
        if gpu:
            expect(any(r.get("devices") for r in rep["ranks"]),
                   f"{name}: no per-device overlap in the report: the GPU file did not exercise it")
        text_one, text_three = report(ctx, path, 1, "text"), report(ctx, path, 3, "text")
        expect(text_one == text_three, f"{name}: the text report of 3 processes differs from one process's")
    memory = ctx.path("memory.h5")
    run([ctx.test_program("make_memory_profile"), memory, "--ranks", "6", "--churn", "20"], check_rc=0)
    rep = json.loads(same_for_every_k(ctx, memory))
    expect(rep.get("memory"), "memory.h5: the report has no memory series: the file did not exercise them")


def case_real_job(ctx):
    import json
    out = ctx.path("p2p_late.h5")
    exe = ctx.test_program("mpi_p2p_late")
    run([ctx.commprof, "run", "-o", out, "--"] + mpirun(4) + [exe, "--iters", "10", "--sleep-ms", "20"],
        check_rc=0, timeout=280)
    rep = json.loads(same_for_every_k(ctx, out, ks=(3,)))
    expect(rep["p2p"]["matched"] == 22, f"matched messages {rep['p2p']['matched']}, expected 22")


def case_screened(ctx):
    path = synthetic(ctx, "row.h5", False)
    with h5py.File(path, "r+") as f:
        ev = f["ranks"]["3"]["events"]
        rec = ev[5]
        rec["end_ns"] = rec["start_ns"] - 1
        ev[5] = rec
    where = f"{path}: /ranks/3/events row 5: "
    one = report(ctx, path, 1, check_rc=1)
    for k in (2, 3):
        out = ctx.path(f"row.{k}.json")
        p = run(mpirun(k) + [ctx.commprof, "report", "--format", "json", path, "-o", out], timeout=280)
        expect(p.returncode == 1, f"K={k}: exit {p.returncode}, expected 1 as for one process\n{p.stderr}")
        expect(p.stderr.count(where) == 1, f"K={k}: the bad row told {p.stderr.count(where)} times:\n{p.stderr}")
        with open(out) as f:
            expect(f.read() == one, f"K={k}: the JSON differs from one process's")
    import json
    expect(3 not in [r["rank"] for r in json.loads(one)["ranks"]], "rank 3 was not left out")


def analysis_tables(path):
    tables = {}

    def keep(name, obj):
        if isinstance(obj, h5py.Dataset):
            value = obj[()]
            if isinstance(value, bytes):
                tables[name] = value.replace(path.encode(), b"FILE")  # the stored report names its file
                return
            value = numpy.asarray(value)
            # Field by field: the padding between a compound's fields is not part of the data.
            fields = value.dtype.names or (None,)
            tables[name] = [(f, (value[f] if f else value).tobytes()) for f in fields]

    with h5py.File(path, "r") as f:
        expect("analysis" in f, f"{path}: no /analysis group")
        f["analysis"].visititems(keep)
    return tables


def case_save(ctx):
    path = synthetic(ctx, "save.h5", False)
    alone = ctx.path("save_alone.h5")
    shutil.copy(path, alone)
    report(ctx, path, 3, extra=("--save",))
    report(ctx, alone, 1, extra=("--save",))
    mine, theirs = analysis_tables(path), analysis_tables(alone)
    expect(mine and sorted(mine) == sorted(theirs), f"/analysis datasets {sorted(mine)} against {sorted(theirs)}")
    for name in mine:
        expect(mine[name] == theirs[name], f"/analysis/{name} differs between 3 processes and one")
    # The bytes between a row's fields are stored as zeros, not as leftover memory: the same
    # analysis is the same bytes on disk.
    for stored in (path, alone):
        with h5py.File(stored, "r") as f:
            for name, ds in f["analysis"].items():
                if not isinstance(ds, h5py.Dataset) or ds.dtype.names is None or ds.shape[0] == 0:
                    continue
                covered = numpy.zeros(ds.dtype.itemsize, dtype=bool)
                for field in ds.dtype.names:
                    sub, offset = ds.dtype.fields[field][:2]
                    covered[offset:offset + sub.itemsize] = True
                if covered.all():
                    continue
                rows = numpy.frombuffer(ds[()].tobytes(), dtype=numpy.uint8).reshape(-1, ds.dtype.itemsize)
                padding = rows[:, ~covered]
                expect(not padding.any(), f"{stored}: /analysis/{name}: {int((padding != 0).sum())} padding bytes "
                       f"are not zero")


def case_errors(ctx):
    missing = ctx.path("no_such.h5")
    p = run(mpirun(3) + [ctx.commprof, "report", missing], timeout=120)
    expect(p.returncode == 2, f"missing file: exit {p.returncode}, expected 2 (unreadable input)\n{p.stderr}")
    expect(p.stderr.count(missing) == 1, f"missing file: told {p.stderr.count(missing)} times:\n{p.stderr}")
    path = synthetic(ctx, "small.h5", False)
    p = run(mpirun(3) + [ctx.commprof, "report", "--format", "xml", path], timeout=120)
    expect(p.returncode == 2, f"--format xml: exit {p.returncode}, expected 2\n{p.stderr}")
    expect(p.stderr.count("--format xml") == 1, f"--format xml: told {p.stderr.count('--format xml')} times")
    for bad in (["--bogus"], []):  # an unknown option, the file argument missing: CLI11's usage errors
        p = run(mpirun(3) + [ctx.commprof, "report"] + ([path] if bad else []) + bad, timeout=120)
        said = "--bogus" if bad else "file is required"
        expect(p.returncode == 2, f"usage error {bad}: exit {p.returncode}, expected 2\n{p.stderr}")
        expect(p.stderr.count(said) == 1, f"usage error {bad}: told {p.stderr.count(said)} times:\n{p.stderr}")
    p = run(mpirun(3) + [ctx.commprof, "report", "--window", "7", path], timeout=120)
    expect(p.returncode == 1, f"--window 7: exit {p.returncode}, expected 1\n{p.stderr}")
    expect(p.stderr.count("window") >= 1 and p.stderr.count(path) == 1,
           f"--window 7: the error should name the file once:\n{p.stderr}")
    p = run(mpirun(3) + ["-x", "COMMPROF_ANALYSIS_MPI", ctx.commprof, "report", "--format", "json", path],
            env={"COMMPROF_ANALYSIS_MPI": "off"}, timeout=200)
    expect(p.returncode == 0, f"COMMPROF_ANALYSIS_MPI=off: exit {p.returncode}\n{p.stderr}")
    docs = p.stdout.count('"schema": "commprof-report"')
    expect(docs == 3, f"COMMPROF_ANALYSIS_MPI=off: {docs} reports on stdout, expected one per process (3)")
    # srun's tasks without MPI support (no PMI variable) cannot make one report: refused, told by task 0,
    # which exits 2; the others exit 0 so that a launcher ending the job at the first failure cannot cut
    # task 0's message off (the step still exits 2).
    for procid, told, code in (("0", 1, 2), ("1", 0, 0)):
        p = run([ctx.commprof, "report", path], env={"SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": procid},
                unset=("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"))
        expect(p.returncode == code and p.stderr.count("without MPI support") == told,
               f"srun task {procid} without MPI: exit {p.returncode}\n{p.stderr}")
    # export and stats are distributed too (distributed_outputs.py); under mpirun -np 1 they run alone.
    for cmd in (["export", "-q", "-o", ctx.path("trace.json")], ["stats", "--format", "json", "-o", ctx.path("stats.json")]):
        run(mpirun(1) + [ctx.commprof] + cmd + [path], timeout=120, check_rc=0)
        expect(os.path.exists(cmd[-1]), f"{cmd[0]} under mpirun -np 1 wrote nothing")


def case_differing_views(ctx):
    exe = ctx.test_program("mpi_p2p_late")
    relay_dir, other_dir, shardless_dir = ctx.path("relay"), ctx.path("other"), ctx.path("shardless")
    for d in (relay_dir, other_dir, shardless_dir):
        os.makedirs(d, exist_ok=True)
    job = "job.h5"
    run([ctx.commprof, "run", "-q", "--relay", "node", "-o", job, "--"] + mpirun(4) +
        ["-x", "COMMPROF_FAKE_HOST", exe, "--iters", "4", "--sleep-ms", "5"],
        env={"COMMPROF_FAKE_HOST": "0,0,1,1"}, cwd=relay_dir, check_rc=0, timeout=200)
    expect(os.path.isdir(os.path.join(relay_dir, job + ".shards")), "the relay run wrote no shards")
    run([ctx.commprof, "run", "-q", "-o", job, "--"] + mpirun(4) + [exe, "--iters", "4", "--sleep-ms", "5"],
        cwd=other_dir, check_rc=0, timeout=200)
    shutil.copy(os.path.join(relay_dir, job), os.path.join(shardless_dir, job))
    with h5py.File(os.path.join(relay_dir, job), "r") as f:
        relay_job_id = f.attrs["job_id"]
        relay_job_id = relay_job_id.decode() if isinstance(relay_job_id, bytes) else str(relay_job_id)
    for elsewhere, what in ((shardless_dir, "which is missing"), (other_dir, "job ")):
        for odd in (1, 2):
            out = ctx.path(f"views_{odd}_{os.path.basename(elsewhere)}.json")
            q = shlex.quote
            script = (f'if [ "$OMPI_COMM_WORLD_RANK" = {odd} ]; then cd {q(elsewhere)}; fi; '
                      f'exec {q(ctx.commprof)} report --format json {job} -o {q(out)}')
            p = run(mpirun(3) + ["sh", "-c", script], cwd=relay_dir, timeout=200)
            where = f"{os.path.basename(elsewhere)}, process {odd}"
            expect(p.returncode == 2, f"{where}: exit {p.returncode}, expected 2\n{p.stderr}")
            named = f"commprof report (process {odd} of 3): {job} is not what the first process reads: here "
            expect(p.stderr.count(named) == 1, f"{where}: process {odd} did not name itself once:\n{p.stderr}")
            line = next(l for l in p.stderr.splitlines() if named in l)
            expect(what in line.split(", there ")[0],
                   f"{where}: the difference named is not the {what!r} one:\n{line}")
            if elsewhere == other_dir:
                expect(relay_job_id in line.split(", there ")[1], f"{where}: the first's job id is not named:\n{line}")
            told = p.stderr.count("do not read the same " + job)
            expect(told == 1, f"{where}: the first process told the disagreement {told} times:\n{p.stderr}")
            expect(not os.path.exists(out), f"{where}: a report was written though the views differ")
    # The same commands with every process in one directory make the one-process report.
    one = report(ctx, os.path.join(relay_dir, job), 1)
    expect(report(ctx, os.path.join(relay_dir, job), 3) == one, "relay file: 3 processes differ from one")


def case_single_process_commands(ctx):
    """`info`, `check`, `diff` and `hta` do not divide their work: under `mpirun -np K` the first
    process runs the command and the others end at once, so the output is one process's, printed
    once, and the exit code is the first process's (1 for a failed gate)."""
    path = synthetic(ctx, "single.h5", False)
    cases = [(["info", path], 0), (["check", path, "--max", "wait_share=0"], 1), (["diff", path, path], 0),
             (["hta", path], 0)]
    for args, rc in cases:
        alone = run([ctx.commprof, *args], timeout=280)
        expect(alone.returncode == rc, f"{args[0]} alone: exit {alone.returncode}, expected {rc}\n{alone.stderr}")
        for k in (2, 3):
            p = run(mpirun(k) + [ctx.commprof, *args], timeout=280)
            expect(p.returncode == rc, f"{args[0]} by {k} processes: exit {p.returncode}, expected {rc}\n{p.stderr}")
            expect(p.stdout == alone.stdout, f"{args[0]} by {k} processes printed other than one process "
                                             f"({len(p.stdout)} against {len(alone.stdout)} characters)")


if __name__ == "__main__":
    run_cases({"identical": case_identical, "real_job": case_real_job, "screened": case_screened, "save": case_save, "errors": case_errors,
               "differing_views": case_differing_views, "single_process": case_single_process_commands})
