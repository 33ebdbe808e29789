"""The Python package `dct` against dct's documented semantics, MPI and the C API's rules."""

import os

import numpy as np
import pytest
from mpi4py import MPI

import dct
from conftest import allsum, dyadic, reference_step


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("in_place", [False, True])
def test_allreduce_matches_reference_and_conserves(comm, dtype, in_place):
    rng = np.random.default_rng(100 + comm.rank)
    count, density = 1000, 0.05
    send = np.zeros(count, dtype)
    recv = np.zeros(count, dtype)
    residual = np.zeros(count, np.float64)
    inputs = np.zeros(count, np.float64)
    delivered = np.zeros(count, np.float64)
    request = dct.allreduce_init(dct.IN_PLACE if in_place else send, recv, comm,
                                 density=density, name=f"ref.{np.dtype(dtype).name}.{in_place}")
    with request:
        for call in range(1, 6):
            gradient = dyadic(rng, count, dtype)
            (recv if in_place else send)[:] = gradient
            inputs += gradient
            sent, residual = reference_step(gradient + residual, density)
            request.start()
            status = request.wait()
            expected = allsum(comm, sent)
            assert np.array_equal(recv.astype(np.float64), expected), f"call {call}"
            delivered += recv
            assert np.array_equal(request.residual().astype(np.float64), residual)
            assert status.count == count and status.calls == call
            assert status.nnz_sent == 50 and status.density == pytest.approx(0.05)
            itemsize = np.dtype(dtype).itemsize
            assert status.dense_bytes == 2 * (comm.size - 1) * count * itemsize // comm.size
            assert (status.bytes_sent > 0) == (comm.size > 1)
            assert status.algorithm in ("allgather", "split", "recursive_doubling", "dense")
        # Error feedback: every input is either delivered (once, to every rank) or waiting.
        assert np.array_equal(delivered + allsum(comm, request.residual()),
                              allsum(comm, inputs))


def test_density_one_is_mpi_allreduce_bitwise(comm):
    rng = np.random.default_rng(7 + comm.rank)
    send = rng.standard_normal(4097).astype(np.float32)
    recv = np.empty_like(send)
    with dct.allreduce_init(send, recv, comm, density=1.0) as request:
        request.start()
        status = request.wait()
    expected = np.empty_like(send)
    comm.Allreduce(send, expected, op=MPI.SUM)
    assert recv.tobytes() == expected.tobytes()
    assert status.density == 1.0


def test_torch_tensors_are_buffers(comm):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9 + comm.rank)
    data = dyadic(rng, 512, np.float32)
    results = []
    for make in (np.array, torch.from_numpy):
        send, recv = make(data.copy()), make(np.zeros_like(data))
        with dct.allreduce_init(send, recv, comm, density=0.1) as request:
            request.start()
            request.wait()
        results.append(np.asarray(recv).tobytes())
    assert results[0] == results[1]


def test_test_and_waitall(comm):
    a, b = np.ones(300, np.float32), np.full(300, 2.0, np.float32)
    ra, rb = np.empty_like(a), np.empty_like(b)
    with dct.allreduce_init(a, ra, comm, density=0.1) as x, \
            dct.allreduce_init(b, rb, comm, density=0.1) as y:
        x.start()
        status = None
        while status is None:
            status = x.test()
        assert status.calls == 1
        x.start()
        y.start()
        statuses = dct.waitall([x, y])
        assert [s.calls for s in statuses] == [2, 1]
        assert statuses[1].nnz_sent == 30


def test_info_reads_back_the_keys(comm):
    buffer = np.zeros(64, np.float64)
    with dct.allreduce_init(dct.IN_PLACE, buffer, comm, density=0.25, values="fp16",
                            momentum=0.9, name="info") as request:
        info = request.info
    assert info["dct_density"] == "0.25" and info["dct_values"] == "fp16"
    assert info["dct_momentum"] == "0.9" and info["dct_name"] == "info"


def test_errors_carry_code_and_message_and_change_nothing(comm):
    buffer = np.ones(100, np.float32)
    with pytest.raises(dct.Error) as error:
        dct.allreduce_init(dct.IN_PLACE, buffer, comm, densty=0.1)
    assert error.value.code == dct.ERR_INFO and error.value.name == "DCT_ERR_INFO"
    assert "dct_densty" in error.value.message and "dct_density" in error.value.message
    # A request started twice: DCT_ERR_ACTIVE, and the first call still completes.
    out = np.empty_like(buffer)
    with dct.allreduce_init(buffer, out, comm, density=0.5) as request:
        request.start()
        with pytest.raises(dct.Error) as error:
            request.start()
        assert error.value.code == dct.ERR_ACTIVE
        with pytest.raises(dct.Error) as error:
            request.residual()
        assert error.value.code == dct.ERR_ACTIVE
        assert request.wait().calls == 1
        assert np.count_nonzero(out) == 50 and set(out[out != 0]) == {comm.size}
    with pytest.raises(dct.Error) as error:
        request.start()
    assert error.value.code == dct.ERR_REQUEST


def test_ranks_that_disagree_all_get_the_same_error(comm):
    count = 100 + comm.rank if comm.size > 1 else 100
    buffer = np.zeros(count, np.float32)
    if comm.size == 1:
        pytest.skip("needs 2 ranks")
    with pytest.raises(dct.Error) as error:
        dct.allreduce_init(dct.IN_PLACE, buffer, comm, density=0.1)
    assert error.value.code == dct.ERR_MISMATCH


def test_buffers_that_cannot_be_bound_are_refused():
    with pytest.raises(TypeError, match="does not expose its memory"):
        dct.allreduce_init(dct.IN_PLACE, [1.0, 2.0])
    with pytest.raises(TypeError, match="not C-contiguous"):
        dct.allreduce_init(dct.IN_PLACE, np.zeros((4, 4), np.float32)[:, 1])
    with pytest.raises(TypeError, match="no datatype"):
        dct.allreduce_init(dct.IN_PLACE, np.zeros(4, np.float16))
    with pytest.raises(ValueError, match="has 4 elements; this call needs 5"):
        dct.allreduce_init(np.zeros(4, np.float32), np.zeros(5, np.float32))
    readonly = np.zeros(4, np.float32)
    readonly.flags.writeable = False
    with pytest.raises(TypeError, match="read-only"):
        dct.allreduce_init(dct.IN_PLACE, readonly)


def test_tensors_without_an_mpi_type_are_refused():
    torch = pytest.importorskip("torch")
    for dtype in (torch.bfloat16, torch.float16):
        with pytest.raises(TypeError, match="no datatype"):
            dct.allreduce_init(dct.IN_PLACE, torch.zeros(4, dtype=dtype))


def test_other_datatypes_are_handed_to_mpi(comm):
    send = np.arange(10, dtype=np.int32)
    recv = np.empty_like(send)
    with dct.allreduce_init(send, recv, comm, density=0.1) as request:
        request.start()
        assert request.wait().algorithm == "passthrough"
    assert np.array_equal(recv, send * comm.size)


def test_drop_in_allreduce_and_its_status(comm):
    rng = np.random.default_rng(3 + comm.rank)
    send = dyadic(rng, 2000, np.float64)
    recv = np.empty_like(send)
    dct.allreduce(send, recv, comm)
    density = float(dct.comm_get_info(comm)["dct_density"])
    sent, _ = reference_step(send, density)
    assert np.array_equal(recv, allsum(comm, sent))
    status = dct.allreduce_status(recv, comm)
    assert status.calls == 1 and status.nnz_sent == sent.nonzero()[0].size


def test_checkpoint_restores_residual_and_velocity_bit_for_bit(comm, tmp_path_factory):
    if not dct.backend_compiled("kokkos"):
        pytest.skip("no host backend")
    path = comm.bcast(str(tmp_path_factory.mktemp("ckpt") / "state.h5"), root=0)
    rng = np.random.default_rng(11 + comm.rank)
    gradients = [dyadic(rng, 800, np.float32) for _ in range(6)]

    def run(calls, load=False, save=False):
        buffer = np.zeros(800, np.float32)
        results = []
        with dct.allreduce_init(dct.IN_PLACE, buffer, comm, density=0.02, momentum=0.5,
                                name="layer") as request:
            if load:
                dct.checkpoint_load(path, comm)
            for gradient in calls:
                buffer[:] = gradient
                request.start()
                request.wait()
                results.append(buffer.copy())
            if save:
                try:
                    dct.checkpoint_save(path, comm)
                except dct.Error as error:
                    if error.code == dct.ERR_NOT_COMPILED:
                        pytest.skip("built without HDF5")
                    raise
        return results

    run(gradients[:3], save=True)
    uninterrupted = run(gradients)[3:]
    resumed = run(gradients[3:], load=True)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(uninterrupted, resumed))
    fresh = run(gradients[3:])
    assert any(a.tobytes() != b.tobytes() for a, b in zip(uninterrupted, fresh))
    with pytest.raises(dct.Error) as error:
        dct.checkpoint_load(path + ".missing", comm)
    assert error.value.code == dct.ERR_CKPT_NOT_FOUND


def test_checkpoint_isave_holds_the_state_of_the_call(comm, tmp_path_factory):
    directory = comm.bcast(str(tmp_path_factory.mktemp("isave")), root=0)
    blocking, background = directory + "/save.h5", directory + "/isave.h5"
    buffer = np.zeros(900, np.float32)
    rng = np.random.default_rng(5 + comm.rank)
    with dct.allreduce_init(dct.IN_PLACE, buffer, comm, density=0.02, name="layer") as request:
        def step():
            buffer[:] = dyadic(rng, 900, np.float32)
            request.start()
            request.wait()
        for _ in range(3):
            step()
        try:
            dct.checkpoint_save(blocking, comm)
        except dct.Error as error:
            if error.code == dct.ERR_NOT_COMPILED:
                pytest.skip("built without HDF5")
            raise
        with dct.checkpoint_isave(background, comm) as save:
            assert save.pending
            with pytest.raises(dct.Error) as error:  # one save to a path at a time
                dct.checkpoint_save(background, comm)
            assert error.value.code == dct.ERR_ACTIVE
            step()  # training goes on: the file keeps the state of the isave
        assert not save.pending
    if comm.rank == 0:
        with open(blocking, "rb") as a, open(background, "rb") as b:
            assert a.read() == b.read()


def test_alltoallv_keeps_the_largest_of_every_row(comm):
    d, rows = 8, 3  # rows per block
    rng = np.random.default_rng(5 + comm.rank)
    send = dyadic(rng, comm.size * rows * d, np.float32)
    recv = np.zeros_like(send)
    counts = [rows * d] * comm.size
    displs = [i * rows * d for i in range(comm.size)]
    gradient = dyadic(rng, recv.size, np.float32)  # of what this rank received
    back = np.zeros_like(send)
    with dct.alltoallv_init(send, counts, displs, recv, counts, displs, comm, row_length=d,
                            keep=0.25) as forward, \
            forward.backward_init(gradient, counts, displs, back, counts, displs) as backward:
        forward.start()
        status = forward.wait()
        backward.start()
        backward.wait()
    expected = np.zeros_like(send)
    for r, row in enumerate(send.reshape(-1, d)):
        keep = np.argsort(-np.abs(row), kind="stable")[:2]
        expected.reshape(-1, d)[r, keep] = row[keep]
    mine = np.empty_like(expected)
    comm.Alltoall(expected, mine)
    assert np.array_equal(recv, mine)
    assert status.nnz_sent == comm.size * rows * 2
    # The backward returns the gradients of the same entries only, each to where it came from.
    returned = np.empty_like(gradient)
    comm.Alltoall(np.where(mine != 0, gradient, 0).astype(np.float32), returned)
    assert np.array_equal(back, returned)


def test_a_library_of_another_mpi_is_refused_before_it_is_loaded(tmp_path):
    fake = tmp_path / "libdct.so"
    fake.write_bytes(b"\x7fELF ... libmpich.so.12\0libc.so.6\0")
    assert dct._capi._family_linked(str(fake)) == "MPICH"
    assert dct._capi._family_linked(dct._capi._location.library_path()) in ("Open MPI", "MPICH")
    with pytest.raises(ImportError, match="different MPI libraries"):
        dct._capi._refuse_other_mpi("MPICH Version: 4.0.2", str(fake))


def test_library_and_version(comm):
    assert dct.version()[:2] == (0, 5)
    assert dct.error_name(dct.ERR_CKPT_IO) == "DCT_ERR_CKPT_IO"
    assert os.path.exists(dct._capi._location.library_path())
