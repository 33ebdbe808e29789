#!/usr/bin/env bash
# The room check on tmpfs, old beside new (output-tmpfs.txt): OLD = a copy of the 8042edf
# build (dct-bench + libdct.so*) in /tmp/pre-tmpfs, NEW = /work/main/build.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
for ranks in 2 4; do
  for which in old new; do
    work=/dev/shm/dct-tmpfs-bench.$$ && mkdir -p $work
    echo "######## $which (old: 8042edf, the room check fallocates on tmpfs; new: statfs free space)"
    if [ $which = old ]; then
      mpirun -n $ranks -x LD_LIBRARY_PATH=/tmp/pre-tmpfs /tmp/pre-tmpfs/dct-bench checkpoint --mib 64 --iters 11 --steps 4 --dir $work
    else
      mpirun -n $ranks /work/main/build/hpc/bench/dct-bench checkpoint --mib 64 --iters 11 --steps 4 --dir $work
    fi
    rm -rf $work
  done
done
