#!/usr/bin/env bash
# Runs a plain MPI program (knows nothing of dct) with and without libdct_pmpi preloaded.
# usage: run_pmpi.sh MPIEXEC LIBDCT_PMPI RANKS EXPECTED_COMPRESSED EXPECTED_PASSED PROGRAM
#   off:       preloaded, DCT_PMPI unset      -> output identical to plain MPI
#   density 1: DCT_PMPI=1 DCT_DENSITY=1       -> output identical (through dct, exact); the
#                                                report says nothing was compressed
#   on:        DCT_PMPI=1 (density 0.01)      -> completes; the report counts the calls;
#                                                lines of calls never compressed are identical
# The lines of compressed calls start with float_sum / real_sums / double_inplace_sum.
set -euo pipefail
mpiexec=$1 lib=$2 ranks=$3 compressed=$4 passed=$5 program=$6
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { "$mpiexec" -n "$ranks" env "$@" "$program"; }

"$mpiexec" -n "$ranks" "$program" > "$work/plain"
run LD_PRELOAD="$lib" > "$work/off"
diff "$work/plain" "$work/off" || { echo "FAILED: preloaded but off changed the output"; exit 1; }

run LD_PRELOAD="$lib" DCT_PMPI=1 DCT_DENSITY=1 DCT_PMPI_REPORT=1 > "$work/exact" 2> "$work/exact.err"
diff "$work/plain" "$work/exact" || { echo "FAILED: density 1 differs from MPI"; exit 1; }
grep "dct-pmpi: nothing compressed: $compressed allreduce calls at dct_density=1 (sent whole, as MPI_Allreduce), $passed passed" "$work/exact.err" ||
  { echo "FAILED: report"; cat "$work/exact.err"; exit 1; }

run LD_PRELOAD="$lib" DCT_PMPI=1 DCT_PMPI_REPORT=1 > "$work/on" 2> "$work/on.err"
cat "$work/on.err"
grep -q "dct-pmpi: $compressed allreduce calls compressed, $passed passed" "$work/on.err" ||
  { echo "FAILED: report"; exit 1; }
# The states behind them (issue 61): the same few buffers every step, none evicted, no warning.
grep -q "dct-pmpi: error-feedback states: [0-9]* made (summed over ranks), 0 evicted" "$work/on.err" ||
  { echo "FAILED: report of the states"; exit 1; }
if grep -q "error feedback cannot work" "$work/on.err"; then
  echo "FAILED: a moving-buffer warning for fixed buffers"; exit 1
fi
grep -vE '^(float_sum|real_sums|double_inplace_sum)' "$work/plain" > "$work/plain.kept"
grep -vE '^(float_sum|real_sums|double_inplace_sum)' "$work/on" > "$work/on.kept"
diff "$work/plain.kept" "$work/on.kept" || { echo "FAILED: an uncompressed call changed"; exit 1; }
if diff -q "$work/plain" "$work/on" > /dev/null; then
  echo "FAILED: nothing was compressed"; exit 1
fi
echo "pmpi: $(basename "$program") passed"
