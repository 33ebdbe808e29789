#!/usr/bin/env bash
# Restart scenarios across separate jobs: redistribute 2 -> 4 and 4 -> 2 ranks, strict refusal,
# dct-ckpt, and a rank killed in the middle of a save.
# usage: checkpoint_restart.sh MPIEXEC PROGRAM DCT_CKPT WORKDIR
set -euo pipefail
mpiexec=$1 program=$2 ckpt=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir"
run() { local ranks=$1; shift; "$mpiexec" -n "$ranks" "$program" "$@"; }

echo "== 2 ranks save, 4 ranks restart (redistribute)"
run 2 save "$dir/p2.h5"
run 4 redistribute "$dir/p2.h5"
echo "== 4 ranks save, 2 ranks restart (redistribute)"
run 4 save "$dir/p4.h5"
run 2 redistribute "$dir/p4.h5"
echo "== strict refuses another rank count"
run 3 strict "$dir/p2.h5"

echo "== dct-ckpt"
"$ckpt" info "$dir/p2.h5"
"$ckpt" verify "$dir/p2.h5"
"$ckpt" diff "$dir/p2.h5" "$dir/p2.h5"
if "$ckpt" diff "$dir/p2.h5" "$dir/p4.h5" > /dev/null; then
  echo "FAILED: diff of checkpoints from different rank counts reported no difference"; exit 1
fi

echo "== an asynchronous save, training on before its wait, writes the save's bytes"
run 2 isave "$dir/a2.h5"
cmp "$dir/p2.h5" "$dir/a2.h5"

echo "== rank 1 dies in the middle of a save: the previous checkpoint survives"
cp "$dir/p2.h5" "$dir/before.h5"
if run 2 crash "$dir/p2.h5" > "$dir/crash.log" 2>&1; then
  echo "FAILED: the crashing save reported success"; exit 1
fi
ls "$dir"/p2.h5.tmp.* > /dev/null  # the half-written file kept its temporary name
"$ckpt" verify "$dir/p2.h5"
"$ckpt" diff "$dir/before.h5" "$dir/p2.h5"
run 2 verify "$dir/p2.h5"

echo "== rank 1 dies while its thread writes an asynchronous save: the previous one survives"
if run 2 crash-async "$dir/p2.h5" > "$dir/crash-async.log" 2>&1; then
  echo "FAILED: the crashing asynchronous save reported success"; exit 1
fi
ls "$dir"/p2.h5.tmp.* > /dev/null
"$ckpt" verify "$dir/p2.h5"
"$ckpt" diff "$dir/before.h5" "$dir/p2.h5"
run 2 verify "$dir/p2.h5"
echo "checkpoint restart scenarios: all passed"
