"""What every end-to-end script needs: the build's paths, a work directory of its own, mpirun
with the flags a root or oversubscribed machine needs, a subprocess runner and a failing check.
Imported by e2e_capture.py, the fault suites and the scripts built on them."""
import argparse
import os
import shutil
import subprocess


class Ctx:
    """The build under test and one case's work directory (emptied on construction)."""

    def __init__(self, build, work):
        self.build = os.path.abspath(build)
        self.work = os.path.abspath(work)
        self.commprof = os.path.join(self.build, "cli", "commprof")
        self.example = os.path.join(self.build, "examples", "mpi_straggler")
        self.library = os.path.join(self.build, "collector", "libcommprof.so")
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)

    def path(self, name):
        return os.path.join(self.work, name)

    def test_program(self, name):
        """A program built from tests/e2e (fault_program, c_api_program, ...)."""
        return os.path.join(self.build, "tests", "e2e", name)


def mpirun(n=4):
    cmd = ["mpirun", "--oversubscribe", "-np", str(n)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


def run(cmd, env=None, timeout=120, check_rc=None, cwd=None, unset=()):
    """Runs `cmd` with the environment plus `env`, less the variables in `unset`; with `check_rc`,
    an exit code other than it fails with the command's output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    for name in unset:
        full_env.pop(name, None)
    p = subprocess.run(cmd, env=full_env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    if check_rc is not None and p.returncode != check_rc:
        raise AssertionError(f"{' '.join(cmd)}: exit code {p.returncode}, expected {check_rc}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def expect(cond, message):
    if not cond:
        raise AssertionError(message)


def case_arguments(choices=None, extra=None):
    """The command line every script takes: CASE --build BUILD_DIR --work WORK_DIR (plus what
    `extra(parser)` adds). Returns the parsed arguments and the case's Ctx."""
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(choices) if choices is not None else None)
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    if extra is not None:
        extra(ap)
    a = ap.parse_args()
    return a, Ctx(a.build, a.work)


def run_cases(cases):
    """main() of a script whose cases are `cases` (name -> function of the Ctx): runs the one named
    on the command line and prints "<case>: ok" when it returns."""
    a, ctx = case_arguments(cases)
    cases[a.case](ctx)
    print(f"{a.case}: ok")
