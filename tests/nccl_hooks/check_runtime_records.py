#!/usr/bin/env python3
"""The plugin records through libcommprof.so's runtime: run plugin_runtime_driver with a spool
directory, merge the spool with `commprof merge`, and check the NCCL records in the HDF5 file.

usage: check_runtime_records.py DRIVER COMMPROF PLUGIN_DIR WORK_DIR [LIBCOMMPROF_TO_PRELOAD]

With the last argument, libcommprof.so is also LD_PRELOADed (as `commprof run` does): the plugin
must then use that same runtime, so exactly one spool file is written.
"""
import os
import re
import shutil
import subprocess
import sys

import h5py


def main():
    driver, commprof, plugin_dir, work = sys.argv[1:5]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    spool = os.path.join(work, "spool")
    env = dict(os.environ, COMMPROF_SPOOL_DIR=spool, COMMPROF_AGGREGATOR="",
               LD_LIBRARY_PATH=plugin_dir, COMMPROF_LOG="error")
    if len(sys.argv) > 5:
        env["LD_PRELOAD"] = sys.argv[5]
    out = subprocess.run([driver], env=env, capture_output=True, text=True, check=True).stdout
    spools = [n for n in os.listdir(spool) if n.endswith(".cpspool")]
    assert len(spools) == 1, spools  # one runtime per process, whoever loaded libcommprof.so
    spans = [int(m) for m in re.findall(r"gpu_span_ns (\d+)", out)]
    assert len(spans) == 3, out
    # GroupApi|CollApi|P2pApi|KernelLaunch (256+512+1024+2048) | Coll|P2p (2+4) | KernelCh (64) = 3910
    assert re.search(r"^mask 3910$", out, re.M), out
    assert re.search(r"^mask4 70$", out, re.M), out  # Coll|P2p|KernelCh = 2+4+64
    assert re.search(r"^mask2 14$", out, re.M), out  # Coll|P2p|ProxyOp = 2+4+8
    h5 = os.path.join(work, "out.h5")
    subprocess.run([commprof, "merge", "-o", h5, spool], check=True, capture_output=True)
    with h5py.File(h5, "r") as f:
        r = f["ranks/0"]
        ev = r["events"][:]
        strings = [s.decode() if isinstance(s, bytes) else s for s in r["strings"][:]]
        name = lambda e: strings[e["name_id"]]
        init = [e for e in ev if e["kind"] == 6 and e["subtype"] == 67]
        assert len(init) == 2, init  # v5 and v4 (v2's init knows no communicator)
        v4 = [e for e in init if e["comm_id"] == 0x4444]
        assert len(v4) == 1 and v4[0]["bytes"] == 8 and v4[0]["peer"] == 5 and name(v4[0]) == "v4comm", v4
        init = [e for e in init if e["comm_id"] == 0xABCD]
        assert len(init) == 1, init
        assert init[0]["comm_id"] == 0xABCD and init[0]["bytes"] == 2 and init[0]["peer"] == 0
        assert name(init[0]) == "world"
        api = [e for e in ev if e["kind"] == 16]
        assert len(api) == 3 and all(name(e) == "ncclAllReduce" and e["bytes"] == 1024 for e in api), api
        coll = sorted((e for e in ev if e["kind"] == 17), key=lambda e: e["seq"])
        assert [int(e["seq"]) for e in coll] == [0, 1, 2], coll
        kern = [e for e in ev if e["kind"] == 11]
        assert len(kern) == 6, kern
        for e, span in zip(coll, spans):
            assert e["comm_id"] == 0xABCD and e["subtype"] == 4 and e["bytes"] == 1024
            assert e["correlation"] == 2 and e["flags"] == 0 and name(e) == "AllReduce"
            # The planted GPU clock runs at the host rate: the calibrated span is the GPU span
            # (earliest channel start to latest channel stop) within 1 us.
            got = int(e["end_ns"]) - int(e["start_ns"])
            assert abs(got - span) <= 1000, (got, span)
            # Calibrated times are on the host clock: never after the collective's own records
            # were stored, i.e. within a second of the API call that issued it.
            assert abs(int(e["start_ns"]) - int(api[int(e["seq"])]["start_ns"])) < 10**9
        counters = {k: r.attrs[k] for k in r.attrs if str(k).startswith("nccl_")}
        assert counters.get("nccl_calibration_pairs") == 12, counters  # start and stop of each channel (a young fit)
    print("ok: masks v5 3910, v4 70, v2 14; 2 x kind 6/67 (v5, v4), 3 x kind 16, 3 x kind 17 (spans %s ns), 6 x kind 11 through the runtime" % spans)


if __name__ == "__main__":
    main()
