#!/bin/bash
# The runs of this directory (issue 40: dct_momentum_result=gradient, momentum correction for an
# application that keeps its optimizer's momentum), from the repository root after
# ./quickstart.sh, one after the other (2-core machine): `run.sh mlp`, `run.sh dlrm` or both.
# Summaries: examples/dlrm/summarize.py docs/results/momentum-result[/mlp]
# Every run: the settings of docs/results/lr-cosine (cosine schedule, 5 epochs, seeds 1-10).
# `grad-*`: --momentum-correction --momentum-result gradient (the demo's SGD keeps momentum
# 0.9; the library returns gradients whose momentum is the corrected update); `mc-*`: the same
# correction with the library's default result (the update; the demo's SGD momentum set to 0).
set -e
out=docs/results/momentum-result
demo=build/examples/dlrm/dct-dlrm
grad="--momentum-correction --momentum-result gradient"
dlrm() {  # NAME ARGS...: DLRM at the DCT paper's sizes, 4 ranks, 5 epochs, seeds 1-10
  local name=$1; shift
  for s in $(seq 1 10); do
    mpiexec -n 4 $demo --paper-sizes --epochs 5 --quiet --seed $s --lr-schedule cosine \
      --json $out/$name-s$s.json "$@" > $out/$name-s$s.txt
  done
}
mlp() {  # NAME ARGS...: the MLP 784-256-128-10, 2 ranks, 5 epochs, seeds 1-10
  local name=$1; shift
  for s in $(seq 1 10); do
    mpiexec -n 2 $demo --model mlp --epochs 5 --quiet --seed $s --lr-schedule cosine \
      --json $out/mlp/$name-s$s.json "$@" > $out/mlp/$name-s$s.txt
  done
}
mkdir -p $out/mlp
case "${1:-all}" in
  mlp|all)
    mlp dense --modes dense
    mlp grad-d0.01-bucket --modes dct $grad --density 0.01 --bucket-mb 4
    mlp grad-fp16-d0.01-bucket --modes dct $grad --values fp16 --density 0.01 --bucket-mb 4
    mlp mc-fp16-d0.01-bucket --modes dct --momentum-correction --values fp16 --density 0.01 \
      --bucket-mb 4
    mlp grad-fp16-d0.005-bucket --modes dct $grad --values fp16 --density 0.005 --bucket-mb 4
    mlp grad-fp16-d0.01 --modes dct $grad --values fp16 --density 0.01
    # Same-machine baselines: the plain API (the demo's SGD momentum on the sums, no
    # correction) and the update form of the correction.
    mlp plain-bucket --modes dct --density 0.01 --bucket-mb 4
    mlp plain-fp16-bucket --modes dct --values fp16 --density 0.01 --bucket-mb 4
    mlp plain-fp16 --modes dct --values fp16 --density 0.01
    mlp mc-fp16-d0.005-bucket --modes dct --momentum-correction --values fp16 --density 0.005 \
      --bucket-mb 4
    ;;&
  dlrm|all)
    dlrm dense --modes dense
    dlrm grad-fp16-d0.006-bucket1 --modes dct $grad --values fp16 --density 0.006 --bucket-mb 1
    dlrm mc-fp16-d0.006-bucket1 --modes dct --momentum-correction --values fp16 --density 0.006 \
      --bucket-mb 1
    dlrm plain-fp16-d0.006-bucket1 --modes dct --values fp16 --density 0.006 --bucket-mb 1
    ;;
esac
