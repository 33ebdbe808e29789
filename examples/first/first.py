# The README's first program in Python (bindings/python: mpi4py + numpy, no compiled
# extension): failures raise dct.Error with dct's code and message. README.md shows it whole,
# from the marker below (ctest readme.snippets keeps them equal; example.first.python runs it).
#
#   PYTHONPATH=build/python mpiexec -n 2 python3 examples/first/first.py
# README begin
from mpi4py import MPI
import numpy as np
import dct

rank = MPI.COMM_WORLD.rank
grad = np.zeros(1 << 20, dtype=np.float32)  # or a CPU torch tensor
grad_sum = np.empty_like(grad)
i = np.arange(grad.size)
with dct.allreduce_init(grad, grad_sum, MPI.COMM_WORLD, density=0.01) as request:
    for step in range(20):
        grad[:] = (i * 79 + step * 1049 + rank) % 2001 - 1000  # your backward pass writes grad
        request.start()
        status = request.wait()  # was MPI.COMM_WORLD.Allreduce(grad, grad_sum)
        # your optimiser applies grad_sum
if rank == 0:
    print(f"dct: {status.calls} calls, "
          f"{status.total_dense_bytes / status.total_bytes_sent:.1f}x fewer bytes than "
          f"MPI_Allreduce, density {status.density:.4f}")
# README end
