#!/usr/bin/env python3
"""Runs dct's allreduce algorithms and MPI_Allreduce under SimGrid's SMPI at scale.

Called by hpc/sim/run.sh after it has built build-smpi/sim_allreduce; see docs/simulation.md
for the method. Standard library only. (Past 400 lines: the runs, the scaling method, the
compute model and the page generator in one tool; the report is the part to split out next.)

  simulate.py --binary build-smpi/sim_allreduce --work build-smpi/sim --docs docs [--quick]
"""
import argparse
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

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


def log(message):
    print(message, flush=True)


def auto_chooses_allgather(ranks, density, count=FULL_COUNT):
    """dct's auto rule: allgather when all ranks' (index, value) lists are smaller than 2x the
    dense tensor (src/dp/allreduce.cpp, complete_header_exchange)."""
    kept = math.ceil(float(density) * count)
    return ranks * kept * 8 < 2 * count * 4


def uses_allgatherv(algorithm, ranks, density):
    return algorithm == "allgather" or (
        algorithm == "auto" and auto_chooses_allgather(ranks, density))


def bytes_per_element(algorithm, ranks, density):
    """Peak bytes per rank per simulated element (see PER_RANK_BASE_BYTES)."""
    dense = 19.0
    if algorithm == "mpi":
        return dense - 8.0  # no residual, and the receive buffer is the only copy
    gathered = 8.5 + 8.0 * ranks * float(density)
    if algorithm == "dense":
        return dense
    if algorithm == "allgather":
        return gathered
    if algorithm == "auto":
        return max(dense, gathered) if auto_chooses_allgather(ranks, density) else dense
    return UNKNOWN_ALGORITHM_BYTES


def min_count(algorithm, ranks, density):
    """Fewest simulated elements that keep SMPI's collective algorithms those of full size."""
    if algorithm != "mpi" and uses_allgatherv(algorithm, ranks, density):
        return max(1024, math.ceil(ALLGATHERV_BLOCK.get(ranks, 0) / 8 / float(density)))
    return MIN_ALLREDUCE_BYTES // 4


def plan_count(algorithm, ranks, density, memory_bytes, work, private_gradient=False):
    """Simulated element count for one measurement, or None if it cannot fit in memory.

    As large as the work budget (ranks x elements) and the memory budget allow, at most the
    full count, and at least min_count. private_gradient: every rank holds its own gradient
    (sim_allreduce --index-sets classes:..., hpc/sim/overlap_sim.py)."""
    per_rank = bytes_per_element(algorithm, ranks, density) + (4 if private_gradient else 0)
    per_element = ranks * per_rank + 4  # + shared gradient
    memory_count = (memory_bytes / MEMORY_SAFETY - ranks * PER_RANK_BASE_BYTES) / per_element
    count = min(FULL_COUNT, work // ranks, int(memory_count))
    count = max(count, min_count(algorithm, ranks, density))
    if count > memory_count or count < 1:
        return None
    return int(count)


def platform_xml(bandwidth_bytes_per_s):
    return f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<!-- Generated by hpc/sim/simulate.py: a two-level fat tree of {HOSTS} hosts ({FAT_TREE}),
     every link {bandwidth_bytes_per_s:.10g} B/s, {LINK_LATENCY_US} us, full duplex. -->
<platform version="4.1">
  <cluster id="fattree" prefix="node-" suffix="" radical="0-{HOSTS - 1}" speed="100Gf"
           bw="{bandwidth_bytes_per_s:.10g}Bps" lat="{LINK_LATENCY_US}us"
           topology="FAT_TREE" topo_parameters="{FAT_TREE}" sharing_policy="SPLITDUPLEX"/>
</platform>
"""


def kokkos_library(binary):
    """The soname of Kokkos' core library that the simulator links (to privatize it)."""
    output = subprocess.run(["objdump", "-p", binary], capture_output=True, text=True,
                            check=True).stdout
    for line in output.splitlines():
        match = re.match(r"\s*NEEDED\s+(\S*kokkoscore\S*)", line)
        if match:
            return match.group(1)
    return None


class Simulator:
    def __init__(self, binary, work_dir, kokkos):
        self.binary = binary
        self.work_dir = work_dir
        self.kokkos = kokkos
        self.host_seconds = 0.0
        os.makedirs(work_dir, exist_ok=True)
        with open(os.path.join(work_dir, "hostfile"), "w") as hostfile:
            hostfile.write("".join(f"node-{i}\n" for i in range(HOSTS)))

    def smpi_options(self, scale):
        options = [
            "--cfg=smpi/coll-selector:ompi",
            # Every other collective as the ompi selector picks it; MPI_Bcast as a binomial tree,
            # because the selector's choice at >= 1024 ranks (mvapich2 k-nomial intra-node)
            # makes SMPI detect SMP nodes on every new communicator with a P-step ring allgather
            # (a minute of host time per MPI_Comm_dup). dct never broadcasts; the driver does.
            "--cfg=smpi/bcast:binomial_tree",
            # MPI_Alltoallv as pairwise exchange (Open MPI's tuned choice for large messages);
            # SMPI's ompi rule picks the basic linear one, whose waitall is quadratic in host
            # time at 1024 ranks.
            "--cfg=smpi/alltoallv:pair",
            # Each rank gets its own copy of the binary (dct's globals) and of Kokkos.
            "--cfg=smpi/privatization:dlopen",
            # Network time only: the kernels run for real on this host, on 1/scale of the data.
            "--cfg=smpi/simulate-computation:no",
            # No size-dependent piecewise corrections: messages are 1/scale of their real size.
            "--cfg=smpi/bw-factor:0:1",
            "--cfg=smpi/lat-factor:0:1",
            # Size-dependent thresholds scaled with the messages.
            f"--cfg=smpi/send-is-detached-thresh:{max(1, round(SMPI_DETACHED_THRESHOLD / scale))}",
            f"--cfg=network/weight-S:{SMPI_WEIGHT_S / scale:.6g}",
            "--log=root.thres:warning",
        ]
        if self.kokkos:
            options.insert(3, f"--cfg=smpi/privatize-libs:{self.kokkos}")
        return options

    def run(self, bandwidth_gbps, ranks, count, runs, extra=(), env=None, label="",
            scale=None, interval=INTERVAL):
        """One smpirun; returns the parsed RESULT lines (dicts) and the peak memory (KiB).

        scale: F (default FULL_COUNT / count, the scaling of docs/simulation.md); 1 simulates
        `count` elements on the real links."""
        scale = FULL_COUNT / count if scale is None else scale
        bandwidth = bandwidth_gbps * 1e9 / 8 / scale
        platform = os.path.join(self.work_dir, f"fattree-{bandwidth_gbps}G-x{scale:.6g}.xml")
        with open(platform, "w") as handle:
            handle.write(platform_xml(bandwidth))
        command = (["smpirun", "-np", str(ranks), "-platform", platform, "-hostfile",
                    os.path.join(self.work_dir, "hostfile")] + self.smpi_options(scale) +
                   [self.binary, "--count", str(count), "--scale", f"{scale:.9g}",
                    "--interval", str(interval), "--runs", ",".join(runs)] + list(extra))
        started = time.monotonic()
        # auto's cost model sees the simulated network: alpha the latency across the spine,
        # beta the scaled link bandwidth, so that it decides on N/F elements as on N.
        model = {"DCT_ALPHA_US": f"{4 * LINK_LATENCY_US:g}",
                 "DCT_BETA_GBPS": f"{bandwidth / 1e9:.9g}"}
        process = subprocess.run(command, capture_output=True, text=True,
                                 env=dict(os.environ, **model, **(env or {})))
        elapsed = time.monotonic() - started
        self.host_seconds += elapsed
        with open(os.path.join(self.work_dir, "smpirun.log"), "a") as handle:
            handle.write(f"\n$ {' '.join(command)}\n# {label} {elapsed:.1f} s, rc "
                         f"{process.returncode}\n{process.stdout}{process.stderr}")
        results, peak = [], None
        for line in process.stdout.splitlines():
            if line.startswith("RESULT "):
                results.append(parse_result(line, bandwidth_gbps))
            elif line.startswith("MEMORY "):
                peak = int(line.split("=")[1])
        log(f"  {label:<34} P={ranks:<5} {bandwidth_gbps:>3} Gb/s  F={scale:<9.4g} "
            f"{elapsed:6.1f} s  peak {peak / 1048576 if peak else 0:5.2f} GiB  "
            f"{' '.join(runs)}")
        if process.returncode != 0 or len(results) != len(runs):
            sys.stderr.write(process.stdout[-3000:] + process.stderr[-3000:])
            raise RuntimeError(f"smpirun failed (rc {process.returncode}); see "
                               f"{os.path.join(self.work_dir, 'smpirun.log')}")
        return results, peak


def parse_result(line, bandwidth_gbps):
    fields = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line))
    result = {key: value.strip('"') for key, value in fields.items()}
    result["bandwidth"] = bandwidth_gbps
    for key in ("ranks", "count"):
        result[key] = int(result[key])
    for key in ("scale", "time", "bytes_received_max", "bytes_received_mean", "kept_mean",
                "bound", "fixed_time", "fixed_bytes_received_max", "first_time",
                "first_bytes_received_max", "predicted"):
        if key in result:
            result[key] = float(result[key])
    for key in ("rebalanced", "first_rebalanced", "result_nnz"):
        if key in result:
            result[key] = int(result[key])
    return result


def full_size_bytes(result, key):
    """Bytes per rank at full size: the per-call control traffic (measured on a 1-element zero
    tensor) as measured, the payload multiplied by the scale."""
    fixed = result.get("fixed_bytes_received_max", 0.0)
    return fixed + result["scale"] * (result[key] - fixed)


def run_key(algorithm, density):
    return "mpi" if algorithm == "mpi" else f"{algorithm}:{density}"


def dump(path, results, verification, host_seconds, args):
    covered = {name: getattr(args, name)
               for name in ("bandwidths", "ranks", "densities", "algorithms")}
    with open(path, "w") as handle:
        json.dump({"results": {json.dumps(list(k)): v for k, v in results.items()},
                   "verification": verification, "host_seconds": host_seconds,
                   "covered": covered, "runs": args.runs}, handle)


def load(path, args, widen):
    """The results, verification and host seconds of `path`; sets args' lists to what it
    covered, or with `widen` to that and what args already hold (a run added to it)."""
    with open(path) as handle:
        state = json.load(handle)
    for name, values in state.get("covered", {}).items():
        mine = getattr(args, name) if widen else []
        setattr(args, name, sorted(set(mine) | set(values), key=(
            lambda v: (mine + values).index(v) if name == "algorithms" else float(v))))
    args.runs = state.get("runs", []) + (args.runs if widen else [])
    results = {tuple(json.loads(k)): v for k, v in state["results"].items()}
    return results, state["verification"], state["host_seconds"]


# --- The experiments ---------------------------------------------------------------------------
def probe_algorithms(sim, algorithms):
    """Which dct algorithms this build has (DCT_Allreduce_init refuses unknown names)."""
    results, _ = sim.run(BANDWIDTHS_GBPS[0], 2, 4096,
                         [f"{a}:0.01" for a in algorithms], label="probe")
    return {r["algorithm"]: r for r in results}


def main_runs(sim, args, available):
    """Every (bandwidth, ranks, density, algorithm); measurements sharing a scale share a run."""
    results = {}
    for bandwidth in args.bandwidths:
        for ranks in args.ranks:
            groups = {}
            for algorithm in ["mpi"] + args.algorithms:
                for density in (["1"] if algorithm == "mpi" else args.densities):
                    key = run_key(algorithm, density)
                    if algorithm != "mpi" and algorithm not in available:
                        results[(bandwidth, ranks, key)] = {"status": "n/a"}
                        continue
                    count = (args.count if args.count else
                             plan_count(algorithm, ranks, density, args.memory,
                                        args.work_budget))
                    if count is None:
                        results[(bandwidth, ranks, key)] = {"status": "memory"}
                        continue
                    groups.setdefault(count, []).append(key)
            for count, keys in sorted(groups.items()):
                found, _ = sim.run(bandwidth, ranks, count, keys,
                                   extra=["--check"] if args.check else [], label="measure",
                                   interval=args.interval)
                for key, result in zip(keys, found):
                    results[(bandwidth, ranks, key)] = result
    return results


def rebalance_count(ranks):
    """Elements of the re-balancing measurement: enough that split's histogram has all its
    32 P buckets (it has min(n, 32 P, 2^20) for P >= 8, as at full size), small enough to run
    at F = 1."""
    return max(64 * ranks, 1 << 16)


def rebalance_runs(sim, args, available):
    """The re-balancing call on its own, at F = 1 (real message sizes on the real links): split
    and hierarchical on a small tensor, first call (re-balances: histogram allreduces) against
    the second (does not). Their difference is what re-balancing adds to a call; its messages
    do not depend on the tensor's size beyond the histograms' 32 P buckets, so it holds for the
    full tensor, while the main runs, at F > 1, would charge those messages F times over."""
    rebalance = {}
    for base in REBALANCING:
        names = [a for a in (base, f"{base}_r") if a in available]
        if not names:
            continue
        for bandwidth in args.bandwidths:
            for ranks in args.ranks:
                count = rebalance_count(ranks)
                keys = [run_key(names[0], d) for d in args.densities]
                found, _ = sim.run(bandwidth, ranks, count, keys, extra=["--no-control"],
                                   label=f"re-balance {base} (F=1)", scale=1.0,
                                   interval=args.interval)
                for density, result in zip(args.densities, found):
                    key = (bandwidth, ranks, f"rebalance:{base}:{density}")
                    if result.get("status") == "ok":
                        result["rebalance_time"] = result["first_time"] - result["time"]
                        result["rebalance_bytes"] = (result["first_bytes_received_max"] -
                                                     result["bytes_received_max"])
                    rebalance[key] = result
    return rebalance


def verify_scaling(sim, args, results):
    """At 64 ranks: the same measurements at full size (F = 1) and at the scale of the main
    runs. Receive buffers are SMPI-shared in both (100 MB x 64 ranks would not fit otherwise);
    neither MPI_Allreduce nor dct's allgather reads them."""
    ranks, bandwidth = 64, args.bandwidths[0]
    rows = []
    for key in ("mpi", "auto:0.001"):
        main = results.get((bandwidth, ranks, key))
        if not main or main.get("status") != "ok":
            continue
        full, _ = sim.run(bandwidth, ranks, FULL_COUNT, [key], extra=["--shared-recv"],
                          label="verify F=1 (shared recv)")
        scaled, _ = sim.run(bandwidth, ranks, main["count"], [key], extra=["--shared-recv"],
                            label=f"verify F={main['scale']:.4g} (shared recv)")
        rows.append((key, full[0], scaled[0], main))
    return rows


def verify_shims(sim, args, results):
    """At 64 ranks: SMPI's own MPI_Iallgather / MPI_Waitall against the shims."""
    ranks, bandwidth = 64, args.bandwidths[0]
    keys = [k for k in ("auto:0.01", "auto:0.05") if
            results.get((bandwidth, ranks, k), {}).get("status") == "ok"]
    if not keys:
        return []
    count = results[(bandwidth, ranks, keys[0])]["count"]
    plain, _ = sim.run(bandwidth, ranks, count, keys, env={"DCT_SIM_NO_SHIMS": "1"},
                       label="verify without shims")
    shimmed, _ = sim.run(bandwidth, ranks, count, keys, label="verify with shims")
    return list(zip(keys, plain, shimmed))


# --- The report ----------------------------------------------------------------------------------
def fmt_time(seconds):
    """Milliseconds, 4 significant digits."""
    return f"{seconds * 1e3:#.4g}".rstrip(".")


def fmt_mb(value):
    return f"{value / 1e6:.3f}" if value < 1e7 else f"{value / 1e6:.1f}"


def percent(a, b):
    return f"{(a - b) / b * 100:+.2f}%"


def result_cell(result):
    status = result.get("status") if result else None
    if status == "n/a":
        return None, "n/a (not in this build)"
    if status == "memory":
        return None, "not simulated (memory)"
    if status is None:
        return None, "not simulated in this run"
    if status != "ok":
        return None, "failed"
    return result, None


# --- Compute time: an explicit delay per call from measured rates ------------------------------
def read_kernels(path):
    """The rows of a `dct-bench kernels` output, {column: value} per tensor size."""
    rows, header = [], None
    with open(path) as handle:
        for line in handle:
            fields = line.split()
            if not fields or line.startswith("#"):
                continue
            if fields[0] == "bytes":
                header = fields
            elif header:
                rows.append(dict(zip(header, map(float, fields))))
    return rows


def interpolate(rows, column, size):
    """`column` at a tensor of `size` bytes: log-log interpolation between the measured sizes
    (the nearest end row outside them)."""
    points = sorted((row["bytes"], row[column]) for row in rows)
    if size <= points[0][0]:
        return points[0][1]
    if size >= points[-1][0]:
        return points[-1][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= size <= x1:
            t = math.log(size / x0) / math.log(x1 / x0)
            return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))
    raise ValueError(size)


class ComputeModel:
    """Seconds of compression work per call for the full tensor, from bytes touched and rates.

    rows: `dct-bench kernels` rows (this machine's CPU); None: every byte at GPU_BYTES_PER_S
    (an H100's memory-bandwidth bound, a lower bound on a GPU's time)."""

    def __init__(self, rows):
        self.rows = rows

    def _bytes(self, touched, column):
        rate = (interpolate(self.rows, column, FULL_COUNT * VALUE_BYTES) * 1e9 if self.rows
                else GPU_BYTES_PER_S)
        return touched / rate

    def terms(self, result, ranks):
        """(seconds per call, extra seconds of a re-balancing call) for one measurement."""
        s, i = VALUE_BYTES, INDEX_BYTES
        tensor = FULL_COUNT * s
        dense_reduce = 3 * tensor * (ranks - 1) / ranks  # read two operands, write the sum
        if result["algorithm"] == "mpi":
            return self._bytes(dense_reduce, "copy_GBs"), 0.0
        kept = result["kept_mean"] * result["scale"]
        received = min(FULL_COUNT, full_size_bytes(result, "bytes_received_max") / (s + i))
        # The fused filter: read send and residual, write the residual and the kept pairs.
        seconds = self._bytes(3 * tensor + kept * (i + s), "filt_GBs")
        # The adaptive trim of ~3k candidates to k: nth_element on the host (CPU); on a GPU
        # the candidates go back, two exact selections over the tensor and a second filter.
        if self.rows:
            seconds += interpolate(self.rows, "nth_ms", 3 * kept * s) * 1e-3
        else:
            seconds += self._bytes(3 * kept * (i + 2 * s) + 2 * tensor +
                                   3 * tensor + kept * (i + s), None)
        # The result: zero-fill of the tensor and scatter-add of the entries received.
        seconds += self._bytes(tensor + received * (i + 2 * s), "decod_GBs")
        if result.get("used") == "dense":  # dct's dense: MPI_Allreduce of the dense tensor
            seconds += self._bytes(dense_reduce, "copy_GBs")
        # Re-balancing calls select tau exactly over the tensor.
        rebalance = (interpolate(self.rows, "exact_ms", tensor) * 1e-3 if self.rows
                     else self._bytes(tensor, None))
        return seconds, rebalance


def rebalance_of(results, bandwidth, ranks, density, result):
    """(seconds, bytes) that a re-balancing call adds to `result`'s: split's or hierarchical's
    histograms, measured on their own at F = 1 (rebalance_runs); 0 for the other algorithms."""
    used = result.get("used")
    if used not in REBALANCING:
        return 0.0, 0.0
    extra = results.get((bandwidth, ranks, f"rebalance:{used}:{density}"))
    if extra is None and used == "split":  # the key of runs before hierarchical existed
        extra = results.get((bandwidth, ranks, f"rebalance:{density}"))
    if not extra or extra.get("status") != "ok":
        return None, None
    return extra["rebalance_time"], extra["rebalance_bytes"]


def amortised(results, args, bandwidth, ranks, density, result):
    """Per-call network time and bytes with the re-balancing call's extra charged once per
    interval; None where the re-balancing measurement is missing."""
    extra_time, extra_bytes = rebalance_of(results, bandwidth, ranks, density, result)
    if extra_time is None:
        return None, None
    return (result["time"] + extra_time / args.interval,
            full_size_bytes(result, "bytes_received_max") + extra_bytes / args.interval)


def totals(results, args, bandwidth, ranks, density, result, model):
    """Amortised network time + compute time per call (compute's re-balancing share too)."""
    network, _ = amortised(results, args, bandwidth, ranks, density, result)
    if network is None:
        return None, None
    compute, rebalance = model.terms(result, ranks)
    compute += rebalance / args.interval
    return compute, network + compute


def table(results, args, bandwidth):
    lines = ["| ranks | density | algorithm | used | time (ms) | vs MPI_Allreduce | "
             "re-balanced | re-balance adds (ms) | amortised (ms) | vs MPI_Allreduce | "
             "bytes/rank max (MB) | bytes/rank mean (MB) | bound 2k(P-1)/P (MB) | "
             "max / bound | re-balance adds (MB) | F | control time (ms) |",
             "|---:|---:|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for ranks in args.ranks:
        mpi = results.get((bandwidth, ranks, "mpi"))
        if mpi and mpi.get("status") == "ok":
            lines.append(
                f"| {ranks} | - | MPI_Allreduce | {mpi['used']} | {fmt_time(mpi['time'])} | 1 | "
                f"- | - | {fmt_time(mpi['time'])} | 1 | "
                f"{fmt_mb(full_size_bytes(mpi, 'bytes_received_max'))} | "
                f"{fmt_mb(full_size_bytes(mpi, 'bytes_received_mean'))} | - | - | - | "
                f"{mpi['scale']:.4g} | {fmt_time(mpi.get('fixed_time', 0.0))} |")
        for density in args.densities:
            for algorithm in args.algorithms:
                result, note = result_cell(results.get((bandwidth, ranks,
                                                        run_key(algorithm, density))))
                if note:
                    lines.append(f"| {ranks} | {density} | {algorithm} | {note} |"
                                 " | | | | | | | | | | | | |")
                    continue
                ok_mpi = mpi and mpi.get("status") == "ok"
                speedup = f"{mpi['time'] / result['time']:.2f}x" if ok_mpi else "-"
                bound = result["bound"] * result["scale"]
                worst = full_size_bytes(result, "bytes_received_max")
                extra_time, extra_bytes = rebalance_of(results, bandwidth, ranks, density,
                                                       result)
                network, _ = amortised(results, args, bandwidth, ranks, density, result)
                network_speedup = (f"{mpi['time'] / network:.2f}x" if ok_mpi and network
                                   else "-")
                lines.append(
                    f"| {ranks} | {density} | {algorithm} | {result['used']} | "
                    f"{fmt_time(result['time'])} | {speedup} | "
                    f"{'yes' if result.get('rebalanced') else 'no'} | "
                    f"{'-' if extra_time is None else fmt_time(extra_time)} | "
                    f"{'-' if network is None else fmt_time(network)} | "
                    f"{network_speedup} | "
                    f"{fmt_mb(worst)} | "
                    f"{fmt_mb(full_size_bytes(result, 'bytes_received_mean'))} | "
                    f"{fmt_mb(bound)} | {worst / bound:.2f} | "
                    f"{'-' if extra_bytes is None else fmt_mb(extra_bytes)} | "
                    f"{result['scale']:.4g} | {fmt_time(result.get('fixed_time', 0.0))} |")
    return "\n".join(lines)


def compute_table(results, args, bandwidth, cpu, gpu):
    lines = ["| ranks | density | algorithm | used | network, amortised (ms) | "
             "compute, CPU (ms) | total, CPU (ms) | vs MPI_Allreduce, CPU | "
             "compute, GPU bound (ms) | total, GPU bound (ms) | vs MPI_Allreduce, GPU bound |",
             "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for ranks in args.ranks:
        mpi = results.get((bandwidth, ranks, "mpi"))
        mpi_totals = None
        if mpi and mpi.get("status") == "ok":
            mpi_totals = [totals(results, args, bandwidth, ranks, "1", mpi, m)
                          for m in (cpu, gpu)]
            lines.append(
                f"| {ranks} | - | MPI_Allreduce | {mpi['used']} | {fmt_time(mpi['time'])} | "
                f"{fmt_time(mpi_totals[0][0])} | {fmt_time(mpi_totals[0][1])} | 1 | "
                f"{fmt_time(mpi_totals[1][0])} | {fmt_time(mpi_totals[1][1])} | 1 |")
        for density in args.densities:
            for algorithm in args.algorithms:
                result, note = result_cell(results.get((bandwidth, ranks,
                                                        run_key(algorithm, density))))
                if note:
                    lines.append(f"| {ranks} | {density} | {algorithm} | {note} | | | | | | | |")
                    continue
                network, _ = amortised(results, args, bandwidth, ranks, density, result)
                cells = []
                for index, model in enumerate((cpu, gpu)):
                    compute, total = totals(results, args, bandwidth, ranks, density, result,
                                            model)
                    if total is None:
                        cells += ["-", "-", "-"]
                        continue
                    speedup = (f"{mpi_totals[index][1] / total:.2f}x" if mpi_totals else "-")
                    cells += [fmt_time(compute), fmt_time(total), speedup]
                lines.append(f"| {ranks} | {density} | {algorithm} | {result['used']} | "
                             f"{'-' if network is None else fmt_time(network)} | "
                             + " | ".join(cells) + " |")
    return "\n".join(lines)


def target_figures(results, args, bandwidth, algorithm, cpu, gpu):
    """Speedups over MPI_Allreduce (network only and with compute) and the volume over the
    bound, at TARGET_RANKS and TARGET_DENSITY; (None, why) when there is no measurement."""
    mpi = results.get((bandwidth, TARGET_RANKS, "mpi"))
    result, note = result_cell(results.get((bandwidth, TARGET_RANKS,
                                            run_key(algorithm, TARGET_DENSITY))))
    if not result:
        return None, note
    if not mpi or mpi.get("status") != "ok":
        return None, "no MPI_Allreduce measurement"
    network, volume = amortised(results, args, bandwidth, TARGET_RANKS, TARGET_DENSITY, result)
    if network is None:
        return None, "no re-balancing measurement"
    figures = {"used": result["used"] + (", and re-balanced on the reported call"
                                         if result.get("rebalanced") else ""),
               "time": result["time"], "network": network,
               "mpi": mpi["time"], "network_speedup": mpi["time"] / network,
               "bound_ratio": volume / (result["bound"] * result["scale"]),
               "volume": volume, "bound": result["bound"] * result["scale"]}
    for name, model in (("cpu", cpu), ("gpu", gpu)):
        _, mpi_total = totals(results, args, bandwidth, TARGET_RANKS, "1", mpi, model)
        _, total = totals(results, args, bandwidth, TARGET_RANKS, TARGET_DENSITY, result, model)
        figures[name] = total
        figures[f"{name}_mpi"] = mpi_total
        figures[f"{name}_speedup"] = mpi_total / total
    return figures, None


def targets(results, args, cpu, gpu):
    lines = [f"Issue 20's targets are at {TARGET_RANKS} ranks, {TARGET_BANDWIDTH} Gb/s, density "
             f"{TARGET_DENSITY}, with compute time at the GPU rate: `auto` with its result bounded "
             f"as Ok-Topk does (`auto_r`: `dct_result_density` = the density) >= "
             f"{TARGET_SPEEDUP:g}x faster than `MPI_Allreduce` and within "
             f"{TARGET_BOUND_RATIO:g}x of the 2k(P-1)/P volume bound; and what `auto` achieves "
             f"without bounding the result. `hierarchical_r` and `split_r` are the two "
             f"algorithms `auto_r` chooses from. Times are per call with the re-balancing call "
             f"charged once per {args.interval} calls; \"GPU\" is the H100 memory-bandwidth "
             f"bound ({GPU_BYTES_PER_S / 1e12:g} TB/s), not a GPU measurement.", ""]
    for bandwidth in args.bandwidths:
        for algorithm in ("auto_r", "hierarchical_r", "split_r", "auto"):
            if algorithm not in args.algorithms:
                continue
            figures, note = target_figures(results, args, bandwidth, algorithm, cpu, gpu)
            if not figures:
                lines.append(f"- {bandwidth} Gb/s, `{algorithm}`: no figures ({note}).")
                continue
            verdict = ""
            if bandwidth == TARGET_BANDWIDTH and algorithm == "auto_r":
                speed_met = figures["gpu_speedup"] >= TARGET_SPEEDUP
                bound_met = figures["bound_ratio"] <= TARGET_BOUND_RATIO
                verdict = (f" Target >= {TARGET_SPEEDUP:g}x: **{'met' if speed_met else 'NOT met'}**"
                           f"; within {TARGET_BOUND_RATIO:g}x of the bound: "
                           f"**{'met' if bound_met else 'NOT met'}**.")
            lines.append(
                f"- {bandwidth} Gb/s, `{algorithm}` (used `{figures['used']}`): network only "
                f"{fmt_time(figures['network'])} ms against {fmt_time(figures['mpi'])} ms, "
                f"{figures['network_speedup']:.2f}x; with compute at the CPU rate "
                f"{fmt_time(figures['cpu'])} ms against {fmt_time(figures['cpu_mpi'])} ms, "
                f"{figures['cpu_speedup']:.2f}x; at the GPU bound {fmt_time(figures['gpu'])} ms "
                f"against {fmt_time(figures['gpu_mpi'])} ms, {figures['gpu_speedup']:.2f}x; "
                f"bytes received per rank {fmt_mb(figures['volume'])} MB against the bound "
                f"{fmt_mb(figures['bound'])} MB, {figures['bound_ratio']:.2f}x.{verdict}")
    return "\n".join(lines)


# auto's candidates: unbounded, and with dct_result_density (only split and hierarchical can).
AUTO_CANDIDATES = {"auto": ("allgather", "dense", "split", "hierarchical", "recursive_doubling"),
                   "auto_r": ("split_r", "hierarchical_r")}


def model_table(results, args, bandwidth):
    """The cost model's prediction (as auto evaluates it) against the simulated time of every
    measurement, and for auto whether it picked the fastest simulated candidate."""
    lines = ["| ranks | density | algorithm | used | simulated (ms) | predicted (ms) | "
             "predicted / simulated | fastest simulated candidate | auto / fastest |",
             "|---:|---:|---|---|---:|---:|---:|---|---:|"]
    for ranks in args.ranks:
        for density in args.densities:
            first = density == args.densities[0]  # MPI_Allreduce once per rank count
            for algorithm in (["mpi"] if first else []) + args.algorithms:
                result, note = result_cell(results.get((bandwidth, ranks,
                                                        run_key(algorithm, density))))
                if not result or "predicted" not in result:
                    continue
                best = "-"
                versus = "-"
                if algorithm in AUTO_CANDIDATES:
                    timed = []
                    for candidate in AUTO_CANDIDATES[algorithm]:
                        other, _ = result_cell(results.get((bandwidth, ranks,
                                                            run_key(candidate, density))))
                        if other:
                            timed.append((other["time"], candidate))
                    if timed:
                        fastest = min(timed)
                        best = f"{fastest[1]} ({fmt_time(fastest[0])})"
                        versus = f"{result['time'] / fastest[0]:.2f}"
                shown = "MPI_Allreduce" if algorithm == "mpi" else algorithm
                used = "dense (model)" if algorithm == "mpi" else result["used"]
                lines.append(
                    f"| {ranks} | {'-' if algorithm == 'mpi' else density} | {shown} | {used} | "
                    f"{fmt_time(result['time'])} | {fmt_time(result['predicted'])} | "
                    f"{result['predicted'] / result['time']:.2f} | {best} | {versus} |")
    return "\n".join(lines)


def verification_text(scaling, shims):
    lines = []
    if scaling:
        lines += ["| measurement | F | time F=1 (ms) | time at F (ms) | difference | "
                  "bytes/rank max F=1 (MB) | at F, full-size equivalent (MB) | difference | "
                  "main run, private receive buffer (ms) |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for key, full, scaled, main in scaling:
            full_bytes = full["bytes_received_max"]
            scaled_bytes = full_size_bytes(scaled, "bytes_received_max")
            lines.append(
                f"| {key} (used {scaled['used']}) | {scaled['scale']:.4g} | "
                f"{fmt_time(full['time'])} | {fmt_time(scaled['time'])} | "
                f"{percent(scaled['time'], full['time'])} | {fmt_mb(full_bytes)} | "
                f"{fmt_mb(scaled_bytes)} | {percent(scaled_bytes, full_bytes)} | "
                f"{fmt_time(main['time'])} |")
    if shims:
        lines += ["", "| measurement | SMPI's MPI_Iallgather (ms) | shims (ms) | difference |",
                  "|---|---:|---:|---:|"]
        for key, plain, shimmed in shims:
            lines.append(f"| {key} (used {shimmed['used']}), F={shimmed['scale']:.4g} | "
                         f"{fmt_time(plain['time'])} | {fmt_time(shimmed['time'])} | "
                         f"{percent(shimmed['time'], plain['time'])} |")
    return "\n".join(lines) if lines else "(not run: `--quick` or `--no-verify`)"


def escaped(name):
    """`name` for gnuplot's enhanced text, where _ makes a subscript."""
    return name.replace("_", "\\_")


def plot(results, args, png):
    """Simulated time against ranks, one panel per (bandwidth, density), with gnuplot."""
    names = ["mpi"] + args.algorithms
    labels = {"mpi": "MPI\\_Allreduce (dense)"}
    script = [
        "set terminal pngcairo size 1500,900 font 'sans,10'",
        f"set output '{png}'",
        f"set multiplot layout {len(args.bandwidths)},{len(args.densities)} "
        f"title 'dct under SimGrid/SMPI: simulated time of one allreduce of "
        f"{FULL_COUNT * 4 / 1e6:.4g} MB fp32 per rank (fat tree, one rank per host)'",
        "set logscale xy", "set xlabel 'ranks'", "set ylabel 'simulated time (ms)'",
        f"set xtics ({', '.join(str(r) for r in args.ranks)})", "set grid",
        "set key top left font 'sans,8'",
        f"set xrange [{args.ranks[0] * 0.8}:{args.ranks[-1] * 1.25}]"]
    for bandwidth in args.bandwidths:
        for density in args.densities:
            script.append(f"set title '{bandwidth} Gb/s links, density {density}'")
            curves = []
            for name in names:
                points = [(ranks, results.get((bandwidth, ranks, run_key(name, density))))
                          for ranks in args.ranks]
                points = [(r, p["time"] * 1e3) for r, p in points
                          if p and p.get("status") == "ok"]
                if not points:
                    continue
                data = os.path.join(args.work_dir, f"plot-{bandwidth}-{density}-{name}.dat")
                with open(data, "w") as handle:
                    handle.write("".join(f"{r} {t:.6g}\n" for r, t in points))
                curves.append(f"'{data}' using 1:2 with linespoints lw 2 "
                              f"title '{labels.get(name, escaped(name))}'")
            script.append("plot " + ", ".join(curves))
    script.append("unset multiplot")
    script_path = os.path.join(args.work_dir, "plot.gp")
    with open(script_path, "w") as handle:
        handle.write("\n".join(script) + "\n")
    subprocess.run(["gnuplot", script_path], check=True, capture_output=True)


def coverage(args):
    """What this run covered, when the DCT_SIM_* environment chose a subset."""
    full = (BANDWIDTHS_GBPS, RANKS, DENSITIES, DCT_ALGORITHMS)
    mine = (args.bandwidths, args.ranks, args.densities, args.algorithms)
    if args.quick or full == mine:
        return ""
    return (f"\n**This run covered a subset** (DCT_SIM_* environment, for time): "
            f"{', '.join(map(str, args.bandwidths))} Gb/s; "
            f"{', '.join(map(str, args.ranks))} ranks; densities {', '.join(args.densities)}; "
            f"algorithms {', '.join(args.algorithms)}. Rows marked \"not simulated in this "
            f"run\" were not run.\n")


def write_report(results, args, verification, host_seconds, path, png, started):
    scaling, shims = verification
    cpu, gpu = ComputeModel(read_kernels(KERNELS_CPU)), ComputeModel(None)
    rates = {column: interpolate(cpu.rows, column, FULL_COUNT * VALUE_BYTES)
             for column in ("copy_GBs", "filt_GBs", "decod_GBs", "exact_ms")}
    version = subprocess.run(["smpicxx", "--version"], capture_output=True,
                             text=True).stdout.strip()
    quick = " (QUICK SMOKE RUN: not the full experiment)" if args.quick else ""
    text = f"""# Simulating dct at scale with SimGrid/SMPI{quick}

Generated by `hpc/sim/run.sh{' --quick' if args.quick else ''}` on {started:%Y-%m-%d %H:%M} UTC
from the runs started {', '.join(args.runs) or 'then'} ({version}); host time of the simulations: {host_seconds / 60:.1f} min. Rerun with
`hpc/sim/run.sh` (everything: install, build, simulate, this page and
[simulation.png](simulation.png)); `hpc/sim/run.sh --quick` is a one-minute smoke run into
`build-smpi/sim-quick/` that checks every result (identical on every rank; results + residuals
= gradients put in); it is also the ctest entry `sim.quick` (label `sim`, skipped where
SimGrid is not installed; `.ci/run` installs it and runs the entry). Algorithms that this
build of dct does not have (`DCT_Allreduce_init` refuses the `dct_algorithm` name) show as n/a and are picked up by the next rerun.
{coverage(args)}

## Targets

{targets(results, args, cpu, gpu)}

**Re-balancing is measured apart.** Every request has `dct_interval={args.interval}` and the
default (adaptive) tau control, and the reported call is the second: it reuses split's
segments, as training does between re-estimations (the `re-balanced` column says whether some
rank re-selected tau on it, which would have re-balanced them). The first call re-balances:
split allreduces a histogram of 32 P buckets (8 bytes each), whose size depends on P, not on the
tensor, so the scaling method below would charge it F times over (an earlier run, with every
call re-balancing, charged its 512 KB per rank at 1024 ranks as ~49 MB). It is simulated on its
own instead, at F = 1 with real message sizes on the real links: split on a tensor of
max(64 P, 65536) elements (enough for all 32 P buckets, as at full size), first call against
second; `re-balance adds` is their difference, in time and in bytes received, and `amortised`
charges it once per {args.interval} calls (adaptive control re-balances on the first call and
when fewer than k candidates pass its floor, which the simulated gradients never cause;
`dct_tau_control=fixed` re-balances every `dct_interval` calls). It applies to calls that use
split or hierarchical (whose group tier allreduces a histogram of 32 G buckets over all ranks
and whose cross tier one of 32 P/G buckets over its P/G ranks: measured the same way); the other
algorithms have no histogram.

## What is simulated

The library's own code, unchanged: `hpc/sim/CMakeLists.txt` compiles dct's sources (the
release object libraries of the top-level CMakeLists.txt, HDF5 and Fortran off) with `smpicxx` into
the simulator binary together with the driver `hpc/sim/sim_allreduce.cpp`. Under SMPI every
rank is a thread of one process; `smpi/privatization:dlopen` gives each rank its own copy of the
binary (so dct's request table and runtime registry are per rank) and
`smpi/privatize-libs` its own Kokkos (whose globals live in libkokkoscore.so).

- Gradient: {FULL_COUNT:,} fp32 values (100 MB) per rank, N(0,1), independent kept indices
  across ranks (see Memory).
- Each dct algorithm is a persistent request (`DCT_Allreduce_init`, `DCT_Start`, `DCT_Wait`,
  `DCT_Request_free`) with `dct_density` as listed and `dct_interval={args.interval}`; it is
  called twice and the second call is reported (the first starts from an empty residual and
  re-balances split's segments: see above). The baseline is `MPI_Allreduce` of the dense
  tensor, also the second of two calls.
- Time: simulated seconds (`MPI_Wtime` under SMPI) from after a barrier to the end of the call,
  the maximum over ranks. `smpi/simulate-computation:no`: the kernels (selection, filter,
  scatter-add) run for real on this 2-core VM, on 1/F of the data, with 1024 ranks taking turns
  on one core, so their host time says nothing about a real node; the simulated time is the
  network's and MPI's alone (reductions inside MPI_Allreduce are free too). Compute time is
  added afterwards as an explicit delay per call (see Compute time).
- Bytes per rank: `DCT_Status.bytes_received` of the reported call (max and mean over ranks;
  for MPI_Allreduce the ring volume 2(P-1)/P x 100 MB). Bound: 2k(P-1)/P with k = the kept
  entries per rank (mean over ranks) x 8 bytes (fp32 value + 32-bit index).
- Platform: a SimGrid `<cluster topology="FAT_TREE" topo_parameters="{FAT_TREE}">` of {HOSTS}
  hosts, 32 per leaf switch and 32 spine switches (full bisection), every link 25 Gb/s or
  100 Gb/s, {LINK_LATENCY_US} us per link (1 us end to end within a leaf, 2 us across), full
  duplex; one rank per host, the first P hosts for P ranks. Files: `build-smpi/sim/*.xml`
  (generated per bandwidth and scale).
- SMPI options: `smpi/coll-selector:ompi` (Open MPI's decision rules for every collective),
  except `smpi/bcast:binomial_tree` (the ompi rule for small broadcasts at >= 1024 ranks makes
  SMPI detect SMP nodes with a P-step ring on every new communicator: a minute of host time per
  `MPI_Comm_dup`; dct does not broadcast), `smpi/bw-factor:0:1` and `smpi/lat-factor:0:1` (no
  size-dependent piecewise corrections, which would not scale), `smpi/send-is-detached-thresh`
  and `network/weight-S` divided by F (their size thresholds scale with the messages).
- Shims (`hpc/sim/smpi_shims.cpp`): SMPI 3.32's host time is quadratic in the requests a rank
  has outstanding (a list scan per completed message, a waitany per request in waitall). dct's
  header exchange (4 integers per rank, `MPI_Iallgather`, linear in SMPI: 2(P-1) requests) took
  over 7 minutes of host time per call at 1024 ranks. The simulator binds dct's `MPI_Iallgather`
  to the blocking `MPI_Allgather` that the ompi selector picks (recursive doubling or Bruck,
  log2 P rounds) and `MPI_Waitall` to one `MPI_Wait` per request. The second is exact; the
  first changes the algorithm of the header exchange only (see Verification).

## Memory: scaling by F

1024 ranks x 100 MB x (gradient + receive buffer + dct's residual) is about 300 GB; this
machine has 24 GiB, shared. SMPI's shared malloc (`SMPI_SHARED_MALLOC`,
`smpi/auto-shared-malloc-thresh`) folds buffers by giving all ranks the same memory, so their
contents are garbage: dct validates the indices it receives and its residual carries state
between calls, so dct's buffers (allocated by C++ containers, which smpicxx does not intercept
anyway) must stay private and real. Instead:

- Gradient: one buffer of random values in a memory file, mapped by every rank at its own
  random rotation (element offset): real data, independent kept positions across ranks, one copy
  in memory.
- Scaling: each measurement simulates N/F elements on links of bandwidth/F (F = the `F`
  column). In SimGrid's fluid network model a message of size s takes latency + s/bandwidth
  on an uncontended path and shares links in proportion to bandwidth: dividing every message and
  every bandwidth by F leaves every transfer's time unchanged, latencies included, as long as
  the collective algorithms stay the same. F is chosen per measurement: as small as a memory
  budget ({args.memory / 2**30:.0f} GiB) and a host-work budget ({args.work_budget:,} rank-elements)
  allow, but never so large that SMPI's ompi selector would switch algorithm (MPI_Allreduce
  stays >= 256 KiB: Rabenseifner; allgather's per-rank blocks stay >= 4096 bytes at 64 and 1024
  ranks, 1024 at 256 ranks: ring / neighbor exchange, as at full size). dct's `auto` is told
  the simulated network (`DCT_ALPHA_US` = {4 * LINK_LATENCY_US:g} us, the latency across the
  spine; `DCT_BETA_GBPS` = the link bandwidth / F), so its cost model decides on N/F elements
  as it would on N.
- What does not scale: per-call control messages of fixed size (dct's 32-byte header per rank)
  cross links F times slower than they would. The `control time` column is the simulated time of
  the same call on a 1-element all-zero tensor at the same F, an upper bound on what that
  overhead adds (at F = 1 it would be F times smaller). Bytes are reported at full size: the
  control bytes of that zero-tensor call as measured, plus F x the rest.
- The allgather algorithm needs every rank to hold all ranks' lists (1024 x 2 MB at density
  0.01): with F it fits. A measurement that would not fit even at the largest allowed F is
  listed as "not simulated (memory)".

## Verification

At 64 ranks and {args.bandwidths[0]} Gb/s, full size (F = 1, 100 MB) against the F of the main
runs, both with SMPI-shared receive buffers (64 x 100 MB would not fit otherwise; neither
MPI_Allreduce nor dct's allgather reads the receive buffer), and the main run itself (private
receive buffers):

{verification_text(scaling, [])}

SMPI's own linear `MPI_Iallgather` and `MPI_Waitall` against the shims, at 64 ranks (at 1024
ranks the unshimmed run takes hours):

{verification_text([], shims)}

## Compute time

The simulated times above are the network's. The compute tables add to them, per call, the
time of the work a rank does around its messages, which runs before (compression) or after
(the result) the exchange, so that every rank is delayed by about the same amount and the delay
adds to the call's time. It is modelled from the bytes each kernel touches for the full tensor
(N = {FULL_COUNT:,} fp32, s = 4-byte values, 4-byte indices, k = kept entries per rank, R =
entries received per rank = bytes received / 8, at most N) and measured rates:

- the fused filter: 3Ns + k(4+s) bytes (read send and residual, write residual and the kept
  pairs);
- the adaptive trim of the ~3k candidates to k: on the CPU `std::nth_element` over 3k values
  (the kernels' `nth_ms` at 3ks bytes); on a GPU the device trim: the candidates back into the
  residual (3k(4+2s)), two exact selections (>= Ns each) and a second filter;
- the result: zero-fill of N and scatter-add of R entries, Ns + R(4+2s) bytes;
- `MPI_Allreduce` (and dct's `dense`): the reduction, 3Ns(P-1)/P bytes (read two operands,
  write the sum) at copy bandwidth;
- a re-balancing call also selects tau exactly over the tensor (`exact_ms`; on a GPU >= Ns
  bytes), charged once per interval like its messages.

CPU rates: this machine's `dct-bench kernels` (Kokkos backend, float, one core:
`docs/results/kernels/kernels_float.txt`, interpolated log-log to {FULL_COUNT * VALUE_BYTES / 1e6:g} MB):
copy {rates['copy_GBs']:.1f} GB/s, filter {rates['filt_GBs']:.1f} GB/s, decode
{rates['decod_GBs']:.1f} GB/s, exact selection {rates['exact_ms']:.1f} ms. GPU: every byte at
{GPU_BYTES_PER_S / 1e12:g} TB/s, the memory-bandwidth bound of an H100 (HBM3), **not a
measurement**: it is a lower bound on a GPU's time (dct's measured H100 filter reaches ~1.1-1.2
TB/s on the bytes it must touch, docs/performance.md, so real GPU compute is at least ~2.5x the
figure used). Not modelled: the owners' summation of their segment (O(k) per rank), the
encoding of messages, and host-device copies of a staged GPU request.

## Results

"""
    if args.check:
        checked = [r for r in results.values() if "check" in r]
        good = sum(1 for r in checked if r["check"] == "ok")
        text += (f"Every dct measurement was checked (`--check`): the result is identical on "
                 f"every rank, and results delivered + residuals left = gradients put in: "
                 f"{good} of {len(checked)} ok.\n\n")
    for bandwidth in args.bandwidths:
        text += (f"### {bandwidth} Gb/s links\n\nNetwork:\n\n{table(results, args, bandwidth)}"
                 f"\n\nWith compute time:\n\n"
                 f"{compute_table(results, args, bandwidth, cpu, gpu)}\n\n"
                 f"The cost model (src/core/cost_model.cpp) against the simulation, network only "
                 f"(the reported call, not amortised):\n\n"
                 f"{model_table(results, args, bandwidth)}\n\n")
    text += """Columns: `used` is the algorithm dct reported in `DCT_Status.algorithm` (auto picks per
call); `time` the reported call's (no re-balancing); `vs MPI_Allreduce` is the dense
MPI_Allreduce time over this time (> 1: faster); `re-balanced` whether that call re-balanced;
`re-balance adds` what a re-balancing call adds (measured apart at F = 1, split only);
`amortised` the time with that charged once per interval, and its `vs MPI_Allreduce`;
`max / bound` is the largest bytes received by a rank in the reported call over the 2k(P-1)/P
bound; `F` the scale of that measurement; `control time` the same call on a 1-element zero
tensor at that F. Compute tables: the amortised network time plus the compute delay of the
section above, at this machine's CPU rates and at the H100 bandwidth bound, each against
MPI_Allreduce with its reduction at the same rate. Cost model tables: `predicted` is what the
library's cost model gives for the reported call's algorithm with the inputs `auto` sees (P, N,
every rank's kept entries, the result's nonzeros from the previous call, alpha = 2 us, beta =
the link bandwidth; groups of one rank per host, so hierarchical's are sqrt(P) consecutive
ranks); for MPI_Allreduce the model's `dense` (Rabenseifner). For `auto` and `auto_r`, the
fastest simulated of the algorithms each may choose from, and auto's time over it (1: auto
picked the fastest).

![simulated time against ranks](simulation.png)
"""
    for section in HAND_WRITTEN_SECTIONS:
        if os.path.exists(section):
            with open(section) as handle:
                text += "\n" + handle.read()
    with open(path, "w") as handle:
        handle.write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--work-dir", required=True, help="directory for platforms, logs, data")
    parser.add_argument("--docs", required=True, help="where simulation.md/.png go")
    parser.add_argument("--quick", action="store_true", help="16 ranks, 1M elements, F = 1")
    parser.add_argument("--no-verify", action="store_true")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite the report from the last run's results.json")
    parser.add_argument("--add", action="store_true",
                        help="keep the last run's results.json and add this run's to it (the "
                             "report covers both)")
    parser.add_argument("--memory-gib", type=float,
                        default=float(os.environ.get("DCT_SIM_MEMORY_GIB", "12")))
    parser.add_argument("--work-budget", type=int,
                        default=int(os.environ.get("DCT_SIM_WORK", str(1 << 28))))
    parser.add_argument("--interval", type=int,
                        default=int(os.environ.get("DCT_SIM_INTERVAL", str(INTERVAL))),
                        help="dct_interval of the requests; re-balancing is charged per interval")
    args = parser.parse_args()
    args.memory = args.memory_gib * 2**30
    args.bandwidths, args.ranks, args.densities = BANDWIDTHS_GBPS, RANKS, DENSITIES
    args.algorithms, args.count, args.check = DCT_ALGORITHMS, None, False
    # DCT_SIM_RANKS / DCT_SIM_DENSITIES / DCT_SIM_ALGORITHMS / DCT_SIM_BANDWIDTHS: a subset.
    def subset(variable, default, convert=str):
        value = os.environ.get(variable)
        return [convert(v) for v in value.split(",")] if value else default
    args.ranks = subset("DCT_SIM_RANKS", args.ranks, int)
    args.densities = subset("DCT_SIM_DENSITIES", args.densities)
    args.algorithms = subset("DCT_SIM_ALGORITHMS", args.algorithms)
    args.bandwidths = subset("DCT_SIM_BANDWIDTHS", args.bandwidths, int)
    if args.quick:
        global FULL_COUNT
        FULL_COUNT = 1 << 20
        args.ranks, args.count, args.check = [16], FULL_COUNT, True
    started = datetime.datetime.utcnow()
    args.runs = [] if args.report_only else [f"{started:%Y-%m-%d %H:%M} UTC"]
    wall = time.monotonic()
    kokkos = kokkos_library(args.binary)
    sim = Simulator(os.path.abspath(args.binary), args.work_dir, kokkos)
    if not args.report_only:
        open(os.path.join(args.work_dir, "smpirun.log"), "w").close()
    saved = os.path.join(args.work_dir, "results.json")
    if args.report_only:
        results, verification, sim.host_seconds = load(saved, args, widen=False)
    else:
        previous, previous_verification, previous_seconds = {}, ([], []), 0.0
        if args.add and os.path.exists(saved):
            run_args = argparse.Namespace(**vars(args))
            previous, previous_verification, previous_seconds = load(saved, args, widen=True)
            args, report_args = run_args, args
        else:
            report_args = args
        log(f"== probing the algorithms of this build ({', '.join(args.algorithms)})")
        probe = probe_algorithms(sim, args.algorithms)
        available = [a for a in args.algorithms if probe[a].get("status") == "ok"]
        log(f"   available: {', '.join(available)}; n/a: "
            f"{', '.join(a for a in args.algorithms if a not in available) or 'none'}")
        log("== simulations")
        sim.host_seconds = previous_seconds
        results = dict(previous)
        results.update(main_runs(sim, args, available))
        dump(saved, results, previous_verification, sim.host_seconds, report_args)
        log("== the re-balancing call on its own (F = 1)")
        results.update(rebalance_runs(sim, args, available))
        verification = previous_verification
        dump(saved, results, verification, sim.host_seconds, report_args)
        if not args.quick and not args.no_verify:
            log("== verification at 64 ranks")
            verification = (verify_scaling(sim, args, results), verify_shims(sim, args, results))
            dump(saved, results, verification, sim.host_seconds, report_args)
        args = report_args
    os.makedirs(args.docs, exist_ok=True)
    png = os.path.abspath(os.path.join(args.docs, "simulation.png"))
    plot(results, args, png)
    report = os.path.join(args.docs, "simulation.md")
    write_report(results, args, verification, sim.host_seconds, report, png, started)
    log(f"== wrote {report} and {png} ({(time.monotonic() - wall) / 60:.1f} min)")
    failed = [k for k, r in results.items() if r.get("status") not in ("ok", "n/a", "memory")]
    checks = [k for k, r in results.items() if r.get("check") not in (None, "ok")]
    if failed or checks:
        log(f"FAILED: {failed + checks}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
