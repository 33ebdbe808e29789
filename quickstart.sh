#!/usr/bin/env bash
# dct quickstart for a fresh Debian 12 machine.
#
#   ./quickstart.sh        install what is missing, build, run the demo (DLRM training + dct-bench)
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
          nlohmann-json3-dev dataset-fashion-mnist libzstd-dev liblz4-dev libdeflate-dev ccache)
# The tests of the Python package and its PyTorch hook (bindings/python) need these too, and
# the unit tests a German locale's sources (`locales`).
if [ "$mode" = test ]; then
  packages+=(python3-mpi4py python3-numpy python3-pytest python3-torch locales)
fi
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
# Through ccache (its cache in ~/.cache/ccache unless CCACHE_DIR says otherwise): a second run
# recompiles only what changed, even from a new clone.
if command -v ccache > /dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
fi
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
demo="$build_dir/examples/dlrm/dct-dlrm"
timed() {  # timed LABEL COMMAND...: runs it and says how long it took
  local label=$1 start=$SECONDS
  shift
  "$@"
  echo "   ($label: $((SECONDS - start)) s)"
}
if [ -x "$demo" ]; then
  echo "== demo: a DLRM-style model trained hybrid-parallel on Fashion-MNIST, 4 ranks, 5 epochs:"
  echo "   dense (MPI_Allreduce + MPI_Alltoallv) against dct with the settings recommended for"
  echo "   SGD with momentum: the library applies the momentum before compressing (dct_momentum,"
  echo "   DGC's momentum correction), sends fp16 values (dct_values=fp16), and each MLP's"
  echo "   gradients go in one request (--bucket-per-mlp: one top-k budget per MLP rather than"
  echo "   per layer). Same seed, data order and initial weights for both."
  timed "training demo" mpiexec -n 4 "$demo" --modes dense,dct --epochs 5 --quiet \
    --momentum-correction --values fp16 --density 0.0125 --bucket-per-mlp
  echo "== the contrast: dct at the plain library defaults (DCT-DP density 0.01 per layer, DCT-MP"
  echo "   keep 0.05) under the application's own momentum: error feedback then lags the momentum,"
  echo "   and accuracy drops by ~3 points; compare with the dense row above"
  timed "training demo, plain defaults" mpiexec -n 4 "$demo" --modes dct --epochs 5 --quiet
  echo "== past 100x fewer DP bytes: sign values (dct_values=sign, 1 bit per kept entry, the rest"
  echo "   fed back), momentum correction, one request per MLP; compare with the dense row above"
  timed "training demo, sign values" mpiexec -n 4 "$demo" --modes dct --epochs 5 --quiet \
    --momentum-correction --values sign --mp-values fp16 --density 0.015 --bucket-per-mlp
  echo "   DP/MP ratio: bytes the dense collectives would send per rank / bytes dct sent."
  echo "   Over 10 seeds (README): the recommended row ends ~0.3 points below dense at ~51x fewer"
  echo "   DP bytes, the sign row at dense's accuracy (-0.02) at ~107x, both at ~21x fewer MP"
  echo "   bytes; the plain defaults ~3 points below. One seed moves by ~0.6 points either way."
  echo "   Time ('vs dense': dense's wall time / the row's): the rows above ran over shared"
  echo "   memory, where all 4 ranks share this machine's cores and memory: there is no network"
  echo "   whose time compression could save, only its CPU cost, so dct's rows are slower."
  echo "== the network it is for: dense against the recommended row at the DCT paper's layer"
  echo "   widths (--paper-sizes, 461,914 MLP parameters), 3 epochs, the 4 ranks talking over TCP"
  echo "   on a loopback shaped to 10 Gbit/s (hpc/netem/dct-netem: a network namespace and tc)"
  netem=hpc/netem/dct-netem
  if probe=$("$netem" --rate 10gbit -- true 2>&1); then
    timed "training demo, 10 Gbit/s" "$netem" --rate 10gbit -- mpiexec -n 4 "$demo" \
      --paper-sizes --modes dense,dct --epochs 3 --quiet --momentum-correction --values fp16 \
      --density 0.0125 --bucket-per-mlp
    echo "   dct's wall time against dense's is the row's 'vs dense' (above 1: sooner); the"
    echo "   shaped link is shared by all 4 ranks, as on one node's network port"
  else
    echo "   skipped: this machine cannot shape a link (needs root or unprivileged user"
    echo "   namespaces, and tc): ${probe##*dct-netem: }"
  fi
else
  echo "== demo: examples/dlrm was not built (BLAS, CLI11 or nlohmann-json missing): skipped"
fi
echo
echo "== dct-bench allreduce, 4 ranks, library defaults (tau holds the target density on every"
echo "   call: see the worst_dev column)"
timed "bench, defaults" mpiexec -n 4 "$bench" allreduce --sizes 1M,4M,16M --iters 10
echo
echo "== the same with the paper's schedule (tau re-estimated every 1000 calls, reused between):"
echo "   error feedback drives the achieved density away from the target"
DCT_TAU_CONTROL=fixed timed "bench, fixed schedule" \
  mpiexec -n 4 -x DCT_TAU_CONTROL "$bench" allreduce --sizes 1M,4M --iters 10
echo
echo "== next: README.md's first programs (C, C++, Fortran, Python); from Python and PyTorch DDP:"
echo "   export PYTHONPATH=$(cd "$build_dir" && pwd)/python   (docs/python.md; ./quickstart.sh test"
echo "   installs python3-mpi4py, python3-numpy, python3-torch)"
