#!/bin/bash
# The runs of this directory (issue 40): the demo's default DLRM sizes (48,154 MLP weights,
# what ./quickstart.sh trains), its constant learning rate, 4 ranks, 5 epochs, seeds 1-10:
# one DP request per layer, per MLP (--bucket-per-mlp) and over both MLPs (--bucket-mb 25,
# quickstart's sign row). From the repository root after ./quickstart.sh, one run at a time.
# Summary: examples/dlrm/summarize.py docs/results/bucket-per-mlp
set -e
out=docs/results/bucket-per-mlp
demo=build/examples/dlrm/dct-dlrm
mc="--momentum-correction --values fp16"
sign="--momentum-correction --values sign --mp-values fp16 --density 0.015"
dlrm() {  # NAME ARGS...
  local name=$1; shift
  for s in $(seq 1 10); do
    mpiexec -n 4 $demo --epochs 5 --quiet --seed $s --json $out/$name-s$s.json "$@" \
      > $out/$name-s$s.txt
  done
}
dlrm dense --modes dense
dlrm fp16-mc-d0.0125 --modes dct $mc --density 0.0125
dlrm fp16-mc-d0.0125-per-mlp --modes dct $mc --density 0.0125 --bucket-per-mlp
dlrm fp16-mc-d0.006-per-mlp --modes dct $mc --density 0.006 --bucket-per-mlp
dlrm sign-mc-d0.015-bucket25 --modes dct $sign --bucket-mb 25
dlrm sign-mc-d0.015-per-mlp --modes dct $sign --bucket-per-mlp
