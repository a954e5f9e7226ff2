#!/usr/bin/env python3
"""`commprof stats` and `commprof export` as MPI jobs (docs/scale.md#distributed-analysis):
`mpirun -np K commprof stats|export FILE` gives exactly what one process gives.

Usage: distributed_outputs.py CASE --build BUILD_DIR --work WORK_DIR

Cases and their truth:
  stats       The synthetic 48-rank job (rank 5 planted 300 us late, bench/make_synthetic_profile) with
              and without GPU kernels and copies, the 6-rank memory file (tests/e2e/make_memory_profile)
              and a real 4-rank Open MPI job with --stacks: for K = 2, 3 and 5 (and 7, more processes
              than some files have ranks), the JSON of `stats --by comm,size,rank`, the JSON of the
              default rows, the CSV of `--by size` and the text table are byte for byte the
              one-process outputs. The synthetic rows hold more than 4096 calls, so their
              percentiles come from histograms merged across processes; rank 5's MPI_Allreduce
              total is the largest (the planted skew makes the others wait in it). `--ranks 1-3`,
              `--kinds mpi` and `--window` errors give the one-process output or exit code.
  export      The same files: `export --format chrome` and `--format perfetto` (whole, `--ranks
              2-5,40`, `--time-range 1ms:4ms`) for K = 2, 3 and 5 are byte for byte the one-process
              traces: the lanes of overlapping slices (the GPU file splits some tracks), the
              memory counters (the memory file) and the call stacks (the real job) are numbered on
              from block to block. The Chrome trace loads as JSON with every rank's process; the
              summary line on stderr is the one-process line (the time aside); written to stdout
              (a pipe, where the first process writes every block) it is the same bytes, and so
              it is when process 1 runs in another directory with a relative `-o`, or in a mount
              namespace where the output's directory is another file system (its block then goes
              through the first; that part is skipped, saying so, where `unshare -m` is refused). `--format
              memory-json` is made by the first process alone and equals one process's.
  outputs_screened  A synthetic file with a row that ends before it starts in ranks 3 and 4 (one
              block of the stats' ranks holds both): stats and export by K = 2 and 3 leave both
              ranks out as one process does (exit 1), name each row once, and write the
              one-process output.
  outputs_errors  Under mpirun -np 3, for stats and export: a missing file exits 2, told once; `--format
              xml` exits 2, told once; `-o` into a missing directory exits 1 before any work, told
              once, nothing written. A process after the first that cannot hold its block (its
              TMPDIR does not exist) ends the export with exit 1, the reason told once by the first,
              and no trace written, on stdout either (the last process's too). A last process that
              cannot write its block into the output file (a file-size limit) ends it with exit 1,
              told once, nothing left. `-o` naming the input
              file or a link to it (export, stats, report): exit 2, told once, the profile untouched. An export ended by a
              signal midway (SIGHUP to one process; a process of three killed, which makes mpirun
              end the others) leaves nothing beside the output. With COMMPROF_ANALYSIS_MPI=off (0,
              FALSE, no) every process writes the whole stats of its own (three JSON documents).
              An MPMD launch whose processes 1 and 2 lack the first's `--ranks 0-3` (stats, export;
              report: `--format json`): exit 2, each of the two names itself, the first says why once, nothing written.
No timing is asserted: the outputs are compared with the one-process outputs, byte for byte.
"""
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time

import h5py

from distributed_report import synthetic
from e2e_support import expect, mpirun, run, run_cases


def output_of(ctx, cmd, path, k, name, check_rc=0, env=None):
    """`commprof CMD... PATH -o OUT` by K processes (K = 1: alone, no mpirun); returns (output, stderr)."""
    out = ctx.path(name)
    if os.path.exists(out):
        os.remove(out)
    full = [ctx.commprof, cmd[0], path] + cmd[1:] + ["-o", out]
    if k > 1:
        full = mpirun(k) + full
    p = run(full, timeout=280, check_rc=check_rc, env=env)
    with open(out, "rb") as f:
        return f.read(), p.stderr


def files(ctx):
    """(path, ranks) of the files every case reads."""
    out = [(synthetic(ctx, "synthetic.h5", False), 48), (synthetic(ctx, "synthetic_gpu.h5", True), 48)]
    memory = ctx.path("memory.h5")
    run([ctx.test_program("make_memory_profile"), memory, "--ranks", "6", "--churn", "20"], check_rc=0)
    out.append((memory, 6))
    job = ctx.path("job.h5")
    run([ctx.commprof, "run", "-q", "--stacks", "-o", job, "--"] + mpirun(4) +
        [ctx.example, "--iters", "300", "--bytes", "64", "--compute-us", "20", "--slow-rank", "2", "--slow-us", "100"],
        check_rc=0, timeout=200)
    out.append((job, 4))
    return out


def same_for_every_k(ctx, cmd, path, ks, tag):
    one, _ = output_of(ctx, cmd, path, 1, f"{tag}.1")
    for k in ks:
        got, _ = output_of(ctx, cmd, path, k, f"{tag}.{k}")
        expect(got == one, f"{path} {' '.join(cmd)}: {k} processes wrote {len(got)} bytes that differ from one "
                           f"process's {len(one)} (see {ctx.work})")
    return one


def case_stats(ctx):
    for path, ranks in files(ctx):
        base = os.path.basename(path)
        if "memory" in base:  # allocations only: no operation to count, the same answer from K processes
            for k in (1, 3):
                p = run((mpirun(k) if k > 1 else []) + [ctx.commprof, "stats", path], timeout=120)
                told = p.stderr.count("no operations on the ranks read (6)")
                expect(p.returncode == 1 and told == 1, f"{base} K={k}: exit {p.returncode}, told {told}\n{p.stderr}")
            continue
        for n, cmd in enumerate((["stats", "--format", "json", "--by", "comm,size,rank"],
                                 ["stats", "--format", "json"], ["stats", "--format", "csv", "--by", "size"],
                                 ["stats"], ["stats", "--format", "json", "--ranks", "1-3", "--kinds", "mpi"])):
            one = same_for_every_k(ctx, cmd, path, (2, 3, 5, 7) if n == 1 else (3,), f"{base}.stats{n}")
            if n == 1 and ranks == 48:
                doc = json.loads(one)
                rows = {r["name"]: r for r in doc["rows"]}
                ar = rows.get("MPI_Allreduce")
                expect(ar and ar["calls"] > 4096 and not ar["percentiles_exact"],
                       f"{base}: MPI_Allreduce should have more calls than the exact limit: {ar}")
    # An error every process meets is the one-process error and exit code.
    p = run(mpirun(3) + [ctx.commprof, "stats", path, "--window", "7"], timeout=120)
    expect(p.returncode == 1 and p.stderr.count(path) == 1, f"stats --window 7: exit {p.returncode}\n{p.stderr}")


def case_export(ctx):
    for path, ranks in files(ctx):
        base = os.path.basename(path)
        for fmt in ("chrome", "perfetto"):
            for n, extra in enumerate(([], ["--ranks", "2-5,40"] if ranks == 48 else ["--ranks", "1-2"],
                                       ["--time-range", "1ms:4ms"])):
                ks = (2, 3, 5) if n == 0 else (3,)
                one = same_for_every_k(ctx, ["export", "-q", "--format", fmt] + extra, path, ks, f"{base}.{fmt}{n}")
                if fmt == "chrome" and n == 0:
                    doc = json.loads(one)
                    pids = {e["pid"] for e in doc["traceEvents"]}
                    expect(len(pids) == ranks, f"{base}: {len(pids)} processes in the trace, expected {ranks}")
                    if "gpu" in base:
                        expect(doc["metadata"]["lanes_added"] > 0, f"{base}: no extra lanes: nothing numbered on")
                    if "memory" in base:
                        expect(any(e["ph"] == "C" for e in doc["traceEvents"]), f"{base}: no memory counters")
                    if "job" in base:
                        expect(any("stack" in e.get("args", {}) for e in doc["traceEvents"]), f"{base}: no stacks")
        # On stdout (a pipe: no file to write into) the first process writes every block itself.
        if ranks in (48, 4):
            one, _ = output_of(ctx, ["export", "-q", "--format", "chrome"], path, 1, f"{base}.stdout1")
            p = subprocess.run(mpirun(3) + [ctx.commprof, "export", "-q", "--format", "chrome", path, "-o", "-"],
                               capture_output=True, timeout=280)
            expect(p.returncode == 0 and p.stdout == one,
                   f"{base}: 3 processes wrote {len(p.stdout)} bytes to stdout, one process {len(one)} to a file")
        # The summary on stderr is one process's (its time aside).
        _, err1 = output_of(ctx, ["export", "--format", "chrome"], path, 1, f"{base}.sum1")
        _, err3 = output_of(ctx, ["export", "--format", "chrome"], path, 3, f"{base}.sum3")
        strip = lambda s: re.sub(r"in [0-9.]+ s", "in T s", re.sub(r"\S+\.sum[13]", "OUT", s)).strip()
        expect(strip(err1) == strip(err3), f"{base}: the summary differs:\n{err1}\n{err3}")
        if "memory" in base:
            same_for_every_k(ctx, ["export", "--format", "memory-json"], path, (3,), f"{base}.memory")
    placed_elsewhere(ctx)


def placed_elsewhere(ctx):
    """A later process that reaches the output by another way: in another working directory with a
    relative `-o` (it writes its block in place all the same: the path it is given is absolute), and
    in a mount namespace of its own where the output's directory is another file system (it cannot
    see the file: its block goes through the first). Both give the one-process trace."""
    path = synthetic(ctx, "synthetic.h5", False)
    one, _ = output_of(ctx, ["export", "-q", "--format", "perfetto"], path, 1, "elsewhere.1")
    q = shlex.quote
    os.makedirs(ctx.path("other_cwd"), exist_ok=True)
    cmd = f'{q(ctx.commprof)} export -q --format perfetto {q(path)} -o rel.pftrace'
    script = f'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then cd {q(ctx.path("other_cwd"))}; fi; exec {cmd}'
    p = subprocess.run(mpirun(3) + ["sh", "-c", script], cwd=ctx.work, capture_output=True, text=True, timeout=280)
    with open(ctx.path("rel.pftrace"), "rb") as f:
        got = f.read()
    expect(p.returncode == 0 and got == one and not os.listdir(ctx.path("other_cwd")),
           f"process 1 in another directory, -o relative: exit {p.returncode}, {len(got)} bytes against "
           f"{len(one)}\n{p.stderr}")
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            f"mount -t tmpfs none {q(ctx.path('other_cwd'))}"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        print(f"SKIPPED part: a private mount namespace is not available here (unshare -m: "
              f"{probe.stderr.decode().strip()}); the through-the-first path is checked on stdout above")
        return
    out_dir = ctx.path("out_dir")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "ns.pftrace")
    hide = ctx.path("hide_output.sh")
    with open(hide, "w") as f:
        f.write('#!/bin/sh\n'
                'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then\n'
                f'  exec unshare -m --propagation private sh -c \'mount -t tmpfs none "$0" && exec "$@"\' {q(out_dir)} "$@"\n'
                'fi\n'
                'exec "$@"\n')
    p = subprocess.run(mpirun(3) + ["sh", hide, ctx.commprof, "export", "-q", "--format", "perfetto", path, "-o", out],
                       capture_output=True, text=True, timeout=280)
    with open(out, "rb") as f:
        got = f.read()
    expect(p.returncode == 0 and got == one,
           f"process 1 cannot see the output file: exit {p.returncode}, {len(got)} bytes against {len(one)}\n"
           f"{p.stderr}")


def case_screened(ctx):
    path = synthetic(ctx, "row.h5", False)
    with h5py.File(path, "r+") as f:
        for rank in ("3", "4"):  # two in one block: the block is accumulated again without either
            ev = f["ranks"][rank]["events"]
            rec = ev[5]
            rec["end_ns"] = rec["start_ns"] - 1
            ev[5] = rec
    wheres = [f"{path}: /ranks/{r}/events row 5: " for r in (3, 4)]
    for cmd in (["stats", "--format", "json"], ["export", "-q", "--format", "chrome"],
                ["export", "-q", "--format", "perfetto"]):
        one, _ = output_of(ctx, cmd, path, 1, "row.1", check_rc=1)
        for k in (2, 3):
            got, err = output_of(ctx, cmd, path, k, f"row.{k}", check_rc=1)
            for where in wheres:
                expect(err.count(where) == 1, f"{cmd[0]} K={k}: {where} told {err.count(where)} times:\n{err}")
            expect(got == one, f"{' '.join(cmd)} K={k}: the output differs from one process's")
        if cmd[0] == "stats":
            read = json.loads(one)["ranks_read"]
            expect(3 not in read and 4 not in read and len(read) == 46, f"stats: ranks 3 and 4 not left out: {read}")
    screened_by_every_rule(ctx)


def screened_by_every_rule(ctx):
    """The export reads a file once before writing and screens its rows only when that read refuses one:
    every rule of the screening must make it refuse, alone. One file per rule, one rank planted in each
    (a blocking and a non-blocking collective recorded twice on one rank, an operation the ranks before
    disagree with, a string table that cannot be read): the export, by one process and by two, leaves
    out exactly the rank the report leaves out, names it once, exits 1, and its trace holds the others."""
    base = synthetic(ctx, "rules.h5", False)

    def collectives(f, rank, nonblocking):
        ds = f["ranks"][str(rank)]["events"]
        ev = ds[:]
        return ds, ev, [i for i in range(len(ev)) if ev[i]["kind"] == 3 and bool(ev[i]["flags"] & 1) == nonblocking]

    def twice(nonblocking):
        def plant(f, rank):  # the second such call on the communicator takes the first's sequence number
            ds, ev, rows = collectives(f, rank, nonblocking)
            a, b = next((a, b) for a in rows for b in rows if b > a and ev[a]["comm_id"] == ev[b]["comm_id"]
                        and ev[a]["subtype"] == ev[b]["subtype"])
            rec = ev[b]
            rec["seq"] = ev[a]["seq"]
            ds[b] = rec
            return f"/ranks/{rank}/events row {b}: a second "
        return plant

    def other_operation(f, rank):  # the ranks before recorded another operation under this identity
        ds, ev, rows = collectives(f, rank, False)
        rec = ev[rows[3]]
        rec["subtype"] = 2 if rec["subtype"] != 2 else 4
        ds[rows[3]] = rec
        return f"/ranks/{rank}/events row {rows[3]}: "

    def strings(f, rank):
        del f["ranks"][str(rank)]["strings"]
        f["ranks"][str(rank)].create_dataset("strings", data=list(range(3)))
        return f"/ranks/{rank}/strings"

    for name, rank, plant in (("blocking", 7, twice(False)), ("nonblocking", 9, twice(True)),
                              ("operation", 11, other_operation), ("strings", 13, strings)):
        path = ctx.path(f"rule_{name}.h5")
        shutil.copyfile(base, path)
        with h5py.File(path, "r+") as f:
            where = f"{path}: " + plant(f, rank)
        report = run([ctx.commprof, "report", "--format", "json", path], check_rc=1, timeout=200)
        left_out = [u["rank"] for u in json.loads(report.stdout)["completeness"]["unreadable"]]
        expect(left_out == [rank], f"{name}: the report leaves out {left_out}, planted on rank {rank}")
        for fmt in ("chrome", "perfetto"):
            cmd = ["export", "-q", "--format", fmt]
            one, err = output_of(ctx, cmd, path, 1, f"rule_{name}.{fmt}.1", check_rc=1)
            for k in (1, 2):
                got, err = (one, err) if k == 1 else output_of(ctx, cmd, path, k, f"rule_{name}.{fmt}.{k}", check_rc=1)
                told = [line for line in err.splitlines() if where in line]
                expect(len(told) == 1, f"{name}: export {fmt} K={k}: '{where}' told {len(told)} times:\n{err}")
                expect(got == one, f"{name}: export {fmt} K={k}: the output differs from one process's")
        with open(ctx.path(f"rule_{name}.chrome.1"), "rb") as fh:
            trace = json.loads(fh.read())
        pids = sorted({e["pid"] - 1 for e in trace["traceEvents"] if e.get("ph") == "X"})
        expect(pids == [r for r in range(48) if r != rank], f"{name}: the trace's ranks: {pids}")


def case_errors(ctx):
    path = synthetic(ctx, "small.h5", False)
    missing = ctx.path("no_such.h5")
    for command in ("stats", "export"):
        p = run(mpirun(3) + [ctx.commprof, command, missing], timeout=120)
        expect(p.returncode == 2 and p.stderr.count(missing) == 1,
               f"{command} of a missing file: exit {p.returncode}, told {p.stderr.count(missing)} times\n{p.stderr}")
        p = run(mpirun(3) + [ctx.commprof, command, "--format", "xml", path], timeout=120)
        expect(p.returncode == 2 and p.stderr.count("--format xml") == 1,
               f"{command} --format xml: exit {p.returncode}\n{p.stderr}")
        nowhere = ctx.path("no_dir/out.json")
        p = run(mpirun(3) + [ctx.commprof, command, path, "-o", nowhere], timeout=120)
        expect(p.returncode == 1 and p.stderr.count("cannot write " + nowhere) == 1,
               f"{command} -o {nowhere}: exit {p.returncode}\n{p.stderr}")
        expect(not os.path.exists(os.path.dirname(nowhere)), f"{command}: made {os.path.dirname(nowhere)}")
    # An MPMD launch whose processes were given other options: refused (exit 2), each process
    # that differs naming itself and its argument, the first saying why once; nothing written.
    for command in ("stats", "export", "report"):
        out = ctx.path(f"mixed_{command}.out")
        option = ["--format", "json"] if command == "report" else ["--ranks", "0-3"]
        first = [ctx.commprof, command, path, *option, "-o", out]
        rest = [ctx.commprof, command, path, "-o", out]
        p = run(mpirun(1) + [*first, ":", "-np", "2", *rest], timeout=120)
        differ = [ln for ln in p.stderr.splitlines() if "started with other arguments than the first process" in ln]
        expect(p.returncode == 2 and len(differ) == 2 and
               p.stderr.count("were not started with the same arguments") == 1 and not os.path.exists(out),
               f"{command} with other options on processes 1 and 2: exit {p.returncode}\n{p.stderr}")
    # Process 1 cannot hold its block: the first tells why, once, and writes nothing.
    out = ctx.path("held.json")
    q = shlex.quote
    script = (f'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export TMPDIR={q(ctx.path("no_tmp"))}; fi; '
              f'exec {q(ctx.commprof)} export -q {q(path)} -o {q(out)}')
    p = run(mpirun(3) + ["sh", "-c", script], timeout=200)
    expect(p.returncode == 1, f"unholdable block: exit {p.returncode}, expected 1\n{p.stderr}")
    told = p.stderr.count("process 1 cannot create a file in " + ctx.path("no_tmp"))
    expect(told == 1, f"unholdable block: told {told} times:\n{p.stderr}")
    expect(not os.path.exists(out), "unholdable block: a trace was written")
    # The last process cannot hold its block: on stdout too, nothing of the trace is written (the
    # trace is not begun until every block can be written).
    script = (f'if [ "$OMPI_COMM_WORLD_RANK" = 2 ]; then export TMPDIR={q(ctx.path("no_tmp"))}; fi; '
              f'exec {q(ctx.commprof)} export -q {q(path)} -o -')
    p = run(mpirun(3) + ["sh", "-c", script], timeout=200)
    expect(p.returncode == 1 and p.stdout == "" and p.stderr.count("process 2 cannot create a file in") == 1,
           f"unholdable last block, -o -: exit {p.returncode}, {len(p.stdout)} bytes on stdout\n{p.stderr}")
    # Into a file, each later process writes its block itself, at the offset the first gives it. The
    # last cannot (a file-size limit its held block fits under, about a third of the trace, but its
    # place past two thirds of the output does not): exit 1, told once by the first, naming the
    # output and the process's part; no trace and no file beside it.
    one, _ = output_of(ctx, ["export", "-q"], path, 1, "placed.1")
    out = ctx.path("placed.json")
    limited = (f'if [ "$OMPI_COMM_WORLD_RANK" = 2 ]; then trap "" XFSZ; set -- prlimit --fsize={len(one) // 2} "$@"; fi; '
               f'exec "$@"')
    p = run(mpirun(3) + ["bash", "-c", limited, "_", ctx.commprof, "export", "-q", path, "-o", out], timeout=200)
    told = p.stderr.count(f"{out}: write failed (disk full, or past the file-size limit?) while copying process 2's "
                          f"part of the trace (held in ")
    expect(p.returncode == 1 and told == 1 and "File too large" in p.stderr,
           f"a block that cannot be written into the output: exit {p.returncode}, told {told} times\n{p.stderr}")
    left = [n for n in os.listdir(ctx.work) if n.startswith("placed.json")]
    expect(not left, f"a block that cannot be written into the output: left {left}")
    # `-o` naming the input (or a link to it) would destroy the profile: refused, alone and by K.
    link = ctx.path("link.h5")
    os.symlink(path, link)
    size = os.path.getsize(path)
    for command in ("export", "stats", "report"):
        for k, out in ((1, path), (3, path), (1, link), (3, link)):
            p = run((mpirun(k) if k > 1 else []) + [ctx.commprof, command, path, "-o", out], timeout=120)
            told = p.stderr.count("is the input file")
            expect(p.returncode == 2 and told == 1 and os.path.getsize(path) == size,
                   f"{command} -o {out} (K={k}): exit {p.returncode}, told {told}, size {os.path.getsize(path)}\n"
                   f"{p.stderr}")
    # Ended by a signal midway (Ctrl-C, mpirun ending the others when one process dies): nothing
    # half-written is left beside the output. A file large enough that the export is still writing.
    big = ctx.path("big.h5")
    run([os.path.join(ctx.build, "bench", "make_synthetic_profile"), "--ranks", "16", "--events", "2000000",
         "--out", big], check_rc=0, timeout=200)
    for k in (1, 3):
        out = ctx.path(f"killed{k}.json")
        cmd = [ctx.commprof, "export", "-q", big, "-o", out]
        if k > 1:  # process 1 is killed outright; mpirun then ends the first with SIGTERM
            script = (f'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then '
                      f'(while [ -z "$(ls {q(out)}.tmp-* 2>/dev/null)" ]; do sleep 0.05; done; kill -9 $$) & fi; '
                      f'exec {" ".join(q(c) for c in cmd)}')
            proc = subprocess.Popen(mpirun(k) + ["sh", "-c", script], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        else:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 120
            while not glob.glob(out + ".tmp-*") and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            proc.send_signal(signal.SIGHUP)
        code = proc.wait(timeout=200)
        expect(code != 0, f"K={k}: the export was not ended midway (exit {code}): the file is too small")
        left = glob.glob(out + "*")
        expect(left == [], f"K={k}: left behind after the signal: {left}")
    # Each process alone with COMMPROF_ANALYSIS_MPI=off (and its other spellings).
    for value in ("off", "0", "FALSE", "no"):
        p = run(mpirun(3) + ["-x", "COMMPROF_ANALYSIS_MPI", ctx.commprof, "stats", "--format", "json", path],
                env={"COMMPROF_ANALYSIS_MPI": value}, timeout=200)
        expect(p.returncode == 0, f"COMMPROF_ANALYSIS_MPI={value}: exit {p.returncode}\n{p.stderr}")
        docs = p.stdout.count('"schema": "commprof-stats"')
        expect(docs == 3, f"COMMPROF_ANALYSIS_MPI={value}: {docs} stats documents on stdout, expected 3")


if __name__ == "__main__":
    run_cases({"stats": case_stats, "export": case_export, "outputs_screened": case_screened,
               "outputs_errors": case_errors})
