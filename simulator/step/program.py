"""Compile a scenario into a step program: plain numbers per pipeline stage and model chunk.

Compile, then run (Calculon): every config lookup, cost model and collective size is resolved
here once; the simpy executor only reads these arrays. The collectives the program needs are
listed by :func:`collective_requests` (so a fabric can start them ahead) and counted per step in
:attr:`Program.collectives`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from simulator.calibration import (
    BATCH_BYTES_PER_TOKEN,
    DEEPEP_SMS,
    DP_BUCKET_PARAMS,
    NCCL_P2P_SMS,
    OPTIMIZER_BYTES_PER_PARAM,
    attention_speed,
    compute_calibration,
)
from simulator.config.scenario import Optimizations
from simulator.errors import ScenarioError
from simulator.step.compute import (
    FLASH_BWD_FLOP_RATIO,
    Device,
    LayerCost,
    layer_cost,
    logits_cost,
    memory_time_s,
)
from simulator.step.data_pipeline import loader_time
from simulator.step.groups import Group, pipeline_groups
from simulator.step.host import dispatcher_syncs, issue_stalls_s, layer_issue_s
from simulator.step.host_noise import slack_s, stall_factor
from simulator.step.offload import copy_rate, module_stalls_s, offload_stalls_s
from simulator.step.requests import CollectiveRequest, Comm, Ledger, ZeroComm
from workloads.dtypes import BYTES, FP8_BYTES
from workloads.layout import Layout, dualpipe_pairs
from workloads.memory import (
    BYTES_OPTIMIZER,
    BYTES_WEIGHT,
    ActivationOptions,
    layer_activation_bytes,
    offloaded_module_bytes,
    optimizer_state_bytes,
    saved_linear_input_bytes,
)
from workloads.model import ModelConfig
from workloads.params import ParamSplit, embedding_params, layer_params, output_params
from workloads.routing import (
    BALANCED,
    MoERouting,
    RoutingLoad,
    remote_nodes_per_token,
    routing_load,
)
from workloads.units import GIGA

PARTS = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "zero_comm", "data_load",
         "offload", "host")
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
    collectives: dict = field(default_factory=dict)
    """(kind, role, stage, bytes) -> calls per step of that collective (per micro-batch for
    per-layer traffic; :class:`simulator.step.requests.Ledger`)."""
    loader_s: float = 0.0
    """The data loaders' time per step when they run behind the step (prefetching): the step
    waits only for what exceeds it (:meth:`StepTrace.waited`). A loader on the critical path
    is already in ``F["data_load"]``."""
    group: int | None = None
    """Interleaved schedule's micro-batch group (None = p)."""
    extra_warmup: int = 0
    """Forwards the interleaved schedule's warm-up runs beyond Megatron-LM's count
    (Layout.overlap_warmup)."""
    zero_rs_s: np.ndarray | None = None
    """[stage, chunk]: ZeRO-2/3 gradient reduce-scatter of one chunk pass, queued on the
    stage's gradient stream after each backward (W where the backward is split); the
    optimizer step waits for the queue. None / zeros: nothing queued."""
    zero_rs_layers: np.ndarray | None = None
    """[stage, chunk]: layers whose reduce-scatters make up ``zero_rs_s`` (one per layer, each
    released as that layer's backward finishes)."""

    @property
    def passes_per_chunk(self) -> int:
        """Micro-batches each chunk runs: all m, or half under DualPipe (one per direction)."""
        return self.m // 2 if self.schedule == "dualpipe" else self.m

    def duration(self, kind: str) -> np.ndarray:
        parts = {"F": self.F, "B": self.B, "W": self.W}[kind]
        return sum(parts[k] for k in PARTS)


def _stage_params(model, layout: Layout, stage: int, seq_len: int) -> list[ParamSplit]:
    """Parameters of each model chunk of ``stage`` (the embedding in chunk 0 of stage 0, the
    output layer in the last chunk of the last stage)."""
    v, p = layout.vpp, layout.pp
    out = []
    kinds = {}
    for c in range(v):
        first = layout.first_layer(stage, c)
        split = ParamSplit()
        for moe, n in _layer_kinds(model, first, first + layout.layers(stage, c)).items():
            if moe not in kinds:
                kinds[moe] = layer_params(model, moe)
            split += kinds[moe] * n
        if layout.is_first_piece(stage, c):
            split += embedding_params(model, seq_len)
        if layout.is_last_piece(stage, c):
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
    if layout.is_first_piece(stage, chunk):
        split += embedding_params(model, seq_len)
    if layout.is_last_piece(stage, chunk):
        split += output_params(model, layout.pp)
    return split


OPTIMIZER_KERNELS = 4
"""Kernel launches of the optimizer step per stage (multi-tensor passes over gradients, master
weights, moments and the bf16 copy, as fused Adam runs them); only launch overhead."""
FP8_WEIGHT_CAST_KERNELS = 2
"""FP8 training adds the weights' cast-transpose and the amax / scale update per step
(Transformer Engine's multi-tensor FP8 cast); only launch overhead."""


@dataclass(frozen=True)
class _Ctx:
    """What every part of the compile reads: the scenario's choices, resolved once."""

    layout: Layout
    model: ModelConfig
    opt: Optimizations
    comm: Ledger
    G: list[dict[str, Group]]
    dev: Device
    cp_comm_type: str
    grad_bytes: int
    seq_len: int
    optimizer_bytes: float
    """Optimizer-step HBM traffic per locally owned parameter (OPTIMIZER_BYTES_PER_PARAM, each
    moment read and written in its dtype)."""
    fp8: bool = False
    module_copy_s: dict = field(default_factory=dict)
    """{is MoE: seconds} one layer's fine-grained offload copies take each way (empty: none)."""
    routing: MoERouting = MoERouting()
    load: RoutingLoad = BALANCED
    host_syncs: bool = False
    """MoE layers wait on the host for their token counts (:func:`dispatcher_syncs`)."""

    @property
    def zb(self) -> bool:
        return self.layout.schedule == "zb-h1"

    @property
    def ep_rate(self) -> float:
        """Speed of compute that runs beside an expert all-to-all kernel, as a share of its
        speed alone: the kernel's SMs (``optimizations.ep_comm_sms``) beyond those
        ``comm_sms`` already holds are taken from the compute's."""
        sms = self.opt.ep_comm_sms or (DEEPEP_SMS if self.routing.dispatcher == "flex"
                                       else NCCL_P2P_SMS)
        return 1.0 - max(0, sms - self.opt.comm_sms) / self.dev.sms

    @property
    def split_w(self) -> bool:
        """Backwards split into B (input gradient) and W (weight gradient): zb-h1, DualPipe."""
        return self.layout.schedule in ("zb-h1", "dualpipe")


def _gather_scale(x: _Ctx) -> float:
    """Bytes of an all-gathered GEMM operand relative to bf16: FP8's one byte with
    optimizations.fp8_all_gather (scenario validation ties it to FP8 training)."""
    return FP8_BYTES / BYTES if x.opt.fp8_all_gather else 1.0


def _comm_parts(x: _Ctx, c: LayerCost, backward: bool, moe: bool, i: int) -> dict[str, float]:
    """Exposed TP, CP and EP communication of one layer's forward or backward on stage i."""
    layout, comm, opt = x.layout, x.comm, x.opt
    tp, cp, ep = layout.tp, layout.cp, layout.ep
    g_tp, g_cp, g_ep = x.G[i]["tp"], x.G[i]["cp"], x.G[i]["ep"]
    if tp > 1:
        if layout.sequence_parallel:
            one = comm.time_s("all_gather", g_tp, c.tp_bytes * _gather_scale(x)) + \
                comm.time_s("reduce_scatter", g_tp, c.tp_bytes)
        else:
            one = comm.time_s("all_reduce", g_tp, c.tp_bytes)
        tp_t = c.tp_collectives_fwd * one
        if backward and not x.zb and (opt.tp_bwd_overlap or opt.tp_overlap):
            # Megatron-LM overlaps each column-parallel linear's input-gradient all-reduce
            # (reduce-scatter with sequence parallelism) with its weight-gradient GEMM, and
            # the all-gather of its input with the input-gradient GEMM
            # (LinearWithGradAccumulationAndAsyncCommunication). zb-h1 moves that GEMM
            # into W, so nothing is left to hide the collective behind; PyTorch's DTensor
            # TP does not overlap them (optimizations.tp_bwd_overlap false).
            tp_t = max(0.0, tp_t - c.bwd_weight_s)
        elif opt.tp_overlap:   # chunked collective pipelined with its GEMM (TE userbuffers)
            tp_t = max(0.0, tp_t - (c.fwd_s - c.attn_fwd_s)) + tp_t / tp
    else:
        tp_t = 0.0
    cp_t = 0.0
    if cp > 1 and x.cp_comm_type == "p2p":
        ring = (cp - 1) * comm.time_s("p2p", g_cp, c.cp_bytes) * (2 if backward else 1)
        hide = c.attn_fwd_s * (FLASH_BWD_FLOP_RATIO if backward else 1.0) * (cp - 1) / cp
        cp_t = max(0.0, ring - hide)
    elif cp > 1 and x.cp_comm_type == "all_to_all":
        # Ulysses: Q, K, V to (whole sequence, heads / cp) before attention, the output back
        # after; the backward runs the same four on the gradients. Nothing hides them.
        cp_t = (comm.time_s("all_to_all", g_cp, c.q_bytes) +
                2 * comm.time_s("all_to_all", g_cp, c.cp_bytes / 2) +     # K, then V
                comm.time_s("all_to_all", g_cp, c.o_bytes))
    elif cp > 1:   # all-gather K/V (forward), reduce-scatter their gradients (backward)
        cp_t = comm.time_s("reduce_scatter" if backward else "all_gather", g_cp,
                           c.cp_bytes * cp)
    ep_t = _ep_comm(x, c, g_ep) if moe and ep > 1 else 0.0
    return {"tp_comm": tp_t, "cp_comm": cp_t, "ep_comm": ep_t}


def _ep_comm(x: _Ctx, c: LayerCost, g_ep: Group) -> float:
    """Dispatch and combine of one MoE layer (forward; the backward runs the same two on the
    gradients), paced by the rank that receives the most (:mod:`workloads.routing`).

    alltoall sends every (token, expert) pair; flex sends each token once to every other node
    its experts occupy (to the GPU on its own rail) while forwarding the pairs to the experts
    of the node over NVLink, the two legs at once.
    """
    r, comm = x.routing, x.comm
    pairs = c.ep_bytes * x.load.busiest
    if r.dispatcher == "alltoall" or g_ep.nodes == 1:
        return 2 * comm.time_s("all_to_all", g_ep, pairs)
    if g_ep.size % g_ep.per_node:
        raise ScenarioError(
            f"workload.moe.dispatcher flex needs as many of an expert group's GPUs on every "
            f"node: parallel.ep ({g_ep.size}) is not a multiple of the {g_ep.per_node} on its "
            f"first node",
            field="workload.moe.dispatcher")
    m = x.model
    remote = remote_nodes_per_token(m.num_experts, m.moe_top_k, g_ep.nodes,
                                    r.max_nodes_per_token)
    rail = comm.time_s("rail_all_to_all", g_ep, pairs / m.moe_top_k * remote)
    node = comm.time_s("node_all_to_all", g_ep, pairs * (g_ep.per_node - 1) / g_ep.per_node)
    return 2 * max(rail, node)


def _paired_fraction(layout: Layout, stage: int) -> float:
    """Share of a stage's forward chunks that run merged with another micro-batch's backward:
    all but the schedule's warm-up forwards (Megatron's interleaved warm-up, 2 (p - i - 1) +
    (v - 1) N chunks and the one more the overlap adds; at least the first forward), whose
    backwards end the step unpaired;
    under DualPipe the pairs its main steps merge (:func:`workloads.layout.dualpipe_pairs`)."""
    p, v, m = layout.pp, layout.vpp, layout.num_micro_batches
    if layout.dualpipe:
        return dualpipe_pairs(p, stage, m) / m
    warmup = min(max(1, layout.warmup_chunks(stage)), m * v)
    return (m * v - warmup) / (m * v)


def _finish(start: float, work: float, busy: list[tuple[float, float]], rate: float) -> float:
    """When compute of ``work`` seconds (at the whole GPU's speed) started at ``start`` ends,
    running at ``rate`` of that speed while a communication kernel of ``busy`` (the one
    communication stream's intervals, in time order) holds SMs."""
    t, left = start, work
    for b0, b1 in busy:
        if left <= 0 or b1 <= t:
            continue
        if b0 > t:                                  # full speed until the kernel starts
            run = min(left, b0 - t)
            t, left = t + run, left - run
            if left <= 0:
                break
        run = min(left, (b1 - t) * rate)            # slowed while it runs
        t, left = t + run / rate, left - run
    return t + max(left, 0.0)


def merged_pair_exposed_s(c: LayerCost, ep_f: float, ep_b: float, rate: float = 1.0,
                          delay_wgrad: bool = False) -> float:
    """EP time one merged forward-backward pair of a layer exposes: Megatron-Core's
    ``TransformerLayerSchedulePlan.run`` (--overlap-moe-expert-parallel-comm; DeepSeek-V3's
    DualPipe chunk pairs, arXiv 2412.19437 Fig. 4, arrange the same components), two streams
    with the data dependencies between them:

        comm: combine_bwd      | dispatch_fwd -> dispatch_bwd     | combine_fwd
        comp: pre_dispatch_fwd | mlp_bwd -> mlp_bwd_dw -> mlp_fwd | pre_dispatch_bwd (+ dw)

    The forward's dispatch waits for its attention, its experts for the dispatch; the
    backward's experts wait for its combine, its dispatch for their input gradient and, unless
    ``delay_wgrad`` (--delay-wgrad-compute) moves it after the dispatch's start, their weight
    gradient; its attention waits for that dispatch; each all-to-all is half its pass's
    ``ep``. Compute runs at ``rate`` of its speed while an all-to-all kernel holds its SMs.
    Returns the pair's critical path less its compute at full speed (each pair starting on
    idle streams)."""
    a_f, e_f = c.fwd_s - c.mlp_fwd_s, c.mlp_fwd_s
    e_bi, e_bw = c.mlp_bwd_input_s, c.mlp_bwd_weight_s
    a_b = c.bwd_input_s - e_bi + c.bwd_weight_s - e_bw
    cf = df = ep_f / 2
    cb = db = ep_b / 2
    busy = [(0.0, cb)]
    af_end = _finish(0.0, a_f, busy, rate)
    t = max(af_end, cb)
    busy.append((t, t + df))
    if delay_wgrad:          # dgrad; the dispatch starts; wgrad beside it
        ebi_end = _finish(t, e_bi, busy, rate)
        db_start = max(ebi_end, t + df)
        busy.append((db_start, db_start + db))
        eb_end = _finish(ebi_end, e_bw, busy, rate)
    else:                    # dgrad and wgrad, then the dispatch
        eb_end = _finish(t, e_bi + e_bw, busy, rate)
        db_start = max(eb_end, t + df)
        busy.append((db_start, db_start + db))
    ef_end = _finish(max(eb_end, t + df), e_f, busy, rate)
    t = max(ef_end, db_start + db)
    busy.append((t, t + cf))
    end = max(t + cf, _finish(t, a_b, busy, rate))
    return max(0.0, end - (a_f + e_f + e_bi + e_bw + a_b))


def _ep_overlapped(c: LayerCost, fwd: dict, bwd: dict, paired: float, rate: float,
                   delay_wgrad: bool) -> tuple[dict, dict]:
    """EP all-to-alls under batch-level overlap (one micro-batch's forward merged with
    another's backward, layer by layer): a merged pair exposes
    :func:`merged_pair_exposed_s` (compute beside an all-to-all at ``rate``), shared between
    the two passes in proportion; the ``1 - paired`` unmerged passes (warm-up forwards,
    cool-down backwards) expose theirs whole."""
    ep_f, ep_b = fwd["ep_comm"], bwd["ep_comm"]
    total = ep_f + ep_b
    if total <= 0:
        return fwd, bwd
    left = merged_pair_exposed_s(c, ep_f, ep_b, rate, delay_wgrad) / total  # of each, merged
    mix = paired * left + (1.0 - paired)
    return {**fwd, "ep_comm": ep_f * mix}, {**bwd, "ep_comm": ep_b * mix}


def _shard_groups(x: _Ctx, i: int) -> tuple[Group, Group]:
    """The groups ZeRO shards dense and expert states over on stage ``i``: the dp / edp
    groups, or HSDP's shard groups (dps / edps)."""
    if x.layout.zero_shard:
        return x.G[i]["dps"], x.G[i]["edps"]
    return x.G[i]["dp"], x.G[i]["edp"]


def _zero_parts(x: _Ctx, moe: bool, c: LayerCost, i: int) -> tuple[float, float, float]:
    """ZeRO-2/3 traffic of one layer and micro-batch: (forward exposed, backward exposed,
    reduce-scatter on the gradient stream).

    Partitioned gradients cannot accumulate over micro-batches, so ZeRO-2 and -3
    reduce-scatter every micro-batch's gradients after its backward (DeepSpeed, FSDP);
    ZeRO-3 also all-gathers the layer's weights before its forward and again before its
    backward. With dp_overlap the all-gathers are prefetched behind the layer's compute and
    the reduce-scatters queue on their own stream, which nothing waits for before the
    optimizer step (:attr:`Program.zero_rs_s`); without it every collective is exposed.
    """
    layout = x.layout
    if layout.zero < 2:
        return 0.0, 0.0, 0.0
    tp, ep = layout.tp, layout.ep
    split = layer_params(x.model, moe)
    dense = split.tp_sharded / tp + split.replicated
    expert = split.expert / (layout.expert_tp * ep)

    g_dense, g_expert = _shard_groups(x, i)

    def coll(kind, nbytes_per_param):      # per micro-batch: roles zdp / zedp (zdps / zedps)
        return (x.comm.time_s(kind, replace(g_dense, role="z" + g_dense.role),
                              dense * nbytes_per_param) +
                x.comm.time_s(kind, replace(g_expert, role="z" + g_expert.role),
                              expert * nbytes_per_param))

    rs = coll("reduce_scatter", x.grad_bytes)
    ag = coll("all_gather", BYTES_WEIGHT * _gather_scale(x)) if layout.zero == 3 else 0.0
    if not x.opt.dp_overlap:
        return ag, ag + rs, 0.0
    return (max(0.0, ag - c.fwd_s), max(0.0, ag - (c.bwd_input_s + c.bwd_weight_s)), rs)


def _host_stalls(x: _Ctx, lc: LayerCost, fwd_comm: dict, bwd_comm: dict, rec: bool
                 ) -> tuple[float, float]:
    """(forward, backward) seconds one MoE layer's GPU waits for the host to issue its kernels
    (:mod:`simulator.step.host`): the GPU's time is its compute and exposed communication;
    a fully recomputed layer issues its forward again inside the backward. Where forward and
    backward run merged (EP overlap, DualPipe) the host issues both for the pair's time."""
    issue = layer_issue_s(x.model, x.layout, seq_len=x.seq_len, moe=True,
                          cast=x.dev.fp8_cast_ops if x.fp8 else 0,
                          flash=x.opt.flash_attention, kernels=lc.elementwise_kernels,
                          tp_collectives=lc.tp_collectives_fwd,
                          grouped_gemm=x.opt.grouped_gemm,
                          graphs=frozenset(x.opt.cuda_graph_scope))
    g_f = lc.fwd_s + sum(fwd_comm.values())
    g_b = lc.bwd_input_s + lc.bwd_weight_s + lc.recompute_s + sum(bwd_comm.values()) + \
        (sum(fwd_comm.values()) if rec else 0.0)
    if rec:
        issue = (issue[0], issue[1] + issue[0])
    if x.opt.ep_overlap or x.layout.dualpipe:
        return 0.0, max(0.0, sum(issue) - g_f - g_b)
    return issue_stalls_s(issue, (g_f, g_b))


def _layer_parts(x: _Ctx, kinds: dict, logits: tuple[float, float], data_load_s: float
                 ) -> tuple[dict, dict, dict, np.ndarray]:
    """F, B, W parts [stage, chunk] of every chunk's layers (each layer kind costed once per
    stage and booked once per layer), the logits on the last chunk and, without async
    loading, the batch's load on the first and last; and each chunk pass's ZeRO
    reduce-scatter for the gradient stream."""
    layout, model = x.layout, x.model
    p, v = layout.pp, layout.vpp
    zb = x.split_w
    F = {k: np.zeros((p, v)) for k in PARTS}
    B = {k: np.zeros((p, v)) for k in PARTS}
    W = {k: np.zeros((p, v)) for k in PARTS}
    rs = np.zeros((p, v))
    for i in range(p):
        per_kind, asked = {}, {}       # every layer of one kind costs the same on a stage
        for c in range(v):
            first, stop = layout.first_layer(i, c), layout.first_layer(i, c) + layout.layers(i, c)
            mid = first + layout.recomputed_layers(i, c)  # [first, mid) run their forward again
            spans = [(first, mid, True), (mid, stop, False)]
            for kind, n in [((moe, rec), n) for lo, hi, rec in spans
                            for moe, n in _layer_kinds(model, lo, hi).items()]:
                moe, rec = kind
                if kind not in per_kind:
                    lc = kinds[kind]
                    with x.comm.recording() as asked[kind]:
                        fwd_c, bwd_c = (_comm_parts(x, lc, False, moe, i),
                                        _comm_parts(x, lc, True, moe, i))
                        if moe and (x.opt.ep_overlap or layout.dualpipe):
                            fwd_c, bwd_c = _ep_overlapped(lc, fwd_c, bwd_c,
                                                          _paired_fraction(layout, i),
                                                          x.ep_rate, x.opt.delay_wgrad or
                                                          layout.dualpipe)
                        per_kind[kind] = (lc, fwd_c, bwd_c, _zero_parts(x, moe, lc, i))
                x.comm.repeat(asked[kind], n)
                lc, fwd_comm, bwd_comm, (zf, zb_t, z_rs) = per_kind[kind]
                if moe and x.host_syncs:
                    hf, hb = _host_stalls(x, lc, fwd_comm, bwd_comm, rec)
                    F["host"][i, c] += n * hf
                    B["host"][i, c] += n * hb
                F["zero_comm"][i, c] += n * zf
                B["zero_comm"][i, c] += n * zb_t
                rs[i, c] += n * z_rs
                F["compute"][i, c] += n * lc.fwd_s
                for k, t in fwd_comm.items():
                    F[k][i, c] += n * t
                B["compute"][i, c] += n * (lc.bwd_input_s + (0.0 if zb else lc.bwd_weight_s))
                W["compute"][i, c] += n * (lc.bwd_weight_s if zb else 0.0)
                B["recompute"][i, c] += n * lc.recompute_s
                if x.module_copy_s:
                    sf, sb = module_stalls_s(x.module_copy_s[moe], lc.fwd_s, lc.bwd_input_s +
                                             (0.0 if zb else lc.bwd_weight_s))
                    F["offload"][i, c] += n * sf
                    B["offload"][i, c] += n * sb
                for k, t in bwd_comm.items():
                    B[k][i, c] += n * t
                if rec:                            # the recomputed forward communicates again
                    for k, t in fwd_comm.items():
                        B[k][i, c] += n * t
            # the output layer and loss, once more for every MTP layer where they sit
            heads = layout.is_last_piece(i, c) + \
                (model.mtp_num_layers if layout.holds_mtp(i, c) else 0)
            F["compute"][i, c] += heads * logits[0]
            B["compute"][i, c] += heads * logits[1]
            if layout.is_first_piece(i, c) or layout.is_last_piece(i, c):
                F["data_load"][i, c] += data_load_s
    return F, B, W, rs


def _data_parallel(x: _Ctx) -> tuple[np.ndarray, ...]:
    """Data-parallel gradient reduction (what ZeRO-2/3 did not already reduce per layer) in
    buckets, parameter all-gather, optimizer step and tied-embedding sync, per stage."""
    layout, model, comm, s = x.layout, x.model, x.comm, x.seq_len
    p, v, tp, ep, dp = layout.pp, layout.vpp, layout.tp, layout.ep, layout.dp
    etp = layout.expert_tp
    grad_bytes = x.grad_bytes
    dense_kind = "all_reduce" if layout.zero == 0 else "reduce_scatter"
    bucket_params = max(DP_BUCKET_PARAMS, 1_000_000 * dp)
    dp_bucket_s = np.zeros((p, v))
    dp_buckets = np.zeros((p, v), dtype=int)
    gather = np.zeros(p)
    optim = np.zeros(p)
    emb = np.zeros(p)
    for i in range(p):
        g_dp, g_edp = _shard_groups(x, i) if layout.zero else (x.G[i]["dp"], x.G[i]["edp"])
        local_opt = local_cast = 0.0
        for c, split in enumerate(_stage_params(model, layout, i, s)):
            dense = split.tp_sharded / tp + split.replicated
            expert = split.expert / (etp * ep)
            n_b = max(1, math.ceil((dense + expert) / bucket_params))
            unreduced = split if layout.zero < 2 else _non_layer_params(model, layout, i, c, s)
            t = (comm.time_s(dense_kind, g_dp,
                             (unreduced.tp_sharded / tp + unreduced.replicated) * grad_bytes) +
                 comm.time_s(dense_kind, g_edp, unreduced.expert / (etp * ep) * grad_bytes))
            if layout.zero_shard:    # HSDP: each shard's gradients all-reduced across replicas
                t += (comm.time_s("all_reduce", x.G[i]["dpr"], dense / g_dp.size * grad_bytes) +
                      comm.time_s("all_reduce", x.G[i]["edpr"],
                                  expert / g_edp.size * grad_bytes))
            dp_bucket_s[i, c] = t / n_b
            dp_buckets[i, c] = n_b
            if layout.zero in (1, 2):
                w_bytes = BYTES_WEIGHT * _gather_scale(x)
                gather[i] += (comm.time_s("all_gather", g_dp, dense * w_bytes) +
                              comm.time_s("all_gather", g_edp, expert * w_bytes))
            shard_d = g_dp.size if layout.zero >= 1 else 1
            shard_e = g_edp.size if layout.zero >= 1 else 1
            local_opt += dense / shard_d + expert / shard_e
            # FP8: the updated weights are quantised once per step (cached over micro-batches),
            # the full local copy, or the shard ZeRO-3 all-gathers in FP8
            local_w = (dense + expert) / (g_dp.size if layout.zero == 3 else 1)
            local_cast += x.dev.fp8_cast_bytes * local_w if x.fp8 else 0.0
        kernels = OPTIMIZER_KERNELS + (FP8_WEIGHT_CAST_KERNELS if x.fp8 else 0)
        optim[i] = memory_time_s(x.dev, x.optimizer_bytes * local_opt + local_cast, kernels)
        if layout.dualpipe:
            # the two copies of each piece (chunk 0 of rank i, chunk 1 of rank p - 1 - i) sum
            # their reduced gradients: each rank exchanges its shard with its mirror rank, a
            # point-to-point of the same class as the pipeline's (both cross nodes)
            emb[i] += comm.time_s("p2p", x.G[i]["pp"], local_opt * grad_bytes)
    if p > 1 and not model.untie_embeddings_and_output_weights:
        t = comm.time_s("all_reduce", x.G[0]["emb"],
                        model.vocab_size * model.hidden_size / tp * grad_bytes)
        emb[0] += t
        emb[-1] += t
    return dp_bucket_s, dp_buckets, gather, optim, emb


def _host_noise(scenario):
    """Group -> stretch of its collectives under the hosts' OS noise (None without noise)."""
    noise = scenario.cluster.variability.host_noise
    if not noise:
        return None
    slack = slack_s(scenario.cluster.topology.nic_gbps * GIGA / 8,
                    scenario.channels_per_nic)
    return lambda group: stall_factor(noise, group.nodes, slack)


def _offload(scenario, layout: Layout, model, kinds: dict) -> tuple[float, float]:
    """Per micro-batch (forward, backward) waits for CPU activation offloading's copies."""
    opts = _activation_options(scenario)
    n = layout.cpu_offload_layers
    return offload_stalls_s(
        np.array([model.is_moe_layer(i) for i in range(n + 1)]),
        {moe: layer_activation_bytes(model, layout, opts, moe) for moe, _ in kinds},
        {moe: lc.fwd_s for (moe, _), lc in kinds.items()},
        {moe: lc.bwd_input_s + lc.bwd_weight_s for (moe, _), lc in kinds.items()},
        copy_rate(scenario.cluster.gpu))


def _activation_options(scenario) -> ActivationOptions:
    w = scenario.workload
    return ActivationOptions(w.seq_len, scenario.optimizations.flash_attention,
                             saved_linear_input_bytes(w.precision, w.fp8_recipe,
                                                      w.fp8_saved_inputs))


def _module_copy_s(scenario, layout: Layout, model) -> dict:
    """{is MoE: seconds} of one layer's fine-grained offload copies, each way."""
    if not layout.offload_modules:
        return {}
    rate, opts = copy_rate(scenario.cluster.gpu), _activation_options(scenario)
    return {moe: offloaded_module_bytes(model, layout, opts, moe) / rate
            for moe in (False, True)}


def _optimizer_traffic(w) -> float:
    """HBM bytes the optimizer step moves per local parameter: OPTIMIZER_BYTES_PER_PARAM with
    fp32 moments, less a read and a write of every state byte bf16 moments save."""
    saved = BYTES_OPTIMIZER[w.optimizer] - optimizer_state_bytes(w.optimizer, w.moments_dtype)
    return OPTIMIZER_BYTES_PER_PARAM[w.optimizer] - 2 * saved


def compile_program(scenario, layout: Layout, comm: Comm) -> Program:
    """The step program of ``scenario`` on ``layout``; ``comm`` answers
    ``time_s(kind, group, nbytes)`` (alpha-beta, the fabric, or :class:`ZeroComm`)."""
    gpu = scenario.cluster.gpu
    gpn = scenario.cluster.gpus_per_node
    opt = scenario.optimizations
    s = scenario.workload.seq_len
    p = layout.pp
    cal = compute_calibration(gpu.name)
    fwd_x, bwd_x = attention_speed(opt.attention_kernel, gpu.name)
    cal = replace(cal, flash_fwd_efficiency=cal.flash_fwd_efficiency * fwd_x,
                  flash_bwd_efficiency=cal.flash_bwd_efficiency * bwd_x)
    dev = Device.of(gpu, cal, scenario.workload.fp8_recipe, opt.comm_sms)
    fp8 = scenario.workload.precision == "fp8"
    model = scenario.workload.model
    model = model.model_copy(update={"parallel_block": model.parallel_block or opt.parallel_block})
    routing = scenario.workload.moe
    load = routing_load(routing, model.num_experts, layout.ep) if model.is_moe else BALANCED
    x = _Ctx(layout=layout, model=model, opt=opt, comm=Ledger(comm, _host_noise(scenario)),
             G=pipeline_groups(layout, gpn), dev=dev,
             cp_comm_type=scenario.parallel.cp_comm_type,
             grad_bytes=scenario.parallel.grad_bytes(scenario.workload.precision), seq_len=s,
             optimizer_bytes=_optimizer_traffic(scenario.workload), fp8=fp8, routing=routing,
             load=load, module_copy_s=_module_copy_s(scenario, layout, model),
             host_syncs=model.is_moe and dispatcher_syncs(routing, model.num_experts,
                                                          layout.ep))
    batch_bytes = BATCH_BYTES_PER_TOKEN * (s // layout.cp) * layout.micro_batch
    # per micro-batch on the first and last stage: the host-to-device copy and TP broadcast
    # unless prefetched, the loaders' share of the step unless they run behind it
    h2d_s = batch_bytes / gpu.pcie_bytes_per_s + x.comm.time_s("p2p", x.G[0]["tp"],
                                                                batch_bytes)
    loader = loader_time(scenario.data, tp=layout.tp, cp=layout.cp, dp=layout.dp,
                         gpus_per_node=gpn, global_batch=scenario.workload.global_batch,
                         seq_len=s, vocab_size=model.vocab_size)
    data_load_s = (0.0 if opt.async_data_loading else h2d_s) + \
        (0.0 if loader.overlapped else loader.load_s / layout.num_micro_batches)
    # (is MoE, fully recomputed) -> one layer's cost; under Megatron's block method the layers
    # past the first recompute_num_layers of a chunk run without recomputation
    full = layout.recompute == "full"
    plain = replace(layout, recompute="none") if full else layout
    kinds = {(moe, rec): layer_cost(dev, model, layout if rec else plain, seq_len=s, moe=moe,
                                    flash=opt.flash_attention, fused=opt.fused_kernels, fp8=fp8,
                                    expert_load=load.busiest if moe else 1.0)
             for moe in ({False, True} if model.is_moe else {False})
             for rec in ((True, False) if full and layout.recompute_method == "block"
                         else (full,))}
    F, B, W, zero_rs = _layer_parts(x, kinds, logits_cost(dev, model, layout, s), data_load_s)
    if layout.cpu_offload_layers:                  # pp 1: stage 0, chunk 0
        F["offload"][0, 0], B["offload"][0, 0] = _offload(scenario, layout, model, kinds)
    tokens = s // layout.cp * layout.micro_batch
    # every stage boundary has its own transfers; the slowest one paces the pipeline
    act_bytes = 2 * tokens * model.hidden_size / layout.tp
    p2p = max((x.comm.time_s("p2p", x.G[i]["pp"], act_bytes) for i in range(p - 1)),
              default=0.0)
    dp_bucket_s, dp_buckets, gather, optim, emb = _data_parallel(x)
    return Program(p=p, v=layout.vpp, m=layout.num_micro_batches, schedule=layout.schedule,
                   group=layout.microbatch_group or None, extra_warmup=layout.overlap_warmup,
                   F=F, B=B, W=W, p2p_s=p2p, p2p_blocking=not opt.pp_overlap,
                   dp_bucket_s=dp_bucket_s, dp_buckets=dp_buckets, dp_overlap=opt.dp_overlap,
                   param_gather_s=gather, embedding_sync_s=emb, optimizer_s=optim,
                   zero_rs_s=zero_rs,
                   zero_rs_layers=np.array([[layout.layers(i, c) for c in range(layout.vpp)]
                                            for i in range(p)]),
                   collectives=dict(x.comm.counts),
                   loader_s=loader.load_s if loader.overlapped else 0.0)


def collective_requests(scenario, layout: Layout) -> list[CollectiveRequest]:
    """Every collective the step of ``scenario`` on ``layout`` will ask for, in the order the
    compile asks (a compile against :class:`ZeroComm`)."""
    ledger = Ledger(ZeroComm())
    compile_program(scenario, layout, ledger)
    return list(ledger.requests.values())
