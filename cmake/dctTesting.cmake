# How dct registers tests; included from the top level so that tests/, examples/ and hpc/
# all use the same helper.

# Environment every test process runs with: Open MPI refuses root and more ranks than cores
# unless told, and CI runs as root on 2 cores. The vader single-copy mechanism needs ptrace
# rights that containers often lack. MPICH's mpiexec (Hydra) needs none of this.
# Waiting ranks yield their core: Open MPI does so by itself only when it sees more ranks than
# the cores hwloc reports, and a machine whose CPU time is capped below what hwloc sees (a
# container's quota) then spins 4 ranks on 2 cores' worth of time. CI ran 3- and 4-rank tests
# 10-40x slower than this machine does (mpi.algorithms.np3 32 s against 0.7 s).
set(DCT_MPI_TEST_ENVIRONMENT "")
if(DCT_MPI_FAMILY STREQUAL "Open MPI")
  set(DCT_MPI_TEST_ENVIRONMENT
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
      OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
      OMPI_MCA_mpi_yield_when_idle=1)
endif()
if(DCT_SANITIZE)
  # Full unwinding lets the suppressions recognise MPI's own allocations kept until exit.
  # use_tls=0: LeakSanitizer's tracer crashed (SIGSEGV, "LeakSanitizer has encountered a fatal
  # error") on a bogus dynamic-TLS block of a library Open MPI or HDF5 loads (dct-ckpt, every
  # run on this machine once the HIP packages were installed). Not scanning TLS as a root can
  # only add leak reports, never hide one.
  list(APPEND DCT_MPI_TEST_ENVIRONMENT
       ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0
       LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/sanitizers/lsan.supp:use_tls=0
       UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)
endif()
set(DCT_MPI_TEST_RANKS 1 2 3 4 CACHE STRING "Rank counts every MPI test runs at")
# Threads per process for a threaded Kokkos (OpenMP); Serial ignores them. Unbound threads, as
# Kokkos asks for tests (docs/backends.md, "Ranks and threads"), and waiting ones asleep: the
# tests run more ranks x threads than CI has cores, and OpenMP's default spinning at every
# barrier then made a 4-rank test at 2 threads run past its timeout.
set(DCT_TEST_THREADS 1 CACHE STRING "OMP_NUM_THREADS of every test process")
list(APPEND DCT_MPI_TEST_ENVIRONMENT OMP_NUM_THREADS=${DCT_TEST_THREADS} OMP_PROC_BIND=false
     OMP_WAIT_POLICY=passive)

# Test labels, so that a subset runs alone (`ctest -L unit`): unit (no mpiexec, seconds),
# mpi (under mpiexec), bench (the tools' smoke runs), gpu (the GPU backends' code, emulated on
# the host or on a device), slow (tens of seconds on 2 cores, or more ranks than CI's 4 cores:
# `ctest -LE slow` skips them). Other labels name a subsystem (install, pmpi, netem, slurm).

# dct_add_mpi_test(<name> <target> [ARGS args...] [RANKS n...] [LABELS label...])
# Registers `target` once per rank count as <name>.np<N>, labelled mpi, the given labels, and
# slow above 4 ranks; a test that deadlocks fails at its TIMEOUT instead of blocking CI.
function(dct_add_mpi_test name target)
  cmake_parse_arguments(ARG "" "" "ARGS;RANKS;LABELS" ${ARGN})
  if(NOT ARG_RANKS)
    set(ARG_RANKS ${DCT_MPI_TEST_RANKS})
  endif()
  foreach(np IN LISTS ARG_RANKS)
    add_test(NAME ${name}.np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                     $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS} ${ARG_ARGS})
    set(labels mpi ${ARG_LABELS})
    if(np GREATER 4)
      list(APPEND labels slow)
    endif()
    math(EXPR processors "${np} * ${DCT_TEST_THREADS}")
    set_tests_properties(${name}.np${np} PROPERTIES
      ENVIRONMENT "${DCT_MPI_TEST_ENVIRONMENT}" TIMEOUT 300 PROCESSORS ${processors}
      LABELS "${labels}")
  endforeach()
endfunction()

# dct_add_usage_test(<name> PATTERN <regex> COMMAND <command> [args...])
# A command line a tool must refuse: the test passes when the command exits with 2 (usage
# error) and its output matches <regex> (grep -E), the message that tells the user what is wrong.
function(dct_add_usage_test name)
  cmake_parse_arguments(ARG "" "PATTERN" "COMMAND" ${ARGN})
  add_test(NAME ${name}
           COMMAND sh -c "out=$(\"$@\" 2>&1); rc=$?; printf '%s\\nexit code %s\\n' \"$out\" $rc; \
test $rc -eq 2 && printf '%s' \"$out\" | grep -Eq -- \"$0\"" "${ARG_PATTERN}" ${ARG_COMMAND})
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "${DCT_MPI_TEST_ENVIRONMENT}" TIMEOUT 60 LABELS unit)
endfunction()
