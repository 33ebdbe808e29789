#!/usr/bin/env bash
# The whole persistent compressed call (the main path, whose progress passes issue 35 changed)
# against MPI_Allreduce of the same run, before (BEFORE build: main 2160e94) and after (AFTER
# build), each case alternating the two builds: library defaults, new gradients every call.
# usage: docs/results/reliability-round2/path.sh BEFORE_BUILD AFTER_BUILD > path.txt
set -euo pipefail
before=$1 after=$2
cases=(
  "-n 2|allreduce --sizes 4000 --iters 20000 --warmup 500 --input cycle --stat median"
  "-n 4|allreduce --sizes 4000 --iters 20000 --warmup 500 --input cycle --stat median"
  "-n 2|allreduce --sizes 4M,16M --iters 10"
  "-n 1|allreduce --sizes 64M --iters 10"
)
for c in "${cases[@]}"; do
  ranks=${c%%|*} args=${c#*|}
  for round in 1 2; do
    for side in before after; do
      build=$before; [ "$side" = after ] && build=$after
      echo "## $side (round $round): mpiexec $ranks dct-bench $args"
      # shellcheck disable=SC2086
      mpiexec $ranks "$build/hpc/bench/dct-bench" $args
    done
  done
done
