#!/usr/bin/env python3
"""Clock alignment by host (docs/clock-alignment.md, "Hosts and the tree") and zero-byte
collectives (docs/metrics.md §2), on real 4-rank Open MPI jobs read back with h5py.

Usage: clock_hosts_e2e.py CASE --build BUILD_DIR --work WORK_DIR

Cases and their truth:
  one_host   All 4 ranks read one CLOCK_MONOTONIC, so their true offsets and drifts are 0: every
             rank's stored model is exactly that (offset 0, drift 0, bound 0), the ranks other than 0
             hold rank 0's very points (method mpi-same-host), periodic epochs still run, and
             alignment changes no clock-condition verdict: violations after alignment == on the raw
             clocks.
  two_hosts  COMMPROF_FAKE_HOST=0,0,1,1 simulates two hosts of two ranks; host 1's clock reads
             steady + 5 ms + 30 ppm of steady (COMMPROF_FAKE_HOST_CLOCK_*): ranks 0, 1 get the exact
             identity model; ranks 2, 3 get one model between them (rank 2 measured it against rank 0,
             rank 3 took it), whose offset at its first point is the injected one within the stated
             bound, and whose drift is -30 ppm within the bound over the span.
  four_hosts COMMPROF_FAKE_HOST=0,1,2,3 with host offsets 0, +5, -3, +12 ms: four leaders, so the tree
             has depth 2 (leader 3 measures against leader 1, leaders 1 and 2 against rank 0).
             Every rank's offset at every point is the injected one within that point's half round
             trip, and at every epoch rank 3's half round trip exceeds rank 1's, since its parent's
             bound is part of it (composition up the tree).
  zero_byte  MPI_Allreduce with count 0 after a planted 2r ms spread, then MPI_Barrier
             (zero_byte_program.c): the allreduces return at once (on the raw clocks ranks leave
             before the last one came), yet they are not checked for clock-condition violations and
             charge no wait and no skew; the barriers do. Each iteration then plants the 2r ms spread
             again before an MPI_Alltoallv with every count 0, which Open MPI does synchronise (on the
             shared raw clock no rank leaves one before the last arrived): those are checked (no
             violation) and charge the planted wait (median skew at least half the 6 ms spread,
             mean wait over 1 ms; sleeps can only run late).
No timing is asserted: only exact models, the bound's honesty and counts.
"""
import json
import sys

import h5py
import numpy as np

from e2e_support import expect, mpirun, run, run_cases

KIND_MPI_COLLECTIVE = 3
OP_ALLREDUCE = 4
OP_ALLTOALLV = 12
OP_ALLGATHER = 9
OP_ALLTOALL = 11
FLAG_SIZELESS_TYPE = 32


def info_json(ctx, out):
    return json.loads(run([ctx.commprof, "info", "--json", out], check_rc=0).stdout)


def run_straggler(ctx, out, args, env):
    cmd = [ctx.commprof, "run", "-o", out, "--"] + mpirun(4) + [ctx.example] + args
    run(cmd, env=env, check_rc=0, timeout=300)


def ranks_by_number(info):
    return {r["rank"]: r for r in info["ranks"]}


def case_one_host(ctx):
    out = ctx.path("one_host.h5")
    # 400 small allreduces (the Intel MPI Benchmarks' kind of load: short calls, little margin), with
    # an epoch every 20 ms after the first 64 world collectives
    run_straggler(ctx, out, ["--iters", "400", "--bytes", "8", "--compute-us", "200"],
                  {"COMMPROF_CLOCK_SYNC_INTERVAL_MS": "20"})
    info = info_json(ctx, out)
    ranks = ranks_by_number(info)
    expect(sorted(ranks) == [0, 1, 2, 3], f"ranks {sorted(ranks)}")
    with h5py.File(out, "r") as f:
        ref = f["ranks"]["0"]["clock_points"][...]
        expect(len(ref) >= 3, f"{len(ref)} epochs: expected MPI_Init, periodic and MPI_Finalize ones")
        for i, r in ranks.items():
            expect(r["clock_offset_ns"] == 0 and r["clock_drift_ppm"] == 0 and r["clock_error_bound_ns"] == 0,
                   f"rank {i}: offset {r['clock_offset_ns']}, drift {r['clock_drift_ppm']}, "
                   f"bound {r['clock_error_bound_ns']}; one host's ranks are aligned exactly")
            expect(r["clock_method"] == ("mpi-reference" if i == 0 else "mpi-same-host"), f"rank {i}: {r['clock_method']}")
            pts = f["ranks"][str(i)]["clock_points"][...]
            expect(np.array_equal(pts, ref), f"rank {i}: its points are rank 0's\n{pts}\n{ref}")
            expect(not pts[:, 1:].any(), f"rank {i}: offsets and half round trips all 0: {pts}")
            expect(r["counters"]["clock_sync_epochs"] == len(ref), f"rank {i}: epochs {r['counters']}")
    c = info["clock"]
    expect(c["instances_checked"] == 400 + 1 + 2, f"instances checked {c}")
    expect(c["violations"] <= c["violations_unaligned"], f"alignment added violations: {c}")
    expect(c["violations"] == c["violations_unaligned"], f"exact alignment changes no verdict: {c}")


def epoch_span(samples, local):
    """The duration of the epoch whose samples (local_send, reference, local_recv; the MPI_Init and
    MPI_Finalize epochs 64 each, the periodic ones 32, docs/clock-alignment.md) surround `local`."""
    m = len(samples)
    bounds = [0, 64] + list(range(64 + 32, m - 64 + 1, 32)) + [m]
    for a, b in zip(bounds, bounds[1:]):
        if b > a and samples[a][0] <= local <= samples[b - 1][2]:
            return int(samples[b - 1][2] - samples[a][0])
    return 0


def case_two_hosts(ctx):
    out = ctx.path("two_hosts.h5")
    offset_ns, drift_ppm = 5_000_000, 30.0
    env = {"COMMPROF_FAKE_HOST": "0,0,1,1", "COMMPROF_FAKE_HOST_CLOCK_OFFSET_NS": f"0,{offset_ns}",
           "COMMPROF_FAKE_HOST_CLOCK_DRIFT_PPM": f"0,{drift_ppm}", "COMMPROF_CLOCK_SYNC_INTERVAL_MS": "100"}
    run_straggler(ctx, out, ["--iters", "400", "--bytes", "65536", "--compute-us", "1000"], env)
    info = info_json(ctx, out)
    ranks = ranks_by_number(info)
    with h5py.File(out, "r") as f:
        pts = {i: f["ranks"][str(i)]["clock_points"][...] for i in ranks}
        samples = {i: f["ranks"][str(i)]["clock_samples"].shape[0] if "clock_samples" in f["ranks"][str(i)] else 0
                   for i in ranks}
        samples2 = f["ranks"]["2"]["clock_samples"][...].astype(np.int64) if samples.get(2) else None
    for i in (0, 1):
        r = ranks[i]
        expect(r["clock_offset_ns"] == 0 and r["clock_drift_ppm"] == 0 and r["clock_error_bound_ns"] == 0,
               f"rank {i} on rank 0's host: {r}")
    expect(np.array_equal(pts[0], pts[1]), "rank 1 holds rank 0's points")
    expect(ranks[1]["clock_method"] == "mpi-same-host" and ranks[3]["clock_method"] == "mpi-same-host",
           f"methods {[ranks[i]['clock_method'] for i in range(4)]}")
    expect(ranks[2]["clock_method"] == "mpi-pingpong", f"host 1's leader measured: {ranks[2]['clock_method']}")
    expect(samples[2] > 0 and samples[3] == 0 and samples[1] == 0, f"only the leaders measure: samples {samples}")
    expect(np.array_equal(pts[2], pts[3]), f"ranks 2 and 3 share one model\n{pts[2]}\n{pts[3]}")
    expect(len(pts[2]) >= 3, f"{len(pts[2])} epochs: periodic re-synchronisation runs")
    for i in (2, 3):
        r = ranks[i]
        bound = r["clock_error_bound_ns"]
        expect(0 < bound < 1_000_000, f"rank {i}: bound {bound} ns")
        expect(bound == ranks[2]["clock_error_bound_ns"], "one bound per host")
        # host 1 reads local = s + 5 ms + s * 30e-6 at steady time s, the reference (rank 0, host 0
        # unshifted) reads s: the offset at the first point's local time L is s - L.
        first_local = int(pts[i][0][0])
        s = (first_local - offset_ns) / (1 + drift_ppm * 1e-6)
        want_offset = s - first_local
        expect(abs(r["clock_offset_ns"] - want_offset) <= bound,
               f"rank {i}: offset {r['clock_offset_ns']} ns, truth {want_offset:.0f} ns, bound {bound} ns")
        # every point, not only the first, holds the truth within its own half round trip plus
        # what the drift moves the offset while its epoch runs (not part of the bound, documented:
        # the epoch's samples are taken as one offset; on a loaded machine an epoch lasts ms)
        for local, off, half in pts[i]:
            s = (int(local) - offset_ns) / (1 + drift_ppm * 1e-6)
            within = int(half) + drift_ppm * 1e-6 * epoch_span(samples2, int(local))
            expect(abs(int(off) - (s - int(local))) <= within,
                   f"rank {i}: point at {local}: offset {off}, truth {s - int(local):.0f}, half rtt {half}, "
                   f"with the drift over its epoch {within:.0f}")
        span = int(pts[i][-1][0] - pts[i][0][0])
        want_drift = -drift_ppm / (1 + drift_ppm * 1e-6)
        expect(abs(r["clock_drift_ppm"] - want_drift) <= 2 * bound / span * 1e6,
               f"rank {i}: drift {r['clock_drift_ppm']} ppm, truth {want_drift:.3f}, span {span} ns, bound {bound}")
    c = info["clock"]
    expect(c["violations_unaligned"] > 0, f"the raw clocks, 5 ms apart, must violate: {c}")
    expect(c["violations"] < c["violations_unaligned"], f"alignment removes the injected offset: {c}")


def case_four_hosts(ctx):
    out = ctx.path("four_hosts.h5")
    offsets = [0, 5_000_000, -3_000_000, 12_000_000]
    env = {"COMMPROF_FAKE_HOST": "0,1,2,3", "COMMPROF_FAKE_HOST_CLOCK_OFFSET_NS": ",".join(map(str, offsets)),
           "COMMPROF_CLOCK_SYNC_INTERVAL_MS": "100"}
    run_straggler(ctx, out, ["--iters", "300", "--bytes", "65536", "--compute-us", "1000"], env)
    info = info_json(ctx, out)
    ranks = ranks_by_number(info)
    with h5py.File(out, "r") as f:
        pts = {i: f["ranks"][str(i)]["clock_points"][...] for i in ranks}
    expect([ranks[i]["clock_method"] for i in range(4)] == ["mpi-reference"] + ["mpi-pingpong"] * 3,
           f"methods {[ranks[i]['clock_method'] for i in range(4)]}")
    # A leader may drop an epoch whose every sample was slow (docs/clock-alignment.md, outliers),
    # and its children then get no point from that epoch either: counts may differ, never exceed.
    n = len(pts[0])
    expect(n >= 3 and all(2 <= len(pts[i]) <= n for i in range(4)) and len(pts[3]) <= len(pts[1]),
           f"points per rank {[len(pts[i]) for i in range(4)]}")
    for i in range(4):
        c = ranks[i]["counters"]
        expect(c["clock_sync_epochs"] == n and c["clock_sync_epochs_without_point"] == n - len(pts[i]), f"rank {i}: {c}")
    for i in range(1, 4):
        bound = ranks[i]["clock_error_bound_ns"]
        expect(abs(ranks[i]["clock_offset_ns"] + offsets[i]) <= bound,
               f"rank {i}: offset {ranks[i]['clock_offset_ns']}, injected {-offsets[i]}, bound {bound}")
        for local, off, half in pts[i]:
            expect(abs(int(off) + offsets[i]) <= int(half), f"rank {i}: point at {local}: offset {off}, half {half}")
    # Rank 3's points against its parent rank 1's of the same epoch: rank 1 measures, then serves
    # rank 3, and the next epoch begins only after both, so it is rank 1's last point before rank
    # 3's on the reference time (to within their bounds).
    on_reference = lambda p: int(p[0]) + int(p[1])
    for p3 in pts[3]:
        before = [p1 for p1 in pts[1] if on_reference(p1) <= on_reference(p3) + int(p3[2]) + int(p1[2])]
        expect(before, f"rank 3's point {p3} precedes every point of rank 1: {pts[1]}")
        same = max(before, key=on_reference)
        expect(p3[2] > same[2], f"rank 3's half round trip {p3[2]} must include its parent rank 1's {same[2]}: "
                                f"{pts[3]} / {pts[1]}")


def case_zero_byte(ctx):
    out = ctx.path("zero_byte.h5")
    iters = 20
    run([ctx.commprof, "run", "-o", out, "--"] + mpirun(4) + [ctx.test_program("zero_byte_program"), "--iters",
                                                              str(iters), "--alltoallv", "--sizeless"], check_rc=0,
        timeout=300)
    # The premise, from the raw events: the count-0 allreduces really did not wait (some rank left
    # before the last one arrived in most of them), so the old rule would have counted them.
    early = 0
    with h5py.File(out, "r") as f:
        per_rank, a2av, a2a = [], [], []
        for i in range(4):
            ev = f["ranks"][str(i)]["events"][...]
            ar = ev[(ev["kind"] == KIND_MPI_COLLECTIVE) & (ev["subtype"] == OP_ALLREDUCE)]
            expect(len(ar) == iters and not ar["bytes"].any(), f"rank {i}: {len(ar)} zero-byte allreduces {ar['bytes']}")
            per_rank.append({int(e["seq"]): (int(e["start_ns"]), int(e["end_ns"])) for e in ar})
            av = ev[(ev["kind"] == KIND_MPI_COLLECTIVE) & (ev["subtype"] == OP_ALLTOALLV)]
            expect(len(av) == iters and not av["bytes"].any(), f"rank {i}: {len(av)} zero-byte alltoallvs {av['bytes']}")
            a2av.append({int(e["seq"]): (int(e["start_ns"]), int(e["end_ns"])) for e in av})
            # count 1 of a datatype of size 0: bytes 0 like a count 0, told apart by the flag
            ag = ev[(ev["kind"] == KIND_MPI_COLLECTIVE) & (ev["subtype"] == OP_ALLGATHER)]
            expect(len(ag) == iters and not ag["bytes"].any() and (ag["flags"] & FLAG_SIZELESS_TYPE).all(),
                   f"rank {i}: {len(ag)} allgathers of a size-0 type, each flagged: {ag['bytes']} {ag['flags']}")
            aa = ev[(ev["kind"] == KIND_MPI_COLLECTIVE) & (ev["subtype"] == OP_ALLTOALL)]
            expect(len(aa) == iters and (aa["flags"] & FLAG_SIZELESS_TYPE).all(), f"rank {i}: {len(aa)} alltoalls")
            a2a.append({int(e["seq"]): (int(e["start_ns"]), int(e["end_ns"])) for e in aa})
        for seq in per_rank[0]:
            last_start = max(r[seq][0] for r in per_rank)
            early += any(r[seq][1] < last_start for r in per_rank)
        # One host, one clock: a zero-byte alltoallv that synchronises ends nowhere before its last arrival.
        for seq in a2av[0]:
            last_start = max(r[seq][0] for r in a2av)
            expect(all(r[seq][1] >= last_start for r in a2av),
                   f"alltoallv #{seq}: a rank left before the last arrived: Open MPI no longer synchronises it")
    expect(early >= iters // 2, f"only {early} of {iters} zero-byte allreduces returned early: not the premise")
    a2a_early = sum(any(r[seq][1] < max(x[seq][0] for x in a2a) for r in a2a) for seq in a2a[0])
    expect(a2a_early >= iters // 2, f"only {a2a_early} of {iters} size-0-type alltoalls returned early: not the premise")
    info = info_json(ctx, out)
    c = info["clock"]
    # the barriers, the alltoallvs and the size-0-type allgathers, one each per iteration; not the
    # zero-byte allreduces
    expect(c["instances_checked"] == 3 * iters, f"only the barriers, alltoallvs and allgathers are checked: {c}")
    expect(c["violations"] == 0 and c["violations_unaligned"] == 0, f"no violations: {c}")
    rep = json.loads(run([ctx.commprof, "report", "--format", "json", out], check_rc=0).stdout)
    types = {t["type"]: t for t in rep["collectives"]}
    a = types["allreduce"]
    expect(a["count"] == iters and a["bytes"] == 0, f"allreduce row {a}")
    expect(a["mean_wait_ns"] == 0 and a["skew_p50_ns"] == 0 and a["skew_p99_ns"] == 0,
           f"zero-byte allreduces charge no wait and no skew: {a}")
    b = types["barrier"]
    expect(b["mean_wait_ns"] > 0, f"the barriers wait for the spread: {b}")
    v = types["alltoallv"]
    expect(v["count"] == iters and v["bytes"] == 0, f"alltoallv row {v}")
    expect(v["skew_p50_ns"] >= 3_000_000 and v["mean_wait_ns"] >= 1_000_000,
           f"the zero-byte alltoallvs wait for the planted 6 ms spread (median skew >= 3 ms, mean wait >= 1 ms): {v}")
    t = types["alltoall"]
    expect(t["count"] == iters and t["mean_wait_ns"] == 0 and t["skew_p50_ns"] == 0,
           f"alltoalls of a size-0 type return at once: zero-byte, no wait, no skew: {t}")
    g = types["allgather"]
    expect(g["count"] == iters and g["bytes"] == 0, f"allgather row {g}")
    expect(g["skew_p50_ns"] >= 3_000_000 and g["mean_wait_ns"] >= 1_000_000,
           f"an allgather of count 1 of a size-0 type waits like any (no zero-byte exemption): {g}")
    expect(all(w["type"] != "allreduce" for w in rep["worst_instances"]), f"worst {rep['worst_instances']}")


def case_finalize_wait(ctx):
    """Rank 1 reaches MPI_Finalize 300 ms after the others, which wait for it in the last clock
    alignment inside MPI_Finalize: that wait is their shutdown (the MPI_FINALIZE event spans the whole
    call), not compute falling between two events."""
    out = ctx.path("finalize_wait.h5")
    iters = 20  # a 1 ms sleep after each allreduce: 20 ms of real compute per rank
    run([ctx.commprof, "run", "-o", out, "--"] + mpirun(3) +
        [ctx.test_program("fault_program"), str(iters), "1", "late", str(iters), "1000"], check_rc=0, timeout=300)
    rep = json.loads(run([ctx.commprof, "report", "--format", "json", out], check_rc=0).stdout)
    time_of = {r["rank"]: r["time"] for r in rep["ranks"]}
    for r in (0, 2):
        t = time_of[r]
        expect(t["shutdown_ns"] >= 250_000_000, f"rank {r} waited about 300 ms in MPI_Finalize: {t}")
        expect(t["compute_ns"] < 200_000_000, f"rank {r} computed about 20 ms, not the 300 ms it waited: {t}")
    t = time_of[1]
    expect(t["compute_ns"] >= 300_000_000, f"rank 1 slept 300 ms before MPI_Finalize (compute): {t}")
    expect(t["shutdown_ns"] < 250_000_000, f"rank 1 was the last to finalize and waited for nobody: {t}")


CASES = {"one_host": case_one_host, "two_hosts": case_two_hosts, "four_hosts": case_four_hosts,
         "zero_byte": case_zero_byte, "finalize_wait": case_finalize_wait}


if __name__ == "__main__":
    sys.exit(run_cases(CASES))
