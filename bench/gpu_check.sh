#!/usr/bin/env bash
# GPU check of commprof's CUPTI source (docs/cupti.md), for a machine WITH a GPU and driver.
# It cannot run on the development machine (no GPU there): the live CUPTI path is verified here.
#
#   bench/gpu_check.sh [--build DIR] [--work DIR] [--steps N] [--compute-ms MS] [--prebuilt]
#
# --prebuilt: use the binaries already in --build (a bundle from bench/gpu_bundle.sh on a machine
# without commprof's build dependencies). $PYTHON (default /usr/bin/python3) needs h5py and numpy.
#
# 1. builds the CUDA parts (libcommprof.so with the CUPTI source, the commprof CLI and
#    examples/cuda_nccl_allreduce) with the release preset;
# 2. runs `commprof run -- examples/cuda_nccl_allreduce` with 1 rank (NCCL needs one GPU per rank:
#    on a one-GPU machine its profiler plugin sees the communicator, not a collective, since NCCL
#    runs a one-rank allreduce locally);
# 3. checks the .h5 with h5py: real kernel (compute and NCCL), memcpy, memset, allocation/free and
#    launch-call records, every GPU time inside the run's steps, names right, nothing dropped;
#    and the NCCL profiler plugin's records under the real libnccl (API calls and collectives
#    with their sequence numbers and bytes);
# 4. prints a summary. Exit 0 when every check holds, 1 otherwise.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$here/build/release"
work="${TMPDIR:-/tmp}/commprof-gpu-check"
steps=10
compute_ms=2
prebuilt=0
py=${PYTHON:-/usr/bin/python3}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --compute-ms) compute_ms="$2"; shift 2 ;;
    --prebuilt) prebuilt=1; shift ;;
    *) echo "gpu_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "gpu_check.sh: nvidia-smi not found (continuing)"

cd "$here"
if [[ $prebuilt -eq 0 ]]; then
  if [[ "$build" == "$here/build/release" ]]; then
    cmake --preset release -DCOMMPROF_CUDA=ON >/dev/null
  fi
  cmake --build "$build" -j"$(nproc)" --target commprof commprof_cli cuda_nccl_allreduce commprof_nccl_profiler
fi

rm -rf "$work" && mkdir -p "$work"
out="$work/gpu.h5"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
set +e
# deflate, not the default LZ4: the checker's h5py (a GPU machine's own, pip's) may have no LZ4 plugin.
"$build/cli/commprof" run --activities all --compression deflate -o "$out" -- \
  "$build/examples/cuda_nccl_allreduce" --steps "$steps" --compute-ms "$compute_ms" --count 1048576 \
  >"$work/run.out" 2>"$work/run.err"
rc=$?
set -e
cat "$work/run.out"
if [[ $rc -ne 0 ]]; then
  echo "gpu_check.sh: the profiled run failed (exit $rc):" >&2
  cat "$work/run.err" >&2
  exit 1
fi
if grep -q "GPU tracing unavailable" "$work/run.err"; then
  echo "gpu_check.sh: CUPTI did not start:" >&2
  grep "GPU tracing unavailable" "$work/run.err" >&2
  exit 1
fi

# Python without the bundle's libraries (its own h5py brings its HDF5).
env -u LD_LIBRARY_PATH "$py" - "$out" "$steps" "$compute_ms" <<'PY'
import sys
import h5py
import numpy as np

path, steps, compute_ms = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
COMPUTE, COMM, MEMCPY, MEMSET, ALLOC, FREE, SYNC, OVERHEAD, API, STEP = 10, 11, 12, 13, 14, 15, 20, 23, 24, 9
HTOD, DTOH = 1, 2
count = 1048576
failures = []

def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)

with h5py.File(path, "r") as f:
    g = f["ranks"]["0"]
    ev = g["events"][...]
    names = g["strings"].asstr()[...]
    attrs = {k: g.attrs[k] for k in g.attrs}
    world = int(f.attrs["world_size"])

def of(kind):
    return ev[ev["kind"] == kind]

def name(e):
    return names[e["name_id"]]

st = of(STEP)
check(len(st) == steps + 1, f"{len(st)} step marks (commprof_step 0..{steps})")
if len(st) == 0:
    sys.exit("gpu_check: no step marks in the file; nothing else can be checked")
t0, t1 = int(st["start_ns"].min()), int(st["start_ns"].max())

k = of(COMPUTE)
spin = [e for e in k if "compute_kernel" in name(e)]
check(len(spin) == steps, f"{len(spin)} compute_kernel records, expected {steps}")
if spin:
    d = np.array([int(e["end_ns"]) - int(e["start_ns"]) for e in spin]) / 1e6
    check(abs(np.median(d) - compute_ms) <= 0.15 * compute_ms + 0.05,
          f"compute_kernel median {np.median(d):.3f} ms, planted {compute_ms} ms (15 %)")
    check(all(t0 <= int(e["start_ns"]) and int(e["end_ns"]) <= t1 for e in spin),
          "every compute kernel lies between the first and the last step mark")
    check(all(e["device"] == spin[0]["device"] for e in spin) and spin[0]["device"] != 0xFFFF, "kernels on one GPU")
    check(all((int(e["peer"]) & 0x7FF) == 256 for e in spin), "block size 256 stored (peer bits 0-10)")

c = of(COMM)
if world == 1:
    # One rank: NCCL runs no communication kernel (a local oneRankReduce kernel instead) and calls
    # no profiler hook for the collective; the plugin's records need two ranks, so two GPUs.
    one = [e for e in k if "oneRankReduce" in name(e)]
    check(len(one) == steps, f"{len(one)} oneRankReduce kernels (NCCL's one-rank allreduce), expected {steps}")
    check(all(t0 <= int(e["start_ns"]) and int(e["end_ns"]) <= t1 for e in one), "they lie inside the steps")
else:
    nccl = [e for e in c if "nccl" in name(e).lower()]
    check(len(nccl) >= steps, f"{len(nccl)} NCCL kernel records (kind 11), at least {steps}")
    check(all(t0 <= int(e["start_ns"]) and int(e["end_ns"]) <= t1 for e in nccl[-steps:]),
          "the last NCCL kernels lie inside the steps")
    if spin and nccl:
        check(all(e["thread_id"] == spin[0]["thread_id"] for e in nccl[-steps:]),
              "NCCL kernels on the compute kernel's stream (thread_id = stream id)")

m = of(MEMCPY)
h2d = [e for e in m if e["subtype"] == HTOD and e["bytes"] == count * 4]
d2h = [e for e in m if e["subtype"] == DTOH and e["bytes"] == count * 4]
check(len(h2d) >= 1, f"host-to-device copy of {count * 4} bytes recorded ({len(h2d)})")
check(len(d2h) >= 1, f"device-to-host copy of {count * 4} bytes recorded ({len(d2h)})")
if h2d:
    check(int(h2d[0]["start_ns"]) < t0, "the upload precedes the first step")
if d2h:
    check(int(d2h[-1]["start_ns"]) >= t1, "the download follows the last step")

s = of(MEMSET)
check(any(e["bytes"] == count * 4 for e in s), f"memset of {count * 4} bytes recorded")

a, fr = of(ALLOC), of(FREE)
big_a = {int(e["seq"]) for e in a if e["bytes"] == count * 4}
big_f = {int(e["seq"]) for e in fr if e["bytes"] == count * 4}
check(len(big_a) >= 2, f"{len(big_a)} allocations of {count * 4} bytes (data, scratch)")
check(big_a <= big_f, "each of them freed at the same address")
check(all(e["start_ns"] == e["end_ns"] for e in np.concatenate([a, fr])), "alloc/free are instants")

api = of(API)
launches = [e for e in api if "LaunchKernel" in name(e)]  # cudaLaunchKernel, __cudaLaunchKernel, cuLaunchKernel(Ex)
check(len(launches) >= steps, f"{len(launches)} kernel launch calls (kind 24)")
launch_corr = {int(e["correlation"]) for e in api}
check(sum(int(e["correlation"]) in launch_corr for e in spin) == len(spin),
      "every compute kernel's correlation id matches a launch call")
check(all(e["device"] == 0xFFFF for e in api), "launch calls are host events")

# The NCCL profiler plugin under the real libnccl (commprof run sets NCCL_PROFILER_PLUGIN).
NCCL_API, NCCL_COLL, ALLREDUCE = 16, 17, 4
api_names = {name(e) for e in of(NCCL_API)}
check("ncclCommInitRank" in api_names and "ncclCommDestroy" in api_names,
      f"the communicator's creation and destruction as NCCL API calls (kind 16): {sorted(api_names)}")
if world > 1:
    coll = [e for e in of(NCCL_COLL) if e["subtype"] == ALLREDUCE]
    check(len(coll) >= steps, f"{len(coll)} NCCL AllReduce records from the profiler plugin (kind 17), at least {steps}")
    if coll:
        seqs = sorted(int(e["seq"]) for e in coll)
        check(seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"their sequence numbers run without a gap: {seqs[:12]}")
        check(all(int(e["bytes"]) == count * 4 for e in coll[-steps:]), f"the last {steps} move {count * 4} bytes each")
        check(all(int(e["end_ns"]) >= int(e["start_ns"]) for e in coll), "each ends after it starts")
    check(len(of(NCCL_API)) >= steps, f"{len(of(NCCL_API))} NCCL API calls (kind 16), at least {steps}")

for counter in ("dropped_cupti_records", "cupti_buffers_refused", "dropped_ring_full"):
    check(int(attrs.get(counter, 0)) == 0, f"{counter} = {int(attrs.get(counter, 0))}")
check(int(attrs.get("cupti_records", 0)) > 0, f"cupti_records = {int(attrs.get('cupti_records', 0))}")
check("gpu_tracing_unavailable" not in attrs, "no gpu_tracing_unavailable counter")

print(f"summary: {len(ev)} events; kernels {len(k)} compute + {len(c)} comm, memcpy {len(m)}, memset {len(s)}, "
      f"alloc {len(a)}, free {len(fr)}, sync {len(of(SYNC))}, overhead {len(of(OVERHEAD))}, api {len(api)}; "
      f"steps {len(st)}; failures {len(failures)}")
sys.exit(1 if failures else 0)
PY
