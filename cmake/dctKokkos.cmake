# Finds Kokkos for dct's build: Kokkos::kokkos, checked to be linkable into the shared libdct.
#
# Debian's libtrilinos-kokkos-dev (Kokkos 3.4.01 built inside Trilinos) exports Kokkos::kokkos
# with the include directory "/usr/lib/include", which does not exist; its headers are in
# /usr/include/trilinos. Repair the target in place so that nothing downstream needs to know.
if(NOT DEFINED CMAKE_CXX_EXTENSIONS)
  set(CMAKE_CXX_EXTENSIONS OFF)  # Trilinos' Kokkos refuses extensions, and says so loudly
endif()
find_package(Kokkos REQUIRED)
if(TARGET Kokkos::kokkos)
  get_target_property(_dct_kokkos_includes Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
  set(_dct_kokkos_ok FALSE)
  foreach(_dir IN LISTS _dct_kokkos_includes)
    if(EXISTS "${_dir}/Kokkos_Core.hpp")
      set(_dct_kokkos_ok TRUE)
    endif()
  endforeach()
  if(NOT _dct_kokkos_ok)
    find_path(DCT_KOKKOS_INCLUDE_DIR Kokkos_Core.hpp
              HINTS ${Kokkos_INCLUDE_DIRS} /usr/include/trilinos PATH_SUFFIXES trilinos)
    if(NOT DCT_KOKKOS_INCLUDE_DIR)
      message(FATAL_ERROR "Kokkos ${Kokkos_VERSION} found, but not Kokkos_Core.hpp: set "
                          "DCT_KOKKOS_INCLUDE_DIR to the directory that holds it")
    endif()
    set_target_properties(Kokkos::kokkos PROPERTIES
                          INTERFACE_INCLUDE_DIRECTORIES "${DCT_KOKKOS_INCLUDE_DIR}")
  endif()
else()
  message(FATAL_ERROR "find_package(Kokkos) did not define the target Kokkos::kokkos")
endif()

# Kokkos builds static, non-PIC libraries by default (4.x), which cannot go into libdct.so: say
# so now rather than at the link, with the fix. A link of a shared library is the only reliable
# test (the imported target does not record how its archives were compiled).
# (Debian's Trilinos Kokkos has no Kokkos::kokkoscore, and is shared.)
set(_dct_kokkos_core "")
if(TARGET Kokkos::kokkoscore)
  get_target_property(_dct_kokkos_core Kokkos::kokkoscore TYPE)
endif()
if(_dct_kokkos_core STREQUAL "STATIC_LIBRARY")
  set(_dct_probe ${CMAKE_BINARY_DIR}/CMakeFiles/dct_kokkos_pic)
  file(WRITE ${_dct_probe}/probe.cpp
       "#include <Kokkos_Core.hpp>\nvoid dct_kokkos_probe() { Kokkos::initialize(); }\n")
  try_compile(DCT_KOKKOS_LINKS_SHARED ${_dct_probe}/build SOURCES ${_dct_probe}/probe.cpp
              CMAKE_FLAGS -DCMAKE_TRY_COMPILE_TARGET_TYPE=SHARED_LIBRARY
              LINK_LIBRARIES Kokkos::kokkos OUTPUT_VARIABLE _dct_probe_output
              CXX_STANDARD 17)
  if(NOT DCT_KOKKOS_LINKS_SHARED)
    message(FATAL_ERROR "Kokkos ${Kokkos_VERSION} (${Kokkos_DIR}) is a static library compiled "
      "without position-independent code, which cannot be linked into the shared libdct. "
      "Rebuild Kokkos with -DBUILD_SHARED_LIBS=ON (or -DCMAKE_POSITION_INDEPENDENT_CODE=ON), "
      "or point Kokkos_ROOT at such a build (.ci/kokkos.sh builds one). The linker said:\n"
      "${_dct_probe_output}")
  endif()
endif()
set(_dct_kokkos_backends ${Kokkos_DEVICES})
list(JOIN _dct_kokkos_backends " " _dct_kokkos_backends)
message(STATUS "dct: Kokkos ${Kokkos_VERSION} (${_dct_kokkos_backends}) from ${Kokkos_DIR}")
