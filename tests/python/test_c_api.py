"""The Python package against the C ABI on the same inputs: tests/python/c_reference.c wrote
its results (python.c_api runs it first, at the same rank count); the package must produce the
same bits, call for call, and the same residual."""

import os

import numpy as np
from mpi4py import MPI

import dct

COUNT, CALLS = 5000, 4
# The configurations of c_reference.c, in its order.
CONFIGS = [(np.float32, 0.05, "native", 0), (np.float64, 0.02, "fp16", 0.9),
           (np.float32, 0.01, "sign", 0.5), (np.float64, 1, "native", 0)]


def inputs(rank, call):
    i = np.arange(COUNT, dtype=np.int64)
    return ((i * 7919 + call * 104729 + rank * 15485863) % 4001 - 2000) / 64.0


def test_same_bits_as_the_c_api():
    comm = MPI.COMM_WORLD
    path = os.path.join(os.environ["DCT_C_REFERENCE_DIR"], f"c-np{comm.size}-rank{comm.rank}.bin")
    with open(path, "rb") as f:
        reference = f.read()
    offset = 0
    for dtype, density, values, momentum in CONFIGS:
        send, recv = np.zeros(COUNT, dtype), np.zeros(COUNT, dtype)
        with dct.allreduce_init(send, recv, comm, density=density, values=values,
                                momentum=momentum) as request:
            for call in range(CALLS):
                send[:] = inputs(comm.rank, call)
                request.start()
                request.wait()
                expected = reference[offset:offset + recv.nbytes]
                offset += recv.nbytes
                assert recv.tobytes() == expected, f"{dtype.__name__} {values} call {call}"
            expected = reference[offset:offset + recv.nbytes]
            offset += recv.nbytes
            assert request.residual().tobytes() == expected, f"{dtype.__name__} residual"
    assert offset == len(reference)
