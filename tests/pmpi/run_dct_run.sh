#!/usr/bin/env bash
# The interposer speaks up (issue 37), through the dct-run launcher, each run at 2 ranks:
#   plain dct-run            -> one line on rank 0 at MPI_Init: on, its settings; compressed
#   --quiet                  -> no such line
#   DCT_DENSITY=1 --report   -> the line and the report say nothing is compressed; output = MPI's
#   DCT_DENSITY=2            -> disabled on every rank with the variable named; output = MPI's
#   DCT_DENSTY=0.5           -> one line (rank 0) naming DCT_DENSITY
#   --print-library          -> a readable file
# usage: run_dct_run.sh MPIEXEC DCT_RUN PLAIN_PROGRAM [PRELOAD_FIRST]
# (PRELOAD_FIRST: sanitizer runtimes, which must come first in LD_PRELOAD.)
set -euo pipefail
mpiexec=$1 dct_run=$2 program=$3 preload=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {  # run NAME ENV... -- DCT_RUN_OPTIONS...
  local name=$1
  shift
  local env=()
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  timeout 120 "$mpiexec" -n 2 env ${preload:+LD_PRELOAD="$preload"} "${env[@]}" \
    "$dct_run" "$@" "$program" > "$work/$name.out" 2> "$work/$name.err" ||
    { echo "FAILED: $name (rc $?)"; cat "$work/$name.err"; exit 1; }
}
count() { grep -c "$1" "$2" || true; }
fail() { echo "FAILED: $1"; shift; cat "$@"; exit 1; }

"$mpiexec" -n 2 "$program" > "$work/plain"
library=$("$dct_run" --print-library)
[ -r "$library" ] || fail "--print-library gave '$library'"

run on -- 
[ "$(count 'dct-pmpi: on (dct ' "$work/on.err")" = 1 ] || fail "no single 'on' line" "$work/on.err"
grep -q 'are compressed: density=0.01 .*algorithm=auto' "$work/on.err" ||
  fail "the 'on' line lacks the settings" "$work/on.err"
if diff -q "$work/plain" "$work/on.out" > /dev/null; then fail "nothing was compressed"; fi

run quiet -- --quiet
[ "$(count 'dct-pmpi: on' "$work/quiet.err")" = 0 ] || fail "--quiet still spoke" "$work/quiet.err"

run whole DCT_DENSITY=1 -- --report
grep -q 'dct-pmpi: on, but at dct_density=1' "$work/whole.err" || fail "density 1 line" "$work/whole.err"
grep -q 'dct-pmpi: nothing compressed: [0-9]* allreduce calls at dct_density=1' "$work/whole.err" ||
  fail "density 1 report" "$work/whole.err"
diff "$work/plain" "$work/whole.out" || fail "density 1 differs from MPI"

run invalid DCT_DENSITY=2 --
grep -q "dct-pmpi: disabled: environment variable DCT_DENSITY='2' is invalid" "$work/invalid.err" ||
  fail "invalid DCT_DENSITY not named" "$work/invalid.err"
diff "$work/plain" "$work/invalid.out" || fail "disabled, yet the output changed"

run typo DCT_DENSTY=0.5 DCT_PMPI_REPROT=1 -- --quiet
[ "$(count 'DCT_DENSTY is not one of dct.s and is ignored: did you mean DCT_DENSITY?' \
      "$work/typo.err")" = 1 ] || fail "DCT_DENSTY not reported once" "$work/typo.err"
[ "$(count 'did you mean DCT_PMPI_REPORT?' "$work/typo.err")" = 1 ] ||
  fail "DCT_PMPI_REPROT not reported once" "$work/typo.err"
echo "dct-run: passed"
