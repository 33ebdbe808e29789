# README.md's code is the code that CI builds and runs (ctest readme.snippets):
#   cmake -DROOT=<source dir> -P cmake/check_readme.cmake
# Each program of examples/first quotes, between a line holding "README begin" and one holding
# "README end", the lines README.md shows; README.md must contain them as one fenced block.
cmake_minimum_required(VERSION 3.16)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<dct source dir> -P check_readme.cmake")
endif()
file(READ ${ROOT}/README.md readme)
set(problems "")
foreach(program first.c first.cpp first.f90 first.py)
  # Read whole (file(STRINGS) would split lines at semicolons and drop empty ones).
  file(READ ${ROOT}/examples/first/${program} text)
  string(FIND "${text}" "README begin" begin REVERSE)  # the marker, not a mention above it
  string(FIND "${text}" "README end" end REVERSE)
  set(excerpt "")
  if(begin GREATER -1 AND end GREATER begin)
    string(SUBSTRING "${text}" ${begin} -1 rest)
    string(FIND "${rest}" "\n" newline)
    math(EXPR first "${begin} + ${newline} + 1")
    string(SUBSTRING "${text}" 0 ${end} before_end)
    string(FIND "${before_end}" "\n" last REVERSE)  # the marker's own line starts after it
    math(EXPR length "${last} + 1 - ${first}")
    string(SUBSTRING "${text}" ${first} ${length} excerpt)
  endif()
  if(excerpt STREQUAL "")
    string(APPEND problems "  examples/first/${program} has no README begin/end block\n")
    continue()
  endif()
  string(FIND "${readme}" "\n${excerpt}```" at)
  if(at EQUAL -1)
    string(APPEND problems
           "  README.md lacks examples/first/${program}'s block (or it is not a whole fenced block)\n")
  endif()
endforeach()
if(problems)
  message(FATAL_ERROR "README.md and examples/first differ:\n${problems}")
endif()
message(STATUS "README.md shows examples/first's code as built")
