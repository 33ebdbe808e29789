#!/usr/bin/env bash
# The interposer's collective promises (issue 35), each under a time limit (a hang fails):
#   self_only: DCT_PMPI_REPORT=1 where a rank never calls MPI_Allreduce -> the report prints;
#   min count: DCT_PMPI_MIN_COUNT differing between ranks -> off on every rank, said once,
#              output identical to MPI's;
#   dct_and_pmpi: a program that calls dct, preloaded -> dct's own calls stay MPI's.
# usage: run_pmpi_agreement.sh MPIEXEC LIBDCT_PMPI SELF_ONLY PLAIN DCT_AND_PMPI
set -euo pipefail
mpiexec=$1 lib=$2 self_only=$3 plain=$4 dct_and_pmpi=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

timeout 120 "$mpiexec" -n 3 env LD_PRELOAD="$lib" DCT_PMPI=1 DCT_PMPI_REPORT=1 DCT_PMPI_MIN_COUNT=1 \
  "$self_only" > "$work/self.out" 2> "$work/self.err" ||
  { echo "FAILED: self_only (rc $?)"; cat "$work/self.err"; exit 1; }
grep -q "dct-pmpi: 1 allreduce calls compressed" "$work/self.err" ||
  { echo "FAILED: self_only report"; cat "$work/self.err"; exit 1; }

"$mpiexec" -n 2 "$plain" > "$work/plain"
timeout 120 "$mpiexec" -n 1 env LD_PRELOAD="$lib" DCT_PMPI=1 DCT_PMPI_MIN_COUNT=10 "$plain" : \
  -n 1 env LD_PRELOAD="$lib" DCT_PMPI=1 DCT_PMPI_MIN_COUNT=1000000 "$plain" \
  > "$work/mixed" 2> "$work/mixed.err" ||
  { echo "FAILED: min count differing between ranks (rc $?)"; cat "$work/mixed.err"; exit 1; }
grep -q "differ between ranks" "$work/mixed.err" ||
  { echo "FAILED: no message"; cat "$work/mixed.err"; exit 1; }
diff "$work/plain" "$work/mixed" || { echo "FAILED: off, yet the output changed"; exit 1; }

timeout 120 "$mpiexec" -n 3 env LD_PRELOAD="$lib" DCT_PMPI=1 DCT_PMPI_MIN_COUNT=1 \
  "$dct_and_pmpi" || { echo "FAILED: dct_and_pmpi"; exit 1; }
echo "pmpi agreement: passed"
