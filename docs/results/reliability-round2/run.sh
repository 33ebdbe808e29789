#!/usr/bin/env bash
# Builds overhead.c against a dct build tree and runs it at 2 and 4 ranks, two sizes.
# usage: docs/results/reliability-round2/run.sh BUILD_DIR > overhead.txt
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
mpicc -O2 -I"$root/include" -I"$build/include" "$here/overhead.c" -o /tmp/dct_overhead \
  -L"$build" -ldct -Wl,-rpath,"$build"
for ranks in 2 4; do
  for count in 1024 262144; do
    mpiexec -n "$ranks" /tmp/dct_overhead "$count"
  done
done
