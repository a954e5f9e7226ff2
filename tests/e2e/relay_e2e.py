#!/usr/bin/env python3
"""Relays (docs/scale.md#relays): an aggregator per node (or per N ranks of one) writing a shard,
the job's file linking the shards' ranks, read by h5py and every command as one job.

Usage: relay_e2e.py CASE --build BUILD_DIR --work WORK_DIR

Cases and their truth:
  loadgen_1024   1024 simulated ranks on 32 simulated hosts (bench/load_generator.cc, the real wire
                 protocol; relays started and found exactly as a collector does) send 2000 events
                 each through their host's relay to `commprof aggregate`: 32 shards of 32 ranks, all
                 finalized; the job file holds 1024 ranks, each an external link to its host's shard,
                 each with exactly 2000 events, complete; `commprof report --format json` is the same
                 as for the same load sent straight to one aggregator (only the file's path and job id differ).
  mpi_64         A real Open MPI job of 64 ranks (oversubscribed) on 8 simulated hosts of 8
                 (COMMPROF_FAKE_HOST) whose clocks are shifted by h ms (host h), under
                 `commprof run --relay node`: 8 shards, one per host, each holding that host's 8 ranks;
                 every rank complete with exactly 20 MPI_Allreduce; every rank's clock offset is its
                 host's injected shift within the rank's stated bound; per-rank event counts by name
                 and the report's collective instances equal those of the same job run without relays.
  per_n          `--relay 2` with 8 ranks on this host: 4 relays, rank r in the shard of group r // 2
                 (the rank's local rank picks its relay). A copy of the job with one shard cut short,
                 then deleted, read from the original's directory (whose same-named shard HDF5 would
                 fall back to): `commprof info` names the copy's shard with the reason (truncated,
                 missing) for its two ranks and reads the other six; the same for the original.
  cannot_start   A relay that cannot start (COMMPROF_RELAY_COMMAND=/bin/false) fails its group at once
                 and the ranks connect to the aggregator themselves: all 4 ranks stored in the job
                 file (no links, no shard), each rank's stderr says why.
  relay_killed   One of two relays is killed (SIGKILL) while its ranks stream: the job's exit code (0)
                 is kept, the file is written and readable (`commprof report` exit 0), every rank is in
                 it; the dead relay's ranks went on to the aggregator, and what the dead relay had
                 stored stays in its shard (named in a warning): together nothing is lost (events in
                 the file plus events in the shard >= events the rank recorded); the file names that
                 shard (`unjoined_shards`) and `check` fails on it.
  relay_terminated  The same relay gets SIGTERM: it finishes its shard after its grace, its ranks go on
                 through a second relay whose shard the file names as not joined; check fails on it;
                 the two shards together hold every event.
  moved          A job file read through a symbolic link elsewhere reads whole; a copy renamed with
                 its shard directory says which directory name its links expect.
  congested      `--relay node --queue-mb 1` (passed on to the relay) with 2 ranks whose relay's writer is slowed to 20 ms per 1000 events
                 (COMMPROF_TEST_WRITER_DELAY_US reaches the relay through the rank's environment) and
                 COMMPROF_SEND_TIMEOUT_MS=100: the ranks go on into their spools, and the relay, at its
                 end, merges them into its shard, resuming the streams: both ranks complete in the
                 shard with every event they recorded, spooled_congested = 1, no spool left.
  relay_refused  `commprof relay` by hand against a running aggregator: with a wrong secret, a wrong job id,
                 an unreachable parent or an unwritable shard it exits 1 naming why and leaves no shard.
  parent_gone    A relay started by hand takes 4 simulated ranks (3 x 10^6 events each); its parent aggregator
                 is killed (SIGKILL) while they stream: the relay says so, finishes its shard anyway (finalized, every rank
                 complete with all its events) and exits 0.
  usage          `--relay bogus`, `0x`, `+2`, ` 2`, `2 `, `-1`, `4294967296` and `--relay node --hang-timeout 5`
                 are usage errors (exit 2)
                 naming the value; `commprof relay` without the job's environment exits 2; a plain
                 file where OUTPUT.shards goes is exit 1 naming it ("it exists and is not a
                 directory"), nothing written.
No timing is asserted: counts, links, clocks against their injected truth, and exit codes.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import h5py

from e2e_support import expect, mpirun, run, run_cases


def start_aggregate(ctx, name, expect_ranks, extra=()):
    secret_file, addr_file = ctx.path(f"{name}.secret"), ctx.path(f"{name}.addr")
    err = open(ctx.path(f"{name}.stderr"), "w")
    agg = subprocess.Popen(
        [ctx.commprof, "aggregate", "-q", "--expect", str(expect_ranks), "--listen", "127.0.0.1:0", "--job-id",
         name, "--secret-file", secret_file, "--address-file", addr_file, "--timeout", "280", "-o",
         ctx.path(f"{name}.h5"), *extra], stdout=subprocess.DEVNULL, stderr=err)
    for _ in range(400):
        if os.path.exists(addr_file) and open(addr_file).read().strip():
            break
        expect(agg.poll() is None, f"{name}: aggregate exited early: {open(ctx.path(name + '.stderr')).read()}")
        time.sleep(0.05)
    return agg, err, open(addr_file).read().strip(), open(secret_file).read().strip()


def finish_aggregate(ctx, name, agg, err):
    rc = agg.wait(timeout=280)
    err.close()
    stderr = open(ctx.path(f"{name}.stderr")).read()
    expect(rc == 0, f"{name}: aggregate exit {rc}:\n{stderr}")
    return stderr


def report_json(ctx, path):
    return json.loads(run([ctx.commprof, "report", "--format", "json", path], check_rc=0, timeout=280).stdout)


def info_json(ctx, path):
    return json.loads(run([ctx.commprof, "info", "--json", path], check_rc=0, timeout=280).stdout)


def shards_of(path):
    return sorted(glob.glob(path + ".shards/*.h5"))


def links_of(path):
    with h5py.File(path, "r") as f:
        return {int(r): f["ranks"].get(r, getlink=True) for r in f["ranks"]}


def loadgen(ctx, name, relays):
    ranks, events, hosts = 1024, 2000, 32
    agg, err, address, secret = start_aggregate(ctx, name, ranks)
    cmd = [os.path.join(ctx.build, "bench", "commprof_load_generator"), "--port", address.rsplit(":", 1)[1],
           "--secret", secret, "--job", name, "--ranks", str(ranks), "--events", str(events), "--batch", "500",
           "--threads", "8", "--hosts", str(hosts)]
    if relays:
        os.makedirs(ctx.path(f"{name}.h5.shards"))
        cmd += ["--relay-command", ctx.commprof, "--shard-dir", ctx.path(f"{name}.h5.shards")]
    gen = run(cmd, timeout=280, env={"TMPDIR": ctx.work})
    expect(gen.returncode == 0, f"{name}: load generator failed:\n{gen.stdout}{gen.stderr}")
    finish_aggregate(ctx, name, agg, err)
    print(f"{name}: {gen.stdout.strip()}")
    return ctx.path(f"{name}.h5"), ranks, events, hosts


def case_loadgen_1024(ctx):
    path, ranks, events, hosts = loadgen(ctx, "relayed", relays=True)
    shards = shards_of(path)
    expect(len(shards) == hosts, f"{len(shards)} shards for {hosts} hosts: {shards}")
    for s in shards:
        with h5py.File(s, "r") as f:
            expect(int(f.attrs["finalized"]) == 1, f"{s} not finalized")
            expect(len(f["ranks"]) == ranks // hosts, f"{s}: {len(f['ranks'])} ranks")
            host_ids = {f["ranks"][r].attrs["host"] for r in f["ranks"]}
            expect(len(host_ids) == 1, f"{s} holds ranks of several hosts: {host_ids}")
    links = links_of(path)
    expect(sorted(links) == list(range(ranks)), f"{len(links)} ranks in the job file")
    expect(all(isinstance(l, h5py.ExternalLink) for l in links.values()), "every rank is a link to its shard")
    with h5py.File(path, "r") as f:
        expect(int(f.attrs["world_size"]) == ranks and f.attrs["ranks_missing"] == "", "world and missing ranks")
        for r in range(ranks):
            g = f["ranks"][str(r)]
            expect(g.attrs["status"] == "complete" and g["events"].shape[0] == events,
                   f"rank {r}: {g.attrs['status']}, {g['events'].shape[0]} events of {events}")
        expect("analysis" in f, "the job file holds /analysis, computed through the links")
    direct, _, _, _ = loadgen(ctx, "direct", relays=False)
    a, b = report_json(ctx, path), report_json(ctx, direct)
    for key in ("path", "job_id"):  # the two jobs' own names
        a.pop(key), b.pop(key)
    expect(a == b, "the report through relays differs from the report of one aggregator")


def run_job(ctx, out, n, relay, env, iters=20, extra_args=(), run_options=()):
    cmd = [ctx.commprof, "run", "-o", out, *run_options]
    if relay:
        cmd += ["--relay", relay]
    cmd += ["--"] + mpirun(n) + [ctx.example, "--iters", str(iters), *extra_args]
    return run(cmd, env=dict(env, TMPDIR=ctx.work), check_rc=0, timeout=280)


def case_mpi_64(ctx):
    n, per_host, iters = 64, 8, 20
    hosts = n // per_host
    shift_ns = [h * 1_000_000 for h in range(hosts)]
    env = {"COMMPROF_FAKE_HOST": ",".join(str(r // per_host) for r in range(n)),
           "COMMPROF_FAKE_HOST_CLOCK_OFFSET_NS": ",".join(str(s) for s in shift_ns)}
    relayed, direct = ctx.path("relay64.h5"), ctx.path("direct64.h5")
    p = run_job(ctx, relayed, n, "node", env, iters)
    expect(f"through {hosts} relay(s)" in p.stderr, f"summary: {p.stderr[-600:]}")
    shards = shards_of(relayed)
    expect(len(shards) == hosts, f"{len(shards)} shards: {shards}")
    for s in shards:
        with h5py.File(s, "r") as f:
            members = sorted(int(r) for r in f["ranks"])
            expect(len(members) == per_host and len({r // per_host for r in members}) == 1,
                   f"{s}: ranks {members}, expected one simulated host's {per_host}")
    info = info_json(ctx, relayed)
    ranks = {r["rank"]: r for r in info["ranks"]}
    expect(sorted(ranks) == list(range(n)), f"ranks {sorted(ranks)}")
    shard_of = {}
    for s in shards:
        with h5py.File(s, "r") as f:
            shard_of.update({int(r): os.path.basename(s) for r in f["ranks"]})
    for r, ri in ranks.items():
        expect(ri["status"] == "complete", f"rank {r}: {ri['status']}")
        expect(os.path.basename(ri["shard"]) == shard_of[r], f"rank {r}: info names shard {ri['shard']!r}")
        # host h's clock reads steady + shift_h, rank 0's (host 0) is the reference: offset -shift_h
        truth = -shift_ns[r // per_host]
        bound = ri["clock_error_bound_ns"]
        expect(bound >= 0 and abs(ri["clock_offset_ns"] - truth) <= bound,
               f"rank {r}: offset {ri['clock_offset_ns']} ns, truth {truth} ns, bound {bound} ns")
    run_job(ctx, direct, n, None, env, iters)
    counts = {}
    for path in (relayed, direct):
        with h5py.File(path, "r") as f:
            counts[path] = {r: f["ranks"][r]["events"].shape[0] for r in f["ranks"]}
    expect(counts[relayed] == counts[direct], f"event counts differ: {counts}")
    with h5py.File(relayed, "r") as f:
        for r in f["ranks"]:
            names = [s.decode() if isinstance(s, bytes) else s for s in f["ranks"][r]["strings"][...]]
            ev = f["ranks"][r]["events"][...]
            allreduce = sum(1 for e in ev if names[e["name_id"]] == "MPI_Allreduce")
            expect(allreduce == iters, f"rank {r}: {allreduce} MPI_Allreduce, expected {iters}")
    a, b = report_json(ctx, relayed), report_json(ctx, direct)
    inst = lambda rep: (rep["instances"], sorted((c["type"], c["count"]) for c in rep["collectives"]))
    expect(inst(a) == inst(b), f"collective instances differ: {inst(a)} vs {inst(b)}")


def case_per_n(ctx):
    out = ctx.path("per2.h5")
    run_job(ctx, out, 8, "2", {})
    shards = shards_of(out)
    expect(len(shards) == 4, f"{len(shards)} shards for 8 ranks at 2 per relay: {shards}")
    groups = []
    for s in shards:
        with h5py.File(s, "r") as f:
            groups.append(sorted(int(r) for r in f["ranks"]))
    expect(sorted(groups) == [[0, 1], [2, 3], [4, 5], [6, 7]], f"ranks by relay: {groups}")
    expect(all(isinstance(l, h5py.ExternalLink) for l in links_of(out).values()), "links")
    # A shard read on its own says what it is: the job's other six ranks are in other shards, not
    # "never connected", and a gate on it does not fail on them.
    one = shards[0]
    p = run([ctx.commprof, "info", one], timeout=120)
    expect(p.returncode == 0 and "shard:       a relay's shard" in p.stdout and "never connected" not in p.stdout,
           f"info of a shard:\n{p.stdout}{p.stderr}")
    j = json.loads(run([ctx.commprof, "info", "--json", one], timeout=120).stdout)
    expect(j["shard"] is True and j["never_connected"] == [] and j["world_size"] == 8,
           f"info --json of a shard: shard {j.get('shard')}, never connected {j.get('never_connected')}, "
           f"world size {j.get('world_size')}")
    expect(json.loads(run([ctx.commprof, "info", "--json", out], timeout=120).stdout)["shard"] is False,
           "the job file is not a shard")
    p = run([ctx.commprof, "check", one], timeout=120)
    expect(p.returncode == 0 and "missing_ranks" not in p.stdout, f"check of a shard: {p.stdout}{p.stderr}")
    # A relay killed with its job (a cancelled Slurm step) leaves its ranks "connected" in a shard it
    # never finished; the finalized job file links them as they are. Readers show them disconnected,
    # with why. (Simulated on a copy: the shard's rank 2 set back to what an unfinished shard holds.)
    unfinished = ctx.path("unfinished")
    shutil.copytree(out + ".shards", os.path.join(unfinished, os.path.basename(out) + ".shards"))
    shutil.copy(out, unfinished)
    job_copy = os.path.join(unfinished, os.path.basename(out))
    with h5py.File(job_copy, "r") as f:
        target = f["ranks"].get("2", getlink=True).filename
    with h5py.File(os.path.join(unfinished, target), "r+") as f:
        f["ranks"]["2"].attrs["status"] = "connected"
        if "end_reason" in f["ranks"]["2"].attrs:
            del f["ranks"]["2"].attrs["end_reason"]
    ranks = {r["rank"]: r for r in json.loads(run([ctx.commprof, "info", "--json", job_copy], timeout=120).stdout)["ranks"]}
    expect(ranks[2]["status"] == "disconnected" and ranks[2]["end_reason"] == "its relay ended before finishing its shard"
           and ranks[3]["status"] == "complete",
           f"a rank of an unfinished shard in a finalized job file: {ranks[2]}; its neighbour {ranks[3]['status']}")
    lost = [s for s in shards if "-0-" in os.path.basename(s)][0]
    # A copy of the job elsewhere whose first shard is cut short: its ranks are named with the
    # reason (not read from the same-named shard under the working directory, which HDF5 would
    # try next), the others are read.
    copy = ctx.path("copy")
    os.makedirs(os.path.join(copy, os.path.basename(out) + ".shards"))
    shutil.copy(out, copy)
    for sh in shards:
        shutil.copy(sh, os.path.join(copy, os.path.basename(out) + ".shards"))
    cut = os.path.join(copy, os.path.basename(out) + ".shards", os.path.basename(lost))
    os.truncate(cut, 4000)
    copied_job = os.path.join(copy, os.path.basename(out))
    p = run([ctx.commprof, "info", "--json", copied_job], timeout=120, cwd=ctx.work)
    truncated = [ln for ln in p.stderr.splitlines() if f"is in a shard that cannot be read: {cut}: truncated" in ln]
    expect(len(truncated) == 2, f"the truncated shard is not named with its reason for its 2 ranks:\n{p.stderr}")
    info = json.loads(p.stdout)
    expect(sorted(r["rank"] for r in info["ranks"]) == [2, 3, 4, 5, 6, 7], f"ranks read: {info['ranks']}")
    # A shard gone missing: its ranks are named with the shard, the others are still read, even
    # from a working directory that holds a shard of the same name (the original job's).
    os.remove(cut)
    p = run([ctx.commprof, "info", "--json", copied_job], timeout=120, cwd=ctx.work)
    missing = [ln for ln in p.stderr.splitlines() if f"is in the shard {cut}, which is missing" in ln]
    expect(len(missing) == 2, f"the missing shard is not named for its 2 ranks:\n{p.stderr}")
    info = json.loads(p.stdout)
    expect(sorted(r["rank"] for r in info["ranks"]) == [2, 3, 4, 5, 6, 7], f"ranks read: {info['ranks']}")
    # diff names the file once in the faults it leaves out
    p = run([ctx.commprof, "diff", out, copied_job], timeout=120, cwd=ctx.work)
    left = [ln for ln in p.stderr.splitlines() if ln.endswith("(left out of the comparison)")]
    expect(len(left) == 2 and all(ln.startswith(f"commprof diff: {copied_job}: /ranks/") for ln in left),
           f"diff's faults of the copy:\n{p.stderr}")
    os.remove(lost)
    p = run([ctx.commprof, "info", "--json", out], timeout=120)
    expect(p.stderr.count(os.path.basename(lost)) == 2 and "which is missing" in p.stderr,
           f"the missing shard is not named for its 2 ranks:\n{p.stderr}")


def case_cannot_start(ctx):
    name = "nostart"
    agg, err, address, secret = start_aggregate(ctx, name, 4)
    shard_dir = ctx.path("shards")
    os.makedirs(shard_dir)
    env = {"COMMPROF_AGGREGATOR": address, "COMMPROF_SECRET": secret, "COMMPROF_JOB_ID": name,
           "COMMPROF_RELAY": "node", "COMMPROF_RELAY_COMMAND": "/bin/false", "COMMPROF_SHARD_DIR": shard_dir,
           "TMPDIR": ctx.work}
    cmd = mpirun(4)
    for k in env:
        cmd += ["-x", k]
    cmd += ["-x", f"LD_PRELOAD={ctx.library}", ctx.example, "--iters", "10"]
    p = run(cmd, env=env, timeout=280)
    expect(p.returncode == 0, f"job exit {p.returncode}: {p.stderr}")
    finish_aggregate(ctx, name, agg, err)
    expect(p.stderr.count("no relay for this node") == 4 and "connecting to the aggregator" in p.stderr,
           f"each rank says why it did not use a relay:\n{p.stderr}")
    links = links_of(ctx.path(f"{name}.h5"))
    expect(sorted(links) == [0, 1, 2, 3] and all(isinstance(l, h5py.HardLink) for l in links.values()),
           f"all 4 ranks stored in the job file itself: {links}")
    info = info_json(ctx, ctx.path(f"{name}.h5"))
    expect(all(r["shard"] == "" for r in info["ranks"]), f"no rank is in a shard: {info['ranks']}")
    expect(not glob.glob(shard_dir + "/*.h5"), "no shard")


def case_relay_killed(ctx):
    relay_ended_mid_run(ctx, signal.SIGKILL, "killed.h5", 600)


def case_relay_terminated(ctx):
    """The relay of simulated host 1 gets SIGTERM mid-job: it gives its ranks its grace (10 s),
    finishes its shard and ends; the job runs 15 s more, so its ranks start a second relay (a shard
    of its own, "-2" or another starter's pid) that the job file cannot link (the ranks are linked
    from the first). The file names that shard (unjoined_shards), and `check` fails on it."""
    relay_ended_mid_run(ctx, signal.SIGTERM, "terminated.h5", 1500)


def expect_unjoined(ctx, out, shard):
    """The job file `out` names `shard` as holding a part of ranks it does not join: `info --json`
    lists it, and `check` warns of it and fails on it."""
    j = info_json(ctx, out)
    expect(j["unlinked_shards"] == [shard], f"info --json names {shard}: {j.get('unlinked_shards')}")
    p = run([ctx.commprof, "check", out], timeout=120)
    expect(p.returncode == 1 and "FAIL unlinked_shards = 1 (max 0)" in p.stdout,
           f"check fails on the unjoined shard: exit {p.returncode}\n{p.stdout}{p.stderr}")
    expect(f"1 shard file(s) in {out}.shards hold a part of ranks that this file takes from elsewhere"
           in p.stderr, f"check warns of the unjoined shard:\n{p.stderr}")


def relay_ended_mid_run(ctx, sig, name, iters):
    out = ctx.path(name)
    env = {"COMMPROF_FAKE_HOST": "0,0,1,1", "TMPDIR": ctx.work, "COMMPROF_FLUSH_MS": "20"}
    cmd = [ctx.commprof, "run", "--relay", "node", "-o", out, "--"] + mpirun(4) + [
        ctx.example, "--iters", str(iters), "--compute-us", "10000", "--compute", "sleep"]
    job = subprocess.Popen(cmd, env=dict(os.environ, **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    victim, found = None, []
    for _ in range(600):  # the relay of simulated host 1, once its ranks stream to it
        found = glob.glob(out + ".shards/simhost1-0-*.h5")
        if found and os.path.getsize(found[0]) > 0:
            pids = subprocess.run(["pgrep", "-f", "relay --parent .*simhost1-0-"], stdout=subprocess.PIPE,
                                  text=True).stdout.split()
            if pids:
                victim = int(pids[0])
                break
        expect(job.poll() is None, "the job ended before its relays started")
        time.sleep(0.05)
    expect(victim is not None, "simulated host 1's relay never started")
    # Its ranks stream to it and its writer flushes every second. Killed once a flush has stored
    # events of both its ranks (read from a copy of the shard: the relay holds the file open). A
    # fixed second after the shard appeared was too short on a loaded machine: the ranks were still
    # connecting, the shard held no rank and was removed.
    held, deadline = {}, time.monotonic() + 60
    while time.monotonic() < deadline:
        expect(job.poll() is None, f"the job ended before the relay's shard held its ranks' events ({held})")
        copy = ctx.path("shard-probe.h5")
        shutil.copyfile(found[0], copy)
        try:
            with h5py.File(copy, "r") as f:
                held = {r: f["ranks"][r]["events"].shape[0] for r in ("2", "3") if r in f["ranks"]}
        except (OSError, KeyError):  # a copy torn by a write in progress: try again
            held = {}
        if len(held) == 2 and min(held.values()) > 0:
            break
        time.sleep(0.2)
    expect(len(held) == 2 and min(held.values()) > 0, f"the relay's shard held no events of ranks 2 and 3 in 60 s: {held}")
    shard = found[0]
    os.kill(victim, sig)
    stdout, stderr = job.communicate(timeout=280)
    expect(job.returncode == 0, f"run exit {job.returncode}, the job's own is 0:\n{stderr[-3000:]}")
    expect(os.path.basename(shard) in stderr, f"a warning names the dead relay's shard:\n{stderr[-3000:]}")
    shards = sorted(glob.glob(out + ".shards/simhost1-0-*.h5"))
    expect(shard in shards, f"the first relay's shard is kept: {shards}")
    if sig == signal.SIGTERM:
        # The first relay finished its shard (ranks 2-3 linked from it, their first part); the
        # second holds the rest, named in the file as not joined, and check fails on it.
        expect(len(shards) == 2, f"a second relay's shard beside the first: {shards}")
        second = [x for x in shards if x != shard][0]
        expect(f"rank(s) 2-3 are in {second} and also in {shard}" in stderr,
               f"the warning names both shards:\n{stderr[-3000:]}")
        expect_unjoined(ctx, out, second)
        with h5py.File(out, "r") as f, h5py.File(second, "r") as s2:
            for r in ("2", "3"):
                link = f["ranks"].get(r, getlink=True)
                expect(isinstance(link, h5py.ExternalLink) and link.filename.endswith(os.path.basename(shard)),
                       f"rank {r} is linked from the first shard: {link}")
                g = f["ranks"][r]
                recorded = int(s2["ranks"][r].attrs["events_recorded"])
                both = g["events"].shape[0] + s2["ranks"][r]["events"].shape[0]
                expect(both >= recorded, f"rank {r}: {both} events in the two shards < {recorded} recorded")
        return
    # Ranks 2 and 3 reconnected directly (they still had most of the job to run): the job file takes
    # them from their streams, so the shard's part is not linked, and the warning says so, not that
    # the shard's ranks were linked. (Only were they done before the kill would they be linked.)
    if "also reached this aggregator directly" in stderr or "linked the 2 rank(s)" not in stderr:
        expect(f"rank(s) 2-3 are in {shard} and also reached this aggregator directly" in stderr,
               f"the warning names ranks 2-3 as reached directly:\n{stderr[-3000:]}")
        expect("of the 2 rank(s)" in stderr and ", 0 linked as its last flush left them" in stderr,
               f"the warning says none of the shard's 2 ranks was linked:\n{stderr[-3000:]}")
        # The file names the shard with their first part, and a gate does not pass it silently.
        expect_unjoined(ctx, out, shard)
    run([ctx.commprof, "report", out], check_rc=0, timeout=120)
    with h5py.File(out, "r") as f, h5py.File(shard, "r") as s:
        expect(sorted(int(r) for r in f["ranks"]) == [0, 1, 2, 3], f"ranks {list(f['ranks'])}")
        for r in ("2", "3"):
            g = f["ranks"][r]
            recorded = int(g.attrs["events_recorded"])
            in_file = g["events"].shape[0]
            in_shard = s["ranks"][r]["events"].shape[0] if r in s["ranks"] else 0
            expect(in_shard > 0, f"rank {r}: the dead relay had stored none of it; the kill came too early to test")
            expect(in_file + in_shard >= recorded,
                   f"rank {r}: {in_file} events in the file + {in_shard} in the shard < {recorded} recorded")


def case_rank_killed(ctx):
    """A rank killed under a relay: the relay stores it as disconnected, and `run` tells it on stderr
    as the job's aggregator tells its own (from the relay's log, which is then removed)."""
    out = ctx.path("rankkill.h5")
    cmd = [ctx.commprof, "run", "-o", out, "--relay", "node", "--"] + mpirun(3) + [
        ctx.test_program("fault_program"), "40", "1", "kill", "20"]
    p = run(cmd, env={"TMPDIR": ctx.work}, timeout=280)
    expect(p.returncode == 137, f"run exit {p.returncode}, the job's own is 137 (rank 1 killed):\n{p.stderr[-3000:]}")
    told = [ln for ln in p.stderr.splitlines() if "rank 1 disconnected without a bye" in ln]
    expect(len(told) == 1 and "(the relay on " in told[0], f"the relay's warning told once, with the relay:\n{p.stderr}")
    ranks = {r["rank"]: r for r in info_json(ctx, out)["ranks"]}
    expect(sorted(ranks) == [0, 1, 2] and ranks[1]["status"] == "disconnected",
           f"rank 1 disconnected, the others there: {ranks}")
    expect(not glob.glob(out + ".shards/*.log"), f"the relay's log is removed: {os.listdir(out + '.shards')}")


def case_run_killed(ctx):
    """`commprof run --relay` killed (SIGKILL) mid-job: its file links no shard, and `info` names the
    shards beside it that hold the ranks (each a commprof file of its node's ranks), and `check` fails
    on them (unlinked_shards) unless they are allowed. The job runs on for 14 s after the kill, longer
    than a relay's grace (10 s): the orphaned relay serves its ranks until they end, so its shard
    holds them whole (it once finished after the grace, the ranks started a second relay, and that
    one deleted the first's shard)."""
    out = ctx.path("runkill.h5")
    iters = 1400
    cmd = [ctx.commprof, "run", "-o", out, "--relay", "node", "--"] + mpirun(2) + [
        ctx.test_program("fault_program"), str(iters), "0", "none", "0", "10000"]
    job = subprocess.Popen(cmd, env=dict(os.environ, TMPDIR=ctx.work), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    while not glob.glob(out + ".shards/*.h5") and time.time() < deadline and job.poll() is None:
        time.sleep(0.05)
    expect(job.poll() is None and glob.glob(out + ".shards/*.h5"), "the relay never started its shard")
    time.sleep(0.3)
    os.kill(job.pid, signal.SIGKILL)
    job.wait()
    # The job (mpirun and its ranks, in the run's session) goes on and ends; the relay, in its own,
    # finishes its shard once its ranks are done.
    while time.time() < deadline:
        try:
            os.killpg(job.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    kept = glob.glob(out + ".shards/*.h5")
    expect(len(kept) == 1, f"the relay's shard is kept (a second relay once deleted it): {os.listdir(out + '.shards')}")
    shard = kept[0]
    said = ""
    while time.time() < deadline + 60:
        p = run([ctx.commprof, "info", out], timeout=120)
        said = p.stdout + p.stderr
        q = run([ctx.commprof, "info", "--json", shard], timeout=120)
        if q.returncode == 0 and len(json.loads(q.stdout)["ranks"]) == 2:
            break
        time.sleep(0.5)
    expect("1 shard file(s) in " + out + ".shards are not linked into this file" in said and shard in said,
           f"info names the unlinked shard:\n{said}")
    ranks = json.loads(q.stdout)["ranks"]
    expect(sorted(r["rank"] for r in ranks) == [0, 1], f"the shard holds both ranks: {ranks}")
    for r in ranks:
        expect(r["status"] == "complete" and r["event_count"] >= iters,
               f"rank {r['rank']} whole in the shard ({iters} allreduces and more): {r}")
    expect(sorted(glob.glob(out + ".shards/*.h5")) == [shard], f"one shard: {glob.glob(out + '.shards/*')}")
    expect(not glob.glob(out + ".spool/*.cpspool"), f"no rank spooled: {glob.glob(out + '.spool/*')}")
    j = json.loads(run([ctx.commprof, "info", "--json", out], timeout=120).stdout)
    expect(j["unlinked_shards"] == [shard], f"info --json lists the unlinked shard: {j.get('unlinked_shards')}")
    for cmd in (["report"], ["stats"], ["check", "--max", "incomplete=0"], ["export", "-q", "-o", ctx.path("k.json")]):
        p = run([ctx.commprof, *cmd, out], timeout=120)
        expect(f"commprof {cmd[0]}: warning: {out}: 1 shard file(s) in {out}.shards hold ranks not linked" in p.stderr,
               f"{cmd[0]} warns of the unlinked shard:\n{p.stderr}")
    # A CI gate cannot vouch for ranks it did not read: check fails on the unlinked shard unless it
    # is allowed, and the shard itself gates on its own.
    p = run([ctx.commprof, "check", out, "--max", "incomplete=0"], timeout=120)
    expect(p.returncode == 1 and "FAIL unlinked_shards = 1 (max 0)" in p.stdout,
           f"check fails on the unlinked shard: exit {p.returncode}\n{p.stdout}{p.stderr}")
    p = run([ctx.commprof, "check", out, "--max", "incomplete=0", "--max", "unlinked_shards=1"], timeout=120)
    expect(p.returncode == 0 and "ok   unlinked_shards = 1 (max 1)" in p.stdout,
           f"check with the shard allowed: exit {p.returncode}\n{p.stdout}{p.stderr}")
    p = run([ctx.commprof, "check", shard, "--max", "incomplete=0"], timeout=120)
    expect(p.returncode == 0 and "unlinked_shards" not in p.stdout,
           f"the shard gates on its own: exit {p.returncode}\n{p.stdout}{p.stderr}")
    # Read through a symbolic link elsewhere, the file's shard directory is the real file's.
    os.makedirs(ctx.path("runkill-link"))
    link = ctx.path("runkill-link/k.h5")
    os.symlink(out, link)
    p = run([ctx.commprof, "check", link, "--max", "incomplete=0"], timeout=120)
    expect(p.returncode == 1 and "FAIL unlinked_shards = 1 (max 0)" in p.stdout and shard in p.stderr,
           f"check through a symbolic link fails on the shard and names it: exit {p.returncode}\n{p.stdout}{p.stderr}")
    # `diff` warns of it too, for either file.
    p = run([ctx.commprof, "diff", shard, out], timeout=120)
    expect(f"commprof diff: warning: {out}: 1 shard file(s) in {out}.shards hold ranks not linked" in p.stderr,
           f"diff warns of the unlinked shard:\n{p.stderr}")
    # A rerun to the same output keeps them: the file it replaces links no shard, so the shard in
    # OUTPUT.shards is not its to remove (it is the only copy of those ranks), and it says so.
    p = run([ctx.commprof, "run", "-o", out, "--relay", "node", "--"] + mpirun(2) + [
        ctx.test_program("fault_program"), "20", "0", "none", "0", "1000"], env={"TMPDIR": ctx.work}, timeout=200)
    expect(p.returncode == 0 and os.path.exists(shard) and "kept 1 shard file(s) in" in p.stderr and shard in p.stderr,
           f"a rerun keeps the killed run's shard and says so: exit {p.returncode}, kept: {os.path.exists(shard)}\n"
           f"{p.stderr[-2000:]}")


def case_congested(ctx):
    out = ctx.path("congested.h5")
    env = {"COMMPROF_TEST_WRITER_DELAY_US": "20000", "COMMPROF_SEND_TIMEOUT_MS": "100",
           "COMMPROF_BUFFER_EVENTS": "1048576"}
    run_job(ctx, out, 2, "node", env, 100000, ["--bytes", "8", "--compute-us", "0"], ["--queue-mb", "1"])
    shards = shards_of(out)
    expect(len(shards) == 1, f"one relay for one host: {shards}")
    congested = 0
    with h5py.File(out, "r") as f:
        for r in ("0", "1"):
            expect(isinstance(f["ranks"].get(r, getlink=True), h5py.ExternalLink), f"rank {r} is in the shard")
            a = f["ranks"][r].attrs
            expect(a["status"] == "complete", f"rank {r}: {a['status']} ({a.get('end_reason')})")
            expect(int(a["dropped_events"]) == 0, f"rank {r} dropped events")
            expect(f["ranks"][r]["events"].shape[0] == int(a["events_recorded"]),
                   f"rank {r}: {f['ranks'][r]['events'].shape[0]} events stored of {a['events_recorded']}")
            congested += int(a.get("spooled_congested", 0))
    expect(congested >= 1, "no rank went to its spool: the relay was never congested, the case tests nothing")
    expect(not glob.glob(out + ".spool/*.cpspool"), "a spool was left unmerged")


def relay_cmd(ctx, parent, shard, rendezvous=None):
    cmd = [ctx.commprof, "relay", "--parent", parent, "--shard", shard]
    return cmd + (["--rendezvous", rendezvous] if rendezvous else [])


def case_moved(ctx):
    """A job file read through a symbolic link in another directory reads whole (its shards are beside
    the file the link leads to, where h5py finds them too); a copy renamed with its shard directory
    renamed alike cannot follow its links, which name the directory of the name it was written under,
    and the message says so (not only 'keep them together', which they are)."""
    out = ctx.path("moved.h5")
    run_job(ctx, out, 2, "node", {"COMMPROF_FAKE_HOST": "0,1"})
    expect(len(shards_of(out)) == 2, f"two shards: {shards_of(out)}")
    elsewhere = ctx.path("moved-links")
    os.makedirs(elsewhere)
    link = os.path.join(elsewhere, "link.h5")
    os.symlink(out, link)
    p = run([ctx.commprof, "info", "--json", link], timeout=120)
    expect(p.returncode == 0, f"info through a symbolic link: exit {p.returncode}\n{p.stderr}")
    ranks = json.loads(p.stdout)["ranks"]
    expect(sorted(r["rank"] for r in ranks) == [0, 1] and all(r["status"] == "complete" for r in ranks),
           f"both ranks through the link: {ranks}")
    renamed = ctx.path("moved-renamed")
    os.makedirs(renamed)
    shutil.copyfile(out, os.path.join(renamed, "run1.h5"))
    shutil.copytree(out + ".shards", os.path.join(renamed, "run1.h5.shards"))
    p = run([ctx.commprof, "info", os.path.join(renamed, "run1.h5")], timeout=120)
    expect(p.returncode == 1 and "this file was written as moved.h5, and its links name moved.h5.shards/ beside it"
           in p.stderr and "not run1.h5.shards" in p.stderr,
           f"a renamed copy: exit {p.returncode}, the message names the directory its links expect:\n{p.stderr}")
    os.rename(os.path.join(renamed, "run1.h5.shards"), os.path.join(renamed, "moved.h5.shards"))
    p = run([ctx.commprof, "info", os.path.join(renamed, "run1.h5")], timeout=120)
    expect(p.returncode == 0, f"the renamed copy with its shard directory as the links name it: exit {p.returncode}\n"
                              f"{p.stderr}")
    # A rerun to the same output replaces the file and the shards it linked, and nothing else.
    before = shards_of(out)
    stray = out + ".shards/not-a-shard-of-this-output.h5"
    shutil.copyfile(before[0], stray)
    p = run_job(ctx, out, 2, "node", {"COMMPROF_FAKE_HOST": "0,1"})
    after = shards_of(out)
    expect(len(after) == 3 and not set(before) & set(after) and stray in after,
           f"the rerun's 2 shards and the stray one, the replaced file's gone: before {before}, after {after}")
    expect("kept 1 shard file(s) in" in p.stderr, f"the rerun tells the shard it kept:\n{p.stderr[-1500:]}")


def case_relay_refused(ctx):
    agg, err, address, secret = start_aggregate(ctx, "parent", 1)
    shard = ctx.path("refused.h5")
    cases = [({"COMMPROF_SECRET": "not-the-secret", "COMMPROF_JOB_ID": "parent"}, address, shard,
              ["refused this relay", "proof"]),
             ({"COMMPROF_SECRET": secret, "COMMPROF_JOB_ID": "another-job"}, address, shard,
              ["refused this relay", "another-job"]),
             ({"COMMPROF_SECRET": secret, "COMMPROF_JOB_ID": "parent"}, "127.0.0.1:1", shard,
              ["cannot connect to parent aggregator 127.0.0.1:1"]),
             ({"COMMPROF_SECRET": secret, "COMMPROF_JOB_ID": "parent"}, address, "/nonexistent-dir/x.h5",
              ["/nonexistent-dir"])]
    for env, parent, out, words in cases:
        p = run(relay_cmd(ctx, parent, out), env=env, timeout=60)
        expect(p.returncode == 1, f"relay with {env}, parent {parent}: exit {p.returncode}\n{p.stderr}")
        for w in words:
            expect(w in p.stderr, f"relay with {env}, parent {parent}: '{w}' not in its message:\n{p.stderr}")
        expect(not os.path.exists(out), f"a refused relay left {out}")
    agg.send_signal(signal.SIGTERM)
    agg.wait(timeout=60)
    err.close()


def case_parent_gone(ctx):
    agg, err, address, secret = start_aggregate(ctx, "gone", 4)
    shard, base = ctx.path("gone-shard.h5"), ctx.path("rdv")
    env = dict(os.environ, COMMPROF_SECRET=secret, COMMPROF_JOB_ID="gone")
    relay_err = open(ctx.path("relay.stderr"), "w")
    relay = subprocess.Popen(relay_cmd(ctx, address, shard, base), env=env, stdout=subprocess.DEVNULL,
                             stderr=relay_err)
    for _ in range(400):
        if os.path.exists(base + ".addr"):
            break
        expect(relay.poll() is None, f"the relay exited early: {open(ctx.path('relay.stderr')).read()}")
        time.sleep(0.05)
    relay_port = open(base + ".addr").read().strip().rsplit(":", 1)[1]
    events = 3_000_000
    gen = subprocess.Popen([os.path.join(ctx.build, "bench", "commprof_load_generator"), "--port", relay_port,
                            "--secret", secret, "--job", "gone", "--ranks", "4", "--events", str(events), "--batch",
                            "1000", "--threads", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(400):  # the ranks are connected and streaming to the relay
        if os.path.exists(shard) and os.path.getsize(shard) > (256 << 10):
            break
        time.sleep(0.02)
    expect(gen.poll() is None, "the ranks finished before the parent was killed: the case tests nothing")
    agg.kill()  # the parent goes away while the ranks stream
    agg.wait(timeout=60)
    err.close()
    out, gen_err = gen.communicate(timeout=120)
    expect(gen.returncode == 0, f"load generator through the orphaned relay:\n{out}{gen_err}")
    rc = relay.wait(timeout=120)
    relay_err.close()
    log = open(ctx.path("relay.stderr")).read()
    expect(rc == 0, f"relay exit {rc}:\n{log}")
    expect(("the parent is gone" in log or "the parent aggregator's connection ended" in log)
           and "finishing the shard" in log, f"the relay does not say why it finished:\n{log}")
    with h5py.File(shard, "r") as f:
        expect(int(f.attrs["finalized"]) == 1, "shard not finalized")
        for r in range(4):
            g = f["ranks"][str(r)]
            expect(g.attrs["status"] == "complete" and g["events"].shape[0] == events,
                   f"rank {r}: {g.attrs['status']}, {g['events'].shape[0]} events")
    expect(not os.path.exists(base + ".addr") and not os.path.exists(base + ".lock"), "rendezvous files left")


def case_usage(ctx):
    for bad in ("bogus", "0x", "+2", " 2", "2 ", "-1", "4294967296"):
        p = run([ctx.commprof, "run", "--relay", bad, "--", "true"], check_rc=2)
        expect(f"--relay {bad}" in p.stderr, p.stderr)
    p = run([ctx.commprof, "run", "--relay", "node", "--hang-timeout", "5", "--", "true"], check_rc=2)
    expect("--hang-timeout" in p.stderr and "relays" in p.stderr, p.stderr)
    p = run([ctx.commprof, "relay", "--parent", "127.0.0.1:1", "--shard", ctx.path("x.h5")], check_rc=2,
            unset=("COMMPROF_SECRET", "COMMPROF_JOB_ID"))
    expect("COMMPROF_SECRET" in p.stderr, p.stderr)
    expect(not os.path.exists(ctx.path("x.h5")), "nothing written")
    # A plain file where the shard directory goes: named with the reason, nothing started or written.
    with open(ctx.path("y.h5.shards"), "w") as f:
        f.write("not a directory\n")
    p = run([ctx.commprof, "run", "--relay", "2", "-o", ctx.path("y.h5"), "--", "true"], check_rc=1)
    expect(f"cannot create the relays' shard directory {ctx.path('y.h5.shards')}: it exists and is not a directory"
           in p.stderr, p.stderr)
    expect(not os.path.exists(ctx.path("y.h5")), "nothing written")
    # A shard directory that is there but cannot be written in: said so (not "cannot create").
    ro = ctx.path("ro")
    os.makedirs(os.path.join(ro, "z.h5.shards"), exist_ok=True)
    os.chmod(ro, 0o777)  # the output's own directory writable by the user below (root writes anywhere)
    os.chmod(os.path.join(ro, "z.h5.shards"), 0o555)
    try:
        p = run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", ctx.commprof, "run", "--relay",
                 "2", "-o", os.path.join(ro, "z.h5"), "--", "true"]) if os.geteuid() == 0 else \
            run([ctx.commprof, "run", "--relay", "2", "-o", os.path.join(ro, "z.h5"), "--", "true"])
        expect(p.returncode == 1 and f"cannot write in the relays' shard directory {ro}/z.h5.shards: Permission denied"
               in p.stderr, f"exit {p.returncode}\n{p.stderr}")
    finally:
        os.chmod(os.path.join(ro, "z.h5.shards"), 0o755)
    # A shard in a directory that does not exist: one line, the command named once.
    p = run([ctx.commprof, "relay", "--parent", "127.0.0.1:1", "--shard", "/nonexistent-commprof-dir/s.h5"],
            check_rc=1, env={"COMMPROF_SECRET": "s", "COMMPROF_JOB_ID": "j"})
    expect(p.stderr == "commprof relay: cannot write /nonexistent-commprof-dir/s.h5: directory "
           "/nonexistent-commprof-dir does not exist\n", repr(p.stderr))
    # --grace, --flush-ms and --queue-mb of run, aggregate and relay: a value out of range or not a
    # number is a usage error naming it (a negative, NaN or infinite grace was taken as 0 or forever).
    bad_values = [("--grace", "-1", "a number of seconds from 0 to 86400"), ("--grace", "nan", "seconds"),
                  ("--grace", "inf", "seconds"), ("--grace", "1e9", "seconds"), ("--grace", "0x10", "seconds"),
                  ("--grace", " 5", "seconds"),
                  ("--flush-ms", "0", "a number of milliseconds from 1 to 3600000"), ("--flush-ms", "x", "milliseconds"),
                  ("--queue-mb", "x", "a number of MiB from 1 to 1048576"), ("--queue-mb", "0", "MiB")]
    for option, value, why in bad_values:
        for cmd in ([ctx.commprof, "run", option, value, "-o", ctx.path("z.h5"), "--", "true"],
                    [ctx.commprof, "aggregate", "--expect", "1", option, value, "-o", ctx.path("z.h5")],
                    [ctx.commprof, "relay", "--parent", "127.0.0.1:1", "--shard", ctx.path("z.h5"), option, value]):
            if option == "--grace" and cmd[1] == "relay":
                continue  # the relay takes its grace from its parent
            p = run(cmd, check_rc=2, env={"COMMPROF_SECRET": "s", "COMMPROF_JOB_ID": "j"})
            expect(f"{option}: '{value}' is not" in p.stderr and why in p.stderr, f"{cmd[1]} {option} {value}: {p.stderr}")
            expect(not os.path.exists(ctx.path("z.h5")), "nothing written")
    # The run's --flush-ms reaches its relays (their shards flush as often as the job file).
    p = run([ctx.commprof, "run", "-q", "--relay", "node", "--flush-ms", "250", "-o", ctx.path("f.h5"), "--", "sh", "-c",
             "echo \"$COMMPROF_RELAY_OPTIONS\""], env={"TMPDIR": ctx.work})
    expect(p.stdout.strip().endswith("--flush-ms 250") and "--queue-mb " in p.stdout,
           f"the relays' options: {p.stdout!r}")


CASES = {"loadgen_1024": case_loadgen_1024, "mpi_64": case_mpi_64, "per_n": case_per_n, "rank_killed": case_rank_killed,
         "run_killed": case_run_killed,
         "cannot_start": case_cannot_start, "relay_killed": case_relay_killed,
         "relay_terminated": case_relay_terminated, "congested": case_congested,
         "relay_refused": case_relay_refused, "moved": case_moved, "parent_gone": case_parent_gone, "usage": case_usage}


if __name__ == "__main__":
    sys.exit(run_cases(CASES))
