# How dct registers tests; included from the top level so that tests/, examples/ and hpc/
# all use the same helper.

# Environment every MPI test runs with: Open MPI refuses root and more ranks than cores
# unless told, and CI runs as root on 2 cores. The vader single-copy mechanism needs ptrace
# rights that containers often lack. MPICH's mpiexec (Hydra) needs none of this.
set(DCT_MPI_TEST_ENVIRONMENT "")
if(DCT_MPI_FAMILY STREQUAL "Open MPI")
  set(DCT_MPI_TEST_ENVIRONMENT
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
      OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none)
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

# dct_add_mpi_test(<name> <target> [ARGS args...] [RANKS n...])
# Registers `target` once per rank count as <name>.np<N>; a test that deadlocks fails at its
# TIMEOUT instead of blocking CI.
function(dct_add_mpi_test name target)
  cmake_parse_arguments(ARG "" "" "ARGS;RANKS" ${ARGN})
  if(NOT ARG_RANKS)
    set(ARG_RANKS ${DCT_MPI_TEST_RANKS})
  endif()
  foreach(np IN LISTS ARG_RANKS)
    add_test(NAME ${name}.np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                     $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS} ${ARG_ARGS})
    set_tests_properties(${name}.np${np} PROPERTIES
      ENVIRONMENT "${DCT_MPI_TEST_ENVIRONMENT}" TIMEOUT 300 PROCESSORS ${np} LABELS mpi)
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
