#!/usr/bin/env bash
# The style gate of CI (scripts/test.sh runs it after the release build); exits non-zero on any
# finding:
#   format  every C/C++/CUDA file of the repository is clang-format clean (.clang-format);
#   tidy    the configured clang-tidy checks (.clang-tidy, every one an error) find nothing in the
#           product code: the C++ of core, collector, nccl_hooks, aggregator, analysis, cli and the
#           headers they include from there. Run over the release build's compile_commands.json.
#           slurm/spank_commprof.c is C: it is format-checked, not tidied (the checks are C++ ones).
#
# Usage: scripts/lint.sh [--build DIR] [--jobs N] [--format-only | --tidy-only] [--fix] [FILE...]
#   --build DIR  the configured build tree whose compile_commands.json tidy reads (build/release)
#   --fix        rewrite instead of failing: clang-format -i, then clang-tidy's fix-its
#   FILE...      only these files (paths from the repository root); default: all of them
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=build/release
JOBS=$(nproc)
DO_FORMAT=1
DO_TIDY=1
FIX=0
FILES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --format-only) DO_TIDY=0; shift ;;
    --tidy-only) DO_FORMAT=0; shift ;;
    --fix) FIX=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "lint: unknown option $1" >&2; exit 2 ;;
    *) FILES+=("$1"); shift ;;
  esac
done

PRODUCT_DIRS='core|collector|nccl_hooks|aggregator|analysis|cli'
status=0

# The files of the repository (git's list where there is one, so build trees are never looked at).
all_sources() {
  if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$ROOT" ls-files --cached --others --exclude-standard -- \
      '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh' | while read -r f; do [ -f "$f" ] && echo "$f"; done
  else
    find . \( -path ./build -o -path './.*' \) -prune -o -type f \
      \( -name '*.c' -o -name '*.cc' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) \
      -print | sed 's|^\./||'
  fi
}

if [ "$DO_FORMAT" -eq 1 ]; then
  start=$(date +%s)
  if [ ${#FILES[@]} -gt 0 ]; then
    format_files=$(printf '%s\n' "${FILES[@]}" | grep -E '\.(c|cc|cpp|h|hpp|cu|cuh)$' || true)
  else
    format_files=$(all_sources)
  fi
  n=$(printf '%s' "$format_files" | grep -c . || true)
  if [ "$FIX" -eq 1 ]; then
    [ "$n" -eq 0 ] || printf '%s\n' "$format_files" | xargs -P "$JOBS" -n 16 clang-format -i
  elif [ "$n" -gt 0 ] && ! printf '%s\n' "$format_files" | xargs -P "$JOBS" -n 16 clang-format --dry-run -Werror; then
    echo "lint: clang-format: the files above are not formatted (fix: scripts/lint.sh --format-only --fix)" >&2
    status=1
  fi
  echo "lint: clang-format: $n files checked in $(($(date +%s) - start)) s" >&2
fi

if [ "$DO_TIDY" -eq 1 ]; then
  start=$(date +%s)
  tidy_status=0
  db="$BUILD/compile_commands.json"
  if [ ! -f "$db" ]; then
    echo "lint: $db not found: configure first (cmake --preset release)" >&2
    exit 2
  fi
  # The product translation units listed in the database (each once).
  tidy_files=$(python3 - "$db" "$ROOT" "$PRODUCT_DIRS" "${FILES[@]}" <<'EOF'
import json, os, re, sys
db, root, dirs, only = sys.argv[1], sys.argv[2], sys.argv[3], set(sys.argv[4:])
pattern = re.compile(r"^(%s)/.*\.(cc|cpp)$" % dirs)
seen = []
for entry in json.load(open(db)):
    path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    rel = os.path.relpath(path, root)
    if pattern.match(rel) and rel not in seen and (not only or rel in only):
        seen.append(rel)
print("\n".join(sorted(seen)))
EOF
)
  n=$(printf '%s' "$tidy_files" | grep -c . || true)
  # Headers of the product directories are checked where a product file includes them.
  header_filter="^$ROOT/($PRODUCT_DIRS|include/commprof)/"
  # run-clang-tidy takes the files as regular expressions: one anchored, escaped path each.
  file_res=$(printf '%s\n' "$tidy_files" | sed 's|[.+]|\\&|g; s|^|^'"$ROOT"'/|; s|$|$|')
  # clang's pedantic warning on the NCCL ABI's nested anonymous structs (nccl_hooks/nccl_profiler_abi.h,
  # NCCL's layout) is not ours to change; gcc, which builds it, accepts them.
  tidy_args=(-quiet -j "$JOBS" -p "$BUILD" -header-filter "$header_filter" -extra-arg=-Wno-nested-anon-types)
  quiet_out='^(clang-tidy(-[0-9]+)? |[0-9]+ warnings? (and [0-9]+ errors? )?generated|Suppressed [0-9]+ warnings|Use -header-filter|Error while processing)'
  if [ "$n" -eq 0 ]; then
    :
  elif [ "$FIX" -eq 1 ]; then
    # A header seen from several files: its fix-its are merged once by clang-apply-replacements.
    fixes=$(mktemp -d)
    trap 'rm -rf "$fixes"' EXIT
    # shellcheck disable=SC2086
    run-clang-tidy "${tidy_args[@]}" -export-fixes "$fixes/fixes.yaml" \
      $file_res >/dev/null 2>&1 || true
    if [ -s "$fixes/fixes.yaml" ]; then clang-apply-replacements "$fixes"; fi
    echo "lint: clang-tidy: fix-its applied; run without --fix for what is left" >&2
  elif command -v run-clang-tidy >/dev/null; then
    # shellcheck disable=SC2086
    set +e +o pipefail
    run-clang-tidy "${tidy_args[@]}" $file_res 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -v -E "$quiet_out"
    rc=${PIPESTATUS[0]}
    set -e -o pipefail
    [ "$rc" -eq 0 ] || tidy_status=1
  else
    set +e +o pipefail
    printf '%s\n' "$tidy_files" | xargs -P "$JOBS" -n 1 clang-tidy --quiet -p "$BUILD" \
      --header-filter "$header_filter" --extra-arg=-Wno-nested-anon-types 2>&1 | grep -v -E "$quiet_out"
    rc=${PIPESTATUS[1]}
    set -e -o pipefail
    [ "$rc" -eq 0 ] || tidy_status=1
  fi
  [ "$tidy_status" -eq 0 ] || status=1
  [ "$tidy_status" -eq 0 ] || echo "lint: clang-tidy: findings above (fix-its: scripts/lint.sh --tidy-only --fix)" >&2
  echo "lint: clang-tidy: $n translation units checked in $(($(date +%s) - start)) s" >&2
fi
exit "$status"
