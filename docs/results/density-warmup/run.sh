#!/bin/bash
# The runs of this directory (issue 40, density warm-up), from the repository root after
# ./quickstart.sh, one after the other (2-core machine). Summaries:
#   examples/dlrm/summarize.py docs/results/density-warmup
#   examples/dlrm/summarize.py docs/results/density-warmup/mlp
set -e
out=docs/results/density-warmup
demo=build/examples/dlrm/dct-dlrm
mc="--momentum-correction --values fp16"
dlrm() {  # NAME ARGS...: DLRM at the DCT paper's sizes, 4 ranks, 5 epochs, seeds 1-10
  local name=$1; shift
  for s in $(seq 1 10); do
    mpiexec -n 4 $demo --paper-sizes --epochs 5 --quiet --seed $s --json $out/$name-s$s.json "$@" \
      > $out/$name-s$s.txt
  done
}
mlp() {  # NAME ARGS...: the MLP 784-256-128-10, 2 ranks, 5 epochs, seeds 1-5
  local name=$1; shift
  for s in $(seq 1 5); do
    mpiexec -n 2 $demo --model mlp --epochs 5 --quiet --seed $s --json $out/mlp/$name-s$s.json \
      "$@" > $out/mlp/$name-s$s.txt
  done
}
mkdir -p $out/mlp
dlrm dense --modes dense
dlrm base-fp16-mc-d0.006 --modes dct $mc --density 0.006
dlrm ctrl-d0.004 --modes dct $mc --density 0.004
dlrm w3-d0.004-w0.1-117 --modes dct $mc --density 0.004 --density-warmup 0.1,117
dlrm w4-d0.006-w0.1-117 --modes dct $mc --density 0.006 --density-warmup 0.1,117
dlrm dp-only-d0.006 --modes dct $mc --density 0.006 --keep 1
dlrm mp-only-keep0.05 --modes dct --density 1 --mp-values fp16
dlrm dp-only-bucket-d0.006 --modes dct $mc --density 0.006 --keep 1 --bucket-mb 4
dlrm dp-only-sign-d0.015 --modes dct --momentum-correction --values sign --density 0.015 \
  --keep 1 --mp-values fp16
dlrm dp-only-d0.004-w0.1-117 --modes dct $mc --density 0.004 --density-warmup 0.1,117 --keep 1
dlrm bucket1-fp16-mc-d0.006 --modes dct $mc --density 0.006 --bucket-mb 1  # added later
mlp dense --modes dense
mlp plain --modes dct
mlp plain-w0.05-468 --modes dct --density-warmup 0.05,468
mlp plain-fp16 --modes dct --values fp16
mlp plain-fp16-d0.0167 --modes dct --values fp16 --density 0.0167
mlp plain-fp16-d0.0167-w --modes dct --values fp16 --density 0.0167 --density-warmup 0.05,468
mlp mc-fp16-d0.005 --modes dct $mc --density 0.005
