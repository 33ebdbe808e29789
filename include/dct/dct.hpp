/**
 * @file dct.hpp
 * @brief Thin C++17 layer over dct.h: exceptions instead of codes, RAII requests, datatypes
 * deduced from the element type. Header-only; it adds no state of its own.
 */
#ifndef DCT_HPP
#define DCT_HPP

#include <array>
#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dct/dct.h"

namespace dct {

/** @brief A failed dct call: `code()` is the `DCT_Error`, `what()` the detailed message. */
class Error : public std::runtime_error {
 public:
  Error(int code, const std::string &message) : std::runtime_error(message), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/** @brief Throws dct::Error with `DCT_Get_last_error()` unless `code` is `DCT_SUCCESS`. */
inline void check(int code) {
  if (code != DCT_SUCCESS) throw Error(code, DCT_Get_last_error());
}

/** @brief The MPI datatype of `float` or `double`. */
template <typename T>
MPI_Datatype mpi_datatype() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "dct compresses float and double tensors");
  return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

/** @brief Drop-in compressed reduction over `comm` of `count` elements (see DCT_Allreduce:
 * `MPI_SUM` is compressed, any other op goes to MPI unchanged). */
template <typename T>
void allreduce(const T *send, T *recv, std::size_t count, MPI_Comm comm, MPI_Op op = MPI_SUM) {
  check(DCT_Allreduce(send, recv, static_cast<MPI_Count>(count), mpi_datatype<T>(), op, comm));
}

/** @brief The status of the drop-in state of (recv, count) on `comm` (DCT_Allreduce_status). */
template <typename T>
DCT_Status allreduce_status(const T *recv, std::size_t count, MPI_Comm comm) {
  DCT_Status status;
  check(
      DCT_Allreduce_status(recv, static_cast<MPI_Count>(count), mpi_datatype<T>(), comm, &status));
  return status;
}

/** @brief The library's version {major, minor, patch} (DCT_Get_version). */
inline std::array<int, 3> version() {
  std::array<int, 3> v{};
  check(DCT_Get_version(&v[0], &v[1], &v[2]));
  return v;
}

/** @brief The text of an error code (DCT_Error_string). */
inline std::string error_string(int code) {
  char text[256] = {};
  int length = 0;
  check(DCT_Error_string(code, text, &length));
  return std::string(text, static_cast<std::size_t>(length));
}

/** @brief Names as the configuration keys spell them (DCT_Algorithm_name, DCT_Backend_name). */
inline std::string algorithm_name(int algorithm) {
  return DCT_Algorithm_name(algorithm);
}
inline std::string backend_name(int backend) {
  return DCT_Backend_name(backend);
}

/** @brief Whether this build contains `backend` (DCT_Backend_compiled). */
inline bool backend_compiled(int backend) {
  int compiled = 0;
  check(DCT_Backend_compiled(backend, &compiled));
  return compiled != 0;
}

/** @brief Saves every live persistent request on `comm` (see DCT_Checkpoint_save). */
inline void checkpoint_save(MPI_Comm comm, const std::string &path) {
  check(DCT_Checkpoint_save(comm, path.c_str()));
}

/** @brief Restores every live persistent request on `comm` (see DCT_Checkpoint_load). */
inline void checkpoint_load(MPI_Comm comm, const std::string &path) {
  check(DCT_Checkpoint_load(comm, path.c_str()));
}

/**
 * @brief An asynchronous checkpoint save (DCT_Checkpoint_isave): started by the constructor,
 * completed by wait(), collective over the communicator both times. The destructor of a save
 * not waited waits (collectively, errors ignored): call wait() to see them. Not copyable.
 */
class CheckpointSave {
 public:
  CheckpointSave(MPI_Comm comm, const std::string &path) {
    check(DCT_Checkpoint_isave(comm, path.c_str(), &save_));
  }
  ~CheckpointSave() {
    if (save_ != DCT_CHECKPOINT_NULL) DCT_Checkpoint_wait(&save_);
  }
  CheckpointSave(const CheckpointSave &) = delete;
  CheckpointSave &operator=(const CheckpointSave &) = delete;
  /** @brief Whether the save is still to be waited. */
  bool pending() const { return save_ != DCT_CHECKPOINT_NULL; }
  /** @brief DCT_Checkpoint_wait: the file takes its name (throws dct::Error on failure). */
  void wait() { check(DCT_Checkpoint_wait(&save_)); }

 private:
  DCT_Checkpoint save_ = DCT_CHECKPOINT_NULL;
};

/**
 * @brief Owns an `MPI_Info` (created empty, freed with the object) to hand dct its
 * configuration keys: `dct::Info info; info.set("dct_density", "0.01");` then `info.get()`.
 * Not copyable.
 */
class Info {
 public:
  Info() { MPI_Info_create(&info_); }
  /** @brief Takes ownership of `info` (e.g. what Request::info() returns). */
  explicit Info(MPI_Info adopted) noexcept : info_(adopted) {}
  ~Info() { MPI_Info_free(&info_); }
  Info(const Info &) = delete;
  Info &operator=(const Info &) = delete;
  /** @brief Sets `key` to `value` (MPI_Info_set); returns *this to chain. */
  Info &set(const char *key, const std::string &value) {
    MPI_Info_set(info_, key, value.c_str());
    return *this;
  }
  MPI_Info get() const noexcept { return info_; }
  /** @brief The value of `key`, or "" when the key is not set. */
  std::string value(const char *key) const {
    int length = 0, present = 0;
    MPI_Info_get_valuelen(info_, key, &length, &present);
    if (!present) return std::string();
    std::string text(static_cast<std::size_t>(length) + 1, '\0');
    MPI_Info_get(info_, key, length, &text[0], &present);
    text.resize(static_cast<std::size_t>(length));
    return text;
  }

 private:
  MPI_Info info_;
};

/** @brief The drop-in configuration of `comm` (DCT_Comm_get_info). */
inline Info comm_info(MPI_Comm comm) {
  MPI_Info info = MPI_INFO_NULL;
  check(DCT_Comm_get_info(comm, &info));
  return Info(info);
}

/**
 * @brief Owns a persistent dct request (freed with DCT_Request_free); the operations common to
 * every kind. Movable, not copyable.
 */
class Request {
 public:
  /** A request destroyed while started is completed first (DCT_Wait: its peers complete the
   * same call), then freed; a failure there is reported on stderr, never leaked silently. */
  ~Request() {
    if (request_ == DCT_REQUEST_NULL) return;
    int code = DCT_Request_free(&request_);
    if (code == DCT_ERR_ACTIVE) {
      code = DCT_Wait(&request_, DCT_STATUS_IGNORE);
      if (code == DCT_SUCCESS) code = DCT_Request_free(&request_);
    }
    if (code != DCT_SUCCESS)
      std::fprintf(stderr, "dct: ~Request could not free its request: %s\n", DCT_Get_last_error());
  }
  Request(const Request &) = delete;
  Request &operator=(const Request &) = delete;
  Request(Request &&other) noexcept : request_(other.request_) {
    other.request_ = DCT_REQUEST_NULL;
  }
  Request &operator=(Request &&other) noexcept {
    std::swap(request_, other.request_);
    return *this;
  }

  void start() { check(DCT_Start(&request_)); }
  DCT_Status wait() {
    DCT_Status status;
    check(DCT_Wait(&request_, &status));
    return status;
  }
  /** @brief Progresses every call in flight; true once this one completed (`status`, if
   * given, is then filled). */
  bool test(DCT_Status *status = nullptr) {
    int flag = 0;
    check(DCT_Test(&request_, &flag, status));
    return flag != 0;
  }
  /** @brief The GPU stream (`cudaStream_t` / `hipStream_t`) of later calls
   * (DCT_Request_set_stream). */
  void set_stream(void *stream) { check(DCT_Request_set_stream(request_, stream)); }
  /** @brief This rank's residual, into `count` elements of the request's type at `residual`
   * (DCT_Request_get_residual). */
  template <typename T>
  void get_residual(T *residual) const {
    check(DCT_Request_get_residual(request_, residual));
  }
  /** @brief Every key in force for this request (DCT_Request_get_info). */
  Info info() const {
    MPI_Info info = MPI_INFO_NULL;
    check(DCT_Request_get_info(request_, &info));
    return Info(info);
  }
  /** @brief Completes every request of `requests`, in whatever order they finish
   * (DCT_Waitall); their statuses in the same order. */
  static std::vector<DCT_Status> waitall(const std::vector<Request *> &requests) {
    std::vector<DCT_Request> handles;
    for (const Request *request : requests) handles.push_back(request->request_);
    std::vector<DCT_Status> statuses(requests.size());
    check(DCT_Waitall(static_cast<int>(handles.size()), handles.data(), statuses.data()));
    for (std::size_t i = 0; i < requests.size(); ++i) requests[i]->request_ = handles[i];
    return statuses;
  }
  /** @brief start() then wait(). */
  DCT_Status operator()() {
    start();
    return wait();
  }
  DCT_Request handle() const noexcept { return request_; }

 protected:
  Request() = default;
  DCT_Request request_ = DCT_REQUEST_NULL;
};

/** @brief Owns a persistent compressed allreduce (DCT_Allreduce_init ... DCT_Request_free). */
class AllreduceRequest : public Request {
 public:
  /** @brief `send` may be nullptr for in-place (the sum replaces `recv`). */
  template <typename T>
  AllreduceRequest(const T *send, T *recv, std::size_t count, MPI_Comm comm,
                   MPI_Info info = MPI_INFO_NULL, MPI_Op op = MPI_SUM) {
    check(DCT_Allreduce_init(send ? static_cast<const void *>(send) : MPI_IN_PLACE, recv,
                             static_cast<MPI_Count>(count), mpi_datatype<T>(), op, comm, info,
                             &request_));
  }
};

/**
 * @brief Owns a DCT-MP request: a compressed alltoallv (DCT_Alltoallv_init) or its backward
 * (DCT_Alltoallv_backward_init). Counts and displacements in elements, one per rank of the
 * communicator (copied by the library); `info` must give `dct_row_length`. Counts and
 * displacements come as `int` (the MPI-3 form) or as `MPI_Count` and `MPI_Aint` (the
 * large-count form, DCT_Alltoallv_init_c), in arrays or in vectors; a vector whose length is
 * not the number of ranks throws `DCT_ERR_COUNT` before anything is created.
 */
class AlltoallvRequest : public Request {
 public:
  template <typename T>
  AlltoallvRequest(const T *send, const int *sendcounts, const int *sdispls, T *recv,
                   const int *recvcounts, const int *rdispls, MPI_Comm comm, MPI_Info info)
      : ranks_(ranks_of(comm)) {
    check(DCT_Alltoallv_init(send, sendcounts, sdispls, recv, recvcounts, rdispls,
                             mpi_datatype<T>(), comm, info, &request_));
  }
  /** @brief The large-count form (DCT_Alltoallv_init_c). */
  template <typename T>
  AlltoallvRequest(const T *send, const MPI_Count *sendcounts, const MPI_Aint *sdispls, T *recv,
                   const MPI_Count *recvcounts, const MPI_Aint *rdispls, MPI_Comm comm,
                   MPI_Info info)
      : ranks_(ranks_of(comm)) {
    check(DCT_Alltoallv_init_c(send, sendcounts, sdispls, recv, recvcounts, rdispls,
                               mpi_datatype<T>(), comm, info, &request_));
  }
  /** @brief Either form, from vectors of one entry per rank of `comm`. */
  template <typename T, typename Count, typename Displ>
  AlltoallvRequest(const T *send, const std::vector<Count> &sendcounts,
                   const std::vector<Displ> &sdispls, T *recv, const std::vector<Count> &recvcounts,
                   const std::vector<Displ> &rdispls, MPI_Comm comm, MPI_Info info)
      : AlltoallvRequest(
            send, entries(sendcounts, ranks_of(comm)), entries(sdispls, ranks_of(comm)), recv,
            entries(recvcounts, ranks_of(comm)), entries(rdispls, ranks_of(comm)), comm, info) {}

  /** @brief The backward of `forward`: its send blocks have the forward's receive shapes. */
  template <typename T>
  static AlltoallvRequest backward(const AlltoallvRequest &forward, const T *send,
                                   const int *sendcounts, const int *sdispls, T *recv,
                                   const int *recvcounts, const int *rdispls) {
    AlltoallvRequest request(forward.ranks_);
    check(DCT_Alltoallv_backward_init(forward.request_, send, sendcounts, sdispls, recv, recvcounts,
                                      rdispls, &request.request_));
    return request;
  }
  /** @brief The backward, large-count form (DCT_Alltoallv_backward_init_c). */
  template <typename T>
  static AlltoallvRequest backward(const AlltoallvRequest &forward, const T *send,
                                   const MPI_Count *sendcounts, const MPI_Aint *sdispls, T *recv,
                                   const MPI_Count *recvcounts, const MPI_Aint *rdispls) {
    AlltoallvRequest request(forward.ranks_);
    check(DCT_Alltoallv_backward_init_c(forward.request_, send, sendcounts, sdispls, recv,
                                        recvcounts, rdispls, &request.request_));
    return request;
  }
  /** @brief The backward, either form, from vectors of one entry per rank. */
  template <typename T, typename Count, typename Displ>
  static AlltoallvRequest backward(const AlltoallvRequest &forward, const T *send,
                                   const std::vector<Count> &sendcounts,
                                   const std::vector<Displ> &sdispls, T *recv,
                                   const std::vector<Count> &recvcounts,
                                   const std::vector<Displ> &rdispls) {
    const int ranks = forward.ranks_;
    return backward(forward, send, entries(sendcounts, ranks), entries(sdispls, ranks), recv,
                    entries(recvcounts, ranks), entries(rdispls, ranks));
  }

 private:
  explicit AlltoallvRequest(int ranks) : ranks_(ranks) {}
  /** Ranks of `comm`, or -1 for MPI_COMM_NULL (the library reports it). */
  static int ranks_of(MPI_Comm comm) {
    int ranks = -1;
    if (comm != MPI_COMM_NULL) MPI_Comm_size(comm, &ranks);
    return ranks;
  }
  template <typename V>
  static const V *entries(const std::vector<V> &values, int ranks) {
    if (ranks >= 0 && values.size() != static_cast<std::size_t>(ranks))
      throw Error(DCT_ERR_COUNT, "dct::AlltoallvRequest: a vector of " +
                                     std::to_string(values.size()) + " entries for " +
                                     std::to_string(ranks) + " ranks");
    return values.data();
  }
  int ranks_ = -1;  ///< of the communicator (-1: unknown)
};

}  // namespace dct

#endif /* DCT_HPP */
