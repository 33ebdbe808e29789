# Finds Kokkos for dct and its consumers (installed next to dctConfig.cmake).
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
