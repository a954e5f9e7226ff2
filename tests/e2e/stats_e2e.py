#!/usr/bin/env python3
"""`commprof stats` on real files (docs/metrics.md §12, docs/stats-json.md).

straggler: a real 4-rank mpirun job of examples/mpi_straggler, ITERS blocking MPI_Allreduce calls
    per rank, rank 2 planted to compute SLOW_US longer before each. Truth: MPI_Allreduce has
    ITERS x 4 calls (ITERS on every rank) and two MPI_Barrier calls per rank (the program's
    documented sequence); each rank's MPI_Allreduce total equals the sum of its events'
    end - start read with h5py (exact); the other ranks' totals exceed the straggler's by what it
    was late in this run (its extra time between calls, measured from the raw entries, +-15 %)
    and at least 85 % of the plant; the straggler has the smallest total.
kineto: a shipped torch.profiler trace (../shared/data/kineto/hta-trace-filter-2rank) imported
    with `commprof import kineto`: aten::mm's calls and total per rank equal the raw JSON's
    cpu_op events (python json), and aten::linear's self time equals the JSON's duration less its
    direct children's (cpu_op and user_annotation, same thread), within rounding to ns. Skipped
    (exit 77, naming the path) when the data is absent.
shapes: a real 4-rank job of stats_shapes_program, SHAPES_ITERS iterations (more calls per row
    than the exact-percentile limit): an MPI_Allreduce and MPI_Bcast on a sub-communicator of
    MPI_Comm_split, an MPI_Sendrecv halo, MPI_Isend/MPI_Irecv/MPI_Iallreduce completed by one
    MPI_Waitall. Truth from the raw events read with h5py: calls (an MPI_Sendrecv once, its
    receive half not counted), bytes, totals per rank (exact), min/max (exact), nearest-rank
    p50/p99 within 1 % (the histogram regime), imbalance = max/mean of the per-rank totals; --by
    comm splits MPI_Allreduce into the two halves' communicators, SHAPES_ITERS x 2 calls each.

    stats_e2e.py CASE --build build/release --work DIR
"""
import gzip
import json
import os
import sys

import h5py
import numpy as np

from e2e_support import case_arguments, expect, mpirun, run

ITERS, SLOW_RANK, SLOW_US = 100, 2, 3000
SKIP = "skip"


def stats_json(ctx, path, *args):
    p = run([ctx.commprof, "stats", path, "--format", "json"] + list(args), check_rc=0)
    doc = json.loads(p.stdout)
    expect(doc["schema"] == "commprof-stats" and doc["schema_version"] == 1, "stats header")
    return doc


def rows_named(doc, name):
    return [r for r in doc["rows"] if r["name"] == name]


def calls_of(f, rank, name):
    g = f["ranks"][str(rank)]
    names = g["strings"].asstr()[...]
    ids = [i for i, s in enumerate(names) if s == name]
    ev = g["events"][...]
    return ev[np.isin(ev["name_id"], ids)]


def case_straggler(ctx):
    out = ctx.path("straggler.h5")
    # Sleeping compute and yielding waits: 4 ranks on 2 cores do not steal each other's CPU.
    run([ctx.commprof, "run", "-o", out, "--"] + mpirun(4) +
        [ctx.example, "--iters", str(ITERS), "--compute-us", "1000", "--slow-rank", str(SLOW_RANK), "--slow-us",
         str(SLOW_US), "--collective", "allreduce", "--bytes", "4096", "--compute", "sleep"],
        env={"OMPI_MCA_mpi_yield_when_idle": "1"}, check_rc=0, timeout=300)
    doc = stats_json(ctx, out, "--kinds", "mpi")
    expect(doc["ranks_read"] == [0, 1, 2, 3], f"ranks {doc['ranks_read']}")
    [ar] = rows_named(doc, "MPI_Allreduce")
    expect(ar["calls"] == ITERS * 4, f"MPI_Allreduce calls {ar['calls']}, the program made {ITERS} x 4")
    expect([p["calls"] for p in ar["per_rank"]] == [ITERS] * 4, f"per rank {ar['per_rank']}")
    expect(ar["bytes"] == ITERS * 4 * 4096, f"bytes {ar['bytes']}")
    [barrier] = rows_named(doc, "MPI_Barrier")
    expect(barrier["calls"] == 2 * 4, f"MPI_Barrier calls {barrier['calls']}")
    totals = {p["rank"]: p["total_ns"] for p in ar["per_rank"]}
    with h5py.File(out, "r") as f:
        gaps = {}
        for r in range(4):
            ev = np.sort(calls_of(f, r, "MPI_Allreduce"), order="start_ns")
            raw = int((ev["end_ns"].astype(np.int64) - ev["start_ns"].astype(np.int64)).sum())
            expect(raw == totals[r], f"rank {r}: stats total {totals[r]} ns, h5py sum {raw} ns")
            # its time outside the collective per iteration: what it computed or slept in this run
            gaps[r] = float((ev["start_ns"][1:].astype(np.int64) - ev["end_ns"][:-1].astype(np.int64)).mean())
    expect(min(totals, key=totals.get) == SLOW_RANK, f"the straggler waits least: {totals}")
    for r in range(4):
        if r == SLOW_RANK:
            continue
        extra = (totals[r] - totals[SLOW_RANK]) / ITERS  # what rank r waited for it, per iteration
        late = gaps[SLOW_RANK] - gaps[r]                  # what it was late, as it happened
        expect(abs(extra - late) <= 0.15 * late and extra >= 0.85 * SLOW_US * 1000,
               f"rank {r}: MPI_Allreduce {extra / 1e6:.3f} ms per iteration more than the straggler; it was late "
               f"{late / 1e6:.3f} ms (planted {SLOW_US / 1000} ms); +-15 %")
    # The same figures by rank, and the text table within 100 columns.
    by_rank = stats_json(ctx, out, "--kinds", "mpi", "--by", "rank")
    mine = {r["rank"]: r["total_ns"] for r in rows_named(by_rank, "MPI_Allreduce")}
    expect(mine == totals, f"--by rank {mine} vs per_rank {totals}")
    text = run([ctx.commprof, "stats", out, "--by", "rank,size", "--top", "0"], check_rc=0).stdout
    expect(all(len(line) <= 100 for line in text.splitlines()), "text wider than 100 columns:\n" + text)
    expect(sum(1 for line in text.splitlines() if line.startswith("MPI_Allreduce")) == 4, text)


SHAPES_ITERS = 2000


def raw_rows(path):
    """name -> rank -> (durations in ns, bytes) of its events, from the file itself (receive halves
    of MPI_Sendrecv apart, as stats counts them)."""
    rows = {}
    with h5py.File(path, "r") as f:
        for r in f["ranks"]:
            g = f["ranks"][r]
            names = g["strings"].asstr()[...]
            ev = g["events"][...]
            ev = ev[(ev["flags"] & 16) == 0]  # COMMPROF_FLAG_RECV_HALF
            for nid in np.unique(ev["name_id"]):
                x = ev[ev["name_id"] == nid]
                d = x["end_ns"].astype(np.int64) - x["start_ns"].astype(np.int64)
                rows.setdefault(names[nid], {})[int(r)] = (d, int(x["bytes"].astype(np.int64).sum()))
    return rows


def case_shapes(ctx):
    out = ctx.path("shapes.h5")
    run([ctx.commprof, "run", "-o", out, "--"] + mpirun(4) +
        [ctx.test_program("stats_shapes_program"), "--iters", str(SHAPES_ITERS)],
        env={"OMPI_MCA_mpi_yield_when_idle": "1"}, check_rc=0, timeout=300)
    doc = stats_json(ctx, out, "--kinds", "mpi")
    raw = raw_rows(out)
    for name in ("MPI_Allreduce", "MPI_Sendrecv", "MPI_Irecv", "MPI_Isend", "MPI_Iallreduce", "MPI_Waitall",
                 "MPI_Bcast"):
        [row] = rows_named(doc, name)
        expect(row["calls"] == SHAPES_ITERS * 4, f"{name}: {row['calls']} calls, the program made {SHAPES_ITERS * 4}")
        durations = np.sort(np.concatenate([d for d, _ in raw[name].values()]))
        k = len(durations)
        expect(row["total_ns"] == int(durations.sum()), f"{name}: total {row['total_ns']} vs {durations.sum()}")
        expect(row["min_ns"] == durations[0] and row["max_ns"] == durations[-1], f"{name}: min/max")
        # a Wait's `bytes` field counts its requests (file-format.md): no bytes moved
        moved = 0 if name == "MPI_Waitall" else sum(b for _, b in raw[name].values())
        expect(row["bytes"] == moved, f"{name}: bytes {row['bytes']}, moved {moved}")
        expect(not row["percentiles_exact"], f"{name}: {k} calls are past the exact limit")
        for q, key in ((0.5, "p50_ns"), (0.99, "p99_ns")):
            exact = int(durations[int(np.ceil(q * k)) - 1])
            expect(abs(row[key] - exact) <= 0.01 * exact + 1, f"{name}: {key} {row[key]}, exact {exact} (+-1 %)")
        totals = {r: int(d.sum()) for r, (d, _) in raw[name].items()}
        expect({p["rank"]: p["total_ns"] for p in row["per_rank"]} == totals, f"{name}: per rank")
        imbalance = max(totals.values()) / (sum(totals.values()) / 4)
        expect(abs(row["imbalance"] - imbalance) <= 1e-9 * imbalance,
               f"{name}: imbalance {row['imbalance']} vs {imbalance}")
    [sendrecv] = rows_named(doc, "MPI_Sendrecv")
    expect(sendrecv["bytes"] == SHAPES_ITERS * 4 * 128 * 8, f"MPI_Sendrecv bytes {sendrecv['bytes']}: those sent")
    by_comm = stats_json(ctx, out, "--kinds", "mpi", "--by", "comm")
    halves = rows_named(by_comm, "MPI_Allreduce")
    expect(len(halves) == 2 and all(h["calls"] == SHAPES_ITERS * 2 for h in halves),
           f"--by comm: {[(h['comm'], h['calls']) for h in halves]}")
    expect(len({h["comm"] for h in halves}) == 2, "two communicators")
    for h in halves:
        expect(sorted(p["rank"] for p in h["per_rank"]) in ([0, 2], [1, 3]), f"members {h['per_rank']}")
    text = run([ctx.commprof, "stats", out, "--by", "comm,size", "--top", "0"], check_rc=0).stdout
    expect(all(len(line) <= 100 for line in text.splitlines()), "text wider than 100 columns:\n" + text)


def direct_children_self(events):
    """Self time per event index of nested (ts, dur) spans of one thread: dur less the direct
    children's, by the same rule as docs/metrics.md §12.2, computed here from the raw JSON."""
    order = sorted(range(len(events)), key=lambda i: (events[i]["ts"], -events[i]["dur"]))
    self_us = {i: events[i]["dur"] for i in order}
    stack = []
    for i in order:
        s, e = events[i]["ts"], events[i]["ts"] + events[i]["dur"]
        while stack and events[stack[-1]]["ts"] + events[stack[-1]]["dur"] <= s:
            stack.pop()
        if stack:
            p = stack[-1]
            self_us[p] -= min(e, events[p]["ts"] + events[p]["dur"]) - s
        stack.append(i)
    return self_us


def case_kineto(ctx):
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    trace = os.path.join(os.path.dirname(repo), "shared", "data", "kineto", "hta-trace-filter-2rank")
    if not os.path.isdir(trace):
        print(f"kineto: Kineto test data not found: {trace}")
        return SKIP
    h5 = ctx.path("tf.h5")
    run([ctx.commprof, "import", "kineto", trace, "-o", h5, "-q"], check_rc=0)
    doc = stats_json(ctx, h5, "--kinds", "torch")
    [mm] = rows_named(doc, "aten::mm")
    [linear] = rows_named(doc, "aten::linear")
    expect(mm["category"] == "torch", f"{mm['category']}")
    linear_self_us, linear_calls = 0.0, 0
    for r in (0, 1):
        events = json.load(gzip.open(os.path.join(trace, f"sampled_rank-{r}.json.gz")))["traceEvents"]
        ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e["name"] == "aten::mm"]
        [share] = [p for p in mm["per_rank"] if p["rank"] == r]
        expect(share["calls"] == len(ops), f"rank {r}: aten::mm calls {share['calls']}, the JSON has {len(ops)}")
        raw_ns = sum(e["dur"] for e in ops) * 1000
        expect(abs(share["total_ns"] - raw_ns) <= len(ops), f"rank {r}: aten::mm {share['total_ns']} ns, JSON {raw_ns}")
        nested = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
        for tid in {e["tid"] for e in nested}:
            spans = [e for e in nested if e["tid"] == tid]
            for i, s in direct_children_self(spans).items():
                if spans[i]["name"] == "aten::linear" and spans[i].get("cat") == "cpu_op":
                    linear_self_us += s
                    linear_calls += 1
    expect(linear["calls"] == linear_calls, f"aten::linear calls {linear['calls']}, JSON {linear_calls}")
    # ns rounding: each span's start and end are rounded once; a linear has a few children
    expect(abs(linear["self_ns"] - linear_self_us * 1000) <= 4 * linear_calls,
           f"aten::linear self {linear['self_ns']} ns, from the JSON {linear_self_us * 1000:.0f} ns")
    expect(linear["self_ns"] < linear["total_ns"], "aten::linear has children")


CASES = {"straggler": case_straggler, "kineto": case_kineto, "shapes": case_shapes}


def main():
    a, ctx = case_arguments(CASES)
    if CASES[a.case](ctx) == SKIP:
        return 77  # ctest SKIP_RETURN_CODE
    print(f"{a.case}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
