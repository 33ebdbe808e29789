#!/usr/bin/env bash
# The demo at full size (4 ranks, 5 epochs, Fashion-MNIST's 60,000 images, both modes, the
# recommended momentum-correction setting): uninterrupted without checkpoints, then with a
# checkpoint every 250 steps, killed (SIGKILL on rank 3) before step 1500 of the dct mode (epoch
# 4), and resumed. The resumed run must equal the uninterrupted one bit for bit.
#   docs/results/checkpoint-resume/run.sh [BUILD_DIR]   (writes output.txt beside this script)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
demo=$build/examples/dlrm/dct-dlrm
checker=$build/examples/dlrm/tests/dct_dlrm_check
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(--modes dense,dct --epochs 5 --momentum-correction --values fp16 --density 0.0125)
run() { mpiexec -n 4 "$demo" "${args[@]}" "$@"; }
timed() {  # timed LABEL COMMAND...
  local start=$SECONDS
  "${@:2}"
  echo "($1: $((SECONDS - start)) s, exit $?)"
}
{
  echo "# $(date -u +%F) commit $(git -C "$here" rev-parse --short HEAD), 4 ranks on $(nproc) cores"
  echo "## uninterrupted, no checkpoints"
  timed uninterrupted run --json "$work/plain.json"
  echo "## checkpoint every 250 steps, rank 3 killed before dct step 1500"
  timed killed run --checkpoint "$work/ck" --checkpoint-every 250 --die-at dct:1500 2>&1 |
    grep -E "^(dense|dct) |exited on signal|\(killed"
  echo "latest: $(cat "$work/ck/dct/latest"); checkpoint files: $(du -sh "$work/ck" | cut -f1)"
  echo "## resumed"
  timed resumed run --checkpoint "$work/ck" --checkpoint-every 250 --resume \
    --json "$work/resumed.json"
  echo "## resumed against uninterrupted (dct_dlrm_check same-as)"
  "$checker" "$work/resumed.json" "same-as:$work/plain.json"
  echo "checker exit: $?"
} > "$here/output.txt" 2>&1
cat "$here/output.txt"
