#!/usr/bin/env python3
# tune sample / bench forced row, per algorithm at the sizes both time (8 B, 4 KiB, 64 KiB), p = 2 and 4.
# usage: agree.py TUNE_LOG BENCH_JSON
import json, sys, re
sizes = [8, 256, 4096, 16384, 65536]
tune = {}
for line in open(sys.argv[1]):
    m = re.match(r"alltoall/(\S+)\s+\S+\s+\S+\s+\S+\s+(.*)", line)
    if not m: continue
    vals = [float(x.split("/")[0]) for x in m.group(2).split()]
    for i, v in enumerate(vals):
        tune[(m.group(1), 2 + i // 5, sizes[i % 5])] = v
bench = {}
for r in json.load(open(sys.argv[2]))["rows"]:
    name = r["row"][5:-7]
    if name == "bruck-radix-3": name = "bruck-radix"
    bench[(name, r["ranks"], r["bytes/pair"])] = r["us"]
print("| algorithm | p | block | tune µs | bench µs | tune / bench |")
print("|---|---|---|---|---|---|")
for (alg, p, b), v in sorted(tune.items()):
    if (alg, p, b) in bench:
        print(f"| {alg} | {p} | {b} | {v:.1f} | {bench[(alg, p, b)]:.1f} | {v / bench[(alg, p, b)]:.2f} |")
