#!/usr/bin/env python3
"""The pictures of docs/python.md, drawn from examples/python/compare.sh's JSON files:
test accuracy after the last epoch against the bytes each rank sent (mean and range over the
seeds, log scale), and test accuracy per epoch (mean over the seeds).

    python3 examples/python/plot.py [RESULTS_DIR] [OUT_PREFIX]
      (defaults: docs/results/python-ddp-hooks, docs/python-ddp-hooks; needs python3-matplotlib)
"""

import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from summarize import load  # noqa: E402 (beside this script)

# setting -> (label, colour, marker); settings not listed are not drawn.
STYLE = {
    "dense": ("DDP allreduce (dense)", "black", "s"),
    "fp16": ("fp16 hook", "grey", "D"),
    "powersgd-r4": ("PowerSGD rank 4", "tab:orange", "v"),
    "powersgd-r1": ("PowerSGD rank 1", "tab:red", "v"),
    "dct-d0.036": ("dct density 0.036", "#6baed6", "o"),
    "dct-d0.0125": ("dct density 0.0125", "tab:blue", "o"),
    "dct-d0.005": ("dct density 0.005", "navy", "o"),
    "dct-d0.0125-plain": ("dct 0.0125, no momentum correction", "tab:cyan", "o"),
}

# Where a setting's label goes, in points from its marker (settings at the same bytes apart).
LABEL_OFFSET = {"dct-d0.0125": (8, 16), "dct-d0.0125-plain": (8, -16), "fp16": (-8, 16),
                "dense": (8, -16), "powersgd-r4": (8, 4), "dct-d0.036": (8, 12)}


def main(directory, prefix):
    runs = load(directory)
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    dense = statistics.mean(r["epochs"][-1]["accuracy"] for r in runs["dense"])
    ax.axhline(dense, color="black", linewidth=0.8, linestyle=":")
    for name, (label, colour, marker) in STYLE.items():
        if name not in runs:
            continue
        finals = [r["epochs"][-1] for r in runs[name]]
        sent = statistics.mean(f["bytes_sent"] for f in finals) / 1e6
        accuracies = [f["accuracy"] for f in finals]
        mean = statistics.mean(accuracies)
        ax.errorbar([sent], [mean], yerr=[[mean - min(accuracies)], [max(accuracies) - mean]],
                    color=colour, marker=marker, capsize=3, linestyle="none")
        ratio = statistics.mean(f["ratio"] for f in finals)
        dx, dy = LABEL_OFFSET.get(name, (8, 0))
        ax.annotate(f"{label}\n{ratio:.0f}x fewer, {mean - dense:+.2f}", (sent, mean),
                    textcoords="offset points", xytext=(dx, dy), fontsize=7,
                    color=colour, ha="right" if dx < 0 else "left", va="center",
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none",
                          "alpha": 0.8})
    ax.set_xscale("log")
    ax.set_xlim(8, 4e4)
    ax.set_xlabel("MB sent per rank in 5 epochs (log scale)")
    ax.set_ylabel("test accuracy after 5 epochs (%)")
    ax.set_title("MLP on Fashion-MNIST, DDP on 2 ranks: accuracy against bytes "
                 "(mean, range of 3 seeds)", fontsize=9)
    ax.grid(True, which="both", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(f"{prefix}-accuracy-bytes.png", dpi=110)

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for name, (label, colour, marker) in STYLE.items():
        if name not in runs:
            continue
        epochs = [e["epoch"] for e in runs[name][0]["epochs"]]
        means = [statistics.mean(r["epochs"][i]["accuracy"] for r in runs[name])
                 for i in range(len(epochs))]
        style = "--" if name.startswith("dct-d0.0125-plain") or name == "fp16" else "-"
        ax.plot(epochs, means, marker=marker, color=colour, linestyle=style,
                alpha=1.0 if name in ("dense", "dct-d0.0125", "powersgd-r1") else 0.55,
                label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy (%), mean of 3 seeds")
    ax.set_xticks(epochs)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, linewidth=0.3)
    ax.set_title("Test accuracy per epoch", fontsize=9)
    fig.tight_layout()
    fig.savefig(f"{prefix}-accuracy-epochs.png", dpi=110)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/results/python-ddp-hooks",
         sys.argv[2] if len(sys.argv) > 2 else "docs/python-ddp-hooks")
