#!/usr/bin/env python3
"""Compressed events tables (docs/file-format.md#compression) on real Open MPI jobs, read back by
h5py (Debian's hdf5-filter-plugin and the hdf5plugin package, two LZ4 decoders that are not ours)
and h5dump.

Usage: compression_e2e.py CASE --build BUILD_DIR --work WORK_DIR

Cases and their truth:
  default_lz4  `commprof run` with no option: every events table has HDF5's shuffle filter and then
               LZ4 (filter 32004). For MPI-heavy jobs of 2, 4 and 8 ranks (10000, 5000 and 2000
               allreduce iterations of 8 bytes each) the events tables take at most 16 bytes per
               row (64 uncompressed) and the whole file, /analysis included, at most 48 bytes per
               event. (Timestamps compress worse when the machine is loaded: 4 ranks measured 5.3
               bytes per row and 28 per event on an idle 2-core VM, 7.7 and 37 with other work on
               it; the typical figures are benchmarks, bench/README.md#compression.) h5py through the system plugin and through hdf5plugin
               reads every table with exactly events_written rows, the two agree byte for byte, and
               the rows are the job's: one MPI_Allreduce event per iteration and rank, with
               consecutive seq numbers. h5dump prints rows. commprof itself reads the file with no plugin
               reachable (HDF5_PLUGIN_PATH an empty directory): it carries its own codec.
  codecs       --compression none (no filter), deflate:3 (shuffle + deflate, level 3), the older
               --deflate 2 and --deflate 0: the tables say so, hold the same number of events as the
               job made, and commprof reads each. A bad codec, and --deflate with --compression,
               are usage errors (exit 2) that name the value, run nothing and create no file.
  foreign_plugin  commprof links HDF5 statically (core/CMakeLists.txt): a copy of a recorded file
               whose events tables h5repack re-filtered with Debian's bzip2 plugin (filter 307, a
               plugin linked to the shared libhdf5) is read through that plugin: `commprof report
               --format json` and `commprof info --json` say exactly what they say of the original.
               Exits 77 (skipped), naming the reason, where h5repack cannot apply the filter.
"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np

from e2e_support import expect, mpirun, run, run_cases

KIND_MPI_COLLECTIVE = 3
FILTER_DEFLATE = 1
FILTER_SHUFFLE = 2
FILTER_LZ4 = 32004


def record(ctx, out, ranks, iters, *options):
    cmd = [ctx.commprof, "run", "-q", *options, "-o", out, "--", *mpirun(ranks), ctx.example, "--iters", str(iters),
           "--bytes", "8", "--compute-us", "20"]
    run(cmd, timeout=300, check_rc=0)


def filters(dset):
    plist = dset.id.get_create_plist()
    return [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]


def events_written(f):
    return {int(k): int(f["ranks"][k].attrs["events_written"]) for k in f["ranks"]}


# Reads every rank's events table in a separate Python: the decoder is chosen before h5py loads.
READER = """
import sys, numpy as np
{prelude}
import h5py
with h5py.File(sys.argv[1], "r") as f:
    for k in sorted(f["ranks"], key=int):
        np.save(sys.argv[2] + "-" + k + ".npy", f["ranks"][k]["events"][...])
        np.save(sys.argv[2] + "-" + k + "-strings.npy", np.array(f["ranks"][k]["strings"].asstr()[...], dtype=object),
                allow_pickle=True)
"""


def read_tables(ctx, path, tag, prelude, env=None):
    base = ctx.path(tag)
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run([sys.executable, "-c", READER.format(prelude=prelude), path, base], env=full_env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    expect(p.returncode == 0, f"h5py ({tag}) cannot read {path}:\n{p.stderr}")
    out = {}
    with h5py.File(path, "r") as f:
        for k in f["ranks"]:
            out[int(k)] = (np.load(f"{base}-{k}.npy"), np.load(f"{base}-{k}-strings.npy", allow_pickle=True))
    return out


def allreduces(events, strings):
    """The rank's MPI_Allreduce events (kind 3 named so)."""
    coll = events[events["kind"] == KIND_MPI_COLLECTIVE]
    return coll[np.array([strings[i] == "MPI_Allreduce" for i in coll["name_id"]], dtype=bool)]


def info_without_plugins(ctx, path):
    empty = ctx.path("no-plugins")
    os.makedirs(empty, exist_ok=True)
    p = run([ctx.commprof, "info", "--json", path], env={"HDF5_PLUGIN_PATH": empty}, check_rc=0)
    return json.loads(p.stdout)


def case_default_lz4(ctx):
    for ranks, iters in ((2, 10000), (4, 5000), (8, 2000)):
        out = ctx.path(f"lz4-{ranks}.h5")
        record(ctx, out, ranks, iters)
        with h5py.File(out, "r") as f:
            written = events_written(f)
            expect(sorted(written) == list(range(ranks)), f"{out}: ranks {sorted(written)}")
            for r in range(ranks):
                got = filters(f["ranks"][str(r)]["events"])
                expect(got == [FILTER_SHUFFLE, FILTER_LZ4], f"{out} rank {r}: filters {got}, expected shuffle + LZ4")
        total = sum(written.values())
        per_event = os.path.getsize(out) / total
        print(f"{ranks} ranks x {iters} iterations: {total} events, {per_event:.1f} bytes/event on disk")
        expect(per_event <= 48, f"{out}: {per_event:.1f} bytes per event on disk, at most 48 expected")
        with h5py.File(out, "r") as f:
            table_bytes = sum(f["ranks"][str(r)]["events"].id.get_storage_size() for r in range(ranks))
        expect(table_bytes / total <= 16, f"{out}: events tables take {table_bytes / total:.1f} bytes per row, "
               "at most 16 expected (64 uncompressed)")

        system = read_tables(ctx, out, f"system-{ranks}", "")
        other = read_tables(ctx, out, f"hdf5plugin-{ranks}", "import hdf5plugin")
        info = info_without_plugins(ctx, out)
        for r in range(ranks):
            (a, strings), (b, _) = system[r], other[r]
            expect(len(a) == written[r], f"rank {r}: h5py read {len(a)} rows, events_written {written[r]}")
            expect(a.tobytes() == b.tobytes(), f"rank {r}: the two LZ4 decoders disagree")
            ar = allreduces(a, strings)
            expect(len(ar) == iters, f"rank {r}: {len(ar)} MPI_Allreduce events, the job made {iters}")
            seq = np.sort(ar["seq"])
            expect(bool(np.all(np.diff(seq) == 1)), f"rank {r}: allreduce seq numbers are not consecutive")
            expect(bool(np.all(a["end_ns"] >= a["start_ns"])), f"rank {r}: end before start")
            mine = info["ranks"][r]
            expect(mine["event_count"] == written[r] and mine["events_by_name"]["MPI_Allreduce"] == iters,
                   f"commprof info (no plugin) rank {r}: {mine['event_count']} events, {mine['events_by_name']}")

    dump = run(["h5dump", "-d", "/ranks/1/events", "-s", "0", "-c", "3", out], check_rc=0)
    expect(dump.stdout.count("start_ns") >= 1 and "(2):" in dump.stdout, f"h5dump rows:\n{dump.stdout[:2000]}")


def case_codecs(ctx):
    ranks, iters = 2, 500
    for options, want in ((["--compression", "none"], []),
                          (["--compression", "deflate:3"], [FILTER_SHUFFLE, FILTER_DEFLATE]),
                          (["--deflate", "2"], [FILTER_SHUFFLE, FILTER_DEFLATE]),
                          (["--deflate", "0"], [])):
        out = ctx.path("codec-" + "-".join(options).replace(":", "") + ".h5")
        record(ctx, out, ranks, iters, *options)
        with h5py.File(out, "r") as f:
            for r in range(ranks):
                ev = f["ranks"][str(r)]["events"]
                expect(filters(ev) == want, f"{options}: rank {r} filters {filters(ev)}, expected {want}")
                if want:
                    level = ev.id.get_create_plist().get_filter(1)[2][0]
                    expect(level == int(options[1][-1]), f"{options}: deflate level {level}")
                n = len(allreduces(ev[...], f["ranks"][str(r)]["strings"].asstr()[...]))
                expect(n == iters, f"{options}: rank {r} has {n} MPI_Allreduce events, the job made {iters}")
        info = info_without_plugins(ctx, out)
        got = [rk["events_by_name"].get("MPI_Allreduce") for rk in info["ranks"]]
        expect(got == [iters] * ranks, f"{options}: commprof info counts {got} allreduces")

    for options, words in ((["--compression", "zstd"], "'zstd' is not lz4, deflate, deflate:N or none"),
                           (["--compression", "deflate:0"], "'deflate:0'"),
                           (["--deflate", "2", "--compression", "lz4"], "excludes")):
        out = ctx.path("bad.h5")
        p = run([ctx.commprof, "run", *options, "-o", out, "--", "true"])
        expect(p.returncode == 2, f"{options}: exit {p.returncode}, expected 2\n{p.stderr}")
        expect(words in p.stderr, f"{options}: stderr does not say {words!r}:\n{p.stderr}")
        expect(not os.path.exists(out), f"{options}: created {out}")


def case_foreign_plugin(ctx):
    ranks, iters = 2, 500
    out = ctx.path("plain.h5")
    record(ctx, out, ranks, iters)
    repacked = ctx.path("bzip2.h5")
    spec = [a for r in range(ranks) for a in ("-f", f"/ranks/{r}/events:UD=307,0,1,9")]
    p = run(["h5repack", *spec, out, repacked])
    if p.returncode != 0:
        print(f"SKIPPED: h5repack cannot apply the bzip2 plugin (filter 307; Debian: hdf5-filter-plugin): "
              f"{p.stderr.strip()[:300]}")
        sys.exit(77)
    with h5py.File(repacked, "r") as f:
        got = [filters(f["ranks"][str(r)]["events"]) for r in range(ranks)]
    expect(got == [[307]] * ranks, f"the repacked events tables have filters {got}, expected bzip2 (307) alone")

    def report(path):
        text = run([ctx.commprof, "report", "--format", "json", path], check_rc=0).stdout
        return text.replace(path, "FILE")

    def info(path):
        doc = json.loads(run([ctx.commprof, "info", "--json", path], check_rc=0).stdout)
        doc.pop("path", None)
        return doc

    expect(report(repacked) == report(out), "the report of the bzip2 copy differs from the original's")
    expect(info(repacked) == info(out), "`commprof info` of the bzip2 copy differs from the original's")
    print("foreign_plugin: the bzip2-filtered copy reads as the original")


CASES = {"default_lz4": case_default_lz4, "codecs": case_codecs, "foreign_plugin": case_foreign_plugin}


if __name__ == "__main__":
    sys.exit(run_cases(CASES))
