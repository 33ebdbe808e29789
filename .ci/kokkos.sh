#!/usr/bin/env bash
# Builds Kokkos from the pinned source tarball (../shared/deps by default) with shared
# libraries, installed into a cache directory outside the clone keyed by the tarball's checksum
# and the backend; a second run on the same machine reuses it. Prints the install prefix (pass
# it as -DKokkos_ROOT=...) as the only line on stdout; progress goes to stderr.
#
#   .ci/kokkos.sh [--backend openmp|hip|cuda] [--tarball FILE] [--jobs N]
#   openmp (default): Serial + OpenMP, with the system's C++ compiler.
#   hip: Serial + HIP for gfx90a (MI250X) with Debian's hipcc, which must then be dct's
#        CMAKE_CXX_COMPILER too. Compile checks only on a machine without an AMD GPU.
#   cuda: Serial + CUDA for sm_90 (H100/H200) with nvcc (PATH, else /usr/local/cuda/bin),
#        patched for CUDA 13 (.ci/kokkos-4.6.01-cuda13.patch); the installed bin/nvcc_wrapper
#        must then be dct's CMAKE_CXX_COMPILER, with -arch=sm_90 in CMAKE_CXX_FLAGS (the
#        wrapper's own default, sm_70, is refused by CUDA 13).
#   DCT_KOKKOS_TARBALL  the source tarball (same as --tarball)
#   DCT_CACHE   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/dct)
#
# Shared libraries because Kokkos' default static, non-PIC archives cannot be linked into
# libdct.so. No -march: the install may be reused by another machine that shares the cache.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tarball=${DCT_KOKKOS_TARBALL:-$here/../shared/deps/kokkos-4.6.01.tar.xz}
jobs=$(nproc)
backend=openmp
while (($#)); do
  case $1 in
    --backend) backend=$2; shift 2 ;;
    --tarball) tarball=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) echo "kokkos.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [ ! -r "$tarball" ]; then
  echo "kokkos.sh: no Kokkos source tarball at $tarball (see ../shared/deps/README.md)" >&2
  exit 1
fi

name=$(basename "$tarball" .tar.xz)  # kokkos-4.6.01
sha=$(sha256sum "$tarball" | cut -c1-16)
cache=${DCT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dct}
patch=
case $backend in
  openmp) options=(-DKokkos_ENABLE_OPENMP=ON) ;;
  hip) options=(-DCMAKE_CXX_COMPILER="$(command -v hipcc)" -DKokkos_ENABLE_HIP=ON
                -DKokkos_ARCH_AMD_GFX90A=ON -DKokkos_ENABLE_ROCTHRUST=OFF) ;;
  cuda)
    if ! command -v nvcc > /dev/null; then export PATH=/usr/local/cuda/bin:$PATH; fi
    command -v nvcc > /dev/null || { echo "kokkos.sh: no nvcc (PATH, /usr/local/cuda/bin)" >&2; exit 1; }
    patch=$here/.ci/$name-cuda13.patch
    sha=$sha-$(sha256sum "$patch" | cut -c1-8)  # a changed patch is a new build
    options=(-DKokkos_ENABLE_CUDA=ON -DKokkos_ARCH_HOPPER90=ON -DCMAKE_CXX_FLAGS=-arch=sm_90) ;;
  *) echo "kokkos.sh: unknown backend '$backend' (openmp, hip or cuda)" >&2; exit 2 ;;
esac
prefix=$cache/$name-$backend-$sha
mkdir -p "$cache"
# One build per prefix at a time: a second CI run on the same machine waits, then reuses it.
exec 9> "$prefix.lock"
flock 9
# The stamp is written last, so a prefix without it is an interrupted build: start again.
if [ -f "$prefix/.dct-complete" ]; then
  echo "== Kokkos: reusing $prefix" >&2
  echo "$prefix"
  exit 0
fi

work=$(mktemp -d "$cache/.build-$name-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "== Kokkos: building $name ($backend, shared) into $prefix" >&2
tar -xJf "$tarball" -C "$work"
if [ -n "$patch" ]; then
  patch -d "$work/$name" -p1 -s < "$patch"
  options+=(-DCMAKE_CXX_COMPILER="$work/$name/bin/nvcc_wrapper")
fi
rm -rf "$prefix"
cmake -S "$work/$name" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON \
  -DKokkos_ENABLE_SERIAL=ON "${options[@]}" -DKokkos_ENABLE_TESTS=OFF \
  -DKokkos_ENABLE_EXAMPLES=OFF > "$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" -j "$jobs" >&2
cmake --install "$work/build" > /dev/null
touch "$prefix/.dct-complete"
echo "$prefix"
