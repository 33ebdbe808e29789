#!/usr/bin/env python3
"""dct's allreduce under SimGrid with kept index sets that overlap across ranks as measured.

  overlap_sim.py --binary build-smpi/sim_allreduce --work-dir build-smpi/sim-overlap \\
      --model docs/results/overlap/mlp/overlap.json --out docs/results/overlap/sim [--ranks 64]

The index sets (sim_allreduce --index-sets): `independent` (every rank's gradient a rotation
of one random tensor, as in docs/simulation.md), `shared` (every rank the same gradient: the
kept sets coincide) and the fitted models of hpc/sim/overlap.py (`beta`, `pool`: a class list,
each index kept by each rank with its class's probability, independently across ranks).

1. Check: at the --check-ranks (F = 1, 2^18 elements, real links), `split` with an unbounded
   result, whose result has one non-zero per index in the union of the kept sets: the union
   ratio |union| / (P k) of the generated sets against the model's and the measured one.
2. Timing: at the --ranks, MPI_Allreduce once and the --algorithms (default `auto`, `split_r`:
   split with the result bounded to the density) per index sets, scaled as docs/simulation.md
   describes (simulate.py's
   Simulator and plan_count; a class list costs every rank a private gradient, which the
   memory plan counts). Network time only (no compute delay), the reported call is the second
   of a request with dct_interval 1000 (no re-balancing).

Writes OUT/overlap_sim.json and OUT/overlap_sim.md. Standard library only.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simulate  # noqa: E402  (the scaling, the platform and the smpirun wrapper)

DENSITY = "0.01"


def classes_argument(classes):
    return "classes:" + ",".join(f"{w:.12g}:{x:.12g}" for w, x in classes)


def union_ratio(result, ranks):
    """|union of the kept sets| / (P k) from split's unbounded result."""
    return result["result_nnz"] / (ranks * result["kept_mean"])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--model", required=True, help="overlap.json of hpc/sim/overlap.py")
    parser.add_argument("--out", required=True)
    parser.add_argument("--ranks", default="64", help="comma list of rank counts timed")
    parser.add_argument("--check-ranks", default="2,4,8,16")
    parser.add_argument("--bandwidth", type=int, default=25, help="link Gb/s")
    parser.add_argument("--sets", default="independent,beta,pool,shared")
    parser.add_argument("--algorithms", default="auto,split_r",
                        help="timed per index sets (X_r: X with dct_result_density = density)")
    parser.add_argument("--memory-gib", type=float, default=12.0)
    parser.add_argument("--work-budget", type=int, default=1 << 26,
                        help="rank-elements per measurement (simulate.py's is 2^28)")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite OUT/overlap_sim.md from OUT/overlap_sim.json")
    args = parser.parse_args()
    with open(args.model) as handle:
        model = json.load(handle)
    sets = {"independent": "independent", "shared": "shared"}
    for name in ("beta", "pool"):
        sets[name] = classes_argument(model["fits"][name]["classes"])
    chosen = args.sets.split(",")
    reference = next(r for r in model["runs"] if r["trace"] == model["reference"])
    if args.report_only:
        with open(os.path.join(args.out, "overlap_sim.json")) as handle:
            state = json.load(handle)
        text = report(state, model, reference, list(state["sets"]), args)
        with open(os.path.join(args.out, "overlap_sim.md"), "w") as handle:
            handle.write(text)
        print(text)
        return 0
    sim = simulate.Simulator(os.path.abspath(args.binary), args.work_dir,
                             simulate.kokkos_library(args.binary))
    open(os.path.join(args.work_dir, "smpirun.log"), "w").close()

    checks = {}
    for ranks in (int(p) for p in args.check_ranks.split(",") if p):
        for name in chosen:
            found, _ = sim.run(args.bandwidth, ranks, 1 << 18, [f"split:{DENSITY}"],
                               extra=["--index-sets", sets[name], "--no-control"],
                               label=f"check {name}", scale=1)
            checks[f"{ranks} {name}"] = union_ratio(found[0], ranks)

    timings = {}
    memory = args.memory_gib * 2**30
    for ranks in (int(p) for p in args.ranks.split(",") if p):
        count = simulate.plan_count("mpi", ranks, "1", memory, args.work_budget)
        found, _ = sim.run(args.bandwidth, ranks, count, ["mpi"], label="measure mpi")
        timings[f"{ranks} mpi"] = found[0]
        for name in chosen:
            private = sets[name].startswith("classes:")
            count = simulate.plan_count("split", ranks, DENSITY, memory, args.work_budget,
                                        private_gradient=private)
            if count is None:
                continue
            found, _ = sim.run(args.bandwidth, ranks, count,
                               [f"{a}:{DENSITY}" for a in args.algorithms.split(",")],
                               extra=["--index-sets", sets[name]], label=f"measure {name}")
            for result in found:
                timings[f"{ranks} {name} {result['algorithm']}"] = result
    os.makedirs(args.out, exist_ok=True)
    state = {"model": args.model, "sets": {k: sets[k] for k in chosen}, "checks": checks,
             "timings": timings, "host_seconds": sim.host_seconds, "bandwidth": args.bandwidth,
             "work_budget": args.work_budget}
    with open(os.path.join(args.out, "overlap_sim.json"), "w") as handle:
        json.dump(state, handle, indent=1)
    text = report(state, model, reference, chosen, args)
    with open(os.path.join(args.out, "overlap_sim.md"), "w") as handle:
        handle.write(text)
    print(text)
    return 0


def report(state, model, reference, chosen, args):
    d = model["density"]
    check_ranks = sorted({int(k.split()[0]) for k in state["checks"]})
    lines = ["Union ratio |union| / (P k) of the kept sets the simulator generated (split's "
             "unbounded result, F = 1, 2^18 elements, density " + DENSITY + "), against the "
             f"model's expectation and the trace {model['reference']}:", "",
             "| index sets | " + " | ".join(f"P={p}" for p in check_ranks) + " |",
             "|---|" + "---:|" * len(check_ranks)]
    measured = reference["union"]
    lines.append("| measured | " + " | ".join(
        f"{measured[p - 1]:.3f}" if p <= len(measured) else "-" for p in check_ranks) + " |")
    for name in chosen:
        lines.append(f"| {name}, simulated | " + " | ".join(
            f"{state['checks'].get(f'{p} {name}', float('nan')):.3f}" for p in check_ranks)
            + " |")
        if name in ("beta", "pool"):
            classes = model["fits"][name]["classes"]
            lines.append(f"| {name}, model | " + " | ".join(
                f"{(1 - sum(w * (1 - x) ** p for w, x in classes)) / (p * d):.3f}"
                for p in check_ranks) + " |")
    lines += ["", f"Simulated at {state['bandwidth']} Gb/s, density {DENSITY}, network time "
              "only (the second call; no re-balancing; no compute delay); bytes at full size "
              "(100 MB per rank), bound 2k(P-1)/P with 8-byte entries:", "",
              "| ranks | index sets | algorithm | used | time (ms) | vs MPI_Allreduce | "
              "bytes/rank max (MB) | bound (MB) | max / bound | union / (P k) | F | "
              "control time (ms) |",
              "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, result in state["timings"].items():
        parts = key.split()
        ranks = int(parts[0])
        mpi = state["timings"][f"{ranks} mpi"]
        if parts[1] == "mpi":
            lines.append(f"| {ranks} | - | MPI_Allreduce | mpi | {mpi['time'] * 1e3:.4g} | 1 | "
                         f"{simulate.full_size_bytes(mpi, 'bytes_received_max') / 1e6:.4g} | "
                         f"- | - | - | {mpi['scale']:.4g} | "
                         f"{mpi.get('fixed_time', 0.0) * 1e3:.4g} |")
            continue
        if result.get("status") != "ok":
            lines.append(f"| {ranks} | {parts[1]} | {parts[2]} | {result.get('status')} |"
                         " | | | | | | | |")
            continue
        worst = simulate.full_size_bytes(result, "bytes_received_max")
        bound = result["bound"] * result["scale"]
        union = (f"{union_ratio(result, ranks):.4f}" if not parts[2].endswith("_r") else
                 "(bounded)")
        lines.append(f"| {ranks} | {parts[1]} | {parts[2]} | {result['used']} | "
                     f"{result['time'] * 1e3:.4g} | {mpi['time'] / result['time']:.2f}x | "
                     f"{worst / 1e6:.4g} | {bound / 1e6:.4g} | {worst / bound:.2f} | {union} | "
                     f"{result['scale']:.4g} | {result.get('fixed_time', 0.0) * 1e3:.4g} |")
    lines += ["", "`control time`: the same call on a 1-element all-zero tensor at the same F "
              "(docs/simulation.md): an upper bound on what the per-call control messages, which "
              "do not scale, add at that F.", "",
              f"Host time of these simulations: {state['host_seconds'] / 60:.1f} min "
              f"(work budget {state['work_budget']} rank-elements per measurement)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
