#!/bin/bash
# The runs of this directory (issue 40, a cosine learning-rate schedule), from the repository
# root after ./quickstart.sh, one after the other (2-core machine): `run.sh mlp`, `run.sh dlrm`
# or both. Summaries and pictures:
#   examples/dlrm/summarize.py docs/results/lr-cosine
#   examples/dlrm/summarize.py docs/results/lr-cosine/mlp
#   docs/results/lr-cosine/run.sh plots   (python3-matplotlib; PYTHON=... picks the interpreter)
# Every run: --lr-schedule cosine (lr 0.05 at the first step, 0 after the last), otherwise the
# settings of docs/results/density-warmup (its constant-rate twin).
set -e
out=docs/results/lr-cosine
demo=build/examples/dlrm/dct-dlrm
mc="--momentum-correction --values fp16"
py=${PYTHON:-/usr/bin/python3}  # Debian's, which has matplotlib
dlrm() {  # NAME ARGS...: DLRM at the DCT paper's sizes, 4 ranks, 5 epochs, seeds 1-10
  local name=$1; shift
  for s in $(seq 1 10); do
    mpiexec -n 4 $demo --paper-sizes --epochs 5 --quiet --seed $s --lr-schedule cosine \
      --json $out/$name-s$s.json "$@" > $out/$name-s$s.txt
  done
}
mlp() {  # NAME ARGS...: the MLP 784-256-128-10, 2 ranks, 5 epochs, seeds 1-5 (or 1-$seeds)
  local name=$1; shift
  for s in $(seq 1 "${seeds:-5}"); do
    mpiexec -n 2 $demo --model mlp --epochs 5 --quiet --seed $s --lr-schedule cosine \
      --json $out/mlp/$name-s$s.json "$@" > $out/mlp/$name-s$s.txt
  done
}
mkdir -p $out/mlp
case "${1:-all}" in
  mlp|all)
    seeds=10 mlp dense --modes dense
    mlp plain --modes dct
    mlp plain-fp16 --modes dct --values fp16
    mlp plain-sign --modes dct --values sign
    mlp plain-sign-d0.025 --modes dct --values sign --density 0.025
    seeds=10 mlp plain-bucket --modes dct --bucket-mb 4
    seeds=10 mlp plain-fp16-bucket --modes dct --values fp16 --bucket-mb 4
    seeds=10 mlp plain-bucket-w0.05-468 --modes dct --bucket-mb 4 --density-warmup 0.05,468
    seeds=10 mlp plain-fp16-bucket-w0.05-468 --modes dct --values fp16 --bucket-mb 4 \
      --density-warmup 0.05,468
    mlp plain-sign-bucket --modes dct --values sign --bucket-mb 4
    mlp mc-fp16-d0.01 --modes dct $mc --density 0.01
    mlp mc-fp16-d0.005 --modes dct $mc --density 0.005
    mlp mc-fp16-d0.005-bucket --modes dct $mc --density 0.005 --bucket-mb 4
    mlp mc-fp16-d0.005-bucket0.5 --modes dct $mc --density 0.005 --bucket-mb 0.5
    mlp plain-fp16-bucket0.5 --modes dct --values fp16 --bucket-mb 0.5
    mlp mc-sign-d0.016 --modes dct --momentum-correction --values sign --density 0.016
    mlp mc-sign-d0.0125 --modes dct --momentum-correction --values sign --density 0.0125
    mlp mc-sign-d0.0125-bucket --modes dct --momentum-correction --values sign --density 0.0125 \
      --bucket-mb 4
    ;;&
  dlrm|all)
    dlrm dense --modes dense
    dlrm fp16-mc-d0.006 --modes dct $mc --density 0.006
    dlrm fp16-mc-d0.006-bucket --modes dct $mc --density 0.006 --bucket-mb 4
    dlrm fp16-mc-d0.006-bucket1 --modes dct $mc --density 0.006 --bucket-mb 1
    dlrm fp16-mc-d0.004-bucket1 --modes dct $mc --density 0.004 --bucket-mb 1
    dlrm sign-mc-d0.015-bucket1 --modes dct --momentum-correction --values sign \
      --mp-values fp16 --density 0.015 --bucket-mb 1
    dlrm fp16-mc-d0.004-bucket --modes dct $mc --density 0.004 --bucket-mb 4
    dlrm sign-mc-d0.015-bucket --modes dct --momentum-correction --values sign \
      --mp-values fp16 --density 0.015 --bucket-mb 4
    dlrm mp-only-keep0.05 --modes dct --density 1 --mp-values fp16
    dlrm plain --modes dct
    dlrm plain-bucket --modes dct --bucket-mb 4
    dlrm dp-only-fp16-mc-d0.006-bucket --modes dct $mc --density 0.006 --bucket-mb 4 --keep 1
    ;;&
  plots)  # docs/training-*.png, beside the constant-rate runs of docs/results/density-warmup
    # and the cosine runs of docs/results/momentum-result (another machine: each directory is
    # paired with its own dense runs)
    (cd examples/dlrm &&
      $py plot.py ../../docs/training-mlp "MLP 784-256-128-10, 2 ranks, 5 epochs" \
        "constant lr=../../$out/../density-warmup/mlp" "cosine lr=../../$out/mlp" \
        "cosine lr, momentum-result runs=../../$out/../momentum-result/mlp" &&
      $py plot.py ../../docs/training-dlrm "DLRM at the DCT paper's sizes, 4 ranks, 5 epochs" \
        "constant lr=../../$out/../density-warmup" "cosine lr=../../$out" \
        "cosine lr, momentum-result runs=../../$out/../momentum-result")
    ;;
esac
