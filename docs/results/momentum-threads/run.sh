#!/usr/bin/env bash
# Issue 65, target 3: Kokkos 4.6 OpenMP, 64M floats (256 MiB), the whole call, 1 and 2
# threads, without momentum, with dct_momentum=0.9 and with its gradient form; three rounds,
# threads alternating. Needs build-kokkos46 (.ci/kokkos.sh, then cmake -DKokkos_ROOT=...).
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench=build-kokkos46/hpc/bench/dct-bench
out=${1:-docs/results/momentum-threads}
for round in 1 2 3; do
  for form in none update gradient; do
    for threads in 1 2; do
      momentum=(); [ "$form" = none ] || momentum=(DCT_MOMENTUM=0.9 "DCT_MOMENTUM_RESULT=$form")
      env "${momentum[@]}" OMP_NUM_THREADS=$threads OMP_PROC_BIND=false OMP_WAIT_POLICY=passive \
        mpiexec -n 1 --bind-to none -x OMP_NUM_THREADS -x OMP_PROC_BIND -x OMP_WAIT_POLICY \
        -x DCT_MOMENTUM -x DCT_MOMENTUM_RESULT \
        "$bench" allreduce --sizes 256M --density 0.01 --iters 10 \
        > "$out/round$round-$form-${threads}threads.txt" 2>&1
    done
  done
done
