#!/bin/sh
# pkgconfig.sh PC_DIR SOURCE_DIR WORK_DIR MPIEXEC MPICC CXX MPIF90 "LANGUAGES"
# Builds the install consumers with nothing but pkg-config, as a user outside CMake would
# (README: "Linking"), and runs each at 2 ranks: C with mpicc, C++ with the plain C++ compiler
# (MPI's flags come from dct.pc's Requires), Fortran with mpif90 and dct-fortran.pc.
set -eu
pc_dir=$1 source_dir=$2 work=$3 mpiexec=$4 mpicc=$5 cxx=$6 mpif90=$7 languages=$8
export PKG_CONFIG_PATH="$pc_dir"
mkdir -p "$work"
cd "$work"
for pc in "$pc_dir"/*.pc; do
  if grep -n '/\.\.' "$pc"; then
    echo "FAIL: $pc has a path with '..' in it" >&2
    exit 1
  fi
done
echo "dct.pc: $(pkg-config --cflags --libs dct)"
for language in $languages; do
  case $language in
    c) $mpicc "$source_dir/consumer/consumer.c" -o consumer_c $(pkg-config --cflags --libs dct) ;;
    cxx) $cxx -std=c++17 "$source_dir/consumer_cxx/consumer.cpp" -o consumer_cxx \
           $(pkg-config --cflags --libs dct) ;;
    fortran) $mpif90 "$source_dir/consumer_fortran/consumer.f90" -o consumer_fortran \
               $(pkg-config --cflags --libs dct-fortran) ;;
  esac
  $mpiexec -n 2 "./consumer_$language"
done
echo "pkg-config consumers built and ran: $languages"
