#!/usr/bin/env python3
"""Tables of run.sh's output: per setting and build, each round's ratios over the plain
collective HDF5 read/write, and the load times (ms), then the medians over rounds."""
import re
import statistics
import sys
from collections import defaultdict

HEADER = re.compile(r"######## round (\d+): (\d+) ranks x (\d+) MiB in (\S+), binding (\S+), "
                    r"build (\S+)")
runs = []  # one per bench run; incomplete ones (cut off) are left out below
for line in open(sys.argv[1]):
    m = HEADER.match(line)
    if m:
        rnd, ranks, mib, where, binding, build = m.groups()
        runs.append(dict(round=int(rnd), setting=f"{ranks}x{mib} {where} {binding}",
                         gib=int(ranks) * int(mib) / 1024, build=build))
        continue
    if not runs:
        continue
    run = runs[-1]
    fields = line.split()
    if line.startswith("DCT_Checkpoint_save "):
        run["save"], run["save/coll"] = float(fields[1]), float(fields[2])
    elif line.startswith("  vs collective write + fsync"):
        run["save/fsync"] = float(fields[-1])
    elif line.startswith("plain HDF5 read, collective"):
        run["read"] = float(fields[-1])
    elif line.startswith("DCT_Checkpoint_load "):
        run["rollback"], run["rollback/coll"] = float(fields[1]), float(fields[2])
    elif line.startswith("  into new requests (restart)"):
        run["restart"], run["restart/coll"] = float(fields[4]), float(fields[5])

def ms(run, key):
    return 1000 * run["gib"] / run[key]

print("| setting | build | round | save / plain coll | save / plain + fsync | roll-back / plain"
      " read | restart / plain read | plain read ms | roll-back ms | restart ms |")
print("|---|---|---|---|---|---|---|---|---|---|")
groups = defaultdict(list)
runs = [run for run in runs if "restart" in run]
for run in runs:
    groups[(run["setting"], run["build"])].append(run)
    print(f"| {run['setting']} | {run['build']} | {run['round']} | {run['save/coll']:.2f} | "
          f"{run['save/fsync']:.2f} | {run['rollback/coll']:.2f} | {run['restart/coll']:.2f} | "
          f"{ms(run, 'read'):.1f} | {ms(run, 'rollback'):.1f} | {ms(run, 'restart'):.1f} |")
print()
print("Ranges over the rounds:")
print()
print("| setting | build | roll-back / plain read | restart / plain read | roll-back ms |"
      " restart ms | save / plain + fsync |")
print("|---|---|---|---|---|---|---|")
for (setting, build), group in groups.items():
    def span(f):
        values = [f(r) for r in group]
        return f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else f"{values[0]:.2f}"
    print(f"| {setting} | {build} | {span(lambda r: r['rollback/coll'])} | "
          f"{span(lambda r: r['restart/coll'])} | {span(lambda r: ms(r, 'rollback'))} | "
          f"{span(lambda r: ms(r, 'restart'))} | {span(lambda r: r['save/fsync'])} |")
