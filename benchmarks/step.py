"""Wall time of one simulated step per example scenario and at growing scale (not a test).

Usage: .venv/bin/python benchmarks/step.py
Prints a table: scenario, GPUs, actions simulated, wall seconds (best of 3), step_time_s, MFU.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from simulator import Scenario, simulate

ROOT = Path(__file__).resolve().parents[1]


def bench(name: str, sc: Scenario) -> list[str]:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        r = simulate(sc)
        best = min(best, time.perf_counter() - t0)
    actions = int((r.timeline.stream == "compute").sum())
    return [name, f"{r.gpus:,}", f"{actions:,}", f"{best:.3f}", f"{r.step_time_s:.3f}",
            f"{r.mfu:.1%}"]


def main() -> None:
    t = Table(title="One simulated step (alpha-beta communication)")
    for c in ("scenario", "GPUs", "actions", "wall s", "step_time_s", "MFU"):
        t.add_column(c, justify="right")
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        t.add_row(*bench(path.stem, Scenario.load(path)))
    base = ROOT / "examples" / "megascale-175b-12288.yaml"
    for gpus in (1024, 4096, 12288, 32768):
        sc = Scenario.load(base, [f"cluster.gpus={gpus}",
                                  f"workload.global_batch={gpus // 2}"])
        t.add_row(*bench(f"gpt3-175b x {gpus}", sc))
    big = Scenario.load(base, ["workload.model=megatron-gpt-1t", "parallel.pp=64",
                               "parallel.vpp=2", "cluster.gpus=3072", "workload.global_batch=3072",
                               "cluster.topology=selene-a100"])
    t.add_row(*bench("gpt-1t pp64 vpp2 m512", big))
    Console().print(t)


if __name__ == "__main__":
    main()
