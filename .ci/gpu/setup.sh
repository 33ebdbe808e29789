# shellcheck shell=bash
# Sourced on a GPU node, from the repository root, after .ci/gpu/pack.sh's tarballs came along:
#   source .ci/gpu/setup.sh .gpu build-cuda
# Unpacks the libraries (Open MPI's trees at their compiled-in paths, the rest in
# /opt/dctdeps) and the build tree, makes the build's absolute paths (/work/main/...) and
# CTest's /usr/bin/mpiexec resolve, and exports the environment for mpiexec as root.
bundle=${1:-.gpu}
build=${2:-build-cuda}
repo=$(pwd -P)
if [ ! -d /opt/dctdeps ]; then
  for tree in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 \
    /usr/share/openmpi /etc/openmpi; do
    [ -e "$tree" ] && echo "setup.sh: $tree exists on this node and is replaced" >&2
  done
  tar -xzf "$bundle/deps.tar.gz" -C /
fi
[ -d "$build" ] || tar -xzf "$bundle/build.tar.gz" -C "$repo"
if [ "$repo" != /work/main ] && [ ! -e /work/main ]; then
  mkdir -p /work && ln -s "$repo" /work/main
fi
[ -e /usr/bin/mpiexec ] || ln -s /opt/dctdeps/bin/orterun /usr/bin/mpiexec
# NCCL and the CUDA runtime from the node's CUDA toolkit or Python wheels, if any.
nccl=$(find /usr/local /opt /usr/lib -name 'libnccl.so.2' 2> /dev/null | head -n 1)
export PATH=/opt/dctdeps/bin:$PATH
export LD_LIBRARY_PATH=/opt/dctdeps/lib${nccl:+:$(dirname "$nccl")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none
echo "setup.sh: repo $repo, build $build, nccl ${nccl:-none}"
