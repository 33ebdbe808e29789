"""The package as `cmake --install` lays it out: found on PYTHONPATH under the prefix, it loads
the prefix's libdct (not the build tree's) and runs a compressed allreduce."""

import os

import numpy as np
from mpi4py import MPI

import dct


def test_installed_package_uses_the_installed_library():
    prefix = os.path.realpath(os.environ["DCT_TEST_PREFIX"])
    assert os.path.realpath(dct.__file__).startswith(prefix + os.sep)
    assert os.path.realpath(dct._capi._location.library_path()).startswith(prefix + os.sep)
    send = np.arange(1000, dtype=np.float32)
    recv = np.empty_like(send)
    with dct.allreduce_init(send, recv, MPI.COMM_WORLD, density=0.01) as request:
        request.start()
        status = request.wait()
    assert status.nnz_sent == 10
    assert np.array_equal(recv[-10:], send[-10:] * MPI.COMM_WORLD.size)
