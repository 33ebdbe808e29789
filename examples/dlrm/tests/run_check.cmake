# Driver of the dct-dlrm tests: runs the demo under mpiexec, then either checks its exit code
# and message (bad input) or its JSON with dct_dlrm_check. Invoked as
#   cmake -DMPIEXEC=... -DNP=... -DDEMO=... -DDEMO_ARGS="a|b" [-DJSON=f -DCHECKER=c -DCHECKS="x|y"]
#         [-DEXPECT_CODE=n -DEXPECT_REGEX=r] [-DEXPECT_CHECK_FAIL=ON] -P run_check.cmake
string(REPLACE "|" ";" DEMO_ARGS "${DEMO_ARGS}")
string(REPLACE "|" ";" CHECKS "${CHECKS}")
execute_process(COMMAND ${MPIEXEC} -n ${NP} ${DEMO} ${DEMO_ARGS}
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(DEFINED EXPECT_CODE)
  if(NOT code EQUAL EXPECT_CODE)
    message(FATAL_ERROR "exit code ${code}, expected ${EXPECT_CODE}")
  endif()
  if(NOT "${out}${err}" MATCHES "${EXPECT_REGEX}")
    message(FATAL_ERROR "output does not match '${EXPECT_REGEX}'")
  endif()
  return()
endif()
if(NOT code EQUAL 0)
  message(FATAL_ERROR "dct-dlrm exited with ${code}")
endif()
execute_process(COMMAND ${CHECKER} ${JSON} ${CHECKS} RESULT_VARIABLE check_code
                OUTPUT_VARIABLE check_out ERROR_VARIABLE check_err)
message("${check_out}${check_err}")
if(EXPECT_CHECK_FAIL)
  if(check_code EQUAL 0)
    message(FATAL_ERROR "the check passed on runs that must differ: it cannot fail")
  endif()
elseif(NOT check_code EQUAL 0)
  message(FATAL_ERROR "dct_dlrm_check failed")
endif()
