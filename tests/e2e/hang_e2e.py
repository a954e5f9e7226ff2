"""The hang diagnosis end to end (docs/hangs.md, docs/cli.md "Hang detection"), on real Open MPI
jobs of hang_program.c (4 ranks; 6 and 8 for some) with planted faults, the truth being the plant:
which rank, which communicator, which sequence number, which kind of fault (PLANTS below).

Live (`commprof run --hang-timeout 2 --on-hang abort`): exit 5, exactly one report on stderr whose
verdict and culprits lines are the file's; the file's /hang group, read by h5py in a second process:
attributes, `report_json` (docs/report-json.md `hang.*`) and the `inflight`/`ranks` tables
(docs/file-format.md "The hang group"). Asserted exactly: culprits == the planted ranks, the stuck
communicator and seq, the members waiting in it (all the others) and in what, where each culprit is
instead, the mismatch kind with every side's value and ranks, p2p waits with peer and tag; ages at
least the timeout less 0.25 s (the watchdog's clock against each rank's own) and under the job's life.

After the fact (`file_*`): the same plants run WITHOUT --hang-timeout; once the planted rank printed
that its plant is in place and 3 s passed, `commprof run` alone gets one SIGTERM (it forwards it to
mpirun, which TERMs the ranks): every rank flushes its in-flight call INCOMPLETE, `commprof check`
exits 3 with `FAIL hang: VERDICT`, `commprof report --format json` has the same diagnosis with source
`file`, and the text report starts with the hang section. (A SIGTERM to the whole process group, as
`timeout` without --foreground sends, reaches mpirun twice; Open MPI 4.1 then sometimes kills the
ranks before they flush: that race is why the signal goes to `commprof run` only.)

allreduce_bytes: a count mismatch is a crash in Open MPI (MPI_ERR_TRUNCATE), not a hang: see its
docstring for what the file then says. NCCL (`nccl`): tests/nccl/nccl_profiler_driver with
--hang-rank 2 --hang-iter 3 under commprof's plugin. Healthy jobs (5 s of computation with a 2 s
timeout; 3000 back-to-back allreduces) report nothing and exit 0. Bad option values are usage errors
(exit 2) naming the option and the value. Every job runs under `timeout`, and whatever it leaves
(ranks are reparented away from mpirun) is killed by pid.

Usage: hang_e2e.py CASE --build BUILD_DIR --work WORK_DIR
"""
import json
import os
import signal
import subprocess
import sys
import time

import e2e_support as es

PY = "/usr/bin/python3"  # Debian's, with python3-h5py
OUTER_TIMEOUT = 120  # seconds: the `timeout` around every job
TIMEOUT_S = 2.0  # --hang-timeout of the live cases
AGE_SLACK_S = 0.25  # an age may read this much under the timeout: the watchdog's clock vs the rank's
WORLD = 1  # MPI_COMM_WORLD's id
INCOMPLETE, NONBLOCKING = 1 << 1, 1 << 0

# Each plant: program args, ranks, culprits, and the findings (one per stuck stream, by comm
# "world"/"sub"/"nccl"): seq, op, kind, the ranks waiting in it (by what they called), the ranks
# that never entered it (state, the start of `where`), the mismatch (kind, [(value, ranks)]).
# `completed_or_waiting`: rooted collectives complete on some ranks, which ones is the MPI
# library's algorithm: only the union is asserted.
PLANTS = {
    "skip_allreduce": dict(
        args=["skip-allreduce", "2", "3"], ranks=4, culprits=[2],
        findings=[dict(comm="world", seq=3, op="MPI_Allreduce", kind="mismatch",
                       waiting={"MPI_Allreduce": [0, 1, 3], "MPI_Barrier": [2]}, not_entered={},
                       mismatch=("COLLECTIVE_TYPE", [("MPI_Allreduce", [0, 1, 3]), ("MPI_Barrier", [2])]))]),
    "bcast_root": dict(
        args=["bcast-root", "1", "2"], ranks=4, culprits=[1],
        findings=[dict(comm="world", seq=2, op="MPI_Bcast", kind="mismatch", completed_or_waiting=[0, 1, 2, 3],
                       not_entered={}, mismatch=("ROOT", [("root 0", [0, 2, 3]), ("root 2", [1])]))]),
    "recv_forever": dict(
        args=["recv-forever", "2", "2"], ranks=4, culprits=[2],
        findings=[dict(comm="world", seq=2, op="MPI_Barrier", kind="never_entered",
                       waiting={"MPI_Barrier": [0, 1, 3]},
                       not_entered={2: ("in_other_op", "in MPI_Recv from rank 0 tag 4242 on MPI_COMM_WORLD for ")})],
        p2p=[dict(rank=2, op="MPI_Recv", comm_id=WORLD, peer=0, peer_world=0, tag=4242)]),
    "skip_split": dict(  # the split is collective over the world: it takes the world's number 2
        args=["skip-split", "1", "2"], ranks=4, culprits=[1],
        findings=[dict(comm="world", seq=2, op="MPI_Comm_split", kind="mismatch",
                       waiting={"MPI_Comm_split": [0, 2, 3], "MPI_Barrier": [1]}, not_entered={},
                       mismatch=("COLLECTIVE_TYPE", [("MPI_Comm_split", [0, 2, 3]), ("MPI_Barrier", [1])]))]),
    "exit_early": dict(
        args=["exit-early", "1", "3"], ranks=4, culprits=[1],
        findings=[dict(comm="world", seq=3, op="MPI_Allreduce", kind="never_entered",
                       waiting={"MPI_Allreduce": [0, 2, 3]}, not_entered={1: ("in_finalize", "in MPI_Finalize")})]),
    "subcomm": dict(  # world is fine: ranks 0 and 1 are in MPI_Finalize, no world collective is stuck
        args=["subcomm", "3", "2"], ranks=4, culprits=[3],
        findings=[dict(comm="sub", size=2, seq=2, op="MPI_Allreduce", kind="never_entered",
                       waiting={"MPI_Allreduce": [2]}, not_entered={3: ("idle", "idle (in no communication call")})]),
    "subcomm_cycle": dict(  # a wait cycle across two communicators: both ends named (hang_program.c)
        args=["subcomm-cycle", "3", "2"], ranks=4, culprits=[2, 3],
        findings=[dict(comm="world", seq=0, op="MPI_Barrier", kind="never_entered", waiting={"MPI_Barrier": [0, 1, 3]},
                       not_entered={2: ("in_other_op", "in MPI_Allreduce #2 on comm 0x")}),
                  dict(comm="sub", size=2, seq=2, op="MPI_Allreduce", kind="never_entered",
                       waiting={"MPI_Allreduce": [2]},
                       not_entered={3: ("in_other_op", "in MPI_Barrier #0 on MPI_COMM_WORLD for ")})]),
    "tp_dp_chain": dict(  # rank 3 stops; rank 2 waits for it in TP {2,3} and so never enters DP {0,2}
        args=["tp-dp", "3", "2"], ranks=4, culprits=[3], consequences=[2],
        findings=[dict(comm="sub", members=[2, 3], size=2, seq=2, op="MPI_Allreduce", kind="never_entered",
                       waiting={"MPI_Allreduce": [2]}, not_entered={3: ("idle", "idle (in no communication call")}),
                  dict(comm="sub", members=[0, 2], size=2, seq=2, op="MPI_Allreduce", kind="never_entered",
                       waiting={"MPI_Allreduce": [0]},
                       not_entered={2: ("in_other_op", "in MPI_Allreduce #2 on comm 0x")}),
                  dict(comm="sub", members=[1, 3], size=2, seq=2, op="MPI_Allreduce", kind="never_entered",
                       waiting={"MPI_Allreduce": [1]}, not_entered={3: ("idle", "idle (in no communication call")})]),
    "nonblocking": dict(
        args=["nonblocking", "0", "2"], ranks=4, culprits=[0],
        findings=[dict(comm="world", seq=2, op="MPI_Allreduce", kind="never_entered",
                       waiting={"MPI_Iallreduce (pending)": [1, 2, 3]},
                       not_entered={0: ("idle", "idle (in no communication call")})]),
    "sendrecv": dict(
        args=["sendrecv", "1", "1"], ranks=4, culprits=[1],
        findings=[dict(comm="world", seq=1, op="MPI_Barrier", kind="never_entered", waiting={"MPI_Barrier": [0, 2, 3]},
                       not_entered={1: ("in_other_op", "in MPI_Sendrecv to rank 2 tag 7 on MPI_COMM_WORLD for ")})],
        p2p=[dict(rank=1, op="MPI_Sendrecv", comm_id=WORLD, peer=2, peer_world=2, tag=7)]),
    "eight_ranks": dict(
        args=["skip-allreduce", "6", "4"], ranks=8, culprits=[6],
        findings=[dict(comm="world", seq=4, op="MPI_Allreduce", kind="mismatch",
                       waiting={"MPI_Allreduce": [0, 1, 2, 3, 4, 5, 7], "MPI_Barrier": [6]}, not_entered={},
                       mismatch=("COLLECTIVE_TYPE",
                                 [("MPI_Allreduce", [0, 1, 2, 3, 4, 5, 7]), ("MPI_Barrier", [6])]))]),
    "two_culprits": dict(  # ranks 1 and 4 of 6 skip: a majority of 4 against them
        args=["skip-two", "1", "2"], ranks=6, culprits=[1, 4],
        findings=[dict(comm="world", seq=2, op="MPI_Allreduce", kind="mismatch",
                       waiting={"MPI_Allreduce": [0, 2, 3, 5], "MPI_Barrier": [1, 4]}, not_entered={},
                       mismatch=("COLLECTIVE_TYPE", [("MPI_Allreduce", [0, 2, 3, 5]), ("MPI_Barrier", [1, 4])]))]),
}
FILE_CASES = ["skip_allreduce", "bcast_root", "recv_forever", "exit_early", "nonblocking", "tp_dp_chain"]
CASES = (sorted(PLANTS) + ["file_" + c for c in FILE_CASES] +
         ["halo", "file_group_term", "allreduce_bytes", "file_allreduce_bytes", "nccl", "healthy_quiet_phase", "healthy_fast",
          "report_keeps_waiting", "bad_options"])

READER = r"""
import h5py, json, sys
f = h5py.File(sys.argv[1], 'r')
g = f.get('hang')
if g is None:
    print('null'); sys.exit()
def rows(name):
    t = g[name][...]
    return [{k: (v.decode() if isinstance(v, bytes) else v.item()) for k, v in zip(t.dtype.names, r)} for r in t]
attrs = {k: ([] if isinstance(v, h5py.Empty) else v.tolist() if hasattr(v, 'tolist') else v)
         for k, v in g.attrs.items()}  # an empty rank list is a null dataspace
attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
rj = g['report_json'][()]
print(json.dumps({'attrs': attrs, 'report': json.loads(rj.decode() if isinstance(rj, bytes) else rj),
                  'inflight': rows('inflight'), 'ranks': rows('ranks')}))
"""


def read_hang(path):
    """The /hang group (attributes, report_json, inflight and ranks tables) by h5py in a second
    process; None when the file has no /hang."""
    p = subprocess.run([PY, "-c", READER, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    es.expect(p.returncode == 0, f"h5py could not read {path}: {p.stderr}")
    return json.loads(p.stdout)


def descendants(pid):
    """Every live process below `pid` (read from /proc), so what a job leaves can be killed by pid."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def job_cmd(ctx, out, args, ranks, hang_timeout=TIMEOUT_S, on_hang="abort", program=None):
    opts = [] if hang_timeout is None else ["--hang-timeout", str(hang_timeout), "--on-hang", on_hang]
    return ([ctx.commprof, "run"] + opts + ["-o", out, "--"] + es.mpirun(ranks) +
            [program or ctx.test_program("hang_program")] + args)


def run_to_end(ctx, cmd):
    """Runs `cmd` under `timeout -s KILL`; returns (exit code, stdout, stderr)."""
    p = subprocess.Popen(["timeout", "-s", "KILL", str(OUTER_TIMEOUT)] + cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        so, se = p.communicate(timeout=OUTER_TIMEOUT + 30)
    finally:
        kill_all(descendants(p.pid))
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, so, se


def run_then_term(ctx, cmd, planted_ranks, settle_s=3.0, group=False):
    """Runs `cmd` until every rank in `planted_ranks` printed that its plant is in place, waits
    `settle_s` for the others to block, then sends `commprof run` (only it) one SIGTERM, which it
    forwards to mpirun. With `group`, as `timeout` does: one SIGTERM to `commprof run`, then one to
    its whole process group (mpirun and the ranks included: a Slurm time limit and a terminal's
    Ctrl-C also signal every process). Returns (exit code, stdout, stderr)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=group)
    lines = []
    try:
        deadline = time.time() + 60
        need = {f"hang_program: rank {r} planted" for r in planted_ranks}
        while need and time.time() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(line)
            need.discard(line.strip())
        es.expect(not need, f"the plant never happened ({need} missing); stdout:\n{''.join(lines)}")
        time.sleep(settle_s)
        p.send_signal(signal.SIGTERM)
        if group:
            os.killpg(p.pid, signal.SIGTERM)
        so, se = p.communicate(timeout=OUTER_TIMEOUT)
    finally:
        kill_all(descendants(p.pid))
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, "".join(lines) + so, se


def hang_lines(stderr):
    return [line[len("commprof: hang: "):] for line in stderr.splitlines() if line.startswith("commprof: hang: ")]


def check_diagnosis(name, rep, plant, world_size, live, detail):
    """The report's `hang` object against the plant; `live`: ages are checked against the timeout."""
    d = f"{name}: {json.dumps(rep)[:3000]}{detail}"
    es.expect(rep["hang"] is True, f"hang is not true: {d}")
    es.expect(rep["culprits"] == plant["culprits"], f"culprits {rep['culprits']}, planted {plant['culprits']}: {d}")
    es.expect(rep["world_size"] == world_size, f"world_size {rep['world_size']}: {d}")
    es.expect(rep["source"] == ("live" if live else "file"), f"source {rep['source']}: {d}")
    if live:
        es.expect(rep["timeout_s"] == TIMEOUT_S and rep["detected_utc_ns"] > 0, f"timeout/detected: {d}")
    else:
        es.expect(rep["timeout_s"] == 0 and rep["detected_utc_ns"] == 0, f"file source with timeout fields: {d}")
    comms = rep["comms"]
    es.expect(len(comms) == len(plant["findings"]), f"{len(comms)} findings, expected {len(plant['findings'])}: {d}")
    union = set()
    for want in plant["findings"]:
        if want["comm"] == "world":
            got = [c for c in comms if c["comm_id"] == WORLD]
        else:
            got = [c for c in comms if c["comm_id"] != WORLD and not c["nccl"] and (
                "members" not in want or want["members"] == sorted(
                    c["completed"] + [w["rank"] for w in c["waiting"]] + [a["rank"] for a in c["not_entered"]]))]
        es.expect(len(got) == 1, f"no single finding on the {want['comm']} communicator: {d}")
        c = got[0]
        where = f"{name} {c['comm_name']}"
        if want["comm"] == "world":
            es.expect(c["comm_name"] == "MPI_COMM_WORLD" and c["size"] == world_size, f"{where}: name/size: {d}")
        else:
            es.expect(c["size"] == want["size"] and c["comm_name"].startswith("comm 0x"), f"{where}: name/size: {d}")
        es.expect(c["seq"] == want["seq"] and c["op"] == want["op"] and c["kind"] == want["kind"],
                  f"{where}: #{c['seq']} {c['op']} {c['kind']}, planted #{want['seq']} {want['op']} {want['kind']}: {d}")
        es.expect(c["unknown_members"] == 0, f"{where}: unknown members: {d}")
        waiting = {}
        for w in c["waiting"]:
            waiting.setdefault(w["op"], []).append(w["rank"])
            if live:
                es.expect(TIMEOUT_S - AGE_SLACK_S <= w["waiting_s"] < OUTER_TIMEOUT,
                          f"{where}: rank {w['rank']} waiting {w['waiting_s']} s, timeout {TIMEOUT_S} s: {d}")
        if "completed_or_waiting" in want:
            both = sorted(c["completed"] + [w["rank"] for w in c["waiting"]])
            es.expect(both == want["completed_or_waiting"], f"{where}: completed+waiting {both}: {d}")
        else:
            es.expect(waiting == want["waiting"] and c["completed"] == [],
                      f"{where}: waiting {waiting} completed {c['completed']}, planted {want['waiting']}: {d}")
        got_ne = {a["rank"]: a for a in c["not_entered"]}
        es.expect(sorted(got_ne) == sorted(want["not_entered"]), f"{where}: not entered {sorted(got_ne)}: {d}")
        for rank, (state, where_prefix) in want["not_entered"].items():
            a = got_ne[rank]
            es.expect(a["state"] == state and a["where"].startswith(where_prefix),
                      f"{where}: rank {rank} {a['state']} '{a['where']}', expected {state} '{where_prefix}...': {d}")
        if "mismatch" in want:
            kind, sides = want["mismatch"]
            got_mm = [(m["kind"], [(s["value"], s["ranks"]) for s in m["sides"]]) for m in c["mismatches"]]
            es.expect(got_mm == [(kind, [(v, r) for v, r in sides])], f"{where}: mismatches {got_mm}: {d}")
        else:
            es.expect(c["mismatches"] == [], f"{where}: unexpected mismatches: {d}")
        es.expect(c["culprits"] == sorted(want["not_entered"]) + (
            sorted(r for _, rs in want["mismatch"][1][1:] for r in rs) if "mismatch" in want else []),
            f"{where}: finding culprits {c['culprits']}: {d}")
        es.expect(c["verdict"] in rep["verdict"], f"{where}: its verdict is not in the job's: {d}")
        union.update(c["culprits"])
    es.expect(rep["consequences"] == plant.get("consequences", []),
              f"held up: {rep['consequences']}, planted {plant.get('consequences', [])}: {d}")
    es.expect(sorted(union) == sorted(rep["culprits"] + rep["consequences"]),
              f"the findings' culprits do not add up to the culprits and those held up: {d}")
    p2p = [{k: e[k] for k in ("rank", "op", "comm_id", "peer", "peer_world", "tag")} for e in rep["p2p"]]
    es.expect(p2p == plant.get("p2p", []), f"p2p {p2p}, expected {plant.get('p2p', [])}: {d}")
    es.expect([r["rank"] for r in rep["ranks"]] == list(range(world_size)), f"ranks list: {d}")
    for r in rep["ranks"]:
        es.expect(r["answered"] is True, f"rank {r['rank']} did not answer: {d}")
        if live:
            es.expect(r["condition"] == "running", f"rank {r['rank']} is {r['condition']}: {d}")
        else:
            es.expect(r["end_reason"] == "killed by signal 15 (SIGTERM)" and r["condition"] == "running",
                      f"rank {r['rank']}: {r['condition']} '{r['end_reason']}': {d}")
    # Each culprit's own position, in its rank line too.
    for want in plant["findings"]:
        for rank, (_, prefix) in want["not_entered"].items():
            doing = rep["ranks"][rank]["doing"]
            es.expect(doing.startswith(prefix), f"rank {rank} is doing '{doing}', expected '{prefix}...': {d}")


def check_tables(name, h, plant, world_size):
    """The /hang tables against the plant: one row per rank (all answered), in-flight rows with the
    stuck call's identity for every waiting rank, the recv/sendrecv row with its peer and tag."""
    es.expect(sorted(r["rank"] for r in h["ranks"]) == list(range(world_size)), f"{name}: /hang/ranks {h['ranks']}")
    es.expect(all(r["answered"] == 1 and r["condition"] == "running" for r in h["ranks"]),
              f"{name}: /hang/ranks {h['ranks']}")
    rows = h["inflight"]
    for want in plant["findings"]:
        if "waiting" not in want:
            continue
        for op, ranks in want["waiting"].items():
            if op.startswith("MPI_Comm_"):
                continue  # stored as the collector published it: kind 6 on the parent, unnumbered
            for rank in ranks:
                mine = [r for r in rows if r["rank"] == rank and r["kind"] == 3 and r["seq"] == want["seq"] and
                        (r["comm_id"] == WORLD) == (want["comm"] == "world")]
                es.expect(len(mine) == 1, f"{name}: rank {rank}: no in-flight row for #{want['seq']}: {rows}")
                es.expect(mine[0]["age_ns"] >= (TIMEOUT_S - AGE_SLACK_S) * 1e9, f"{name}: rank {rank} age: {mine[0]}")
    for p in plant.get("p2p", []):
        mine = [r for r in rows if r["rank"] == p["rank"] and r["kind"] == 4]
        es.expect(len(mine) == 1 and mine[0]["peer"] == p["peer"] and mine[0]["tag"] == p["tag"] and
                  mine[0]["comm_id"] == p["comm_id"], f"{name}: rank {p['rank']}'s p2p row: {rows}")


def live_case(ctx, name):
    plant = PLANTS[name]
    out = ctx.path("hang.h5")
    rc, _, se = run_to_end(ctx, job_cmd(ctx, out, plant["args"], plant["ranks"]))
    detail = f"\nstderr:\n{se}"
    es.expect(rc == 5, f"{name}: exit code {rc}, expected 5 (ended for a hang){detail}")
    es.expect(se.count("commprof: hang: HANG (live,") == 1, f"{name}: not exactly one report{detail}")
    es.expect(se.count("commprof: hang: --on-hang abort") == 1, f"{name}: not exactly one abort{detail}")
    h = read_hang(out)
    es.expect(h is not None, f"{name}: {out} has no /hang group{detail}")
    rep, attrs = h["report"], h["attrs"]
    check_diagnosis(name, rep, plant, plant["ranks"], True, detail)
    es.expect(attrs["source"] == "live" and attrs["hang"] == 1 and attrs["timeout_s"] == TIMEOUT_S and
              attrs["world_size"] == plant["ranks"] and attrs["verdict"] == rep["verdict"] and
              list(attrs["culprits"]) == plant["culprits"] and
              list(attrs["consequences"]) == plant.get("consequences", []), f"{name}: /hang attributes {attrs}")
    verdicts = [line.strip()[len("verdict: "):] for line in hang_lines(se) if line.strip().startswith("verdict: ")]
    es.expect(verdicts == [rep["verdict"]], f"{name}: stderr's verdict {verdicts} is not the file's{detail}")
    culprit_lines = [line.strip() for line in hang_lines(se) if line.strip().startswith("culprits: ")]
    want = ("rank " if len(plant["culprits"]) == 1 else "ranks ") + ",".join(map(str, plant["culprits"]))
    es.expect(culprit_lines == ["culprits: " + want], f"{name}: stderr culprits {culprit_lines}{detail}")
    check_tables(name, h, plant, plant["ranks"])


def file_report(ctx, out):
    """`commprof check` (exit code, output), the report JSON's hang object, the text report."""
    chk = es.run([ctx.commprof, "check", out], timeout=120)
    js = es.run([ctx.commprof, "report", "--format", "json", out], timeout=120, check_rc=0)
    txt = es.run([ctx.commprof, "report", out], timeout=120, check_rc=0)
    return chk, json.loads(js.stdout)["hang"], txt.stdout


def file_case(ctx, name, group=False):
    """After the fact: no --hang-timeout, the job ended by SIGTERM; the diagnosis from the file."""
    plant = PLANTS[name]
    out = ctx.path("term.h5")
    planted = [int(plant["args"][1])]
    rc, _, se = run_then_term(ctx, job_cmd(ctx, out, plant["args"], plant["ranks"], hang_timeout=None), planted,
                              group=group)
    detail = f"\nstderr of run:\n{se}"
    es.expect(rc not in (0, 5), f"{name}: exit code {rc}: the job was signalled, not finished or aborted{detail}")
    es.expect(not hang_lines(se), f"{name}: a live hang report without --hang-timeout{detail}")
    es.expect(read_hang(out) is None, f"{name}: /hang without --hang-timeout")
    chk, rep, text = file_report(ctx, out)
    es.expect(rep is not None, f"{name}: report JSON hang is null{detail}")
    check_diagnosis(name, rep, plant, plant["ranks"], False, detail)
    es.expect(chk.returncode == 3, f"{name}: check exit {chk.returncode}, expected 3\n{chk.stdout}{chk.stderr}")
    es.expect(f"FAIL hang: {rep['verdict']}" in chk.stdout + chk.stderr, f"{name}: check output:\n{chk.stdout}")
    first = text.splitlines()[:2]
    es.expect(first and first[0].startswith("HANG (file, ") and first[1].strip() == f"verdict: {rep['verdict']}",
              f"{name}: the text report does not start with the hang section:\n{text[:1500]}")


def allreduce_bytes(ctx, live):
    """Rank 3's 3rd allreduce (8 MiB) has twice the count. Open MPI does not hang on it: a rank that
    receives the larger piece (1 or 2, varying) fails with MPI_ERR_TRUNCATE; errors being fatal, it
    exits at once, flushing nothing (`disconnected`: it reads as died), and mpirun kills the rest,
    most often by a SIGTERM they survive long enough to store their in-flight allreduce #2
    INCOMPLETE, but not always (a rank killed in the middle of its flush is `disconnected` too).
    Live, this is most often a crash before the timeout: no report, no /hang, the job's own exit
    code. On a loaded machine mpirun may take longer than the timeout to end the others: then the
    survivors are stuck, the watchdog fires, and its diagnosis must name the dead rank(s) (and rank
    3 by its SIZE when another survivor waits beside it). From the file, the diagnosis must match
    what the file holds, whichever way the race went: the flushed ranks wait in allreduce #2, the
    dead ones never entered it, and when rank 3 and another flushed, the SIZE mismatch names rank 3
    alone on its side; culprits are exactly the dead plus rank 3. A dead rank may have shipped only
    up to allreduce #0 or #1 (seen beside a compile: its last records died in its buffers); the
    flushed ranks completed #1, an allreduce with data that needs every member, so the dead rank
    did enter it and the diagnosis is still #2 (docs/hangs.md: a dead rank's number is set aside)."""
    out = ctx.path("bytes.h5")
    args = ["allreduce-bytes", "3", "2"]
    rc, _, se = run_to_end(ctx, job_cmd(ctx, out, args, 4, hang_timeout=TIMEOUT_S if live else None))
    detail = f"\nstderr of run:\n{se}"
    if live and rc == 5:
        live_crash_seen_as_hang(out, se, detail)
        return
    es.expect(rc not in (0, 5, 124, 137), f"exit code {rc}: expected the crashed job's own{detail}")
    es.expect(not hang_lines(se) and read_hang(out) is None, f"a crash was reported as a live hang{detail}")
    chk, rep, _ = file_report(ctx, out)
    sts = es.run([PY, "-c", "import h5py,sys,json;f=h5py.File(sys.argv[1],'r');print(json.dumps("
                  "[(str(f['ranks'][str(r)].attrs['end_reason']),int(((f['ranks'][str(r)]['events']['kind']==3)&"
                  "((f['ranks'][str(r)]['events']['flags']&2)==0)).sum())) for r in range(4)]))", out],
                 timeout=60, check_rc=0)
    ends = [e for e, _ in json.loads(sts.stdout)]
    done = [n for _, n in json.loads(sts.stdout)]
    flushed = [r for r in range(4) if ends[r] == "killed by signal 15 (SIGTERM)"]
    died = [r for r in range(4) if r not in flushed]
    d = f"end reasons {ends}; {json.dumps(rep)}{detail}"
    es.expect(died, f"no rank died: {d}")
    if not flushed:
        es.expect(rep is None and chk.returncode != 3, f"no rank flushed, yet a hang: {d}")
        print("allreduce_bytes: every rank was killed before its flush (no in-flight call stored)")
        return
    es.expect(chk.returncode == 3 and rep is not None and rep["source"] == "file", f"check {chk.returncode}: {d}")
    es.expect(len(rep["comms"]) == 1, f"findings: {d}")
    c = rep["comms"][0]
    es.expect(sorted(r["rank"] for r in rep["ranks"] if r["condition"] == "died") == died, f"died: {d}")
    # A dead rank's last allreduces may not have been shipped before its exit; the flushed ranks'
    # completed #1 (with data: every member entered it) sets that short record aside.
    es.expect(c["comm_id"] == WORLD and c["seq"] == 2 and c["op"] == "MPI_Allreduce", f"finding (#2): {d}")
    if any(done[r] < 2 for r in died):
        print(f"allreduce_bytes: dead rank(s) {[r for r in died if done[r] < 2]} stored calls ending before #2; "
              "set aside, the diagnosis is #2")
    es.expect(sorted(w["rank"] for w in c["waiting"]) == flushed, f"waiting (the flushed, INCOMPLETE) ranks: {d}")
    es.expect([(a["rank"], a["state"]) for a in c["not_entered"]] == [(r, "died") for r in died], f"not entered: {d}")
    small = 8 * (1 << 20)
    rest = [r for r in flushed if r != 3]
    if 3 in flushed and rest:
        es.expect([(m["kind"], [(s["value"], s["ranks"]) for s in m["sides"]]) for m in c["mismatches"]] ==
                  [("SIZE", [(f"{small} B", rest), (f"{2 * small} B", [3])])], f"mismatch: {d}")
        es.expect(c["kind"] == "never_entered+mismatch", f"kind: {d}")
    else:
        es.expect(c["mismatches"] == [] and c["kind"] == "never_entered", f"a mismatch with one side only: {d}")
    es.expect(rep["culprits"] == sorted(set(died) | ({3} if 3 in flushed and rest else set())), f"culprits: {d}")


def live_crash_seen_as_hang(out, se, detail):
    """allreduce_bytes, live, when the watchdog fired before mpirun ended the survivors."""
    es.expect(se.count("commprof: hang: HANG (live,") == 1, f"not exactly one live report{detail}")
    h = read_hang(out)
    es.expect(h is not None, f"exit code 5 without a /hang group{detail}")
    rep = h["report"]
    d = f"{json.dumps(rep)}{detail}"
    died = [r["rank"] for r in rep["ranks"] if r["condition"] == "died"]
    alive = [r for r in range(4) if r not in died]
    es.expect(rep["source"] == "live" and died and len(rep["comms"]) == 1, f"live diagnosis: {d}")
    c = rep["comms"][0]
    es.expect(c["comm_id"] == WORLD and c["seq"] == 2 and c["op"] == "MPI_Allreduce", f"finding: {d}")
    es.expect(sorted(w["rank"] for w in c["waiting"]) == alive, f"the survivors wait in #2: {d}")
    es.expect([(a["rank"], a["state"]) for a in c["not_entered"]] == [(r, "died") for r in died], f"dead: {d}")
    size_side = 3 in alive and len(alive) > 1
    es.expect([(m["kind"], [s["ranks"] for s in m["sides"]]) for m in c["mismatches"]] ==
              ([("SIZE", [[r for r in alive if r != 3], [3]])] if size_side else []), f"mismatch: {d}")
    es.expect(rep["culprits"] == sorted(died + ([3] if size_side else [])) and rep["consequences"] == [],
              f"culprits: {d}")
    print(f"allreduce_bytes: mpirun was slower than the timeout; the live diagnosis names {rep['culprits']}")


def halo_case(ctx):
    """A periodic halo exchange on 5 ranks (point-to-point only); rank 2 stops computing at step 3.
    Its neighbours 1 and 3 wait on requests to and from it, ranks 0 and 4 on them (which of their
    requests are still pending is the MPI library's business: not asserted). Truth: rank 2 alone
    is the culprit, every other rank is held up, the verdict has rank 2's part first and only."""
    out = ctx.path("halo.h5")
    rc, _, se = run_to_end(ctx, job_cmd(ctx, out, ["halo", "2", "3"], 5))
    detail = f"\nstderr:\n{se}"
    es.expect(rc == 5 and se.count("commprof: hang: HANG (live,") == 1, f"exit code {rc}, one report?{detail}")
    h = read_hang(out)
    es.expect(h is not None, f"no /hang{detail}")
    rep = h["report"]
    d = f"{json.dumps(rep)[:3000]}{detail}"
    es.expect(rep["comms"] == [] and rep["culprits"] == [2] and rep["consequences"] == [0, 1, 3, 4], f"blame: {d}")
    es.expect(list(h["attrs"]["culprits"]) == [2] and list(h["attrs"]["consequences"]) == [0, 1, 3, 4], f"attrs: {d}")
    es.expect(rep["verdict"].startswith("rank 2: idle (in no communication call") and
              "rank 0" not in rep["verdict"] and "; ranks 1,3 wait for it in MPI_Waitall (pending MPI_" in rep["verdict"],
              f"verdict: {d}")
    waits = {(w["rank"], w["peer_world"]) for w in rep["p2p"]}
    es.expect({(1, 2), (3, 2)} <= waits and all(r != 2 for r, _ in waits) and all(p >= 0 for _, p in waits),
              f"p2p waits {sorted(waits)}: {d}")
    es.expect(rep["ranks"][2]["doing"].startswith("idle") and
              all(rep["ranks"][r]["doing"].startswith("in MPI_Waitall") for r in (0, 1, 3, 4)), f"positions: {d}")
    txt = es.run([ctx.commprof, "report", out], timeout=120, check_rc=0).stdout
    es.expect("  culprits: rank 2\n" in txt and "  held up behind them: ranks 0,1,3,4 " in txt, f"text report:\n{txt}")
    page = es.run([ctx.commprof, "report", "--format", "html", out], timeout=120, check_rc=0).stdout
    es.expect("<h2>Hang: rank 2</h2>" in page and
              "waiting in another stuck call): ranks 0, 1, 3, 4.</p>" in page, "the HTML hang section lacks culprit/held up")


def nccl_case(ctx):
    """Rank 2's ncclAllReduce #3 (NCCL's seqNumber: per collective type) is enqueued but its kernel
    never runs; the others finish theirs and wait in the next MPI_Barrier."""
    driver = os.path.join(ctx.build, "tests", "nccl", "nccl_profiler_driver")
    plugin = os.path.join(ctx.build, "nccl_hooks", "libnccl-profiler-commprof.so")
    es.expect(os.path.exists(driver) and os.path.exists(plugin), f"{driver} or {plugin} is not built")
    out = ctx.path("nccl.h5")
    args = ["--abi", "v5", "--iters", "10", "--count", "4096", "--hang-rank", "2", "--hang-iter", "3"]
    rc, so, se = run_to_end(ctx, job_cmd(ctx, out, args, 4, program=driver))
    detail = f"\nstdout:\n{so}\nstderr:\n{se}"
    es.expect("rank 2 hung in ncclAllReduce seq 3" in so, f"the driver did not plant the hang{detail}")
    es.expect(rc == 5 and se.count("commprof: hang: HANG (live,") == 1, f"exit code {rc}, one report?{detail}")
    h = read_hang(out)
    es.expect(h is not None, f"no /hang{detail}")
    rep = h["report"]
    d = f"{json.dumps(rep)}{detail}"
    es.expect(rep["culprits"] == [2] and h["attrs"]["culprits"] == [2], f"culprits: {d}")
    world = [c for c in rep["comms"] if c["comm_id"] == WORLD]
    nccl = [c for c in rep["comms"] if c["nccl"]]
    es.expect(len(world) == 1 and len(nccl) == 1 and len(rep["comms"]) == 2, f"findings: {d}")
    w, n = world[0], nccl[0]
    es.expect(w["op"] == "MPI_Barrier" and w["kind"] == "never_entered" and w["culprits"] == [2] and
              sorted(x["rank"] for x in w["waiting"]) == [0, 1, 3], f"world finding: {d}")
    es.expect([(a["rank"], a["state"]) for a in w["not_entered"]] == [(2, "in_other_op")] and
              w["not_entered"][0]["where"].startswith(f"in ncclAllReduce #3 on {n['comm_name']} for "), f"rank 2: {d}")
    es.expect(n["seq"] == 3 and n["op"] == "ncclAllReduce" and n["size"] == 4 and
              n["comm_name"].startswith("nccl comm 0x") and [x["rank"] for x in n["waiting"]] == [2] and
              n["completed"] == [0, 1, 3] and n["not_entered"] == [], f"NCCL finding: {d}")
    es.expect(all(x["waiting_s"] >= TIMEOUT_S - AGE_SLACK_S for c in rep["comms"] for x in c["waiting"]), f"ages: {d}")
    row = [r for r in h["inflight"] if r["rank"] == 2]
    es.expect(len(row) == 1 and row[0]["kind"] == 17 and row[0]["op"] == 4 and row[0]["seq"] == 3 and
              row[0]["bytes"] == 4096 * 4 and row[0]["comm_id"] == n["comm_id"], f"rank 2's in-flight row: {row}")


def healthy(ctx, args, what):
    out = ctx.path("healthy.h5")
    rc, _, se = run_to_end(ctx, job_cmd(ctx, out, args, 4))
    es.expect(rc == 0, f"{what}: exit code {rc}, expected 0\nstderr:\n{se}")
    es.expect(not hang_lines(se), f"{what}: a hang was reported\nstderr:\n{se}")
    es.expect(read_hang(out) is None, f"{what}: the file has a /hang group")
    chk, rep, _ = file_report(ctx, out)
    es.expect(rep is None and chk.returncode != 3 and "hang" not in chk.stdout, f"{what}: report hang {rep}, check {chk.returncode}\n{chk.stdout}")


def report_keeps_waiting(ctx):
    """--on-hang report: printed and stored once, the job left hanging (checked: still running 4 s
    after the report, no second report) until one SIGTERM to `commprof run` ends it; the file keeps
    the live /hang, and report/check read it from there."""
    plant = PLANTS["recv_forever"]
    out = ctx.path("report.h5")
    cmd = job_cmd(ctx, out, plant["args"], plant["ranks"], on_hang="report")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = []
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            line = p.stderr.readline()
            if not line:
                break
            err.append(line)
            if "--on-hang report" in line:
                break
        es.expect(any("--on-hang report" in line for line in err), "no report:\n" + "".join(err))
        time.sleep(4)
        es.expect(p.poll() is None, f"the job ended (exit {p.returncode}) though --on-hang is report")
        p.send_signal(signal.SIGTERM)
        _, rest = p.communicate(timeout=OUTER_TIMEOUT)
    finally:
        kill_all(descendants(p.pid))
        if p.poll() is None:
            p.kill()
            p.wait()
    se = "".join(err) + rest
    detail = f"\nstderr:\n{se}"
    es.expect(p.returncode not in (0, 5), f"exit code {p.returncode}{detail}")
    es.expect(se.count("commprof: hang: HANG (live,") == 1, f"not exactly one report{detail}")
    es.expect(any("still waiting" in line for line in hang_lines(se)), f"does not say it keeps waiting{detail}")
    h = read_hang(out)
    es.expect(h is not None, f"{out} has no /hang group")
    check_diagnosis("report_keeps_waiting", h["report"], plant, 4, True, detail)
    chk, rep, _ = file_report(ctx, out)
    es.expect(rep == h["report"], f"report JSON hang differs from /hang/report_json: {rep}")
    es.expect(chk.returncode == 3, f"check exit {chk.returncode}\n{chk.stdout}")


def bad_options(ctx):
    prog = ctx.test_program("hang_program")
    for value, says in [("abc", "not a number"), ("-3", "negative"), ("0.2", "out of range"),
                        ("1e12", "out of range"), ("inf", "not a number")]:
        for sub in (["run"], ["aggregate", "--expect", "1"]):
            cmd = [ctx.commprof] + sub + ["--hang-timeout", value, "-o", ctx.path("x.h5")]
            if sub == ["run"]:
                cmd += ["--"] + es.mpirun(1) + [prog, "none", "0"]
            p = es.run(cmd, timeout=60, env={"COMMPROF_SECRET": "s"})
            es.expect(p.returncode == 2, f"{' '.join(cmd)}: exit code {p.returncode}, expected 2\n{p.stderr}")
            es.expect(f"--hang-timeout {value}" in p.stderr and says in p.stderr,
                      f"{' '.join(cmd)}: the error does not name the option, value and why:\n{p.stderr}")
    p = es.run([ctx.commprof, "run", "--hang-timeout", "5", "--on-hang", "later", "--", prog], timeout=60)
    es.expect(p.returncode == 2 and "--on-hang later" in p.stderr, f"--on-hang later: {p.returncode}\n{p.stderr}")
    es.expect(not os.path.exists(ctx.path("x.h5")), "a usage error left an output file behind")



def main():
    a, ctx = es.case_arguments(CASES)
    c = a.case
    if c in PLANTS:
        live_case(ctx, c)
    elif c.startswith("file_") and c[len("file_"):] in FILE_CASES:
        file_case(ctx, c[len("file_"):])
    elif c == "file_group_term":
        file_case(ctx, "skip_allreduce", group=True)
    elif c in ("allreduce_bytes", "file_allreduce_bytes"):
        allreduce_bytes(ctx, live=c == "allreduce_bytes")
    elif c == "nccl":
        nccl_case(ctx)
    elif c == "halo":
        halo_case(ctx)
    elif c == "healthy_quiet_phase":
        # 5 s of computation with a 2 s timeout: queries go out, but no rank is blocked in a call.
        healthy(ctx, ["none", "5"], "quiet phase")
    elif c == "healthy_fast":
        healthy(ctx, ["fast", "3000"], "fast allreduces")
    elif c == "report_keeps_waiting":
        report_keeps_waiting(ctx)
    else:
        bad_options(ctx)
    print(f"hang_e2e {c}: ok")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"hang_e2e: FAIL: {e}")
        sys.exit(1)
