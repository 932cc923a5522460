"""Compute model: time of one transformer layer's forward and backward on one GPU.

Per operator: time = max(FLOPs / (peak x efficiency(shape)), bytes / (HBM x efficiency))
+ kernel overhead (design.md, "Compute"). A GEMM's time comes from its tiles: waves of output
tiles over the SMs, each a mainloop over k at the calibrated fraction of peak plus a fixed fill,
the best of the library's tile shapes (:func:`gemm_time_s`); a GEMM with a small inner
dimension (attention with head dim 64-128) is bounded by its operand traffic instead.
Element-wise work (norms, activations, dropout, residual adds, softmax) is pure HBM traffic,
counted per tensor from the same shapes as the memory model, fused or unfused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.calibration import (
    BACKWARD_ELEMENTWISE_FACTOR,
    GEMM_FIXED_S,
    GEMM_TILE_FILL_K,
    GEMM_TILES,
    UNFUSED_TRAFFIC_FACTOR,
    ComputeCalibration,
)
from workloads.dtypes import BYTES, FP8_BYTES, FP8_ELEMENT_BYTES, FP32_BYTES
from workloads.flops import (
    COLUMN_PARALLEL,
    ROW_PARALLEL,
    Op,
    layer_ops,
    logits_op,
    op_sac_recomputed,
    padded_vocab,
    recomputed,
)
from workloads.layout import Layout
from workloads.model import ModelConfig

MASK_BYTES = 1
"""A dropout mask element (PyTorch stores it as one byte)."""
FP8_CAST_BYTES = BYTES + 2 * FP8_BYTES
"""HBM bytes per element to quantise a GEMM operand for FP8 training: read bf16, write the FP8
copy and its transpose (the other GEMM of the backward needs it). Transformer Engine fuses
both writes into one cast-transpose kernel (NVIDIA Transformer Engine docs, "FP8 primer");
amax bookkeeping rides on the same pass (delayed scaling)."""
FP8_RECIPE_CAST_BYTES = {
    "delayed": FP8_CAST_BYTES,
    # the tensor's amax must be known before it is cast: one more bf16 read
    "tensorwise": FP8_CAST_BYTES + BYTES,
    # scales are local to a block, computed in the cast kernel; the transposed copy is
    # quantised again from bf16 along the other dimension, in the same kernel
    "blockwise": BYTES + 2 * FP8_ELEMENT_BYTES["blockwise"],
    "mxfp8": BYTES + 2 * FP8_ELEMENT_BYTES["mxfp8"],
}
"""HBM bytes per element to quantise a GEMM operand under each FP8 recipe
(``workload.fp8_recipe``). The GEMMs run at the FP8 rate under all of them (Blackwell's
block-scaled MMA applies MX scales in the tensor core)."""
FP8_RECIPE_CAST_OPS = {"delayed": 1, "tensorwise": 2, "blockwise": 1, "mxfp8": 1}
"""Kernels the host issues to quantise one GEMM operand under each FP8 recipe: the
cast-transpose, after a reduction for the tensor's amax under current scaling (the extra read
of :data:`FP8_RECIPE_CAST_BYTES`); delayed scaling takes its scale from the amax history, the
block recipes compute theirs inside the cast."""
LAYER_KERNELS = {"per_norm": 2, "base": 4, "moe": 3, "bias": 1, "attention_unfused": 2}
"""Element-wise kernel launches per layer forward, fused: each norm (statistics + normalise),
bias-dropout-add after attention and MLP, the activation and the rotary embedding (base 4),
MoE permute / unpermute / router softmax (3), a bias add when the model has biases, and
scale-mask-softmax + dropout for unfused attention. Only their launch overhead depends on it."""
UNFUSED_KERNELS_PER_FUSED = 3
"""Without fused kernels each fused chain is about three separate kernels (bias, op, add)."""
CROSS_ENTROPY_KERNELS = 3
"""Vocab-parallel cross-entropy: max, sum of exponentials, loss / gradient."""
FLASH_BWD_FLOP_RATIO = 2.5
"""Flash-attention backward runs 5 GEMM-sized products (recomputed QK^T, dV, dP, dQ, dK)
against the forward's 2 (Dao 2023, FlashAttention-2, section 3.1.2)."""



@dataclass(frozen=True)
class Device:
    peak_flops: float
    hbm_bytes_per_s: float
    sms: int
    cal: ComputeCalibration
    fp8_peak_flops: float = 0.0
    """Dense FP8 tensor-core peak; 0 without FP8."""
    fp8_cast_bytes: float = FP8_CAST_BYTES
    """HBM bytes per element to quantise an FP8 GEMM operand (:data:`FP8_RECIPE_CAST_BYTES`)."""
    fp8_cast_ops: int = 1
    """Kernels issued to quantise one FP8 GEMM operand (:data:`FP8_RECIPE_CAST_OPS`)."""

    @classmethod
    def of(cls, gpu, cal: ComputeCalibration, fp8_recipe: str = "delayed",
           comm_sms: int = 0) -> "Device":
        """The device of a :class:`topologies.gpus.GPUSpec` under an FP8 recipe, with
        ``comm_sms`` of its SMs held by communication kernels: the tensor-core peaks shrink
        with the SMs left, each SM's rate and the HBM stay."""
        share = (gpu.sms - comm_sms) / gpu.sms
        return cls(gpu.peak_flops * share, gpu.hbm_bytes_per_s, gpu.sms - comm_sms, cal,
                   (gpu.fp8_tflops or 0.0) * 1e12 * share, FP8_RECIPE_CAST_BYTES[fp8_recipe],
                   FP8_RECIPE_CAST_OPS[fp8_recipe])


def gemm_time_s(dev: Device, m: int, n: int, k: int, batch: int = 1, fp8: bool = False
                ) -> float:
    """One (batched) GEMM (m x k) @ (k x n): bf16 operands, or FP8 operands (bf16 output) at
    the FP8 peak.

    The tile model of a Hopper / Ampere GEMM kernel (the cost model cuBLAS's heuristics and
    CUTLASS's profiler reason with): the kernel runs ceil(m/tm) ceil(n/tn) output tiles in
    waves of one tile per SM; a tile's time is its mainloop over k plus a fixed fill
    (prologue and epilogue, :data:`GEMM_TILE_FILL_K` k-steps of the bf16 mainloop, the same
    time under FP8); the library picks the tile of :data:`GEMM_TILES` that finishes first. The
    mainloop runs at the calibrated ``gemm_efficiency`` of the peak (``fp8_gemm_efficiency``
    of the FP8 peak), the operand traffic bounds it from below, and the kernel pays
    :data:`GEMM_FIXED_S`. Fitted to measured cuBLAS throughput on H100 over 256-4096 per
    dimension (validation/kernels, mean |error| 4 %)."""
    if m <= 0 or n <= 0 or k <= 0:
        return 0.0
    cal = dev.cal
    if fp8:
        rate = dev.fp8_peak_flops * cal.fp8_gemm_efficiency
        operand = FP8_BYTES
    else:
        rate = dev.peak_flops * cal.gemm_efficiency
        operand = BYTES
    fill_s = 2.0 * GEMM_TILE_FILL_K / (dev.peak_flops * cal.gemm_efficiency / dev.sms)
    per_k = 2.0 * k / (rate / dev.sms) + fill_s       # one output element of a tile
    compute = min(math.ceil(math.ceil(m / tm) * math.ceil(n / tn) * batch / dev.sms)
                  * (tm * tn * per_k) for tm, tn in GEMM_TILES)
    traffic = (operand * (m * k + k * n) + BYTES * m * n) * batch / (
        dev.hbm_bytes_per_s * cal.memory_efficiency)
    return max(compute, traffic) + GEMM_FIXED_S


def memory_time_s(dev: Device, nbytes: float, kernels: int = 1) -> float:
    return nbytes / (dev.hbm_bytes_per_s * dev.cal.memory_efficiency) + \
        kernels * dev.cal.kernel_overhead_s


@dataclass(frozen=True)
class LayerCost:
    """Seconds for one layer and one micro-batch on one GPU, and the bytes it communicates."""

    fwd_s: float
    """Forward compute (GEMMs, attention, element-wise)."""
    bwd_input_s: float
    """Backward, input-gradient part (zb-h1's B): dgrad GEMMs, attention and element-wise."""
    bwd_weight_s: float
    """Backward, weight-gradient GEMMs (zb-h1's W)."""
    recompute_s: float
    """Forward work re-run inside backward under the recompute mode."""
    attn_fwd_s: float
    """Core-attention share of ``fwd_s`` (what ring attention can hide cp traffic behind)."""
    tp_bytes: float
    """Bytes per TP collective (one all-reduce, or one all-gather / reduce-scatter pair)."""
    tp_collectives_fwd: int
    """TP all-reduces per forward (with sequence parallelism: all-gather + reduce-scatter pairs)."""
    ep_bytes: float
    """Bytes one rank sends per all-to-all (dispatch or combine)."""
    cp_bytes: float
    """Bytes of K and V one rank passes on per ring-attention step."""
    q_bytes: float = 0.0
    """Bytes of Q (and, with its value head size, of attention's output) one rank holds: what
    a Ulysses all-to-all of Q (of the output) sends in total."""
    o_bytes: float = 0.0
    mlp_fwd_s: float = 0.0
    """MoE layers: the share of ``fwd_s`` behind the dispatch (experts' and shared experts'
    GEMMs, their FP8 casts, the activation): Megatron-Core's ``mlp`` node, which a merged
    forward-backward pair runs between the all-to-alls (0 for dense layers)."""
    mlp_bwd_input_s: float = 0.0
    """Same share of ``bwd_input_s``."""
    mlp_bwd_weight_s: float = 0.0
    """Same share of ``bwd_weight_s``."""
    elementwise_kernels: int = 0
    """Element-wise kernels of the forward (:data:`LAYER_KERNELS`), for the host's issue time
    (:mod:`simulator.step.host`)."""


def _per_gpu_gemm(op: Op, layout: Layout) -> tuple[int, int, int]:
    """(m, n, k) of ``op`` on one GPU: tokens split by cp, one of n / k by tp. Experts split
    their width over etp and, folded (etp < tp), compute the tokens of tp / etp fewer ranks'
    worth: each rank dispatches only its own sequence-parallel share."""
    tp = layout.tp
    m = op.m // layout.cp
    if op.name.startswith("expert_") and layout.folded:
        tp = layout.expert_tp
        m = round(m * tp / layout.tp)
    n, k = op.n, op.k
    if op.name in COLUMN_PARALLEL:
        n = max(1, n // tp)
    elif op.name in ROW_PARALLEL:
        k = max(1, k // tp)
    return m, n, k


def _attention_times(dev: Device, model: ModelConfig, layout: Layout, op: Op, s: int,
                     flash: bool) -> tuple[float, float]:
    """(forward, backward) of one core-attention GEMM (scores or context) on one GPU."""
    heads = model.num_attention_heads // layout.tp
    b = layout.micro_batch
    if flash:
        flops = op.exec_flops / (layout.tp * layout.cp)
        fwd = flops / (dev.peak_flops * dev.cal.flash_fwd_efficiency)
        bwd = FLASH_BWD_FLOP_RATIO * flops / (dev.peak_flops * dev.cal.flash_bwd_efficiency)
        return fwd, bwd
    q = s // layout.cp
    if op.name == "attn_scores":      # (q x d) @ (d x s) per head
        fwd = gemm_time_s(dev, q, op.n, op.k, batch=b * heads)
        bwd = 2 * gemm_time_s(dev, q, op.k, op.n, batch=b * heads)
    else:                             # (q x s) @ (s x d) per head
        fwd = gemm_time_s(dev, q, op.k, op.n, batch=b * heads)
        bwd = 2 * gemm_time_s(dev, q, op.n, op.k, batch=b * heads)
    return fwd, bwd


def _elementwise_bytes(model: ModelConfig, layout: Layout, s: int, flash: bool, fused: bool,
                       moe: bool) -> tuple[float, float, int, float]:
    """(forward bytes outside core attention, core-attention bytes, kernels, the MLP
    activation's share of the first) of one layer."""
    tp, b = layout.tp, layout.micro_batch
    T = s / layout.cp * b
    h, a = model.hidden_size, model.num_attention_heads
    rep = 1 / tp if layout.sequence_parallel else 1.0
    dropout = model.hidden_dropout > 0
    bias = model.add_bias_linear
    norms = 1 if model.parallel_block else 2
    total = norms * 2 * BYTES * T * h * rep                     # LayerNorm: read + write
    # (bias +) dropout + residual add, after attention and after the MLP: read x and the
    # residual, write the sum (+ the mask)
    bda = (3 * BYTES + (MASK_BYTES if dropout else 0)) * T * h * rep
    total += 2 * bda
    width = model.moe_ffn * model.moe_top_k if moe else model.ffn
    if moe and model.moe_shared_expert_intermediate_size:
        width += model.moe_shared_expert_intermediate_size
    act_in = width * (2 if model.gated else 1)
    act = BYTES * T * (act_in + width) / tp                     # activation: read in, write out
    total += act
    if model.position_embedding_type == "rope":
        qk_dim = (model.qk_head_dim + model.qk_pos_emb_head_dim) if model.multi_latent_attention \
            else model.head_dim
        total += 2 * BYTES * T * (a + model.query_groups) * qk_dim / tp
    if moe:
        total += 4 * BYTES * T * model.moe_top_k * h            # permute + unpermute tokens
    k = LAYER_KERNELS
    kernels = k["per_norm"] * norms + k["base"] + (k["moe"] if moe else 0) + \
        (k["bias"] if bias else 0)
    core = 0.0
    if not flash:
        scores = b * (a // tp) * (s / layout.cp) * s
        core = 2 * BYTES * scores                               # scale-mask-softmax r + w
        if model.attention_dropout > 0:
            core += (2 * BYTES + MASK_BYTES) * scores           # dropout r + w + mask
        kernels += k["attention_unfused"]
    factor = 1.0 if fused else UNFUSED_TRAFFIC_FACTOR
    return (total * factor, core * factor, kernels * (1 if fused else UNFUSED_KERNELS_PER_FUSED),
            act * factor)


def _recomputed_gemm_s(dev: Device, op: Op, layout: Layout, fp8: bool) -> float:
    """One GEMM's forward run again in the backward, its input cast to FP8 again under FP8."""
    m, n, k = _per_gpu_gemm(op, layout)
    return gemm_time_s(dev, m, n, k, fp8=fp8) + \
        (memory_time_s(dev, dev.fp8_cast_bytes * m * k, 1) if fp8 else 0.0)


def _selective_recompute_s(dev: Device, model: ModelConfig, layout: Layout, s: int, moe: bool,
                           fp8: bool, expert_load: float, core_attn_s: float) -> float:
    """Forward time selective recomputation runs again in the backward, module by module
    (``layout.recompute_modules``): core attention (``core_attn_s``; nothing with a fused
    flash kernel, which keeps no scores), the recomputed modules' GEMMs (cast again under
    FP8), and the element-wise passes of the norms, the dense MLP's and the experts'
    activation function."""
    mods = layout.recompute_modules
    t = core_attn_s if "core_attn" in mods else 0.0
    b = layout.micro_batch
    for op in layer_ops(model, s, b, moe):
        if op.kind == "gemm" and recomputed(op, mods):
            t += _recomputed_gemm_s(dev, op, layout, fp8)
    T = s / layout.cp * b
    rep = 1 / layout.tp if layout.sequence_parallel else 1.0
    act = 3 if model.gated else 2                     # activation: read gate (and up), write
    ew, kernels = 0.0, 0
    if "layernorm" in mods:
        norms = 1 if model.parallel_block else 2
        ew += norms * 2 * BYTES * T * model.hidden_size * rep
        kernels += norms * LAYER_KERNELS["per_norm"]
    if "mlp" in mods and not moe:
        ew += BYTES * T * model.ffn * act / layout.tp
        kernels += 1
    if "moe_act" in mods and moe:
        ew += BYTES * T * model.moe_top_k * expert_load * model.moe_ffn * act / layout.tp
        kernels += 1
    return t + (memory_time_s(dev, ew, kernels) if ew else 0.0)


def _tp_collectives(model: ModelConfig, layout: Layout, moe: bool) -> int:
    """TP collective pairs of one layer's forward: attention's and the MLP's (one for both
    with the parallel block). Folded MoE layers dispatch each rank's own sequence-parallel
    tokens, so no TP collective wraps the experts, unless a shared expert (tensor-parallel
    over tp) needs the gathered sequence."""
    if model.parallel_block:
        return 1
    folded_moe = moe and layout.folded and not model.moe_shared_expert_intermediate_size
    return 1 if folded_moe else 2


def layer_cost(dev: Device, model: ModelConfig, layout: Layout, *, seq_len: int, moe: bool,
               flash: bool, fused: bool, fp8: bool = False, expert_load: float = 1.0
               ) -> LayerCost:
    """Cost of one layer (dense or MoE) for one micro-batch on one GPU.

    ``expert_load`` scales the tokens this rank's experts compute (the busiest
    expert-parallel rank of a skewed routing, :func:`workloads.routing.routing_load`; 1 =
    balanced).

    FP8 (Transformer Engine, torchao float8): every linear layer's forward, dgrad and wgrad
    GEMM runs on FP8 operands; core attention, norms and the rest stay bf16. Each FP8 GEMM
    pays the quantisation of its activation input (forward) and of its output gradient
    (backward), the recipe's bytes per element (``Device.fp8_cast_bytes``).
    """
    s, b = seq_len, layout.micro_batch
    fwd = bwd_in = bwd_w = attn_f = attn_b = 0.0
    cast_f = cast_b = 0.0       # FP8 quantisation traffic, bytes
    casts = 0
    mlp = np.zeros(3)           # the experts' share of fwd, bwd_in, bwd_w (Megatron's mlp node)
    for op in layer_ops(model, s, b, moe):
        if op.kind == "attention":
            f, bw = _attention_times(dev, model, layout, op, s, flash)
            attn_f += f
            attn_b += bw
            continue
        m, n, k = _per_gpu_gemm(op, layout)
        if op.module == "moe" and op.name.startswith("expert_"):
            m = round(m * expert_load)                   # dispatched to this rank's experts
        parts = np.array([gemm_time_s(dev, m, n, k, fp8=fp8),
                          gemm_time_s(dev, m, k, n, fp8=fp8),      # dgrad: (m x n) @ (n x k)
                          gemm_time_s(dev, k, n, m, fp8=fp8)])     # wgrad: (k x m) @ (m x n)
        fwd, bwd_in, bwd_w = fwd + parts[0], bwd_in + parts[1], bwd_w + parts[2]
        if fp8:
            cast_f += dev.fp8_cast_bytes * m * k
            cast_b += dev.fp8_cast_bytes * m * n
            casts += 1
        if op.module == "moe" and op.name.startswith(("expert_", "shared_")):
            mlp += parts
            if fp8:         # its operands' casts (their launches stay with the layer's)
                mlp[:2] += memory_time_s(dev, dev.fp8_cast_bytes * np.array([m * k, m * n]), 0)
    ew, core, kernels, act = _elementwise_bytes(model, layout, s, flash, fused, moe)
    if moe:
        act_f = memory_time_s(dev, act, 0)
        mlp += (act_f, BACKWARD_ELEMENTWISE_FACTOR * act_f, 0.0)
    ew_f = memory_time_s(dev, ew, kernels)
    core_f = memory_time_s(dev, core, 0)
    fwd += ew_f + attn_f + core_f + (memory_time_s(dev, cast_f, casts) if fp8 else 0.0)
    bwd_in += BACKWARD_ELEMENTWISE_FACTOR * (ew_f + core_f) + attn_b + \
        (memory_time_s(dev, cast_b, casts) if fp8 else 0.0)
    if layout.recompute == "full":
        recompute = fwd
    elif layout.recompute == "selective":
        recompute = _selective_recompute_s(dev, model, layout, s, moe, fp8, expert_load,
                                           attn_f + core_f if not flash else 0.0)
    elif layout.recompute == "op":   # every second matmul (cast again under FP8) and all the
        recompute = ew_f             # element-wise work; attention's output is saved
        for op in op_sac_recomputed(model, s, b, moe):
            recompute += _recomputed_gemm_s(dev, op, layout, fp8)
    else:
        recompute = 0.0
    T = s / layout.cp * b
    h = model.hidden_size
    kv_dim = (model.kv_lora_rank + model.qk_pos_emb_head_dim) if model.multi_latent_attention \
        else 2 * model.query_groups * model.head_dim
    a_q = model.num_attention_heads
    qk_dim = (model.qk_head_dim + model.qk_pos_emb_head_dim) if model.multi_latent_attention \
        else model.head_dim
    v_dim = model.v_head_dim if model.multi_latent_attention else model.head_dim
    return LayerCost(
        fwd_s=fwd, bwd_input_s=bwd_in, bwd_weight_s=bwd_w, recompute_s=recompute,
        attn_fwd_s=attn_f + core_f,
        tp_bytes=BYTES * T * h, tp_collectives_fwd=_tp_collectives(model, layout, moe),
        ep_bytes=BYTES * model.moe_top_k * T * h / layout.tp if moe else 0.0,
        cp_bytes=BYTES * T * kv_dim / layout.tp,
        q_bytes=BYTES * T * a_q * qk_dim / layout.tp,
        o_bytes=BYTES * T * a_q * v_dim / layout.tp,
        mlp_fwd_s=float(mlp[0]), mlp_bwd_input_s=float(mlp[1]), mlp_bwd_weight_s=float(mlp[2]),
        elementwise_kernels=kernels,
    )


def logits_cost(dev: Device, model: ModelConfig, layout: Layout, seq_len: int
                ) -> tuple[float, float]:
    """(forward, backward) of the output projection and vocab-parallel cross-entropy."""
    op = logits_op(model, seq_len, layout.micro_batch, layout.tp)
    m, n, k = _per_gpu_gemm(op, layout)
    fwd = gemm_time_s(dev, m, n, k)
    bwd = gemm_time_s(dev, m, k, n) + gemm_time_s(dev, k, n, m)
    vp = padded_vocab(model.vocab_size, layout.tp) / layout.tp
    # read the logits, write fp32 softmax, write the fp32 gradient
    ce = memory_time_s(dev, (BYTES + 2 * FP32_BYTES) * m * vp, CROSS_ENTROPY_KERNELS)
    return fwd + ce, bwd + ce
