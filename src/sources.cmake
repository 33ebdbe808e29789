# The library's sources, folder by folder (docs/internals.md has the picture). A folder may
# include its own headers and those of the folders below it, never above:
#   api, pmpi  ->  checkpoint, dp, mp  ->  core
# (checkpoint, dp and mp do not include each other). cmake/check_layout.cmake checks every
# include of src/ and backends/ against this order (ctest layout.includes).
#
# Sources holding test hooks (core/test_hooks.hpp, under DCT_TESTING) are listed apart: the
# release objects compile them once, the test build (dct_testing) once more with the hooks.
set(DCT_CORE_SOURCES
  src/core/agreement.cpp
  src/core/comm_context.cpp
  src/core/config.cpp
  src/core/cost_model.cpp
  src/core/drop_in_states.cpp
  src/core/elias_fano.cpp
  src/core/environment.cpp
  src/core/peer_headers.cpp
  src/core/progress.cpp
  src/core/request_engine.cpp
  src/core/request_table.cpp
  src/core/wire.cpp)
# Which backend runs a call: tests stand the host emulation of the GPU code in for CUDA.
set(DCT_CORE_HOOKED_SOURCES src/core/compute_backend.cpp)
set(DCT_DP_SOURCES
  src/dp/allreduce_args.cpp
  src/dp/call_message.cpp
  src/dp/connect_agreement.cpp
  src/dp/exchange/allgather.cpp
  src/dp/exchange/dense.cpp
  src/dp/exchange/exchange.cpp
  src/dp/exchange/exchange_set.cpp
  src/dp/exchange/hierarchical.cpp
  src/dp/exchange/recursive_doubling.cpp
  src/dp/exchange/split.cpp
  src/dp/exchange/split_owner_on_device.cpp
  src/dp/gradient_compressor.cpp
  src/dp/passthrough.cpp
  src/dp/threshold.cpp)
set(DCT_DP_HOOKED_SOURCES src/dp/allreduce.cpp)
set(DCT_MP_SOURCES
  src/mp/alltoallv_backward.cpp
  src/mp/alltoallv_init.cpp
  src/mp/alltoallv_validate.cpp
  src/mp/error_bounded_codec.cpp
  src/mp/error_bounded_coders.cpp
  src/mp/forward_headers.cpp
  src/mp/row_codec.cpp)
set(DCT_MP_HOOKED_SOURCES src/mp/alltoallv.cpp src/mp/alltoallv_exchange.cpp
    src/mp/error_bounded.cpp)
if(DCT_ENABLE_HDF5)
  # The writers hold test hooks (a crash or a failure halfway through a save); the rest none.
  set(DCT_CHECKPOINT_SOURCES src/checkpoint/checkpoint_collective.cpp
      src/checkpoint/checkpoint_format.cpp src/checkpoint/checkpoint_load.cpp
      src/checkpoint/checkpoint_pieces.cpp src/checkpoint/checkpoint_reader.cpp
      src/checkpoint/checkpoint_seal.cpp)
  set(DCT_CHECKPOINT_HOOKED_SOURCES src/checkpoint/checkpoint_save.cpp
      src/checkpoint/checkpoint_pending.cpp)
else()
  set(DCT_CHECKPOINT_SOURCES src/checkpoint/checkpoint_disabled.cpp)
  set(DCT_CHECKPOINT_HOOKED_SOURCES "")
endif()
set(DCT_API_SOURCES src/api/c_api.cpp src/api/c_api_mp.cpp)
set(DCT_TEST_HOOK_SOURCES src/core/test_hooks.cpp)
