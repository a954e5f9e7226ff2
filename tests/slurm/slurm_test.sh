#!/usr/bin/env bash
# A real Slurm on this machine (munged, slurmctld and two slurmd as children of this script, in the
# foreground, stopped by PID; no systemd) with commprof's SPANK plugin registered,
# then the job integration checked end to end (docs/slurm.md):
#   1. srun --commprof -n 4 --overcommit --mpi=pmix mpi_straggler --slow-rank 3: commprof-<job>.h5
#      appears, holds 4 ranks with the job id and Slurm's ids, and the report names rank 3;
#   2. the same through sbatch --wait with slurm/commprof.sbatch (aggregator started by the
#      script, report and trace written next to the job's output);
#   3. two virtual nodes: srun --commprof -N 2 -n 4: ranks on both nodes, one file;
#   4. commprof run -- srun ...: like mpirun;
#   5. without --commprof the plugin changes nothing in a task's environment (run last: it
#      rewrites plugstack.conf);
#   6. srun --commprof=hang_timeout=3,on_hang=abort with a planted hang (tests/e2e/hang_program):
#      the step is ended and its file's /hang group names the planted rank;
#   7. the same through sbatch with COMMPROF_HANG_TIMEOUT and COMMPROF_ON_HANG;
#   8. srun --commprof=relay=node -N 2 -n 4: a relay per virtual node, each writing a shard that the
#      step's file links (external links); one job of 4 ranks, the report names rank 3; relay with
#      hang_timeout is refused before the step starts;
#   9. sbatch slurm/commprof.sbatch -N 2 with COMMPROF_RELAY=node: the batch script's aggregator takes
#      a relay per virtual node, and the job's file links their 2 shards;
#  10. commprof run -- srun without MPI (SLURM_PROCID is the rank), and a torch-style launcher started
#      by srun whose workers take their own RANK and LOCAL_RANK over what srun left them; then
#      srun --mpi=pmix -n 2 commprof report (the one-process JSON) and, without MPI support, refused;
#      srun --mpi=pmix -n 2 commprof stats and export (the one-process outputs).
# Usage: slurm_test.sh BUILD_DIR WORK_DIR. Exit 0 pass, 1 fail, 77 skipped (no Slurm installed).
set -uo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$2
for tool in slurmctld slurmd srun sbatch munged mungekey sinfo; do
  if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
    echo "slurm_test: SKIPPED: $tool is not installed (scripts/install-deps.sh installs Slurm and munge)"
    exit 77
  fi
done
PLUGIN=$BUILD/slurm/spank_commprof.so
COMMPROF=$BUILD/cli/commprof
LIB=$BUILD/collector/libcommprof.so
APP=$BUILD/examples/mpi_straggler
for f in "$PLUGIN" "$COMMPROF" "$LIB" "$APP"; do
  [ -e "$f" ] || { echo "slurm_test: FAIL: $f is not built"; exit 1; }
done
export PATH=$PATH:/usr/sbin
PY=${PYTHON:-/usr/bin/python3}  # Debian's, with python3-h5py

rm -rf "$WORK"; mkdir -p "$WORK"
T=$(mktemp -d /tmp/commprof-slurm.XXXXXX); chmod 755 "$T"
mkdir -p "$T"/{munge,state,spool,log,tmp/n1,tmp/n2,out}; chmod 711 "$T/munge"
PIDS=()
FAILED=0
teardown() {
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -TERM "${PIDS[i]}" 2>/dev/null; wait "${PIDS[i]}" 2>/dev/null; done
  if [ "$FAILED" -ne 0 ]; then
    for l in "$T"/log/*; do echo "---- $l"; tail -n 40 "$l"; done
  fi
  cp -r "$T/log" "$WORK/slurm-logs" 2>/dev/null
  rm -rf "$T"
}
trap teardown EXIT
fail() { echo "slurm_test: FAIL: $*"; FAILED=1; exit 1; }

mungekey -c -k "$T/munge/key" || fail "mungekey"
munged -F --force -S "$T/munge/sock" --key-file="$T/munge/key" --log-file="$T/log/munged.log" \
  --pid-file="$T/munge/pid" --seed-file="$T/munge/seed" 2>>"$T/log/munged.err" &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$T/munge/sock" ] && break; sleep 0.1; done
[ -S "$T/munge/sock" ] || fail "munged did not start"

HOST=$(hostname -s)
cat >"$T/slurm.conf" <<CONF
ClusterName=commprofci
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmctldPort=16817
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool/%n
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd-%n.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd-%n.log
TmpFS=$T/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$T/log/jobcomp.txt
MpiDefault=none
MailProg=$(command -v true)
SlurmdParameters=config_overrides
ReturnToService=2
PlugStackConfig=$T/plugstack.conf
NodeName=n1 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17001 CPUs=4
NodeName=n2 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17002 CPUs=4
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
PLUGSTACK_LINE="required $PLUGIN commprof=$COMMPROF lib=$LIB output=$T/out timeout=120"
echo "$PLUGSTACK_LINE" >"$T/plugstack.conf"
export SLURM_CONF=$T/slurm.conf
slurmctld -D -f "$SLURM_CONF" 2>>"$T/log/ctld.err" & PIDS+=($!)
slurmd -D -N n1 -f "$SLURM_CONF" 2>>"$T/log/slurmd-n1.err" & PIDS+=($!)
slurmd -D -N n2 -f "$SLURM_CONF" 2>>"$T/log/slurmd-n2.err" & PIDS+=($!)
for _ in $(seq 150); do [ "$(sinfo -h -t idle -o %D 2>/dev/null)" = "2" ] && break; sleep 0.2; done
[ "$(sinfo -h -t idle -o %D)" = "2" ] || fail "the two virtual nodes did not come up idle: $(sinfo 2>&1)"
echo "slurm_test: Slurm is up (2 virtual nodes on $HOST)"

# a planted 10 ms per iteration: far above TCP between virtual nodes and a busy 2-core machine
APP_ARGS=(--iters 40 --compute-us 1000 --slow-rank 3 --slow-us 10000 --compute sleep --bytes 4096)
export OMPI_MCA_mpi_yield_when_idle=1

# check FILE JOBID NRANKS SLOW [NODES]: the file has the job id, NRANKS ranks with Slurm's ids, and
# the report names SLOW; NODES = how many distinct slurm_nodeid values to expect.
check() {
  cp "$1" "$WORK/" 2>/dev/null  # kept for a look after a failure
  "$PY" - "$@" <<'PY' || { "$COMMPROF" report "$1" | tail -n 30; fail "check of $1"; }
import json, subprocess, sys
import h5py
path, job, n, slow = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
nodes = int(sys.argv[6]) if len(sys.argv) > 6 else None
commprof = sys.argv[5]
with h5py.File(path, "r") as f:
    assert f.attrs["job_id"] == job, f"job_id {f.attrs['job_id']!r}, expected {job!r}"
    assert int(f.attrs["world_size"]) == n, f"world size {f.attrs['world_size']}"
    ranks = sorted(int(r) for r in f["ranks"])
    assert ranks == list(range(n)), f"ranks {ranks}"
    seen_nodes = set()
    for r in ranks:
        g = f["ranks"][str(r)]
        assert g.attrs["status"] == "complete", f"rank {r} status {g.attrs['status']}"
        assert int(g.attrs["slurm_job_id"]) == int(job), f"rank {r}: slurm_job_id {g.attrs['slurm_job_id']}"
        assert int(g.attrs["slurm_procid"]) == r, f"rank {r}: slurm_procid {g.attrs['slurm_procid']}"
        assert "slurm_step_id" in g.attrs, f"rank {r}: no slurm_step_id"
        seen_nodes.add(int(g.attrs["slurm_nodeid"]))
        assert len(g["events"]) > 30, f"rank {r}: {len(g['events'])} events"
    if nodes is not None:
        assert len(seen_nodes) == nodes, f"slurm_nodeid values {seen_nodes}, expected {nodes} nodes"
rep = json.loads(subprocess.run([commprof, "report", path, "--format", "json"], check=True,
                                stdout=subprocess.PIPE, text=True).stdout)
# The planted rank first, persistent; another rank only as a transient one-off (a loaded machine can
# stall a rank for a few hundred ms once, and the report is right to name that as transient).
sg = rep["stragglers"]
assert sg and sg[0]["rank"] == slow and sg[0]["pattern"] == "persistent", f"stragglers {sg}"
assert all(s["pattern"] == "transient" for s in sg[1:]), f"stragglers {sg}"
print(f"  {path}: job {job}, {n} ranks, straggler {slow}")
PY
}

# SLURM_TEST_CASES="1 5" runs only those (debugging); all by default.
want() { [ -z "${SLURM_TEST_CASES:-}" ] || [[ " $SLURM_TEST_CASES " == *" $1 "* ]]; }
newest() { ls -t "$T"/out/commprof-*.h5 2>/dev/null | head -n 1; }

# 1. srun --commprof
if want 1; then
echo "slurm_test: 1. srun --commprof -n 4 --overcommit --mpi=pmix"
(cd "$T/out" && timeout 120 srun --commprof -N 1 -n 4 --overcommit --mpi=pmix "$APP" "${APP_ARGS[@]}" >/dev/null 2>"$WORK/srun1.err") \
  || fail "srun --commprof exited $?: $(cat "$WORK/srun1.err")"
F=$(newest); JOB=$(basename "$F" .h5); JOB=${JOB#commprof-}
[ -n "$F" ] || fail "no commprof-<job>.h5 in $T/out: $(ls "$T/out") $(cat "$WORK/srun1.err")"
check "$T/out/commprof-$JOB.h5" "$JOB" 4 3 "$COMMPROF" 1
fi

# 2. sbatch --wait with the example script, trimmed to one node
if want 2; then
echo "slurm_test: 2. sbatch --wait slurm/commprof.sbatch"
mkdir -p "$T/batch"
# the example asks for GPUs, which this cluster does not have: drop that line (and nothing else)
sed '/--gpus-per-task/d' "$SRC/slurm/commprof.sbatch" >"$T/batch/commprof.sbatch"
JOB=$(cd "$T/batch" && COMMPROF="$COMMPROF" timeout 180 sbatch --parsable --wait -N 1 -n 4 --overcommit \
  -o "$T/batch/job-%j.out" "$T/batch/commprof.sbatch" "$APP" "${APP_ARGS[@]}" 2>"$WORK/sbatch.err") \
  || fail "sbatch --wait exited $?: $(cat "$WORK/sbatch.err"; cat "$T"/batch/job-*.out)"
JOB=$(echo "$JOB" | tail -n 1 | cut -d';' -f1)
cp "$T"/batch/job-*.out "$WORK/" 2>/dev/null
[ -f "$T/batch/commprof-$JOB.h5" ] || fail "the batch job left no commprof-$JOB.h5: $(ls "$T/batch"); $(cat "$T"/batch/job-*.out)"
check "$T/batch/commprof-$JOB.h5" "$JOB" 4 3 "$COMMPROF" 1
grep -q "rank 3 on" "$T/batch/commprof-$JOB.report.txt" || fail "the batch job's report does not name rank 3"
"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); assert len({e['pid'] for e in d['traceEvents'] if 'pid' in e}) >= 4" \
  "$T/batch/commprof-$JOB.trace.json" || fail "the batch job's trace lacks its 4 ranks"
fi

# 3. two virtual nodes
if want 3; then
echo "slurm_test: 3. srun --commprof -N 2 -n 4 (two virtual nodes)"
(cd "$T/out" && timeout 120 srun --commprof -N 2 -n 4 --mpi=pmix "$APP" "${APP_ARGS[@]}" >/dev/null 2>"$WORK/srun3.err") \
  || fail "srun -N 2 exited $?: $(cat "$WORK/srun3.err")"
F=$(newest); JOB=$(basename "$F" .h5); JOB=${JOB#commprof-}
check "$T/out/commprof-$JOB.h5" "$JOB" 4 3 "$COMMPROF" 2
fi

# 4. commprof run -- srun
if want 4; then
echo "slurm_test: 4. commprof run -- srun --mpi=pmix"
(cd "$T/out" && timeout 180 "$COMMPROF" run -q -o "$T/out/run-srun.h5" -- srun -N 1 -n 4 --overcommit --mpi=pmix "$APP" \
  "${APP_ARGS[@]}" >/dev/null 2>"$WORK/run-srun.err") || fail "commprof run -- srun exited $?: $(cat "$WORK/run-srun.err")"
"$PY" - "$T/out/run-srun.h5" "$COMMPROF" <<'PY' || fail "commprof run -- srun: check"
import json, subprocess, sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    assert sorted(int(r) for r in f["ranks"]) == [0, 1, 2, 3], list(f["ranks"])
rep = json.loads(subprocess.run([sys.argv[2], "report", sys.argv[1], "--format", "json"], check=True,
                                stdout=subprocess.PIPE, text=True).stdout)
sg = rep["stragglers"]
assert sg and sg[0]["rank"] == 3 and sg[0]["pattern"] == "persistent", sg
assert all(s["pattern"] == "transient" for s in sg[1:]), sg
print("  commprof run -- srun: 4 ranks, straggler 3")
PY
fi

# 8. relays: one per virtual node, shards linked into the step's file (docs/scale.md#relays)
if want 8; then
echo "slurm_test: 8. srun --commprof=relay=node -N 2 -n 4 (a relay per virtual node)"
(cd "$T/out" && timeout 120 srun --commprof=relay=node -N 2 -n 4 --mpi=pmix "$APP" "${APP_ARGS[@]}" >/dev/null \
  2>"$WORK/srun8.err") || fail "srun --commprof=relay=node exited $?: $(cat "$WORK/srun8.err")"
F=$(newest); JOB=$(basename "$F" .h5); JOB=${JOB#commprof-}
check "$T/out/commprof-$JOB.h5" "$JOB" 4 3 "$COMMPROF" 2
"$PY" - "$T/out/commprof-$JOB.h5" <<'PY' || fail "srun --commprof=relay=node: shards"
import glob, sys
import h5py
path = sys.argv[1]
shards = sorted(glob.glob(path + ".shards/*.h5"))
assert len(shards) == 2, f"expected a shard per virtual node, found {shards}"
with h5py.File(path, "r") as f:
    links = {r: f["ranks"].get(r, getlink=True) for r in f["ranks"]}
    assert all(isinstance(l, h5py.ExternalLink) for l in links.values()), links
    assert {l.filename.split("/")[-1] for l in links.values()} == {s.split("/")[-1] for s in shards}, links
for s in shards:
    with h5py.File(s, "r") as f:
        assert int(f.attrs["finalized"]) == 1, f"{s}: the relay did not finish its shard"
        print(f"  shard {s.split('/')[-1]}: finalized, ranks {sorted(f['ranks'])}")
print(f"  relay=node: 2 shards, 4 ranks linked")
PY
if (cd "$T/out" && timeout 60 srun --commprof=relay=node,hang_timeout=3 -N 1 -n 1 true >/dev/null 2>"$WORK/srun8b.err"); then
  fail "srun --commprof=relay=node,hang_timeout=3 ran; it should be refused"
fi
grep -q "relay and hang_timeout together" "$WORK/srun8b.err" || fail "relay with hang_timeout: no reason given: $(cat "$WORK/srun8b.err")"
fi

# 9. relays from the batch script
if want 9; then
echo "slurm_test: 9. COMMPROF_RELAY=node sbatch --wait -N 2 slurm/commprof.sbatch"
mkdir -p "$T/batch9"
sed '/--gpus-per-task/d' "$SRC/slurm/commprof.sbatch" >"$T/batch9/commprof.sbatch"
# Two tasks on each of two virtual nodes of one host: Open MPI's shared-memory transport would take
# both nodes' local ranks for the same processes (its segments are named by node-local rank) and
# crash in MPI_Init, with or without commprof; TCP between all ranks avoids that.
JOB=$(cd "$T/batch9" && COMMPROF="$COMMPROF" COMMPROF_RELAY=node OMPI_MCA_btl=self,tcp timeout 180 sbatch --parsable --wait -N 2 -n 4 \
  -o "$T/batch9/job-%j.out" "$T/batch9/commprof.sbatch" "$APP" "${APP_ARGS[@]}" 2>"$WORK/sbatch9.err") \
  || fail "COMMPROF_RELAY=node sbatch exited $?: $(cat "$WORK/sbatch9.err"; cat "$T"/batch9/job-*.out)"
JOB=$(echo "$JOB" | tail -n 1 | cut -d';' -f1)
check "$T/batch9/commprof-$JOB.h5" "$JOB" 4 3 "$COMMPROF" 2
n=$(ls "$T/batch9/commprof-$JOB.h5.shards/"*.h5 2>/dev/null | wc -l)
[ "$n" -eq 2 ] || fail "sbatch with relays: $n shards, expected one per virtual node: $(ls -R "$T/batch9")"
echo "  relays from the batch script: 2 shards"
fi

# check_hang FILE: the step's file holds a /hang group that names rank 2 (hang_program skip-allreduce 2 3)
HANG_APP=$BUILD/tests/e2e/hang_program
check_hang() {
  cp "$1" "$WORK/" 2>/dev/null
  "$PY" - "$1" <<'PY' || { "$COMMPROF" report "$1" | head -n 30; fail "hang check of $1"; }
import json, sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    g = f.get("hang")
    assert g is not None, "no /hang group"
    rep = json.loads(g["report_json"][()])
    assert g.attrs["source"] in ("live", b"live"), g.attrs["source"]
    assert list(g.attrs["culprits"]) == [2], list(g.attrs["culprits"])
    c = rep["comms"]
    assert len(c) == 1 and c[0]["seq"] == 3 and c[0]["op"] == "MPI_Allreduce", c
    assert sorted(w["rank"] for w in c[0]["waiting"] if w["op"] == "MPI_Allreduce") == [0, 1, 3], c
print(f"  {sys.argv[1]}: /hang names rank 2 ({rep['verdict']})")
PY
}

# 10. without MPI: srun's SLURM_PROCID is the rank; a torch-style launcher started by srun gives
# its workers their own ranks over the SLURM_PROCID/SLURM_LOCALID they inherit (docs/torchrun.md)
if want 10; then
echo "slurm_test: 10. commprof run -- srun without MPI, and a torch-style launcher under srun"
CAPI=$BUILD/tests/e2e/c_api_program
(cd "$T/out" && timeout 180 "$COMMPROF" run -q -o "$T/out/srun-nompi.h5" -- srun -N 1 -n 2 --overcommit "$CAPI" \
  >/dev/null 2>"$WORK/srun-nompi.err") || fail "commprof run -- srun (no MPI) exited $?: $(cat "$WORK/srun-nompi.err")"
(cd "$T/out" && timeout 180 "$COMMPROF" run -q -o "$T/out/srun-torch.h5" -- srun -N 1 -n 1 "$PY" \
  "$SRC/tests/e2e/torch_style_launcher.py" --nproc-per-node 3 -- "$CAPI" >/dev/null 2>"$WORK/srun-torch.err") ||
  fail "commprof run -- srun torch_style_launcher exited $?: $(cat "$WORK/srun-torch.err")"
"$PY" - "$T/out/srun-nompi.h5" "$T/out/srun-torch.h5" <<'PY' || fail "srun without MPI: check"
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    assert sorted(int(r) for r in f["ranks"]) == [0, 1], list(f["ranks"])
    for r in (0, 1):
        g = f["ranks"][str(r)]
        assert int(g.attrs["slurm_procid"]) == r and g.attrs["status"] == "complete", dict(g.attrs)
with h5py.File(sys.argv[2], "r") as f:
    assert sorted(int(r) for r in f["ranks"]) == [0, 1, 2], list(f["ranks"])
    for r in (0, 1, 2):
        g = f["ranks"][str(r)]
        assert int(g.attrs["local_rank"]) == r and int(g.attrs["torch_launched"]) == 1, dict(g.attrs)
        assert int(g.attrs["slurm_procid"]) == 0, "the worker inherited its srun task's SLURM_PROCID"
print("  srun without MPI: ranks 0-1 by SLURM_PROCID; torch-style launcher under srun: ranks 0-2 by RANK")
PY
# The report as a Slurm job (docs/scale.md#distributed-analysis): with PMIx, one report of two tasks,
# the one-process JSON; without MPI support, refused (exit 2, told once) instead of two writers.
"$COMMPROF" report --format json "$T/out/srun-nompi.h5" -o "$WORK/report-one.json" || fail "report of srun-nompi.h5"
(cd "$T/out" && timeout 120 srun -N 1 -n 2 --overcommit --mpi=pmix "$COMMPROF" report --format json \
  "$T/out/srun-nompi.h5" -o "$WORK/report-two.json" >/dev/null 2>"$WORK/report-two.err") ||
  fail "srun --mpi=pmix -n 2 commprof report exited $?: $(cat "$WORK/report-two.err")"
cmp -s "$WORK/report-one.json" "$WORK/report-two.json" || fail "srun -n 2 commprof report: JSON differs from one process's"
(cd "$T/out" && timeout 120 srun -N 1 -n 2 --overcommit "$COMMPROF" report "$T/out/srun-nompi.h5" \
  >/dev/null 2>"$WORK/report-nompi.err")
rc=$?
[ "$rc" = 2 ] || fail "srun -n 2 commprof report without MPI support exited $rc, expected 2 (refused)"
[ "$(grep -c 'without MPI support' "$WORK/report-nompi.err")" = 1 ] ||
  fail "srun -n 2 commprof report without MPI: not told once: $(cat "$WORK/report-nompi.err")"
echo "  srun --mpi=pmix -n 2 commprof report: the one-process JSON; without MPI support: refused, told once"
# stats and export as Slurm jobs: the one-process outputs, byte for byte.
for what in stats export; do
  if [ "$what" = stats ]; then args=(stats --format json); else args=(export -q --format perfetto); fi
  "$COMMPROF" "${args[@]}" "$T/out/srun-nompi.h5" -o "$WORK/$what-one.out" || fail "$what of srun-nompi.h5"
  (cd "$T/out" && COMMPROF_LOG=info timeout 120 srun -N 1 -n 2 --overcommit --mpi=pmix "$COMMPROF" "${args[@]}" \
    "$T/out/srun-nompi.h5" -o "$WORK/$what-two.out" >/dev/null 2>"$WORK/$what-two.err") ||
    fail "srun --mpi=pmix -n 2 commprof $what exited $?: $(cat "$WORK/$what-two.err")"
  cmp -s "$WORK/$what-one.out" "$WORK/$what-two.out" || fail "srun -n 2 commprof $what: output differs from one process's"
done
# The export was made by two processes, not twice by one each (the second's stages are logged).
grep -q "export process 1: " "$WORK/export-two.err" || fail "srun -n 2 commprof export: no second process took part"
echo "  srun --mpi=pmix -n 2 commprof stats and export: the one-process outputs"
fi

# 6. srun --commprof=hang_timeout=3,on_hang=abort: a planted hang ends the step, the file names it
if want 6; then
echo "slurm_test: 6. srun --commprof=hang_timeout=3,on_hang=abort with a planted hang"
[ -x "$HANG_APP" ] || fail "$HANG_APP is not built"
rm -f "$T"/out/commprof-*.h5
(cd "$T/out" && timeout 120 srun --commprof=hang_timeout=3,on_hang=abort -N 1 -n 4 --overcommit --mpi=pmix \
  "$HANG_APP" skip-allreduce 2 3 >/dev/null 2>"$WORK/srun6.err")
RC=$?
[ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] || fail "srun of a hung step exited $RC (0: not ended; 124: not ended by the watchdog): $(cat "$WORK/srun6.err")"
F=$(newest)
[ -n "$F" ] || fail "no commprof-<job>.h5 in $T/out: $(cat "$WORK/srun6.err")"
check_hang "$F"
fi

# 7. sbatch with COMMPROF_HANG_TIMEOUT/COMMPROF_ON_HANG: the batch script's aggregator watches too
if want 7; then
echo "slurm_test: 7. sbatch slurm/commprof.sbatch with COMMPROF_HANG_TIMEOUT=3 COMMPROF_ON_HANG=abort"
mkdir -p "$T/batch7"
sed '/--gpus-per-task/d' "$SRC/slurm/commprof.sbatch" >"$T/batch7/commprof.sbatch"
JOB=$(cd "$T/batch7" && COMMPROF="$COMMPROF" COMMPROF_HANG_TIMEOUT=3 COMMPROF_ON_HANG=abort timeout 180 sbatch --parsable \
  --wait -N 1 -n 4 --overcommit -o "$T/batch7/job-%j.out" "$T/batch7/commprof.sbatch" "$HANG_APP" skip-allreduce 2 3 \
  2>"$WORK/sbatch7.err")
RC=$?
JOB=$(echo "$JOB" | tail -n 1 | cut -d';' -f1)
cp "$T"/batch7/job-*.out "$WORK/" 2>/dev/null
[ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] || fail "sbatch --wait of a hung job exited $RC: $(cat "$WORK/sbatch7.err"; cat "$T"/batch7/job-*.out)"
[ -f "$T/batch7/commprof-$JOB.h5" ] || fail "the batch job left no commprof-$JOB.h5: $(ls "$T/batch7"); $(cat "$T"/batch7/job-*.out)"
check_hang "$T/batch7/commprof-$JOB.h5"
grep -q "culprits: rank 2" "$T/batch7/commprof-$JOB.report.txt" || fail "the batch job's report does not name rank 2"
fi

# 5. without the option nothing changes: the same variable names with the plugin as without it
if want 5; then
echo "slurm_test: 5. without --commprof the task environment is untouched"
names() { timeout 60 srun -N 1 -n 1 env | cut -d= -f1 | sort; }
with_plugin=$(names) || fail "srun env with the plugin"
echo "" >"$T/plugstack.conf"
without_plugin=$(names) || fail "srun env without the plugin"
echo "$PLUGSTACK_LINE" >"$T/plugstack.conf"
if [ "$with_plugin" != "$without_plugin" ]; then
  diff <(echo "$without_plugin") <(echo "$with_plugin")
  fail "the plugin changed the task environment without --commprof"
fi
if echo "$with_plugin" | grep -Eq '^(COMMPROF_|LD_PRELOAD$|NCCL_PROFILER_PLUGIN$|NVTX_INJECTION64_PATH$|CUDA_INJECTION64_PATH$)'; then
  fail "a commprof variable is set without --commprof"
fi
with_option=$(timeout 60 srun --commprof -N 1 -n 1 env 2>"$WORK/srun5.err" | cut -d= -f1 | sort) \
  || fail "srun --commprof env: $(cat "$WORK/srun5.err")"
for v in LD_PRELOAD COMMPROF_AGGREGATOR COMMPROF_SECRET COMMPROF_JOB_ID COMMPROF_ACTIVITIES NVTX_INJECTION64_PATH; do
  echo "$with_option" | grep -qx "$v" || fail "srun --commprof: $v is not set in the task"
done
fi
echo "slurm_test: ok"
