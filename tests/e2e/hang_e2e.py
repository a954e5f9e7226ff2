"""The hang watchdog end to end (docs/hangs.md, docs/cli.md "Hang detection"): real 4-rank (or 8)
Open MPI jobs of hang_program.c with one planted hang each, under
`commprof run --hang-timeout 2 --on-hang abort`, every one inside `timeout` so nothing can hang the
suite. The truth is planted: the diagnosis (stderr, prefixed "commprof: hang: ") must name the
planted rank and the kind of fault, `commprof run` must exit 5, and the file's /hang group must be
there (read back with h5py). A healthy job with a quiet phase longer than the timeout must report
nothing. Bad option values are usage errors (exit 2) naming the option and the value.

Usage: hang_e2e.py CASE --build BUILD_DIR --work WORK_DIR
"""
import json
import os
import re
import subprocess
import sys

import e2e_support as es

PY = "/usr/bin/python3"  # Debian's, with python3-h5py
OUTER_TIMEOUT = 120  # seconds: the `timeout` around every job

# case: (program args, ranks, the planted rank, words one of which the diagnosis must say)
HANGS = {
    "skip_allreduce": (["skip-allreduce", "2", "3"], 4, 2, ["never entered", "not entered", "missing"]),
    "bcast_root": (["bcast-root", "1", "2"], 4, 1, ["root"]),
    "allreduce_bytes": (["allreduce-bytes", "3", "2"], 4, 3, ["byte", "size", "count"]),
    "recv_forever": (["recv-forever", "2", "2"], 4, 2, ["recv", "Recv"]),
    "exit_early": (["exit-early", "1", "3"], 4, 1, ["finished", "exited", "ended", "finalize"]),
    "subcomm": (["subcomm", "3", "2"], 4, 3, ["never entered", "not entered", "missing"]),
    "nonblocking": (["nonblocking", "0", "2"], 4, 0, ["never entered", "not entered", "missing", "Iallreduce"]),
    "sendrecv": (["sendrecv", "1", "1"], 4, 1, ["Sendrecv", "sendrecv", "Barrier", "barrier"]),
    "eight_ranks": (["skip-allreduce", "6", "4"], 8, 6, ["never entered", "not entered", "missing"]),
}
CASES = sorted(HANGS) + ["healthy_quiet_phase", "report_keeps_waiting", "bad_options"]


def read_hang_group(path):
    """The /hang group's attribute and member names, by h5py in a separate process (None: no group)."""
    code = ("import h5py,json,sys\n"
            "f=h5py.File(sys.argv[1],'r')\n"
            "g=f.get('hang')\n"
            "print(json.dumps(None if g is None else {'attrs':sorted(g.attrs.keys()),'members':sorted(g.keys())}))\n")
    p = subprocess.run([PY, "-c", code, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    es.expect(p.returncode == 0, f"h5py could not read {path}: {p.stderr}")
    return json.loads(p.stdout)


def commprof_run(ctx, out, args, ranks, on_hang="abort", outer=OUTER_TIMEOUT, signal="KILL"):
    cmd = ["timeout", "-s", signal, str(outer), ctx.commprof, "run", "--hang-timeout", "2", "--on-hang", on_hang,
           "-o", out, "--"] + es.mpirun(ranks) + [ctx.test_program("hang_program")] + args
    return es.run(cmd, timeout=outer + 30)


def hang_lines(stderr):
    return [line[len("commprof: hang: "):] for line in stderr.splitlines() if line.startswith("commprof: hang: ")]


def planted_case(ctx, name):
    args, ranks, planted, words = HANGS[name]
    out = ctx.path("hang.h5")
    p = commprof_run(ctx, out, args, ranks)
    detail = f"\nstderr:\n{p.stderr}"
    es.expect(p.returncode != 124 and p.returncode != 137, f"{name}: the job was not ended by the watchdog{detail}")
    es.expect(p.returncode == 5, f"{name}: exit code {p.returncode}, expected 5 (ended for a hang){detail}")
    lines = hang_lines(p.stderr)
    es.expect(lines, f"{name}: no 'commprof: hang: ' diagnosis on stderr{detail}")
    text = "\n".join(lines)
    es.expect(re.search(rf"\brank {planted}\b", text) or re.search(rf"\branks? [0-9, -]*\b{planted}\b", text),
              f"{name}: the diagnosis does not name the planted rank {planted}{detail}")
    es.expect(any(w in text for w in words), f"{name}: the diagnosis says none of {words}{detail}")
    es.expect(p.stderr.count("commprof: hang: --on-hang") == 1, f"{name}: the hang was reported more than once{detail}")
    group = read_hang_group(out)
    es.expect(group is not None, f"{name}: {out} has no /hang group")
    es.expect(group["attrs"] or group["members"], f"{name}: /hang is empty: {group}")


def healthy_quiet_phase(ctx):
    out = ctx.path("healthy.h5")
    # 5 s of computation with a 2 s timeout: queries go out, but no rank is blocked in a call.
    p = commprof_run(ctx, out, ["none", "5"], 4)
    es.expect(p.returncode == 0, f"healthy job: exit code {p.returncode}, expected 0\nstderr:\n{p.stderr}")
    es.expect(not hang_lines(p.stderr), f"healthy job: a hang was reported\nstderr:\n{p.stderr}")
    es.expect(read_hang_group(out) is None, "healthy job: the file has a /hang group")


def report_keeps_waiting(ctx):
    out = ctx.path("report.h5")
    # --on-hang report: the diagnosis is printed and stored, and the job is left hanging until the
    # outer timeout's SIGTERM, which commprof run forwards to mpirun.
    p = commprof_run(ctx, out, ["recv-forever", "2", "2"], 4, on_hang="report", outer=25, signal="TERM")
    detail = f"\nstderr:\n{p.stderr}"
    es.expect(p.returncode != 5, f"report mode must not end the job for the hang (exit 5){detail}")
    lines = hang_lines(p.stderr)
    es.expect(lines, f"report mode: no diagnosis on stderr{detail}")
    es.expect(any("still waiting" in line for line in lines), f"report mode: does not say it keeps waiting{detail}")
    es.expect(re.search(r"\brank 2\b", "\n".join(lines)), f"report mode: rank 2 is not named{detail}")
    es.expect(read_hang_group(out) is not None, f"report mode: {out} has no /hang group")


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
    if a.case in HANGS:
        planted_case(ctx, a.case)
    elif a.case == "healthy_quiet_phase":
        healthy_quiet_phase(ctx)
    elif a.case == "report_keeps_waiting":
        report_keeps_waiting(ctx)
    else:
        bad_options(ctx)
    print(f"hang_e2e {a.case}: ok")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"hang_e2e: FAIL: {e}")
        sys.exit(1)
