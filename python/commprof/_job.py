"""A commprof HDF5 file as pandas DataFrames (docs/python.md; the layout is docs/file-format.md)."""
import json
import os

try:
    import h5py
except ImportError as e:  # not declared in pyproject.toml (see there): say what to install
    raise ImportError("commprof needs h5py (Debian: apt install python3-h5py; elsewhere: pip install h5py)") from e
import numpy as np
import pandas as pd

from ._schema import KINDS, OP_KINDS, OPS

# The stored kind and subtype bytes to their names, looked up by numpy indexing.
_KIND_BY_NUMBER = np.array([KINDS.get(k, f"kind {k}") for k in range(256)], dtype=object)
_OP_BY_NUMBER = np.array([OPS.get(o) for o in range(256)], dtype=object)

_EVENT_COLUMNS = ["rank", "kind", "name", "op", "start_ns", "end_ns", "dur_ns", "bytes", "comm_id", "seq", "peer",
                  "thread_id", "device", "subtype", "flags", "correlation", "datatype", "reduce_op"]


class CommprofFileError(Exception):
    """A file that cannot be read as a commprof file, or lacks a part asked for; the message names
    the file and the part."""


def open(path):  # noqa: A001 (the package's entry point reads as commprof.open)
    """Opens a commprof file (a job file with shards included: h5py follows their links)."""
    return Job(path)


def _align(local_ns, points):
    """Local times (int64 ns) on the job's reference clock, exactly as commprof does it
    (core/clock_model.cc): the offset on the piecewise-linear model through `points` (rows of
    local_ns, offset_ns, half_rtt_ns), the end segments extended, computed in long double and rounded
    half away from zero."""
    local = np.asarray(local_ns, dtype=np.int64)
    if len(points) == 0:
        return local.copy()
    pts = np.asarray(points, dtype=np.int64)
    pts = pts[np.argsort(pts[:, 0], kind="stable")]
    if len(pts) == 1:
        return local + pts[0, 1]
    hi = np.searchsorted(pts[:, 0], local, side="right")
    hi = np.clip(hi, 1, len(pts) - 1)
    a_local, a_off = pts[hi - 1, 0], pts[hi - 1, 1]
    b_local, b_off = pts[hi, 0], pts[hi, 1]
    same = a_local == b_local
    span = np.where(same, 1, b_local - a_local).astype(np.longdouble)
    slope = (b_off - a_off).astype(np.longdouble) / span
    x = slope * (local - a_local).astype(np.longdouble)
    step = (np.sign(x) * np.floor(np.abs(x) + np.longdouble(0.5))).astype(np.int64)
    offset = np.where(same, a_off, a_off + step)
    return local + offset


class Job:
    """One job's file. `ranks`: the ranks with data, ascending; `world_size`; `clock`: per rank its
    clock model's summary; `missing`: ranks below world_size without data; `incarnation` and
    `restart_files`: torch elastic restarts (the later incarnations' files, `commprof.open` each)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise FileNotFoundError(f"{self.path}: no such file")
        try:
            self._f = h5py.File(self.path, "r")
        except OSError as e:
            raise CommprofFileError(f"{self.path}: not readable as HDF5 ({e})") from e
        attrs = self._f.attrs
        if attrs.get("format") not in ("commprof", b"commprof"):
            self._f.close()
            raise CommprofFileError(f"{self.path}: an HDF5 file, but not a commprof file (no root attribute 'format')")
        self.job_id = _text(attrs.get("job_id", ""))
        self.world_size = int(attrs.get("world_size", 0))
        self.start_epoch_ns = int(attrs.get("start_epoch_ns", 0))
        # Elastic restarts (docs/torchrun.md#elastic-restarts): this file's incarnation (0: the first),
        # and in the first's file the paths of the later incarnations' files beside it.
        self.incarnation = int(attrs.get("incarnation", 0))
        here = os.path.dirname(self.path)
        self.restart_files = [os.path.join(here, n) for n in _text(attrs.get("restart_files", "")).split(",") if n]
        ranks_group = self._f.get("ranks")
        names = list(ranks_group.keys()) if ranks_group is not None else []
        self.ranks = sorted(int(n) for n in names if n.isdigit() and "events" in ranks_group[n])
        self.missing = sorted(set(range(self.world_size)) - set(self.ranks))
        self._points = {}
        rows = []
        for r in self.ranks:
            g = ranks_group[str(r)]
            self._points[r] = g["clock_points"][()] if "clock_points" in g else np.zeros((0, 3), np.int64)
            rows.append({"rank": r, "host": _text(g.attrs.get("host", "")), "pid": int(g.attrs.get("pid", 0)),
                         "status": _text(g.attrs.get("status", "")),
                         "offset_ns": int(g.attrs.get("clock_offset_ns", 0)),
                         "drift_ppm": float(g.attrs.get("clock_drift_ppm", 0.0)),
                         "error_bound_ns": int(g.attrs.get("clock_error_bound_ns", -1)),
                         "method": _text(g.attrs.get("clock_method", "")), "points": len(self._points[r])})
        self.clock = pd.DataFrame(rows, columns=["rank", "host", "pid", "status", "offset_ns", "drift_ppm",
                                                 "error_bound_ns", "method", "points"]).set_index("rank")

    def close(self):
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<commprof.Job {self.path!r}: job {self.job_id!r}, {len(self.ranks)} of {self.world_size} ranks>"

    def strings(self, rank):
        """The rank's string table (what events' name_id indexes)."""
        g = self._rank_group(rank)
        if "strings" not in g:
            return []
        return [s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s) for s in g["strings"][()]]

    def events(self, ranks=None, kinds=None, aligned=True):
        """One row per event of the given ranks (all by default): `kind` and `op` as categoricals of
        their names, `name` resolved from the rank's string table, times in ns on the job's reference
        clock (`aligned=False`: as each rank's own clock read them), `dur_ns` = end - start. `kinds`:
        names ("mpi_collective") or numbers."""
        ranks = self.ranks if ranks is None else [int(r) for r in ranks]
        wanted = None
        if kinds is not None:
            wanted = set()
            for k in ([kinds] if isinstance(kinds, (str, int)) else kinds):
                if isinstance(k, str):
                    number = {name: n for n, name in KINDS.items()}.get(k)
                    if number is None:
                        raise ValueError(f"unknown event kind {k!r} (kinds: {', '.join(KINDS.values())})")
                    wanted.add(number)
                else:
                    wanted.add(int(k))
        frames = []
        for r in ranks:
            ev = self._rank_group(r)["events"][()]
            if wanted is not None:
                ev = ev[np.isin(ev["kind"], list(wanted))]
            names = np.array(self.strings(r) or [""], dtype=object)
            name_id = ev["name_id"].astype(np.int64)
            start = ev["start_ns"].astype(np.int64)
            end = ev["end_ns"].astype(np.int64)
            if aligned:
                start, end = _align(start, self._points[r]), _align(end, self._points[r])
            kind = ev["kind"].astype(np.int64)
            kn = _KIND_BY_NUMBER[kind]
            has_op = np.isin(kn, list(OP_KINDS))
            frames.append(pd.DataFrame({
                "rank": np.full(len(ev), r, dtype=np.int64),
                "kind": kn,
                "name": np.where(name_id < len(names), names[np.minimum(name_id, len(names) - 1)], ""),
                "op": np.where(has_op, _OP_BY_NUMBER[ev["subtype"].astype(np.int64)], None),
                "start_ns": start, "end_ns": end, "dur_ns": end - start,
                "bytes": ev["bytes"], "comm_id": ev["comm_id"], "seq": ev["seq"], "peer": ev["peer"],
                "thread_id": ev["thread_id"], "device": ev["device"], "subtype": ev["subtype"],
                "flags": ev["flags"], "correlation": ev["correlation"], "datatype": ev["datatype"],
                "reduce_op": ev["reduce_op"]}))
        df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=_EVENT_COLUMNS)
        df["kind"] = pd.Categorical(df["kind"], categories=list(KINDS.values()))
        df["op"] = pd.Categorical(df["op"], categories=list(OPS.values()))
        df["name"] = df["name"].astype("category")
        return df[_EVENT_COLUMNS]

    # The stored analysis (`commprof run` writes it; `commprof report --save FILE` rewrites it).
    def report(self):
        """The cross-rank report as a dict: the JSON of `commprof report --format json`
        (docs/report-json.md), as stored in /analysis/report_json."""
        value = self._analysis("report_json")[()]
        return json.loads(value.decode("utf-8") if isinstance(value, bytes) else value)

    def instances(self):
        """The matched collective instances (/analysis/instances), `op` as its name."""
        return self._table("instances", op_columns=("op",))

    def arrivals(self):
        """Every rank's arrival at every instance (/analysis/arrivals): `instance` is the row of
        instances()."""
        return self._table("arrivals")

    def rank_table(self):
        """Per-rank figures (/analysis/ranks): wait, transfer, overlap, time breakdown."""
        return self._table("ranks")

    def memory(self):
        """Bytes in use over time per rank, device and memory kind (/analysis/memory)."""
        return self._table("memory")

    def steps(self):
        """Per step and rank (/analysis/steps); empty when no rank marked steps."""
        return self._table("steps")

    def _rank_group(self, rank):
        r = int(rank)
        if r not in self.ranks:
            raise KeyError(f"{self.path}: no data for rank {r} (ranks with data: {_ranges(self.ranks)})")
        return self._f["ranks"][str(r)]

    def _analysis(self, name):
        a = self._f.get("analysis")
        if a is None or name not in a:
            raise CommprofFileError(f"{self.path}: no /analysis/{name} (run `commprof report --save {self.path}` to "
                                    f"store the analysis)")
        return a[name]

    def _table(self, name, op_columns=()):
        data = self._analysis(name)[()]
        df = pd.DataFrame({c: data[c] for c in data.dtype.names}) if data.dtype.names else pd.DataFrame()
        for c in df.columns:
            if df[c].dtype == object or df[c].dtype.kind == "S":
                df[c] = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in df[c]]
        for c in op_columns:
            if c in df.columns:
                df[c] = pd.Categorical([OPS.get(int(v)) for v in df[c]], categories=list(OPS.values()))
        return df


def _text(v):
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _ranges(ranks):
    out, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            out.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ",".join(out) or "none"


