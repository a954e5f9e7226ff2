#!/usr/bin/env bash
# Packs what bench/gpu_check.sh needs to run on a GPU machine that has the CUDA driver, CUDA and
# NCCL but none of commprof's Debian dependencies (Open MPI, HDF5, OpenSSL, ...): the built
# binaries, the shared libraries they load (their ldd closure on this machine, without the C and
# C++ runtimes, the CUDA driver and libnccl, which the GPU machine has), libcupti, and an Open MPI
# installation relocatable with OPAL_PREFIX.
#
#   bench/gpu_bundle.sh [--build DIR] [--out DIR]      (defaults: build/release, .gpu)
#
# On the GPU machine, from the repository root:
#   B=$PWD/.gpu; export OPAL_PREFIX=$B/usr PATH=$B/usr/bin:$PATH
#   export LD_LIBRARY_PATH=$B/libs:$B/build/collector:<the directory of libnccl.so.2>
#   PYTHON=python3 bench/gpu_check.sh --prebuilt --build $B/build
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$here/build/release"
out="$here/.gpu"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "gpu_bundle.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bins=(cli/commprof collector/libcommprof.so nccl_hooks/libnccl-profiler-commprof.so examples/cuda_nccl_allreduce)
for b in "${bins[@]}"; do
  [[ -e "$build/$b" ]] || { echo "gpu_bundle.sh: $build/$b is not built (a build with the CUDA toolkit)" >&2; exit 1; }
done
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi
[[ -d "$ompi_lib" ]] || { echo "gpu_bundle.sh: no Open MPI in $ompi_lib" >&2; exit 1; }

rm -rf "$out" && mkdir -p "$out/build" "$out/libs" "$out/usr/bin" "$out/usr/lib/x86_64-linux-gnu" "$out/usr/share"
for b in "${bins[@]}"; do
  mkdir -p "$out/build/$(dirname "$b")" && cp -L "$build/$b" "$out/build/$b"
done
# Open MPI keeps Debian's layout under the prefix, so OPAL_PREFIX relocates it.
cp -a "$ompi_lib" "$out/usr/lib/x86_64-linux-gnu/"
cp -a /usr/share/openmpi "$out/usr/share/"
for t in orted orterun mpirun mpiexec; do cp -L "/usr/bin/$t" "$out/usr/bin/" 2>/dev/null || true; done

# The ldd closure, less what the GPU machine brings itself.
# Open MPI's own plugins are not followed: those whose libraries are absent (network fabrics the
# GPU machine may not have) fail to load and are skipped (quietly with
# OMPI_MCA_mca_base_component_show_load_errors=0); shared memory and TCP need nothing more.
skip='^(libc|libm|libpthread|libdl|librt|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libnccl|linux-vdso|libcommprof)\.'
mapfile -t objs < <(printf '%s\n' "${bins[@]/#/$build/}" /usr/bin/orted "$ompi_lib"/lib/*.so.*)
for o in "${objs[@]}"; do
  ldd "$o" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' || true
done | sort -u | while read -r name path; do
  if [[ ! "$name" =~ $skip ]] && [[ ! -e "$out/libs/$name" ]]; then cp -L "$path" "$out/libs/$name"; fi
done
# Without debug information: the bundle travels (a release build's CLI is over 100 MB with it).
find "$out/build" "$out/libs" "$out/usr" -type f \( -name '*.so*' -o -perm -u+x \) -exec strip --strip-debug {} + 2>/dev/null || true
cupti=$(ldconfig -p | awk '/libcupti\.so\.13 /{print $NF; exit}')
cupti=${cupti:-/usr/local/cuda/lib/libcupti.so.13}
[[ -e "$cupti" ]] && cp -L "$cupti" "$out/libs/"
echo "gpu_bundle.sh: $(du -sh "$out" | cut -f1) in $out ($(ls "$out/libs" | wc -l) libraries)"
