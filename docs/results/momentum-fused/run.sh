#!/bin/bash
# Issue 65's momentum rows, old (/work/main: 944ae92) against new (/work/fuse), interleaved, 2 rounds:
# 1 rank 16M and 64M floats (64M,256M bytes); 2 ranks 4 and 16 MiB; library defaults, density 0.01.
set -u
out=$1; mkdir -p $out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
for round in 1 2; do
 for mode in none update gradient; do
  for tree in main fuse; do
   env=(); [ $mode != none ] && env=(DCT_MOMENTUM=0.9 DCT_MOMENTUM_RESULT=$mode)
   env "${env[@]}" mpiexec -n 1 /work/$tree/build/hpc/bench/dct-bench allreduce --sizes 64M,256M --density 0.01 --iters 20 > $out/np1-$mode-$tree-r$round.txt 2>&1
   env "${env[@]}" mpiexec -n 2 /work/$tree/build/hpc/bench/dct-bench allreduce --sizes 4M,16M --density 0.01 --iters 20 > $out/np2-$mode-$tree-r$round.txt 2>&1
  done
 done
done
