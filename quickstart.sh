#!/usr/bin/env bash
# dct quickstart for a fresh Debian 12 machine.
#
#   ./quickstart.sh        install what is missing, build, run the demo (dct-bench, 4 ranks)
#   ./quickstart.sh test   install what is missing, build, run the whole test suite
#
# Works as root and as a user with sudo. Environment: DCT_BUILD_DIR (default ./build),
# CI=true (warnings become errors, and a sanitizer build is added by .ci/run).
set -euo pipefail

mode=${1:-demo}
case "$mode" in
  demo | test) ;;
  *) echo "usage: $0 [demo|test]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")"
build_dir=${DCT_BUILD_DIR:-build}
jobs=$(nproc 2>/dev/null || echo 2)

# --- 1. Debian packages, installed only if missing -------------------------------------
packages=(g++ gfortran make cmake pkg-config libopenmpi-dev openmpi-bin libtrilinos-kokkos-dev
          libgtest-dev libhdf5-openmpi-dev zlib1g-dev libopenblas-dev libcli11-dev
          nlohmann-json3-dev dataset-fashion-mnist)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    # Ask for a password only when someone can type it.
    if [ -t 0 ]; then as_root=(sudo); else as_root=(sudo -n); fi
  fi
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# --- 2. Build ----------------------------------------------------------------------------
werror=OFF
[ "${CI:-}" = true ] && werror=ON
echo "== building in $build_dir"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DDCT_WERROR="$werror" \
  -DDCT_BUILD_TESTS=ON -DDCT_BUILD_EXAMPLES=ON
cmake --build "$build_dir" -j "$jobs"

# --- 3. Run ------------------------------------------------------------------------------
# Open MPI refuses root and more ranks than cores unless told so; the demo uses 4 ranks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none

if [ "$mode" = test ]; then
  echo "== running the test suite"
  ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"
  exit
fi

bench="$build_dir/hpc/bench/dct-bench"
echo "== demo: dct-bench allreduce on 4 ranks, tau re-estimated every call (target density)"
mpiexec -n 4 "$bench" allreduce --sizes 1M,4M,16M --iters 10 --interval 1
echo
echo "== demo: the same with tau re-estimated every 1000 calls (the paper's and dct's default)"
mpiexec -n 4 "$bench" allreduce --sizes 1M,4M,16M --iters 10
echo
echo "== example: a training loop in C whose MPI_Allreduce became DCT_Allreduce"
mpiexec -n 4 "$build_dir/examples/c/dct_example_train"
