# dct_mpi_family(<family-var> <description-var>)
# Which MPI the last find_package(MPI) found, read from its mpi.h: <family-var> is "Open MPI" or
# "MPICH" (MPICH and the MPIs that share its ABI: MVAPICH, Intel MPI, Cray MPICH), and
# <description-var> names it with its version ("MPICH 4.0.2"). Both are empty when mpi.h is not
# found or is neither. Used when dct is built (recorded in dctConfig.cmake) and when a project
# finds it (an MPI of the other family is refused there, not at run time).
function(dct_mpi_family family_var description_var)
  set(_family "")
  set(_description "")
  # The last two: mpicc used as the compiler, whose wrapper adds the include directory.
  # C++- and Fortran-only projects: their components' directories (Open MPI's Fortran include
  # directory holds mpi.h too).
  foreach(_dir IN LISTS MPI_C_HEADER_DIR MPI_C_INCLUDE_DIRS MPI_CXX_HEADER_DIR MPI_CXX_INCLUDE_DIRS
                        MPI_Fortran_F77_HEADER_DIR MPI_Fortran_INCLUDE_DIRS
                        CMAKE_C_IMPLICIT_INCLUDE_DIRECTORIES CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    if(NOT EXISTS "${_dir}/mpi.h")
      continue()
    endif()
    file(STRINGS "${_dir}/mpi.h" _defines REGEX
         "^#define +(OPEN_MPI|OMPI_(MAJOR|MINOR|RELEASE)_VERSION|MPICH_VERSION|MVAPICH2?_VERSION|I_MPI_VERSION) ")
    set(_version "")
    foreach(_define IN LISTS _defines)
      if(_define MATCHES "^#define +([A-Z0-9_]+) +\"?([^\" ]*)\"?")
        set(_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
      endif()
    endforeach()
    if(DEFINED _OPEN_MPI)
      set(_family "Open MPI")
      set(_description
          "Open MPI ${_OMPI_MAJOR_VERSION}.${_OMPI_MINOR_VERSION}.${_OMPI_RELEASE_VERSION}")
    elseif(DEFINED _MPICH_VERSION)
      set(_family "MPICH")
      if(DEFINED _I_MPI_VERSION)
        set(_description "Intel MPI ${_I_MPI_VERSION} (MPICH ${_MPICH_VERSION})")
      elseif(DEFINED _MVAPICH2_VERSION OR DEFINED _MVAPICH_VERSION)
        set(_description "MVAPICH ${_MVAPICH2_VERSION}${_MVAPICH_VERSION} (MPICH ${_MPICH_VERSION})")
      else()
        set(_description "MPICH ${_MPICH_VERSION}")
      endif()
    endif()
    break()
  endforeach()
  set(${family_var} "${_family}" PARENT_SCOPE)
  set(${description_var} "${_description}" PARENT_SCOPE)
endfunction()
