"""simulate(scenario) -> Result: compile, run the step executor, measure."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from simulator.accounting import account
from simulator.calibration import CALIBRATION_ID
from simulator.executor import StepTrace, run_step
from simulator.program import PARTS, compile_program
from simulator.result import TIMELINE_COLUMNS, Result
from simulator.scenario import Scenario
from workloads.units import TERA

FIDELITY = "screening"
"""Alpha-beta communication (no fabric): the step executor with NCCL-style collective costs."""


def _breakdown(prog, trace: StepTrace) -> tuple[dict[str, float], float]:
    """Critical stage's time by cause (adds up to the step time) and its bubble fraction."""
    tail = prog.optimizer_s + (0.0 if prog.dp_overlap else prog.param_gather_s)
    i = int(np.argmax(tail))
    busy = dict(zip(PARTS, trace.stage_busy[i]))
    active = float(trace.stage_busy[i].sum())
    fwd_compute = float(prog.F["compute"][i].sum()) * prog.m
    bubble = float(trace.pipeline_end[i]) - active - float(trace.p2p_blocked[i])
    sync = float(trace.dp_end.max())
    parts = {
        "forward_compute": fwd_compute,
        "backward_compute": busy["compute"] - fwd_compute,
        "recompute": busy["recompute"],
        "tp_comm": busy["tp_comm"], "cp_comm": busy["cp_comm"], "ep_comm": busy["ep_comm"],
        "zero_comm": busy["zero_comm"], "data_load": busy["data_load"],
        "pp_comm": float(trace.p2p_blocked[i]),
        "bubble": max(bubble, 0.0),
        "dp_comm": sync - float(trace.pipeline_end[i]),
        "optimizer": float(prog.optimizer_s[i]),
        "param_gather": 0.0 if prog.dp_overlap else float(prog.param_gather_s[i]),
    }
    return parts, max(bubble, 0.0) / active if active else 0.0


def _run(scenario: Scenario, micro_batch: int | None, vpp: int | None):
    acc = account(scenario, micro_batch, vpp)
    prog = compile_program(scenario, acc.layout)
    return acc, prog, run_step(prog)


def simulate(scenario: Scenario) -> Result:
    """Simulate one training step of ``scenario`` (see :mod:`simulator.result` for metrics).

    ``micro_batch: auto`` / ``vpp: auto`` are resolved as a practitioner tunes them: every valid
    pair whose memory fits is simulated and the fastest kept (ties: the smaller values).
    """
    t0 = time.perf_counter()
    auto = {}
    if scenario.workload.micro_batch == "auto" or scenario.parallel.vpp == "auto":
        candidates = [account(scenario, b, v) for b, v in scenario.choices()]
        fitting = [a for a in candidates if a.fits_memory] or \
            [min(candidates, key=lambda a: a.memory_gib_per_gpu)]
        best = None
        for cand in fitting:
            acc, prog, trace = _run(scenario, cand.layout.micro_batch, cand.layout.vpp)
            if best is None or trace.step_time_s < best[0]:
                best = (trace.step_time_s, acc, prog, trace)
        _, acc, prog, trace = best
        if scenario.workload.micro_batch == "auto":
            auto["micro_batch"] = acc.layout.micro_batch
        if scenario.parallel.vpp == "auto":
            auto["vpp"] = acc.layout.vpp
    else:
        acc, prog, trace = _run(scenario, None, None)
    lay, w = acc.layout, scenario.workload
    step = trace.step_time_s
    gpus = lay.gpus
    peak = scenario.cluster.gpu.peak_flops
    breakdown, bubble_fraction = _breakdown(prog, trace)
    timeline = pd.DataFrame(trace.rows, columns=TIMELINE_COLUMNS).sort_values(
        ["stage", "stream", "start_s"], kind="stable").reset_index(drop=True)
    return Result(
        name=scenario.name, step_time_s=step,
        mfu=acc.flops.model / (step * gpus * peak), hfu=acc.flops.hardware / (step * gpus * peak),
        model_tflops_per_gpu=acc.flops.model / step / gpus / TERA,
        hardware_tflops_per_gpu=acc.flops.hardware / step / gpus / TERA,
        tokens_per_s=w.global_batch * w.seq_len / step, bubble_fraction=bubble_fraction,
        breakdown_s=breakdown, memory_gib_per_gpu=acc.memory_gib_per_gpu,
        fits_memory=acc.fits_memory, gpus=gpus, tp=lay.tp, pp=lay.pp, dp=lay.dp, cp=lay.cp,
        ep=lay.ep, vpp=lay.vpp, micro_batch=lay.micro_batch,
        num_micro_batches=lay.num_micro_batches, schedule=lay.schedule,
        recompute=lay.recompute, seed=scenario.seed, fidelity=FIDELITY,
        calibration=CALIBRATION_ID, sim_wall_s=time.perf_counter() - t0,
        auto_choices=auto, timeline=timeline)
