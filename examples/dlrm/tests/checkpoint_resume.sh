#!/usr/bin/env bash
# A training run killed and resumed ends bit for bit like the uninterrupted one (issue 36):
#   1. uninterrupted: --modes dense,dct --momentum-correction, 2 epochs, checkpoints every 10 steps
#   2. the last rank SIGKILLs itself before step KILL_STEP of the dct mode (mid-epoch 2), then the
#      run is resumed from its latest checkpoint (dense finished: skipped; dct from step 50)
#   3. the last rank SIGKILLs itself inside the checkpoint of step SAVE_STEP of the dense mode
#      (dct's file written, its own file not yet renamed), then resumed: from the previous one
# Each resumed run must equal run 1 (dct_dlrm_check same-as: checksums, per-epoch losses,
# accuracies and bytes).
# usage: checkpoint_resume.sh MPIEXEC DEMO CHECKER RANKS WORK_DIR [DEMO OPTIONS...]
# (the options are added to every run, e.g. --mp-select threshold: DCT-MP state to resume)
set -euo pipefail
mpiexec=$1 demo=$2 checker=$3 ranks=$4 work=$5
shift 5
rm -rf "$work"
mkdir -p "$work"
# 1536 images at 32 per rank: 24 steps per epoch at 2 ranks, 12 at 4.
args=(--modes dense,dct --momentum-correction --epochs 2 --train-limit 1536 --test-limit 1000
      --batch 32 --quiet --checkpoint-every 5 "$@")
steps=$((1536 / (32 * ranks)))
kill_step=$((steps + steps / 2 + 1))   # in the second epoch, past a checkpoint
save_step=$(((steps / 5) * 5))         # a checkpoint of the first epoch (not the first one)
run() { "$mpiexec" -n "$ranks" "$demo" "${args[@]}" "$@"; }

run --json "$work/plain.json" > "$work/plain.out"  # no checkpoints at all

set +e
run --checkpoint "$work/killed" --die-at "dct:$kill_step" > "$work/killed.out" 2>&1
code=$?
set -e
[ "$code" -ne 0 ] || { echo "FAILED: the run that should have died exited 0"; exit 1; }
[ ! -e "$work/killed/dct/done.json" ] || { echo "FAILED: dct finished although killed"; exit 1; }
echo "killed at dct step $kill_step (exit $code); latest: $(cat "$work/killed/dct/latest")"
run --checkpoint "$work/killed" --resume --json "$work/killed.json" > "$work/resumed.out"
# It did resume (a run started over would give the same bits): dense skipped, dct mid-epoch 2.
grep -q "^dense: finished before the restart" "$work/resumed.out" &&
  grep -q "^dct: resumed at epoch 2, step $(((kill_step - 1) / 5 * 5 - steps)) of $steps" \
    "$work/resumed.out" || { echo "FAILED: not resumed as expected"; cat "$work/resumed.out"; exit 1; }
"$checker" "$work/killed.json" "same-as:$work/plain.json"

set +e
run --checkpoint "$work/in_save" --die-in-save "dense:$save_step" > "$work/in_save.out" 2>&1
code=$?
set -e
[ "$code" -ne 0 ] || { echo "FAILED: the run killed in a save exited 0"; exit 1; }
latest=$(cat "$work/in_save/dense/latest")
[ "$latest" = "step-$((save_step - 5))" ] ||
  { echo "FAILED: latest is $latest after a kill inside the save of step $save_step"; exit 1; }
echo "killed inside the save of dense step $save_step; latest: $latest"
run --checkpoint "$work/in_save" --resume --json "$work/in_save.json" > "$work/in_save_resumed.out"
grep -q "^dense: resumed at epoch 1, step $((save_step - 5)) of $steps" \
  "$work/in_save_resumed.out" ||
  { echo "FAILED: not resumed as expected"; cat "$work/in_save_resumed.out"; exit 1; }
"$checker" "$work/in_save.json" "same-as:$work/plain.json"
echo "checkpoint resume at $ranks ranks: passed"
