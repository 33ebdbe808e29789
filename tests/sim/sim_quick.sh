#!/usr/bin/env bash
# ctest sim.quick: hpc/sim/run.sh --quick (16 simulated ranks under SimGrid's SMPI, 4 MB, the
# results checked against MPI_Allreduce's), with its own smpicxx build of dct in BUILD_DIR.
# Exits 77 (skipped) where SimGrid is not installed: quickstart.sh does not install it,
# .ci/run does (libsimgrid-dev gnuplot-nox), and hpc/sim/run.sh would otherwise try to.
#
#   sim_quick.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$1
build_dir=$2
for tool in smpicxx smpirun gnuplot; do
  if ! command -v "$tool" > /dev/null; then
    echo "skipped: $tool not found (Debian: apt install libsimgrid-dev gnuplot-nox)"
    exit 77
  fi
done
DCT_SIM_BUILD_DIR=$build_dir exec "$source_dir/hpc/sim/run.sh" --quick
