"""Every buffer a dct call will read or write, checked against what the C call does with it.

dct's C entry points take bare addresses: they cannot see a buffer's size, element type,
byte order or lifetime, so a wrong buffer there is heap corruption or silently wrong numbers,
not an error. Every entry point of the package therefore binds its buffers here, before dct
is called, and nowhere else:

- :func:`bind`: one buffer (send, receive, residual ``out``): what it is and where it lives;
- :func:`bind_blocks`: alltoallv's counts and displacements against their buffer;
- :func:`refuse_overlap`: memory the call writes must not be memory it reads elsewhere.

``TypeError``: the object cannot be that buffer (it exposes no memory, is not C-contiguous or
aligned, read-only where dct writes, a dtype MPI has no datatype for or not the call's, not
in native byte order, a tensor that is sparse, lazily conjugated, requires grad where dct
writes, or lives on a device this libdct cannot use). ``ValueError``: its size is wrong (element
count, counts or displacements outside it, blocks that overlap where dct writes them).
"""

import ctypes
import operator
import sys

import numpy as np
from mpi4py import MPI

from . import _capi


class Buffer:
    """A checked buffer: its address, element count, numpy dtype and MPI datatype. ``keep``
    holds the objects that keep its memory alive (and, for an exporter such as a bytearray,
    unresizable: the exported view refuses a resize while it exists)."""

    def __init__(self, name, keep, address, count, dtype, on_device):
        self.name = name
        self.keep = keep
        self.address = address
        self.count = count
        self.dtype = dtype
        self.on_device = on_device
        self.datatype = _mpi_datatype(dtype, name)

    @property
    def nbytes(self):
        return self.count * self.dtype.itemsize

    def byte_range(self, first=0, count=None):
        """[start, end) of elements ``first`` to ``first + count`` (default: all of it)."""
        count = self.count - first if count is None else count
        start = self.address + first * self.dtype.itemsize
        return start, start + count * self.dtype.itemsize


def bind(obj, name, *, written, dtype=None, count=None, host_only=False):
    """``obj`` checked as the buffer ``name`` of a dct call: C-contiguous memory dct may read
    (and write, with ``written``), in native byte order, of an MPI datatype; ``dtype`` and
    ``count``: what the call requires of it (else whatever it holds); ``host_only``: the C call
    copies with the CPU (``DCT_Request_get_residual``)."""
    if obj is MPI.IN_PLACE or obj is MPI.BOTTOM:  # mpi4py's markers, no memory of their own
        marker = "dct.IN_PLACE" if obj is MPI.IN_PLACE else "MPI.BOTTOM"
        raise TypeError(f"dct: {name} cannot be {marker} here; pass a buffer")
    torch = sys.modules.get("torch")  # a tensor exists only where torch was imported
    if torch is not None and isinstance(obj, torch.Tensor):
        buffer = _tensor(torch, obj, name, written)
    else:
        buffer = _exported(obj, name, written)
    if dtype is not None and buffer.dtype != dtype:
        raise TypeError(f"dct: {name} has dtype {buffer.dtype}; this call needs {dtype}")
    if count is not None and buffer.count != count:
        raise ValueError(f"dct: {name} has {buffer.count} elements; this call needs {count}")
    if host_only and buffer.on_device:
        raise TypeError(f"dct: {name} is device memory; this call writes it with the CPU: "
                        "pass a CPU buffer")
    return buffer


def _exported(obj, name, written):
    """A numpy array, or any object with the buffer protocol (bytearray, memoryview, array)."""
    if isinstance(obj, np.ndarray):
        array, keep = obj, (obj,)
    else:
        try:
            view = memoryview(obj)
        except TypeError:
            raise TypeError(f"dct: {name} ({type(obj).__name__}) does not expose its memory; "
                            "pass a numpy array, a torch tensor or a buffer") from None
        try:
            array = np.asarray(view)
        except (TypeError, ValueError, NotImplementedError):
            raise TypeError(f"dct: {name} exposes its memory in format {view.format!r}, which "
                            "numpy cannot read") from None
        keep = (obj, view, array)
    if not array.flags.c_contiguous:
        raise TypeError(f"dct: {name} is not C-contiguous; pass np.ascontiguousarray()")
    if not array.flags.aligned:
        raise TypeError(f"dct: {name} is not aligned to its {array.dtype.itemsize}-byte "
                        "elements; pass a copy")
    if written and not array.flags.writeable:
        raise TypeError(f"dct: {name} is read-only, and dct writes into it")
    if not array.dtype.isnative:
        raise TypeError(f"dct: {name} has dtype {array.dtype.str}, not in this machine's "
                        "byte order (MPI would read it as native); pass "
                        f"{name}.astype({array.dtype.newbyteorder('=').name!r})")
    return Buffer(name, keep, array.ctypes.data, array.size, array.dtype, on_device=False)


def _tensor(torch, tensor, name, written):
    if tensor.layout != torch.strided or getattr(tensor, "is_nested", False):
        kind = "nested" if tensor.layout == torch.strided else str(tensor.layout)
        raise TypeError(f"dct: {name} is a {kind} tensor; dct takes dense (strided) tensors: "
                        "pass .to_dense()")
    if _flag(tensor, "is_conj") or _flag(tensor, "is_neg"):
        # Lazy views: the memory holds the values before the conjugation or negation.
        raise TypeError(f"dct: {name} is a lazily conjugated or negated tensor; pass "
                        ".resolve_conj().resolve_neg()")
    if not tensor.is_contiguous():
        raise TypeError(f"dct: {name} is a non-contiguous tensor; pass .contiguous()")
    if written and tensor.requires_grad:
        raise TypeError(f"dct: {name} requires grad, and dct writes into it behind autograd; "
                        "pass .detach() (the same memory)")
    device = tensor.device.type
    if device == "cuda":  # ROCm builds of torch call their devices "cuda" too
        if not (_gpu_backend_compiled("cuda") or _gpu_backend_compiled("hip")):
            raise TypeError(f"dct: {name} is on {tensor.device}, but this libdct was built "
                            "without a GPU backend")
    elif device != "cpu":
        raise TypeError(f"dct: {name} is on {tensor.device}; dct takes CPU tensors, and CUDA "
                        "or ROCm tensors where libdct was built with that backend")
    try:
        dtype = np.dtype(str(tensor.dtype).replace("torch.", ""))
    except TypeError:  # bfloat16, complex32, quantised types: no numpy (nor MPI) type
        raise TypeError(f"dct: {name} has dtype {tensor.dtype}, which MPI has no datatype "
                        "for") from None
    address = tensor.data_ptr()
    if address % dtype.itemsize:
        raise TypeError(f"dct: {name} is not aligned to its {dtype.itemsize}-byte elements; "
                        "pass .clone()")
    return Buffer(name, (tensor,), address, tensor.numel(), dtype, on_device=device != "cpu")


def _flag(tensor, method):
    """``tensor.is_conj()`` and the like, False on a torch too old to have them."""
    return bool(getattr(tensor, method, lambda: False)())


def _mpi_datatype(dtype, name):
    datatype = MPI._typedict.get(dtype.char)
    # The size check catches what the type code alone does not say ('S10' is not MPI_CHAR).
    if datatype is None or datatype.Get_size() != dtype.itemsize:
        raise TypeError(f"dct: {name} has dtype {dtype}, which MPI has no datatype for")
    return datatype


_GPU_BACKENDS = {"cuda": 2, "hip": 3}  # DCT_Backend
_gpu_compiled = {}


def _gpu_backend_compiled(backend):
    if backend not in _gpu_compiled:
        compiled = ctypes.c_int(0)
        code = _capi.lib.DCT_Backend_compiled(_GPU_BACKENDS[backend], ctypes.byref(compiled))
        _gpu_compiled[backend] = code == 0 and bool(compiled.value)
    return _gpu_compiled[backend]


def bind_blocks(buffer, counts, displs, ranks, counts_name, displs_name, *, written):
    """alltoallv's ``counts`` and ``displs`` (elements, one per rank) checked against
    ``buffer``: integers, >= 0, every block inside the buffer and, where dct writes them
    (``written``), no two blocks overlapping. Returns the C arrays (MPI_Count, MPI_Aint), the
    total count and the blocks as (first element, count)."""
    counts = _integers(counts, counts_name, ranks)
    displs = _integers(displs, displs_name, ranks)
    for j, (count, displ) in enumerate(zip(counts, displs)):
        if count < 0 or displ < 0:
            raise ValueError(f"dct: {counts_name}[{j}] = {count}, {displs_name}[{j}] = {displ}: "
                             "counts and displacements are >= 0")
        if displ + count > buffer.count:
            raise ValueError(f"dct: the block of rank {j} ({counts_name}[{j}] = {count} at "
                             f"{displs_name}[{j}] = {displ}) ends past the {buffer.count} "
                             f"elements of {buffer.name}")
    blocks = [(displ, count) for displ, count in zip(displs, counts) if count > 0]
    if written:
        end = 0
        for first, count in sorted(blocks):
            if first < end:
                raise ValueError(f"dct: blocks of {buffer.name} overlap ({counts_name}, "
                                 f"{displs_name}): two ranks' data would land on the same "
                                 "elements")
            end = first + count
    return ((_capi.MPI_Count * ranks)(*counts), (_capi.MPI_Aint * ranks)(*displs), sum(counts),
            blocks)


def _integers(values, name, ranks):
    try:
        values = [operator.index(v) for v in values]
    except TypeError:
        raise TypeError(f"dct: {name} must be a sequence of integers") from None
    if len(values) != ranks:
        raise ValueError(f"dct: {name} has {len(values)} entries for {ranks} ranks")
    return values


def refuse_overlap(read, read_blocks, written, written_blocks, remedy):
    """ValueError when a block of ``written`` (memory the call writes) shares a byte with a
    block of ``read`` (memory it reads): blocks as (first element, count); ``remedy`` says
    what to do instead."""
    reads = sorted(read.byte_range(first, n) for first, n in read_blocks if n > 0)
    writes = sorted(written.byte_range(first, n) for first, n in written_blocks if n > 0)
    i = j = 0
    while i < len(reads) and j < len(writes):  # one sweep over both sorted lists
        (read_start, read_end), (write_start, write_end) = reads[i], writes[j]
        if read_start < write_end and write_start < read_end:
            raise ValueError(f"dct: {written.name} overlaps {read.name} in memory; {remedy}")
        if read_end <= write_end:
            i += 1
        else:
            j += 1
