#!/usr/bin/env python3
"""The table of docs/python.md from examples/python/compare.sh's JSON files: per setting, the
final test accuracy per seed, mean and spread, against dense, the bytes ratio and step time."""

import glob
import json
import os
import statistics
import sys

ORDER = ["dense", "fp16", "powersgd-r4", "powersgd-r1", "dct-d0.036", "dct-d0.0125",
         "dct-d0.005", "dct-d0.0125-plain", "dct-d0.0125-momentum-twice"]


def load(directory):
    """compare.sh's runs by setting: {"dct-d0.0125": [run of seed 1, ...], ...}."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(directory, "*-s*.json"))):
        name = os.path.basename(path).rsplit("-s", 1)[0]
        with open(path, encoding="utf-8") as f:
            runs.setdefault(name, []).append(json.load(f))
    return runs


def main(directory):
    runs = load(directory)
    if "dense" not in runs:
        sys.exit(f"no dense runs in {directory}")
    dense_mean = statistics.mean(r["epochs"][-1]["accuracy"] for r in runs["dense"])
    print("| setting | bytes ratio | accuracy per seed | mean (spread) | vs dense | step ms "
          "| hook ms |")
    print("|---|---|---|---|---|---|---|")
    for name in sorted(runs, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER)):
        finals = [r["epochs"][-1] for r in sorted(runs[name], key=lambda r: r["args"]["seed"])]
        accuracies = [f["accuracy"] for f in finals]
        mean = statistics.mean(accuracies)
        spread = max(accuracies) - min(accuracies)
        ratio = statistics.mean(f["ratio"] for f in finals)
        step = statistics.mean(statistics.mean(e["step_ms"] for e in r["epochs"])
                               for r in runs[name])
        hooks = [e["hook_ms"] for r in runs[name] for e in r["epochs"] if "hook_ms" in e]
        hook = f"{statistics.mean(hooks):.2f}" if hooks else ""
        delta = "" if name == "dense" else f"{mean - dense_mean:+.2f}"
        print(f"| {name} | {ratio:.1f}x | {' / '.join(f'{a:.2f}' for a in accuracies)} | "
              f"{mean:.2f} ({spread:.2f}) | {delta} | {step:.2f} | {hook} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/results/python-ddp-hooks")
