#!/usr/bin/env python3
"""Writes the hand-made seeds of kineto_import_fuzz (tests/fuzz/README.md) into OUTDIR: small
torch.profiler traces in the shapes docs/kineto-import.md describes (both time dialects, plain and
gzip, one rank or two joined by the target's "--rank--" line), and with --slices DIR also the first
events of each real trace found under DIR (a local copy, e.g. /work/shared/data/kineto: the slices
seed a run; only what a -merge=1 keeps is checked in, small).

    make_kineto_seeds.py OUTDIR [--slices DIR]
"""
import argparse
import gzip
import json
import os


def trace(rank, ranks=2, new=True, iters=2):
    base = 1_711_964_646_000_000_000
    start = 1_711_964_700_000_000_000
    # Numbers, as Kineto writes them (a string "ts" is refused by the importer, field by field).
    ts = (lambda ns: round((ns - base) / 1000, 3)) if new else (lambda ns: ns // 1000)
    pid, tid, dev = 1000 + rank, 2000 + rank, rank
    members = list(range(ranks))
    info = {"backend": "nccl", "rank": rank, "world_size": ranks}
    if new:
        info.update(pg_count=1, pg_config=[{"pg_name": "0", "pg_desc": "default_pg", "pg_size": ranks,
                                            "ranks": members}])
    ev = [{"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"name": "python3"}}]
    corr, ext = 100, 5000
    for i in range(iters):
        t0 = start + i * 10_000_000
        arrive = t0 + 2_000_000 + (1_000_000 if rank == 1 else 0)
        end = t0 + 3_500_000
        coll = {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024,
                "Group size": ranks, "dtype": "Float", "Process Group Name": "0",
                "Process Group Description": "default_pg", "Process Group Ranks": str(members), "Seq": i}
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": pid, "tid": tid,
                   "ts": ts(t0), "dur": 9999, "args": {"External id": ext}})
        ext += 1
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": tid, "ts": ts(t0 + 1000),
                   "dur": 2, "args": {"External id": ext}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                   "ts": ts(t0 + 1500), "dur": 1, "args": {"correlation": corr, "cbid": 211}})
        ev.append({"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": ts(t0 + 1500), "cat": "ac2g", "name": "ac2g"})
        ev.append({"ph": "X", "cat": "kernel", "name": "void gemm_kernel<float>(float const*, float*)", "pid": dev,
                   "tid": 7, "ts": ts(t0 + 20_000), "dur": 1900,
                   "args": {"External id": ext, "device": dev, "stream": 7, "correlation": corr}})
        corr += 1
        ext += 1
        ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": pid, "tid": tid,
                   "ts": ts(t0 + 4000), "dur": 4, "args": dict({"External id": ext}, **coll)})
        ev.append({"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": pid, "tid": tid,
                   "ts": ts(t0 + 5000), "dur": 2})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": pid, "tid": tid,
                   "ts": ts(t0 + 5500), "dur": 1, "args": {"External id": ext, "correlation": corr, "cbid": 430}})
        kargs = {"External id": ext, "device": dev, "stream": 20, "correlation": corr}
        if new:
            kargs.update(coll)
        name = ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)" if new
                else "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)")
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": dev, "tid": 20, "ts": ts(arrive),
                   "dur": (end - arrive) / 1000, "args": kargs})
        ev.append({"ph": "C", "name": "Memory", "pid": pid, "ts": ts(t0), "args": {"bytes": 1 << 20}})
        corr += 1
        ext += 1
    ev.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
               "ts": ts(start), "dur": 30000})
    doc = {"schemaVersion": 1, "distributedInfo": info, "traceEvents": ev}
    if new:
        doc["baseTimeNanoseconds"] = base  # Kineto writes it after the events
    return json.dumps(doc)


def slices(src, out, events=40):
    for dirpath, _, names in os.walk(src):
        for name in sorted(names):
            if not (name.endswith(".json") or name.endswith(".gz")):
                continue
            path = os.path.join(dirpath, name)
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt") as f:
                doc = json.load(f)
            keep = {k: v for k, v in doc.items() if k != "traceEvents"}
            keep["traceEvents"] = doc.get("traceEvents", [])[:events]
            stem = name.split(".")[0]
            with open(os.path.join(out, f"slice_{stem}.json"), "w") as f:
                json.dump(keep, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--slices")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    files = {
        "new_rank0.json": trace(0),
        "old_rank1.json": trace(1, new=False),
        "new_two_ranks.json": trace(0) + "\n--rank--\n" + trace(1),
        "old_two_ranks.json": trace(0, new=False) + "\n--rank--\n" + trace(1, new=False),
        "empty_events.json": json.dumps({"schemaVersion": 1, "traceEvents": []}),
    }
    for name, text in files.items():
        with open(os.path.join(a.out, name), "w") as f:
            f.write(text)
    with open(os.path.join(a.out, "new_rank1.json.gz"), "wb") as f:
        f.write(gzip.compress(trace(1).encode(), mtime=0))
    if a.slices:
        slices(a.slices, a.out)


if __name__ == "__main__":
    main()
