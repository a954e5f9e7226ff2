"""The Python package (python/commprof; docs/python.md) against what the commprof command says about
the same files: counts from `commprof info --json`, aligned times from the C++ analysis's
/analysis/arrivals, the report from `commprof report --format json`, memory peaks against
make_memory_profile's planted truth. COMMPROF_BUILD names the build tree (ctest sets it)."""
import json
import os
import re
import shutil
import subprocess
import sys

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import commprof  # noqa: E402 (after the backend is chosen)

BUILD = os.environ.get("COMMPROF_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build", "release"))
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(BUILD, "cli", "commprof")


def cli(*args):
    return subprocess.run([CLI, *args], check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """16 ranks x 1000 events each: collectives on the world and on halves, a non-blocking allreduce,
    a send/receive ring, rank 5 planted late, clock offsets up to 2 ms; the analysis stored."""
    path = str(tmp_path_factory.mktemp("py") / "synthetic.h5")
    subprocess.run([os.path.join(BUILD, "bench", "make_synthetic_profile"), "--ranks", "16", "--events", "16000",
                    "--out", path, "--slow-rank", "5", "--slow-us", "300", "--clock-offset-us", "2000"], check=True,
                   stdout=subprocess.DEVNULL)
    cli("report", "--save", path, "-o", os.devnull)
    return path


def test_kind_and_op_numbers_are_the_c_sources():
    header = open(os.path.join(SOURCE, "include", "commprof", "event.h")).read()
    table = open(os.path.join(SOURCE, "core", "schema", "enums.cc")).read()
    kinds = {int(v): n for n, v in re.findall(r"(COMMPROF_KIND_\w+)\s*=\s*(\d+)", header)}
    ops = {int(v): n for n, v in re.findall(r"(COMMPROF_OP_\w+)\s*=\s*(\d+)", header)}
    kind_names = dict(re.findall(r'COMMPROF_ENTRY\((COMMPROF_KIND_\w+),\s*"([^"]*)"\)', table))
    op_names = dict(re.findall(r'COMMPROF_OP\((COMMPROF_OP_\w+),\s*"([^"]*)"', table))
    assert commprof._schema.KINDS == {v: kind_names[c] for v, c in kinds.items() if c in kind_names}
    assert commprof._schema.OPS == {v: op_names[c] for v, c in ops.items() if c in op_names}


def test_events_are_every_stored_event_with_the_names_commprof_info_gives(synthetic):
    info = json.loads(cli("info", "--json", synthetic))
    with commprof.open(synthetic) as job:
        assert job.ranks == list(range(16)) and job.world_size == 16 and job.missing == []
        ev = job.events()
        assert len(ev) == sum(r["event_count"] for r in info["ranks"]) == 16000
        for r in info["ranks"]:
            mine = ev[ev["rank"] == r["rank"]]
            assert mine["kind"].value_counts()[lambda s: s > 0].to_dict() == r["events_by_kind"]
            assert mine["name"].astype(str).value_counts().to_dict() == r["events_by_name"]
        assert set(job.events(kinds=["mpi_p2p"])["op"].astype(str)) == {"send", "recv"}
        assert len(job.events(ranks=[3], kinds="step")) == int(info["ranks"][3]["events_by_kind"]["step"])
        assert list(job.clock.index) == job.ranks and (job.clock["points"] == 3).all()


def test_aligned_times_are_the_analysis_own(synthetic):
    """Every blocking collective's aligned start and end equal the C++ analysis's arrival, to the ns."""
    with commprof.open(synthetic) as job:
        inst, arr = job.instances(), job.arrivals()
        ev = job.events(kinds=["mpi_collective"])
        ev = ev[(ev["flags"] & 0x2) == 0]  # blocking ones: an arrival of a non-blocking one is its issue
        keyed = ev.set_index(["rank", "comm_id", "seq"])[["start_ns", "end_ns"]]
        a = arr.merge(inst[["comm_id", "seq"]], left_on="instance", right_index=True)
        a = a.set_index(["rank", "comm_id", "seq"]).join(keyed, rsuffix="_event", how="inner")
        assert len(a) > 1000
        assert (a["start_ns"] == a["start_ns_event"]).all()
        assert (a["end_ns"] == a["end_ns_event"]).all()
        raw = job.events(ranks=[9], aligned=False)
        aligned = job.events(ranks=[9])
        # Rank 9 is on the second simulated host, whose clock is offset: alignment moved its events.
        assert (raw["start_ns"] != aligned["start_ns"]).all()
        import h5py
        with h5py.File(synthetic, "r") as f:
            assert (raw["start_ns"].to_numpy() == f["ranks/9/events"]["start_ns"].astype(np.int64)).all()


def test_report_and_tables_are_the_stored_analysis(synthetic):
    with commprof.open(synthetic) as job:
        assert job.report() == json.loads(cli("report", "--format", "json", synthetic))
        assert job.report()["stragglers"][0]["rank"] == 5
        inst = job.instances()
        assert len(inst) == job.report()["instances"]["matched"] + job.report()["instances"]["incomplete"]
        assert set(inst["op"].astype(str)) >= {"allreduce", "bcast", "allgather", "reduce"}
        assert list(job.rank_table()["rank"]) == job.ranks
        steps = job.steps()  # the synthetic ranks mark a step per iteration
        assert not steps.empty and set(steps["rank"]) == set(job.ranks), steps.head()


def test_memory_peaks_and_plots(tmp_path, synthetic):
    path = str(tmp_path / "memory.h5")
    subprocess.run([os.path.join(BUILD, "tests", "e2e", "make_memory_profile"), path, "--ranks", "4"], check=True,
                   stdout=subprocess.DEVNULL)
    cli("report", "--save", path, "-o", os.devnull)
    with commprof.open(path) as job:
        m = job.memory()
        peaks = m.groupby(["rank", "memory_kind"])["bytes_in_use"].max()
        # make_memory_profile's truth: rank r's big block of (r % 4 + 1) GiB (device memory, pinned for
        # rank 1) and 4096 bytes of static device memory on every rank, each its own series (a free of
        # an address never allocated makes a series that stays at 0).
        for r in range(4):
            mine = peaks[r].to_dict()
            assert max(mine.values()) == (r % 4 + 1) * 2**30 and 4096 in mine.values(), (r, mine)
        ax = commprof.plot.memory_timeline(job)
        assert len(ax.get_lines()) == m.groupby(["rank", "device", "memory_kind"]).ngroups
    with commprof.open(synthetic) as job:
        ax = commprof.plot.wait_bars(job)
        assert len(ax.patches) == 2 * len(job.ranks)
        widths = [p.get_width() for p in ax.patches[:len(job.ranks)]]
        assert np.allclose(widths, job.rank_table()["wait_time_ns"] / 1e6)
        ax = commprof.plot.lateness_heatmap(job)
        lat = job.report()["lateness"]
        assert ax.images[0].get_array().shape == (len(lat["ranks"]), len(lat["ranks"][0]["mean_lateness_ns"]))


def test_errors_name_the_file_and_the_part(tmp_path, synthetic):
    missing = str(tmp_path / "none.h5")
    with pytest.raises(FileNotFoundError, match=re.escape(missing)):
        commprof.open(missing)
    junk = tmp_path / "junk.h5"
    junk.write_text("not HDF5")
    with pytest.raises(commprof.CommprofFileError, match=re.escape(str(junk))):
        commprof.open(str(junk))
    bare = str(tmp_path / "bare.h5")
    shutil.copy(synthetic, bare)
    import h5py
    with h5py.File(bare, "r+") as f:
        del f["analysis"]
    with commprof.open(bare) as job:
        with pytest.raises(commprof.CommprofFileError, match=r"no /analysis/report_json .*commprof report --save"):
            job.report()
        with pytest.raises(ValueError, match="unknown event kind 'mpi'"):
            job.events(kinds=["mpi"])
        with pytest.raises(KeyError, match="no data for rank 99"):
            job.events(ranks=[99])


def test_elastic_restart_files_are_listed_as_commprof_info_lists_them(tmp_path, synthetic):
    import h5py
    first, second = str(tmp_path / "job.h5"), str(tmp_path / "job.restart-1.h5")
    shutil.copy(synthetic, first)
    shutil.copy(synthetic, second)
    with h5py.File(first, "a") as f:  # the root attributes the aggregator writes (docs/file-format.md)
        f.attrs["restart_files"] = "job.restart-1.h5"
    with h5py.File(second, "a") as f:
        f.attrs["incarnation"] = np.uint64(1)
    info = json.loads(cli("info", "--json", first))
    with commprof.open(first) as job:
        assert job.incarnation == 0 and job.restart_files == [second]
        assert [os.path.basename(p) for p in job.restart_files] == info["restart_files"]
        with commprof.open(job.restart_files[0]) as later:
            assert later.incarnation == json.loads(cli("info", "--json", second))["incarnation"] == 1
            assert later.restart_files == []
    with commprof.open(synthetic) as plain:
        assert plain.incarnation == 0 and plain.restart_files == []


def test_a_partial_import_lists_its_ranks_and_the_missing(tmp_path):
    trace = os.path.join(os.path.dirname(SOURCE), "shared", "data", "kineto", "hta-trace-filter-2rank")
    if not os.path.isdir(trace):
        pytest.skip(f"Kineto test data not found: {trace}")
    path = str(tmp_path / "part.h5")
    cli("import", "kineto", trace, "-o", path, "-q")
    with commprof.open(path) as job:
        assert job.ranks == [0, 1] and job.world_size == 128 and job.missing == list(range(2, 128))
        kernels = job.events(kinds=["compute_kernel", "comm_kernel"])
        assert len(kernels) > 0 and set(kernels["rank"]) == {0, 1}


def test_installs_offline_into_a_venv_with_the_system_packages(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    # A copy: setuptools builds in the source folder (build/, *.egg-info), which must stay clean.
    source = tmp_path / "python"
    shutil.copytree(os.path.join(SOURCE, "python"), source, ignore=shutil.ignore_patterns("__pycache__"))
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-build-isolation", "--no-index",
                          str(source)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert pip.returncode == 0, pip.stdout
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import commprof, sys; print(commprof.__version__, "
                          "commprof.__file__)"], cwd=str(tmp_path), check=True, stdout=subprocess.PIPE, text=True,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).stdout
    version, where = out.split()
    assert version == "0.1.0" and where.startswith(str(venv)), out


def test_the_example_runs_and_writes_its_plots(tmp_path, synthetic):
    path = str(tmp_path / "example.h5")
    shutil.copy(synthetic, path)
    out = subprocess.run([sys.executable, os.path.join(SOURCE, "examples", "analyze.py"), path], check=True,
                         stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.path.join(SOURCE, "python")})
    assert "straggler: rank 5" in out.stdout, out.stdout
    for name in ("wait", "lateness", "memory"):
        assert os.path.getsize(f"{path}.{name}.png") > 1000
