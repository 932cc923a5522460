"""Configurations per second per core of the analytic (screening) fidelity (not a test).

Usage: .venv/bin/python benchmarks/sweep.py [--points N]
For GPT-3 175B at 1,024 / 4,096 / 12,288 GPUs (global batch = GPUs x 1.5), N random points of
the ``auto`` enumeration (every valid tp / pp / vpp / cp / micro_batch / zero / recompute) are
evaluated in this one process, as one sweep worker does; out-of-memory points are counted
separately because they stop after the memory accounting.
"""

from __future__ import annotations

import random
import sys
import time

import yaml
from rich.console import Console
from rich.table import Table

from simulator.config.scenario import Scenario
from simulator.sweep.grid import auto_points, evaluate

SIZES = (1024, 4096, 12288)


def main() -> None:
    n = int(sys.argv[sys.argv.index("--points") + 1]) if "--points" in sys.argv else 1000
    base = yaml.safe_load(open("examples/megascale-175b-12288.yaml"))
    t = Table(title=f"Analytic fidelity, one core, {n} random valid layouts of GPT-3 175B")
    for c in ("GPUs", "layouts", "simulated", "out of memory", "wall s", "configs/s",
              "simulated/s"):
        t.add_column(c, justify="right")
    for gpus in SIZES:
        sets = [f"cluster.gpus={gpus}", f"workload.global_batch={gpus * 3 // 2}"]
        sc = Scenario.from_dict(base, sets)
        pts = auto_points(sc)
        sample = random.Random(0).sample(pts, min(n, len(pts)))
        evaluate(base, sets, sample[0], "analytic")                   # warm imports
        t0 = time.perf_counter()
        rows = [evaluate(base, sets, p, "analytic") for p in sample]
        wall = time.perf_counter() - t0
        ok = sum(r["status"] == "ok" for r in rows)
        t0 = time.perf_counter()
        for p, r in zip(sample, rows):
            if r["status"] == "ok":
                evaluate(base, sets, p, "analytic")
        ok_wall = time.perf_counter() - t0
        t.add_row(f"{gpus:,}", f"{len(pts):,}", f"{ok:,}", f"{len(rows) - ok:,}", f"{wall:.2f}",
                  f"{len(rows) / wall:,.0f}", f"{ok / ok_wall:,.0f}" if ok else "-")
    Console().print(t)


if __name__ == "__main__":
    main()
