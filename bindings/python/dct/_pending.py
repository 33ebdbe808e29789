"""What dct still owns after the user let go of it: started requests and pending saves.

Between ``DCT_Start`` and its completion a request's buffers belong to dct, which writes the
receive buffer in the completion call; an asynchronous checkpoint save holds its path until
``DCT_Checkpoint_wait``, which is collective. A Python object can be dropped at any moment,
so the package, not the user's references, keeps these alive:

- every started request is in ``_started`` (with its buffers) until a completion call saw it
  complete. A started request whose ``Request`` object is collected goes to ``_dropped``: it
  is tested (``DCT_Test``, which never waits for other ranks on compressed calls) after every
  completion call of the package, and freed once complete; before a checkpoint call on its
  communicator (which it would make fail) the ranks test theirs until none is in flight.
  It is never waited in ``__del__``: that would block a finaliser on the other ranks' progress;
- every pending save is in ``_saves`` until waited. A dropped one is waited at the next
  checkpoint call on its communicator: a collective call that every rank makes at the same
  point, as the wait needs;
- at exit (before mpi4py's ``MPI_Finalize``, which runs after Python's atexit functions) the
  started requests are waited and the pending saves completed, in the order they were started.
"""

import atexit
import ctypes
import threading
import warnings

import numpy as np
from mpi4py import MPI

from . import _capi

_lib = _capi.lib
ERR_ARG, ERR_REQUEST, ERR_NOT_INITIALIZED, ERR_THREAD = 1, 8, 14, 24
# A completion call that returns one of these did nothing: a started request is still started.
_NOTHING_HAPPENED = (ERR_ARG, ERR_NOT_INITIALIZED, ERR_THREAD)

_started = {}  # id -> RequestBinding of every started request, in start order
_dropped = []  # RequestBindings of started requests whose Request object was collected
_saves = {}  # id -> SaveBinding of every pending save, in start order
_collecting = threading.Lock()  # one thread at a time tests the dropped requests


class RequestBinding:
    """A ``DCT_Request`` handle and the buffers it binds, shared by the ``Request`` object and,
    while started, the registry."""

    def __init__(self, handle, buffers, comm):
        self.handle = handle
        self.buffers = buffers
        self.comm = comm
        self.started = False
        self.dropped = False

    def mark_started(self):
        self.started = True
        _started.pop(id(self), None)
        _started[id(self)] = self

    def mark_completed(self, code=0):
        """After a completion call returned ``code`` for it (or completed it)."""
        if code not in _NOTHING_HAPPENED:
            self.started = False
            _started.pop(id(self), None)

    def free(self):
        """DCT_Request_free; the buffers are let go only when dct let go of the request."""
        code = _lib.DCT_Request_free(ctypes.byref(self.handle))
        if code == 0:
            self.buffers = None
        return code


def drop_request(binding):
    """The ``Request`` object of ``binding`` is gone (collected, or a ``with`` block left by an
    exception): free it now, or, if it is started, once it completed. Never raises."""
    if binding.dropped or not binding.handle:
        return
    if not binding.started and binding.free() in (0, ERR_REQUEST):
        return
    binding.dropped = True
    _dropped.append(binding)
    warnings.warn("dct: a started request was dropped before its completion; dct keeps its "
                  "buffers and frees it once a later completion call finds it complete",
                  ResourceWarning, stacklevel=3)


def collect_dropped(comm=None):
    """Tests every dropped request (those on ``comm`` only, if given) once, and frees those that
    are complete. Call it after a completion call, or before a checkpoint call on ``comm``; it
    overwrites ``DCT_Get_last_error``."""
    if not _dropped or not _collecting.acquire(blocking=False):
        return
    try:
        for binding in list(_dropped):
            if comm is not None and binding.comm != comm:
                continue
            if binding.started:
                flag = ctypes.c_int(0)
                code = _lib.DCT_Test(ctypes.byref(binding.handle), ctypes.byref(flag), None)
                if code in _NOTHING_HAPPENED or (code == 0 and not flag.value):
                    continue
                binding.mark_completed(code)  # done, or failed: an error completes the call
            if binding.free() in (0, ERR_REQUEST):
                binding.buffers = None
                _dropped.remove(binding)
    finally:
        _collecting.release()


class SaveBinding:
    """A pending ``DCT_Checkpoint`` handle, its communicator and path."""

    def __init__(self, handle, comm, path):
        self.handle = handle
        self.comm = comm
        self.path = path
        self.dropped = False
        _saves[id(self)] = self

    @property
    def pending(self):
        return bool(self.handle.value)

    def wait(self):
        """DCT_Checkpoint_wait (collective); the handle is null after it, whatever the code."""
        code = _lib.DCT_Checkpoint_wait(ctypes.byref(self.handle))
        if not self.pending:
            _saves.pop(id(self), None)
        return code


def drop_save(binding):
    """The ``CheckpointSave`` of ``binding`` is gone: a pending save is completed at the next
    checkpoint call on its communicator (:func:`before_checkpoint`) or at exit."""
    if binding.pending and not binding.dropped:
        binding.dropped = True
        warnings.warn(f"dct: the save to {binding.path.decode(errors='replace')} was dropped "
                      "before wait(); dct completes it at the next checkpoint call on its "
                      "communicator", ResourceWarning, stacklevel=3)


def before_checkpoint(comm):
    """Before a checkpoint call on ``comm``, which every rank makes at this point: completes
    the dropped saves on ``comm``, which would hold their path (DCT_ERR_ACTIVE), and the
    dropped requests on it, which would make the call fail (DCT_ERR_ACTIVE) with no handle
    left to wait."""
    for binding in list(_saves.values()):
        if binding.dropped and binding.comm == comm:
            code = binding.wait()
            if code != 0:
                warnings.warn(f"dct: the dropped save to {binding.path.decode(errors='replace')} "
                              f"failed (code {code}); the previous file at the path is intact",
                              RuntimeWarning, stacklevel=3)
    _complete_dropped_requests(comm)


_AGREEMENT_ROUNDS = 10000  # a peer that never starts its side must not hang the save


def _complete_dropped_requests(comm):
    """Tests the dropped requests on ``comm`` round by round, the ranks agreeing after each
    round (a two-integer allreduce on ``comm``), until none is in flight on any rank. Where a
    rank holds a started request of its own the rounds stop at once: the checkpoint call
    fails with DCT_ERR_ACTIVE whatever is done here, and that call is not the package's to
    complete. Tests, never waits: a wait could block on a peer that is in this allreduce."""
    if comm == MPI.COMM_NULL or comm.Is_inter():
        return  # dct refuses the call (DCT_ERR_COMM) without looking at any request
    flags = np.zeros(2, np.int32)
    for _ in range(_AGREEMENT_ROUNDS):
        collect_dropped(comm)
        flags[0] = any(b.started and b.comm == comm for b in list(_dropped))
        flags[1] = any(not b.dropped and b.comm == comm for b in list(_started.values()))
        comm.Allreduce(MPI.IN_PLACE, flags, op=MPI.MAX)
        if not flags[0] or flags[1]:
            return


@atexit.register
def _complete_at_exit():
    """Every started call and pending save completes before MPI_Finalize, as dct.h requires of
    saves and MPI of collectives; no later dct call could write the buffers freed after it."""
    if not MPI.Is_initialized() or MPI.Is_finalized():
        return
    for binding in list(_started.values()):
        binding.mark_completed(_lib.DCT_Wait(ctypes.byref(binding.handle), None))
    collect_dropped()
    for binding in list(_saves.values()):
        binding.wait()
