#!/usr/bin/env python3
"""A command line that explains itself (docs/cli.md): help, unknown commands, exit codes.

Usage: cli_usage.py CASE --build BUILD_DIR --work WORK_DIR

Cases and their truth:
  help        `commprof --help` lists each command with the first sentence of its description, within
              100 columns. For every command `commprof help` lists (and `import kineto`): `commprof help CMD` prints
              exactly what `commprof CMD --help` prints, exit 0; its usage line starts with
              "Usage: commprof CMD" (run's is "Usage: commprof run [OPTIONS] -- LAUNCHER ARGS...");
              no option line shows parser notation: no "{...}" after a name, no "TYPE:TYPE", no
              " in [LOW - HIGH]"; `-h,--help` keeps both names.
  unknown     `commprof frobnicate` and `commprof help frobnicate` exit 2 naming the word and listing
              the commands; `commprof` alone exits 2 listing them; `commprof --frob` names the option;
              a command's usage error (`info --bogus`, `report` without its file) is one line
              starting `commprof CMD: ` and pointing at `commprof CMD --help`.
  demo_targets scripts/demo.sh builds only the targets it names with --target; from a clean tree
              those need no source under tests/ or bench/, fewer build steps than the whole tree,
              and they link everything the demo runs (commprof, libcommprof.so, the NCCL plugin,
              examples/mpi_straggler). Read from ninja's plan (`ninja -t commands`), nothing built.
  demo_packages `scripts/install-deps.sh --demo` (the demo's own install) is enough for what the demo
              builds: a fresh tree configured as demo.sh configures it on a machine without the test
              toolchain (tests and benchmarks off) finds nothing outside those packages and what they
              depend on. Every file CMake found (compilers, libraries, tools: the file paths of its
              cache, its MPI, HDF5 and Boost variables) and one file of every package-specific
              directory it found (CMake config dirs and header dirs: how CLI11, nlohmann_json, Boost
              and simdjson show) is mapped to its Debian package (`dpkg -S`), and each package must be
              in the demo list's dependency closure (`apt-cache depends --recurse`). At least 10 files
              must be checked; leaving liblz4-dev or libcli11-dev out of the demo list fails it.
  partial_import The shipped 2-of-128-rank torch.profiler trace (../shared/data/kineto/
              hta-trace-filter-2rank; skipped, naming the path, without it) imported: the text report
              lists ranks 0 and 1 in each per-rank table and names ranks 2-127 in one line (no row of
              zeros), the HTML ranks table has 2 rows; `commprof hta` prints each top-kernel table's
              different names differently (as many distinct printed names as distinct full names in
              its JSON), within 40 characters.
  unreadable  Every command that reads a commprof file (info, report, check, export, hta, stats, diff)
              exits 2 on a missing file and on a file that is not HDF5, with one line that names the
              file.
"""
import os
import re
import shutil
import subprocess

from e2e_support import expect, run, run_cases

ARTIFACTS = [(re.compile(r"^\s+-[-\w,]*\{[^}]*\}"), "a flag default in braces"),
             (re.compile(r"\b([A-Z]+):\1\b"), "TYPE:TYPE"),
             (re.compile(r" in \[[^\]]*\]"), "a range in CLI11's brackets")]


def commands(ctx):
    p = run([ctx.commprof, "help"], check_rc=0)
    block = p.stdout.split("Subcommands:", 1)[1]
    names = [m.group(1) for m in re.finditer(r"^  (\w+)\s", block, re.M)]
    expect({"run", "report", "export", "stats", "diff", "help"} <= set(names), f"commands listed: {names}")
    return [n for n in names if n != "help"]


def case_help(ctx):
    # The top-level list: each command's first sentence, wrapped within 100 columns.
    top = run([ctx.commprof, "--help"], check_rc=0).stdout
    listed = top.split("Subcommands:", 1)[1].splitlines()
    expect(all(len(l) <= 100 for l in listed), f"command list lines over 100 columns: {[l for l in listed if len(l) > 100]}")
    expect(any(l.startswith("  export ") for l in listed) and "flow arrows" not in top,
           "the list shows export's first sentence only")
    for cmd in commands(ctx) + ["import kineto"]:
        words = cmd.split()
        by_flag = run([ctx.commprof, *words, "--help"], check_rc=0).stdout
        by_help = run([ctx.commprof, "help", *words], check_rc=0).stdout
        expect(by_flag == by_help, f"`commprof help {cmd}` differs from `commprof {cmd} --help`")
        usage = [l for l in by_flag.splitlines() if l.startswith("Usage:")]
        expect(usage and usage[0].startswith(f"Usage: commprof {cmd}"), f"{cmd}: usage line {usage}")
        if cmd == "run":
            expect(usage[0] == "Usage: commprof run [OPTIONS] -- LAUNCHER ARGS...", f"run: {usage[0]}")
        for line in by_flag.splitlines():
            if not line.startswith("  -"):
                continue
            for pattern, what in ARTIFACTS:
                expect(not pattern.search(line), f"{cmd} --help shows {what}: {line!r}")
        expect("-h,--help" in by_flag, f"{cmd} --help lost the short name of --help")
    run_help = run([ctx.commprof, "run", "--help"], check_rc=0).stdout
    for shown in ("--stacks[=DEPTH] (1-64)", "--deflate INT (0-9)", "--no-analysis ", "--on-hang report|abort"):
        expect(shown in run_help, f"run --help lacks {shown!r}")


def case_unknown(ctx):
    for args, word in ((["frobnicate"], "frobnicate"), (["help", "frobnicate"], "frobnicate"),
                       (["help", "import", "frob"], "import frob")):
        p = run([ctx.commprof, *args])
        expect(p.returncode == 2, f"commprof {' '.join(args)}: exit {p.returncode}, expected 2")
        expect(f"'{word}' is not a commprof command" in p.stderr and "commands: " in p.stderr,
               f"commprof {' '.join(args)}: {p.stderr}")
    p = run([ctx.commprof])
    expect(p.returncode == 2 and "a command is required" in p.stderr and "commands: run, info" in p.stderr,
           f"commprof alone: exit {p.returncode}\n{p.stderr}")
    p = run([ctx.commprof, "--frob"])
    expect(p.returncode == 2 and "--frob is not an option of commprof itself" in p.stderr,
           f"commprof --frob: exit {p.returncode}\n{p.stderr}")
    # Silent beside its speaker only when it is one of several an MPI launch or srun started: a
    # torch worker's RANK, or COMMPROF_ANALYSIS_MPI=off, leaves every process its own messages.
    for env in ({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "x"},
                {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "3", "COMMPROF_ANALYSIS_MPI": "off"}):
        p = run([ctx.commprof, "stats", "--bogus", "x.h5"], env=env)
        expect(p.returncode == 2 and "--bogus" in p.stderr, f"usage error with {env}: {p.returncode}\n{p.stderr}")
    p = run([ctx.commprof, "stats", "--bogus", "x.h5"], env={"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "3"})
    expect(p.returncode == 0 and p.stderr == "", f"rank 1 of an mpirun of 3 leaves it to rank 0: {p.returncode}\n{p.stderr}")
    # A usage error of a command names the command and where its options are explained.
    for args, said in ((["info", "--bogus", "x.h5"], "--bogus"), (["report"], "file is required"),
                       (["import", "kineto"], "is required")):
        p = run([ctx.commprof, *args])
        expect(p.returncode == 2 and p.stderr.startswith(f"commprof {args[0]}: ") and said in p.stderr and
               f"(see commprof {args[0]} --help)" in p.stderr, f"commprof {' '.join(args)}: {p.returncode}\n{p.stderr}")


def case_unreadable(ctx):
    missing, junk = ctx.path("missing.h5"), ctx.path("junk.h5")
    with open(junk, "w") as f:
        f.write("not an HDF5 file\n")
    for path in (missing, junk):
        for args in (["info", path], ["report", path], ["check", path, "--max", "wait_share=1"],
                     ["export", path, "-o", ctx.path("t.json")], ["hta", path], ["stats", path],
                     ["diff", path, path]):
            p = run([ctx.commprof, *args])
            expect(p.returncode == 2, f"{' '.join(args)}: exit {p.returncode}, expected 2\n{p.stderr}")
            lines = p.stderr.strip().splitlines()
            expect(len(lines) == 1 and path in lines[0], f"{' '.join(args)}: one line naming the file:\n{p.stderr}")


def case_partial_import(ctx):
    import json
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    trace = os.path.join(os.path.dirname(repo), "shared", "data", "kineto", "hta-trace-filter-2rank")
    if not os.path.isdir(trace):
        print(f"SKIPPED: Kineto test data not found: {trace}")
        sys.exit(77)
    h5 = ctx.path("part.h5")
    run([ctx.commprof, "import", "kineto", trace, "-o", h5, "-q"], check_rc=0)
    text = run([ctx.commprof, "report", h5], check_rc=0).stdout
    rows = [l for l in text.splitlines() if re.match(r"^\d+\s", l)]
    expect(sorted({int(l.split()[0]) for l in rows}) == [0, 1], f"per-rank rows for ranks {sorted({l.split()[0] for l in rows})}")
    expect("rank(s) 2-127: never connected, no data" in text, f"no one-line summary of the missing ranks:\n{text}")
    expect(len(text.splitlines()) < 80, f"{len(text.splitlines())} lines for 2 ranks of data")
    html = ctx.path("part.html")
    run([ctx.commprof, "report", "--format", "html", "-o", html, h5], check_rc=0)
    page = open(html).read()
    table = page[page.index('id="tbl-ranks"'):]
    table = table[:table.index("</table>")]
    expect(table.count("<tr") == 3, f"HTML ranks table: {table.count('<tr') - 1} rows, expected 2")
    doc = json.loads(run([ctx.commprof, "hta", h5, "--format", "json"], check_rc=0).stdout)
    hta_text = run([ctx.commprof, "hta", h5], check_rc=0).stdout
    blocks = hta_text.split("\ntop ")[1:]
    tables = [t for r in doc["ranks"] for t in r["kernel_breakdown"]["top_kernels"]]
    expect(len(blocks) == len(tables), f"{len(blocks)} top-kernel tables in text, {len(tables)} in JSON")
    collided = 0
    for block, table in zip(blocks, tables):
        printed = [l[:40].rstrip() for l in block.splitlines()[2:] if l and not l.startswith(("others", "\n"))]
        full = [k["name"] for k in table["kernels"] if k["name"] != "others"]
        printed = printed[:len(full)]
        expect(len(set(printed)) == len(set(full)), f"{table['type']}: printed {printed} for {len(set(full))} names")
        collided += len({f[:37] for f in full}) < len(set(full))
    expect(collided > 0, "no table of this trace has names alike in their first 37 characters: the case tests nothing")


def case_demo_targets(ctx):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "scripts", "demo.sh")) as f:
        builds = [l for l in f if "cmake --build" in l]
    expect(len(builds) == 1 and "--target" in builds[0], f"demo.sh builds: {builds}")
    targets = builds[0].split("--target", 1)[1].split()
    expect(os.path.exists(os.path.join(ctx.build, "build.ninja")) and shutil.which("ninja"),
           f"{ctx.build} is not a Ninja build (the presets use Ninja)")
    plan = run(["ninja", "-C", ctx.build, "-t", "commands", *targets], check_rc=0).stdout.splitlines()
    everything = run(["ninja", "-C", ctx.build, "-t", "commands", "all"], check_rc=0).stdout.splitlines()
    stray = [c for c in plan if re.search(r"\b(tests|bench)/", c)]
    expect(not stray, f"the demo's targets build tests or benchmarks: {stray[:3]}")
    expect(len(plan) < len(everything), f"the demo's plan ({len(plan)} steps) is the whole tree's ({len(everything)})")
    for needed in ("-o cli/commprof ", "libcommprof.so", "libnccl-profiler-commprof.so", "-o examples/mpi_straggler "):
        expect(any(needed in c for c in plan), f"the demo's targets do not build {needed.strip()}")
    print(f"demo_targets: {len(plan)} build steps of {len(everything)}")


def owners(path):
    """The Debian packages owning `path` (merged /usr: dpkg may know it by /lib or /usr/lib)."""
    candidates = {path, os.path.realpath(path)}
    for c in list(candidates):
        if c.startswith("/usr/lib/") or c.startswith("/usr/bin/"):
            candidates.add(c[len("/usr"):])
        elif c.startswith("/lib/") or c.startswith("/bin/"):
            candidates.add("/usr" + c)
    for c in sorted(candidates):
        p = subprocess.run(["dpkg", "-S", c], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if p.returncode == 0:
            line = p.stdout.splitlines()[0]
            return {name.strip().split(":")[0] for name in line.rsplit(": ", 1)[0].split(",")}
    return set()


# Directories many packages put files in: no one file of them says which package CMake needed.
GENERIC_DIRS = {"/usr/include", "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/bin", "/usr/share", "/lib",
                "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu/cmake", "/usr/share/cmake", "/usr/lib/cmake"}


def case_demo_packages(ctx):
    if shutil.which("dpkg") is None or shutil.which("apt-cache") is None:
        print("SKIPPED: not a Debian system (no dpkg / apt-cache)")
        raise SystemExit(77)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    demo = run([os.path.join(root, "scripts", "install-deps.sh"), "--list", "--demo"], check_rc=0).stdout.split()
    closure = set()
    deps = run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                "--no-breaks", "--no-replaces", "--no-enhances", "--installed"] + demo, check_rc=0).stdout
    for line in deps.splitlines():
        name = line.split(":", 1)[-1].strip() if line.startswith(" ") else line.strip()
        closure.add(name.strip("<>").split(":")[0])
    expect(set(demo) <= closure, f"the demo's packages are not all installed: {sorted(set(demo) - closure)}")
    tree = ctx.path("demo-configure")
    shutil.rmtree(tree, ignore_errors=True)
    run(["cmake", "-S", root, "-B", tree, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
         "-DCOMMPROF_BUILD_TESTS=OFF", "-DCOMMPROF_BUILD_BENCH=OFF"], check_rc=0, timeout=300)
    # Optional finds of CMake's own modules that nothing of commprof uses (absent, the build is the same).
    optional = {"HDF5_DIFF_EXECUTABLE": "FindHDF5's h5diff"}
    found = set()
    with open(os.path.join(tree, "CMakeCache.txt")) as f:
        for line in f:
            m = re.match(r"^([A-Za-z_0-9]+):(\w+)=(.*)$", line.strip())
            if not m:
                continue
            name, kind, value = m.groups()
            if name in optional or kind not in ("FILEPATH", "PATH", "STRING", "INTERNAL") or not re.search(
                    r"(COMPILER|LIBRAR|INCLUDE|EXECUTABLE|_DIR$|PROGRAM|LINKER|_AR$|RANLIB)", name):
                continue
            for item in re.split(r"[;\s]+", value):
                if not item.startswith("/") or item.startswith("/usr/local/") or item.startswith(tree):
                    continue
                if os.path.isfile(item):
                    found.add(item)
                elif os.path.isdir(item) and item.rstrip("/") not in GENERIC_DIRS:
                    # A package's own directory (a CMake config dir, a header dir such as
                    # /usr/include/hdf5/serial): what header-only packages show (CLI11,
                    # nlohmann_json, Boost, simdjson). One file of it stands for it.
                    files = sorted(f for f in os.listdir(item) if os.path.isfile(os.path.join(item, f)))
                    if files:
                        found.add(os.path.join(item, files[0]))
    unowned, outside = [], {}
    for path in sorted(found):
        pkgs = owners(path)
        if not pkgs:
            unowned.append(path)
        elif not pkgs & closure:
            outside[path] = sorted(pkgs)
    expect(len(found) - len(unowned) >= 10, f"only {len(found) - len(unowned)} files checked: {sorted(found)}")
    expect(not outside, "the demo's configure found files of packages `install-deps.sh --demo` does not "
                        f"install: {outside}")
    print(f"demo_packages: {len(found) - len(unowned)} files found by CMake, every one from the {len(demo)} demo "
          f"packages or their {len(closure)} dependencies ({len(unowned)} owned by no package: {unowned[:3]})")


if __name__ == "__main__":
    run_cases({"help": case_help, "unknown": case_unknown, "demo_targets": case_demo_targets,
               "demo_packages": case_demo_packages,
               "partial_import": case_partial_import,
               "unreadable": case_unreadable})
