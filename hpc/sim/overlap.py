#!/usr/bin/env python3
"""How much the ranks' kept indices overlap, measured on dct-dlrm --trace-indices files, and a
model of it fitted to the measured union curve and extrapolated to 64-1024 ranks.

  overlap.py TRACE [TRACE...] --out DIR

Every trace is one run (P ranks, some steps). For each traced step the kept set K_r of rank r
is the union of its requests' kept indices, each request's indices offset by the elements of
the requests before it (one index space over all the model's data-parallel gradients, like the
simulation's one tensor). Measured, averaged over the traced steps:

  union(p)   |K_r1 u ... u K_rp| / (|K_r1| + ... + |K_rp|), over every subset of p of the P
             ranks, p = 1..P (1: no overlap; 1/p: identical sets);
  shared(j)  fraction of the indices kept by some rank that exactly j of the P ranks kept.

Model (docs/simulation.md, "Measured index overlap"): every index i has a probability x_i with
which each rank keeps it, the ranks independent given x; the mean of x is the density d. Then
E|K_1 u ... u K_p| = N (1 - E[(1 - x)^p]). Two families, each fitted to union(p) of the trace
with the most ranks (least squares over p = 2..P), the other traces as a check:

  pool   a fraction h of the indices is "hot", kept with probability q by every rank; the
         others with p0 = (d - h q) / (1 - h) (two parameters, h and q)
  beta   x ~ Beta(d s, (1 - d) s) (one parameter, the concentration s; s -> infinity is the
         independent extreme)

Writes DIR/overlap.json (measurements, fits, extrapolation, the class list the simulator takes)
and DIR/overlap.md (tables). Standard library only.
"""
import argparse
import itertools
import json
import math
import os
import random
import sys

EXTRAPOLATE = [8, 16, 64, 256, 1024]
BETA_CLASSES = 64  # equal-mass classes the simulator's beta index sets use


def read_trace(path):
    """(header dict, {step: {rank: set of global indices}}, request counts,
    {(step, request): {rank: set}})."""
    header, steps, by_request = {}, {}, {}
    with open(path) as handle:
        for line in handle:
            if line.startswith("#"):
                if "model" in line and "density" in line:
                    header["run"] = line[1:].strip()
                continue
            fields = line.split()
            if not fields:
                continue
            if not fields[0].isdigit():
                header[fields[0]] = fields[1:]
                continue
            step, request, rank, kept = (int(v) for v in fields[:4])
            offset = sum(int(c) for c in header["counts"][:request])
            indices = {offset + int(v) for v in fields[4:4 + kept]}
            steps.setdefault(step, {}).setdefault(rank, set()).update(indices)
            by_request.setdefault((step, request), {})[rank] = indices
    counts = [int(c) for c in header["counts"]]
    ranks = int(header["ranks"][0])
    for step, sets in steps.items():
        if len(sets) != ranks:
            sys.exit(f"{path}: step {step} has {len(sets)} ranks of {ranks}")
    return header, steps, counts, by_request


def union_by_request(by_request, requests, ranks):
    """Per request: |union of all P kept sets| / (their sizes summed), mean over the steps."""
    out = []
    for request in range(requests):
        ratios = [len(set().union(*sets.values())) / max(1, sum(len(s) for s in sets.values()))
                  for (step, r), sets in by_request.items() if r == request and len(sets) == ranks]
        out.append(sum(ratios) / len(ratios) if ratios else None)
    return out


def measure(steps, ranks):
    """union(p) for p = 1..P and shared(j) for j = 1..P, averaged over the steps."""
    union = [0.0] * (ranks + 1)
    shared = [0.0] * (ranks + 1)
    kept = 0.0
    for sets in steps.values():
        members = [sets[r] for r in range(ranks)]
        kept += sum(len(s) for s in members) / ranks
        for p in range(1, ranks + 1):
            ratios = [len(set().union(*combo)) / max(1, sum(len(s) for s in combo))
                      for combo in itertools.combinations(members, p)]
            union[p] += sum(ratios) / len(ratios)
        times = {}
        for s in members:
            for i in s:
                times[i] = times.get(i, 0) + 1
        for j in times.values():
            shared[j] += 1.0 / len(times)
    n = len(steps)
    return ([u / n for u in union[1:]], [s / n for s in shared[1:]], kept / n)


# --- Models: E[(1 - x)^p] for p ranks ---------------------------------------------------------
def pool_p0(d, h, q):
    return (d - h * q) / (1.0 - h)


def pool_miss(d, params, p):
    h, q = params
    p0 = pool_p0(d, h, q)
    return h * (1.0 - q) ** p + (1.0 - h) * (1.0 - p0) ** p


def beta_miss(d, params, p):
    (s,) = params
    a, b = d * s, (1.0 - d) * s
    # E[(1-x)^p] = B(a, b + p) / B(a, b) = prod_{j<p} (b + j) / (a + b + j)
    return math.exp(sum(math.log((b + j) / (a + b + j)) for j in range(p)))


def classes_miss(classes, p):
    return sum(w * (1.0 - x) ** p for w, x in classes)


def union_ratio(miss, d, p):
    """Expected |union of p kept sets| / (p k)."""
    return (1.0 - miss(p)) / (p * d)


def shared_fractions(miss_classes, ranks):
    """Expected shared(j), j = 1..P, of a class list [(weight, x)]."""
    counts = [sum(w * math.comb(ranks, j) * x ** j * (1 - x) ** (ranks - j)
                  for w, x in miss_classes) for j in range(1, ranks + 1)]
    total = sum(counts)
    return [c / total for c in counts]


def fit_error(model, d, params, union):
    return sum((union_ratio(lambda p: model(d, params, p), d, p) - u) ** 2
               for p, u in enumerate(union, 1) if p >= 2)


def fit_pool(d, union):
    best = None
    for hi in range(1, 400):
        h = d * 10 ** (3.0 * hi / 400 - 2.0)  # 0.01 d .. 10 d
        if h >= 1.0:
            break
        for qi in range(1, 201):
            q = qi / 200.0
            if h * q > d:
                break
            error = fit_error(pool_miss, d, (h, q), union)
            if best is None or error < best[0]:
                best = (error, (h, q))
    # Refine around the grid's best by coordinate search.
    error, (h, q) = best
    step_h, step_q = h * 0.05, 0.0025
    for _ in range(200):
        improved = False
        for dh, dq in ((step_h, 0), (-step_h, 0), (0, step_q), (0, -step_q)):
            hh, qq = h + dh, q + dq
            if 0 < hh < 1 and 0 < qq <= 1 and hh * qq <= d:
                e = fit_error(pool_miss, d, (hh, qq), union)
                if e < error:
                    error, h, q, improved = e, hh, qq, True
        if not improved:
            step_h, step_q = step_h / 2, step_q / 2
    return (h, q), error


def fit_beta(d, union):
    best = None
    for i in range(0, 801):
        s = 10 ** (i / 100.0 - 2.0)  # 0.01 .. 10^6
        error = fit_error(beta_miss, d, (s,), union)
        if best is None or error < best[0]:
            best = (error, s)
    error, s = best
    lo, hi = s / 10 ** 0.01, s * 10 ** 0.01
    for _ in range(60):  # golden section on log s
        m1 = math.exp(math.log(lo) + 0.382 * (math.log(hi) - math.log(lo)))
        m2 = math.exp(math.log(lo) + 0.618 * (math.log(hi) - math.log(lo)))
        if fit_error(beta_miss, d, (m1,), union) < fit_error(beta_miss, d, (m2,), union):
            hi = m2
        else:
            lo = m1
    s = math.sqrt(lo * hi)
    return (s,), fit_error(beta_miss, d, (s,), union)


def pool_classes(d, params):
    h, q = params
    return [[h, q], [1.0 - h, pool_p0(d, h, q)]]


def beta_classes(d, params, samples=200_000, seed=1):
    """BETA_CLASSES equal-mass classes of Beta(d s, (1-d) s), each at its members' mean
    (the simulator's index sets: a class list keeps the mean density exact)."""
    (s,) = params
    generator = random.Random(seed)
    xs = sorted(generator.betavariate(d * s, (1.0 - d) * s) for _ in range(samples))
    size = samples // BETA_CLASSES
    classes = [[1.0 / BETA_CLASSES, sum(xs[c * size:(c + 1) * size]) / size]
               for c in range(BETA_CLASSES)]
    scale = d / sum(w * x for w, x in classes)  # sampling noise: mean exactly d
    return [[w, min(1.0, x * scale)] for w, x in classes]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--out", required=True, help="directory for overlap.json and .md")
    args = parser.parse_args()

    runs = []
    for path in args.traces:
        header, steps, counts, by_request = read_trace(path)
        ranks = int(header["ranks"][0])
        union, shared, kept = measure(steps, ranks)
        runs.append({"trace": os.path.basename(path), "run": header.get("run", ""),
                     "ranks": ranks, "steps": sorted(steps), "elements": sum(counts),
                     "requests": counts, "kept_per_rank": kept,
                     "density": kept / sum(counts), "union": union, "shared": shared,
                     "union_by_request": union_by_request(by_request, len(counts), ranks)})
    reference = max(runs, key=lambda r: r["ranks"])
    d = reference["density"]
    fits = {}
    pool, pool_error = fit_pool(d, reference["union"])
    fits["pool"] = {"params": {"h": pool[0], "q": pool[1], "p0": pool_p0(d, *pool)},
                    "error": pool_error, "classes": pool_classes(d, pool)}
    beta, beta_error = fit_beta(d, reference["union"])
    fits["beta"] = {"params": {"s": beta[0], "a": d * beta[0], "b": (1 - d) * beta[0]},
                    "error": beta_error, "classes": beta_classes(d, beta)}
    misses = {"pool": lambda p: pool_miss(d, pool, p), "beta": lambda p: beta_miss(d, beta, p),
              "independent": lambda p: (1.0 - d) ** p, "shared": lambda p: 1.0 - d}
    for name in ("pool", "beta"):
        fit = fits[name]
        fit["classes_union"] = {p: union_ratio(lambda q: classes_miss(fit["classes"], q), d, p)
                                for p in EXTRAPOLATE}
        fit["check"] = {run["trace"]: [union_ratio(misses[name], d, p)
                                       for p in range(1, run["ranks"] + 1)] for run in runs}
        fit["shared"] = shared_fractions(fit["classes"], reference["ranks"])
    best = min(("pool", "beta"), key=lambda name: fits[name]["error"])
    extrapolated = {name: {p: union_ratio(miss, d, p) for p in EXTRAPOLATE}
                    for name, miss in misses.items()}
    result = {"runs": runs, "density": d, "reference": reference["trace"], "fits": fits,
              "best": best, "union_extrapolated": extrapolated}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "overlap.json"), "w") as handle:
        json.dump(result, handle, indent=1)
    with open(os.path.join(args.out, "overlap.md"), "w") as handle:
        handle.write(report(result))
    print(report(result))


def report(result):
    d = result["density"]
    lines = ["Measured: union(p) = |union of p ranks' kept sets| / (their sizes summed), mean "
             "over all subsets of p ranks and the traced steps (1 = disjoint, 1/p = identical); "
             f"the independent extreme at density {d:.4g} is (1 - (1-d)^p) / (p d).", "",
             "| trace | ranks | steps | elements | kept/rank | " +
             " | ".join(f"p={p}" for p in range(1, 9)) + " |",
             "|---|---:|---|---:|---:|" + "---:|" * 8]
    for run in result["runs"]:
        cells = [f"{u:.3f}" for u in run["union"]] + ["-"] * (8 - run["ranks"])
        lines.append(f"| {run['trace']} | {run['ranks']} | {run['steps'][0]}-{run['steps'][-1]}"
                     f" | {run['elements']} | {run['kept_per_rank']:.1f} | " +
                     " | ".join(cells) + " |")
    ind = [(1 - (1 - d) ** p) / (p * d) for p in range(1, 9)]
    lines.append("| independent | | | | | " + " | ".join(f"{u:.3f}" for u in ind) + " |")
    fits = result["fits"]
    for name in ("pool", "beta"):
        lines.append(f"| {name} fit | | | | | " + " | ".join(
            f"{u:.3f}" for u in fits[name]["check"][result["reference"]]) + " |")
    reference = next(r for r in result["runs"] if r["trace"] == result["reference"])
    ranks = reference["ranks"]
    lines += ["", f"shared(j): fraction of the indices kept by some rank that exactly j of the "
              f"{ranks} ranks kept ({result['reference']}; fits: their class lists)", "",
              "| | " + " | ".join(f"j={j}" for j in range(1, ranks + 1)) + " |",
              "|---|" + "---:|" * ranks,
              "| measured | " + " | ".join(f"{s:.4f}" for s in reference["shared"]) + " |"]
    for name in ("pool", "beta"):
        lines.append(f"| {name} | " + " | ".join(f"{s:.4f}" for s in fits[name]["shared"]) + " |")
    pool, beta = fits["pool"]["params"], fits["beta"]["params"]
    lines += ["", f"Fits (least squares on union(p), p = 2..{ranks}, density d = {d:.5g}):", "",
              f"- pool: h = {pool['h']:.5g} of the indices hot, kept by each rank with q = "
              f"{pool['q']:.4g}; the others with p0 = {pool['p0']:.4g} "
              f"(squared error {fits['pool']['error']:.3g})",
              f"- beta: s = {beta['s']:.4g} (a = {beta['a']:.4g}, b = {beta['b']:.4g}; squared "
              f"error {fits['beta']['error']:.3g})", f"- better fit: {result['best']}", "",
              "Extrapolated union(P) (the fitted models; not measured beyond "
              f"{ranks} ranks) and union(P) P k / N, the fraction of the tensor the union covers:",
              "", "| model | " + " | ".join(f"P={p}" for p in EXTRAPOLATE) + " | " +
              " | ".join(f"cover P={p}" for p in EXTRAPOLATE) + " |",
              "|---|" + "---:|" * (2 * len(EXTRAPOLATE))]
    for name, values in result["union_extrapolated"].items():
        lines.append(f"| {name} | " + " | ".join(f"{values[p]:.4f}" for p in EXTRAPOLATE) +
                     " | " + " | ".join(f"{values[p] * p * d:.4f}" for p in EXTRAPOLATE) + " |")
    for name in ("pool", "beta"):
        values = fits[name]["classes_union"]
        lines.append(f"| {name}, simulator classes | " +
                     " | ".join(f"{values[p]:.4f}" for p in EXTRAPOLATE) + " | " +
                     " | ".join(f"{values[p] * p * d:.4f}" for p in EXTRAPOLATE) + " |")
    lines += ["", "Per request (layer or bucket): union(P) of all the trace's P ranks, and the "
              "independent extreme at that P:", "",
              "| trace | request | elements | union(P) | independent |",
              "|---|---:|---:|---:|---:|"]
    for run in result["runs"]:
        for request, (count, u) in enumerate(zip(run["requests"], run["union_by_request"])):
            p = run["ranks"]
            lines.append(f"| {run['trace']} | {request} | {count} | {u:.3f} | "
                         f"{(1 - (1 - d) ** p) / (p * d):.3f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
