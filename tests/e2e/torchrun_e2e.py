#!/usr/bin/env python3
"""Jobs started by the torch launchers (docs/torchrun.md): every worker gets its rank, its host and
its place.

Usage: torchrun_e2e.py CASE --build BUILD_DIR --work WORK_DIR

Cases and their truth:
  launcher     `commprof run -- torch_style_launcher.py --nproc-per-node 4 -- c_api_program` (a launcher
               that sets exactly torchrun's variables), run with SLURM_PROCID=0, SLURM_NTASKS=1 and
               PMIX_RANK=0 left in its environment as an outer srun would leave them: ranks 0-3 stored,
               world size 4, none refused, each complete with c_api_program's 5 steps and 10 worker
               ranges, local_rank = rank, group_rank 0, torch_launched 1, restart_count 0, no spool left.
  multi_node   One `commprof aggregate --expect 4` and two launchers standing for two nodes
               (--nnodes 2, --node-rank 0 and 1, 2 workers each) with COMMPROF_AGGREGATOR set: ranks
               0-3, group_rank 0,0,1,1, local_rank 0,1,0,1, each with its 5 steps.
  torchrun     Debian's python3-torch: `commprof run -- python3 -m torch.distributed.run --standalone
               --nproc_per_node 2 torch_gloo_worker.py` (torch 1.13 spelling; CPU, gloo; each worker checks its all_reduce):
               ranks 0 and 1, each with 3 steps and 3 "gloo_allreduce" ranges, local_rank = rank.
               Skipped (exit 77) when torch is not installed.
  restart      Elastic restarts (docs/torchrun.md#elastic-restarts): the launcher of `launcher` with
               --max-restarts 1, whose rank 2 fails in the first incarnation (exits 3 after its work), so
               every worker starts again with TORCHELASTIC_RESTART_COUNT=1. commprof run exits 0 (the
               launcher's code), refuses no worker, and keeps both incarnations: job.h5 holds ranks
               0-3 of the first (restart_count 0) and names job.restart-1.h5 in restart_files;
               job.restart-1.h5 holds ranks 0-3 of the second (incarnation 1, restart_count 1, other
               pids), each complete with c_api_program's 5 steps, and its /analysis. A restart file
               an earlier run left (job.restart-2.h5) is removed, not taken for this job's. The same
               launcher spooling (no aggregator) and `commprof merge`: merged.h5 and
               merged.restart-1.h5, ranks 0-1 with their 5 steps in each.
  torchrun_restart  Debian's torch.distributed.run with --max_restarts 1 and two gloo workers, rank 1
               failing the first incarnation: torchrun.h5 (first) and torchrun.restart-1.h5 (second:
               ranks 0 and 1 each with 3 steps and 3 checked all_reduce ranges). Skipped without torch.
"""
import json
import os
import subprocess
import sys
import time

import h5py

from e2e_support import expect, run, run_cases

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER = [sys.executable, os.path.join(HERE, "torch_style_launcher.py")]


def ranks_of(ctx, path):
    info = json.loads(run([ctx.commprof, "info", "--json", path], check_rc=0).stdout)
    return info, {r["rank"]: r for r in info["ranks"]}


def attrs(path, rank):
    with h5py.File(path, "r") as f:
        return {k: (v.item() if hasattr(v, "item") else v) for k, v in f["ranks"][str(rank)].attrs.items()}


def case_launcher(ctx):
    out = ctx.path("launcher.h5")
    p = run([ctx.commprof, "run", "-o", out, "--"] + LAUNCHER +
            ["--nproc-per-node", "4", "--", ctx.test_program("c_api_program")],
            env={"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "PMIX_RANK": "0"}, cwd=ctx.work, timeout=180)
    expect(p.returncode == 0, f"commprof run: exit {p.returncode}\n{p.stderr}")
    expect("already connected or stored" not in p.stderr, f"a worker was refused:\n{p.stderr}")
    info, ranks = ranks_of(ctx, out)
    expect(sorted(ranks) == [0, 1, 2, 3] and info["world_size"] == 4,
           f"ranks {sorted(ranks)}, world size {info['world_size']}")
    for r, entry in ranks.items():
        expect(entry["status"] == "complete", f"rank {r}: status {entry['status']}")
        expect(entry["events_by_kind"].get("step") == 5 and entry["events_by_name"].get("worker-iter") == 10,
               f"rank {r}: {entry['events_by_kind']} {entry['events_by_name']}")
        a = attrs(out, r)
        expect(a.get("local_rank") == r and a.get("group_rank") == 0 and a.get("torch_launched") == 1 and
               a.get("restart_count") == 0, f"rank {r}: attributes {a}")
        # Workers without MPI on the machine of `commprof run`'s aggregator share its clock exactly.
        expect(entry["clock_method"] == "tcp-same-host" and entry["clock_offset_ns"] == 0 and
               entry["clock_error_bound_ns"] == 0, f"rank {r}: clock {entry}")
    expect(not os.path.exists(os.path.join(ctx.work, "commprof-spool")) or
           not os.listdir(os.path.join(ctx.work, "commprof-spool")), "spool files left")


def case_multi_node(ctx):
    out, secret_file, addr_file = ctx.path("multi.h5"), ctx.path("multi.secret"), ctx.path("multi.addr")
    err = open(ctx.path("aggregate.stderr"), "w")
    agg = subprocess.Popen([ctx.commprof, "aggregate", "-q", "--expect", "4", "--listen", "127.0.0.1:0", "--job-id",
                            "torch-multi", "--secret-file", secret_file, "--address-file", addr_file,
                            "--timeout", "120", "-o", out], stdout=subprocess.DEVNULL, stderr=err)
    for _ in range(400):
        if os.path.exists(addr_file) and open(addr_file).read().strip():
            break
        expect(agg.poll() is None, "aggregate exited early")
        time.sleep(0.05)
    env = {"COMMPROF_AGGREGATOR": open(addr_file).read().strip(), "COMMPROF_SECRET": open(secret_file).read().strip(),
           "COMMPROF_JOB_ID": "torch-multi", "LD_PRELOAD": ctx.library}
    nodes = [subprocess.Popen(LAUNCHER + ["--nproc-per-node", "2", "--nnodes", "2", "--node-rank", str(g), "--",
                                          ctx.test_program("c_api_program")],
                              env={**os.environ, **env}, cwd=ctx.work, stdout=subprocess.DEVNULL)
             for g in (0, 1)]
    codes = [n.wait(timeout=120) for n in nodes]
    rc = agg.wait(timeout=150)
    err.close()
    expect(codes == [0, 0] and rc == 0, f"launchers {codes}, aggregate {rc}: {open(ctx.path('aggregate.stderr')).read()}")
    info, ranks = ranks_of(ctx, out)
    expect(sorted(ranks) == [0, 1, 2, 3], f"ranks {sorted(ranks)}")
    for r in range(4):
        a = attrs(out, r)
        expect(a.get("group_rank") == r // 2 and a.get("local_rank") == r % 2, f"rank {r}: attributes {a}")
        expect(ranks[r]["events_by_kind"].get("step") == 5, f"rank {r}: {ranks[r]['events_by_kind']}")
        # A standalone aggregator's clock is not named to the workers (no COMMPROF_AGGREGATOR_CLOCK
        # here): they measure it, as workers on another machine must.
        expect(ranks[r]["clock_method"] == "tcp-pingpong" and ranks[r]["clock_error_bound_ns"] > 0,
               f"rank {r}: clock {ranks[r]}")


def case_torchrun(ctx):
    probe = subprocess.run([sys.executable, "-c", "import torch.distributed.run"], capture_output=True)
    if probe.returncode != 0:
        print("SKIPPED: python3-torch is not installed (Debian: apt install python3-torch)")
        sys.exit(77)
    out = ctx.path("torchrun.h5")
    p = run([ctx.commprof, "run", "-o", out, "--", sys.executable, "-m", "torch.distributed.run", "--standalone",
             "--nproc_per_node", "2",
             # Debian's torch 1.13 on Python 3.11 cannot parse a redirect value of 0 (the default: its
             # Std.from_str gives None there): stdout goes to a log file per worker and is teed back.
             "--redirects", "0:1,1:1", "--tee", "0:1,1:1", "--log_dir", ctx.path("torch-logs"),
             os.path.join(HERE, "torch_gloo_worker.py")], cwd=ctx.work, timeout=240)
    expect(p.returncode == 0, f"commprof run: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    expect(p.stdout.count(": ok") == 2, f"the workers' all_reduce checks:\n{p.stdout}\n{p.stderr}")
    info, ranks = ranks_of(ctx, out)
    expect(sorted(ranks) == [0, 1] and info["world_size"] == 2, f"ranks {sorted(ranks)}, world {info['world_size']}")
    for r, entry in ranks.items():
        expect(entry["events_by_kind"].get("step") == 3 and entry["events_by_name"].get("gloo_allreduce") == 3,
               f"rank {r}: {entry['events_by_kind']} {entry['events_by_name']}")
        a = attrs(out, r)
        expect(a.get("local_rank") == r and a.get("torch_launched") == 1, f"rank {r}: attributes {a}")
        expect(entry["clock_method"] == "tcp-same-host" and entry["clock_error_bound_ns"] == 0, f"rank {r}: {entry}")
    # One machine, one clock: alignment adds no clock-condition violation to the raw clocks'.
    expect(info["clock"]["violations"] == info["clock"]["violations_unaligned"], f"violations {info['clock']}")


def case_restart(ctx):
    out, restart, stale = ctx.path("job.h5"), ctx.path("job.restart-1.h5"), ctx.path("job.restart-2.h5")
    with open(stale, "w") as f:
        f.write("an earlier run's file")
    p = run([ctx.commprof, "run", "-o", out, "--"] + LAUNCHER +
            ["--nproc-per-node", "4", "--max-restarts", "1", "--fail-first-rank", "2", "--",
             ctx.test_program("c_api_program")], cwd=ctx.work, timeout=180)
    expect(p.returncode == 0, f"commprof run: exit {p.returncode}, expected the launcher's 0\n{p.stderr}")
    expect("already connected or stored" not in p.stderr, f"a restarted worker was refused:\n{p.stderr}")
    expect(f"incarnation 1 of the workers goes to {restart}" in p.stderr and "elastic restart 1: 4 rank(s)" in p.stderr,
           f"the restart is not named on stderr:\n{p.stderr}")
    first, ranks0 = ranks_of(ctx, out)
    expect(sorted(ranks0) == [0, 1, 2, 3] and first["incarnation"] == 0 and
           first["restart_files"] == ["job.restart-1.h5"], f"job.h5: ranks {sorted(ranks0)}, {first}")
    second, ranks1 = ranks_of(ctx, restart)
    expect(sorted(ranks1) == [0, 1, 2, 3] and second["incarnation"] == 1 and second["world_size"] == 4 and
           second["restart_files"] == [], f"job.restart-1.h5: ranks {sorted(ranks1)}, {second}")
    for r in range(4):
        a0, a1 = attrs(out, r), attrs(restart, r)
        expect(a0.get("restart_count") == 0 and a1.get("restart_count") == 1, f"rank {r}: {a0} / {a1}")
        expect(a0.get("pid") != a1.get("pid"), f"rank {r}: the same pid in both incarnations")
        e = ranks1[r]
        expect(e["status"] == "complete" and e["events_by_kind"].get("step") == 5 and
               e["events_by_name"].get("worker-iter") == 10, f"incarnation 1 rank {r}: {e}")
        expect(ranks0[r]["event_count"] > 0, f"incarnation 0 rank {r} recorded nothing: {ranks0[r]}")
    with h5py.File(restart, "r") as f:
        expect("analysis" in f and int(f.attrs["incarnation"]) == 1, f"job.restart-1.h5: {list(f)} {dict(f.attrs)}")
    expect(not os.path.exists(stale), "an earlier run's job.restart-2.h5 was left beside the new job")
    text = run([ctx.commprof, "info", out], check_rc=0).stdout
    expect("restarts:" in text and "job.restart-1.h5" in text, f"commprof info does not name the restart:\n{text}")

    # Without an aggregator the workers spool; `commprof merge` sorts the spools by incarnation the same way.
    spool, merged = ctx.path("spool"), ctx.path("merged.h5")
    env = {"COMMPROF_AGGREGATOR": "", "COMMPROF_SPOOL_DIR": spool, "COMMPROF_JOB_ID": "spooljob",
           "LD_PRELOAD": ctx.library}
    p = run(LAUNCHER + ["--nproc-per-node", "2", "--max-restarts", "1", "--fail-first-rank", "1", "--",
                        ctx.test_program("c_api_program")], env=env, cwd=ctx.work, timeout=180)
    expect(p.returncode == 0, f"the spooling launcher: exit {p.returncode}\n{p.stderr}")
    p = run([ctx.commprof, "merge", spool, "-o", merged], check_rc=0)
    expect("already connected or stored" not in p.stderr, f"merge refused a restarted worker:\n{p.stderr}")
    m0, mr0 = ranks_of(ctx, merged)
    m1, mr1 = ranks_of(ctx, ctx.path("merged.restart-1.h5"))
    expect(sorted(mr0) == [0, 1] and sorted(mr1) == [0, 1] and m0["restart_files"] == ["merged.restart-1.h5"] and
           m1["incarnation"] == 1, f"merge: {m0['restart_files']} {sorted(mr0)} / {sorted(mr1)}")
    expect(all(e["events_by_kind"].get("step") == 5 for e in list(mr0.values()) + list(mr1.values())),
           "merge: every rank of both incarnations has its 5 steps")


def case_torchrun_restart(ctx):
    probe = subprocess.run([sys.executable, "-c", "import torch.distributed.run"], capture_output=True)
    if probe.returncode != 0:
        print("SKIPPED: python3-torch is not installed (Debian: apt install python3-torch)")
        sys.exit(77)
    out, restart = ctx.path("torchrun.h5"), ctx.path("torchrun.restart-1.h5")
    p = run([ctx.commprof, "run", "-o", out, "--", sys.executable, "-m", "torch.distributed.run", "--standalone",
             "--nproc_per_node", "2", "--max_restarts", "1", "--monitor_interval", "1",
             "--redirects", "0:1,1:1", "--tee", "0:1,1:1", "--log_dir", ctx.path("torch-logs"),
             os.path.join(HERE, "torch_gloo_worker.py")], env={"COMMPROF_TEST_FAIL_FIRST_RANK": "1"},
            cwd=ctx.work, timeout=300)
    expect(p.returncode == 0, f"commprof run: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    expect("already connected or stored" not in p.stderr, f"a restarted worker was refused:\n{p.stderr}")
    expect(p.stdout.count(": ok") == 2, f"the second incarnation's all_reduce checks:\n{p.stdout}\n{p.stderr}")
    first, ranks0 = ranks_of(ctx, out)
    expect(sorted(ranks0) == [0, 1] and first["restart_files"] == ["torchrun.restart-1.h5"],
           f"torchrun.h5: ranks {sorted(ranks0)}, restart files {first['restart_files']}")
    second, ranks1 = ranks_of(ctx, restart)
    expect(sorted(ranks1) == [0, 1] and second["incarnation"] == 1, f"torchrun.restart-1.h5: {sorted(ranks1)}")
    for r, e in ranks1.items():
        expect(e["events_by_kind"].get("step") == 3 and e["events_by_name"].get("gloo_allreduce") == 3,
               f"incarnation 1 rank {r}: {e['events_by_kind']} {e['events_by_name']}")
        expect(attrs(restart, r).get("restart_count") == 1, f"rank {r}: {attrs(restart, r)}")


if __name__ == "__main__":
    run_cases({"launcher": case_launcher, "multi_node": case_multi_node, "torchrun": case_torchrun,
               "restart": case_restart, "torchrun_restart": case_torchrun_restart})
