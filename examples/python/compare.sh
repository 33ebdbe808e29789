#!/usr/bin/env bash
# The DDP hook comparison of docs/python.md: examples/python/mlp.py with every hook, 2 ranks,
# 5 epochs, seeds 1-3, then the table (examples/python/summarize.py).
#   examples/python/compare.sh [OUT_DIR]     (default docs/results/python-ddp-hooks)
# Needs the build tree's Python package (PYTHONPATH=build/python) and Debian's python3-torch.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-docs/results/python-ddp-hooks}
mkdir -p "$out"
export PYTHONPATH=${PYTHONPATH:-${DCT_BUILD_DIR:-build}/python}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
python=${DCT_PYTHON:-/usr/bin/python3}
configs=("dense:--hook none" "fp16:--hook fp16"
         "powersgd-r4:--hook powersgd --powersgd-rank 4" "powersgd-r1:--hook powersgd --powersgd-rank 1"
         "dct-d0.036:--hook dct --density 0.036" "dct-d0.0125:--hook dct --density 0.0125"
         "dct-d0.005:--hook dct --density 0.005")
for seed in 1 2 3; do
  for config in "${configs[@]}"; do
    name=${config%%:*}
    # shellcheck disable=SC2086 # the flags are words
    mpiexec -n 2 "$python" examples/python/mlp.py ${config#*:} --seed "$seed" \
      --json "$out/$name-s$seed.json" | tee "$out/$name-s$seed.txt"
  done
done
"$python" examples/python/summarize.py "$out" | tee "$out/table.md"
