#!/usr/bin/env bash
# dct at scale under SimGrid's SMPI: install what is missing, build dct's sources with smpicxx,
# simulate every (link bandwidth, ranks, density, algorithm) and write docs/simulation.md and
# docs/simulation.png. Method and results: docs/simulation.md.
#
#   hpc/sim/run.sh            the full experiment (25 and 100 Gb/s; 64, 256, 1024 ranks)
#   hpc/sim/run.sh --quick    a smoke run (16 ranks, 4 MB, results checked) into
#                             build-smpi/sim-quick/, under a minute
#   hpc/sim/run.sh --no-verify   skip the 64-rank verification runs
#   hpc/sim/run.sh --report-only rewrite docs/simulation.* from the last run's results
#   hpc/sim/run.sh --add      add this run's measurements to the last run's (e.g. another
#                             bandwidth through DCT_SIM_BANDWIDTHS); the page covers both
#
# Environment: DCT_SIM_BUILD_DIR (default build-smpi), DCT_SIM_MEMORY_GIB (memory budget of
# one simulation, default 12), DCT_SIM_WORK (rank-elements per measurement, default 2^28),
# DCT_SIM_INTERVAL (dct_interval of the requests, default 1000: the re-balancing call is
# simulated on its own and charged once per interval), DCT_SIM_RANKS, DCT_SIM_BANDWIDTHS,
# DCT_SIM_DENSITIES, DCT_SIM_ALGORITHMS (comma lists: a subset of the experiment).
# Builds and simulations run under nice, one at a time (the build with -j1).
set -euo pipefail

quick=0
options=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --no-verify | --report-only | --add) options+=("$arg") ;;
    *) echo "usage: $0 [--quick] [--no-verify] [--report-only] [--add]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.."
build_dir=${DCT_SIM_BUILD_DIR:-build-smpi}

# --- 1. Debian packages, installed only if missing -------------------------------------------
packages=(g++ make cmake libtrilinos-kokkos-dev libsimgrid-dev libcli11-dev gnuplot-nox python3 binutils)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    if [ -t 0 ]; then as_root=(sudo); else as_root=(sudo -n); fi
  fi
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# --- 2. Build: dct's sources and the driver with smpicxx --------------------------------------
echo "== building $build_dir/sim_allreduce with $(smpicxx --version)"
mkdir -p "$build_dir"
nice -n 10 cmake -S hpc/sim -B "$build_dir" -DCMAKE_C_COMPILER=smpicc \
  -DCMAKE_CXX_COMPILER=smpicxx -DCMAKE_BUILD_TYPE=Release > "$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log"; exit 1; }
nice -n 10 cmake --build "$build_dir" -j 1

# --- 3. Simulate and report ---------------------------------------------------------------------
started=$(date +%s)
if ((quick)); then
  nice -n 10 /usr/bin/python3 hpc/sim/simulate.py --binary "$build_dir/sim_allreduce" \
    --work-dir "$build_dir/sim-quick" --docs "$build_dir/sim-quick" --quick "${options[@]}"
else
  nice -n 10 /usr/bin/python3 hpc/sim/simulate.py --binary "$build_dir/sim_allreduce" \
    --work-dir "$build_dir/sim" --docs docs "${options[@]}"
fi
echo "== done in $(($(date +%s) - started)) s"
