#!/usr/bin/env bash
# Packs a CUDA build tree and the shared libraries it needs beyond glibc and libstdc++ (Open MPI
# with its components and help files, HDF5, Kokkos, zstd, lz4, gfortran, ...) into two
# tarballs, so that the suite runs on a GPU node that has the CUDA driver but no MPI:
#
#   .ci/gpu/pack.sh build-cuda .gpu      # here: writes .gpu/deps.tar.gz and .gpu/build.tar.gz
#   OUT=... .ci/gpu/check.sh             # there, from the repository root (see README.md)
#
# Open MPI keeps its compiled-in paths (/usr/lib/x86_64-linux-gnu/openmpi, /usr/share/openmpi,
# /etc/openmpi): those trees go to the same places there, the libraries to /opt/dctdeps/lib.
set -euo pipefail
build=${1:?build directory}
out=${2:?output directory}
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# Every ELF file of the build tree (no objects), and Open MPI's programs and components.
mapfile -t elves < <(find "$build" -type f ! -name '*.o' ! -path '*/CMakeFiles/*' \
  -exec sh -c 'head -c 4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi
pmix_lib=/usr/lib/x86_64-linux-gnu/pmix2
mapfile -t components < <(find "$ompi_lib" "$pmix_lib" -name '*.so')
programs=(/usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info)

# Their libraries, except the C and C++ runtimes the node has (newer there than here) and
# OpenBLAS (only the DLRM demo uses it; it runs on the host and is not part of the GPU run),
# and NCCL (200 MB; setup.sh finds the node's own, e.g. PyTorch's).
mkdir -p "$stage/opt/dctdeps/lib" "$stage/opt/dctdeps/bin"
for file in "${elves[@]}" "${components[@]}" "${programs[@]}"; do
  ldd "$file" 2> /dev/null | awk '/=> \//{print $3}'
done | sort -u | grep -Ev '/(libopenblas|libnccl|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  while read -r lib; do
    # The build's own libraries (libdct) stay in the build tree, where its RUNPATH finds them:
    # a copy in /opt/dctdeps would shadow a newer build tree unpacked on a node that kept it.
    case "$(realpath "$lib")" in "$(realpath "$build")"/*) continue ;; esac
    cp -L "$lib" "$stage/opt/dctdeps/lib/"
  done
cp "${programs[@]}" "$stage/opt/dctdeps/bin/"
ln -s orterun "$stage/opt/dctdeps/bin/mpiexec"
for tree in "$ompi_lib" "$pmix_lib" /usr/share/openmpi /etc/openmpi; do
  mkdir -p "$stage$(dirname "$tree")"
  cp -a "$tree" "$stage$tree"
done
tar -C "$stage" -czf "$out/deps.tar.gz" .
tar -C "$(dirname "$build")" -czf "$out/build.tar.gz" --exclude='*.o' --exclude='CMakeFiles' \
  "$(basename "$build")"
du -h "$out"/*.tar.gz
