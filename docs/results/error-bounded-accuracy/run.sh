#!/bin/bash
# The error-bounded accuracy measurements (issue 18): dense vs dct vs eb (error-bounded embedding all-to-all), 4 ranks,
# 5 epochs (the demo's defaults), seeds 1-3. Run from the build directory's parent.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
D=build/examples/dlrm/dct-dlrm
O=${1:-docs/results/error-bounded-accuracy}
EB="--modes eb --error-bound 0.05 --backward-error-bound 0.05 --lossless zstd"
for seed in 1 2 3; do
  run() { name=$1; shift; flock /tmp/dct-cpu.lock mpiexec -n 4 $D --quiet --seed $seed "$@" > $O/${name}_s$seed.txt 2>&1; }
  run dense_dct --modes dense,dct
  run eb005 $EB
  run eb005_dp1 $EB --density 1
  run ebauto --modes eb --error-bound auto --backward-error-bound 0.05 --lossless zstd
done
# The lossless stage chosen by the cost model for a 1 Gbit/s network (dct_beta_gbps 0.125).
seed=1
flock /tmp/dct-cpu.lock mpiexec -n 4 $D --quiet --seed 1 --modes eb --error-bound 0.05 --backward-error-bound 0.05 --beta-gbps 0.125 > $O/eb005_model_s1.txt 2>&1
echo done > $O/DONE
