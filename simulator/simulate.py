"""simulate(scenario) -> Result: compile, run the step executor, measure."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd

from simulator.arrays import content_digest
from simulator.calibration import CALIBRATION_ID
from simulator.config.resolve import layout_choices
from simulator.config.scenario import Scenario
from simulator.engine.analytic import analytic_step
from simulator.engine.executor import StepTrace, run_step
from simulator.network.alpha_beta import BUSBW_FACTOR, AlphaBeta
from simulator.network.build import build_fabric_for
from simulator.network.cache import StepCache
from simulator.network.comm import FabricComm
from simulator.result import (
    BREAKDOWN_KEYS,
    COLLECTIVE_COLUMNS,
    CONGESTION_LINK_COLUMNS,
    LINK_COLUMNS,
    QUEUE_COLUMNS,
    TIMELINE_COLUMNS,
    Result,
)
from simulator.step.accounting import account
from simulator.step.program import PARTS, collective_requests, compile_program
from simulator.step.variability import slowest_of
from workloads.ranks import group_size, stage_and_replica
from workloads.routing import routing_load
from workloads.units import TERA


def _breakdown(prog, trace: StepTrace) -> tuple[dict[str, float], float]:
    """Critical stage's time by cause (adds up to the step time) and its bubble fraction."""
    tail = prog.optimizer_s + (0.0 if prog.dp_overlap else prog.param_gather_s)
    i = int(np.argmax(tail))
    busy = dict(zip(PARTS, trace.stage_busy[i]))
    active = float(trace.stage_busy[i].sum())
    fwd_compute = float(prog.F["compute"][i].sum()) * prog.passes_per_chunk
    bubble = float(trace.pipeline_end[i]) - active - float(trace.p2p_blocked[i])
    sync = float(trace.dp_end.max())
    parts = {
        "forward_compute": fwd_compute,
        "backward_compute": busy["compute"] - fwd_compute,
        "recompute": busy["recompute"],
        "tp_comm": busy["tp_comm"], "cp_comm": busy["cp_comm"], "ep_comm": busy["ep_comm"],
        "zero_comm": busy["zero_comm"], "data_load": busy["data_load"],
        "offload": busy["offload"], "host": busy["host"],
        "pp_comm": float(trace.p2p_blocked[i]),
        "bubble": max(bubble, 0.0),
        "dp_comm": sync - float(trace.pipeline_end[i]),
        "optimizer": float(prog.optimizer_s[i]),
        "param_gather": 0.0 if prog.dp_overlap else float(prog.param_gather_s[i]),
    }
    assert tuple(parts) == BREAKDOWN_KEYS
    return parts, max(bubble, 0.0) / active if active else 0.0


def _slowed(prog, scale: np.ndarray):
    """``prog`` with each stage's compute and recompute times ``scale`` [stage, 1]."""
    parts = {}
    for name in ("F", "B", "W"):
        src = getattr(prog, name)
        parts[name] = {k: (v * scale if k in ("compute", "recompute") else v)
                       for k, v in src.items()}
    return replace(prog, **parts)


def _straggler_variants(scenario: Scenario, layout, prog) -> tuple:
    """One program per data-parallel replica that holds a straggler: the stages of its slow
    GPUs run their compute (and recompute) ``slowdown`` times longer; TP / CP peers wait for it
    every layer, so the whole stage of that replica slows."""
    slow: dict[int, dict[int, float]] = {}
    for st in scenario.faults.stragglers:
        stage, replica = stage_and_replica(layout, st.gpu)
        stages = slow.setdefault(replica, {})
        stages[stage] = max(stages.get(stage, 1.0), st.slowdown)
    out = []
    for stages in slow.values():
        scale = np.ones((prog.p, 1))
        for stage, factor in stages.items():
            scale[stage] = factor
        out.append(_slowed(prog, scale))
    return tuple(out)


def _variability(scenario: Scenario, layout, prog) -> tuple:
    """(every replica's program, the slowest replica's) under GPU speed variability
    (:mod:`simulator.step.variability`): each stage at the expected slowest of its
    tp x cp x ep GPUs, and in one replica its busiest stage at the expected slowest of all
    the job's GPUs (the gradient reduction waits for that replica)."""
    cv = scenario.cluster.variability.gpu_speed_cv
    if cv == 0:
        return prog, ()
    group = slowest_of(layout.tp * layout.cp * layout.ep, cv)
    base = _slowed(prog, np.full((prog.p, 1), group))
    busiest = int(np.argmax(prog.F["compute"].sum(axis=1) + prog.B["compute"].sum(axis=1)
                            + prog.W["compute"].sum(axis=1)))
    scale = np.full((prog.p, 1), group)
    scale[busiest] = slowest_of(layout.gpus, cv)
    return base, (_slowed(prog, scale),)


def _run(scenario: Scenario, micro_batch: int | None, vpp: int | None, fabric=None, acc=None,
         timeline: bool = True, cache=None):
    acc = acc or account(scenario, micro_batch, vpp)
    comm = None
    c = scenario.cluster
    tuner = AlphaBeta.for_cluster(c.gpu, c.topology, c.gpus_per_node, scenario.network.nccl)
    if fabric is not None:
        comm = FabricComm(fabric, acc.layout, nvlink=tuner,
                          routing=scenario.network.routing,
                          queue_pairs=scenario.network.connection_qps,
                          split_data_on_qps=scenario.network.nccl.split_data_on_qps,
                          channels_per_nic=scenario.channels_per_nic,
                          net=scenario.network if scenario.network.congestion_control == "dcqcn"
                          else None, seed=scenario.seed, cache=cache)
    ok = False
    try:
        if comm is not None and comm.net is not None:
            # the fluid model's shapes of every batch start in worker processes while the step
            # compiles
            comm.prefetch(collective_requests(scenario, acc.layout))
        prog = compile_program(scenario, acc.layout, comm or tuner)
        ok = True
    finally:
        if comm is not None:
            comm.close(wait=ok)
    critical, trace = _execute(scenario, acc.layout, prog, timeline, cache)
    if prog.loader_s > trace.step_time_s:    # the loaders cannot keep up with the step
        trace = trace.waited(prog.loader_s - trace.step_time_s)
    return acc, critical, trace, comm


def _execute(scenario: Scenario, layout, prog, timeline: bool, cache):
    """Run ``prog`` (with its variability and straggler variants) on the scenario's engine:
    (the critical variant's program, its trace)."""
    prog, slowest = _variability(scenario, layout, prog)
    variants = slowest + _straggler_variants(scenario, layout, prog)
    # the analytic engine costs less than hashing its programs (0.2 against 4.5 ms on a
    # GPT-3 175B layout): only the executor's steps are remembered
    memo = content_digest(scenario.fidelity, timeline, prog, variants) \
        if cache is not None and scenario.fidelity != "analytic" else None
    trace = cache.step(memo) if memo is not None else None
    if trace is None:
        if scenario.fidelity == "analytic":
            trace = analytic_step(prog, variants, timeline=timeline)
        else:
            trace = run_step(prog, variants, timeline=timeline)
        if memo is not None:
            cache.keep_step(memo, replace(trace, rows=[]))   # the memo's numbers, no timeline
    return (prog, *variants)[trace.critical], trace


def simulate(scenario: Scenario, *, frames: bool = True, accounting=None,
             cache: StepCache | None = None) -> Result:
    """Simulate one training step of ``scenario`` (see :mod:`simulator.result` for metrics).

    ``micro_batch: auto`` / ``vpp: auto`` are resolved as a practitioner tunes them: every valid
    pair whose memory fits is simulated and the fastest kept (ties: the smaller values); when
    none fits, the fastest of those that need the least memory.
    ``frames=False`` skips the timeline / links / collectives DataFrames (None): what a sweep
    needs is the numbers. ``accounting``: the scenario's :func:`account`, if already made.
    ``cache`` (with ``frames=False``): a sweep worker's :class:`StepCache`, which keeps the
    compiled fabric and every fabric collective's time for the next points.
    """
    t0 = time.perf_counter()
    if frames:
        cache = None                      # frames need every collective's link arrays
    fabric = None if scenario.fidelity != "flow" else \
        cache.fabric_for(scenario) if cache is not None else build_fabric_for(scenario)
    auto = {}
    if scenario.workload.micro_batch == "auto" or scenario.parallel.vpp == "auto":
        # (micro_batch, vpp) as the scenario gives them: DualPipe's layout holds two chunks
        # a rank whatever vpp is, so a layout's own vpp is not the value to resolve again
        candidates = [(bv, account(scenario, *bv)) for bv in layout_choices(scenario)]
        least = min(a.memory_gib_per_gpu for _, a in candidates)
        fitting = [c for c in candidates if c[1].fits_memory] or \
            [c for c in candidates if c[1].memory_gib_per_gpu <= least * (1 + 1e-9)]
        best = None
        for (b, v), _ in fitting:
            acc, prog, trace, comm = _run(scenario, b, v, fabric, timeline=frames, cache=cache)
            if best is None or trace.step_time_s < best[0]:
                best = (trace.step_time_s, acc, prog, trace, comm, b, v)
        _, acc, prog, trace, comm, b, v = best
        if scenario.workload.micro_batch == "auto":
            auto["micro_batch"] = b
        if scenario.parallel.vpp == "auto":
            auto["vpp"] = v
    else:
        acc, prog, trace, comm = _run(scenario, None, None, fabric, accounting, timeline=frames,
                                      cache=cache)
    lay, w = acc.layout, scenario.workload
    step = trace.step_time_s
    gpus = lay.gpus
    peak = scenario.cluster.gpu.peak_flops
    breakdown, bubble_fraction = _breakdown(prog, trace)
    timeline = links = collectives = queues = None
    if frames:
        timeline = pd.DataFrame(trace.rows, columns=TIMELINE_COLUMNS).sort_values(
            ["stage", "stream", "start_s"], kind="stable").reset_index(drop=True)
        links, collectives = _fabric_frames(fabric, comm, prog.collectives, acc.layout, step,
                                            timeline)
        queues = _queue_frame(fabric, comm, prog.collectives, acc.layout, timeline)
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
        recompute=lay.recompute, seed=scenario.seed, fidelity=_fidelity(scenario),
        calibration=CALIBRATION_ID, sim_wall_s=time.perf_counter() - t0,
        warnings=_warnings(scenario),
        auto_choices=auto, moe_routing=_moe_routing(scenario, lay), timeline=timeline,
        links=links, collectives=collectives,
        queues=queues)


def _moe_routing(scenario: Scenario, layout) -> dict[str, float]:
    """What the router's spread cost this layout (the load the step compiler priced)."""
    model = scenario.workload.model
    if not model.is_moe:
        return {}
    load = routing_load(scenario.workload.moe, model.num_experts, layout.ep)
    return {"busiest_rank_load": load.busiest, "busiest_expert_load": load.busiest_expert,
            "dropped_fraction": load.dropped, "worst_rank_load": load.worst_rank}


def _fidelity(scenario: Scenario) -> str:
    """What the result was computed with: ``fluid`` when the flow fidelity ran the DCQCN / PFC
    fluid model (``congestion_control: dcqcn``), else the scenario's fidelity."""
    if scenario.fidelity == "flow" and scenario.network.congestion_control == "dcqcn":
        return "fluid"
    return scenario.fidelity


def _warnings(scenario: Scenario) -> list[str]:
    """One line naming the fields the scenario sets that cannot change this step."""
    fidelity = _fidelity(scenario)
    ignored = scenario.inert(fidelity)
    if not ignored:
        return []
    where = "need fidelity: flow" if fidelity in ("analytic", "screening") else \
        "act only under congestion_control: dcqcn" if fidelity == "flow" else "do not act here"
    return [f"fidelity {fidelity} ignores {', '.join(ignored)} (they {where}; "
            f"simulator/config/sensitivity.py)"]


def _fabric_frames(fabric, comm, calls: dict, layout, step: float, timeline: pd.DataFrame
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Result.links and Result.collectives (empty, with their columns, at screening)."""
    if comm is None:
        return (pd.DataFrame(columns=LINK_COLUMNS + CONGESTION_LINK_COLUMNS),
                pd.DataFrame(columns=COLLECTIVE_COLUMNS))
    nbytes, busy, peak, heaviest, rows = comm.usage(calls, layout.num_micro_batches)
    used = np.flatnonzero(nbytes > 0)
    names = fabric.link_names()
    tiers = fabric.link_tiers()
    label = [f"{kind} {role} stage {stage}" for kind, role, stage, *_ in rows]
    links = pd.DataFrame({
        "link": [names[i] for i in used], "tier": tiers[used],
        "bytes": nbytes[used], "busy_s": busy[used],
        "utilisation": nbytes[used] / (fabric.capacity[used] * step),
        "max_flows": peak[used],
        "collective": [label[heaviest[i]] for i in used]}, columns=LINK_COLUMNS)
    cong = comm.congestion(calls, layout.num_micro_batches)
    if cong is None:
        for c in CONGESTION_LINK_COLUMNS:
            links[c] = np.nan
    else:
        links["max_queue_bytes"] = cong["max_queue_bytes"][used]
        links["mean_queue_bytes"] = cong["queue_byte_s"][used] / step
        links["pause_s"] = cong["pause_s"][used]
        links["ecn_mark_rate"] = cong["marked_bytes"][used] / nbytes[used]
        links["dropped_bytes"] = cong["dropped_bytes"][used]
    links = links.sort_values("utilisation", ascending=False, kind="stable").reset_index(drop=True)
    stream_of = STREAM_OF_ROLE
    out = []
    for (kind, role, stage, size, times, t, flows, ideal, hot), key in zip(rows, comm.results):
        tl = timeline[(timeline.stream == stream_of[role]) & (timeline.stage == stage)]
        n = max(2, group_size(layout, role))          # pp / emb pairs: 2
        c = comm.results[key].congestion
        out.append({"kind": kind, "group": role, "stage": stage, "bytes": size,
                    "calls_per_step": times, "time_s": t,
                    "busbw_gbyte_per_s": size * BUSBW_FACTOR[kind](n) / t / 1e9 if t > 0
                    else np.nan,
                    "flows": flows,
                    "start_s": tl.start_s.min() if len(tl) else np.nan,
                    "end_s": tl.end_s.max() if len(tl) else np.nan,
                    "nonblocking_s": ideal, "slowdown": t / ideal if ideal > 0 else np.nan,
                    "hottest_link": names[hot] if hot >= 0 else "",
                    "pause_s": float(c["pause_s"].sum()) * times if c is not None else np.nan})
    return links, pd.DataFrame(out, columns=COLLECTIVE_COLUMNS)


STREAM_OF_ROLE = {"tp": "tp", "cp": "cp", "ep": "ep", "zdp": "zero", "zedp": "zero", "pp": "pp",
                  "dp": "dp", "edp": "dp", "emb": "dp", "zdps": "zero", "zedps": "zero",
                  "dps": "dp", "dpr": "dp", "edps": "dp", "edpr": "dp"}


def _queue_frame(fabric, comm, calls: dict, layout, timeline: pd.DataFrame) -> pd.DataFrame:
    """Result.queues: the fluid model's queue depth on each batch's hottest links, placed at
    the first time that batch runs in the step (empty unless congestion_control is dcqcn)."""
    cong = comm.congestion(calls, layout.num_micro_batches) if comm is not None else None
    if cong is None:
        return pd.DataFrame(columns=QUEUE_COLUMNS)
    parts = []
    for (kind, role, stage, _), tr in cong["queue_trace"].items():
        tl = timeline[(timeline.stream == STREAM_OF_ROLE[role]) & (timeline.stage == stage)]
        if not len(tr) or not len(tl):
            continue
        parts.append(pd.DataFrame({"t_s": tl.start_s.min() + tr.t_s.to_numpy(float),
                                   "link": fabric.link_names(tr.link.to_numpy(int)),
                                   "queue_bytes": tr.queue_bytes.to_numpy(float),
                                   "collective": f"{kind} {role} stage {stage}"}))
    if not parts:
        return pd.DataFrame(columns=QUEUE_COLUMNS)
    return pd.concat(parts, ignore_index=True).sort_values("t_s", kind="stable")[QUEUE_COLUMNS]
