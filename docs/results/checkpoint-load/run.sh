#!/usr/bin/env bash
# DCT_Checkpoint_load (roll-back and restart) and DCT_Checkpoint_save against a plain
# parallel-HDF5 read/write of the same bytes (dct-bench checkpoint), old build against new,
# and the new build with its checksum thread off and automatic, in one run.
# Usage: run.sh OLD_BUILD NEW_BUILD (output on stdout; ITERS=11 and ROUNDS=2 by default).
set -euo pipefail
old=$1 new=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# "bind" is mpirun's default (one core per rank at 1 and 2 ranks), "none" leaves a rank the
# machine's 2 cores, as a Slurm task with --cpus-per-task=2 would have.
for round in $(seq "${ROUNDS:-2}"); do
  for setting in "1 128 /tmp bind" "1 128 /tmp none" "2 64 /tmp bind" "4 64 /tmp bind" \
                 "4 64 /dev/shm bind"; do
    read -r ranks mib dir binding <<< "$setting"
    for build in old new:off new:auto; do
      binary=$old thread=auto
      [[ $build == new:* ]] && binary=$new thread=${build#new:}
      work="$dir/dct-checkpoint-load.$$" && mkdir -p "$work"
      echo "######## round $round: $ranks ranks x $mib MiB in $dir, binding $binding, build $build"
      extra=()
      [[ $binding == none ]] && extra=(--bind-to none)
      mpirun "${extra[@]}" -n "$ranks" -x DCT_CHECKPOINT_CHECKSUM_THREAD="$thread" \
        "$binary/hpc/bench/dct-bench" checkpoint --mib "$mib" --iters "${ITERS:-11}" --steps 4 \
        --dir "$work"
      rm -rf "$work"
      echo
    done
  done
done
