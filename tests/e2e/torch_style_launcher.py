#!/usr/bin/env python3
"""A launcher that starts workers exactly as torchrun (torch.distributed.run) does, as far as their
environment goes: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK,
ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT,
TORCHELASTIC_MAX_RESTARTS (the agent's own environment passed on, as torchrun does).

Usage: torch_style_launcher.py --nproc-per-node N [--nnodes M --node-rank G] [--restart-count K] -- PROGRAM ARGS...
Exit code: the first non-zero exit code of a worker, else 0.
"""
import argparse
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc-per-node", type=int, required=True)
    ap.add_argument("--nnodes", type=int, default=1)
    ap.add_argument("--node-rank", type=int, default=0)
    ap.add_argument("--restart-count", type=int, default=0)
    ap.add_argument("program", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    program = a.program[1:] if a.program and a.program[0] == "--" else a.program
    n, world = a.nproc_per_node, a.nproc_per_node * a.nnodes
    workers = []
    for local in range(n):
        env = dict(os.environ)
        rank = a.node_rank * n + local
        env.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(local),
                    "LOCAL_WORLD_SIZE": str(n), "GROUP_RANK": str(a.node_rank), "GROUP_WORLD_SIZE": str(a.nnodes),
                    "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world), "ROLE_NAME": "default",
                    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none",
                    "TORCHELASTIC_RESTART_COUNT": str(a.restart_count), "TORCHELASTIC_MAX_RESTARTS": "0",
                    "TORCHELASTIC_USE_AGENT_STORE": "True"})
        workers.append(subprocess.Popen(program, env=env))
    codes = [w.wait() for w in workers]
    return next((c for c in codes if c != 0), 0)


if __name__ == "__main__":
    sys.exit(main())
