# dct.h is the source of truth of the API; the bindings follow it (ctest: bindings.complete):
#   cmake -DROOT=<source dir> -P cmake/check_bindings.cmake
# - every constant of dct.h's enums has a Fortran parameter of the same name and value in
#   bindings/fortran/dct.F90, and DCT_STATUS_MAGIC the same bits (DCT_STATUS_SIZE, sizeof of
#   the C struct, is checked where it can be: the library refuses a status of another size,
#   and tests/fortran passes the module's statuses to it);
# - every function of dct.h has a Fortran routine of the same name in lower case, public in the
#   module, and is called by include/dct/dct.hpp;
# - the Python package (bindings/python/dct) has a ctypes prototype of every function, every
#   return code in ERROR_NAMES and DCT_Status's fields in dct.h's order;
# unless listed below as deliberately absent, with the reason.
cmake_minimum_required(VERSION 3.16)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<dct source dir> -P check_bindings.cmake")
endif()

# Deliberately absent, with the reason.
set(fortran_absent
  DCT_ERR_LASTCODE  # a range bound for C code's checks of a code
)
set(cxx_absent "")
set(python_absent
  DCT_Alltoallv_init DCT_Alltoallv_backward_init  # the _c forms take every count
)

file(READ ${ROOT}/include/dct/dct.h header)
file(READ ${ROOT}/bindings/fortran/dct.F90 fortran)
file(READ ${ROOT}/include/dct/dct.hpp cxx)
file(READ ${ROOT}/bindings/python/dct/_capi.py python_capi)
file(READ ${ROOT}/bindings/python/dct/__init__.py python_init)
string(TOLOWER "${fortran}" fortran_lower)
set(problems "")

# Constants: "NAME = value" inside enums, and #define DCT_STATUS_SIZE.
string(REGEX MATCHALL "\n[ \t]+DCT_[A-Z0-9_]+ = -?[0-9]+" constants "${header}")
string(REGEX MATCH "#define DCT_STATUS_MAGIC 0x([0-9A-Fa-f]+)u" magic "${header}")
set(c_magic "${CMAKE_MATCH_1}")
string(REGEX MATCH "DCT_STATUS_MAGIC = int\\(z'([0-9A-Fa-f]+)'" magic "${fortran}")
if(NOT c_magic OR NOT c_magic STREQUAL CMAKE_MATCH_1)
  list(APPEND problems "DCT_STATUS_MAGIC: dct.h 0x${c_magic}, bindings/fortran/dct.F90 z'${CMAKE_MATCH_1}'")
endif()
set(checked_constants 0)
foreach(entry IN LISTS constants)
  string(REGEX REPLACE "^[\n \t]+([A-Z0-9_]+) = (-?[0-9]+)$" "\\1;\\2" pair "${entry}")
  list(GET pair 0 name)
  list(GET pair 1 value)
  math(EXPR checked_constants "${checked_constants} + 1")
  if(name IN_LIST fortran_absent)
    continue()
  endif()
  if(name MATCHES "^DCT_(SUCCESS|ERR_)" AND NOT name STREQUAL "DCT_ERR_LASTCODE" AND
     NOT python_init MATCHES "[ {]${value}: \"${name}\"")
    list(APPEND problems "bindings/python/dct/__init__.py: ERROR_NAMES lacks ${value}: \"${name}\"")
  endif()
  if(NOT fortran MATCHES "[ ,:]${name} = ([0-9]+)")
    list(APPEND problems "bindings/fortran/dct.F90: no parameter ${name} (dct.h: ${value})")
  elseif(NOT CMAKE_MATCH_1 STREQUAL value)
    list(APPEND problems "bindings/fortran/dct.F90: ${name} = ${CMAKE_MATCH_1}, dct.h: ${value}")
  endif()
endforeach()

# Functions: "DCT_EXPORT <type> DCT_Name(".
string(REGEX MATCHALL "DCT_EXPORT [^;(]*[ *](DCT_[A-Za-z_]+)\\(" declarations "${header}")
set(checked_functions 0)
foreach(declaration IN LISTS declarations)
  string(REGEX REPLACE ".*[ *](DCT_[A-Za-z_]+)\\($" "\\1" name "${declaration}")
  math(EXPR checked_functions "${checked_functions} + 1")
  string(TOLOWER "${name}" lower)
  if(NOT name IN_LIST fortran_absent AND NOT fortran_lower MATCHES "public ::[^\n]*(&[ \t]*\n[^\n]*)*[ ,]${lower}[ ,\n&]")
    list(APPEND problems "bindings/fortran/dct.F90: ${name} has no public routine ${lower}")
  endif()
  if(NOT name IN_LIST python_absent AND NOT python_capi MATCHES "\"${name}\": \\(")
    list(APPEND problems "bindings/python/dct/_capi.py: ${name} has no prototype")
  endif()
  if(NOT name IN_LIST cxx_absent AND NOT cxx MATCHES "${name}\\(")
    list(APPEND problems "include/dct/dct.hpp: ${name} is not called (add a wrapper, or list it in cmake/check_bindings.cmake)")
  endif()
endforeach()
# DCT_Status: the Python struct lists dct.h's fields in the same order.
string(REGEX MATCH "typedef struct DCT_Status {(.*)} DCT_Status;" status_struct "${header}")
string(REGEX REPLACE " DCT_STATUS_DEFAULT_\\([^\n]*\\);" "@" status_body "${CMAKE_MATCH_1}")
string(REPLACE ";" "@" status_body "${status_body}")  # ";" would split CMake's lists
string(REGEX MATCHALL "[a-z_]+@" c_fields "${status_body}")
list(TRANSFORM c_fields REPLACE "@" "")
string(REGEX MATCHALL "\\(\"[a-z_]+\", " python_fields "${python_capi}")
list(TRANSFORM python_fields REPLACE "^\\(\"([a-z_]+)\", $" "\\1")
list(LENGTH c_fields status_fields)
if(status_fields LESS 15 OR NOT c_fields STREQUAL python_fields)
  list(APPEND problems "bindings/python/dct/_capi.py: DCT_Status fields (${python_fields}) differ from dct.h's (${c_fields})")
endif()

if(checked_functions LESS 20 OR checked_constants LESS 30)
  list(APPEND problems "found only ${checked_functions} functions and ${checked_constants} constants in dct.h: the patterns here no longer match it")
endif()

list(LENGTH problems count)
if(count GREATER 0)
  string(REPLACE ";" "\n  " text "${problems}")
  message(FATAL_ERROR "bindings: ${count} problem(s):\n  ${text}")
endif()
message(STATUS "bindings: ${checked_functions} functions and ${checked_constants} constants of dct.h, bound in Fortran, C++ and Python (and ${status_fields} status fields in Python)")
