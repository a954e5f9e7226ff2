#!/usr/bin/env python3
"""End-to-end tests of the Fortran MPI bindings (docs/mpi-bindings.md) and of `commprof run`'s
failure when no rank records anything (docs/cli.md, exit code 4).

Usage: fortran_capture.py CASE --build BUILD_DIR --work WORK_DIR [--missing WHAT]
CASE mpif, use_mpi or f08 profiles tests/e2e/fortran_<CASE>.f90 (4 ranks, built by CMake with the
MPI Fortran compiler); --missing names what the build lacked for it, and the case then exits 77
(skipped). CASE nothing_recorded runs programs that never load or call us.
"""
import argparse
import os
import sys

import h5py
import numpy as np

from e2e_capture import EXACT_ENV, FLAG_INCOMPLETE, FLAG_NONBLOCKING, FLAG_RECV_HALF, KIND, Ctx, expect, load_rank, \
    mpirun, named, report_json, run

ITERS = 50  # allreduces on MPI_COMM_WORLD, rank 3 planted late before each
EXIT_NOTHING_RECORDED = 4


def world_seqs(ev, names, name):
    e = named(ev, names, name)
    return e[e["comm_id"] == 1]


def case_fortran(ctx, binding):
    """Every call of the Fortran program is recorded once, as the C wrappers record the C calls:
    the same (communicator, sequence) on every rank, bytes, roots, peers and the split
    communicator; the report matches every blocking collective instance and names rank 3."""
    exe = os.path.join(ctx.build, "tests", "e2e", f"fortran_{binding}")
    out = ctx.path(f"{binding}.h5")
    p = run([ctx.commprof, "run", "-o", out, "--"] + mpirun(4) + [exe], env=EXACT_ENV, check_rc=0)
    expect("no rank recorded anything" not in p.stderr, f"a normal run prints no error:\n{p.stderr}")
    with h5py.File(out, "r") as f:
        expect(int(f.attrs["world_size"]) == 4, f"world_size {f.attrs['world_size']}")
        expect(sorted(f["ranks"]) == ["0", "1", "2", "3"], f"ranks {list(f['ranks'])}")
        allreduce_seqs, bcast_seqs, sub_ids = {}, {}, {}
        for rank in range(4):
            g, ev, names = load_rank(f, rank)
            right, left = (rank + 1) % 4, (rank + 3) % 4
            expect(g.attrs["status"] == "complete", f"rank {rank} status {g.attrs['status']}")
            ar = world_seqs(ev, names, "MPI_Allreduce")
            expect(len(ar) == ITERS, f"rank {rank}: {len(ar)} MPI_Allreduce on world, expected {ITERS}")
            expect(np.all(ar["kind"] == KIND["mpi_collective"]) and np.all(ar["bytes"] == 32),
                   f"rank {rank}: allreduce kind/bytes (8 INTEGERs, in place or not) {set(ar['bytes'].tolist())}")
            allreduce_seqs[rank] = ar["seq"].tolist()
            bc = world_seqs(ev, names, "MPI_Bcast")
            expect(len(bc) == 3 and np.all(bc["bytes"] == 64) and np.all(bc["peer"] == 1),
                   f"rank {rank}: 3 bcasts of 64 B from root 1: {bc[['bytes', 'peer']]}")
            bcast_seqs[rank] = bc["seq"].tolist()
            split = named(ev, names, "MPI_Comm_split")
            expect(len(split) == 1 and int(split["peer"][0]) == rank // 2,
                   f"rank {rank}: MPI_Comm_split with its rank in the new communicator: {split}")
            sub_ids[rank] = int(split["comm_id"][0])
            sub = ev[(ev["kind"] == KIND["mpi_collective"]) & (ev["comm_id"] == sub_ids[rank])]
            sub_names = sorted(names[i] for i in sub["name_id"])
            expect(sub_names == ["MPI_Allreduce", "MPI_Barrier"] and sorted(sub["seq"].tolist()) == [0, 1],
                   f"rank {rank}: split communicator holds an allreduce and a barrier: {sub_names} {sub['seq']}")
            # both halves (docs/file-format.md): the send to the right, the receive from the left
            sr = named(ev, names, "MPI_Sendrecv")
            send_half = sr[(sr["flags"] & FLAG_RECV_HALF) == 0]
            recv_half = sr[(sr["flags"] & FLAG_RECV_HALF) != 0]
            expect(len(send_half) == 1 and int(send_half["peer"][0]) == right
                   and int(send_half["correlation"][0]) == 7, f"rank {rank}: MPI_Sendrecv to {right}, tag 7: {sr}")
            expect(len(recv_half) == 1 and int(recv_half["peer"][0]) == left
                   and int(recv_half["correlation"][0]) == 7, f"rank {rank}: MPI_Sendrecv from {left}, tag 7: {sr}")
            isend, irecv = named(ev, names, "MPI_Isend"), named(ev, names, "MPI_Irecv")
            expect(len(isend) == 1 and int(isend["peer"][0]) == left and int(isend["bytes"][0]) == 40
                   and isend["flags"][0] & FLAG_NONBLOCKING, f"rank {rank}: MPI_Isend to {left}: {isend}")
            expect(len(irecv) == 1 and int(irecv["peer"][0]) == right and int(irecv["bytes"][0]) == 40
                   and irecv["flags"][0] & FLAG_NONBLOCKING, f"rank {rank}: MPI_Irecv from {right}: {irecv}")
            ia = named(ev, names, "MPI_Iallreduce")
            expect(len(ia) == 1 and ia["flags"][0] & FLAG_NONBLOCKING and not ia["flags"][0] & FLAG_INCOMPLETE,
                   f"rank {rank}: one completed MPI_Iallreduce: {ia}")
            expect(len(named(ev, names, "MPI_Waitall")) == 1 and len(named(ev, names, "MPI_Test")) >= 1,
                   f"rank {rank}: MPI_Waitall and MPI_Test recorded")
            expect(not np.any(ev["flags"] & FLAG_INCOMPLETE), f"rank {rank}: an operation left incomplete")
            ordered = ev[np.argsort(ev["start_ns"], kind="stable")]
            expect(ordered["kind"][0] == KIND["mpi_init"] and ordered["kind"][-1] == KIND["mpi_finalize"],
                   f"rank {rank}: first/last events are init/finalize")
        expect(all(allreduce_seqs[r] == list(range(ITERS)) for r in range(4)), f"allreduce seqs {allreduce_seqs}")
        expect(all(bcast_seqs[r] == bcast_seqs[0] for r in range(4)), f"bcast seqs differ: {bcast_seqs}")
        expect(sub_ids[0] == sub_ids[2] and sub_ids[1] == sub_ids[3] and sub_ids[0] != sub_ids[1],
               f"split communicator ids: {sub_ids}")
    rep = report_json(ctx, out)
    # docs/metrics.md §1: 50 allreduces, 3 bcasts and the polled Iallreduce on the world, an
    # allreduce and a barrier on each of the two split communicators.
    expect(rep["world_size"] == 4 and rep["instances"]["matched"] == ITERS + 3 + 1 + 2 * 2
           and rep["instances"]["incomplete"] == 0, f"instances {rep['instances']}")
    # The Isend/Irecv ring's 4 messages and the Sendrecv ring's 4.
    expect(rep["p2p"]["matched"] == 8 and rep["p2p"]["unmatched_sends"] == 0,
           f"p2p {rep['p2p']['matched']} matched, expected 8")
    expect(rep["stragglers"] and rep["stragglers"][0]["rank"] == 3, f"planted late rank 3: {rep['stragglers']}")


def case_nothing_recorded(ctx):
    """A job in which no rank loads or calls libcommprof.so fails loudly with exit code 4 and
    says what was preloaded; the application's own failure still wins (one line pointing at the
    job's own messages: it most likely never started its ranks); a normal run is
    unaffected (the Fortran cases and every other e2e case run with exit code 0)."""
    out = ctx.path("nothing.h5")
    p = run([ctx.commprof, "run", "-o", out, "--"] + mpirun(2) + ["/bin/true"])
    expect(p.returncode == EXIT_NOTHING_RECORDED, f"mpirun /bin/true: exit code {p.returncode}, expected 4\n{p.stderr}")
    for what in ("no rank recorded anything", "world size 0", "LD_PRELOAD=" + ctx.library, "mpirun -x",
                 "static binary", "mpi_f08", "cannot be preloaded"):
        expect(what in p.stderr, f"message names {what!r}:\n{p.stderr}")
    expect("COMMPROF_SECRET=" not in p.stderr, "the secret is not printed")
    with h5py.File(out, "r") as f:
        expect(int(f.attrs["world_size"]) == 0 and len(f["ranks"]) == 0, "the file is still written, empty")
    p = run([ctx.commprof, "run", "-q", "-o", ctx.path("direct.h5"), "--", "/bin/true"])
    expect(p.returncode == EXIT_NOTHING_RECORDED and "no rank recorded anything" in p.stderr,
           f"direct /bin/true: exit code {p.returncode}, expected 4\n{p.stderr}")
    p = run([ctx.commprof, "run", "-q", "-o", ctx.path("failed.h5"), "--", "/bin/sh", "-c", "exit 5"])
    expect(p.returncode == 5 and "no rank recorded anything and the job exited 5" in p.stderr,
           f"the job's own exit code comes first: {p.returncode}, expected 5\n{p.stderr}")
    expect("its own messages are above" in p.stderr and "Check that" not in p.stderr,
           f"a failed job points at its own output, not at the checklist:\n{p.stderr}")
    # A rank that records: exit code 0, no error.
    exe = os.path.join(ctx.build, "tests", "e2e", "mpi_all_calls")
    p = run([ctx.commprof, "run", "-o", ctx.path("normal.h5"), "--"] + mpirun(4) + [exe], check_rc=0)
    expect("no rank recorded anything" not in p.stderr, f"a normal run prints no error:\n{p.stderr}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["mpif", "use_mpi", "f08", "nothing_recorded"])
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--missing", default="")
    a = ap.parse_args()
    if a.missing:
        print(f"{a.case}: skipped: the build has no {a.missing}")
        return 77  # ctest SKIP_RETURN_CODE
    ctx = Ctx(a.build, a.work)
    if a.case == "nothing_recorded":
        case_nothing_recorded(ctx)
    else:
        case_fortran(ctx, a.case)
    print(f"{a.case}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
