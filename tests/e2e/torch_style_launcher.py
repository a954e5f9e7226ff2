#!/usr/bin/env python3
"""A launcher that starts workers exactly as torchrun (torch.distributed.run) does, as far as their
environment goes: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK,
ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT,
TORCHELASTIC_MAX_RESTARTS (the agent's own environment passed on, as torchrun does), and restarts
them as torch elastic does: when a worker fails and restarts are left, the others are stopped
(SIGTERM) and every worker starts again with TORCHELASTIC_RESTART_COUNT one higher. The others
get up to GRACE_S to end on their own first (torch's agent too notices a failure only at its next
monitor interval): on a loaded machine a worker may not even have started when the failing one
is done, and one stopped before it recorded anything would make the incarnation look empty.

Usage: torch_style_launcher.py --nproc-per-node N [--nnodes M --node-rank G] [--restart-count K]
                               [--max-restarts R --fail-first-rank F] -- PROGRAM ARGS...
--fail-first-rank F: in the first incarnation, rank F's worker gets COMMPROF_TEST_EXIT_CODE=3
(c_api_program then exits 3 after its work): a failure to restart from.
Exit code: the first non-zero exit code of a worker of the last incarnation, else 0.
"""
import argparse
import os
import subprocess
import sys
import time

GRACE_S = 20.0

def start(a, program, restart_count, fail_rank):
    n, world = a.nproc_per_node, a.nproc_per_node * a.nnodes
    workers = []
    for local in range(n):
        env = dict(os.environ)
        rank = a.node_rank * n + local
        env.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(local),
                    "LOCAL_WORLD_SIZE": str(n), "GROUP_RANK": str(a.node_rank), "GROUP_WORLD_SIZE": str(a.nnodes),
                    "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world), "ROLE_NAME": "default",
                    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none",
                    "TORCHELASTIC_RESTART_COUNT": str(restart_count),
                    "TORCHELASTIC_MAX_RESTARTS": str(a.max_restarts), "TORCHELASTIC_USE_AGENT_STORE": "True"})
        if rank == fail_rank:
            env["COMMPROF_TEST_EXIT_CODE"] = "3"
        workers.append(subprocess.Popen(program, env=env))
    return workers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc-per-node", type=int, required=True)
    ap.add_argument("--nnodes", type=int, default=1)
    ap.add_argument("--node-rank", type=int, default=0)
    ap.add_argument("--restart-count", type=int, default=0)
    ap.add_argument("--max-restarts", type=int, default=0)
    ap.add_argument("--fail-first-rank", type=int, default=-1)
    ap.add_argument("program", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    program = a.program[1:] if a.program and a.program[0] == "--" else a.program
    count = a.restart_count
    while True:
        workers = start(a, program, count, a.fail_first_rank if count == a.restart_count else -1)
        # As the agent monitors its workers: the first failure stops the others.
        failed = None
        while failed is None and any(w.poll() is None for w in workers):
            failed = next((w.returncode for w in workers if w.poll() not in (None, 0)), None)
            time.sleep(0.05)
        failed = failed if failed is not None else next((w.returncode for w in workers if w.returncode != 0), None)
        if failed is None:
            return 0
        deadline = time.monotonic() + GRACE_S
        while any(w.poll() is None for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        for w in workers:
            if w.poll() is None:
                w.terminate()
        for w in workers:
            w.wait()
        if count - a.restart_count >= a.max_restarts:
            return failed
        count += 1


if __name__ == "__main__":
    sys.exit(main())
