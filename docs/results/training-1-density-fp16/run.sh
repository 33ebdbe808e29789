#!/bin/bash
cd /work/main/build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
D=examples/dlrm/dct-dlrm
O=/tmp/meas
for seed in 1 2 3; do
  mpiexec -n 2 $D --model mlp --quiet --seed $seed --modes dense,dct --json $O/mlp_s${seed}_native01.json > $O/mlp_s${seed}_native01.txt 2>&1
  mpiexec -n 2 $D --model mlp --quiet --seed $seed --modes dct --values fp16 --density 0.019 --json $O/mlp_s${seed}_fp16_019.json > $O/mlp_s${seed}_fp16_019.txt 2>&1
  mpiexec -n 2 $D --model mlp --quiet --seed $seed --modes dct --values fp16 --density 0.0066 --json $O/mlp_s${seed}_fp16_0066.json > $O/mlp_s${seed}_fp16_0066.txt 2>&1
done
for seed in 1 2 3; do
  mpiexec -n 4 $D --quiet --seed $seed --modes dense,dct --json $O/dlrm_s${seed}_default.json > $O/dlrm_s${seed}_default.txt 2>&1
  mpiexec -n 4 $D --quiet --seed $seed --modes dct --values fp16 --json $O/dlrm_s${seed}_fp16.json > $O/dlrm_s${seed}_fp16.txt 2>&1
  mpiexec -n 4 $D --quiet --seed $seed --modes dct --values fp16 --density 0.003 --keep 0.03 --json $O/dlrm_s${seed}_fp16_003.json > $O/dlrm_s${seed}_fp16_003.txt 2>&1
done
# A shaped 1 Gbit/s loopback (tbf; this kernel has no netem, so no added delay), 4 ranks.
../hpc/netem/dct-netem --rate 1gbit -- mpiexec -n 4 $D --seed 1 --modes dense --epochs 5 --json $O/netem_dense.json > $O/netem_dense.txt 2>&1
../hpc/netem/dct-netem --rate 1gbit -- mpiexec -n 4 $D --seed 1 --modes dct --values fp16 --epochs 10 --json $O/netem_dct.json > $O/netem_dct.txt 2>&1
echo done > $O/DONE
