"""Compile a scenario into a step program: plain numbers per pipeline stage and model chunk.

Compile, then run (Calculon): every config lookup, cost model and collective size is resolved
here once; the simpy executor only reads these arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from simulator.calibration import (BATCH_BYTES_PER_TOKEN, DP_BUCKET_PARAMS,
                                   OPTIMIZER_BYTES_PER_PARAM, compute_calibration)
from simulator.comm import AlphaBeta, Group
from simulator.compute import (FLASH_BWD_FLOP_RATIO, Device, LayerCost, layer_cost, logits_cost,
                               memory_time_s)
from workloads.layout import Layout
from workloads.memory import BYTES_WEIGHT
from workloads.params import ParamSplit, embedding_params, layer_params, output_params

PARTS = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "zero_comm", "data_load")
"""Components of every forward / backward action, in seconds (their sum is its duration)."""


@dataclass
class Program:
    """What the executor runs. Arrays are indexed [stage, chunk]."""

    p: int
    v: int
    m: int
    schedule: str
    F: dict[str, np.ndarray]
    """Forward parts (keys: PARTS)."""
    B: dict[str, np.ndarray]
    """Backward parts; the whole backward unless zb-h1 (input-gradient half)."""
    W: dict[str, np.ndarray]
    """Weight-gradient half (zb-h1 only; zeros otherwise)."""
    p2p_s: float
    """One activation (or gradient) transfer between adjacent pipeline stages."""
    p2p_blocking: bool
    """Without pp_overlap the sender waits for its send to complete."""
    dp_bucket_s: np.ndarray
    """[stage, chunk]: time of one gradient bucket's reduction on the DP stream."""
    dp_buckets: np.ndarray
    """[stage, chunk]: number of buckets of that chunk's gradients."""
    dp_overlap: bool
    param_gather_s: np.ndarray
    """[stage]: all-gather of updated parameters (ZeRO >= 1) after the optimizer."""
    embedding_sync_s: np.ndarray
    """[stage]: all-reduce of the tied embedding's gradient between first and last stage."""
    optimizer_s: np.ndarray
    """[stage]: the optimizer step (memory-bound)."""
    notes: dict = field(default_factory=dict)

    def duration(self, kind: str) -> np.ndarray:
        parts = {"F": self.F, "B": self.B, "W": self.W}[kind]
        return sum(parts[k] for k in PARTS)


def _group(size: int, stride: int, gpus_per_node: int, role: str = "", stage: int = 0) -> Group:
    """A group of ``size`` ranks ``stride`` apart in Megatron's tp-cp-ep-dp-pp rank order."""
    per_node = max(1, min(size, gpus_per_node // stride)) if stride < gpus_per_node else 1
    return Group(size=size, per_node=per_node, role=role, stage=stage)


def stage_groups(layout: Layout, gpus_per_node: int, stage: int) -> dict[str, Group]:
    """Every communicator of a rank of ``stage``. Ranks are tp-major (rank = tp_rank + tp
    (cp_rank + cp (dp_rank + dp pp_rank))); expert parallelism is carved out of dp x cp in
    blocks of ep consecutive data-parallel ranks (Megatron-Core)."""
    tp, cp, ep, dp = layout.tp, layout.cp, layout.ep, layout.dp
    spec = {"tp": (tp, 1), "cp": (cp, tp), "ep": (ep, tp), "dp": (dp * cp, tp),
            "edp": (max(1, dp * cp // ep), tp * ep), "pp": (2, tp * cp * dp),
            "emb": (2, tp * cp * dp * max(1, layout.pp - 1))}
    return {r: _group(n, st, gpus_per_node, r, stage) for r, (n, st) in spec.items()}


def _stage_params(model, layout: Layout, stage: int, seq_len: int) -> list[ParamSplit]:
    """Parameters of each model chunk of ``stage`` (the embedding in chunk 0 of stage 0, the
    output layer in the last chunk of the last stage)."""
    v, p = layout.vpp, layout.pp
    per_chunk = layout.stage_layers[stage] // v
    start = sum(layout.stage_layers[:stage])
    out = []
    kinds = {}
    for c in range(v):
        first = start + c * per_chunk   # layer index within this stage's share (chunk-major
        split = ParamSplit()            # interleaving does not change the kind of layer here)
        for moe, n in _layer_kinds(model, first, first + per_chunk).items():
            if moe not in kinds:
                kinds[moe] = layer_params(model, moe)
            split += kinds[moe] * n
        if stage == 0 and c == 0:
            split += embedding_params(model, seq_len)
        if stage == p - 1 and c == v - 1:
            split += output_params(model, p)
        out.append(split)
    return out


def _layer_kinds(model, first: int, stop: int) -> dict[bool, int]:
    """How many dense (False) and MoE (True) layers lie in [first, stop)."""
    moe = sum(1 for idx in range(first, stop) if model.is_moe_layer(idx)) if model.is_moe else 0
    return {k: n for k, n in ((False, stop - first - moe), (True, moe)) if n}


def _non_layer_params(model, layout: Layout, stage: int, chunk: int, seq_len: int
                      ) -> ParamSplit:
    """Embedding / output-layer parameters of this chunk (not reduced per layer by ZeRO-2/3)."""
    split = ParamSplit()
    if stage == 0 and chunk == 0:
        split += embedding_params(model, seq_len)
    if stage == layout.pp - 1 and chunk == layout.vpp - 1:
        split += output_params(model, layout.pp)
    return split


def compile_program(scenario, layout: Layout, comm=None) -> Program:
    """``comm`` answers ``time_s(kind, group, nbytes)``: alpha-beta (default) or the fabric."""
    model = scenario.workload.model
    gpu = scenario.cluster.gpu
    gpn = scenario.cluster.gpus_per_node
    opt = scenario.optimizations
    s = scenario.workload.seq_len
    p, v, m = layout.pp, layout.vpp, layout.num_micro_batches
    tp, cp, ep, dp = layout.tp, layout.cp, layout.ep, layout.dp
    cal = compute_calibration(gpu.name)
    dev = Device(gpu.peak_flops, gpu.hbm_bytes_per_s, gpu.sms, cal)
    comm = comm or AlphaBeta.for_cluster(gpu, scenario.cluster.topology, gpn)
    flash, fused = opt.flash_attention, opt.fused_kernels
    model = model.model_copy(update={"parallel_block": model.parallel_block or opt.parallel_block})

    G = [stage_groups(layout, gpn, i) for i in range(p)]

    zb = layout.schedule == "zb-h1"

    def comm_parts(c: LayerCost, backward: bool, moe: bool, i: int) -> dict[str, float]:
        g_tp, g_cp, g_ep = G[i]["tp"], G[i]["cp"], G[i]["ep"]
        if tp > 1:
            if layout.sequence_parallel:
                one = comm.time_s("all_gather", g_tp, c.tp_bytes) + \
                    comm.time_s("reduce_scatter", g_tp, c.tp_bytes)
            else:
                one = comm.time_s("all_reduce", g_tp, c.tp_bytes)
            tp_t = c.tp_collectives_fwd * one
            if backward and not zb:
                # Megatron-LM overlaps each column-parallel linear's input-gradient all-reduce
                # (reduce-scatter with sequence parallelism) with its weight-gradient GEMM, and
                # the all-gather of its input with the input-gradient GEMM
                # (LinearWithGradAccumulationAndAsyncCommunication). zb-h1 moves that GEMM
                # into W, so nothing is left to hide the collective behind.
                tp_t = max(0.0, tp_t - c.bwd_weight_s)
            elif opt.tp_overlap:   # chunked collective pipelined with its GEMM (TE userbuffers)
                tp_t = max(0.0, tp_t - (c.fwd_s - c.attn_fwd_s)) + tp_t / tp
        else:
            tp_t = 0.0
        cp_t = 0.0
        if cp > 1 and scenario.parallel.cp_comm_type == "p2p":
            ring = (cp - 1) * comm.time_s("p2p", g_cp, c.cp_bytes) * (2 if backward else 1)
            hide = c.attn_fwd_s * (FLASH_BWD_FLOP_RATIO if backward else 1.0) * (cp - 1) / cp
            cp_t = max(0.0, ring - hide)
        elif cp > 1:   # all-gather K/V (forward), reduce-scatter their gradients (backward)
            cp_t = comm.time_s("reduce_scatter" if backward else "all_gather", g_cp,
                               c.cp_bytes * cp)
        ep_t = 2 * comm.time_s("all_to_all", g_ep, c.ep_bytes) if moe and ep > 1 else 0.0
        return {"tp_comm": tp_t, "cp_comm": cp_t, "ep_comm": ep_t}

    grad_bytes = 2 if scenario.workload.precision == "fp16" else 4

    def zero_parts(moe: bool, c: LayerCost, i: int) -> tuple[float, float]:
        """ZeRO-2/3 traffic of one layer and micro-batch, exposed where compute cannot hide it.

        Partitioned gradients cannot accumulate over micro-batches, so ZeRO-2 and -3
        reduce-scatter every micro-batch's gradients during its backward (DeepSpeed); ZeRO-3
        also all-gathers the layer's weights before its forward and again before its backward.
        With dp_overlap the collectives are prefetched / bucketed behind the layer's compute.
        """
        if layout.zero < 2:
            return 0.0, 0.0
        split = layer_params(model, moe)
        dense = split.tp_sharded / tp + split.replicated
        expert = split.expert / (tp * ep)

        def coll(kind, nbytes_per_param):      # per micro-batch: roles zdp / zedp
            return (comm.time_s(kind, replace(G[i]["dp"], role="zdp"),
                                dense * nbytes_per_param) +
                    comm.time_s(kind, replace(G[i]["edp"], role="zedp"),
                                expert * nbytes_per_param))

        def exposed(t, window):
            return max(0.0, t - window) if opt.dp_overlap else t

        rs = coll("reduce_scatter", grad_bytes)
        ag = coll("all_gather", BYTES_WEIGHT) if layout.zero == 3 else 0.0
        return (exposed(ag, c.fwd_s),
                exposed(ag + rs, c.bwd_input_s + c.bwd_weight_s))

    batch_bytes = BATCH_BYTES_PER_TOKEN * (s // cp) * layout.micro_batch
    data_load_s = batch_bytes / gpu.pcie_bytes_per_s + comm.time_s("p2p", G[0]["tp"],
                                                                    batch_bytes)
    kinds = {moe: layer_cost(dev, model, layout, seq_len=s, moe=moe, flash=flash, fused=fused)
             for moe in ({False, True} if model.is_moe else {False})}
    logit_f, logit_b = logits_cost(dev, model, layout, s)
    F = {k: np.zeros((p, v)) for k in PARTS}
    B = {k: np.zeros((p, v)) for k in PARTS}
    W = {k: np.zeros((p, v)) for k in PARTS}
    for i in range(p):
        per_chunk = layout.stage_layers[i] // v
        start = sum(layout.stage_layers[:i])
        per_kind, deltas = {}, {}       # every layer of one kind costs the same on a stage
        calls = getattr(comm, "calls", {})
        for c in range(v):
            for moe, n in _layer_kinds(model, start + c * per_chunk,
                                       start + (c + 1) * per_chunk).items():
                if moe not in per_kind:
                    lc = kinds[moe]
                    before = dict(calls)
                    per_kind[moe] = (lc, comm_parts(lc, False, moe, i),
                                     comm_parts(lc, True, moe, i), zero_parts(moe, lc, i))
                    delta = {k: calls[k] - before.get(k, 0) for k in calls}
                    for k, d in delta.items():       # counted once above, once per layer below
                        calls[k] -= d
                    deltas[moe] = delta
                lc, fwd_comm, bwd_comm, (zf, zb_t) = per_kind[moe]
                for k, d in deltas[moe].items():     # a fabric's per-collective call counts
                    calls[k] += d * n
                F["zero_comm"][i, c] += n * zf
                B["zero_comm"][i, c] += n * zb_t
                F["compute"][i, c] += n * lc.fwd_s
                for k, t in fwd_comm.items():
                    F[k][i, c] += n * t
                B["compute"][i, c] += n * (lc.bwd_input_s + (0.0 if zb else lc.bwd_weight_s))
                W["compute"][i, c] += n * (lc.bwd_weight_s if zb else 0.0)
                B["recompute"][i, c] += n * lc.recompute_s
                for k, t in bwd_comm.items():
                    B[k][i, c] += n * t
                if layout.recompute == "full":     # the recomputed forward communicates again
                    for k, t in fwd_comm.items():
                        B[k][i, c] += n * t
            if i == p - 1 and c == v - 1:
                F["compute"][i, c] += logit_f
                B["compute"][i, c] += logit_b
            if not opt.async_data_loading and ((i == 0 and c == 0) or
                                               (i == p - 1 and c == v - 1)):
                F["data_load"][i, c] += data_load_s
    tokens = s // cp * layout.micro_batch
    # every stage boundary has its own transfers; the slowest one paces the pipeline
    act_bytes = 2 * tokens * model.hidden_size / tp
    p2p = max((comm.time_s("p2p", G[i]["pp"], act_bytes) for i in range(p - 1)), default=0.0)

    # data-parallel gradient reduction (what ZeRO-2/3 did not already reduce per layer),
    # parameter all-gather, optimizer
    dense_kind = "all_reduce" if layout.zero == 0 else "reduce_scatter"
    bucket_params = max(DP_BUCKET_PARAMS, 1_000_000 * dp)
    dp_bucket_s = np.zeros((p, v))
    dp_buckets = np.zeros((p, v), dtype=int)
    gather = np.zeros(p)
    optim = np.zeros(p)
    emb = np.zeros(p)
    for i in range(p):
        g_dp, g_edp = G[i]["dp"], G[i]["edp"]
        local_opt = 0.0
        for c, split in enumerate(_stage_params(model, layout, i, s)):
            dense = split.tp_sharded / tp + split.replicated
            expert = split.expert / (tp * ep)
            n_b = max(1, math.ceil((dense + expert) / bucket_params))
            unreduced = split if layout.zero < 2 else _non_layer_params(model, layout, i, c, s)
            t = (comm.time_s(dense_kind, g_dp,
                             (unreduced.tp_sharded / tp + unreduced.replicated) * grad_bytes) +
                 comm.time_s(dense_kind, g_edp, unreduced.expert / (tp * ep) * grad_bytes))
            dp_bucket_s[i, c] = t / n_b
            dp_buckets[i, c] = n_b
            if layout.zero in (1, 2):
                gather[i] += (comm.time_s("all_gather", g_dp, dense * BYTES_WEIGHT) +
                              comm.time_s("all_gather", g_edp, expert * BYTES_WEIGHT))
            shard_d = g_dp.size if layout.zero >= 1 else 1
            shard_e = g_edp.size if layout.zero >= 1 else 1
            local_opt += dense / shard_d + expert / shard_e
        optim[i] = memory_time_s(dev, OPTIMIZER_BYTES_PER_PARAM * local_opt, 4)
    if p > 1 and not model.untie_embeddings_and_output_weights:
        t = comm.time_s("all_reduce", G[0]["emb"],
                        model.vocab_size * model.hidden_size / tp * grad_bytes)
        emb[0] = emb[-1] = t
    return Program(p=p, v=v, m=m, schedule=layout.schedule, F=F, B=B, W=W, p2p_s=p2p,
                   p2p_blocking=not opt.pp_overlap, dp_bucket_s=dp_bucket_s,
                   dp_buckets=dp_buckets, dp_overlap=opt.dp_overlap,
                   param_gather_s=gather, embedding_sync_s=emb, optimizer_s=optim,
                   notes={"calibration": cal, "groups": G[0]})
