"""dct.torch's overlap: the buckets' compressed allreduces run on one worker thread per hook
state, so that DDP's backward goes on while dct compresses and exchanges.

- :class:`Worker`: a thread that runs the submitted work in the order it was submitted (DDP hands
  its buckets over in the same order on every rank, so every rank starts the same calls in the
  same order) and completes each one's ``torch.futures.Future`` with its result or exception.
  All of a hook state's dct calls go through it (dct.h, "Threads": calls on one communicator
  must not overlap), the main thread's only after :meth:`Worker.drain`.
- :func:`complete`: ``Request.wait()`` without spinning a core: ``DCT_Test`` with sleeps
  between tries (ctypes and ``time.sleep`` release the GIL), so the backward's own threads keep
  the cores while a bucket's peers are late.
- :class:`BucketSnapshot`: what the worker needs of DDP's ``GradBucket``, taken while the hook
  runs (the bucket object is DDP's to reuse once the hook has returned; its tensors are not).
"""

import queue
import threading
import time

import torch

# Sleeps between DCT_Test tries: from the first to the longest, doubling. Each try also advances
# MPI's progress (Open MPI has no progress thread), so the longest bounds how long a peer's data
# waits in the socket; 0.2 ms is 250 KB at 10 Gbit/s, about a bucket's compressed message.
FIRST_PAUSE_S = 20e-6
LONGEST_PAUSE_S = 200e-6


def complete(request):
    """The Status of the started ``request`` once complete, polled without spinning."""
    pause = FIRST_PAUSE_S
    while True:
        status = request.test()
        if status is not None:
            return status
        time.sleep(pause)
        pause = min(2 * pause, LONGEST_PAUSE_S)


class BucketSnapshot:
    """A GradBucket's index, buffer, gradients, parameters and place in the step."""

    def __init__(self, bucket):
        self._index = bucket.index()
        self._buffer = bucket.buffer()
        self._gradients = bucket.gradients()
        self._parameters = bucket.parameters()
        self._last = bucket.is_last()

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer

    def gradients(self):
        return self._gradients

    def parameters(self):
        return self._parameters

    def is_last(self):
        return self._last


class Worker:
    """One daemon thread running submitted callables in order; see the module's text. Dropped
    without :meth:`stop`, its thread ends once the work already queued has run."""

    def __init__(self, name):
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=_serve, args=(self._queue,), name=name,
                                        daemon=True)
        self._thread.start()

    def submit(self, work):
        """A pending future, completed with ``work()``'s result (or exception) on the worker."""
        future = torch.futures.Future()
        self._queue.put((work, future))
        return future

    def drain(self):
        """Returns once every submitted work has run and its future is complete."""
        self._queue.join()

    def stop(self):
        """Drains, then ends the thread (idempotent)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def __del__(self):
        self._queue.put(None)


def _serve(work_queue):
    """The worker thread: each (work, future) in turn until None (it holds only the queue, so
    a dropped Worker is collected and its __del__ ends the thread)."""
    while True:
        item = work_queue.get()
        if item is None:
            work_queue.task_done()
            return
        work, future = item
        try:
            result = work()
        except BaseException as error:  # noqa: BLE001 - handed to the waiting backward
            future.set_exception(error)
        else:
            future.set_result(result)
        finally:
            work_queue.task_done()
