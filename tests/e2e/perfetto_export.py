#!/usr/bin/env python3
"""`commprof export --format perfetto` and the cuts of both timeline formats (docs/perfetto-trace.md,
docs/cli.md). Every protobuf trace is decoded by protoc and checked structurally by
perfetto_check.py (a reader of our own would share our mistakes); its content is then compared,
event by event, with the Chrome JSON export of the same file, which has tests of its own:

  real_job    A real 4-rank Open MPI job with a planted straggler (mpi_straggler): every slice
              (name, category, start and end to the ns, args), instant, lane and flow of the JSON is
              in the protobuf trace and nothing else; every flow starts on the last arriver's BEGIN
              and lands on another participant's END, never before the last arrival began; the
              facts (origin) agree; the protobuf file is at most 40 % of the JSON's bytes; `-o -`
              writes the same bytes to standard output; --ranks leaves the other ranks and the
              flows to them out.
  gpu_memory  A synthetic job with GPU streams and partly overlapping slices (extra lanes), and a
              planted allocation pattern (make_memory_profile): streams, lanes and memory counters
              equal the JSON's; each rank's counter peak is the planted one.
  cuts        A real 4-rank job marking 6 steps (step_program): --steps 2-3 keeps exactly the
              slices and instants of the whole trace that overlap [earliest step-2 mark, latest
              step-4 mark) (step 3 ends where step 4 begins, docs/metrics.md §10), computed here from
              the whole JSON trace; --time-range the same for a range given in ms; both formats keep
              the same events and flows with both ends kept; times stay those of the whole trace;
              a memory counter starts at the cut with the level the whole trace has there.
  errors      Malformed --time-range/--steps, both together, a cut with a memory format, steps a
              file does not have, a file with no steps, an output in a missing directory: each
              refused with its message and exit code (2 usage, 1 input), leaving no file behind.

    perfetto_export.py CASE --build build/release --work DIR
"""
import collections
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_support import case_arguments, expect, mpirun, run  # noqa: E402
import perfetto_check  # noqa: E402

ENV = {"OMPI_MCA_mpi_yield_when_idle": "1"}


def micros_to_ns(text):
    """A JSON ts/dur printed with three decimals -> exact ns."""
    neg = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    ns = int(whole) * 1000 + int((frac + "000")[:3])
    return -ns if neg else ns


def load_json_trace(path):
    with open(path) as f:
        doc = json.load(f, parse_float=str, parse_int=str)
    out = {"slices": collections.Counter(), "instants": collections.Counter(), "counters": collections.Counter(),
           "threads": collections.defaultdict(set), "s": {}, "f": {}, "meta": doc["metadata"], "x": []}

    def arg_value(v):
        # parse_int=str: every JSON integer arrives as its digits, and so does an id above 2^53,
        # which the JSON writes as a string (docs/chrome-trace.md); the protobuf has both as numbers.
        if isinstance(v, list):
            return tuple(v)
        if isinstance(v, str) and v.lstrip("-").isdigit():
            return int(v)
        return v

    for e in doc["traceEvents"]:
        ph, pid = e["ph"], int(e["pid"])
        if ph == "M" and e["name"] == "thread_name":
            out["threads"][pid].add(e["args"]["name"])
        elif ph == "X":
            start = micros_to_ns(e["ts"])
            end = start + micros_to_ns(e["dur"])
            args = tuple(sorted((k, arg_value(v)) for k, v in e.get("args", {}).items()))
            out["slices"][(pid, e["name"], e["cat"], start, end, args)] += 1
            out["x"].append((pid, int(e["tid"]), start, end, e["name"]))
        elif ph == "i":
            args = tuple(sorted((k, arg_value(v)) for k, v in e.get("args", {}).items()))
            out["instants"][(pid, e["name"], e["cat"], micros_to_ns(e["ts"]), args)] += 1
        elif ph == "C":
            out["counters"][(pid, e["name"], micros_to_ns(e["ts"]), int(e["args"]["bytes"]))] += 1
        elif ph in ("s", "f"):
            out[ph][int(e["id"])] = (pid, int(e["tid"]), micros_to_ns(e["ts"]))
    return out


def proto_views(t):
    slices = collections.Counter()
    for s in t.slices:
        slices[(s.pid, s.name, s.category, s.start, s.end, tuple(sorted(s.args.items())))] += 1
    instants = collections.Counter()
    for pid, _track, name, cat, ts, args in t.instants:
        instants[(pid, name, cat, ts, tuple(sorted(args.items())))] += 1
    threads = collections.defaultdict(set)
    for uuid, d in t.tracks.items():
        parent = perfetto_check.one(d, "parent_uuid")
        if parent is not None and perfetto_check.one(d, "counter") is None:
            threads[t.pid_of(uuid)].add(t.track_name(uuid))
    counters = collections.Counter(t.counters)
    return slices, instants, threads, counters


def diff_sample(a, b):
    only_a = list((a - b).elements())[:3]
    only_b = list((b - a).elements())[:3]
    return f"only in JSON: {only_a}\nonly in protobuf: {only_b}"


def export(ctx, h5, fmt, out, *extra, rc=0):
    p = run([ctx.commprof, "export", "-q", "--format", fmt, h5, "-o", out, *extra], check_rc=rc)
    return p


def same_content(ctx, h5, name, *extra):
    """Exports `h5` both ways (with `extra` options), checks the protobuf structurally and against
    the JSON; returns (json view, protobuf Trace, sizes)."""
    js, pb = ctx.path(name + ".json"), ctx.path(name + ".pftrace")
    export(ctx, h5, "chrome", js, *extra)
    export(ctx, h5, "perfetto", pb, *extra)
    j = load_json_trace(js)
    t = perfetto_check.read_trace(pb)
    slices, instants, threads, counters = proto_views(t)
    expect(slices == j["slices"], f"{name}: slices differ\n{diff_sample(j['slices'], slices)}")
    expect(instants == j["instants"], f"{name}: instants differ\n{diff_sample(j['instants'], instants)}")
    expect(counters == j["counters"], f"{name}: counters differ\n{diff_sample(j['counters'], counters)}")
    expect(dict(threads) == dict(j["threads"]), f"{name}: tracks differ: {dict(threads)} vs {dict(j['threads'])}")
    # Flows: the same ids; the protobuf's BEGIN side is the JSON's "s" slice, its END side the
    # slice enclosing the JSON's "f".
    expect(set(t.flows) == set(j["s"]) == set(j["f"]),
           f"{name}: flow ids differ: {len(t.flows)} protobuf, {len(j['s'])} s, {len(j['f'])} f")
    for fid, (src, dst) in t.flows.items():
        spid, _stid, sts = j["s"][fid]
        fpid, _ftid, fts = j["f"][fid]
        expect(src.pid == spid and src.start == sts, f"{name}: flow {fid} starts on {src} in protobuf, at {j['s'][fid]}")
        expect(dst.pid == fpid and dst.start <= fts <= dst.end,
               f"{name}: flow {fid} lands on {dst} in protobuf, at {j['f'][fid]} in JSON")
        expect(src.args.get("last_rank") == src.pid - 1, f"{name}: flow {fid} does not start on the last arriver: {src}")
    expect(t.facts.get("origin_reference_ns") == int(j["meta"]["origin_reference_ns"]),
           f"{name}: origin {t.facts.get('origin_reference_ns')} vs {j['meta']['origin_reference_ns']}")
    return j, t, (os.path.getsize(js), os.path.getsize(pb))


def case_real_job(ctx):
    h5 = ctx.path("job.h5")
    run([ctx.commprof, "run", "-o", h5, "--"] + mpirun(4) +
        [ctx.example, "--iters", "300", "--slow-rank", "2", "--slow-us", "300", "--compute-us", "50"],
        env=ENV, check_rc=0, timeout=180)
    j, t, (js_bytes, pb_bytes) = same_content(ctx, h5, "job")
    expect(len(t.slices) > 1000 and len(t.flows) > 500, f"{len(t.slices)} slices, {len(t.flows)} flows: too few")
    expect(pb_bytes <= 0.40 * js_bytes, f"protobuf {pb_bytes} B is {pb_bytes / js_bytes:.0%} of the JSON's {js_bytes}")
    backwards = [f for f, (src, dst) in t.flows.items() if dst.end < src.start]
    expect(not backwards, f"{len(backwards)} flow(s) land before the last arrival: {backwards[:3]}")
    # Standard output carries the same bytes.
    out = subprocess.run([ctx.commprof, "export", "-q", "--format", "perfetto", h5, "-o", "-"],
                         stdout=subprocess.PIPE, check=True).stdout
    with open(ctx.path("job.pftrace"), "rb") as f:
        expect(f.read() == out, "-o - wrote other bytes than the file")
    # Default name: FILE without .h5 + .pftrace.
    run([ctx.commprof, "export", "-q", "--format", "perfetto", h5], check_rc=0)
    expect(os.path.exists(ctx.path("job.pftrace")), "no default job.pftrace")
    # --ranks 1,3: only those processes, flows only between them.
    _, sub, _ = same_content(ctx, h5, "ranks13", "--ranks", "1,3")
    expect({s.pid for s in sub.slices} == {2, 4}, f"--ranks 1,3: pids {sorted({s.pid for s in sub.slices})}")
    expect(all({a.pid, b.pid} <= {2, 4} for a, b in sub.flows.values()), "--ranks 1,3: a flow to a rank left out")
    print(f"real_job: {len(t.slices)} slices, {len(t.flows)} flows; protobuf {pb_bytes} B = "
          f"{pb_bytes / js_bytes:.1%} of the JSON's {js_bytes} B")


def case_gpu_memory(ctx):
    h5 = ctx.path("gpu.h5")
    run([os.path.join(ctx.build, "bench", "make_synthetic_profile"), "--ranks", "4", "--events", "12000", "--gpu",
         "--out", h5], check_rc=0)
    j, t, (js_bytes, pb_bytes) = same_content(ctx, h5, "gpu")
    gpu_tracks = {n for names in j["threads"].values() for n in names if n.startswith("GPU ")}
    lanes = {n for names in j["threads"].values() for n in names if "(lane " in n}
    expect(gpu_tracks and lanes, f"the synthetic job should have GPU streams and extra lanes: {dict(j['threads'])}")
    expect(pb_bytes <= 0.40 * js_bytes, f"gpu: protobuf {pb_bytes} B is {pb_bytes / js_bytes:.0%} of {js_bytes}")

    mem = ctx.path("mem.h5")
    run([ctx.test_program("make_memory_profile"), mem, "--ranks", "4", "--churn", "40"], check_rc=0)
    j, t, _ = same_content(ctx, mem, "mem")
    expect(t.counters, "mem: no counter in the protobuf trace")
    origin = int(j["meta"]["origin_reference_ns"])
    for r in range(4):
        # make_memory_profile's truth: rank r peaks at (5 + 3r) ms with (r % 4 + 1) GiB + 4096 in use.
        peak_ns, peak_bytes = (5 + 3 * r) * 1_000_000, (r % 4 + 1) * (1 << 30) + 4096
        series = collections.defaultdict(dict)
        for pid, name, ts, value in t.counters:
            if pid == r + 1:
                series[name][ts] = value
        times = sorted({ts for s in series.values() for ts in s})
        total = {}
        level = {name: 0 for name in series}
        for ts in times:
            for name, s in series.items():
                level[name] = s.get(ts, level[name])
            total[ts] = sum(level.values())
        best = max(total.values())
        at = min(ts for ts, v in total.items() if v == best)
        expect(best == peak_bytes and at + origin == peak_ns,
               f"rank {r}: counter peak {best} B at {at + origin} ns, planted {peak_bytes} B at {peak_ns} ns")


def steps_truth(j):
    """Per step number, every rank's mark time (ns since the origin), from the whole JSON trace."""
    marks = collections.defaultdict(dict)
    for (pid, name, cat, ts, args), _n in j["instants"].items():
        if cat == "step":
            marks[dict(args)["step"]][pid] = ts
    return marks


def check_cut(name, whole, cut, lo, hi):
    """`cut` (a JSON view) holds exactly the slices/instants of `whole` overlapping [lo, hi)."""
    want = collections.Counter({k: n for k, n in whole["slices"].items() if k[3] < hi and k[4] >= lo})
    got = collections.Counter({k[:5]: n for k, n in cut["slices"].items()})
    want_keys = collections.Counter({k[:5]: n for k, n in want.items()})
    expect(got == want_keys, f"{name}: kept slices differ from the whole trace's overlapping [{lo}, {hi})\n"
           f"{diff_sample(want_keys, got)}")
    want_i = collections.Counter({k[:4]: n for k, n in whole["instants"].items() if lo <= k[3] < hi})
    got_i = collections.Counter({k[:4]: n for k, n in cut["instants"].items()})
    expect(got_i == want_i, f"{name}: kept instants differ\n{diff_sample(want_i, got_i)}")
    expect(int(cut["meta"]["cut_from_ns"]) == lo and int(cut["meta"]["cut_to_ns"]) == hi,
           f"{name}: metadata cut [{cut['meta'].get('cut_from_ns')}, {cut['meta'].get('cut_to_ns')}), "
           f"expected [{lo}, {hi})")
    expect(int(cut["meta"]["origin_reference_ns"]) == int(whole["meta"]["origin_reference_ns"]),
           f"{name}: the cut moved the origin")
    expect(int(cut["meta"]["events_cut"]) == sum(whole["slices"].values()) + sum(whole["instants"].values())
           - sum(cut["slices"].values()) - sum(cut["instants"].values()), f"{name}: events_cut does not add up")


def case_cuts(ctx):
    h5 = ctx.path("steps.h5")
    run([ctx.commprof, "run", "-o", h5, "--"] + mpirun(4) +
        [ctx.test_program("step_program"), "--steps", "6", "--compute-ms", "20", "--slow-rank", "1",
         "--slow-step", "3", "--slow-ms", "10"], env=ENV, check_rc=0, timeout=180)
    whole, _, _ = same_content(ctx, h5, "whole")
    marks = steps_truth(whole)
    expect(sorted(marks) == list(range(6)) and all(len(m) == 4 for m in marks.values()),
           f"step marks {dict(marks)}")
    lo, hi = min(marks[2].values()), max(marks[4].values())  # [lo, hi): step 4's last mark is not kept
    cut, t, _ = same_content(ctx, h5, "steps23", "--steps", "2-3")
    check_cut("--steps 2-3", whole, cut, lo, hi)
    for fid, (src, dst) in t.flows.items():
        expect(src.start < hi and src.end >= lo and dst.start < hi and dst.end >= lo, f"flow {fid} has an end cut out")
    expect(len(t.flows) > 0, "--steps 2-3: no flow kept")
    # A single step.
    one_cut, _, _ = same_content(ctx, h5, "step5", "--steps", "5")
    expect(int(one_cut["meta"]["cut_from_ns"]) == min(marks[5].values()), "--steps 5 does not begin at step 5")
    # --time-range in ms, relative to the trace's time 0.
    lo_ms, hi_ms = lo // 1_000_000 + 1, hi // 1_000_000 + 1
    cut, _, _ = same_content(ctx, h5, "range", "--time-range", f"{lo_ms}ms:{hi_ms}ms")
    check_cut("--time-range", whole, cut, lo_ms * 1_000_000, hi_ms * 1_000_000)
    # An open end: FROM: keeps everything from FROM on.
    cut, _, _ = same_content(ctx, h5, "open", "--time-range", f"{lo_ms}ms:")
    expect("cut_to_ns" not in cut["meta"], "an open range has no end in the metadata")

    # Memory counters under a cut: the level the whole trace has at the cut's start, then the changes.
    mem = ctx.path("mem.h5")
    run([ctx.test_program("make_memory_profile"), mem, "--ranks", "2", "--churn", "40"], check_rc=0)
    whole_mem, _, _ = same_content(ctx, mem, "mem_whole")
    cut_mem, _, _ = same_content(ctx, mem, "mem_cut", "--time-range", "6ms:9ms")
    series = collections.defaultdict(list)
    for (pid, name, ts, value), _n in whole_mem["counters"].items():
        series[(pid, name)].append((ts, value))
    for key, points in series.items():
        points.sort()
        before = [v for ts, v in points if ts < 6_000_000]
        inside = [(ts, v) for ts, v in points if 6_000_000 <= ts < 9_000_000]
        want = ([(6_000_000, before[-1])] if before else []) + inside
        got = sorted((ts, v) for (pid, name, ts, v), _n in cut_mem["counters"].items() if (pid, name) == key)
        expect(got == want, f"memory counter {key} under the cut: {got[:4]}..., expected {want[:4]}...")


def case_errors(ctx):
    h5 = ctx.path("small.h5")
    run([os.path.join(ctx.build, "bench", "make_synthetic_profile"), "--ranks", "2", "--events", "2000",
         "--out", h5], check_rc=0)
    out = ctx.path("x.pftrace")
    bad = [
        (["--time-range", "5"], 2, "FROM:TO"),
        (["--time-range", ":"], 2, "both ends are empty"),
        (["--time-range", "2s:1s"], 2, "TO must be after FROM"),
        (["--time-range", "1parsec:"], 2, "'1parsec' is not a duration"),
        (["--steps", "3-1"], 2, "the range is empty"),
        (["--steps", "a"], 2, "give a step number"),
        (["--steps", "1", "--time-range", "0:1s"], 2, "not both"),
    ]
    for extra, code, words in bad:
        p = run([ctx.commprof, "export", "--format", "perfetto", h5, "-o", out, *extra], check_rc=code)
        expect(words in p.stderr, f"{extra}: stderr lacks '{words}':\n{p.stderr}")
        expect(not os.path.exists(out), f"{extra}: left {out} behind")
    p = run([ctx.commprof, "export", "--format", "memory-json", h5, "-o", out, "--steps", "1"], check_rc=2)
    expect("apply to --format chrome and perfetto only" in p.stderr, p.stderr)
    p = run([ctx.commprof, "export", "--format", "perfetto", h5, "-o", "/nonexistent_dir/x.pftrace"], check_rc=1)
    expect("cannot write /nonexistent_dir/x.pftrace: directory /nonexistent_dir does not exist" in p.stderr, p.stderr)
    p = run([ctx.commprof, "export", "--format", "pftrace", h5, "-o", out], check_rc=2)
    expect("chrome, perfetto, memory-html, memory-json" in p.stderr, p.stderr)
    # A file without step marks (the memory profile marks none).
    mem = ctx.path("mem.h5")
    run([ctx.test_program("make_memory_profile"), mem, "--ranks", "2"], check_rc=0)
    p = run([ctx.commprof, "export", "--format", "perfetto", mem, "-o", out, "--steps", "1"], check_rc=1)
    expect("mark no steps" in p.stderr and mem in p.stderr, f"--steps on a file without steps: {p.stderr}")
    expect(not os.path.exists(out), "--steps on a file without steps left a file behind")
    # Steps the file does not have: the file's steps are named.
    steps = ctx.path("steps.h5")
    run([ctx.commprof, "run", "-o", steps, "--"] + mpirun(2) +
        [ctx.test_program("step_program"), "--steps", "3", "--compute-ms", "5", "--slow-rank", "0", "--slow-step",
         "9", "--slow-ms", "0"], env=ENV, check_rc=0, timeout=180)
    p = run([ctx.commprof, "export", "--format", "chrome", steps, "-o", out, "--steps", "7-9"], check_rc=1)
    expect("steps: 0-2" in p.stderr and steps in p.stderr, f"--steps 7-9: {p.stderr}")
    expect(not os.path.exists(out), "--steps 7-9 left a file behind")


if __name__ == "__main__":
    if shutil.which("protoc") is None:
        print("perfetto_export: SKIPPED: protoc is not installed (scripts/install-deps.sh installs protobuf-compiler)")
        sys.exit(77)
    a, ctx = case_arguments(["real_job", "gpu_memory", "cuts", "errors"])
    {"real_job": case_real_job, "gpu_memory": case_gpu_memory, "cuts": case_cuts, "errors": case_errors}[a.case](ctx)
    print(f"{a.case}: ok")
