"""Wall time of the DCQCN / PFC fluid model (not a test).

Usage: .venv/bin/python benchmarks/congestion.py
Incasts N -> 1 of 10 MB per sender through one 100 Gb/s switch (the ns-3 S1 setting), and an
all-reduce through a 64-GPU spine-leaf fabric under DCQCN + PFC vs ideal max-min sharing.
Congested microseconds are compiled steps (simulator/congestion/kernel.py); settled operating points
are jumped over. Then one training step at flow fidelity with congestion_control none vs dcqcn
(the issue's speed criterion: megascale-175b-12288 under dcqcn within 3x of none).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

# validation/ is not installed: it is imported from the repository root
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator import Scenario, simulate  # noqa: E402
from simulator.config.topology import topology_spec  # noqa: E402
from simulator.congestion.shapes import FORM_WORKERS  # noqa: E402
from simulator.network.build import make_fabric  # noqa: E402
from simulator.network.collectives import run_collective  # noqa: E402
from topologies.gpus import load_gpu  # noqa: E402
from validation.ns3 import S1_SIZE, network, run, star  # noqa: E402


def main() -> None:
    t = Table(title="DCQCN / PFC fluid model, one core")
    for c in ("case", "simulated ms", "wall s", "wall per simulated ms"):
        t.add_column(c, justify="right")
    for n in (2, 4, 8, 16, 32):
        t0 = time.perf_counter()
        flows, _ = run(star(n + 1), np.arange(n), n, S1_SIZE, network())
        wall = time.perf_counter() - t0
        sim = flows.finish_s.max() * 1e3
        t.add_row(f"incast {n} -> 1", f"{sim:.2f}", f"{wall:.2f}", f"{wall / sim:.3f}")
    f = make_fabric(topology_spec("{kind: spine-leaf, hosts_per_leaf: 8, spines: 4, "
                                  "nic_gbps: 400}"), gpus=64, gpus_per_node=8,
                    gpu=load_gpu("h100-sxm"))
    for label, net in (("max-min", None), ("DCQCN + PFC", network(mtu_bytes=4096,
                                                                   header_bytes=62))):
        t0 = time.perf_counter()
        res = run_collective(f, "all_reduce", [np.arange(64)], 256 * 2**20, net=net)
        wall = time.perf_counter() - t0
        t.add_row(f"all-reduce 256 MiB, 64 GPUs, {label}", f"{res.time_s * 1e3:.2f}",
                  f"{wall:.2f}", f"{wall / (res.time_s * 1e3):.3f}")
    t.add_row("(numba compile of the fluid step, first call only, is in the first row)", "", "",
              "")
    Console().print(t)
    s = Table(title=f"One training step at flow fidelity, {FORM_WORKERS} worker process(es) "
                    "for the fluid shapes")
    for c in ("scenario", "GPUs", "none: wall s", "dcqcn: wall s", "ratio",
              "mean_field: wall s", "ratio", "step s none", "dcqcn", "mean_field"):
        s.add_column(c, justify="right")
    for path in ("examples/gpt3-175b-1024-selene.yaml", "examples/megascale-175b-12288.yaml"):
        row = []
        for over in (["network.congestion_control=none"], ["network.congestion_control=dcqcn"],
                     ["network.congestion_control=dcqcn",
                      "network.dcqcn.reaction_point=mean_field"]):
            sc = Scenario.load(path, ["fidelity=flow", *over])
            t0 = time.perf_counter()
            r = simulate(sc)
            row.append((time.perf_counter() - t0, r.step_time_s, r.gpus))
        s.add_row(path.split("/")[-1], f"{row[0][2]:,}", f"{row[0][0]:.2f}",
                  f"{row[1][0]:.2f}", f"{row[1][0] / row[0][0]:.1f}x", f"{row[2][0]:.2f}",
                  f"{row[2][0] / row[0][0]:.1f}x", f"{row[0][1]:.3f}", f"{row[1][1]:.3f}",
                  f"{row[2][1]:.3f}")
    Console().print(s)


if __name__ == "__main__":
    main()
