"""What hpc/sim/simulate.py simulates and how: the runs' sizes, the platform, SMPI's settings,
the scaling constants, and the keys of a run's results. Shared by simulate.py (the runs) and
sim_report.py (the page). Standard library only."""
import os

# --- What is simulated -------------------------------------------------------------------
FULL_COUNT = 25_000_000  # 100 MB of fp32 (10^8 bytes)
BANDWIDTHS_GBPS = [25, 100]
RANKS = [64, 256, 1024]
DENSITIES = ["0.001", "0.01", "0.05"]
# dct_algorithm values; a name that DCT_Allreduce_init refuses is reported as n/a.
# X_r: X with dct_result_density equal to the density (the result stays sparse, as Ok-Topk's).
DCT_ALGORITHMS = ["allgather", "dense", "auto", "auto_r", "split", "split_r", "hierarchical",
                  "hierarchical_r", "recursive_doubling"]
# The algorithms with segment histograms, whose re-balancing call is measured apart.
REBALANCING = ("split", "hierarchical")
TARGET_RANKS, TARGET_DENSITY = 1024, "0.01"
TARGET_BANDWIDTH = 25  # issue 20's targets: at 25 Gb/s, compute at the GPU rate included
TARGET_SPEEDUP, TARGET_BOUND_RATIO = 5.0, 3.0
# dct_interval of every request (the library's default; DCT_SIM_INTERVAL). The adaptive tau
# control (dct's default) re-selects tau, and so re-balances split's segments, on the first
# call and when fewer than k candidates pass its floor; the fixed control every interval calls.
# The report charges the re-balancing call's extra cost once per interval.
INTERVAL = 1000

# --- Compute time (bullet 3 of issue 20): an explicit delay per call, added to the simulated
# network time (see compute_seconds and docs/simulation.md). CPU: this machine's rates from
# `dct-bench kernels` (the committed raw output, float, Kokkos backend, one core); GPU: the
# memory-bandwidth bound of an H100 (about 3 TB/s of HBM3), not a measurement.
KERNELS_CPU = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                           "results", "kernels", "kernels_float.txt")
GPU_BYTES_PER_S = 3.0e12
# Sections of docs/simulation.md written by hand from the results they name, appended to every
# generated page: what the runs show (docs/results/sim/findings.md), and the measured index
# overlap (hpc/sim/overlap.py and overlap_sim.py).
HAND_WRITTEN_SECTIONS = [
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "results",
                 folder, name)
    for folder, name in (("sim", "findings.md"), ("overlap", "section.md"))]
VALUE_BYTES, INDEX_BYTES = 4, 4  # fp32 values, 32-bit indices

# --- Platform: a two-level fat tree of 1024 hosts (32 per leaf switch, 32 spine switches,
# full bisection), one rank per host, the first P hosts for P ranks. --------------------------
FAT_TREE = "2;32,32;1,32;1,1"
HOSTS = 1024
LINK_LATENCY_US = 0.5  # per link: 1 us within a leaf (2 links), 2 us across the spine (4)

# --- SMPI -------------------------------------------------------------------------------------
SMPI_DETACHED_THRESHOLD = 65536  # smpi/send-is-detached-thresh default (bytes)
SMPI_WEIGHT_S = 8775.0  # network/weight-S default (bytes)

# --- Scaling (see docs/simulation.md): N/F elements on links of bandwidth/F ----------------------
# Peak resident memory per rank and per simulated element (bytes), measured with sim_allreduce
# (peak_resident_kib) at 64 and 1024 ranks: MPI_Allreduce keeps the receive buffer and SMPI's
# temporary buffers; dct's dense keeps its residual, the receive buffer and the in-place
# allreduce's copies; allgather keeps the residual, the receive buffer and every rank's
# (index, value) list.
PER_RANK_BASE_BYTES = 1.4e6  # privatized binary and Kokkos, actor, communicators
UNKNOWN_ALGORITHM_BYTES = 28.0  # for algorithms not measured yet (split, ...): dense + margin
MEMORY_SAFETY = 1.15
# Smallest simulated message sizes that keep SMPI's ompi selector on the algorithm it picks for
# the full-size messages: MPI_Allreduce of >= 256 KiB is Rabenseifner at these rank counts;
# MPI_Allgatherv with per-rank blocks of >= ALLGATHERV_BLOCK[P] bytes is ring / neighbor
# exchange (smaller ones switch to Bruck).
MIN_ALLREDUCE_BYTES = 262144
ALLGATHERV_BLOCK = {64: 4096, 256: 1024, 1024: 4096}


def full_size_bytes(result, key):
    """Bytes per rank at full size: the per-call control traffic (measured on a 1-element zero
    tensor) as measured, the payload multiplied by the scale."""
    fixed = result.get("fixed_bytes_received_max", 0.0)
    return fixed + result["scale"] * (result[key] - fixed)


def run_key(algorithm, density):
    return "mpi" if algorithm == "mpi" else f"{algorithm}:{density}"
