"""dct.torch: the DDP communication hook against a reference, its byte totals, the optimizer
check, checkpoints, and the carry of residuals when DDP regroups its buckets."""

import copy

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


def test_hook_equals_a_request_fed_the_same_buckets(comm=MPI.COMM_WORLD):
    model, batches = model_and_data()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = dct.torch.DCTHookState(density=0.1, name="hooktest")
    captured, statuses = [], []

    def recording_hook(state, bucket):  # DDP wants these parameter names
        gradient = bucket.buffer().clone().numpy()
        future = dct.torch.dct_hook(state, bucket)
        captured.append((bucket.parameters(), gradient, future.value().clone().numpy()))
        statuses.append(state.last_statuses[bucket.index()])
        return future

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
            out = dct.torch.dct_hook(state, bucket).value().numpy() * comm.size
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
