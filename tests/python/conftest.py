"""Shared by the Python tests, which run under mpiexec at 1 and 2 ranks (tests/python/
CMakeLists.txt): every rank runs the same tests in the same order, so collective calls match."""

import math

import numpy as np
import pytest
from mpi4py import MPI


@pytest.fixture
def comm():
    return MPI.COMM_WORLD


def dyadic(rng, count, dtype=np.float64):
    """Nonzero multiples of 1/64 below 16 in magnitude, with many ties: sums of a few ranks'
    values are exact in float32 and float64, so any order of addition gives the same bits."""
    values = rng.integers(-1024, 1024, count)
    values[values == 0] = 1
    return (values / 64.0).astype(dtype)


def reference_step(acc, density):
    """dct's documented adaptive selection (dct.h): the k = ceil(density * count) largest |acc|,
    ties at the k-th to the lowest indices. Returns (sent, residual)."""
    k = math.ceil(density * acc.size)
    order = np.argsort(-np.abs(acc), kind="stable")[:k]
    sent = np.zeros_like(acc)
    sent[order] = acc[order]
    return sent, acc - sent


def allsum(comm, array):
    """The sum over ranks (float64, exact for the dyadic data above)."""
    out = np.empty_like(array, dtype=np.float64)
    comm.Allreduce(np.ascontiguousarray(array, dtype=np.float64), out, op=MPI.SUM)
    return out
