"""The package against a careless user (issue 61): every buffer is checked against what the C
call will read and write before dct is called (TypeError for what cannot be that buffer,
ValueError for a wrong size), and nothing dct may still write or complete is freed when the
user drops it. Every rank runs the same misuse, so the refusals are the same on every rank."""

import gc
import os
import subprocess
import sys
import textwrap
import warnings
import weakref

import numpy as np
import pytest
from mpi4py import MPI

import dct
from conftest import dyadic


def progress_until(comm, done, calls=200):
    """Runs a small request's calls (completion calls: they progress and collect what was
    dropped) until ``done()`` holds on every rank; the ranks agree each time, so they run the
    same number of calls."""
    a, b = np.ones(64, np.float32), np.zeros(64, np.float32)
    with dct.allreduce_init(a, b, comm, density=0.5, name="misuse.progress") as request:
        for _ in range(calls):
            request.start()
            request.wait()
            if comm.allreduce(bool(done()), op=MPI.LAND):
                return True
    return False


# --- row 1: a started request that is dropped keeps its buffers until it completes -------------

def test_a_dropped_started_request_keeps_its_buffers_until_it_completes(comm):
    count = 1 << 22  # freed, memory this large goes back to the system: a write there is SIGSEGV
    send, recv = np.ones(count, np.float32), np.zeros(count, np.float32)
    request = dct.allreduce_init(send, recv, comm, density=0.001, name="misuse.dropped")
    request.start()
    received = weakref.ref(recv)
    with pytest.warns(ResourceWarning, match="dropped"):
        del request, recv
        gc.collect()
    assert received() is not None  # dct writes it at the completion: the package holds it
    victim = np.full(256, 7.0, np.float32)  # where a freed buffer's memory would be reused
    assert progress_until(comm, lambda: received() is None)  # completed, then let go
    assert np.all(victim == 7.0)


def test_a_dropped_started_request_does_not_block_a_checkpoint(comm, tmp_path_factory):
    path = comm.bcast(str(tmp_path_factory.mktemp("dropped-request") / "state.h5"), root=0)
    send, recv = np.ones(20000, np.float32), np.zeros(20000, np.float32)
    request = dct.allreduce_init(send, recv, comm, density=0.01, name="misuse.unwaited")
    request.start()
    with pytest.warns(ResourceWarning):
        del request, recv
        gc.collect()
    try:  # no handle is left to wait: the package completes it first (it was DCT_ERR_ACTIVE)
        dct.checkpoint_save(path, comm)
    except dct.Error as error:
        if error.code == dct.ERR_NOT_COMPILED:
            pytest.skip("built without HDF5")
        raise
    assert dct._pending._dropped == []


def test_a_with_block_left_by_an_exception_defers_the_free(comm):
    buffer = np.ones(1000, np.float32)
    out = np.zeros_like(buffer)
    received = weakref.ref(out)
    with pytest.raises(KeyError), pytest.warns(ResourceWarning):
        with dct.allreduce_init(buffer, out, comm, density=0.01, name="misuse.with") as request:
            request.start()
            raise KeyError("the user's own error, not DCT_ERR_ACTIVE")
    del out
    with pytest.raises(dct.Error) as error:
        request.start()  # the Request is freed for its user ...
    assert error.value.code == dct.ERR_REQUEST
    assert received() is not None  # ... and its call still owns the buffers until it completes
    assert progress_until(comm, lambda: received() is None)


EXIT_SCRIPT = """
    import atexit, sys, weakref
    import numpy as np
    from mpi4py import MPI
    finished = {}
    # Registered before dct's: runs after it, before mpi4py's MPI_Finalize.
    atexit.register(lambda: print("exit", finished["recv"]() is None, flush=True))
    import dct
    recv = np.zeros(1 << 16, np.float32)
    request = dct.allreduce_init(np.ones_like(recv), recv, density=0.01)
    try:
        save = dct.checkpoint_isave(sys.argv[1])
    except dct.Error as error:
        assert error.code == dct.ERR_NOT_COMPILED
        print("no hdf5", flush=True)
    else:
        del save
    request.start()
    finished["recv"] = weakref.ref(recv)
    del request, recv
"""


def test_what_is_dropped_is_completed_at_exit(comm, tmp_path):
    if comm.rank != 0:
        pytest.skip("one singleton process, from rank 0")
    env = {k: v for k, v in os.environ.items()  # a singleton MPI job, not a rank of this one
           if not k.startswith(("OMPI_", "PMIX", "PMI_")) or "RUN_AS_ROOT" in k}
    path = tmp_path / "exit.h5"
    done = subprocess.run([sys.executable, "-W", "ignore::ResourceWarning", "-c",
                           textwrap.dedent(EXIT_SCRIPT), str(path)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "exit True" in done.stdout, done.stdout + done.stderr
    # The dropped save was completed: the file has its name, no temporary is left.
    saved = [] if "no hdf5" in done.stdout else ["exit.h5"]
    assert sorted(p.name for p in tmp_path.iterdir()) == saved


# --- row 2: alltoallv's buffers against their counts and displacements -----------------------

def alltoallv_arguments(comm, rows=2, d=4):
    block = rows * d
    send = dyadic(np.random.default_rng(1 + comm.rank), comm.size * block, np.float32)
    counts = [block] * comm.size
    displs = [j * block for j in range(comm.size)]
    return dict(sendbuf=send, sendcounts=counts, sdispls=displs, recvbuf=np.zeros_like(send),
                recvcounts=list(counts), rdispls=list(displs), comm=comm, row_length=d)


def readonly(array):
    array = array.copy()
    array.flags.writeable = False
    return array


ALLTOALLV_MISUSE = {
    "int8 recvbuf": (TypeError, lambda a: {"recvbuf": np.zeros(a["recvbuf"].size, np.int8)}),
    "float64 recvbuf": (TypeError, lambda a: {"recvbuf": np.zeros(a["recvbuf"].size)}),
    "big-endian recvbuf": (TypeError, lambda a: {"recvbuf": a["recvbuf"].astype(">f4")}),
    "read-only recvbuf": (TypeError, lambda a: {"recvbuf": readonly(a["recvbuf"])}),
    "strided recvbuf": (TypeError,
                        lambda a: {"recvbuf": np.zeros(2 * a["recvbuf"].size, np.float32)[::2]}),
    "IN_PLACE sendbuf": (TypeError, lambda a: {"sendbuf": dct.IN_PLACE}),
    "list recvbuf": (TypeError, lambda a: {"recvbuf": [0.0] * a["recvbuf"].size}),
    "recvcounts past the end": (ValueError, lambda a: {
        "recvcounts": a["recvcounts"][:-1] + [a["recvcounts"][-1] + 8]}),
    "rdispls past the end": (ValueError, lambda a: {
        "rdispls": [a["recvbuf"].size] + a["rdispls"][1:]}),
    "sdispls past the end": (ValueError, lambda a: {
        "sdispls": a["sdispls"][:-1] + [a["sendbuf"].size - 4]}),
    "recvbuf too small": (ValueError, lambda a: {"recvbuf": np.zeros(a["recvbuf"].size - 1,
                                                                     np.float32)}),
    "negative count": (ValueError, lambda a: {"sendcounts": [-8] + a["sendcounts"][1:]}),
    "negative displacement": (ValueError, lambda a: {"rdispls": [-8] + a["rdispls"][1:]}),
    "huge count": (ValueError, lambda a: {"recvcounts": [1 << 64] + a["recvcounts"][1:]}),
    "fractional count": (TypeError, lambda a: {"sendcounts": [8.5] + a["sendcounts"][1:]}),
    "one count too few": (ValueError, lambda a: {"recvcounts": a["recvcounts"] + [8]}),
    "recvbuf is sendbuf": (ValueError, lambda a: {"recvbuf": a["sendbuf"]}),
}


@pytest.mark.parametrize("case", ALLTOALLV_MISUSE)
def test_alltoallv_checks_every_buffer_before_dct_is_called(comm, case):
    error, change = ALLTOALLV_MISUSE[case]
    arguments = alltoallv_arguments(comm)
    arguments.update(change(arguments))
    with pytest.raises(error, match="dct: "):
        dct.alltoallv_init(**arguments)


def test_alltoallv_receive_blocks_must_not_overlap(comm):
    if comm.size == 1:
        pytest.skip("needs two receive blocks")
    arguments = alltoallv_arguments(comm)
    arguments["rdispls"] = [0] * comm.size
    with pytest.raises(ValueError, match="overlap"):
        dct.alltoallv_init(**arguments)


def test_alltoallv_after_refusals_and_its_backward_and_residual(comm):
    arguments = alltoallv_arguments(comm)
    send, recv = arguments["sendbuf"], arguments["recvbuf"]
    counts, displs = arguments["sendcounts"], arguments["sdispls"]
    # A buffer larger than its blocks is fine: dct touches the blocks only.
    gradient = np.zeros(recv.size + 5, np.float32)
    with dct.alltoallv_init(**arguments, keep=0.5) as forward:
        for bad, error in ((np.zeros(send.size), TypeError),  # float64 for a float32 forward
                           (np.zeros(send.size - 1, np.float32), ValueError),
                           (readonly(np.zeros(send.size, np.float32)), TypeError)):
            with pytest.raises(error):
                forward.backward_init(gradient, counts, displs, bad, counts, displs)
        back = np.zeros_like(send)
        with forward.backward_init(gradient, counts, displs, back, counts, displs) as backward:
            forward.start()
            forward.wait()
            backward.start()
            backward.wait()
        assert forward.count == sum(counts)  # what DCT_Request_get_residual writes
        assert forward.residual().tobytes() == bytes(4 * sum(counts))
        with pytest.raises(ValueError):
            forward.residual(np.zeros(sum(counts) - 1, np.float32))
        with pytest.raises(TypeError):
            forward.residual(np.zeros(sum(counts), np.float64))
    # The refused calls created nothing and changed nothing: the result is the masked input.
    assert np.count_nonzero(recv) == recv.size // 2


# --- row 3: non-native byte order ------------------------------------------------------------

@pytest.mark.parametrize("dtype", [">f4", ">f8"])
def test_non_native_byte_order_is_refused(comm, dtype):
    swapped = np.ones(16, np.dtype(dtype))
    native = np.ones(16, np.dtype(dtype).newbyteorder("="))
    for send, recv in ((dct.IN_PLACE, swapped), (swapped, native), (native, swapped)):
        with pytest.raises(TypeError, match="byte order"):
            dct.allreduce_init(send, recv, comm, density=1.0)
    with pytest.raises(TypeError, match="byte order"):
        dct.allreduce(dct.IN_PLACE, swapped, comm)
    with pytest.raises(TypeError, match="byte order"):
        dct.allreduce_init(dct.IN_PLACE, memoryview(swapped), comm)
    with dct.allreduce_init(native, native.copy(), comm, density=1.0) as request:
        with pytest.raises(TypeError, match="byte order"):
            request.residual(np.zeros(16, np.dtype(dtype)))


# --- row 10: a dropped asynchronous save ----------------------------------------------------

def test_a_dropped_isave_is_completed_at_the_next_save_to_its_path(comm, tmp_path_factory):
    directory = comm.bcast(str(tmp_path_factory.mktemp("dropped")), root=0)
    path = os.path.join(directory, "state.h5")
    buffer = np.zeros(500, np.float32)
    with dct.allreduce_init(dct.IN_PLACE, buffer, comm, density=0.02,
                            name="misuse.isave") as request:
        buffer[:] = dyadic(np.random.default_rng(comm.rank), 500, np.float32)
        request.start()
        request.wait()
        try:
            save = dct.checkpoint_isave(path, comm)
        except dct.Error as error:
            if error.code == dct.ERR_NOT_COMPILED:
                pytest.skip("built without HDF5")
            raise
        with pytest.warns(ResourceWarning, match="dropped"):
            del save
            gc.collect()
        dct.checkpoint_save(path, comm)  # was DCT_ERR_ACTIVE for the rest of the process
        dct.checkpoint_load(path, comm)
        for later in (dct.checkpoint_isave, dct.checkpoint_load, dct.checkpoint_save):
            save = dct.checkpoint_isave(path, comm)
            with pytest.warns(ResourceWarning):
                del save
                gc.collect()
            result = later(path, comm)
            if result is not None:
                result.wait()
        dct.checkpoint_load(path, comm)
    comm.Barrier()
    if comm.rank == 0:
        assert sorted(os.listdir(directory)) == ["state.h5"]  # no temporary left


def test_communicators_and_ops_are_checked(comm):
    buffer = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match="comm"):
        dct.allreduce_init(dct.IN_PLACE, buffer, "MPI.COMM_WORLD")
    with pytest.raises(TypeError, match="op"):
        dct.allreduce_init(dct.IN_PLACE, buffer, comm, op="sum")
    with pytest.raises(dct.Error) as error:
        dct.alltoallv_init(buffer, [8], [0], buffer.copy(), [8], [0], MPI.COMM_NULL,
                           row_length=8)
    assert error.value.code == dct.ERR_COMM


def test_checkpoint_paths_and_communicators_are_checked(comm):
    with pytest.raises(ValueError, match="NUL"):
        dct.checkpoint_save("state\0.h5", comm)
    with pytest.raises(TypeError):
        dct.checkpoint_load(42, comm)
    with pytest.raises(dct.Error) as error:
        dct.checkpoint_save("state.h5", MPI.COMM_NULL)
    assert error.value.code in (dct.ERR_COMM, dct.ERR_NOT_COMPILED)


# --- row 11: tensors dct cannot use ---------------------------------------------------------

def test_tensors_dct_cannot_use_are_refused_with_a_type_error(comm):
    torch = pytest.importorskip("torch")
    dense = torch.zeros(4, 4)
    refused = {
        "sparse_coo": dense.to_sparse(),
        "non-contiguous": dense.t(),
        "meta": torch.zeros(16, device="meta"),
        "conjugated": torch.zeros(16, dtype=torch.complex64).conj(),
        "requires grad": torch.zeros(16, requires_grad=True),
        "bfloat16": torch.zeros(16, dtype=torch.bfloat16),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: CSR support is in beta
        refused["sparse_csr"] = dense.to_sparse_csr()
    for name, tensor in refused.items():
        with pytest.raises(TypeError, match="dct: "):
            dct.allreduce_init(dct.IN_PLACE, tensor, comm)
    # Read, not written: a tensor that requires grad is a valid send buffer.
    send = torch.ones(16, requires_grad=True)
    recv = torch.zeros(16)
    with dct.allreduce_init(send, recv, comm, density=1.0) as request:
        request.start()
        request.wait()
        with pytest.raises(TypeError, match="requires grad"):
            request.residual(torch.zeros(16, requires_grad=True))
    assert torch.equal(recv, torch.full((16,), float(comm.size)))


# --- the rest of a careless user's buffers --------------------------------------------------

def test_buffers_without_usable_memory_are_type_errors(comm):
    good = np.zeros(16, np.float32)
    misaligned = np.frombuffer(bytearray(65), np.float32, 16, offset=1)
    for bad in ([0.0] * 16, (0.0,) * 16, None, "sixteen", 16, dct.IN_PLACE,
                np.zeros((4, 4), np.float32, order="F")[:, :3], np.zeros((4, 4), np.float32).T,
                np.zeros(16, "S4"), np.zeros(16, object), np.zeros(16, np.float16),
                misaligned, readonly(good), memoryview(b"\0" * 64), np.float32(0)):
        with pytest.raises(TypeError, match="dct: "):
            dct.allreduce_init(dct.IN_PLACE, bad, comm)
        with pytest.raises(TypeError, match="dct: "):
            dct.allreduce(dct.IN_PLACE, bad, comm)
    for bad_send in ([0.0] * 16, np.zeros(16, np.float64), np.zeros(16, np.int32)):
        with pytest.raises(TypeError, match="dct: "):
            dct.allreduce_init(bad_send, good, comm)
    with pytest.raises(TypeError, match="waitall"):
        dct.waitall([good])


def test_wrong_sizes_and_partial_overlaps_are_value_errors(comm):
    array = np.zeros(32, np.float32)
    for send, recv in ((np.zeros(15, np.float32), array[:16]), (array[:16], array[8:24]),
                       (array[8:24], array[:16])):
        with pytest.raises(ValueError, match="dct: "):
            dct.allreduce_init(send, recv, comm)
        with pytest.raises(ValueError, match="dct: "):
            dct.allreduce(send, recv, comm)
    with dct.allreduce_init(dct.IN_PLACE, array, comm, density=0.5) as request:
        for out in (np.zeros(31, np.float32), np.zeros(33, np.float32)):
            with pytest.raises(ValueError, match="needs 32"):
                request.residual(out)
        request.start()
        with pytest.raises(ValueError):  # refused before dct: the call in flight is untouched
            request.residual(np.zeros(1, np.float32))
        request.wait()


def test_valid_but_unusual_buffers_give_mpis_bits(comm):
    rng = np.random.default_rng(40 + comm.rank)
    data = dyadic(rng, 24, np.float32)
    expected = np.empty_like(data)
    comm.Allreduce(data, expected, op=MPI.SUM)

    def reduce(send, recv):
        with dct.allreduce_init(send, recv, comm, density=1.0) as request:
            request.start()
            request.wait()
        return np.asarray(recv).reshape(-1)

    assert reduce(data, np.zeros((4, 6), np.float32)).tobytes() == expected.tobytes()
    assert reduce(memoryview(data), memoryview(np.zeros(24, np.float32))).tobytes() \
        == expected.tobytes()
    assert reduce(readonly(data), memoryview(bytearray(96)).cast("f")).tobytes() \
        == expected.tobytes()
    same = data.copy()
    assert reduce(same, same).tobytes() == expected.tobytes()  # one buffer: in place (dct.h)
    single = np.array(data[0])  # 0-d: one element
    assert reduce(single, np.array(np.float32(0))).tobytes() == expected[:1].tobytes()
