#!/usr/bin/env python3
"""Self-test of nccl_profiler_driver: runs it under mpirun against the logging stub plugin
(stub_plugin.c) and checks every logged call against NCCL's behaviour as docs/nccl-plugin.md
states it ("NCCL's profiler interface", cited as §N): the application-thread sequence of §4 steps 1-8
per operation (v5 on 2.28; v4 through the 2.28 adapter; v2 as 2.24/2.25), the emission gates of
§2a/§2c for several masks, the proxy-thread events (ProxyOp/ProxyStep/KernelCh) and their
per-handle order, init arguments (§2a/§2b), finalize, a failing init (§1), and the planted timing:
the slow rank's kernel starts --slow-us late and every rank's kernel of a collective ends together.

The expectations here are written from those facts, not from the driver's code.

Usage: selftest.py --driver PATH --stub PATH --work DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

# Event bits (§2a)
GROUP, COLL, P2P, PROXY_OP, PROXY_STEP, PROXY_CTRL, KERNEL_CH, NET_PLUGIN = 1, 2, 4, 8, 16, 32, 64, 128
GROUP_API, COLL_API, P2P_API, KERNEL_LAUNCH = 256, 512, 1024, 2048

NRANKS = 3
ITERS = 2
COUNT = 1 << 18
NCH = 2
SLOW, SLOW_US, TRANSFER_US, LAUNCH_US = 1, 3000, 300, 50
DTYPE_SIZE = {"ncclFloat32": 4, "ncclFloat64": 8, "ncclInt32": 4, "ncclInt8": 1}


def fail(msg):
    raise AssertionError(msg)


def expect(cond, msg):
    if not cond:
        fail(msg)


# ---------------------------------------------------------------------------------------------
# Gates, from the facts (§2a for 2.28, §2c for 2.24/2.25)

def gates(abi, m):
    if abi == 2:
        return {
            "group_api": False, "coll_api": False, "p2p_api": False, "kernel_launch": False,
            "group": bool(m & (GROUP | COLL | P2P | PROXY_OP | PROXY_STEP)),
            "coll": bool(m & (COLL | PROXY_OP | PROXY_STEP)),
            # the quirk: only with Coll, ProxyOp or ProxyStep in the mask (and P2p or a child)
            "p2p": bool(m & (COLL | PROXY_OP | PROXY_STEP)) and bool(m & (P2P | PROXY_OP | PROXY_STEP)),
            "proxy_op": bool(m & (PROXY_OP | PROXY_STEP)),
            "proxy_step": bool(m & PROXY_STEP),
            "kernel_ch": False,
        }
    g = {
        "group": bool(m & (GROUP | COLL | P2P | PROXY_OP | PROXY_STEP | KERNEL_CH | NET_PLUGIN)),
        "coll": bool(m & (COLL | PROXY_OP | PROXY_STEP | KERNEL_CH | NET_PLUGIN)),
        "p2p": bool(m & (P2P | PROXY_OP | PROXY_STEP | KERNEL_CH | NET_PLUGIN)),
        "proxy_op": bool(m & (PROXY_OP | PROXY_STEP | NET_PLUGIN)),
        "proxy_step": bool(m & (PROXY_STEP | NET_PLUGIN)),
        "kernel_ch": bool(m & KERNEL_CH),
    }
    v5 = abi == 5  # the 2.28 adapter drops the v5-only types for v4 (§2b)
    g["group_api"] = v5 and bool(m & ~PROXY_CTRL)
    g["coll_api"] = v5 and bool(m & (COLL_API | COLL | PROXY_OP | PROXY_STEP | KERNEL_CH | NET_PLUGIN))
    g["p2p_api"] = v5 and bool(m & (P2P_API | P2P | PROXY_OP | PROXY_STEP | KERNEL_CH | NET_PLUGIN))
    g["kernel_launch"] = v5 and bool(m & KERNEL_LAUNCH)
    return g


# ---------------------------------------------------------------------------------------------
# The operations of one iteration, as the driver documents them (README): four collectives in
# implicit groups, then a user group ring Send/Recv, then an AlltoAll as a user group.

def operations(rank, n, root):
    c = COUNT
    ops = []
    # (func, api count, api dtype, root); the Coll event: AllGather/Broadcast in bytes as ncclInt8
    for func, cnt, dt, rt in (("AllReduce", c, "ncclFloat32", 0), ("AllGather", c // n, "ncclFloat32", 0),
                              ("Broadcast", c // 2, "ncclFloat64", root), ("ReduceScatter", c // n, "ncclFloat32", 0)):
        ops.append({"kind": "coll", "func": func, "count": cnt, "dtype": dt, "root": rt})
    ops.append({"kind": "group", "tasks": [("Send", (rank + 1) % n), ("Recv", (rank - 1) % n)],
                "count": c // 4, "dtype": "ncclFloat32"})
    others = [p for p in range(n) if p != rank]
    ops.append({"kind": "group", "tasks": [("Send", p) for p in others] + [("Recv", p) for p in others],
                "count": c // n, "dtype": "ncclInt32"})
    return ops


# ---------------------------------------------------------------------------------------------
# Log parsing

def parse_line(line):
    parts = line.split()
    d = {"thr": parts[0], "t": int(parts[1].split("=")[1]), "call": parts[2]}
    for kv in parts[3:]:
        k, v = kv.split("=", 1)
        d[k] = v
    return d


def load_logs(prefix_dir):
    logs = []
    for name in sorted(os.listdir(prefix_dir)):
        if name.startswith("stub.log."):
            with open(os.path.join(prefix_dir, name)) as f:
                logs.append([parse_line(l) for l in f.read().splitlines() if l.strip()])
    return logs


def rank_of(lines):
    init = lines[0]
    if "rank" in init:
        return int(init["rank"])
    return int(init["envrank"])  # v2: no init arguments; the stub logs Open MPI's rank


class Binder:
    """Symbolic handles: the first time a name is seen it binds to the logged id."""

    def __init__(self):
        self.h = {None: "0"}

    def bind(self, name, value):
        expect(name not in self.h, f"handle {name} bound twice")
        expect(value not in self.h.values(), f"handle id {value} reused")
        self.h[name] = value

    def get(self, name):
        return self.h.get(name, "0")


def match(line, exp, b, where):
    """exp: (call, {field: value}); a value "$X" is a handle reference; "->X" in key "bind" binds."""
    call, fields = exp
    expect(line["call"] == call, f"{where}: expected {call} {fields}, got {line}")
    for k, v in fields.items():
        if k == "bind":
            b.bind(v, line["h"])
            continue
        want = b.get(v[1:]) if isinstance(v, str) and v.startswith("$") else str(v)
        expect(line.get(k) == want, f"{where}: field {k} = {line.get(k)}, expected {want} (from {v}) in {line}")


def expected_app(abi, mask, rank, n, op, seqs, comm_name, comm_hash, it, k):
    """The application-thread calls of one operation (§4 steps 1-8), and the task handles."""
    g = gates(abi, mask)
    out, tasks = [], []
    tag = f"op{it}.{k}"
    GA = tag + "GA" if g["group_api"] else None
    depth = 1 if op["kind"] == "coll" else 2  # implicit group / user ncclGroupStart (§4 step 1)
    if GA:
        out.append(("start", {"type": GROUP_API, "parent": 0, "rank": 0, "depth": depth, "captured": 0, "bind": GA}))
        out.append(("record", {"h": "$" + GA, "state": 23, "args": "null"}))
    api = []
    if op["kind"] == "coll":
        if g["coll_api"]:
            CA = tag + "CA"
            out.append(("start", {"type": COLL_API, "parent": "$" + str(GA), "rank": 0, "func": op["func"],
                                  "count": op["count"], "dtype": op["dtype"], "root": op["root"], "stream": 1,
                                  "captured": 0, "bind": CA}))
            out.append(("stop", {"h": "$" + CA}))
            api.append(CA)
        else:
            api.append(None)
    else:
        for i, (func, peer) in enumerate(op["tasks"]):
            if g["p2p_api"]:
                PA = f"{tag}PA{i}"
                out.append(("start", {"type": P2P_API, "parent": "$" + str(GA), "rank": 0, "func": func,
                                      "count": op["count"], "dtype": op["dtype"], "stream": 1, "captured": 0,
                                      "bind": PA}))
                out.append(("stop", {"h": "$" + PA}))
                api.append(PA)
            else:
                api.append(None)
    if GA:
        out.append(("record", {"h": "$" + GA, "state": 24, "args": "null"}))
    if g["kernel_launch"]:
        out.append(("start", {"type": KERNEL_LAUNCH, "parent": "$" + str(GA), "rank": 0, "stream": 1,
                              "bind": tag + "KL"}))
        out.append(("stop", {"h": "$" + tag + "KL"}))
    G = tag + "G" if g["group"] else None
    if G:
        out.append(("start", {"type": GROUP, "parent": 0, "rank": 0, "bind": G}))
    if op["kind"] == "coll":
        func = op["func"]
        seq = seqs.get(func, 0)
        if g["coll"]:
            C = tag + "C"
            as_bytes = func in ("AllGather", "Broadcast")  # §2a trap
            cnt = op["count"] * DTYPE_SIZE[op["dtype"]] if as_bytes else op["count"]
            dt = "ncclInt8" if as_bytes else op["dtype"]
            f = {"type": COLL, "rank": rank, "seq": seq, "func": func, "count": cnt, "dtype": dt, "root": op["root"],
                 "nch": NCH, "algo": "RING", "proto": "SIMPLE", "bind": C}
            if abi == 5:
                f.update({"parent": "$" + str(api[0]), "pgroup": "$" + str(G)})
            elif abi == 4:
                f.update({"parent": "$" + str(G), "pgroup": 0})  # the adapter: parent = legacy Group
            else:
                f.update({"parent": "$" + str(G), "name": comm_name, "hash": comm_hash,
                          "traffic": op["count"] * DTYPE_SIZE[op["dtype"]]})
            out.append(("start", f))
            out.append(("stop", {"h": "$" + C}))
            tasks.append({"h": C, "func": func, "peer": None, "nch": NCH, "bytes": op["count"] * DTYPE_SIZE[op["dtype"]]})
        # 2.28: the counter advances always (§6); 2.24/2.25: only while profiling is active (§2c)
        if abi != 2 or g["coll"]:
            seqs[func] = seq + 1
    else:
        for i, (func, peer) in enumerate(op["tasks"]):
            if g["p2p"]:
                P = f"{tag}P{i}"
                f = {"type": P2P, "rank": rank, "func": func, "count": op["count"], "dtype": op["dtype"], "peer": peer,
                     "bind": P}
                if abi == 5:
                    f.update({"parent": "$" + str(api[i]), "pgroup": "$" + str(G), "nch": 1})
                elif abi == 4:
                    f.update({"parent": "$" + str(G), "pgroup": 0, "nch": 1})
                else:
                    f.update({"parent": "$" + str(G), "name": comm_name, "hash": comm_hash})
                out.append(("start", f))
                out.append(("stop", {"h": "$" + P}))
                tasks.append({"h": P, "func": func, "peer": peer, "nch": 1,
                              "bytes": op["count"] * DTYPE_SIZE[op["dtype"]]})
    if G:
        out.append(("stop", {"h": "$" + G}))
    if GA:
        out.append(("stop", {"h": "$" + GA}))
    return out, tasks


def check_bg(abi, mask, rank, n, bg, tasks, b, where):
    """The proxy-thread calls of one plan: the set of events and the order of calls per handle."""
    g = gates(abi, mask)
    by_handle = {}
    order = []
    for idx, l in enumerate(bg):
        expect(l["thr"] == "bg", f"{where}: proxy-thread event on the application thread: {l}")
        h = l["h"]
        if l["call"] == "start":
            expect(h not in by_handle, f"{where}: handle {h} started twice")
            by_handle[h] = [l]
            order.append(h)
        else:
            expect(h in by_handle, f"{where}: {l['call']} of a handle not started in this plan: {l}")
            expect(by_handle[h][-1]["call"] != "stop", f"{where}: call after stop: {l}")
            by_handle[h].append(l)
    task_ids = {b.get(t["h"]): t for t in tasks}
    kch, pops, psteps = {}, {}, {}
    for h, calls in by_handle.items():
        s = calls[0]
        typ = int(s["type"])
        if typ == KERNEL_CH:
            expect(s["parent"] in task_ids and s["rank"] == "0", f"{where}: KernelCh parent/rank {s}")
            kch[(s["parent"], int(s["ch"]))] = calls
        elif typ == PROXY_OP:
            expect(s["parent"] in task_ids and s["rank"] == str(rank) and s["pid_ok"] == "1", f"{where}: ProxyOp {s}")
            pops[h] = calls
        elif typ == PROXY_STEP:
            psteps[h] = calls
        else:
            fail(f"{where}: unexpected event type {typ} on the proxy thread: {s}")
    # KernelCh: one per channel of each task; start -> record 22 (pTimer later) -> stop, the stop
    # immediately after the record (§3)
    want_k = {(b.get(t["h"]), ch) for t in tasks for ch in range(t["nch"])} if g["kernel_ch"] else set()
    expect(set(kch) == want_k, f"{where}: KernelCh events {sorted(kch)} expected {sorted(want_k)}")
    for key, calls in kch.items():
        expect([c["call"] for c in calls] == ["start", "record", "stop"] and calls[1]["state"] == "22",
               f"{where}: KernelCh calls {calls}")
        expect(int(calls[1]["ptimer"]) > int(calls[0]["ptimer"]), f"{where}: KernelCh stop pTimer not after start")
        i = bg.index(calls[1])
        expect(bg[i + 1] is calls[2], f"{where}: KernelCh record 22 not immediately followed by its stop")
    # ProxyOps: per task, per channel, per direction, with the ring peers for a collective
    want_p = set()
    if g["proxy_op"]:
        for t in tasks:
            th = b.get(t["h"])
            for ch in range(t["nch"]):
                if t["func"] == "Send":
                    want_p.add((th, ch, t["peer"], 1))
                elif t["func"] == "Recv":
                    want_p.add((th, ch, t["peer"], 0))
                else:
                    want_p.add((th, ch, (rank + 1) % n, 1))
                    want_p.add((th, ch, (rank - 1) % n, 0))
    got_p = {(c[0]["parent"], int(c[0]["ch"]), int(c[0]["peer"]), int(c[0]["send"])) for c in pops.values()}
    expect(got_p == want_p and len(got_p) == len(pops), f"{where}: ProxyOps {sorted(got_p)} expected {sorted(want_p)}")
    last_k_stop = max((bg.index(c[2]) for c in kch.values()), default=-1)
    for h, calls in pops.items():
        send = calls[0]["send"] == "1"
        states = [c["state"] for c in calls if c["call"] == "record"]
        if abi == 2:
            want = ["0", "1", "2", "3"] if send else ["4", "5", "6", "7"]  # §2c: states 0-7 carry args
            expect(all(c.get("steps") is not None for c in calls if c["call"] == "record"), f"{where}: v2 ProxyOp args")
        else:
            want = ["19"]  # 2.28: InProgress only; 0-7 are not emitted (§2a)
        expect(states == want and calls[-1]["call"] == "stop", f"{where}: ProxyOp states {states}, expected {want}")
        # completion: after every kernel channel stopped
        expect(bg.index(calls[-1]) > last_k_stop, f"{where}: ProxyOp stopped before the kernel ended")
    # ProxySteps: inside their ProxyOp, with the direction's states (§4); v2: NULL args (§2c)
    want_steps = set(pops) if g["proxy_step"] else set()
    expect({c[0]["parent"] for c in psteps.values()} == want_steps and len(psteps) == len(want_steps),
           f"{where}: ProxySteps per ProxyOp")
    for h, calls in psteps.items():
        parent = pops[calls[0]["parent"]]
        send = parent[0]["send"] == "1"
        states = [c["state"] for c in calls if c["call"] == "record"]
        want = (["8", "20", "9"] if abi != 2 else ["8", "9"]) if send else ["10", "11", "12"]
        expect(states == want and calls[-1]["call"] == "stop", f"{where}: ProxyStep states {states}, expected {want}")
        if abi == 2:
            expect(all(c.get("args") == "null" for c in calls if c["call"] == "record"), f"{where}: v2 step args")
        else:
            expect(all(c.get("transSize") is not None for c in calls if c["call"] == "record"), f"{where}: step transSize")
        expect(bg.index(parent[0]) < bg.index(calls[0]) and bg.index(calls[-1]) < bg.index(parent[-1]),
               f"{where}: ProxyStep not nested in its ProxyOp")
    return kch, pops


def check_run(abi, mask, logs, summary, init_fail=False, mask_sequence=None):
    """Checks every rank's log; returns per rank a list of per-plan timing data. With
    mask_sequence, the stub stores its i-th entry in the mask after the i-th Group stop, so the
    (i+1)-th operation is enqueued with it (every mask there must keep the Group bit)."""
    def mask_of(j):
        if not mask_sequence or j == 0:
            return mask
        return mask_sequence[min(j, len(mask_sequence)) - 1]

    n = summary["nranks"]
    expect(len(logs) == n, f"{len(logs)} logs for {n} ranks")
    comm_hash = str(summary["comm_hash"])
    timing = {}
    for lines in logs:
        rank = rank_of(lines)
        init = lines[0]
        expect(init["call"] == "init" and init["thr"] == "app" and init["abi"] == str(abi), f"first call {init}")
        if abi in (4, 5):
            expect(init["commId"] == comm_hash and init["nranks"] == str(n) and init["name"] == "driver_world"
                   and init["nNodes"] == "1" and init["logfn"] == "1", f"init arguments {init}")
            expect(init["rank"] == str(rank), "rank")
        # finalize last, from the application thread; skipped for a NULL context (§1)
        lines = [l for l in lines if l["call"] != "setmask"]
        body = lines[1:]
        if init_fail:
            expect(all(l["call"] != "finalize" for l in lines), "finalize called for a NULL context")
            expect(all(l.get("ctx", "0") == "0" for l in body), "events after a failed init carry the NULL context")
        else:
            expect(lines[-1]["call"] == "finalize" and lines[-1]["ctx"] == "1" and lines[-1]["thr"] == "app",
                   f"last call {lines[-1]}")
            body = lines[1:-1]
            expect(all(l.get("ctx", "1") == "1" for l in body), "every start carries the init context")
        b = Binder()
        seqs = {}
        pos = 0
        plans = []
        root = summary["bcast_root"]
        j = 0
        for it in range(ITERS):
            for k, op in enumerate(operations(rank, n, root)):
                m = mask_of(j)
                j += 1
                where = f"abi v{abi} mask {m} rank {rank} iteration {it} op {k}"
                exp, tasks = expected_app(abi, m, rank, n, op, seqs, "driver_world", comm_hash, it, k)
                first = pos
                for e in exp:
                    expect(pos < len(body), f"{where}: log ends, expected {e}")
                    expect(body[pos]["thr"] == "app", f"{where}: expected app-thread {e}, got {body[pos]}")
                    match(body[pos], e, b, where)
                    pos += 1
                bg = []
                while pos < len(body) and body[pos]["thr"] == "bg":
                    bg.append(body[pos])
                    pos += 1
                kch, pops = check_bg(abi, m, rank, n, bg, tasks, b, where)
                plans.append({"op": op, "tasks": tasks, "kch": kch, "pops": pops,
                              "app_t": body[first]["t"] if first < len(body) and exp else None})
        expect(pos == len(body), f"rank {rank}: unexpected trailing calls {body[pos:pos + 3]}")
        timing[rank] = plans
    return timing


def check_timing(abi, timing, truth):
    """The planted truth, as realised: run with --gpu-offset-ns 0 --gpu-drift-ppm 0 so pTimer is
    CLOCK_MONOTONIC, shared by the ranks and the stub's clock. The schedule is slept, so a loaded
    machine wakes a rank late and moves its times; the driver writes what it realised (--truth) and
    the stub must have seen exactly that (v5/v4: the KernelCh pTimers; v2: the proxy ops' host times,
    within the [before, after] bounds of the calls). The plant is then checked one-sided on those
    measured times: the slow rank's kernel (v2: its proxy ops) starts no earlier than the slot plus
    the plant, every rank's kernel of a collective ends the transfer after the later of its own start
    and the slow rank's planned one (v5/v4), so each wait is the plant less the waiter's own lateness
    plus the slow rank's, which the load can move but the driver measured."""
    U, L, X = SLOW_US * 1000, LAUNCH_US * 1000, TRANSFER_US * 1000
    ncoll = 0
    for i in range(len(timing[0])):
        if timing[0][i]["op"]["kind"] != "coll":
            continue
        for r, plans in timing.items():
            p, (planned, a_lo, a_hi, e_lo, e_hi, _) = plans[i], truth[r][ncoll][2:]
            where = f"v{abi} rank {r} collective {ncoll}"
            if abi == 2:
                calls = list(p["pops"].values())
                start, end = min(c[0]["t"] for c in calls), max(c[-1]["t"] for c in calls)
                expect(a_lo <= start <= a_hi and e_lo <= end <= e_hi,
                       f"{where}: proxy ops {start}..{end}, the driver's [{a_lo}, {a_hi}]..[{e_lo}, {e_hi}]")
                # the host-planted delay: the slow rank calls the API no earlier than the slot + U
                expect(a_lo >= planned + (U if r == SLOW else 0), f"{where}: started {a_lo - planned} ns into its slot")
            else:
                ks = list(p["kch"].values())
                start, end = min(int(c[0]["ptimer"]) for c in ks), max(int(c[1]["ptimer"]) for c in ks)
                for c in ks:  # the callback comes at or after the GPU time (proxy lag, §3)
                    expect(c[0]["t"] >= int(c[0]["ptimer"]) and c[2]["t"] >= int(c[1]["ptimer"]),
                           "KernelCh emitted before its GPU time")
                expect(start == a_lo and end == e_lo, f"{where}: kernel {start}..{end}, the driver's {a_lo}..{e_lo}")
                expect(start >= planned + L + (U if r == SLOW else 0), f"{where}: started {start - planned} ns into its slot")
                want_end = max(start, planned + L + U) + X
                expect(end == want_end, f"{where}: kernel ends {end - planned} ns into its slot, expected "
                       f"{want_end - planned} (the later of its start and the slow rank's planned one, + transfer)")
        ncoll += 1
    expect(ncoll == 4 * ITERS and all(len(t) == ncoll for t in truth.values()), f"{ncoll} collectives timed")


def run_loader(a, value, ld_path=None):
    """The driver without --plugin: NCCL_PROFILER_PLUGIN resolved as NCCL 2.28 does (§1)."""
    env = dict(os.environ)
    env.pop("NCCL_PROFILER_PLUGIN", None)
    if value is not None:
        env["NCCL_PROFILER_PLUGIN"] = value
    if ld_path:
        env["LD_LIBRARY_PATH"] = ld_path + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["NCCL_STUB_LOG"] = os.path.join(a.work, "loader.log")
    cmd = ["mpirun", "--oversubscribe", "-np", "2"]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    cmd += [a.driver, "--iters", "1", "--slow-us", "0"]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    expect(p.returncode == 0, f"{' '.join(cmd)} with NCCL_PROFILER_PLUGIN={value}: exit {p.returncode}\n{p.stderr}")
    summary = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
    summary["stderr"] = p.stderr
    return summary


def run_driver(a, abi, mask=None, init_fail=False, clock_zero=True, extra=(), mask_sequence=None):
    d = os.path.join(a.work, f"v{abi}-m{mask}-f{int(init_fail)}-z{int(clock_zero)}-s{int(bool(mask_sequence))}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    env = dict(os.environ)
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"  # waiting ranks sleep: 3 ranks share 2 cores
    env["NCCL_STUB_LOG"] = os.path.join(d, "stub.log")
    env.pop("NCCL_STUB_MASK", None)
    if mask is not None:
        env["NCCL_STUB_MASK"] = str(mask)
    if init_fail:
        env["NCCL_STUB_INIT_FAIL"] = "1"
    env.pop("NCCL_STUB_MASK_SEQUENCE", None)
    if mask_sequence:
        env["NCCL_STUB_MASK_SEQUENCE"] = ",".join(str(x) for x in mask_sequence)
    cmd = ["mpirun", "--oversubscribe", "-np", str(NRANKS)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    cmd += [a.driver, "--plugin", a.stub, "--abi", f"v{abi}", "--iters", str(ITERS), "--count", str(COUNT),
            "--channels", str(NCH), "--slow-rank", str(SLOW), "--slow-us", str(SLOW_US), "--transfer-us",
            str(TRANSFER_US), "--launch-us", str(LAUNCH_US), "--selftest"]
    if clock_zero:
        cmd += ["--gpu-offset-ns", "0", "--gpu-drift-ppm", "0"]
    cmd += ["--truth", os.path.join(d, "truth")] + list(extra)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    expect(p.returncode == 0, f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    summary = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
    return summary, load_logs(d)


def load_truth(a, abi):
    """The --truth files of the full-mask run: per rank, one row per collective (func, seq, planned,
    a_lo, a_hi, e_lo, e_hi, cal), in the order emitted."""
    d = os.path.join(a.work, f"v{abi}-mNone-f0-z1-s0")
    truth = {}
    for r in range(NRANKS):
        with open(os.path.join(d, f"truth.{r}")) as f:
            truth[r] = [[x[0]] + [int(v) for v in x[1:]] for x in (line.split() for line in f)]
    return truth


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--stub", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    # Full masks (the stub's default: every bit of the table's version), with the timing truth.
    for abi, default_mask in ((5, 4095), (4, 255), (2, 63)):
        summary, logs = run_driver(a, abi)
        expect(summary["mask"] == default_mask and summary["init_ok"] and summary["iters"] == ITERS, f"{summary}")
        expect(summary["slow_where"] == ("host" if abi == 2 else "gpu"), f"{summary}")
        timing = check_run(abi, default_mask, logs, summary)
        check_timing(abi, timing, load_truth(a, abi))
        print(f"selftest: v{abi} mask {default_mask}: sequence and planted timing ok")
    # Gates: the inspector's mask (Coll|KernelCh turns on its ancestors but no KernelLaunch or
    # proxy events), API events only, nothing, and the 2.25 P2p quirk.
    for abi, mask in ((5, COLL | KERNEL_CH), (5, GROUP_API | COLL_API | P2P_API), (5, PROXY_CTRL), (5, 0),
                      (4, COLL | KERNEL_CH), (4, PROXY_OP), (2, GROUP | P2P), (2, COLL | P2P), (2, COLL), (2, 0)):
        summary, logs = run_driver(a, abi, mask)
        check_run(abi, mask, logs, summary)
        print(f"selftest: v{abi} mask {mask}: gates ok")
    # The plugin changes the mask at run time (§2a): Coll off for two operations, then on again.
    # seqNumber: 2.28 advances it for every collective (§6), 2.24/2.25 only while the Coll event is
    # enabled (§2c), so afterwards v5's AllGather is at 1 and v2's at 0 in the second iteration.
    for abi, on in ((5, GROUP | COLL | KERNEL_CH), (2, GROUP | COLL | PROXY_OP)):
        sequence = [GROUP, GROUP] + [on] * 20
        summary, logs = run_driver(a, abi, on, mask_sequence=sequence)
        check_run(abi, on, logs, summary, mask_sequence=sequence)
        print(f"selftest: v{abi} mask changed at run time: per-task masks and seqNumber ok")
    # A failing init: 2.28 keeps the plugin, events carry the NULL context, no finalize (§1).
    summary, logs = run_driver(a, 5, init_fail=True)
    expect(not summary["init_ok"], "init failure reported")
    check_run(5, 4095, logs, summary, init_fail=True)
    print("selftest: failing init ok")
    # The simulated %globaltimer by default: its own offset per rank (about 2025-08 in epoch ns
    # plus rank x 1.234567891 s), so pTimer and the host clock differ by that offset.
    summary, logs = run_driver(a, 5, clock_zero=False)
    for lines in logs:
        rank = int(lines[0]["rank"])
        ks = [l for l in lines if l["call"] == "start" and l["type"] == str(KERNEL_CH)]
        expect(len(ks) > 0, "KernelCh events")
        for l in ks:
            # pTimer = 1756135989724672000 + rank * 1234567891 + (host - host0) + drift: host0 is
            # the driver's start, within 10 s of this callback
            off = int(l["ptimer"]) - (1756135989724672000 + rank * 1234567891)
            expect(0 <= off < 10 * 10**9, f"rank {rank}: pTimer {l['ptimer']} is not the simulated GPU clock")
    print("selftest: simulated GPU clock ok")
    # Library resolution (§1): a bare name X opens libnccl-profiler-X.so from the loader path;
    # "none" (any case) disables; a prefix of STATIC_PLUGIN looks in the executable (none here).
    stub_dir, stub_file = os.path.split(os.path.abspath(a.stub))
    expect(stub_file == "libnccl-profiler-stub.so", f"stub file name {stub_file}")
    expect(run_loader(a, "stub", stub_dir)["plugin_loaded"], "NCCL_PROFILER_PLUGIN=stub: libnccl-profiler-stub.so")
    expect(run_loader(a, os.path.abspath(a.stub))["plugin_loaded"], "NCCL_PROFILER_PLUGIN=<path>")
    expect(not run_loader(a, "NoNe", stub_dir)["plugin_loaded"], "NCCL_PROFILER_PLUGIN=none disables")
    st = run_loader(a, "static", stub_dir)  # opened the executable, which has no table
    expect(not st["plugin_loaded"] and "has no symbol ncclProfiler_v5" in st["stderr"], "STATIC_PLUGIN prefix: dlopen(NULL)")
    expect(not run_loader(a, "stub")["plugin_loaded"], "a bare name is not found outside the loader path")
    print("selftest: library resolution ok")
    print("selftest: ok")


if __name__ == "__main__":
    sys.exit(main())
