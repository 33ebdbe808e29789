#!/usr/bin/env bash
# A checkpoint save on a file system without room for it: a 256 KiB tmpfs, mounted
# in a private mount namespace (needs root and unshare; skipped otherwise, exit 77).
# usage: checkpoint_no_room.sh MPIEXEC FAULT_TESTS DIRECTORY
set -euo pipefail
mpiexec=$1 tests=$2 directory=$3
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
  echo "skipped: mounting a small tmpfs needs root and unshare"
  exit 77
fi
mkdir -p "$directory"
for ranks in 2 3; do
  timeout 240 unshare -m bash -c "mount -t tmpfs -o size=256k tmpfs '$directory' &&
    DCT_TEST_SMALL_FS='$directory' '$mpiexec' -n $ranks '$tests' \
      --gtest_filter=CheckpointFaults.NoRoom*" ||
    { echo "FAILED at $ranks ranks"; exit 1; }
done
echo "checkpoint no room: passed"
