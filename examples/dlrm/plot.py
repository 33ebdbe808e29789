#!/usr/bin/env python3
"""Pictures of dct-dlrm seed runs (directories of SETTING-sSEED.json files, as summarize.py
reads them): test accuracy after the last epoch against the data-parallel bytes ratio, as the
difference to the dense run of the same seed (mean and standard error over the seeds), and
that difference after every epoch.

    python3 examples/dlrm/plot.py OUT_PREFIX TITLE LABEL=DIR [LABEL=DIR ...]
      writes OUT_PREFIX-accuracy-bytes.png and OUT_PREFIX-accuracy-epochs.png
      (needs python3-matplotlib; each DIR is drawn in its own colour, LABEL in the legend;
      settings whose name holds "bucket", one request over all layers, are dashed per epoch)
"""

import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

from summarize import load, paired_differences  # noqa: E402 (beside this script)

COLOURS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]


def final_difference(runs, name):
    """Mean and standard error over the seeds of the final accuracy minus dense's."""
    finals = [d[-1] for d in paired_differences(runs, name)]
    se = statistics.stdev(finals) / len(finals) ** 0.5 if len(finals) > 1 else 0.0
    return statistics.mean(finals), se


def main(prefix, title, sources):
    loaded = [(label, *load(directory)) for label, directory in sources]

    # Points are numbered; the key beside the plot names them (labels at the points overlap
    # where settings send about the same bytes). Settings that compress only the model-parallel
    # exchange (DP ratio near 1) are left out: they are no point on this axis.
    fig, (ax, key) = plt.subplots(1, 2, figsize=(11, 5), gridspec_kw={"width_ratios": [3, 2]})
    ax.axhline(0, color="black", linewidth=0.8)
    lines, number = [], 0
    for (label, runs, ratios), colour in zip(loaded, COLOURS):
        names = sorted((n for n in runs if n != "dense" and ratios[n]["dp"] > 2),
                       key=lambda n: ratios[n]["dp"])
        lines.append((f"{label} ({len(runs['dense'])} seeds):", colour))
        for name in names:
            number += 1
            mean, se = final_difference(runs, name)
            ax.errorbar([ratios[name]["dp"]], [mean], yerr=[se], color=colour, marker="o",
                        capsize=3, linestyle="none")
            ax.annotate(str(number), (ratios[name]["dp"], mean), textcoords="offset points",
                        xytext=(4, 2), fontsize=7, color=colour)
            mp = f" / MP {ratios[name]['mp']:.0f}x" if ratios[name]["mp"] > 1.5 else ""
            lines.append((f"{number:2d} {name}: DP {ratios[name]['dp']:.0f}x{mp}, "
                          f"{mean:+.2f} ({se:.2f})", colour))
    ax.set_xscale("log")
    for axis in (ax.xaxis.set_major_formatter, ax.xaxis.set_minor_formatter):
        axis(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlabel("fewer data-parallel bytes than MPI_Allreduce (x, log scale)")
    ax.set_ylabel("final test accuracy minus dense's, same seed (points)")
    ax.set_title(f"{title}:\naccuracy against bytes (mean and standard error)", fontsize=9)
    ax.grid(True, which="both", linewidth=0.3)
    key.axis("off")
    for row, (text, colour) in enumerate(lines):
        key.text(0, 1 - row * 0.045, text, color=colour, fontsize=7, family="monospace",
                 transform=key.transAxes, va="top")
    fig.tight_layout()
    fig.savefig(f"{prefix}-accuracy-bytes.png", dpi=110)

    fig, axes = plt.subplots(1, len(loaded), figsize=(5 * len(loaded), 4.2), sharey=True,
                             squeeze=False)
    for (label, runs, ratios), ax in zip(loaded, axes[0]):
        ax.axhline(0, color="black", linewidth=0.8)
        names = sorted((n for n in runs if n != "dense"), key=lambda n: ratios[n]["dp"])
        for name, colour in zip(names, plt.cm.tab20(range(20))):
            per_epoch = [statistics.mean(d) for d in zip(*paired_differences(runs, name))]
            ax.plot(range(1, len(per_epoch) + 1), per_epoch, marker="o", color=colour,
                    linestyle="--" if "bucket" in name else "-",
                    label=f"{name} ({ratios[name]['dp']:.0f}x)")
        ax.set_xlabel("epoch")
        ax.set_title(label, fontsize=9)
        ax.set_xticks(range(1, len(per_epoch) + 1))
        ax.legend(fontsize=6, ncol=2, loc="lower right")
        ax.grid(True, linewidth=0.3)
    axes[0][0].set_ylabel("test accuracy minus dense's, same seed (points)")
    fig.suptitle(f"{title}: accuracy after every epoch (mean over the seeds)", fontsize=9)
    fig.tight_layout()
    fig.savefig(f"{prefix}-accuracy-epochs.png", dpi=110)


if __name__ == "__main__":
    if len(sys.argv) < 4 or any("=" not in a for a in sys.argv[3:]):
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2], [a.split("=", 1) for a in sys.argv[3:]])
