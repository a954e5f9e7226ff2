#!/usr/bin/env python3
"""`cmake --install` (docs/install.md): the layout under a prefix, the C API through
find_package(commprof), the installed `commprof run` preloading the installed collector, and the
bash completion.

Usage: install_layout.py CASE --build BUILD_DIR --work WORK_DIR

Cases and their truth:
  layout       `cmake --install BUILD --prefix P` puts bin/commprof, LIBDIR/libcommprof.so, the NCCL
               plugin, the SPANK plugin (LIBDIR/slurm, when built), include/commprof/{commprof,event}.h,
               the CMake package (LIBDIR/cmake/commprof), the docs (share/doc/commprof), the batch
               script (share/commprof) and the completion (share/bash-completion/completions/commprof)
               under P; P/bin/commprof --version names the project's version.
  find_package A CMake project outside the tree finds the installed package (CMAKE_PREFIX_PATH=P), links
               a C program against commprof::commprof and builds it; P/bin/commprof run records it:
               the program sees LD_PRELOAD starting with P's libcommprof.so (not the build tree's),
               and the file holds rank 0 with its 5 steps and 5 ranges.
  completion   The installed completion, sourced in bash, completes commands ("re" -> relay, report),
               a command's options ("report --fo" -> --format), a choice ("run --on-hang" -> report,
               abort) and a nested command ("import" -> kineto).
"""
import json
import os
import re
import subprocess

from e2e_support import expect, run, run_cases

PROGRAM = r"""
#include <commprof/commprof.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  const char* preload = getenv("LD_PRELOAD");
  FILE* f = fopen(getenv("PRELOAD_REPORT"), "w");
  fprintf(f, "%s\n", preload ? preload : "");
  fclose(f);
  for (uint64_t s = 0; s < 5; ++s) {
    commprof_step(s);
    commprof_range_push("work");
    commprof_range_pop();
  }
  return 0;
}
"""


def cache_value(ctx, name):
    with open(os.path.join(ctx.build, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split("=", 1)[1].strip()
    return None


def install(ctx):
    prefix = ctx.path("prefix")
    run(["cmake", "--install", ctx.build, "--prefix", prefix], check_rc=0, timeout=300)
    libdir = cache_value(ctx, "CMAKE_INSTALL_LIBDIR") or "lib"
    return prefix, os.path.join(prefix, libdir)


def case_layout(ctx):
    prefix, lib = install(ctx)
    want = ["bin/commprof", "include/commprof/commprof.h", "include/commprof/event.h",
            "share/doc/commprof/README.md", "share/doc/commprof/docs/cli.md", "share/doc/commprof/docs/install.md",
            "share/commprof/commprof.sbatch", "share/bash-completion/completions/commprof"]
    for rel in want:
        expect(os.path.isfile(os.path.join(prefix, rel)), f"{rel} not installed")
    for name in ("libcommprof.so", "libnccl-profiler-commprof.so", "cmake/commprof/commprofConfig.cmake",
                 "cmake/commprof/commprofConfigVersion.cmake"):
        expect(os.path.isfile(os.path.join(lib, name)), f"{name} not installed in {lib}")
    if os.path.exists(os.path.join(ctx.build, "slurm", "spank_commprof.so")):
        expect(os.path.isfile(os.path.join(lib, "slurm", "spank_commprof.so")), "the SPANK plugin not installed")
    expect(os.access(os.path.join(prefix, "bin/commprof"), os.X_OK), "bin/commprof is not executable")
    version = cache_value(ctx, "CMAKE_PROJECT_VERSION")
    p = run([os.path.join(prefix, "bin/commprof"), "--version"], check_rc=0)
    expect(p.stdout.strip() == f"commprof {version}", f"--version: {p.stdout!r}, project version {version}")


def case_find_package(ctx):
    prefix, lib = install(ctx)
    src = ctx.path("consumer")
    os.makedirs(src)
    with open(os.path.join(src, "app.c"), "w") as f:
        f.write(PROGRAM)
    with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.25)\nproject(consumer C)\n"
                "find_package(commprof 0.1 REQUIRED)\nadd_executable(app app.c)\n"
                "target_link_libraries(app PRIVATE commprof::commprof)\n")
    build = ctx.path("consumer-build")
    run(["cmake", "-S", src, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}"], check_rc=0, timeout=120)
    run(["cmake", "--build", build], check_rc=0, timeout=120)
    out, seen = ctx.path("app.h5"), ctx.path("preload.txt")
    # Outside the build tree, so that nothing but the install can be found next to the command.
    run([os.path.join(prefix, "bin/commprof"), "run", "-q", "-o", out, "--", os.path.join(build, "app")],
        env={"PRELOAD_REPORT": seen}, cwd=ctx.work, check_rc=0, timeout=120)
    with open(seen) as f:
        preload = f.read().strip()
    expect(preload.split(":")[0] == os.path.realpath(os.path.join(lib, "libcommprof.so")),
           f"LD_PRELOAD {preload!r}: not the installed collector in {lib}")
    info = json.loads(run([os.path.join(prefix, "bin/commprof"), "info", "--json", out], check_rc=0).stdout)
    ranks = info["ranks"]
    expect(len(ranks) == 1 and ranks[0]["rank"] == 0, f"ranks {ranks}")
    kinds, names = ranks[0]["events_by_kind"], ranks[0]["events_by_name"]
    expect(names.get("work") == 5 and kinds.get("step") == 5,
           f"rank 0: by kind {kinds}, by name {names}: expected 5 steps and 5 ranges named work")


def case_completion(ctx):
    prefix, _ = install(ctx)
    script = os.path.join(prefix, "share/bash-completion/completions/commprof")
    exe = os.path.join(prefix, "bin/commprof")
    probe = f"""source {script}
comp() {{ COMP_WORDS=("$@"); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); _commprof; echo "${{COMPREPLY[*]}}"; }}
comp {exe} re
comp {exe} report --fo
comp {exe} run --on-hang ''
comp {exe} import ''
complete -p commprof
"""
    p = subprocess.run(["bash", "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    lines = p.stdout.splitlines()
    expect(p.returncode == 0 and len(lines) == 5, f"completion probe: rc {p.returncode}\n{p.stdout}\n{p.stderr}")
    expect(sorted(lines[0].split()) == ["relay", "report"], f"'re': {lines[0]!r}")
    expect(lines[1].split() == ["--format"], f"'report --fo': {lines[1]!r}")
    expect(sorted(lines[2].split()) == ["abort", "report"], f"'run --on-hang': {lines[2]!r}")
    expect("kineto" in lines[3].split(), f"'import': {lines[3]!r}")
    expect(re.search(r"-F _commprof commprof$", lines[4]), f"not registered for commprof: {lines[4]!r}")


if __name__ == "__main__":
    run_cases({"layout": case_layout, "find_package": case_find_package, "completion": case_completion})
