#!/usr/bin/env bash
# DCT_Checkpoint_load from a file that is not in the page cache (dct-bench checkpoint --cold: a
# requeued job reads its checkpoint from the storage), against the plain parallel-HDF5 read of
# the same bytes, evicted the same way, old build against new, in one run.
# Usage: run.sh OLD_LIBDCT_DIR NEW_BUILD (output on stdout; ITERS=11 and ROUNDS=3 by default).
# OLD_LIBDCT_DIR holds the old libdct.so.0.5; the new build's dct-bench runs against it through
# LD_LIBRARY_PATH (dct-bench's RUNPATH gives way to it), so both use the same benchmark.
set -euo pipefail
old=$1 new=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
for round in $(seq "${ROUNDS:-3}"); do
  for setting in "1 128" "2 64" "4 64"; do
    read -r ranks mib <<< "$setting"
    for build in old new; do
      library=
      [[ $build == old ]] && library=$old
      work=/tmp/dct-checkpoint-cold.$$ && mkdir -p "$work"
      echo "######## round $round: $ranks ranks x $mib MiB in /tmp, build $build"
      LD_LIBRARY_PATH=$library mpirun -n "$ranks" -x LD_LIBRARY_PATH \
        "$new/hpc/bench/dct-bench" checkpoint --mib "$mib" --iters "${ITERS:-11}" --steps 0 \
        --dir "$work" --cold
      rm -rf "$work"
      echo
    done
  done
done
