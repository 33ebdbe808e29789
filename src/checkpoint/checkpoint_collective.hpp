// What a checkpoint save or load agrees on between ranks before any collective HDF5 call: the
// same file, the same requests, and the same outcome of every step (a failure on one rank ends
// in the same error on all, never in a rank waiting in a collective read or write).
//
// Private header of src/: include it from the checkpoint sources only.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dct::detail {

class CommContext;
class RequestEngine;

/// What a save or a load starts from: the communicator dct works on for `user_comm`, this
/// rank's place in it, and the live requests to save or load, sorted by name.
struct Collective {
  /// The file, spelled one way on every rank (canonical_path): what a save's pending check,
  /// temporary and rename use.
  std::string path;
  std::shared_ptr<CommContext> context;
  MPI_Comm comm;
  int rank;
  int ranks;
  std::vector<RequestEngine *> engines;  ///< the live requests with a state(), by name
  bool collective_rows;                  ///< DCT_CHECKPOINT_IO=collective, the same on every rank
  /// This rank's row checksums on a second thread (DCT_CHECKPOINT_CHECKSUM_THREAD; each
  /// rank's own: it changes no byte and no call another rank makes).
  bool checksum_thread;
};

/// The directory part of `path` ("." for a bare name, "/" for a file at the root).
std::string directory_of(const std::string &path);

/// The file `path` names, spelled one way: its directory resolved (realpath: `.`, `..`, `//`,
/// symbolic links, a relative path from the working directory) then its name, so that two
/// spellings of one file are one save (issue 61: `ck/a.h5` and `ck/./a.h5` were two saves at
/// once into one temporary, and the file that was there was lost). A directory that cannot be
/// resolved leaves `path` as it is: the save then fails where it did.
std::string canonical_path(const std::string &path);

/// Collective over `user_comm`: readies the library, finds dct's communicator (throws if MPI
/// was finalized), and agrees that every rank names the same `path` (then rank 0's
/// canonical_path of it is the file of every rank: Collective::path) and holds the
/// same live requests (names, counts, datatypes) and reads DCT_CHECKPOINT_IO alike: the collective
/// HDF5 calls that follow need every rank to open the same file and handle the same requests in the
/// same order, the same way. Throws the same error on every rank otherwise. Where
/// DCT_CHECKPOINT_CHECKSUM_THREAD is auto, a rank has a core to spare for its checksums when
/// it may run on two CPUs or more and its node has two or more per rank.
Collective open_collective(MPI_Comm user_comm, const std::string &path);

/// Runs `body` on every rank; if it failed anywhere, every rank throws the same error: the
/// highest code, with the message of the lowest rank that has it.
void run_agreed(MPI_Comm comm, const std::function<void()> &body);

/// Whether a checkpoint holds a residual for `engine` (a dense request keeps none).
bool has_residual(const RequestEngine &engine);
/// Whether `engine` keeps a momentum velocity (dct_momentum) that a checkpoint saves.
bool has_velocity(const RequestEngine &engine);
/// Whether `engine` keeps a last update (dct_momentum_result=gradient) that a checkpoint saves.
bool has_last_update(const RequestEngine &engine);

/// Open MPI before 5.0.10 (and 6.0.0) formats "<file name>.locktest.<rank>" into a 256-byte
/// stack buffer when its sharedfp/lockedfile component is considered at MPI_File_open, so a
/// long name aborts the process ("buffer overflow detected"; open-mpi/ompi#13565). HDF5's
/// MPI-IO driver opens the file through that path. dct never uses shared file pointers, so for
/// such a name it excludes the component (OMPI_MCA_sharedfp=^lockedfile, unless the variable
/// is set), which takes effect if Open MPI has not read the variable yet in this process; if
/// the component is still selectable, the name is refused with DCT_ERR_CKPT_IO, never opened.
void avoid_lockedfile_overflow(const std::string &name, int ranks);

}  // namespace dct::detail
