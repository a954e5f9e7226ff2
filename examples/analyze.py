#!/usr/bin/env python3
"""A first look at a commprof file from Python (docs/python.md): who waited, who was late, what
the ranks were doing, with the three plots saved next to the file.

    PYTHONPATH=python python3 examples/analyze.py job.h5
"""
import sys

import matplotlib

matplotlib.use("Agg")  # files, not windows: drop this line in a notebook

import commprof  # noqa: E402


def main(path):
    with commprof.open(path) as job:
        print(job)
        report = job.report()
        for s in report["stragglers"]:
            print(f"straggler: rank {s['rank']} on {s['host']}, delay cost {s['delay_cost_ns'] / 1e6:.1f} ms "
                  f"({100 * s['share']:.0f}% of the waiting), {s['pattern']}")
        if not report["stragglers"]:
            print("no straggler")
        ranks = job.rank_table().set_index("rank")
        print(ranks[["comm_time_ns", "wait_time_ns", "wait_share"]].sort_values("wait_share", ascending=False).head())
        ev = job.events(kinds=["mpi_collective", "nccl_collective"])
        per_op = ev.groupby(["op", "rank"], observed=True)["dur_ns"].sum().unstack() / 1e6
        print("time in collectives (ms) by operation and rank:")
        print(per_op.round(2).to_string())
        for name, plot in (("wait", commprof.plot.wait_bars), ("lateness", commprof.plot.lateness_heatmap),
                           ("memory", commprof.plot.memory_timeline)):
            ax = plot(job)
            out = f"{path}.{name}.png"
            ax.figure.savefig(out, dpi=110, bbox_inches="tight")
            print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
