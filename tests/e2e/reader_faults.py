#!/usr/bin/env python3
"""Readers facing damaged, foreign, locked and lossy files (issue 16, items 6-8).

Each case builds the bad file for real: a real 4-rank job whose ranks spool (COMMPROF_AGGREGATOR
set but empty), spools edited frame by frame (docs/wire-protocol.md) and merged by `commprof
merge`, and copies of the merged file edited with h5py. It then runs the commands a user runs
(info, report, check, export, hta, import) and asserts their exit codes, messages and the exact
numbers (docs/cli.md: exit codes; docs/file-format.md: reading rules).

    reader_faults.py CASE --build build/release --work DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import time

import h5py
import numpy as np

from e2e_support import case_arguments, expect, mpirun, run

FRAME_HEADER = struct.Struct("<IHHII")  # magic, version, type, length, reserved
FRAME_EVENTS = 4
ITERS = 3000


def spool_job(ctx, spool):
    """A real 4-rank job whose every rank writes a spool file (no aggregator)."""
    env = {"COMMPROF_AGGREGATOR": "", "COMMPROF_SPOOL_DIR": spool, "COMMPROF_JOB_ID": "lossjob",
           "COMMPROF_SECRET": "s3cret",
           # a flush every ms: a job of a few ten ms still ships many events frames to cut from
           "COMMPROF_FLUSH_MS": "1"}
    cmd = mpirun(4)
    for k in list(env) + ["LD_PRELOAD"]:
        cmd += ["-x", k]
    env["LD_PRELOAD"] = ctx.library
    p = run(cmd + [ctx.example, "--iters", str(ITERS), "--compute-us", "10"], env=env, timeout=300)
    expect(p.returncode == 0, f"job: rc {p.returncode}\n{p.stderr}")
    files = sorted(f for f in os.listdir(spool) if f.endswith(".cpspool"))
    expect(len(files) == 4, f"spool files: {files}")
    return files


def frames(data):
    """(offset, type, payload) of every frame of a spool (docs/wire-protocol.md#frame-header)."""
    off = 0
    while off < len(data):
        magic, _, ftype, length, _ = FRAME_HEADER.unpack_from(data, off)
        expect(magic == 0x46575043, f"frame magic at byte {off}")
        yield off, ftype, data[off + FRAME_HEADER.size:off + FRAME_HEADER.size + length]
        off += FRAME_HEADER.size + length


def cut_events_frames(path, batches):
    """Removes the events frames whose batch_seq is in `batches`; returns the events they held."""
    data = open(path, "rb").read()
    kept, removed_events, removed = [], 0, []
    for off, ftype, payload in frames(data):
        whole = data[off:off + FRAME_HEADER.size + len(payload)]
        if ftype == FRAME_EVENTS:
            batch_seq, count = struct.unpack_from("<QI", payload, 0)
            if batch_seq in batches:
                removed_events += count
                removed.append(batch_seq)
                continue
        kept.append(whole)
    expect(sorted(removed) == sorted(batches), f"{path}: events frames {batches} present (removed {removed})")
    with open(path, "wb") as fh:
        fh.write(b"".join(kept))
    return removed_events


def lossy_file(ctx):
    """Merged file of a real job in which rank 1's events frames 2 and 3 were lost; returns the path,
    the events those frames held, and the rank's stored bye counters."""
    spool = ctx.path("spool")
    files = spool_job(ctx, spool)
    victim = os.path.join(spool, [f for f in files if "-rank1-" in f][0])
    n_frames = sum(1 for _, t, _ in frames(open(victim, "rb").read()) if t == FRAME_EVENTS)
    expect(n_frames >= 5, f"rank 1 wrote {n_frames} events frames; the case needs at least 5")
    lost = cut_events_frames(victim, {2, 3})
    expect(lost > 0, "the cut frames held events")
    out = ctx.path("lossy.h5")
    p = run([ctx.commprof, "merge", spool, "-o", out])
    expect(p.returncode == 0, f"merge of a spool with a gap: rc {p.returncode}\n{p.stderr}")
    return out, lost


def case_lost_batches(ctx):
    """A complete rank with lost events frames is not shown whole: info counts the lost batches and
    their events exactly, check's dropped_events and lost_batches fail the gate, report says so."""
    out, lost = lossy_file(ctx)
    with h5py.File(out, "r") as f:
        g = f["ranks"]["1"]
        expect(g.attrs["status"] == "complete", f"rank 1 said bye: {g.attrs['status']}")
        expect(int(g.attrs["batches_lost"]) == 2, f"batches_lost {g.attrs['batches_lost']}")
        shipped = int(g.attrs["events_shipped"])
        rows = g["events"].shape[0]
        dropped = int(g.attrs["dropped_events"])
        expect(shipped - rows == lost, f"shipped {shipped} - rows {rows} == the {lost} events cut")
        others_dropped = sum(int(f["ranks"][str(r)].attrs["dropped_events"]) for r in (0, 2, 3))
    missing = dropped + lost + others_dropped

    p = run([ctx.commprof, "info", "--json", out])
    expect(p.returncode == 0, f"info: rc {p.returncode}\n{p.stderr}")
    j = json.loads(p.stdout)
    r1 = j["ranks"][1]
    expect(r1["batches_lost"] == 2 and r1["events_lost"] == lost and r1["missing_events"] == dropped + lost
           and r1["whole"] is False, f"rank 1 in info --json: {r1}")
    for r in (0, 2, 3):
        expect(j["ranks"][r]["batches_lost"] == 0 and j["ranks"][r]["events_lost"] == 0, f"rank {r}: {j['ranks'][r]}")
    expect(j["lost_batches"] == 2 and j["missing_events"] == missing, f"totals {j['lost_batches']} {j['missing_events']}")

    p = run([ctx.commprof, "info", out])
    expect(p.returncode == 0, f"info: rc {p.returncode}")
    line = [l for l in p.stdout.splitlines() if l.startswith("1 ")][0]
    expect("complete (lossy)" in line, f"rank 1 does not look whole: {line}")
    cols = line.split()
    expect(str(dropped + lost) in cols and "2" in cols, f"missing and lost columns: {line}")
    expect(f"{missing} event(s) recorded but not in the file" in p.stdout and "lost with 2 events frame(s)" in p.stdout,
           f"loss line:\n{p.stdout}")

    p = run([ctx.commprof, "check", out, "--max", "dropped_events=0", "--max", "lost_batches=0"])
    expect(p.returncode == 1, f"check must fail: rc {p.returncode}\n{p.stdout}{p.stderr}")
    expect(f"FAIL dropped_events = {missing} (max 0)" in p.stdout, p.stdout)
    expect("FAIL lost_batches = 2 (max 0)" in p.stdout, p.stdout)
    p = run([ctx.commprof, "check", out, "--max", f"dropped_events={missing}", "--max", "lost_batches=2"])
    expect(p.returncode == 0, f"check at the exact values passes: rc {p.returncode}\n{p.stdout}{p.stderr}")

    p = run([ctx.commprof, "report", out, "--format", "json"])
    expect(p.returncode == 0, f"report: rc {p.returncode}\n{p.stderr}")
    rep = json.loads(p.stdout)
    expect(rep["completeness"]["lost_batches"] == 2 and rep["completeness"]["missing_events"] == missing,
           f"report completeness {rep['completeness']}")
    expect(rep["ranks"][1]["batches_lost"] == 2 and rep["ranks"][1]["status"] == "complete", f"{rep['ranks'][1]}")
    p = run([ctx.commprof, "report", out])
    expect(f"loss: {missing} event(s) recorded but not in the file; 2 events frame(s) lost on the way\n" in p.stdout,
           p.stdout)


def merged_file(ctx):
    spool = ctx.path("spool")
    spool_job(ctx, spool)
    out = ctx.path("good.h5")
    p = run([ctx.commprof, "merge", spool, "-o", out])
    expect(p.returncode == 0, f"merge: rc {p.returncode}\n{p.stderr}")
    return out


def copy(ctx, good, name):
    path = ctx.path(name)
    shutil.copyfile(good, path)
    return path


def case_bad_ranks(ctx):
    """Group names that are not ranks, and a row that ends before it starts, are named with the file,
    the group and the row; the other ranks are still summarised and analysed; exit code 1."""
    good = merged_file(ctx)
    names = copy(ctx, good, "names.h5")
    long_name = "7" * 70
    with h5py.File(names, "r+") as f:
        for n in ("-1", "2junk", long_name, "01"):
            f["ranks"].create_group(n)
    row = copy(ctx, good, "row.h5")
    with h5py.File(row, "r+") as f:
        ev = f["ranks"]["2"]["events"]
        rec = ev[5]
        rec["end_ns"] = rec["start_ns"] - 1
        ev[5] = rec
        start = int(rec["start_ns"])

    for cmd in ("info", "report", "hta"):
        p = run([ctx.commprof, cmd, names])
        expect(p.returncode == 1, f"{cmd} of bad names: rc {p.returncode}\n{p.stderr}")
        for n in ("-1", "2junk", "01"):
            expect(f"{names}: /ranks/'{n}': the name is not a rank" in p.stderr, f"{cmd}: {n}:\n{p.stderr}")
        expect(f"/ranks/'{long_name}': the name is not a rank" in p.stderr, f"{cmd}: 70-char name:\n{p.stderr}")
        expect(p.stderr.count("the name is not a rank") == 4, f"{cmd}: one line each:\n{p.stderr}")
    p = run([ctx.commprof, "info", "--json", names])
    j = json.loads(p.stdout)
    expect([r["rank"] for r in j["ranks"]] == [0, 1, 2, 3], f"ranks still summarised: {j['ranks']}")
    expect(len(j["unreadable"]) == 4 and all(u["rank"] is None for u in j["unreadable"]), f"{j['unreadable']}")
    p = run([ctx.commprof, "check", names, "--max", "wait_share=1"])
    expect(p.returncode == 1 and "ok   wait_share" in p.stdout and "FAIL unreadable_ranks = 4 (max 0)" in p.stdout,
           f"check: rc {p.returncode}\n{p.stdout}{p.stderr}")
    p = run([ctx.commprof, "check", names, "--max", "wait_share=1", "--max", "unreadable_ranks=4"])
    expect(p.returncode == 0, f"check with a limit for them: rc {p.returncode}\n{p.stdout}{p.stderr}")

    where = f"{row}: /ranks/2/events row 5: "
    why = f" ends before it starts (end_ns {start - 1} < start_ns {start})"
    for cmd in ("info", "report", "check", "export"):
        args = [ctx.commprof, cmd, row] + (["--max", "incomplete=1000000"] if cmd == "check" else []) + \
            (["-o", ctx.path("row.trace.json"), "-q"] if cmd == "export" else [])
        p = run(args)
        expect(p.returncode == 1, f"{cmd} of a bad row: rc {p.returncode}\n{p.stdout}\n{p.stderr}")
        line = [l for l in p.stderr.splitlines() if where in l]
        expect(len(line) == 1 and line[0].endswith(why), f"{cmd}:\n{p.stderr}")
    p = run([ctx.commprof, "report", row, "--format", "json"])
    rep = json.loads(p.stdout)
    expect([r["rank"] for r in rep["ranks"]] == [0, 1, 3], f"ranks analysed: {[r['rank'] for r in rep['ranks']]}")
    expect(rep["completeness"]["unreadable"][0]["rank"] == 2, f"{rep['completeness']}")
    expect(rep["instances"]["incomplete"] >= ITERS, f"each world allreduce misses rank 2: {rep['instances']}")
    with open(ctx.path("row.trace.json")) as fh:
        trace = json.load(fh)
    pids = {e["pid"] for e in trace["traceEvents"] if e.get("ph") == "X"}
    expect(len(pids) == 3, f"the trace holds the three readable ranks: {pids}")


def case_open_errors(ctx):
    """Truncated, not HDF5, HDF5 but not commprof, a newer format_version, a FIFO or a device, and a
    file locked by a writer each get their own message and exit code 1 (check: 2)."""
    good = merged_file(ctx)
    size = os.path.getsize(good)
    trunc = copy(ctx, good, "trunc.h5")
    with open(trunc, "r+b") as fh:
        fh.truncate(size // 2)
    text = ctx.path("text.h5")
    with open(text, "w") as fh:
        fh.write("not HDF5\n")
    empty = ctx.path("empty.h5")
    open(empty, "wb").close()
    foreign = ctx.path("foreign.h5")
    with h5py.File(foreign, "w") as f:
        f["x"] = np.arange(3)
    fifo = ctx.path("fifo.h5")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    newer = copy(ctx, good, "newer.h5")
    with h5py.File(newer, "r+") as f:
        f.attrs["format_version"] = np.uint64(2)
    cases = [
        (trunc, f"{trunc}: truncated: the file is shorter than it was written ({size // 2} bytes of the {size}"),
        (text, f"{text}: not an HDF5 file"),
        (empty, f"{empty}: empty file (0 bytes)"),
        (foreign, f"{foreign}: an HDF5 file, but not a commprof file (no root attribute 'format')"),
        (newer, f"{newer}: written by a newer commprof (format_version 2; this build reads 1)"),
        (ctx.path("none.h5"), f"{ctx.path('none.h5')}: cannot open: No such file or directory"),
        # A FIFO blocked the open until something wrote into it; /dev/zero read as "empty".
        (fifo, f"{fifo}: not a regular file (a FIFO), not a commprof file"),
        ("/dev/zero", "/dev/zero: not a regular file (a device), not a commprof file"),
    ]
    # merge and import read their inputs themselves: a FIFO or device is refused at once too.
    for cmd, said in ((["merge", fifo, "-o", ctx.path("m.h5")], f"commprof merge: {fifo}: not a regular file"),
                      (["merge", "/dev/zero", "-o", ctx.path("m.h5")], "/dev/zero: not a regular file"),
                      (["import", "kineto", fifo, "-o", ctx.path("m.h5")], f"{fifo}: not a regular file")):
        p = run([ctx.commprof, *cmd], timeout=60)
        expect(p.returncode == 2 and said in p.stderr and not os.path.exists(ctx.path("m.h5")),
               f"{' '.join(cmd[:2])} of a FIFO or device: exit {p.returncode}\n{p.stderr}")
    for path, msg in cases:
        # Exit code 2 for every command: the file cannot be read at all (docs/cli.md#exit-codes).
        for cmd, rc in (("info", 2), ("report", 2), ("export", 2), ("hta", 2), ("check", 2), ("stats", 2)):
            args = [ctx.commprof, cmd, path] + (["--max", "wait_share=1"] if cmd == "check" else [])
            p = run(args)
            expect(p.returncode == rc and msg in p.stderr, f"{cmd} {path}: rc {p.returncode}\n{p.stderr}")
            expect(p.stderr.count("\n") == 1, f"{cmd} {path}: one line:\n{p.stderr}")
    # A live writer holds HDF5's file lock: the reader says so instead of "truncated" or "damaged".
    holder = subprocess.Popen([sys.executable, "-c",
                               "import h5py, sys\nf = h5py.File(sys.argv[1], 'r+')\nprint('open', flush=True)\n"
                               "sys.stdin.read()", good], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        expect(holder.stdout.readline().strip() == "open", "the holder opened the file")
        p = run([ctx.commprof, "info", good])
        expect(p.returncode == 2 and f"{good}: locked: another process has it open for writing" in p.stderr,
               f"locked: rc {p.returncode}\n{p.stderr}")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    p = run([ctx.commprof, "info", good])
    expect(p.returncode == 0, f"readable once the writer is gone: {p.stderr}")


def case_never_connected(ctx):
    """Ranks below world_size without data are listed as never connected, and every rank's end
    reason is shown by info."""
    good = merged_file(ctx)
    gone = copy(ctx, good, "gone.h5")
    with h5py.File(gone, "r+") as f:
        del f["ranks"]["3"]  # no group at all
        f.attrs["world_size"] = np.uint64(6)
        g = f["ranks"].create_group("4")  # a group the writer marks missing
        g.attrs["rank"] = np.uint64(4)
        g.attrs["status"] = "missing"
    p = run([ctx.commprof, "info", gone])
    expect(p.returncode == 0, f"info: rc {p.returncode}\n{p.stderr}")
    expect("never connected: rank(s) 3-5 (below the world size, no data from them)" in p.stdout, p.stdout)
    rows = {l.split()[0]: l for l in p.stdout.splitlines() if l[:1].isdigit() and len(l.split()) > 5}
    expect(rows["0"].rstrip().endswith("end of spool file") or rows["0"].rstrip().endswith("bye"),
           f"rank 0's end reason: {rows['0']}")
    expect(rows["4"].rstrip().endswith("never connected"), f"rank 4: {rows['4']}")
    with h5py.File(gone, "r") as f:
        reason = f["ranks"]["1"].attrs["end_reason"]
    expect(rows["1"].rstrip().endswith(reason), f"rank 1 shows its stored end reason '{reason}': {rows['1']}")
    j = json.loads(run([ctx.commprof, "info", "--json", gone]).stdout)
    expect(j["never_connected"] == [{"first": 3, "last": 5}], f"{j['never_connected']}")
    p = run([ctx.commprof, "report", gone])
    expect(p.returncode == 0 and "missing: rank(s) 3-5 never connected (no data)" in p.stdout, p.stdout)
    rep = json.loads(run([ctx.commprof, "report", gone, "--format", "json"]).stdout)
    expect(rep["completeness"]["never_connected"] == [{"first": 3, "last": 5}], f"{rep['completeness']}")
    html = ctx.path("gone.html")
    p = run([ctx.commprof, "report", gone, "--format", "html", "-o", html])
    expect(p.returncode == 0, f"html: rc {p.returncode}\n{p.stderr}")
    expect("3 rank(s) never connected" in open(html).read(), "the HTML report's data card names them")
    # A rank that never connected has no events to export or count: both say so, exit 2 (rank 3,
    # with no group at all, as rank 4, whose group the writer marked missing; rank 6 is past the job).
    for cmd, said in ((["export", gone, "--ranks", "4", "-o", ctx.path("r4.json")],
                       f"commprof export: --ranks: {gone} has no events of rank 4 (it never connected)"),
                      (["export", gone, "--ranks", "3", "-o", ctx.path("r4.json")],
                       f"commprof export: --ranks: {gone} has no events of rank 3 (it never connected)"),
                      (["export", gone, "--ranks", "6", "-o", ctx.path("r4.json")],
                       f"commprof export: --ranks: {gone} has no rank 6 (world size 6)"),
                      (["stats", gone, "--ranks", "4"], f"commprof stats: --ranks: {gone} has no events of rank 4")):
        p = run([ctx.commprof, *cmd])
        expect(p.returncode == 2 and said in p.stderr, f"{cmd[0]} --ranks 4: exit {p.returncode}\n{p.stderr}")
    expect(not os.path.exists(ctx.path("r4.json")), "a trace of a rank without events was written")
    # A CI gate cannot vouch for ranks it has nothing of: check fails on them unless allowed.
    p = run([ctx.commprof, "check", gone, "--max", "incomplete=1000000"])
    expect(p.returncode == 1 and "FAIL missing_ranks = 3 (max 0)" in p.stdout,
           f"check on 3 never-connected ranks: exit {p.returncode}\n{p.stdout}{p.stderr}")
    p = run([ctx.commprof, "check", gone, "--max", "incomplete=1000000", "--max", "missing_ranks=3"])
    expect(p.returncode == 0 and "ok   missing_ranks = 3 (max 3)" in p.stdout,
           f"check with them allowed: exit {p.returncode}\n{p.stdout}{p.stderr}")
    p = run([ctx.commprof, "check", good, "--max", "incomplete=0"])
    expect(p.returncode == 0 and "missing_ranks" not in p.stdout, f"the whole file: {p.stdout}{p.stderr}")


def case_kineto_limits(ctx):
    """A torch.profiler trace claiming world_size 1000000 or rank 4e9 is refused at once, naming the
    file and the field; the other files are imported with the world size they give."""
    ev = '[{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 10, "dur": 5}]'
    d = ctx.path("traces")
    os.makedirs(d)
    files = {"a.json": '{"distributedInfo": {"rank": 0, "world_size": 2}, "traceEvents": %s}' % ev,
             "b.json": '{"distributedInfo": {"rank": 1, "world_size": 1000000}, "traceEvents": %s}' % ev,
             "c.json": '{"distributedInfo": {"rank": 4000000000, "world_size": 2}, "traceEvents": %s}' % ev}
    for name, text in files.items():
        with open(os.path.join(d, name), "w") as fh:
            fh.write(text)
    out = ctx.path("imported.h5")
    t0 = time.monotonic()
    p = run([ctx.commprof, "import", "kineto", "-q", "-o", out, d], timeout=60)
    took = time.monotonic() - t0
    expect(p.returncode == 1, f"import: rc {p.returncode}\n{p.stderr}")
    expect(f"{d}/b.json: distributedInfo.world_size 1000000 is above the largest world size the importer takes"
           in p.stderr, p.stderr)
    expect(f"{d}/c.json: distributedInfo.rank 4000000000 is above the largest rank the importer takes" in p.stderr,
           p.stderr)
    with h5py.File(out, "r") as f:
        expect(int(f.attrs["world_size"]) == 2 and sorted(f["ranks"]) == ["0", "1"]
               and f["ranks"]["1"].attrs["status"] == "missing", f"{dict(f.attrs)} {list(f['ranks'])}")
    # Generous: a million missing groups took minutes; two small files take well under a second.
    expect(took < 30, f"import took {took:.1f} s")


def case_damaged_metadata(ctx):
    """Files whose HDF5 metadata makes libhdf5 itself crash or loop (tests/fuzz/README.md,
    "Findings"): every reading command ends with exit code 2 and one line naming the file, alone
    and as an MPI job, instead of a segmentation fault or a command that never returns."""
    crash = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "findings_h5",
                         "oom-libhdf5-H5T_conv_vlen-strings")
    crash = os.path.abspath(crash)
    said = f"commprof: {crash}: damaged: reading it crashed (SIGSEGV, SIGBUS or an abort)"
    for cmd in (["info", crash], ["report", crash], ["stats", crash], ["check", crash],
                ["export", crash, "-o", ctx.path("c.json")]):
        p = run([ctx.commprof, *cmd], timeout=120)
        expect(p.returncode == 2 and p.stderr.count(said) == 1,
               f"commprof {cmd[0]} of a file that crashes libhdf5: exit {p.returncode}\n{p.stderr}")
    # A flipped bit in a global heap makes libhdf5, closing the file after every read, free a pointer
    # glibc did not give it: glibc aborts. What was read and written is whole: exit 1, told so.
    aborts = os.path.join(os.path.dirname(crash), "abort-libhdf5-free-invalid-pointer-global-heap")
    said = f"commprof: {aborts}: damaged: closing it crashed inside the HDF5 library (damaged metadata); what was read"
    for cmd in (["info", aborts], ["report", aborts], ["stats", aborts], ["export", aborts, "-o", ctx.path("a.json")]):
        p = run([ctx.commprof, *cmd], timeout=120)
        expect(p.returncode == 1 and p.stderr.count(said) == 1,
               f"commprof {cmd[0]} of a file whose close aborts glibc: exit {p.returncode}\n{p.stderr}")
    expect(json.load(open(ctx.path("a.json")))["traceEvents"], "the export before the close is a whole trace")
    # One flipped bit in a rank group's link table (rank 1 of 3): that rank is named unreadable, the
    # others are read (it was read as a rank of 0 events, all "lost", exit 0).
    links = os.path.join(os.path.dirname(crash), "reader-rank-group-links-damaged")
    p = run([ctx.commprof, "info", links], timeout=120)
    expect(p.returncode == 1 and "/ranks/1: cannot look up its 'clock_points' table: the group's links are damaged"
           in p.stderr and "HDF5-DIAG" not in p.stderr, f"info of a damaged rank group: exit {p.returncode}\n{p.stderr}")
    p = run([ctx.commprof, "check", links, "--max", "incomplete=100"], timeout=120)
    expect(p.returncode == 1 and "FAIL unreadable_ranks = 1 (max 0)" in p.stdout, f"check: {p.stdout}{p.stderr}")
    # One flipped bit in the root attribute world_size's header: the file is damaged (it read as a
    # job of 0 ranks that never finished, exit 0).
    attr = os.path.join(os.path.dirname(crash), "reader-root-attribute-world_size-unreadable")
    for cmd in (["info", attr], ["report", attr]):
        p = run([ctx.commprof, *cmd], timeout=120)
        expect(p.returncode == 2 and "root attribute 'world_size' is missing or cannot be read" in p.stderr,
               f"{cmd[0]} of an unreadable world_size: exit {p.returncode}\n{p.stderr}")
    said = f"commprof: {crash}: damaged: reading it crashed (SIGSEGV, SIGBUS or an abort)"
    p = run(mpirun(2) + [ctx.commprof, "report", crash], timeout=120)
    expect(p.returncode == 2 and said in p.stderr, f"distributed report: exit {p.returncode}\n{p.stderr}")

    # A global heap collection whose tail is zeroed makes libhdf5 1.10 loop forever reading a
    # rank's string attributes: the stall limit (2 s here) ends it.
    maker = os.path.join(ctx.build, "bench", "make_synthetic_profile")
    if not os.path.exists(maker):
        print(f"the stall half skipped: {maker} is not built (COMMPROF_BUILD_BENCH=OFF)")
        return
    good = ctx.path("syn17.h5")
    run([maker, "--ranks", "17", "--events", "20000", "--out", good], check_rc=0, timeout=120)
    loop = ctx.path("loop.h5")
    shutil.copy(good, loop)
    with open(loop, "r+b") as f:
        data = f.read()
        heap = data.find(b"GCOL")
        expect(heap >= 0, "no global heap collection in the synthetic file")
        f.seek(heap + 4096 - 144)  # the collection's last object and its free-space record
        f.write(bytes(256))
    said = f"commprof: {loop}: damaged: reading it made no progress for 2 s"
    for cmd in (["info", loop], ["report", loop]):
        started = time.monotonic()
        p = run([ctx.commprof, *cmd], env={"COMMPROF_READ_STALL_S": "2"}, timeout=120)
        took = time.monotonic() - started
        expect(p.returncode == 2 and p.stderr.count(said) == 1,
               f"commprof {cmd[0]} of a file that makes libhdf5 loop: exit {p.returncode} after {took:.1f} s\n"
               f"{p.stderr}")
    p = run([ctx.commprof, "info", good], env={"COMMPROF_READ_STALL_S": "2"}, timeout=120)
    expect(p.returncode == 0, f"the undamaged file: exit {p.returncode}\n{p.stderr}")


CASES = {"lost_batches": case_lost_batches, "bad_ranks": case_bad_ranks, "open_errors": case_open_errors,
         "never_connected": case_never_connected, "kineto_limits": case_kineto_limits,
         "damaged_metadata": case_damaged_metadata}


def main():
    a, ctx = case_arguments(CASES)
    CASES[a.case](ctx)
    print(f"{a.case}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
