"""Closed-form pipeline timing: the ``analytic`` fidelity for large sweeps.

Same compiled program, same gradient-bucket / optimizer tail as the executor; only the pipeline
itself is a formula instead of a simpy run. With per-micro-batch stage times t_i (all chunks'
forward + backward, plus blocking sends), the slowest stage paces the steady state and every
other stage adds its fill/drain share once (Narayanan et al. 2021, section 2.2: bubble
(p-1)/(v m) for uniform stages):

    T = m * t_max + (sum_i t_i' - t_max') / v + 2 (p - 1) x

where t' = t except under zb-h1, whose deferred weight gradients fill the drain
(t' = F + B - W, Qi et al. 2024), and x is one point-to-point transfer. The last backward of
chunk c on stage i ends when the drain chain behind it (stages below i on chunk c, then every
stage of the chunks below c) has run. Tested against the executor (tests/simulator/
test_sweep.py::test_analytic_fidelity_agrees_with_the_executor) on every layout of GPT-3 175B on
1,024 GPUs that fits.
"""

from __future__ import annotations

import numpy as np

from simulator.engine.dataflow import PipelineRun
from simulator.engine.executor import StepTrace, run_step
from simulator.step.program import PARTS, Program


def closed_form_pipeline(prog: Program) -> PipelineRun:
    p, v, m = prog.p, prog.v, prog.m
    F, B, W = prog.duration("F"), prog.duration("B"), prog.duration("W")     # [stage, chunk]
    x = prog.p2p_s if p > 1 else 0.0
    sends = np.zeros(p)
    if prog.p2p_blocking and p > 1:                # F out of all but the last virtual stage,
        sends = np.full(p, 2.0 * v)                # B out of all but the first
        sends[-1] -= 1
        sends[0] -= 1
    blocked = sends * x * m
    t = (F + B + W).sum(axis=1) + sends * x
    fill = (F + B - W).sum(axis=1) + sends * x if prog.schedule == "zb-h1" else t
    k = int(np.argmax(t))
    total = m * t[k] + (fill.sum() - fill[k]) / v + 2 * (p - 1) * x
    # drain chain: the last backward (W under zb-h1) of (stage i, chunk c)
    last = B + W if prog.schedule == "zb-h1" else B
    step = last + x
    last_bwd = {}
    end = np.zeros(p)
    below_chunks = np.concatenate([[0.0], np.cumsum(step.sum(axis=0))])   # chunks < c, all stages
    for i in range(p):
        for c in range(v):
            done = total - step[:i, c].sum() - below_chunks[c]
            last_bwd[(i, c)] = (done - last[i, c], done)
        end[i] = total - step[:i, 0].sum()
    busy = np.zeros((p, len(PARTS)))
    for parts in (prog.F, prog.B, prog.W):
        busy += np.stack([parts[name].sum(axis=1) for name in PARTS], axis=1) * m
    return PipelineRun(rows=[], busy=busy, end=end, blocked=blocked, last_bwd=last_bwd)


def analytic_step(prog: Program, variants: tuple[Program, ...] = (), timeline: bool = True
                  ) -> StepTrace:
    """:func:`simulator.engine.executor.run_step` with the closed-form pipeline (DualPipe,
    which has none, with the executor's dependency recurrence)."""
    if prog.schedule == "dualpipe":
        return run_step(prog, variants, timeline=False)
    return run_step(prog, variants, pipeline=closed_form_pipeline, timeline=timeline)
