"""dct from Python: compressed collectives over mpi4py communicators.

A thin layer over dct's C ABI (include/dct/dct.h, which documents every call and key): the
same persistent requests, error feedback, statuses and checkpoints, with

- communicators, datatypes and ops as mpi4py objects (``MPI.COMM_WORLD``, ``MPI.SUM``);
- buffers as anything that exposes its memory: numpy arrays, CPU torch tensors, objects with
  the buffer protocol (C-contiguous); CUDA torch tensors by device pointer where libdct was
  built with CUDA. The datatype comes from the buffer (float32 -> MPI_FLOAT, float64 ->
  MPI_DOUBLE are compressed; other types are handed to MPI, as the C API does);
- configuration keys as keyword arguments without their ``dct_`` prefix (``density=0.01``,
  ``momentum=0.9``, ``values="fp16"``; docs/configuration.md lists them);
- errors raised as :class:`dct.Error`, carrying dct's code and message.

A persistent request binds its buffers: keep them alive and do not reallocate them while the
request lives (the request object keeps a reference to each).

    from mpi4py import MPI
    import numpy as np, dct

    grad = np.random.rand(1 << 20).astype(np.float32)
    out = np.empty_like(grad)
    with dct.allreduce_init(grad, out, MPI.COMM_WORLD, density=0.01) as request:
        for step in range(100):
            grad[:] = ...                     # this step's gradient
            request.start()
            status = request.wait()           # out = compressed sum over ranks
    print(status.total_dense_bytes / status.total_bytes_sent, "x fewer bytes")
"""

import ctypes
import dataclasses

import numpy as np
from mpi4py import MPI

from . import _capi
from ._capi import lib as _lib

__all__ = ["Error", "Status", "Request", "IN_PLACE", "allreduce_init", "alltoallv_init",
           "allreduce", "allreduce_status", "comm_get_info", "waitall", "checkpoint_save",
           "checkpoint_isave", "CheckpointSave", "checkpoint_load", "version", "backend_compiled",
           "error_name", "ERROR_NAMES"]

#: Pass as ``sendbuf`` to reduce ``recvbuf`` in place (MPI_IN_PLACE).
IN_PLACE = MPI.IN_PLACE

#: dct's return codes by value (``DCT_Error`` in dct.h; tests/python checks the list).
ERROR_NAMES = {
    0: "DCT_SUCCESS", 1: "DCT_ERR_ARG", 2: "DCT_ERR_BUFFER", 3: "DCT_ERR_COUNT",
    4: "DCT_ERR_DATATYPE", 5: "DCT_ERR_OP", 6: "DCT_ERR_COMM", 7: "DCT_ERR_INFO",
    8: "DCT_ERR_REQUEST", 9: "DCT_ERR_ACTIVE", 10: "DCT_ERR_MPI", 11: "DCT_ERR_PEER",
    12: "DCT_ERR_MISMATCH", 13: "DCT_ERR_NO_MEMORY", 14: "DCT_ERR_NOT_INITIALIZED",
    15: "DCT_ERR_NOT_COMPILED", 16: "DCT_ERR_INTERNAL", 17: "DCT_ERR_CKPT_NOT_FOUND",
    18: "DCT_ERR_CKPT_FORMAT", 19: "DCT_ERR_CKPT_VERSION", 20: "DCT_ERR_CKPT_MISMATCH",
    21: "DCT_ERR_CKPT_CHECKSUM", 22: "DCT_ERR_CKPT_TRUNCATED", 23: "DCT_ERR_CKPT_IO",
    24: "DCT_ERR_THREAD",
}
for _code, _name in ERROR_NAMES.items():
    globals()[_name[4:]] = _code  # dct.ERR_ARG == 1, ...
    __all__.append(_name[4:])


def error_name(code):
    """``"DCT_ERR_ARG"`` for 1, and so on."""
    return ERROR_NAMES.get(code, f"unknown code {code}")


class Error(RuntimeError):
    """A dct call failed. ``code`` is the ``DCT_ERR_*`` value (``dct.ERR_INFO`` ...), ``name``
    its name, ``message`` dct's detailed message (``DCT_Get_last_error``)."""

    def __init__(self, code, message):
        self.code = code
        self.name = error_name(code)
        self.message = message
        super().__init__(f"{self.name}: {message}")


def _check(code):
    if code != 0:
        message = _lib.DCT_Get_last_error().decode(errors="replace")
        if not message:
            text = ctypes.create_string_buffer(_capi.DCT_MAX_ERROR_STRING)
            length = ctypes.c_int(0)
            _lib.DCT_Error_string(code, text, ctypes.byref(length))
            message = text.value.decode(errors="replace")
        raise Error(code, message)


def version():
    """The version of the libdct in use, as (major, minor, patch)."""
    numbers = [ctypes.c_int(0) for _ in range(3)]
    _check(_lib.DCT_Get_version(*(ctypes.byref(n) for n in numbers)))
    return tuple(n.value for n in numbers)


_VERSION_CODE = (lambda v: v[0] * 10000 + v[1] * 100 + v[2])(version())
_BACKENDS = {"auto": 0, "kokkos": 1, "cuda": 2, "hip": 3}


def backend_compiled(backend):
    """Whether libdct was built with ``backend`` ("kokkos", "cuda", "hip")."""
    compiled = ctypes.c_int(0)
    _check(_lib.DCT_Backend_compiled(_BACKENDS[backend], ctypes.byref(compiled)))
    return bool(compiled.value)


@dataclasses.dataclass(frozen=True)
class Status:
    """What one completed call did (``DCT_Status`` in dct.h, which documents each field)."""

    count: int
    nnz_sent: int
    nnz_received: int
    bytes_sent: int
    bytes_received: int
    dense_bytes: int
    tau: float
    density: float
    tau_reestimated: bool
    algorithm: str
    calls: int
    total_bytes_sent: int
    total_dense_bytes: int
    compression_ratio: float
    max_abs_error: float

    @classmethod
    def _from_c(cls, status):
        values = {f.name: getattr(status, f.name) for f in dataclasses.fields(cls)}
        values["tau_reestimated"] = bool(status.tau_reestimated)
        values["algorithm"] = _lib.DCT_Algorithm_name(status.algorithm).decode()
        return cls(**values)


# --- buffers ----------------------------------------------------------------------------------

class _Buffer:
    """A buffer's address, element count and MPI datatype; ``owner`` keeps its memory alive."""

    def __init__(self, obj, writable, name):
        self.owner = obj
        self.device = False
        if _is_torch_tensor(obj):
            if not obj.is_contiguous():
                raise TypeError(f"dct: {name} is a non-contiguous tensor; pass .contiguous()")
            self.address = obj.data_ptr()
            self.count = obj.numel()
            try:
                self.dtype = np.dtype(str(obj.dtype).replace("torch.", ""))
            except TypeError:  # bfloat16, complex32, quantised types: no numpy (nor MPI) type
                raise TypeError(f"dct: {name} has dtype {obj.dtype}, which MPI has no datatype "
                                "for") from None
            self.device = obj.device.type != "cpu"
            if self.device and not (backend_compiled("cuda") or backend_compiled("hip")):
                raise TypeError(f"dct: {name} is on {obj.device}, but this libdct was built "
                                "without a GPU backend")
        else:
            try:
                array = obj if isinstance(obj, np.ndarray) else np.asarray(memoryview(obj))
            except TypeError:
                raise TypeError(f"dct: {name} ({type(obj).__name__}) does not expose its "
                                "memory; pass a numpy array, a torch tensor or a buffer") from None
            if not array.flags.c_contiguous:
                raise TypeError(f"dct: {name} is not C-contiguous; pass np.ascontiguousarray()")
            if writable and not array.flags.writeable:
                raise TypeError(f"dct: {name} is read-only")
            self.address = array.ctypes.data
            self.count = array.size
            self.dtype = array.dtype
        try:
            self.datatype = MPI._typedict[self.dtype.char]
        except KeyError:
            raise TypeError(f"dct: {name} has dtype {self.dtype}, which MPI has no datatype "
                            "for") from None


def _is_torch_tensor(obj):
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def _info(keys):
    """An MPI.Info of ``dct_*`` keys from keyword arguments (the caller frees it)."""
    info = MPI.Info.Create()
    for key, value in keys.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, float):
            value = repr(value)  # shortest text that reads back to the same double
        elif isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        info.Set(key if key.startswith("dct_") else "dct_" + key, str(value))
    return info


def _info_dict(handle):
    """The keys of a C MPI_Info handle dct returned, as a dict; frees the info."""
    info = MPI.Info()
    _capi.MPI_Info.from_address(MPI._addressof(info)).value = handle
    try:
        return {info.Get_nthkey(i): info.Get(info.Get_nthkey(i)) for i in range(info.Get_nkeys())}
    finally:
        info.Free()


# --- requests ---------------------------------------------------------------------------------


class Request:
    """A persistent compressed collective (``DCT_Request``): ``start()``, then ``wait()`` or
    ``test()``; ``free()`` (or a ``with`` block) releases it and its residual."""

    def __init__(self, handle, buffers, count, dtype, comm):
        self._handle = handle
        self._buffers = buffers  # the bound memory stays alive as long as the request
        self.count = count
        self.dtype = dtype
        self.comm = comm

    def _ref(self):
        if not self._handle:
            raise Error(8, "dct: the request was freed")  # DCT_ERR_REQUEST
        return ctypes.byref(self._handle)

    def start(self):
        """Compresses ``sendbuf`` into the exchange and posts it (``DCT_Start``)."""
        _check(_lib.DCT_Start(self._ref()))

    def wait(self):
        """Completes the call (``DCT_Wait``): ``recvbuf`` holds the result. Returns a Status."""
        status = _capi.new_status(_VERSION_CODE)
        _check(_lib.DCT_Wait(self._ref(), ctypes.byref(status)))
        return Status._from_c(status)

    def test(self):
        """Progresses every call in flight once (``DCT_Test``): the Status when this one
        completed, else None."""
        status = _capi.new_status(_VERSION_CODE)
        flag = ctypes.c_int(0)
        _check(_lib.DCT_Test(self._ref(), ctypes.byref(flag), ctypes.byref(status)))
        return Status._from_c(status) if flag.value else None

    def residual(self, out=None):
        """This rank's residual (mass not sent yet): a new numpy array, or written into ``out``
        (any buffer of ``count`` elements of the request's dtype)."""
        if out is None:
            out = np.empty(self.count, dtype=self.dtype)
        buffer = _Buffer(out, True, "out")
        if buffer.count != self.count or buffer.dtype != self.dtype:
            raise TypeError(f"dct: out must hold {self.count} elements of {self.dtype}")
        _check(_lib.DCT_Request_get_residual(self._handle, ctypes.c_void_p(buffer.address)))
        return out

    @property
    def info(self):
        """Every key in force for this request and its value (``DCT_Request_get_info``)."""
        handle = _capi.MPI_Info()
        _check(_lib.DCT_Request_get_info(self._handle, ctypes.byref(handle)))
        return _info_dict(handle.value)

    def set_stream(self, stream):
        """The CUDA/HIP stream (an integer handle, e.g. ``torch.cuda.current_stream().cuda_stream``)
        the request's kernels run on from its next start."""
        _check(_lib.DCT_Request_set_stream(self._handle, ctypes.c_void_p(stream)))

    def backward_init(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls):
        """The backward request of this DCT-MP forward (``DCT_Alltoallv_backward_init_c``)."""
        send = _Buffer(sendbuf, False, "sendbuf")
        recv = _Buffer(recvbuf, True, "recvbuf")
        arrays = _counts(sendcounts, sdispls, recvcounts, rdispls, self.comm)
        handle = _capi.DCT_Request()
        _check(_lib.DCT_Alltoallv_backward_init_c(
            self._handle, ctypes.c_void_p(send.address), *arrays[:2],
            ctypes.c_void_p(recv.address), *arrays[2:], ctypes.byref(handle)))
        return Request(handle, (send, recv, arrays, self), recv.count, recv.dtype, self.comm)

    def free(self):
        """Frees the request and its residual (``DCT_Request_free``); idempotent."""
        if self._handle:
            _check(_lib.DCT_Request_free(ctypes.byref(self._handle)))
            self._buffers = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __del__(self):
        # DCT_Request_free is callable after MPI_Finalize; never raise from a finaliser.
        try:
            if self._handle:
                _lib.DCT_Request_free(ctypes.byref(self._handle))
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def allreduce_init(sendbuf, recvbuf, comm=None, op=None, **keys):
    """A persistent compressed allreduce (``DCT_Allreduce_init``), collective over ``comm``
    (default ``MPI.COMM_WORLD``). ``sendbuf`` may be :data:`IN_PLACE`; ``op`` defaults to
    ``MPI.SUM``; ``keys`` are dct's configuration keys (``density=0.01``, ``name="layer0"``)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    op = MPI.SUM if op is None else op
    recv = _Buffer(recvbuf, True, "recvbuf")
    if sendbuf is IN_PLACE:
        send, send_address = None, _capi.IN_PLACE
    else:
        send = _Buffer(sendbuf, False, "sendbuf")
        if send.count != recv.count or send.dtype != recv.dtype:
            raise TypeError(f"dct: sendbuf ({send.count} x {send.dtype}) and recvbuf "
                            f"({recv.count} x {recv.dtype}) differ")
        send_address = send.address
    info = _info(keys)
    try:
        handle = _capi.DCT_Request()
        _check(_lib.DCT_Allreduce_init(
            ctypes.c_void_p(send_address), ctypes.c_void_p(recv.address), recv.count,
            _capi.handle(recv.datatype), _capi.handle(op), _capi.handle(comm),
            _capi.handle(info), ctypes.byref(handle)))
    finally:
        info.Free()
    return Request(handle, (send, recv), recv.count, recv.dtype, comm)


def _counts(sendcounts, sdispls, recvcounts, rdispls, comm):
    size = comm.Get_size()
    arrays = []
    for name, values, ctype in (("sendcounts", sendcounts, _capi.MPI_Count),
                                ("sdispls", sdispls, _capi.MPI_Aint),
                                ("recvcounts", recvcounts, _capi.MPI_Count),
                                ("rdispls", rdispls, _capi.MPI_Aint)):
        values = [int(v) for v in values]
        if len(values) != size:
            raise ValueError(f"dct: {name} has {len(values)} entries for {size} ranks")
        arrays.append((ctype * size)(*values))
    return arrays


def alltoallv_init(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, comm=None,
                   **keys):
    """A persistent compressed alltoallv of activations (DCT-MP forward,
    ``DCT_Alltoallv_init_c``); counts and displacements in elements; ``row_length`` is
    required. Its backward: :meth:`Request.backward_init`."""
    comm = MPI.COMM_WORLD if comm is None else comm
    send = _Buffer(sendbuf, False, "sendbuf")
    recv = _Buffer(recvbuf, True, "recvbuf")
    arrays = _counts(sendcounts, sdispls, recvcounts, rdispls, comm)
    info = _info(keys)
    try:
        handle = _capi.DCT_Request()
        _check(_lib.DCT_Alltoallv_init_c(
            ctypes.c_void_p(send.address), *arrays[:2], ctypes.c_void_p(recv.address),
            *arrays[2:], _capi.handle(send.datatype), _capi.handle(comm), _capi.handle(info),
            ctypes.byref(handle)))
    finally:
        info.Free()
    return Request(handle, (send, recv, arrays), send.count, send.dtype, comm)


def waitall(requests):
    """Completes every request (``DCT_Waitall``); a list of their Statuses."""
    handles = (_capi.DCT_Request * len(requests))(*(r._handle for r in requests))
    statuses = (_capi.DCT_Status * len(requests))(
        *(_capi.new_status(_VERSION_CODE) for _ in requests))
    _check(_lib.DCT_Waitall(len(requests), handles, statuses))
    return [Status._from_c(s) for s in statuses]


def allreduce(sendbuf, recvbuf, comm=None, op=None):
    """The drop-in ``MPI_Allreduce`` replacement (``DCT_Allreduce``), configured by the
    ``DCT_*`` environment variables; its error-feedback state is kept per (comm, recvbuf)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    op = MPI.SUM if op is None else op
    recv = _Buffer(recvbuf, True, "recvbuf")
    send_address = _capi.IN_PLACE if sendbuf is IN_PLACE else \
        _Buffer(sendbuf, False, "sendbuf").address
    _check(_lib.DCT_Allreduce(ctypes.c_void_p(send_address), ctypes.c_void_p(recv.address),
                              recv.count, _capi.handle(recv.datatype), _capi.handle(op),
                              _capi.handle(comm)))


def allreduce_status(recvbuf, comm=None):
    """The Status of the last :func:`allreduce` into ``recvbuf`` on ``comm``."""
    comm = MPI.COMM_WORLD if comm is None else comm
    recv = _Buffer(recvbuf, True, "recvbuf")
    status = _capi.new_status(_VERSION_CODE)
    _check(_lib.DCT_Allreduce_status(ctypes.c_void_p(recv.address), recv.count,
                                     _capi.handle(recv.datatype), _capi.handle(comm),
                                     ctypes.byref(status)))
    return Status._from_c(status)


def comm_get_info(comm=None):
    """The configuration of the drop-in :func:`allreduce` on ``comm`` (``DCT_Comm_get_info``)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    handle = _capi.MPI_Info()
    _check(_lib.DCT_Comm_get_info(_capi.handle(comm), ctypes.byref(handle)))
    return _info_dict(handle.value)


def checkpoint_save(path, comm=None):
    """Saves every live persistent request on ``comm`` into the HDF5 file ``path``
    (``DCT_Checkpoint_save``; atomic: a crash leaves the previous file)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    _check(_lib.DCT_Checkpoint_save(_capi.handle(comm), str(path).encode()))


class CheckpointSave:
    """An asynchronous checkpoint save (``DCT_Checkpoint_isave``): the state of the moment it
    is made, written by a thread while training goes on; :meth:`wait` (collective, like the
    constructor) gives the file its name. As a context manager it waits on exit."""

    def __init__(self, path, comm=None):
        comm = MPI.COMM_WORLD if comm is None else comm
        self._handle = _capi.DCT_Checkpoint()
        _check(_lib.DCT_Checkpoint_isave(_capi.handle(comm), str(path).encode(),
                                         ctypes.byref(self._handle)))

    @property
    def pending(self):
        """Whether the save is still to be waited."""
        return bool(self._handle.value)

    def wait(self):
        """``DCT_Checkpoint_wait``: raises :class:`Error` (on every rank) if the file could not
        be written; the previous checkpoint at the path is then intact."""
        _check(_lib.DCT_Checkpoint_wait(ctypes.byref(self._handle)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.pending:
            self.wait()


def checkpoint_isave(path, comm=None):
    """Starts an asynchronous save of every live persistent request on ``comm`` into ``path``
    and returns its :class:`CheckpointSave` (``DCT_Checkpoint_isave``)."""
    return CheckpointSave(path, comm)


def checkpoint_load(path, comm=None):
    """Restores every live persistent request on ``comm`` from ``path``
    (``DCT_Checkpoint_load``; validated whole before anything changes)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    _check(_lib.DCT_Checkpoint_load(_capi.handle(comm), str(path).encode()))
