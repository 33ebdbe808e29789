#!/bin/sh
# What the release libraries hold (issue 16): libdct exports the C ABI (version node DCT_0) and
# the internals its own tools call (DCT_PRIVATE) and nothing else; neither libdct nor
# libdct_pmpi contains a test hook (those are compiled into dct_testing only, DCT_TESTING).
# Usage: check_exports.sh LIBDCT LIBDCT_PMPI
set -eu
lib=$1
pmpi=$2
status=0
stray=$(nm -D --defined-only "$lib" | awk '{print $3}' |
  grep -v -e '^DCT_[A-Za-z0-9_]*@@DCT_0$' -e '@@DCT_PRIVATE$' -e '^DCT_0$' -e '^DCT_PRIVATE$' ||
  true)
if [ -n "$stray" ]; then
  echo "$lib exports symbols outside DCT_0 and DCT_PRIVATE:"
  echo "$stray"
  status=1
fi
for f in "$lib" "$pmpi"; do
  if nm -C "$f" | grep -q 'dct::detail::testing::' ||
    grep -q -a DCT_TEST_CRASH_IN_CHECKPOINT_SAVE "$f"; then
    echo "$f contains a test hook (dct::detail::testing or DCT_TEST_CRASH_IN_CHECKPOINT_SAVE)"
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "exports and hooks as expected: $lib, $pmpi"
exit "$status"
