"""Wall time of the failure Monte-Carlo (not a test).

Usage: .venv/bin/python benchmarks/failures.py
10,000 trials of a 54-day run of examples/llama3-405b-16384.yaml (Llama 3 catalogue, ~8.6
interruptions a day), with an unlimited spare pool and with a 16-node pool (the sequential
spare bookkeeping is the slow path).
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.table import Table

from simulator.config.scenario import Scenario
from simulator.failures import failure_run
from simulator.simulate import simulate


def main() -> None:
    t = Table(title="Failure Monte-Carlo, llama3-405b-16384, 54 days")
    for c in ("spares", "trials", "wall s", "ETTR", "interruptions / day"):
        t.add_column(c, justify="right")
    step = simulate(Scenario.load("examples/llama3-405b-16384.yaml"))
    for spares in ("null", "16"):
        sc = Scenario.load("examples/llama3-405b-16384.yaml",
                           [f"failures.recovery.spares={spares}"])
        for trials in (1_000, 10_000):
            t0 = time.perf_counter()
            rep = failure_run(sc, days=54, trials=trials, step=step)
            wall = time.perf_counter() - t0
            t.add_row(spares, f"{trials:,}", f"{wall:.2f}", f"{rep.summary['ettr']:.2%}",
                      f"{rep.summary['interruptions_per_day']:.2f}")
    Console().print(t)


if __name__ == "__main__":
    main()
