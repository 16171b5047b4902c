#!/usr/bin/env python3
# auto / best forced per (p, block) from ibdt-bench alltoall --out JSON files (several: median of the runs' medians).
import json, sys, statistics
rows = {}
for path in sys.argv[1:]:
    data = json.load(open(path))
    for r in data["rows"] if isinstance(data, dict) and "rows" in data else data:
        if not r["row"].startswith("ibdt") or not r["row"].endswith("contig"): continue
        name = r["row"][5:-7] or "auto"
        rows.setdefault((r["ranks"], r["bytes/pair"], name), []).append((r["us"], r["algorithm"]))
keys = sorted({(p, b) for p, b, _ in rows})
print("| p | block | auto (choice) | best forced | pairwise | auto / best | choice's forced row / best |")
print("|---|---|---|---|---|---|---|")
for p, b in keys:
    auto = rows.get((p, b, "auto"))
    forced = {n: statistics.median(u for u, _ in v) for (pp, bb, n), v in rows.items() if pp == p and bb == b and n != "auto"}
    if not auto or not forced: continue
    a = statistics.median(u for u, _ in auto)
    best = min(forced, key=forced.get)
    choice = "/".join(sorted({c for _, c in auto}))
    chosen = forced.get(choice, float("nan"))  # the same algorithm forced: takes out the run-order noise
    print(f"| {p} | {b} | {a:.1f} ({choice}) | {forced[best]:.1f} ({best}) | {forced.get('pairwise', float('nan')):.1f} | {a / forced[best]:.2f} | {chosen / forced[best]:.2f} |")
