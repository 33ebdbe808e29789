"""dct.torch: dct's compressed allreduce as a PyTorch DDP communication hook.

    import torch, dct.torch
    dct.torch.init_process_group_from_mpi()              # torch.distributed from MPI's ranks
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = dct.torch.DCTHookState(density=0.01, momentum=0.9, values="fp16")
    ddp.register_comm_hook(state, dct.torch.dct_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)   # plain SGD: see below
    state.check_optimizer(optimizer)

Run with ``mpiexec -n P python3 train.py``. Every DDP bucket gets one persistent dct request
(created at its first use, on ``comm``, default ``MPI.COMM_WORLD``) that keeps the bucket's
residual (error feedback) and, with ``momentum``, its velocity: the bucket is copied into the
request's buffer, the compressed allreduce runs and the average over ranks is written back.

Overlap (``overlap=True``): the hook hands the bucket to the state's worker thread
and returns a pending future at once; the worker runs the buckets' calls in DDP's order (the
same on every rank), waits without spinning a core (``DCT_Test`` with short sleeps) and
completes each future with the averaged bucket, so the backward goes on while dct compresses
and exchanges, and DDP waits for the futures at its end. Every dct call of the state runs on the
worker; :meth:`DCTHookState.save`, :meth:`~DCTHookState.load` and :meth:`~DCTHookState.free`
first wait for it to finish. It needs ``MPI_THREAD_MULTIPLE`` (mpi4py's default). CUDA buckets
take the synchronous path (not measured on a GPU yet). The default, ``overlap=False``: the whole
call runs inside the hook, which returns a completed future (the same bits). Overlap is off by
default because where it was measured (2 ranks on 2 cores, docs/python.md) no core was free for
the worker: it took 1.04-1.13x the synchronous hook's step time.

16-bit buckets (a float16 or bfloat16 model's gradients): the request works in float32 (its
residual and velocity too, so small gradients are not rounded away); the bucket is widened into
it and the average rounded once back to the bucket's type. AMP keeps float32 gradients, so its
buckets are float32 and nothing changes.

``momentum`` (DGC's momentum correction, ``dct_momentum``): the library applies the momentum to
each rank's gradient before compressing it, and the averaged result is the update itself. The
optimizer must then be plain SGD (``momentum=0``, no Nesterov): a momentum in the optimizer
as well would apply it twice, an effective momentum near 1/(1-m)^2 instead of 1/(1-m) (100x
instead of 10x at 0.9), which diverges or trains far worse. :meth:`DCTHookState.check_optimizer`
refuses that combination. Weight decay belongs in the gradient (SGD's weight_decay is added to
the gradient after the hook, so it is not compressed and not corrected; it still works).

To keep the optimizer as it is, add ``momentum_result="gradient"`` (``dct_momentum_result``):
the hook then returns gradients whose momentum is the corrected update, for
``torch.optim.SGD(momentum=m)`` with m the hook's ``momentum`` (dampening 0, no Nesterov;
:meth:`DCTHookState.check_optimizer` checks it). Same bytes and accuracy as above (to rounding;
docs/results/momentum-result). Where DDP regroups its buckets, the last update of a freed request
is dropped with its velocity: the optimizer's momentum carries it on for that once.

DDP regroups its buckets once, after the first step of every run, in the order the gradients
became ready. A bucket over the same parameters in another order keeps its request (the hook
permutes the segments), so residuals and velocities carry on, and a run resumed from a
checkpoint continues bit for bit. Where DDP groups the parameters otherwise (other bucket
sizes), the requests of the old grouping are freed and their residual is added to the
parameters' next gradients, so no gradient mass is lost; their velocity is dropped, once.
"""

import json
import os
import time
import warnings
import zlib

import torch
import torch.distributed as dist
from mpi4py import MPI

import dct
from dct import _overlap

__all__ = ["DCTHookState", "dct_hook", "init_process_group_from_mpi"]


def init_process_group_from_mpi(backend="gloo", comm=None, timeout_s=300):
    """Initialises torch.distributed with MPI's ranks (rank and size of ``comm``, default
    ``MPI.COMM_WORLD``): rank 0 opens a TCPStore on a free port of its host and broadcasts its
    address over MPI, so one ``mpiexec -n P python3 train.py`` needs no MASTER_ADDR/PORT."""
    import datetime
    import socket

    comm = MPI.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    timeout = datetime.timedelta(seconds=timeout_s)
    store = None
    if rank == 0:
        host = socket.gethostname()
        store = dist.TCPStore(host, 0, size, True, timeout, wait_for_workers=False)
        address = (host, store.port)
    else:
        address = None
    host, port = comm.bcast(address, root=0)
    if rank != 0:
        store = dist.TCPStore(host, port, size, False, timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=size, timeout=timeout)
    return rank, size


class _BucketRequest:
    """One bucket layout's persistent request and its staging buffer."""

    def __init__(self, state, layout, params):
        self.layout = layout  # index, numel, dtype, shapes: what DDP's bucket looks like
        self.params = params  # the bucket's parameters (None for a request restored from a file)
        self.buffer = torch.zeros(layout["numel"], dtype=_working_dtype(layout["dtype"]),
                                  device=layout.get("device", "cpu"))
        self.request = dct.allreduce_init(dct.IN_PLACE, self.buffer, state.comm,
                                          name=layout["name"], **state.keys)
        self.used_in_step = -1


def _working_dtype(bucket_dtype):
    """The request's type for a bucket of ``bucket_dtype`` (a name): 16-bit floats work in
    float32, float32 and float64 as they are; others (complex, integer) are refused."""
    if bucket_dtype in ("float16", "bfloat16"):
        return torch.float32
    if bucket_dtype in ("float32", "float64"):
        return getattr(torch, bucket_dtype)
    raise TypeError(f"dct.torch: a bucket of {bucket_dtype} gradients; the hook compresses "
                    "float16, bfloat16, float32 and float64")


def _segments(ours, theirs):
    """(offset in our order, offset in theirs, numel) per parameter; None for the same order."""
    if [id(p) for p in ours] == [id(p) for p in theirs]:
        return None
    offsets, offset = {}, 0
    for p in theirs:
        offsets[id(p)] = offset
        offset += p.numel()
    segments, offset = [], 0
    for p in ours:
        segments.append((offset, offsets[id(p)], p.numel()))
        offset += p.numel()
    return segments


def _layout(bucket, prefix):
    tensors = bucket.gradients()
    layout = {"index": bucket.index(), "numel": bucket.buffer().numel(),
              "dtype": str(bucket.buffer().dtype).replace("torch.", ""),
              "shapes": [list(t.shape) for t in tensors]}
    signature = json.dumps(layout, sort_keys=True)
    layout["name"] = f"{prefix}.bucket{layout['index']}.{zlib.crc32(signature.encode()):08x}"
    if bucket.buffer().is_cuda:  # not in the name: checkpoints move between CPU and GPU runs
        layout["device"] = "cuda"
    return layout


class DCTHookState:
    """State of :func:`dct_hook`: the requests of the DDP buckets, running byte totals, and
    checkpoints.

    ``comm``: the MPI communicator of the DDP ranks (None: ``MPI.COMM_WORLD``; its ranks must be
    torch.distributed's, as :func:`init_process_group_from_mpi` makes them). ``keys``: dct's
    configuration keys without the ``dct_`` prefix (docs/configuration.md), e.g.
    ``density=0.01``, ``momentum=0.9``, ``values="fp16"``. ``name``: prefix of the requests'
    names in checkpoints. ``overlap``: run the calls on a worker thread while the backward goes
    on (True), or inside the hook (False, the default); see the module's text.

    ``bytes_sent`` and ``dense_bytes`` are this rank's totals over every call (logical bytes, as
    ``dct.Status`` counts them; ``dense_bytes`` is what DDP's ring allreduce would have sent);
    ``last_statuses`` the statuses of the last step's buckets; ``hook_seconds`` the time the
    calls took (copies, compression, exchange, averaging): inside the hook, or with ``overlap``
    on the worker, beside the backward.
    """

    def __init__(self, comm=None, name="ddp", overlap=False, **keys):
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.overlap = bool(overlap)
        if self.overlap and MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise ValueError("dct: overlap=True runs dct's calls on a worker thread, which needs "
                             "MPI_THREAD_MULTIPLE (mpi4py's default; mpi4py.rc.thread_level); "
                             "MPI was initialised without it: pass overlap=False")
        self._worker = None  # started at the first overlapped bucket
        self.name = name
        self.keys = keys
        self.momentum = float(keys.get("momentum", 0) or 0)
        self.bytes_sent = 0
        self.dense_bytes = 0
        self.calls = 0
        self.steps = 0
        self.hook_seconds = 0.0
        self.last_statuses = {}
        self._requests = {}  # name -> _BucketRequest
        self._found = {}  # (bucket index, parameter ids) -> (request, segments); see _request_for
        self._carry = {}  # id(parameter) -> residual left by a freed request
        self._restored_until_step = -1

    @property
    def compression_ratio(self):
        """dense_bytes / bytes_sent over every call so far (0 before any byte was sent)."""
        return self.dense_bytes / self.bytes_sent if self.bytes_sent else 0.0

    def check_optimizer(self, optimizer):
        """Raises ValueError if ``optimizer`` applies a momentum of its own while the hook's
        ``momentum`` correction is on (the momentum would be applied twice), or, with
        ``momentum_result="gradient"``, if it is not SGD with the hook's momentum (dampening 0,
        no Nesterov)."""
        if self.momentum == 0:
            return
        if str(self.keys.get("momentum_result", "update")) == "gradient":
            for group in optimizer.param_groups:
                if ("betas" in group or group.get("momentum") != self.momentum
                        or group.get("dampening", 0) or group.get("nesterov", False)):
                    raise ValueError(
                        f"dct: the hook returns gradients for a momentum of {self.momentum} "
                        "(momentum_result='gradient'); "
                        f"{type(optimizer).__name__} with momentum={group.get('momentum')}, "
                        f"dampening={group.get('dampening')}, nesterov={group.get('nesterov')}"
                        f"{', betas' if 'betas' in group else ''} does not apply that momentum. "
                        f"Use torch.optim.SGD(params, lr, momentum={self.momentum})")
            return
        for group in optimizer.param_groups:
            if group.get("momentum", 0) or group.get("nesterov", False) or "betas" in group:
                raise ValueError(
                    f"dct: the hook applies momentum {self.momentum} (dct_momentum); "
                    f"{type(optimizer).__name__} with momentum={group.get('momentum')} "
                    f"{'or betas ' if 'betas' in group else ''}would apply a momentum again. "
                    "Use torch.optim.SGD(params, lr, momentum=0), or drop the hook's momentum")

    # --- the hook's work -----------------------------------------------------------------------

    def _request_for(self, bucket):
        """The request of this bucket's parameters, and where each parameter's segment of the
        bucket lies in the request's buffer (None: in the same order). Found once per bucket
        layout: the answer holds until a request is made, freed or bound to its parameters
        (each clears `_found`)."""
        parameters = bucket.parameters()
        key = (bucket.index(), tuple(id(p) for p in parameters))
        found = self._found.get(key)
        if found is None:
            found = self._find_request(bucket, parameters)
            self._found[key] = found
        return found

    def _find_request(self, bucket, parameters):
        layout = _layout(bucket, self.name)
        entry = self._requests.get(layout["name"])
        if entry is not None and entry.params is None:
            entry.params = parameters  # restored from a file, now met in the same order
            self._found.clear()
        if entry is None:
            entry = self._same_parameters(layout, parameters)
        if entry is None:
            mine = {id(p) for p in parameters}
            for name, other in list(self._requests.items()):  # DDP grouped them otherwise
                if other.params is not None and mine & {id(p) for p in other.params}:
                    self._retire(name)
            entry = _BucketRequest(self, layout, parameters)
            self._requests[layout["name"]] = entry
            self._found.clear()
        return entry, _segments(entry.params, parameters)

    def _same_parameters(self, layout, parameters):
        """A request over the same parameters in another order: DDP regroups its buckets after
        the first step, in the order the gradients became ready; the request keeps its own."""
        ids = sorted(id(p) for p in parameters)
        shapes = [tuple(s) for s in layout["shapes"]]
        for entry in self._requests.values():
            if entry.layout["dtype"] != layout["dtype"]:
                continue
            if entry.params is not None:
                if sorted(id(p) for p in entry.params) == ids:
                    return entry
            elif (sorted(map(tuple, entry.layout["shapes"])) == sorted(shapes) and
                  len(set(shapes)) == len(shapes)):
                # Restored from a file: the parameters are known by their shapes, when no two
                # are alike (else the first layout met that is the saved one binds them).
                by_shape = dict(zip(shapes, parameters))
                entry.params = [by_shape[tuple(s)] for s in entry.layout["shapes"]]
                self._found.clear()
                return entry
        return None

    def _allreduce_later(self, bucket):
        """The overlapped hook: the bucket's call queued on the worker; its pending future."""
        if self._worker is None:
            self._worker = _overlap.Worker(f"dct-hook-{self.name}")
        snapshot = _overlap.BucketSnapshot(bucket)
        return self._worker.submit(lambda: self._allreduce(snapshot, _overlap.complete))

    def _drain(self):
        """Waits until the worker (if any) has finished every bucket handed to it."""
        if self._worker is not None:
            self._worker.drain()

    def _allreduce(self, bucket, complete=dct.Request.wait):
        start = time.perf_counter()
        entry, segments = self._request_for(bucket)
        entry.used_in_step = self.steps
        buffer, source = entry.buffer, bucket.buffer()
        if segments is None:
            buffer.copy_(source)
        else:
            for mine, theirs, n in segments:
                buffer[mine:mine + n].copy_(source[theirs:theirs + n])
        if self._carry:
            offset = 0
            for parameter in entry.params:
                carried = self._carry.pop(id(parameter), None)
                if carried is not None:
                    buffer[offset:offset + carried.numel()] += carried
                offset += parameter.numel()
        if buffer.is_cuda:  # dct's kernels on PyTorch's stream, after the backward's work
            entry.request.set_stream(torch.cuda.current_stream(buffer.device).cuda_stream)
        entry.request.start()
        status = complete(entry.request)
        self.calls += 1
        self.bytes_sent += status.bytes_sent
        self.dense_bytes += status.dense_bytes
        self.last_statuses[bucket.index()] = status
        size = self.comm.Get_size()
        if segments is None:
            torch.div(buffer, size, out=source)
        else:
            for mine, theirs, n in segments:
                torch.div(buffer[mine:mine + n], size, out=source[theirs:theirs + n])
        if bucket.is_last():
            self._end_step()
        self.hook_seconds += time.perf_counter() - start
        return source

    def _retire(self, name):
        """Frees a request whose layout DDP no longer uses; its residual waits in ``_carry``
        for its parameters' next calls."""
        entry = self._requests.pop(name)
        self._found.clear()
        if entry.params is None:
            warnings.warn(f"dct: request {name} restored from a checkpoint matches none of "
                          "DDP's buckets; its residual is dropped")
        else:
            residual = torch.from_numpy(entry.request.residual())
            offset = 0
            for parameter in entry.params:
                n = parameter.numel()
                self._carry[id(parameter)] = residual[offset:offset + n].clone()
                offset += n
        entry.request.free()

    def _end_step(self):
        """Retires the requests this step did not use (a request restored from a checkpoint
        gets until the step after DDP's regrouping to match a bucket)."""
        for name, entry in list(self._requests.items()):
            if entry.used_in_step == self.steps:
                continue
            if entry.params is None and self.steps <= self._restored_until_step:
                continue
            self._retire(name)
        self.steps += 1

    # --- checkpoints ---------------------------------------------------------------------------

    def save(self, path):
        """Saves the requests' state (residuals, velocities, thresholds: ``DCT_Checkpoint_save``
        into the HDF5 file ``path``) and, first, the bucket layouts and byte totals into
        ``path + ".json"`` (rank 0 writes it; both are written atomically). Collective."""
        self._drain()
        totals = self.comm.gather((self.bytes_sent, self.dense_bytes, self.calls), root=0)
        if self.comm.Get_rank() == 0:
            sidecar = {"format": 1, "ranks": self.comm.Get_size(), "steps": self.steps,
                       "layouts": [e.layout for e in self._requests.values()],
                       "totals": totals}
            temporary = f"{path}.json.tmp"
            with open(temporary, "w", encoding="utf-8") as f:
                json.dump(sidecar, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, f"{path}.json")
        self.comm.Barrier()
        dct.checkpoint_save(path, self.comm)

    def load(self, path):
        """Restores what :meth:`save` wrote, before the first step of a resumed run: creates
        the saved buckets' requests and loads their state (``DCT_Checkpoint_load``, which
        checks every checksum and changes nothing on error). Collective."""
        self._drain()
        if self._requests:
            raise RuntimeError("dct: load() must come before the hook's first call")
        with open(f"{path}.json", encoding="utf-8") as f:
            sidecar = json.load(f)
        entries = {}
        try:
            for layout in sidecar["layouts"]:
                entries[layout["name"]] = _BucketRequest(self, layout, None)
            dct.checkpoint_load(path, self.comm)
        except BaseException:
            for entry in entries.values():
                entry.request.free()
            raise
        self._requests = entries
        self._found.clear()
        self.steps = int(sidecar["steps"])
        self._restored_until_step = self.steps + 1  # DDP may regroup after its first step
        if sidecar["ranks"] == self.comm.Get_size():
            self.bytes_sent, self.dense_bytes, self.calls = sidecar["totals"][self.comm.Get_rank()]

    def free(self):
        """Ends the worker and frees every request (also done when the state is
        garbage-collected)."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        for entry in self._requests.values():
            entry.request.free()
        self._requests.clear()
        self._found.clear()


def dct_hook(state, bucket):
    """The DDP communication hook: the bucket's gradients averaged over the ranks through dct's
    compressed allreduce (see the module's documentation). Register it with
    ``ddp.register_comm_hook(state, dct_hook)``. With the state's ``overlap`` the returned
    future is pending: it completes on the state's worker once the bucket's call has."""
    if state.overlap and not bucket.buffer().is_cuda:
        return state._allreduce_later(bucket)
    future = torch.futures.Future()
    future.set_result(state._allreduce(bucket))
    return future

