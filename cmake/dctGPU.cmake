# The native GPU backends: one source tree (backends/common/cuda_hip/) compiled by nvcc for
# CUDA (backends/cuda/cuda_kernels.cu) and by hipcc for HIP (backends/hip/hip_kernels.hip). A backend
# that is OFF contributes its stub (backends/<name>/<name>_stub.cpp, whose accessor returns nullptr).
#
# Included by the top-level CMakeLists.txt after find_package(MPI). Sets:
#   DCT_HAVE_CUDA, DCT_HAVE_HIP   0/1, for dct_config.h and dctConfig.cmake
#   DCT_HAVE_NCCL                 0/1, for dct_config.h: the NCCL transport (backends/cuda)
#   DCT_GPU_SOURCES               sources for dct_objects (the stubs of the backends that are OFF)
#   DCT_GPU_LINK                  link items for dct, dct_pmpi and (PUBLIC) dct_testing: the
#                                 backends' object files and their runtimes
#   DCT_GPU_DEPENDS               targets the library's objects wait for (the hipcc command)

set(DCT_GPU_SOURCES)
set(DCT_GPU_LINK)
set(DCT_GPU_DEPENDS)
set(_dct_gpu_headers
  ${PROJECT_SOURCE_DIR}/backends/common/cuda_hip/cuda_hip_backend.hpp
  ${PROJECT_SOURCE_DIR}/backends/common/cuda_hip/kernels.hpp
  ${PROJECT_SOURCE_DIR}/backends/common/cuda_hip/block_codec.hpp
  ${PROJECT_SOURCE_DIR}/backends/common/cuda_hip/selection_queue.hpp
  ${PROJECT_SOURCE_DIR}/backends/common/cuda_hip/stream_scratch.hpp
  ${PROJECT_SOURCE_DIR}/backends/common/kernel_logic.hpp
  ${PROJECT_SOURCE_DIR}/src/core/compute_backend.hpp
  ${PROJECT_SOURCE_DIR}/src/core/float16.hpp
  ${PROJECT_SOURCE_DIR}/src/core/error.hpp
  ${PROJECT_SOURCE_DIR}/include/dct/dct.h)

# --- CUDA: CMake's CUDA language (nvcc), CUB from the toolkit --------------------------------
if(DCT_ENABLE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80;90 CACHE STRING "CUDA architectures (A100: 80, H100: 90)")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  add_library(dct_cuda_kernels OBJECT backends/cuda/cuda_kernels.cu)
  set_target_properties(dct_cuda_kernels PROPERTIES
    CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF
    POSITION_INDEPENDENT_CODE ON CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_include_directories(dct_cuda_kernels PRIVATE
    ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include ${PROJECT_SOURCE_DIR}/src
    ${PROJECT_SOURCE_DIR}/backends)
  # MPI's headers only: MPI::MPI_C's compile options (e.g. -pthread) are not nvcc options.
  target_include_directories(dct_cuda_kernels SYSTEM PRIVATE ${MPI_C_INCLUDE_DIRS})
  target_compile_definitions(dct_cuda_kernels PRIVATE OMPI_SKIP_MPICXX MPICH_SKIP_MPICXX)
  # --fmad=false: no multiply-add contraction, so that the kernels compute the host backend's
  # bits (momentum's m * u + g differed in the last bit on an H100 with nvcc's default).
  target_compile_options(dct_cuda_kernels PRIVATE --fmad=false
    -Xcompiler=-Wall,-Wextra,-Wshadow  # not -Wpedantic: nvcc's generated code uses GNU line markers
    $<$<BOOL:${DCT_WERROR}>:SHELL:-Werror all-warnings>
    $<$<BOOL:${DCT_WERROR}>:-Xcompiler=-Werror>)
  target_link_libraries(dct_cuda_kernels PRIVATE CUDA::cudart)
  list(APPEND DCT_GPU_LINK $<TARGET_OBJECTS:dct_cuda_kernels> CUDA::cudart)
  set(DCT_HAVE_CUDA 1)
else()
  list(APPEND DCT_GPU_SOURCES backends/cuda/cuda_stub.cpp)
  set(DCT_HAVE_CUDA 0)
endif()

# --- NCCL: the device-to-device transport of CUDA requests (dct_transport) ---------------------
# From the CUDA toolkit's directories (where NVIDIA's HPC SDK and the CUDA repositories' libnccl
# packages put it) or NCCL_ROOT. Without it, GPU requests move their blocks over MPI.
set(DCT_HAVE_NCCL 0)
if(DCT_ENABLE_CUDA AND DCT_ENABLE_NCCL)
  find_path(DCT_NCCL_INCLUDE_DIR nccl.h
            HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(DCT_NCCL_LIBRARY nccl
               HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
  if(DCT_NCCL_INCLUDE_DIR AND DCT_NCCL_LIBRARY)
    add_library(dct_nccl_transport OBJECT backends/cuda/nccl_transport.cpp)
    set_target_properties(dct_nccl_transport PROPERTIES POSITION_INDEPENDENT_CODE ON
                          CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
    target_include_directories(dct_nccl_transport PRIVATE
      ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include ${PROJECT_SOURCE_DIR}/src)
    target_include_directories(dct_nccl_transport SYSTEM PRIVATE ${DCT_NCCL_INCLUDE_DIR})
    target_link_libraries(dct_nccl_transport PRIVATE dct_warnings MPI::MPI_C CUDA::cudart)
    list(APPEND DCT_GPU_LINK $<TARGET_OBJECTS:dct_nccl_transport> ${DCT_NCCL_LIBRARY})
    set(DCT_HAVE_NCCL 1)
    message(STATUS "dct: NCCL transport (${DCT_NCCL_LIBRARY})")
  else()
    message(STATUS "dct: no NCCL found (nccl.h, libnccl): GPU requests use MPI")
  endif()
endif()
if(NOT DCT_HAVE_NCCL)
  list(APPEND DCT_GPU_SOURCES backends/cuda/nccl_stub.cpp)
endif()

# --- HIP: hipcc as a custom command, rocPRIM ------------------------------------------------
# CMake's HIP language (3.21+) looks for hip-lang-config.cmake in <ROCm root>/lib/cmake, where
# Debian's packages do not put it (they use lib/x86_64-linux-gnu/cmake), so the HIP source is
# compiled by hipcc directly into one object file.
if(DCT_ENABLE_HIP)
  find_program(DCT_HIP_COMPILER hipcc HINTS $ENV{ROCM_PATH}/bin /opt/rocm/bin
               DOC "hipcc (Debian: apt install hipcc libamdhip64-dev librocprim-dev)")
  if(NOT DCT_HIP_COMPILER)
    message(FATAL_ERROR "DCT_ENABLE_HIP=ON needs hipcc (Debian: hipcc libamdhip64-dev "
                        "librocprim-dev); set DCT_HIP_COMPILER")
  endif()
  set(DCT_HIP_ARCHITECTURES gfx90a CACHE STRING "AMD GPU architectures (MI250X: gfx90a)")
  find_package(hip CONFIG REQUIRED)
  find_package(rocprim CONFIG REQUIRED)
  # -ffp-contract=off: the host backend's bits (hip-clang contracts a * b + c by default).
  set(_dct_hip_flags -std=c++17 -fPIC -fvisibility=hidden -fvisibility-inlines-hidden
      -ffp-contract=off
      -Wall -Wextra -Wpedantic -Wshadow -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX)
  foreach(_arch IN LISTS DCT_HIP_ARCHITECTURES)
    list(APPEND _dct_hip_flags --offload-arch=${_arch})
  endforeach()
  if(DCT_WERROR)
    list(APPEND _dct_hip_flags -Werror)
  endif()
  foreach(_dir ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include
          ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/backends)
    list(APPEND _dct_hip_flags -I${_dir})
  endforeach()
  foreach(_dir IN LISTS MPI_C_INCLUDE_DIRS)
    list(APPEND _dct_hip_flags -isystem ${_dir})
  endforeach()
  set(_dct_hip_object ${PROJECT_BINARY_DIR}/backends/hip/hip_kernels.hip.o)
  add_custom_command(
    OUTPUT ${_dct_hip_object}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/backends/hip
    COMMAND ${DCT_HIP_COMPILER} ${_dct_hip_flags}
            "$<IF:$<CONFIG:Debug>,-O0;-g,-O3;-DNDEBUG>"
            -c -x hip ${PROJECT_SOURCE_DIR}/backends/hip/hip_kernels.hip -o ${_dct_hip_object}
    DEPENDS backends/hip/hip_kernels.hip backends/hip/hip_api.hpp ${_dct_gpu_headers}
            ${PROJECT_BINARY_DIR}/include/dct/dct_config.h
    COMMENT "Building HIP object backends/hip/hip_kernels.hip.o (hipcc)"
    COMMAND_EXPAND_LISTS VERBATIM)
  add_custom_target(dct_hip_kernels DEPENDS ${_dct_hip_object})
  # hip::amdhip64, the runtime, not hip::host: Debian's hip::host also links clang 14's
  # libclang_rt.builtins, whose _Float16 conversions (__truncsfhf2) do not follow GCC 12's
  # calling convention, and override libgcc's for every host object (seen: GCC's float ->
  # _Float16 casts returned 0 in the unit tests).
  list(APPEND DCT_GPU_LINK ${_dct_hip_object} hip::amdhip64)
  list(APPEND DCT_GPU_DEPENDS dct_hip_kernels)
  set(DCT_HAVE_HIP 1)
else()
  list(APPEND DCT_GPU_SOURCES backends/hip/hip_stub.cpp)
  set(DCT_HAVE_HIP 0)
endif()
