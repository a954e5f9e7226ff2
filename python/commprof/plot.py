"""Plots of a job for Jupyter (matplotlib): where people would rather look than read. Each takes a
commprof.Job (and an optional matplotlib Axes) and returns the Axes it drew on."""
import numpy as np


def _axes(ax, **fig_kw):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt
    return plt.subplots(**fig_kw)[1]


def wait_bars(job, ax=None):
    """Per rank, horizontal bars of its time in collectives: the part spent waiting for the other
    ranks, then the rest (the transfer); from the stored per-rank table."""
    t = job.rank_table().sort_values("rank")
    ax = _axes(ax, figsize=(8, max(2.0, 0.3 * len(t) + 1)))
    wait = t["wait_time_ns"].to_numpy() / 1e6
    rest = np.maximum(t["comm_time_ns"].to_numpy() / 1e6 - wait, 0)
    y = np.arange(len(t))
    ax.barh(y, wait, color="#e4572e", label="waiting for other ranks")
    ax.barh(y, rest, left=wait, color="#4c78a8", label="rest of the call (transfer)")
    ax.set_yticks(y, [str(r) for r in t["rank"]])
    ax.invert_yaxis()
    ax.set_xlabel("time in collectives (ms)")
    ax.set_ylabel("rank")
    ax.legend(loc="lower right")
    return ax


def lateness_heatmap(job, ax=None):
    """The report's lateness over time: one row per rank, one column per time bin, colour = the
    rank's mean lateness in the bin (ms); grey where it had no instance."""
    lat = job.report().get("lateness") or {}
    ranks = lat.get("ranks") or []
    ax = _axes(ax, figsize=(9, max(2.0, 0.3 * len(ranks) + 1)))
    if not ranks:
        ax.set_title("no lateness data")
        return ax
    grid = np.array([[np.nan if v is None else v / 1e6 for v in r.get("mean_lateness_ns", [])] for r in ranks],
                    dtype=float)
    image = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", cmap="YlOrRd", interpolation="nearest")
    image.cmap.set_bad("#eceef1")
    ax.set_yticks(range(len(ranks)), [str(r.get("rank")) for r in ranks])
    ax.set_xlabel(f"time bin ({lat.get('bin_ns', 0) / 1e6:g} ms each)")
    ax.set_ylabel("rank")
    ax.figure.colorbar(image, ax=ax, label="mean lateness (ms)")
    return ax


def memory_timeline(job, rank=None, ax=None):
    """Bytes in use over time (GiB) per rank and device (`rank`: one rank), from the stored
    memory table; a step line per series."""
    m = job.memory()
    if rank is not None:
        m = m[m["rank"] == int(rank)]
    ax = _axes(ax, figsize=(9, 3.5))
    if m.empty:
        ax.set_title("no allocation records")
        return ax
    t0 = m["time_ns"].min()
    for (r, device, kind), s in m.groupby(["rank", "device", "memory_kind"], sort=True):
        s = s.sort_values("time_ns", kind="stable")
        ax.step((s["time_ns"] - t0) / 1e6, s["bytes_in_use"] / 2**30, where="post",
                label=f"rank {r} device {device} kind {kind}")
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("in use (GiB)")
    ax.legend(fontsize="small")
    return ax
