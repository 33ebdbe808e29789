# Over 450 lines: the simulation's whole report (tables, checks, the plot) in one script.
"""The page hpc/sim/simulate.py writes (docs/simulation.md and its plot) from the simulated
results: tables, the compute model, the targets, the cost model against the simulation.
Standard library only (gnuplot draws the plot when installed). Past 400 lines: the page's prose
is one template (write_report), kept next to the tables and figures that fill it."""
import math
import os
import subprocess

import sim_config
from sim_config import (BANDWIDTHS_GBPS, DCT_ALGORITHMS, DENSITIES, FAT_TREE, GPU_BYTES_PER_S,
                        HAND_WRITTEN_SECTIONS, HOSTS, INDEX_BYTES, KERNELS_CPU, LINK_LATENCY_US,
                        RANKS, REBALANCING, TARGET_BANDWIDTH, TARGET_BOUND_RATIO, TARGET_DENSITY,
                        TARGET_RANKS, TARGET_SPEEDUP, VALUE_BYTES, full_size_bytes, run_key)


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
        full_bytes = sim_config.FULL_COUNT * VALUE_BYTES
        rate = (interpolate(self.rows, column, full_bytes) * 1e9 if self.rows
                else GPU_BYTES_PER_S)
        return touched / rate

    def terms(self, result, ranks):
        """(seconds per call, extra seconds of a re-balancing call) for one measurement."""
        s, i = VALUE_BYTES, INDEX_BYTES
        tensor = sim_config.FULL_COUNT * s
        dense_reduce = 3 * tensor * (ranks - 1) / ranks  # read two operands, write the sum
        if result["algorithm"] == "mpi":
            return self._bytes(dense_reduce, "copy_GBs"), 0.0
        kept = result["kept_mean"] * result["scale"]
        received = min(sim_config.FULL_COUNT,
                       full_size_bytes(result, "bytes_received_max") / (s + i))
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
        f"{sim_config.FULL_COUNT * 4 / 1e6:.4g} MB fp32 per rank (fat tree, one rank per host)'",
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
    rates = {column: interpolate(cpu.rows, column, sim_config.FULL_COUNT * VALUE_BYTES)
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

- Gradient: {sim_config.FULL_COUNT:,} fp32 values (100 MB) per rank, N(0,1), independent kept indices
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
(N = {sim_config.FULL_COUNT:,} fp32, s = 4-byte values, 4-byte indices, k = kept entries per rank, R =
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
`docs/results/kernels/kernels_float.txt`, interpolated log-log to {sim_config.FULL_COUNT * VALUE_BYTES / 1e6:g} MB):
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
