#!/usr/bin/env python3
"""Ranges over rounds of run.sh's output: plain collective read GiB/s, and dct's restart and
roll-back loads over it, per setting and build. Usage: summarize.py output.txt"""
import re
import sys
from collections import defaultdict

rows = defaultdict(lambda: defaultdict(list))
key = None
for line in open(sys.argv[1]):
    m = re.match(r"######## round \d+: (\d+) ranks x (\d+) MiB in \S+, build (\S+)", line)
    if m:
        key = (f"{m[1]} x {m[2]} MiB", m[3])
        continue
    fields = line.split()
    if line.startswith("plain HDF5 read, collective"):
        rows[key]["plain read GiB/s"].append(float(fields[-1]))
    elif line.startswith("DCT_Checkpoint_load"):
        rows[key]["roll-back / plain"].append(float(fields[-2]))
    elif line.strip().startswith("into new requests (restart)"):
        rows[key]["restart / plain"].append(float(fields[-2]))

def span(values):
    return f"{min(values):.2f}-{max(values):.2f}" if values else "-"

for (setting, build), columns in rows.items():
    print(f"{setting:12} {build:4} " + "  ".join(f"{name} {span(v)}" for name, v in columns.items()))
