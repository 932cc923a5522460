"""What the speed-ups of the step path's DCQCN shapes cost in fidelity (not a test).

Usage: .venv/bin/python benchmarks/congestion_shapes.py [scenario.yaml]   (~3 min on 2 cores)
Collects every congested shape of one training step under DCQCN (default: MegaScale, 12,288
GPUs), then simulates each shape again

* at FLUID_STEP_S (0.25 us, ``clustersim flows``' step), at 1 us and at FORM_STEP_S, with
  jumps over settled operating points, and
* at FORM_STEP_S stepping every step (the reference for the jumps),

for two seeds, and prints per configuration the mean relative error against the reference of
each shape's mean and last completion time (all shapes, and the shapes lasting over 5 ms), the
stepped steps and the CPU seconds. Seed 1 against seed 0 at the same settings shows how much
the random marks alone move the same numbers.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from simulator import Scenario, simulate
from simulator.congestion import fluid as fluid
from simulator.congestion import shapes as fc

LONG_S = 5e-3
"""Shapes whose reference last completion is later than this count as long."""


def collect(path: str) -> list[fc.FormJob]:
    """The shapes (worker jobs) of one step, in one process."""
    jobs = []
    run = fc._simulate_form

    def keep(job):
        jobs.append(job)
        return run(job)

    fc.FORM_WORKERS, fc._simulate_form = 1, keep
    try:
        simulate(Scenario.load(path, ["fidelity=flow", "network.congestion_control=dcqcn"]))
    finally:
        fc._simulate_form = run
    return jobs


def run_all(jobs, *, dt: float, jumps: bool, seed: int):
    stepped = [0]
    kernel = fluid.run_steps

    def count(*args):
        taken, why = kernel(*args)
        stepped[0] += taken
        return taken, why

    fluid.run_steps = count
    t = time.process_time()
    try:
        out = []
        for j in jobs:
            r = fluid._simulate(j.hops, j.nbytes, j.capacity, j.latency, j.switch_src,
                                j.switch_dst, j.buffer, j.headroom, j.reserve, j.net,
                                start=None, seed=seed, trace_links=2, line_share=j.share,
                                jumps=jumps, traces=False, fifo=fc.FORM_FIFO, dt=dt,
                                queue_sample_s=fc.FORM_QUEUE_SAMPLE_S, congested=True)
            out.append((np.nanmean(r.finish_s), np.nanmax(r.finish_s)))
    finally:
        fluid.run_steps = kernel
    return np.array(out), stepped[0], time.process_time() - t


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "examples/megascale-175b-12288.yaml"
    jobs = collect(path)
    configs = [(fc.FORM_STEP_S, False), (fc.FORM_STEP_S, True), (1e-6, True),
               (fluid.FLUID_STEP_S, True)]
    got = {(dt, j, s): run_all(jobs, dt=dt, jumps=j, seed=s) for dt, j in configs
           for s in (0, 1)}
    t = Table(title=f"{len(jobs)} DCQCN shapes of {path.split('/')[-1]}: error against "
                    f"stepping every {fc.FORM_STEP_S * 1e6:g} us step, same seed")
    for c in ("step us", "jumps", "seed", "mean completion", "(long shapes)",
              "last completion", "(long shapes)", "stepped steps", "CPU s"):
        t.add_column(c, justify="right")
    for (dt, j, s), (res, steps, cpu) in got.items():
        ref = got[(fc.FORM_STEP_S, False, s)][0]
        long = ref[:, 1] > LONG_S
        e = res / ref - 1
        t.add_row(f"{dt * 1e6:g}", "yes" if j else "no", str(s), f"{e[:, 0].mean():+.2%}",
                  f"{e[long, 0].mean():+.2%}", f"{e[:, 1].mean():+.2%}",
                  f"{e[long, 1].mean():+.2%}", f"{steps:,}", f"{cpu:.1f}")
    ref0, ref1 = got[(fc.FORM_STEP_S, False, 0)][0], got[(fc.FORM_STEP_S, False, 1)][0]
    long = ref0[:, 1] > LONG_S
    e = ref1 / ref0 - 1
    t.add_row("seed 1 vs 0", "no", "", f"{e[:, 0].mean():+.2%}", f"{e[long, 0].mean():+.2%}",
              f"{e[:, 1].mean():+.2%}", f"{e[long, 1].mean():+.2%}", "", "")
    Console().print(t)


if __name__ == "__main__":
    main()
