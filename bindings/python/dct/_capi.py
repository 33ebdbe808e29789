"""The C ABI (include/dct/dct.h) through ctypes: the library, its prototypes and its structs.

Private: the public names are in dct/__init__.py. Nothing here is compiled, so the package
works with any Python 3 that has ctypes, numpy and an mpi4py built against the MPI libdct
links (checked at import: two MPI libraries in one process would corrupt each other).
"""

import ctypes
import os

from mpi4py import MPI

from . import _location

# MPI's handles are pointers in Open MPI and ints in MPICH: take their C type from mpi4py,
# which was compiled against the MPI in use.
_HANDLE = {ctypes.sizeof(ctypes.c_void_p): ctypes.c_void_p,
           ctypes.sizeof(ctypes.c_int): ctypes.c_int}
MPI_Comm = _HANDLE[MPI._sizeof(MPI.Comm)]
MPI_Datatype = _HANDLE[MPI._sizeof(MPI.Datatype)]
MPI_Op = _HANDLE[MPI._sizeof(MPI.Op)]
MPI_Info = _HANDLE[MPI._sizeof(MPI.Info)]
MPI_Count = ctypes.c_int64
MPI_Aint = ctypes.c_ssize_t
DCT_Request = ctypes.c_void_p
DCT_Checkpoint = ctypes.c_void_p

DCT_STATUS_MAGIC = 0x44435453
DCT_MAX_ERROR_STRING = 256


class DCT_Status(ctypes.Structure):
    """`DCT_Status` as dct.h lays it out (tests/python checks the fields against dct.h)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("count", MPI_Count),
        ("nnz_sent", MPI_Count),
        ("nnz_received", MPI_Count),
        ("bytes_sent", MPI_Count),
        ("bytes_received", MPI_Count),
        ("dense_bytes", MPI_Count),
        ("tau", ctypes.c_double),
        ("density", ctypes.c_double),
        ("tau_reestimated", ctypes.c_int),
        ("algorithm", ctypes.c_int),
        ("calls", MPI_Count),
        ("total_bytes_sent", MPI_Count),
        ("total_dense_bytes", MPI_Count),
        ("compression_ratio", ctypes.c_double),
        ("max_abs_error", ctypes.c_double),
        ("nonfinite", MPI_Count),
    ]


def new_status(version_code):
    """A status with its header set, as DCT_STATUS_INITIALIZER sets it."""
    status = DCT_Status()
    status.size = ctypes.sizeof(DCT_Status)
    status.magic = DCT_STATUS_MAGIC
    status.version = version_code
    return status


# The sonames Open MPI (3 to 5) and MPICH give their C library, as a linked library names them,
# and the start of each one's MPI_Get_library_version.
_MPI_SONAMES = {"Open MPI": b"libmpi.so.40", "MPICH": b"libmpich.so."}


def _family_linked(path):
    """The MPI family `path` links (from its dynamic string table), or None if not known."""
    with open(path, "rb") as f:
        data = f.read()
    found = [family for family, soname in _MPI_SONAMES.items() if soname in data]
    return found[0] if len(found) == 1 else None


def _refuse_other_mpi(ours, path):
    theirs = MPI.Get_library_version().replace("\0", "").strip()  # mpi4py keeps the NUL
    if ours.splitlines()[0].strip() != theirs.splitlines()[0].strip():
        raise ImportError(
            "dct: libdct and mpi4py use different MPI libraries:\n"
            f"  libdct ({path}): {ours.splitlines()[0]}\n"
            f"  mpi4py ({MPI.__file__}): {theirs.splitlines()[0]}\n"
            "Use an mpi4py built for the MPI dct was built with (Debian's python3-mpi4py is "
            "built for Open MPI), or build dct with mpi4py's MPI.")


def _load():
    path = _location.library_path()
    if not os.path.exists(path):
        raise ImportError(
            f"dct: the library {path} does not exist; build dct (./quickstart.sh) or set "
            "DCT_LIBRARY to libdct.so's path")
    # Loading a library of another MPI beside mpi4py's crashes the process (its MPI symbols
    # bind to the MPI already loaded): look at what it links before loading it.
    family = _family_linked(path)
    if family is not None and not MPI.Get_library_version().startswith(family):
        _refuse_other_mpi(f"{family} (linked: {_MPI_SONAMES[family].decode()})", path)
    # RTLD_GLOBAL as mpi4py loads MPI: libdct's MPI must be the one already in the process.
    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


lib = _load()
_c = ctypes
_prototypes = {
    "DCT_Get_version": (_c.c_int, [_c.POINTER(_c.c_int)] * 3),
    "DCT_Algorithm_name": (_c.c_char_p, [_c.c_int]),
    "DCT_Backend_name": (_c.c_char_p, [_c.c_int]),
    "DCT_Backend_compiled": (_c.c_int, [_c.c_int, _c.POINTER(_c.c_int)]),
    "DCT_Allreduce_init": (_c.c_int, [_c.c_void_p, _c.c_void_p, MPI_Count, MPI_Datatype, MPI_Op,
                                      MPI_Comm, MPI_Info, _c.POINTER(DCT_Request)]),
    "DCT_Alltoallv_init_c": (_c.c_int, [_c.c_void_p, _c.POINTER(MPI_Count),
                                        _c.POINTER(MPI_Aint), _c.c_void_p,
                                        _c.POINTER(MPI_Count), _c.POINTER(MPI_Aint),
                                        MPI_Datatype, MPI_Comm, MPI_Info,
                                        _c.POINTER(DCT_Request)]),
    "DCT_Alltoallv_backward_init_c": (_c.c_int, [DCT_Request, _c.c_void_p,
                                                 _c.POINTER(MPI_Count), _c.POINTER(MPI_Aint),
                                                 _c.c_void_p, _c.POINTER(MPI_Count),
                                                 _c.POINTER(MPI_Aint), _c.POINTER(DCT_Request)]),
    "DCT_Start": (_c.c_int, [_c.POINTER(DCT_Request)]),
    "DCT_Wait": (_c.c_int, [_c.POINTER(DCT_Request), _c.POINTER(DCT_Status)]),
    "DCT_Test": (_c.c_int, [_c.POINTER(DCT_Request), _c.POINTER(_c.c_int),
                            _c.POINTER(DCT_Status)]),
    "DCT_Waitall": (_c.c_int, [_c.c_int, _c.POINTER(DCT_Request), _c.POINTER(DCT_Status)]),
    "DCT_Request_free": (_c.c_int, [_c.POINTER(DCT_Request)]),
    "DCT_Request_get_residual": (_c.c_int, [DCT_Request, _c.c_void_p]),
    "DCT_Request_get_info": (_c.c_int, [DCT_Request, _c.POINTER(MPI_Info)]),
    "DCT_Comm_get_info": (_c.c_int, [MPI_Comm, _c.POINTER(MPI_Info)]),
    "DCT_Request_set_stream": (_c.c_int, [DCT_Request, _c.c_void_p]),
    "DCT_Allreduce": (_c.c_int, [_c.c_void_p, _c.c_void_p, MPI_Count, MPI_Datatype, MPI_Op,
                                 MPI_Comm]),
    "DCT_Allreduce_status": (_c.c_int, [_c.c_void_p, MPI_Count, MPI_Datatype, MPI_Comm,
                                        _c.POINTER(DCT_Status)]),
    "DCT_Checkpoint_save": (_c.c_int, [MPI_Comm, _c.c_char_p]),
    "DCT_Checkpoint_load": (_c.c_int, [MPI_Comm, _c.c_char_p]),
    "DCT_Checkpoint_isave": (_c.c_int, [MPI_Comm, _c.c_char_p, _c.POINTER(DCT_Checkpoint)]),
    "DCT_Checkpoint_wait": (_c.c_int, [_c.POINTER(DCT_Checkpoint)]),
    "DCT_Error_string": (_c.c_int, [_c.c_int, _c.c_char_p, _c.POINTER(_c.c_int)]),
    "DCT_Get_last_error": (_c.c_char_p, []),
}
for _name, (_restype, _argtypes) in _prototypes.items():
    _function = getattr(lib, _name)
    _function.restype = _restype
    _function.argtypes = _argtypes


def _check_same_mpi():
    """Refuses to go on when libdct links another MPI than mpi4py's (the families _load could
    not tell apart: another vendor, another version)."""
    get_version = lib.MPI_Get_library_version  # resolved in libdct's own dependencies
    get_version.argtypes = [_c.c_char_p, _c.POINTER(_c.c_int)]
    text = _c.create_string_buffer(MPI.MAX_LIBRARY_VERSION_STRING + 1)
    length = _c.c_int(0)
    get_version(text, _c.byref(length))
    _refuse_other_mpi(text.value.decode(errors="replace").strip(), _location.library_path())


_check_same_mpi()


def handle(obj):
    """The C handle of an mpi4py object (communicator, datatype, op, info)."""
    return MPI._handleof(obj)


# The C value of MPI_IN_PLACE in this MPI (1 in Open MPI, -1 in MPICH) as an address.
IN_PLACE = int(MPI.IN_PLACE) % (1 << (8 * ctypes.sizeof(ctypes.c_void_p)))
