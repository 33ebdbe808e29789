#!/usr/bin/env python3
"""Seed statistics of dct-dlrm runs: a directory of `--json` files named SETTING-sSEED.json
(one mode per file) becomes a table of, per setting, the bytes ratios over the whole run, the
final test accuracy's mean, standard deviation and standard error over the seeds, the mean
difference to the `dense` runs of the same seeds (or the setting named by --baseline) after
every epoch, and how many seeds did better than their dense run.

    examples/dlrm/summarize.py docs/results/density-warmup
"""

import argparse
import glob
import json
import os
import statistics


def load(directory):
    """{setting: {seed: [test accuracy (%) after each epoch], ...}} and the bytes ratios."""
    runs, ratios = {}, {}
    for path in sorted(glob.glob(os.path.join(directory, "*-s*.json"))):
        name, seed = os.path.basename(path)[: -len(".json")].rsplit("-s", 1)
        with open(path, encoding="utf-8") as f:
            epochs = json.load(f)["runs"][0]["epochs"]
        runs.setdefault(name, {})[int(seed)] = [100 * e["test_accuracy"] for e in epochs]
        sent = {k: sum(e[f"{k}_bytes_sent"] for e in epochs) for k in ("dp", "mp")}
        dense = {k: sum(e[f"{k}_dense_bytes"] for e in epochs) for k in ("dp", "mp")}
        ratios[name] = {k: dense[k] / sent[k] if sent[k] else 0.0 for k in ("dp", "mp")}
    return runs, ratios


def paired_differences(runs, name, baseline="dense"):
    """[[accuracy - the baseline's of the same seed, per epoch] for every seed both have]."""
    base = runs[baseline]
    return [[a - b for a, b in zip(runs[name][s], base[s])] for s in sorted(runs[name])
            if s in base]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--baseline", default="dense")
    args = parser.parse_args()
    runs, ratios = load(args.directory)
    base = runs.get(args.baseline)
    if not base:
        raise SystemExit(f"no {args.baseline} runs in {args.directory}")
    print("| setting | seeds | DP ratio | MP ratio | final accuracy, mean (sd, se) | "
          f"vs {args.baseline}, same seeds (se) | per epoch vs {args.baseline} | seeds above |")
    print("|---|---|---|---|---|---|---|---|")
    for name in sorted(runs, key=lambda n: (n != args.baseline, n)):
        seeds = sorted(runs[name])
        finals = [runs[name][s][-1] for s in seeds]
        mean = statistics.mean(finals)
        sd = statistics.stdev(finals) if len(finals) > 1 else 0.0
        paired = paired_differences(runs, name, args.baseline)
        per_epoch = " ".join(f"{statistics.mean(d):+.2f}" for d in zip(*paired))
        delta = statistics.mean(d[-1] for d in paired)
        delta_se = statistics.stdev(d[-1] for d in paired) / len(paired) ** 0.5 \
            if len(paired) > 1 else 0.0
        above = sum(d[-1] > 0 for d in paired)
        print(f"| {name} | {len(seeds)} | {ratios[name]['dp']:.1f}x | {ratios[name]['mp']:.1f}x "
              f"| {mean:.2f} ({sd:.2f}, {sd / len(finals) ** 0.5:.2f}) "
              f"| {delta:+.2f} ({delta_se:.2f}) | {per_epoch} | {above}/{len(paired)} |")


if __name__ == "__main__":
    main()
