# Over 450 lines: the package's whole public API, each call documented where it is defined.
"""dct from Python: compressed collectives over mpi4py communicators.

A thin layer over dct's C ABI (include/dct/dct.h documents every call, docs/configuration.md
every key): the same persistent requests, error feedback, statuses and checkpoints, with

- communicators, datatypes and ops as mpi4py objects (``MPI.COMM_WORLD``, ``MPI.SUM``);
- buffers as anything that exposes its memory: numpy arrays, CPU torch tensors, objects with
  the buffer protocol (C-contiguous); CUDA torch tensors by device pointer where libdct was
  built with CUDA. The datatype comes from the buffer (float32 -> MPI_FLOAT, float64 ->
  MPI_DOUBLE are compressed; other types are handed to MPI, as the C API does);
- configuration keys as keyword arguments without their ``dct_`` prefix (``density=0.01``,
  ``momentum=0.9``, ``values="fp16"``; docs/configuration.md lists them);
- errors raised as :class:`dct.Error`, carrying dct's code and message.

A persistent request binds its buffers: do not resize or reallocate them while the request
lives (the request keeps a reference to each). Every buffer is checked before dct is called:
``TypeError`` for what cannot be that buffer, ``ValueError`` for a wrong size (dct/_buffers.py).
A started request keeps its buffers until it completes, even when its object is dropped
(dct/_pending.py).

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
import os

import numpy as np
from mpi4py import MPI

from . import _buffers, _capi, _pending
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


def _error(code):
    """The Error of ``code`` (None for success), with dct's message: read it before any other
    dct call on this thread, which replaces it."""
    if code == 0:
        return None
    message = _lib.DCT_Get_last_error().decode(errors="replace")
    if not message:
        text = ctypes.create_string_buffer(_capi.DCT_MAX_ERROR_STRING)
        length = ctypes.c_int(0)
        _lib.DCT_Error_string(code, text, ctypes.byref(length))
        message = text.value.decode(errors="replace")
    return Error(code, message)


def _check(code):
    error = _error(code)
    if error is not None:
        raise error


def _completed(code):
    """After a completion call (wait, test, waitall, the drop-in allreduce), which progressed
    every call in flight: frees the dropped requests that are now complete, then raises the
    call's error, if any."""
    error = _error(code)
    _pending.collect_dropped()
    if error is not None:
        raise error


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
    nonfinite: int

    @classmethod
    def _from_c(cls, status):
        values = {f.name: getattr(status, f.name) for f in dataclasses.fields(cls)}
        values["tau_reestimated"] = bool(status.tau_reestimated)
        values["algorithm"] = _lib.DCT_Algorithm_name(status.algorithm).decode()
        return cls(**values)


# --- arguments --------------------------------------------------------------------------------

def _communicator(comm):
    """``comm`` (default ``MPI.COMM_WORLD``), an mpi4py communicator."""
    comm = MPI.COMM_WORLD if comm is None else comm
    if not isinstance(comm, MPI.Comm):
        raise TypeError(f"dct: comm is a {type(comm).__name__}; pass an mpi4py communicator "
                        "(MPI.COMM_WORLD, ...)")
    return comm


def _operation(op):
    """``op`` (default ``MPI.SUM``), an mpi4py reduction."""
    op = MPI.SUM if op is None else op
    if not isinstance(op, MPI.Op):
        raise TypeError(f"dct: op is a {type(op).__name__}; pass an mpi4py op (MPI.SUM, ...)")
    return op


def _ranks(comm):
    """The size of ``comm``, for alltoallv's per-rank arrays (needed before dct sees it)."""
    if comm == MPI.COMM_NULL:
        raise Error(6, "dct: comm is MPI.COMM_NULL")  # DCT_ERR_COMM, as dct answers
    return comm.Get_size()


def _path(path):
    """A checkpoint path as dct's C string: a NUL would cut it short, at another path."""
    path = os.fsencode(path)
    if b"\0" in path:
        raise ValueError(f"dct: the checkpoint path {path!r} contains a NUL byte")
    return path


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
    ``test()``; ``free()`` (or a ``with`` block) releases it and its residual.

    Between ``start()`` and its completion the buffers belong to dct: the package keeps them
    alive (dct/_pending.py) even if this object is dropped; a dropped started request is freed
    once a later completion call finds it complete."""

    def __init__(self, handle, buffers, count, dtype, comm):
        self._binding = _pending.RequestBinding(handle, buffers, comm)
        self.count = count  # elements of the residual (DCT_Request_get_residual)
        self.dtype = dtype
        self.comm = comm

    @property
    def _handle(self):
        return self._binding.handle

    def _ref(self):
        """The handle by reference, for the calls that take ``DCT_Request *``."""
        binding = self._binding
        if not binding.handle or binding.dropped:
            raise Error(8, "dct: the request was freed")  # DCT_ERR_REQUEST
        return ctypes.byref(binding.handle)

    def _live(self):
        """The handle by value, for the calls that take ``DCT_Request``."""
        self._ref()  # refuses a freed request
        return self._binding.handle

    def start(self):
        """Compresses ``sendbuf`` into the exchange and posts it (``DCT_Start``)."""
        code = _lib.DCT_Start(self._ref())
        if code == 0:
            self._binding.mark_started()
        _check(code)

    def wait(self):
        """Completes the call (``DCT_Wait``): ``recvbuf`` holds the result. Returns a Status."""
        status = _capi.new_status(_VERSION_CODE)
        code = _lib.DCT_Wait(self._ref(), ctypes.byref(status))
        self._binding.mark_completed(code)
        _completed(code)
        return Status._from_c(status)

    def test(self):
        """Progresses every call in flight once (``DCT_Test``): the Status when this one
        completed, else None."""
        status = _capi.new_status(_VERSION_CODE)
        flag = ctypes.c_int(0)
        code = _lib.DCT_Test(self._ref(), ctypes.byref(flag), ctypes.byref(status))
        if flag.value or code != 0:  # an error completes the call, as DCT_Wait's does
            self._binding.mark_completed(code)
        _completed(code)
        return Status._from_c(status) if flag.value else None

    def residual(self, out=None):
        """This rank's residual (mass not sent yet): a new numpy array, or written into ``out``
        (any C-contiguous CPU buffer of ``count`` elements of the request's dtype)."""
        handle = self._live()
        if out is None:
            out = np.empty(self.count, dtype=self.dtype)
        buffer = _buffers.bind(out, "out", written=True, dtype=self.dtype, count=self.count,
                               host_only=True)
        _check(_lib.DCT_Request_get_residual(handle, ctypes.c_void_p(buffer.address)))
        return out

    @property
    def info(self):
        """Every key in force for this request and its value (``DCT_Request_get_info``)."""
        handle = _capi.MPI_Info()
        _check(_lib.DCT_Request_get_info(self._live(), ctypes.byref(handle)))
        return _info_dict(handle.value)

    def set_stream(self, stream):
        """The CUDA/HIP stream (an integer handle, e.g. ``torch.cuda.current_stream().cuda_stream``)
        the request's kernels run on from its next start."""
        _check(_lib.DCT_Request_set_stream(self._live(), ctypes.c_void_p(stream)))

    def backward_init(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls):
        """The backward request of this DCT-MP forward (``DCT_Alltoallv_backward_init_c``):
        both buffers of the forward's dtype."""
        forward = self._live()
        send, recv, arrays, count = _alltoallv_buffers(
            sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, _ranks(self.comm),
            self.dtype)
        handle = _capi.DCT_Request()
        _check(_lib.DCT_Alltoallv_backward_init_c(
            forward, ctypes.c_void_p(send.address), *arrays[:2],
            ctypes.c_void_p(recv.address), *arrays[2:], ctypes.byref(handle)))
        return Request(handle, (send, recv, arrays, self), count, self.dtype, self.comm)

    def free(self):
        """Frees the request and its residual (``DCT_Request_free``); idempotent. A started
        request is refused (``DCT_ERR_ACTIVE``): complete it first."""
        binding = self._binding
        if binding.handle and not binding.dropped:
            _check(binding.free())

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is not None and self._binding.started:
            # Left by an exception between start and completion: free it once it completes,
            # rather than hide the exception behind DCT_ERR_ACTIVE.
            _pending.drop_request(self._binding)
        else:
            self.free()

    def __del__(self):
        # Never raises; DCT_Request_free is callable after MPI_Finalize.
        try:
            _pending.drop_request(self._binding)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def allreduce_init(sendbuf, recvbuf, comm=None, op=None, **keys):
    """A persistent compressed allreduce (``DCT_Allreduce_init``), collective over ``comm``
    (default ``MPI.COMM_WORLD``). ``sendbuf`` may be :data:`IN_PLACE`; ``op`` defaults to
    ``MPI.SUM``; ``keys`` are dct's configuration keys (``density=0.01``, ``name="layer0"``)."""
    comm = _communicator(comm)
    op = _operation(op)
    send, recv = _allreduce_buffers(sendbuf, recvbuf)
    info = _info(keys)
    try:
        handle = _capi.DCT_Request()
        _check(_lib.DCT_Allreduce_init(
            ctypes.c_void_p(_capi.IN_PLACE if send is None else send.address),
            ctypes.c_void_p(recv.address), recv.count, _capi.handle(recv.datatype),
            _capi.handle(op), _capi.handle(comm), _capi.handle(info), ctypes.byref(handle)))
    finally:
        info.Free()
    return Request(handle, (send, recv), recv.count, recv.dtype, comm)


def _allreduce_buffers(sendbuf, recvbuf):
    """(send or None for IN_PLACE, recv): the same count and dtype; one buffer passed twice
    reduces in place (dct.h), a partial overlap is refused."""
    recv = _buffers.bind(recvbuf, "recvbuf", written=True)
    if sendbuf is IN_PLACE:
        return None, recv
    send = _buffers.bind(sendbuf, "sendbuf", written=False, dtype=recv.dtype, count=recv.count)
    if send.byte_range() != recv.byte_range():
        _buffers.refuse_overlap(send, [(0, send.count)], recv, [(0, recv.count)],
                                "pass dct.IN_PLACE (or the same buffer twice) to reduce in place")
    return send, recv


def _alltoallv_buffers(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, ranks,
                       dtype=None):
    """The checked buffers of an alltoallv (both of ``dtype``, default the send buffer's), the
    C arrays of counts and displacements, and the request's count (the elements it sends)."""
    send = _buffers.bind(sendbuf, "sendbuf", written=False, dtype=dtype)
    recv = _buffers.bind(recvbuf, "recvbuf", written=True, dtype=send.dtype)
    send_counts, send_displs, count, send_blocks = _buffers.bind_blocks(
        send, sendcounts, sdispls, ranks, "sendcounts", "sdispls", written=False)
    recv_counts, recv_displs, _, recv_blocks = _buffers.bind_blocks(
        recv, recvcounts, rdispls, ranks, "recvcounts", "rdispls", written=True)
    _buffers.refuse_overlap(send, send_blocks, recv, recv_blocks,
                            "alltoallv has no in-place form: pass separate buffers")
    return send, recv, (send_counts, send_displs, recv_counts, recv_displs), count


def alltoallv_init(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, comm=None,
                   **keys):
    """A persistent compressed alltoallv of activations (DCT-MP forward,
    ``DCT_Alltoallv_init_c``); counts and displacements in elements; ``row_length`` is
    required. Its backward: :meth:`Request.backward_init`."""
    comm = _communicator(comm)
    send, recv, arrays, count = _alltoallv_buffers(sendbuf, sendcounts, sdispls, recvbuf,
                                                   recvcounts, rdispls, _ranks(comm))
    info = _info(keys)
    try:
        handle = _capi.DCT_Request()
        _check(_lib.DCT_Alltoallv_init_c(
            ctypes.c_void_p(send.address), *arrays[:2], ctypes.c_void_p(recv.address),
            *arrays[2:], _capi.handle(send.datatype), _capi.handle(comm), _capi.handle(info),
            ctypes.byref(handle)))
    finally:
        info.Free()
    return Request(handle, (send, recv, arrays), count, send.dtype, comm)


def waitall(requests):
    """Completes every request (``DCT_Waitall``); a list of their Statuses."""
    requests = list(requests)
    for request in requests:
        if not isinstance(request, Request):
            raise TypeError(f"dct: waitall takes Requests, not {type(request).__name__}")
    handles = (_capi.DCT_Request * len(requests))(*(r._handle for r in requests))
    statuses = (_capi.DCT_Status * len(requests))(
        *(_capi.new_status(_VERSION_CODE) for _ in requests))
    code = _lib.DCT_Waitall(len(requests), handles, statuses)
    for request in requests:
        request._binding.mark_completed(code)
    _completed(code)
    return [Status._from_c(s) for s in statuses]


def allreduce(sendbuf, recvbuf, comm=None, op=None):
    """The drop-in ``MPI_Allreduce`` replacement (``DCT_Allreduce``), configured by the
    ``DCT_*`` environment variables; its error-feedback state is kept per (comm, recvbuf)."""
    comm = _communicator(comm)
    op = _operation(op)
    send, recv = _allreduce_buffers(sendbuf, recvbuf)
    code = _lib.DCT_Allreduce(ctypes.c_void_p(_capi.IN_PLACE if send is None else send.address),
                              ctypes.c_void_p(recv.address), recv.count,
                              _capi.handle(recv.datatype), _capi.handle(op), _capi.handle(comm))
    _completed(code)


def allreduce_status(recvbuf, comm=None):
    """The Status of the last :func:`allreduce` into ``recvbuf`` on ``comm``."""
    comm = _communicator(comm)
    recv = _buffers.bind(recvbuf, "recvbuf", written=False)  # a key: dct reads nothing there
    status = _capi.new_status(_VERSION_CODE)
    _check(_lib.DCT_Allreduce_status(ctypes.c_void_p(recv.address), recv.count,
                                     _capi.handle(recv.datatype), _capi.handle(comm),
                                     ctypes.byref(status)))
    return Status._from_c(status)


def comm_get_info(comm=None):
    """The configuration of the drop-in :func:`allreduce` on ``comm`` (``DCT_Comm_get_info``)."""
    comm = _communicator(comm)
    handle = _capi.MPI_Info()
    _check(_lib.DCT_Comm_get_info(_capi.handle(comm), ctypes.byref(handle)))
    return _info_dict(handle.value)


# --- checkpoints ------------------------------------------------------------------------------

def checkpoint_save(path, comm=None):
    """Saves every live persistent request on ``comm`` into the HDF5 file ``path``
    (``DCT_Checkpoint_save``; atomic: a crash leaves the previous file)."""
    comm, path = _communicator(comm), _path(path)
    _pending.before_checkpoint(comm)
    _check(_lib.DCT_Checkpoint_save(_capi.handle(comm), path))


class CheckpointSave:
    """An asynchronous checkpoint save (``DCT_Checkpoint_isave``): the state of the moment it
    is made, written by a thread while training goes on; :meth:`wait` (collective, like the
    constructor) gives the file its name. As a context manager it waits on exit. Dropped
    before its wait, it is completed at the next checkpoint call on ``comm``, or at exit."""

    def __init__(self, path, comm=None):
        comm, path = _communicator(comm), _path(path)
        _pending.before_checkpoint(comm)
        handle = _capi.DCT_Checkpoint()
        _check(_lib.DCT_Checkpoint_isave(_capi.handle(comm), path, ctypes.byref(handle)))
        self._save = _pending.SaveBinding(handle, comm, path)

    @property
    def pending(self):
        """Whether the save is still to be waited."""
        return self._save.pending

    def wait(self):
        """``DCT_Checkpoint_wait``: raises :class:`Error` (on every rank) if the file could not
        be written; the previous checkpoint at the path is then intact."""
        _check(self._save.wait())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.pending:
            self.wait()

    def __del__(self):
        try:
            _pending.drop_save(self._save)
        except Exception:  # noqa: BLE001 - a half-made object, interpreter shutdown
            pass


def checkpoint_isave(path, comm=None):
    """Starts an asynchronous save of every live persistent request on ``comm`` into ``path``
    and returns its :class:`CheckpointSave` (``DCT_Checkpoint_isave``)."""
    return CheckpointSave(path, comm)


def checkpoint_load(path, comm=None):
    """Restores every live persistent request on ``comm`` from ``path``
    (``DCT_Checkpoint_load``; validated whole before anything changes)."""
    comm, path = _communicator(comm), _path(path)
    _pending.before_checkpoint(comm)
    _check(_lib.DCT_Checkpoint_load(_capi.handle(comm), path))
