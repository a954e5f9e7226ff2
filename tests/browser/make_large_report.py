#!/usr/bin/env python3
"""Writes a deterministic report JSON (schema_version 3) for a job of N ranks and B lateness bins
with a planted persistent straggler, a transient late rank and one bin with no instance. The
browser test renders it to check the page at a realistic size (and, past 256 ranks, the banded
heat map)."""
import argparse
import json
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--bins", type=int, default=40)
    ap.add_argument("--straggler", type=int, default=5)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    rnd = random.Random(1234)
    n, bins, s = a.ranks, a.bins, a.straggler
    transient = n // 3 if n // 3 != s else n // 3 + 1
    gap = bins // 4          # a pause (checkpoint): no instance on any rank
    hot = range(bins // 2, bins // 2 + 4)  # the transient rank is late here
    per_bin = 25
    matched = per_bin * (bins - 1)
    start = 7_000_000_000
    bin_ns = 50_000_000
    ranks, late_rows, clock = [], [], []
    for r in range(n):
        comm = 40_000_000 + rnd.randint(-2_000_000, 2_000_000)
        wait = 2_000_000 if r == s else int(comm * rnd.uniform(0.65, 0.8))
        last = 0
        ml, tl = [], []
        for b in range(bins):
            if b == gap:
                ml.append(None)
                tl.append(0)
                continue
            if r == s:
                ml.append(rnd.randint(300_000, 600_000))
                tl.append(per_bin - 2)
            elif r == transient and b in hot:
                ml.append(rnd.randint(200_000, 260_000))
                tl.append(2)
            else:
                ml.append(rnd.randint(0, 30_000))
                tl.append(0)
            last += tl[-1]
        span = bins * bin_ns
        exposed = int(comm * rnd.uniform(0.5, 0.8))
        memory = rnd.randint(10_000_000, 60_000_000)
        idle = rnd.randint(10_000_000, 120_000_000)
        ranks.append({
            "rank": r, "host": "node-%03d" % (r // 8), "pid": 10000 + r,
            "comm_time_ns": comm, "wait_time_ns": wait, "wait_share": wait / comm, "times_last": last,
            "delay_caused_ns": last * 300_000, "wait_imposed_ns": last * 300_000 * (n - 1),
            "instances": matched, "transfer_time_ns": comm - wait,
            "overlap": round(1 - exposed / comm, 4), "exposed_comm_ns": exposed, "overlap_basis": "cpu-outside-mpi",
            "breakdown": {"span_ns": span, "compute_ns": span - exposed - memory - idle, "exposed_comm_ns": exposed,
                          "memory_ns": memory, "idle_ns": idle},
            "p2p": {"sent": 100, "received": 100, "late_sender_wait_ns": rnd.randint(0, 1_000_000),
                    "late_receiver_wait_ns": rnd.randint(0, 500_000)}})
        late_rows.append({"rank": r, "mean_lateness_ns": ml, "times_last": tl})
        clock.append({"rank": r, "clock_offset_ns": 0 if r == 0 else rnd.randint(-50_000, 50_000),
                      "clock_drift_ppm": 0.0 if r == 0 else round(rnd.uniform(-3, 3), 3),
                      "clock_error_bound_ns": 0 if r == 0 else rnd.randint(100, 3000),
                      "clock_method": "mpi-reference" if r == 0 else "mpi-pingpong"})
    report = {
        "schema": "commprof-report", "schema_version": 3, "path": "/scratch/large-%d.h5" % n,
        "job_id": "large-%d" % n, "world_size": n,
        "instances": {"matched": matched, "incomplete": 0, "incomplete_list": []},
        "skew_threshold_ns": 6000, "ranks": ranks,
        "collectives": [{"type": "allreduce", "count": matched, "bytes": 16 << 20, "mean_duration_ns": 1.6e6,
                         "mean_wait_ns": 1.2e6, "mean_transfer_ns": 4e5, "skew_p50_ns": 450_000,
                         "skew_p99_ns": 610_000, "algbw_gbps": 41.9, "busbw_gbps": 2 * (n - 1) / n * 41.9}],
        "worst_instances": [{"comm_id": 1, "seq": k * 7, "type": "allreduce", "bytes": 16 << 20,
                             "start_ns": start + k * 7 * bin_ns // per_bin, "skew_ns": 600_000 - k * 1000,
                             "last_rank": s, "delay_caused_ns": 500_000 - k * 1000,
                             "total_wait_ns": (600_000 - k * 1000) * (n - 1)} for k in range(10)],
        "p2p": {"matched": 100 * n, "unmatched_sends": 0, "unmatched_recvs": 0,
                "late_sender_wait_ns": 12_000_000, "late_receiver_wait_ns": 3_000_000},
        "delay": {"total_wait_ns": ranks[s]["delay_caused_ns"] * (n - 1),
                  "attributed_ns": ranks[s]["delay_caused_ns"] * (n - 1), "unattributed_ns": 0},
        "stragglers": [{"rank": s, "host": "node-%03d" % (s // 8), "delay_cost_ns": ranks[s]["delay_caused_ns"] * (n - 1),
                        "direct_ns": ranks[s]["delay_caused_ns"] * (n - 1), "propagated_ns": 0, "share": 1.0,
                        "pattern": "persistent", "cause": "compute",
                        "communicators": [{"comm_id": 1, "name": "MPI_COMM_WORLD", "size": n,
                                           "members": list(range(n)), "delay_cost_ns": ranks[s]["delay_caused_ns"]}]}],
        "lateness": {"start_ns": start, "bin_ns": bin_ns, "bins": bins, "ranks": late_rows},
        "clock": {"violations": 0, "instances_checked": matched, "ranks": clock},
    }
    with open(a.output, "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
