#!/usr/bin/env python3
"""A torch.distributed worker on CPU (gloo) that marks its steps and ranges through commprof's C API
(ctypes; libcommprof.so is preloaded by `commprof run`): STEPS steps, each an all_reduce inside a
range named "gloo_allreduce" whose result it checks. Prints its rank and the sum it saw. With
COMMPROF_TEST_FAIL_FIRST_RANK=R, rank R exits 1 in the first incarnation (TORCHELASTIC_RESTART_COUNT 0)."""
import ctypes
import os
import sys

import torch
import torch.distributed as dist

STEPS = 3


def main():
    lib = ctypes.CDLL(os.environ.get("COMMPROF_C_API_LIBRARY") or None)  # None: the preloaded one
    lib.commprof_step.argtypes = [ctypes.c_uint64]
    lib.commprof_range_push.argtypes = [ctypes.c_char_p]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    # A planted failure for the elastic-restart test: this rank fails in the first incarnation only.
    if (os.environ.get("COMMPROF_TEST_FAIL_FIRST_RANK") == str(rank) and
            os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"):
        print(f"rank {rank}: failing the first incarnation on purpose", file=sys.stderr)
        return 1
    for step in range(STEPS):
        lib.commprof_step(step)
        lib.commprof_range_push(b"gloo_allreduce")
        t = torch.ones(4) * (rank + 1)
        dist.all_reduce(t)
        lib.commprof_range_pop()
        want = world * (world + 1) / 2
        if t[0].item() != want:
            print(f"rank {rank}: all_reduce gave {t[0].item()}, expected {want}", file=sys.stderr)
            return 1
    dist.destroy_process_group()
    print(f"worker rank {rank} of {world}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
