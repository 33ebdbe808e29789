#!/bin/bash
cd /work/main/build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
D=examples/dlrm/dct-dlrm
O=/tmp/m13
SIGN="--values sign --mp-values fp16 --momentum-correction --density 0.015 --bucket-mb 25"
for seed in 1 2 3; do
  flock /tmp/dct-cpu.lock mpiexec -n 4 $D --quiet --seed $seed --modes dense,dct $SIGN --json $O/sign5_s$seed.json > $O/sign5_s$seed.txt 2>&1
done
for seed in 1 2 3; do
  flock /tmp/dct-cpu.lock mpiexec -n 4 $D --quiet --seed $seed --epochs 10 --modes dense,dct $SIGN --json $O/sign10_s$seed.json > $O/sign10_s$seed.txt 2>&1
done
echo done > $O/DONE
