// Each enum knob's names, written once, in the order a refusal lists them: config.cpp's parsers
// and its `*_name` functions both read these tables (choices.hpp).
#pragma once

#include "core/choices.hpp"
#include "core/config.hpp"
#include "dct/dct.h"

namespace dct::detail::knob_names {

inline constexpr Spelling<TauControl> tau_control_names[] = {{"adaptive", TauControl::adaptive},
                                                             {"fixed", TauControl::fixed}};
inline constexpr Choices<TauControl> tau_controls(tau_control_names, Listing::or_last);

inline constexpr Spelling<MomentumResult> momentum_result_names[] = {
    {"update", MomentumResult::update}, {"gradient", MomentumResult::gradient}};
inline constexpr Choices<MomentumResult> momentum_results(momentum_result_names, Listing::or_last);

inline constexpr Spelling<DCT_Algorithm> algorithm_names[] = {
    {"auto", DCT_ALGORITHM_AUTO},
    {"allgather", DCT_ALGORITHM_ALLGATHER},
    {"split", DCT_ALGORITHM_SPLIT},
    {"hierarchical", DCT_ALGORITHM_HIERARCHICAL},
    {"recursive_doubling", DCT_ALGORITHM_RECURSIVE_DOUBLING},
    {"dense", DCT_ALGORITHM_DENSE},
    {"passthrough", DCT_ALGORITHM_PASSTHROUGH, false}};
inline constexpr Choices<DCT_Algorithm> algorithms(algorithm_names, Listing::one_of);

inline constexpr Spelling<DCT_Backend> backend_names[] = {{"auto", DCT_BACKEND_AUTO},
                                                          {"kokkos", DCT_BACKEND_KOKKOS},
                                                          {"cuda", DCT_BACKEND_CUDA},
                                                          {"hip", DCT_BACKEND_HIP}};
inline constexpr Choices<DCT_Backend> backends(backend_names, Listing::one_of);

// A coding the table lacks (never one of a Config) is shown as native.
inline constexpr Spelling<ValueCoding> value_coding_names[] = {{"native", ValueCoding::native},
                                                               {"fp16", ValueCoding::fp16},
                                                               {"bf16", ValueCoding::bf16},
                                                               {"sign", ValueCoding::sign}};
inline constexpr Choices<ValueCoding> value_codings(value_coding_names, Listing::one_of, "native");

inline constexpr Spelling<Transport> transport_names[] = {
    {"auto", Transport::automatic}, {"mpi", Transport::mpi}, {"nccl", Transport::nccl}};
inline constexpr Choices<Transport> transports(transport_names, Listing::one_of);

inline constexpr Spelling<bool> threshold_names[] = {{"exact", false}, {"sampled", true}};
inline constexpr Choices<bool> thresholds(threshold_names, Listing::or_last);

inline constexpr Spelling<bool> restart_names[] = {{"strict", false}, {"redistribute", true}};
inline constexpr Choices<bool> restarts(restart_names, Listing::or_last);

inline constexpr Spelling<MpSelect> mp_select_names[] = {
    {"exact", MpSelect::exact}, {"laplace", MpSelect::laplace}, {"threshold", MpSelect::threshold}};
inline constexpr Choices<MpSelect> mp_selects(mp_select_names, Listing::or_last);

inline constexpr Spelling<MpCompressor> mp_compressor_names[] = {
    {"topk", MpCompressor::topk}, {"error_bounded", MpCompressor::error_bounded}};
inline constexpr Choices<MpCompressor> mp_compressors(mp_compressor_names, Listing::or_last);

inline constexpr Spelling<LosslessChoice> lossless_names[] = {{"auto", LosslessChoice::automatic},
                                                              {"none", LosslessChoice::none},
                                                              {"lz4", LosslessChoice::lz4},
                                                              {"zstd", LosslessChoice::zstd}};
inline constexpr Choices<LosslessChoice> losslesses(lossless_names, Listing::or_last);

inline constexpr Spelling<bool> flag_names[] = {{"0", false}, {"1", true}};
inline constexpr Choices<bool> flags(flag_names, Listing::or_last);

inline constexpr Spelling<bool> checkpoint_io_names[] = {{"independent", false},
                                                         {"collective", true}};
inline constexpr Choices<bool> checkpoint_ios(checkpoint_io_names, Listing::or_last);

using ChecksumThread = Config::ChecksumThread;
inline constexpr Spelling<ChecksumThread> checksum_thread_names[] = {
    {"auto", ChecksumThread::automatic}, {"on", ChecksumThread::on}, {"off", ChecksumThread::off}};
inline constexpr Choices<ChecksumThread> checksum_threads(checksum_thread_names, Listing::or_last);

}  // namespace dct::detail::knob_names
