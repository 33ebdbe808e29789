"""dct.torch: the DDP communication hook against a reference, its byte totals, the optimizer
check, checkpoints, and the carry of residuals when DDP regroups its buckets."""

import copy
import time

import numpy as np
import pytest
from mpi4py import MPI

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import dct  # noqa: E402
import dct.torch  # noqa: E402
from conftest import allsum, dyadic, reference_step  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def process_group():
    if not dist.is_initialized():
        dct.torch.init_process_group_from_mpi()
    assert dist.get_rank() == MPI.COMM_WORLD.rank
    assert dist.get_world_size() == MPI.COMM_WORLD.size
    yield


def model_and_data(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    for p in model.parameters():  # dyadic weights: every sum below is exact
        p.data = torch.from_numpy(dyadic(np.random.default_rng(seed), p.numel(), np.float32)
                                  .reshape(p.shape) / 16)
    generator = np.random.default_rng([seed, MPI.COMM_WORLD.rank])
    batches = [(torch.from_numpy(dyadic(generator, 8 * 20, np.float32).reshape(8, 20) / 8),
                torch.from_numpy(generator.integers(0, 4, 8))) for _ in range(6)]
    return model, batches


def train(ddp, optimizer, batches):
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        optimizer.step()


@pytest.mark.parametrize("overlap", [True, False])
def test_hook_equals_a_request_fed_the_same_buckets(overlap, comm=MPI.COMM_WORLD):
    model, batches = model_and_data()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = dct.torch.DCTHookState(density=0.1, name="hooktest", overlap=overlap)
    captured, statuses = [], []

    def recording_hook(state, bucket):  # DDP wants these parameter names
        gradient = bucket.buffer().clone().numpy()
        parameters, index = bucket.parameters(), bucket.index()

        def record(future):  # on completion, before DDP reads the bucket
            captured.append((parameters, gradient, future.value().clone().numpy()))
            statuses.append(state.last_statuses[index])
            return future.value()

        return dct.torch.dct_hook(state, bucket).then(record)

    ddp.register_comm_hook(state, recording_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.125)
    train(ddp, optimizer, batches[:3])
    # dct's documented selection per bucket, with each parameter's residual (DDP regroups its
    # buckets after the first step: the residual follows the parameter). In float32 as dct
    # adds: the gradients are not dyadic, and a sum of 2 ranks' floats rounds once either way.
    assert comm.size <= 2
    residuals = {id(p): np.zeros(p.numel(), np.float32) for p in model.parameters()}
    for parameters, gradient, averaged in captured:
        carried = np.concatenate([residuals[id(p)] for p in parameters])
        sent, residual = reference_step(gradient + carried, 0.1)
        offset = 0
        for p in parameters:
            residuals[id(p)] = residual[offset:offset + p.numel()]
            offset += p.numel()
        expected = (allsum(comm, sent) / comm.size).astype(np.float32)
        assert averaged.tobytes() == expected.tobytes()
    assert state.calls == len(captured) == 3 and len(state._requests) == 1
    assert state.dense_bytes == sum(s.dense_bytes for s in statuses) == 3 * statuses[0].dense_bytes
    assert state.bytes_sent == sum(s.bytes_sent for s in statuses)
    if comm.size > 1:
        assert state.compression_ratio > 5
    state.free()


def test_momentum_needs_plain_sgd():
    model, _ = model_and_data()
    state = dct.torch.DCTHookState(density=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="momentum"):
        state.check_optimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    with pytest.raises(ValueError, match="betas"):
        state.check_optimizer(torch.optim.Adam(model.parameters()))
    state.check_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    dct.torch.DCTHookState(density=0.1).check_optimizer(
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))


def test_gradient_result_keeps_the_optimizers_momentum():
    # The same training, once with the library's momentum and plain SGD, once with
    # momentum_result="gradient" and SGD's own momentum: the same weights, to rounding.
    weights = []
    for result, momentum in (("update", 0.0), ("gradient", 0.9)):
        model, batches = model_and_data()
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        state = dct.torch.DCTHookState(density=0.1, momentum=0.9, momentum_result=result,
                                       name="momentum_" + result)
        ddp.register_comm_hook(state, dct.torch.dct_hook)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.125, momentum=momentum)
        state.check_optimizer(optimizer)
        train(ddp, optimizer, batches)
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
        state.free()
    initial = torch.cat([p.detach().flatten() for p in model_and_data()[0].parameters()])
    assert not torch.allclose(weights[0], initial)  # it trained
    assert torch.allclose(weights[0], weights[1], rtol=1e-5, atol=1e-6)
    # The optimizer check follows the result: SGD's momentum must be the hook's.
    model, _ = model_and_data()
    state = dct.torch.DCTHookState(density=0.1, momentum=0.9, momentum_result="gradient")
    for bad in (torch.optim.SGD(model.parameters(), lr=0.1),
                torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5),
                torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True),
                torch.optim.Adam(model.parameters())):
        with pytest.raises(ValueError, match="momentum_result"):
            state.check_optimizer(bad)


def test_checkpoint_resumes_bit_for_bit(tmp_path_factory, comm=MPI.COMM_WORLD):
    path = comm.bcast(str(tmp_path_factory.mktemp("hook") / "dct.h5"), root=0)
    keys = dict(density=0.05, momentum=0.5, values="fp16")

    def setup(model_state=None):
        model, batches = model_and_data(seed=3)
        if model_state is not None:
            model.load_state_dict(model_state)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        state = dct.torch.DCTHookState(name="resume", **keys)
        ddp.register_comm_hook(state, dct.torch.dct_hook)
        return model, ddp, state, torch.optim.SGD(ddp.parameters(), lr=0.25), batches

    model, ddp, state, optimizer, batches = setup()
    train(ddp, optimizer, batches[:3])
    try:
        state.save(path)
    except dct.Error as error:
        if error.code == dct.ERR_NOT_COMPILED:
            pytest.skip("built without HDF5")
        raise
    snapshot = copy.deepcopy(model.state_dict())
    train(ddp, optimizer, batches[3:])
    uninterrupted = [p.detach().clone() for p in model.parameters()]
    totals = (state.bytes_sent, state.dense_bytes, state.calls)
    state.free()

    model, ddp, state, optimizer, batches = setup(snapshot)
    state.load(path)
    train(ddp, optimizer, batches[3:])
    assert all(torch.equal(a, b) for a, b in zip(uninterrupted, model.parameters()))
    assert (state.bytes_sent, state.dense_bytes, state.calls) == totals
    state.free()

    model, ddp, state, optimizer, batches = setup(snapshot)  # without the dct state: differs
    train(ddp, optimizer, batches[3:])
    assert not all(torch.equal(a, b) for a, b in zip(uninterrupted, model.parameters()))
    state.free()


class FakeBucket:
    """What DDP hands a hook (torch.distributed.GradBucket), for layouts DDP picks itself."""

    def __init__(self, index, parameters, last):
        self._index, self._parameters, self._last = index, parameters, last
        self._buffer = torch.cat([p.grad.reshape(-1) for p in parameters])

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer

    def gradients(self):
        return [p.grad for p in self._parameters]

    def parameters(self):
        return self._parameters

    def is_last(self):
        return self._last


def test_regrouped_buckets_keep_every_residual(comm=MPI.COMM_WORLD):
    rng = np.random.default_rng(21 + comm.rank)
    a, b = torch.zeros(30, requires_grad=True), torch.zeros(50, requires_grad=True)
    state = dct.torch.DCTHookState(density=0.1, name="regroup")
    inputs, delivered = np.zeros(80), np.zeros(80)

    def step(layout):
        for p in (a, b):
            p.grad = torch.from_numpy(dyadic(rng, p.numel(), np.float32))
        inputs[:] += np.concatenate([a.grad.numpy(), b.grad.numpy()])
        for index, group in enumerate(layout):
            bucket = FakeBucket(index, group, index == len(layout) - 1)
            out = dct.torch.dct_hook(state, bucket).wait().numpy() * comm.size
            offset = 0
            for p in group:
                start = 0 if p is a else 30
                delivered[start:start + p.numel()] += out[offset:offset + p.numel()]
                offset += p.numel()

    step([[a, b]])  # DDP's first layout: one bucket
    step([[b], [a]])  # regrouped: the one-bucket request is freed, its residual carried
    assert len(state._requests) == 2
    step([[b], [a]])
    residual = np.concatenate([state._requests[n].request.residual()
                               for n in sorted(state._requests, key=lambda n: "bucket1" in n)])
    residual = np.concatenate([residual[50:], residual[:50]])  # bucket 0 holds b, bucket 1 a
    assert np.array_equal(allsum(comm, delivered / comm.size) + allsum(comm, residual),
                          allsum(comm, inputs))
    state.free()


def test_overlapped_future_is_pending_while_a_peer_is_late(comm=MPI.COMM_WORLD):
    # The hook returns at once; the bucket's call completes on the worker when the late peer
    # joins, with the synchronous hook's bits.
    rng = np.random.default_rng(31 + comm.rank)
    p = torch.zeros(4000, requires_grad=True)
    results = {}
    for overlap in (True, False):
        state = dct.torch.DCTHookState(density=0.05, name=f"late{overlap}", overlap=overlap)
        rng = np.random.default_rng(31 + comm.rank)
        for step in range(3):
            p.grad = torch.from_numpy(dyadic(rng, p.numel(), np.float32))
            comm.Barrier()
            if comm.rank == 1 and step == 2:
                time.sleep(0.5)
            future = dct.torch.dct_hook(state, FakeBucket(0, [p], True))
            if overlap and comm.rank == 0 and comm.size > 1 and step == 2:
                assert not future.done()  # the peer has not started: the hook did not wait
            results.setdefault(overlap, []).append(future.wait().clone())
        assert state.calls == 3
        state.free()
    assert all(torch.equal(a, b) for a, b in zip(results[True], results[False]))


def test_overlapped_error_reaches_the_future_and_the_state_goes_on(comm=MPI.COMM_WORLD):
    state = dct.torch.DCTHookState(density=0.1, name="errors", overlap=True)
    bad = torch.zeros(10, dtype=torch.float64, requires_grad=True)
    bad.grad = torch.ones(10, dtype=torch.float64)
    bucket = FakeBucket(0, [bad], False)
    bucket._buffer = bucket._buffer.to(torch.int32)  # a type dct refuses, on every rank alike
    with pytest.raises(TypeError):
        dct.torch.dct_hook(state, bucket).wait()
    good = torch.zeros(40, requires_grad=True)
    good.grad = torch.from_numpy(dyadic(np.random.default_rng(5 + comm.rank), 40, np.float32))
    out = dct.torch.dct_hook(state, FakeBucket(1, [good], True)).wait()
    assert out.dtype == torch.float32 and state.calls == 1
    state.free()
    state.free()  # idempotent, the worker already ended


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("overlap", [True, False])
def test_16bit_buckets_are_summed_in_float32_and_rounded_once(dtype, overlap,
                                                              comm=MPI.COMM_WORLD):
    rng = np.random.default_rng(41 + comm.rank)
    p = torch.zeros(300, dtype=dtype, requires_grad=True)
    # Multiples of 1/64 below 2: exact in both 16-bit types and in any float32 sum of ranks.
    gradient = rng.integers(-128, 128, p.numel()) / 64.0
    p.grad = torch.from_numpy(gradient).to(dtype)
    state = dct.torch.DCTHookState(density=1, name=f"half{overlap}", overlap=overlap)
    out = dct.torch.dct_hook(state, FakeBucket(0, [p], True)).wait()
    expected = torch.from_numpy((allsum(comm, gradient) / comm.size).astype(np.float32)).to(dtype)
    assert out.dtype == dtype and torch.equal(out, expected)
    (entry,) = state._requests.values()
    assert entry.buffer.dtype == torch.float32
    assert entry.request.residual().dtype == np.float32
    state.free()
    # Compressed: the residual keeps in float32 what a 16-bit residual would round away.
    state = dct.torch.DCTHookState(density=0.01, name=f"small{overlap}", overlap=overlap)
    for step in range(3):  # 1, then 2^-12 twice: 1 + 2^-11 where unsent, in neither 16-bit type
        p.grad = torch.full((p.numel(),), 1.0 if step == 0 else 2.0 ** -12, dtype=dtype)
        dct.torch.dct_hook(state, FakeBucket(0, [p], True)).wait()
    (entry,) = state._requests.values()
    residual = entry.request.residual()
    assert residual.dtype == np.float32
    assert np.count_nonzero(residual == np.float32(1 + 2.0 ** -11)) > 250
    state.free()
